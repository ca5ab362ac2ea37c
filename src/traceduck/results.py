"""Query results read in batches, and DuckDB's errors as one line: what every query path shares."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import duckdb

from .catalog import documented_relations
from .errors import QueryError, did_you_mean
from .sqltext import first_line

BATCH_ROWS = 10_000
_NESTED = {"list", "array", "map", "struct", "union"}
T = TypeVar("T")
_UNKNOWN_COLUMN = re.compile(r'(?:Referenced column|column named) "([^"]+)"')


@dataclass
class Stream:
    """A query's result read in batches of rows, the values `fetchall()` gives."""

    columns: list[str]
    nested: list[bool]  # which columns hold lists, maps or structs
    batches: Iterator[Sequence[tuple]]
    # each row is one value: the JSON text of the row's object, made by the database (see
    # render.RowShape); json output writes it as it is
    json_rows: bool = False
    # rows per run before a cap on each run's rows (render.RowShape.per_run_cap), filled as the
    # batches are read; None when uncapped
    run_rows: dict[str, int] | None = None


def query_error(e: Exception) -> QueryError:
    """DuckDB's error as one line; a misspelled column gets "Did you mean" when DuckDB offers no candidate."""
    text = first_line(str(e))
    m = _UNKNOWN_COLUMN.search(text)
    if m and "Candidate bindings" not in text and "Did you mean" not in text:
        names = (c.name for rel in documented_relations().values() for c in rel.columns)
        hint = did_you_mean(m[1], names, quote='"')
        if hint:
            text = f"{text.rstrip('.!')}! {hint}"
    return QueryError(text, "Run `traceduck schema` to see the tables and columns")


def stream(execute: Callable[[], duckdb.DuckDBPyConnection],
           retrying: Callable[[Callable[[], T]], T] | None = None, batch_rows: int = BATCH_ROWS) -> Stream | None:
    """The rows of a query in batches of `batch_rows` Python rows (`fetchmany`): memory holds one
    batch, whatever the result's size. `execute()` runs the query on a cursor and returns it;
    `retrying(f)` runs that and the first fetch (the engine's: it retries a run's file lost to a
    concurrent replace). None when the statement gives no result (`CREATE ...`). Query errors, also
    those met mid-way, become QueryError."""
    def first() -> tuple[duckdb.DuckDBPyConnection, list[tuple]]:
        result = execute()
        return result, ([] if result.description is None else result.fetchmany(batch_rows))

    try:
        result, batch = first() if retrying is None else retrying(first)
    except duckdb.Error as e:
        raise query_error(e) from None
    if result.description is None:
        return None

    def batches() -> Iterator[Sequence[tuple]]:
        current = batch
        while current:
            yield current
            try:
                current = result.fetchmany(batch_rows)
            except (duckdb.Error, OSError) as e:
                raise query_error(e) from None

    return Stream([d[0] for d in result.description], [d[1].id in _NESTED for d in result.description], batches())
