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
# DuckDB's pointer at a syntax error: `LINE 2: <the line, or an excerpt of it>` and a line of `^` below
_POINTER = re.compile(r"^LINE (\d+): (.*)\n( *)\^", re.M)
_EXCERPT_BEFORE, _EXCERPT_AFTER = 30, 20  # characters of the query shown around a syntax error


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


def query_error(e: Exception, query: str | None = None) -> QueryError:
    """DuckDB's error as one line; a misspelled column gets "Did you mean" when DuckDB offers no
    candidate; a syntax error says where in the query (`query`, when known) it is."""
    if isinstance(e, duckdb.ParserException):
        located = _syntax_error(str(e), query)
        if located is not None:
            return QueryError(located, "Fix the SQL there (DuckDB's dialect)")
    text = first_line(str(e))
    m = _UNKNOWN_COLUMN.search(text)
    if m and "Candidate bindings" not in text and "Did you mean" not in text:
        names = (c.name for rel in documented_relations().values() for c in rel.columns)
        hint = did_you_mean(m[1], names, quote='"')
        if hint:
            text = f"{text.rstrip('.!')}! {hint}"
    return QueryError(text, "Run `traceduck schema` to see the tables and columns")


def _syntax_error(text: str, query: str | None) -> str | None:
    """`<DuckDB's message>, at line L, column C of the query: <the query around there>`, from the
    pointer DuckDB draws under its excerpt of the query; None without one."""
    m = _POINTER.search(text)
    if m is None:
        return None
    line_no, shown = int(m[1]), m[2]
    at = len(m[3]) - len(f"LINE {m[1]}: ")  # the pointer's position in the shown text
    head = text[:m.start()].strip().splitlines()[0].rstrip(".")
    lines = query.splitlines() if query else []
    line = lines[line_no - 1] if 0 < line_no <= len(lines) else None
    cut = shown.startswith("...")
    core = shown[3:] if cut else shown
    core = core[:-3] if core.endswith("...") else core
    start = line.find(core) if line is not None and core else (-1 if cut else 0)
    if line is None or start < 0:  # the excerpt alone
        if cut:
            text = f"{shown[:at]}<<here>>{shown[at:]}".replace("...", "\u2026")
            return f"{head}, at line {line_no} of the query, here: {text}"
        line, start = core, 0
    column = start + at - (3 if cut else 0)
    lo, hi = max(0, column - _EXCERPT_BEFORE), column + _EXCERPT_AFTER
    excerpt = ("\u2026" if lo else "") + line[lo:hi].strip() + ("\u2026" if hi < len(line) else "")
    return f"{head}, at line {line_no}, column {column + 1} of the query: {excerpt}"


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
