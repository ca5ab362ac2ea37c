"""The DuckDB side: one in-process connection with a view per table over every run's Parquet files."""

from __future__ import annotations

import datetime as dt
import re
import shlex
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from . import reference
from .catalog import Relation, arrow_schemas, documented_relations, schema_stamp, tables, view_files
from .errors import QueryError, RunSelectionError, StoreError, did_you_mean, with_suggestion
from .store import LAYOUT_VERSION, Store


# A query that finds a run's file gone (a run replaced without an atomic exchange) is retried
# this many times, over a fresh list of the runs.
LOST_FILE_RETRIES = 3
LISTED = 10  # runs or labels named in an error before "and N more"
T = TypeVar("T")


@dataclass
class Stream:
    """A query's result read in batches of rows, the same Python values as `fetchall()`."""

    columns: list[str]
    nested: list[bool]  # which columns hold lists, maps or structs
    batches: Iterator[Sequence[tuple]]


class Batch(Sequence):
    """One record batch's rows, made Python values only when read: counting rows costs nothing."""

    def __init__(self, batch, fixers: list) -> None:
        self._batch = batch
        self._fixers = fixers
        self._rows: list[tuple] | None = None

    def __len__(self) -> int:
        return self._batch.num_rows

    def __getitem__(self, i):
        if isinstance(i, slice) and self._rows is None:
            start, stop, step = i.indices(len(self))
            if step == 1:  # only the rows asked for (a table's first rows)
                return _rows(self._batch.slice(start, max(0, stop - start)), self._fixers)
        return self._all()[i]

    def __iter__(self) -> Iterator[tuple]:
        return iter(self._all())

    def _all(self) -> list[tuple]:
        if self._rows is None:
            self._rows = _rows(self._batch, self._fixers)
        return self._rows


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class Database:
    """A store opened for querying. Views `runs`, `events`, `args`, `shapes`, `stacks` span all runs.

    In memory (the default) each table reads the files of the runs published when a query starts,
    listed by name and refreshed before every `sql()` when runs came or went: every table of one
    query sees the same runs, even while other processes publish. A database file (`catalog`)
    reads by glob instead, so runs ingested after it was written show up.
    """

    def __init__(self, store: Store, threads: int | None = None, run_ids: list[str] | None = None,
                 database: str = ":memory:") -> None:
        self.store = store
        self.run_ids = run_ids  # None: every run; else only these runs' files are read
        self._by_glob = run_ids is None and database != ":memory:"
        self._listed: list[str] | None = None  # the runs whose files the tables read now
        self._kinds: dict[str, str] = {}  # table -> "VIEW" (over Parquet files) or "TABLE" (empty)
        self._current: set[str] = set()  # runs whose files have every column this version reads
        self._mutex = threading.Lock()
        if not store.path.is_dir():
            raise StoreError(f"no store at {store.path}", "Run `traceduck ingest TRACE` first, or pass --store")
        self.con = duckdb.connect(database)
        if threads:
            self.con.execute(f"SET threads = {int(threads)}")
        self._create_views()

    def _create_views(self) -> None:
        self._refresh(again=True)
        for path, text, relations in view_files():
            try:
                self.con.execute(text)
            except duckdb.Error as e:
                raise StoreError(f"cannot define the views of {path.name} over {self.store.path} ({_first_line(str(e))})",
                                 "The store may come from another traceduck version: re-ingest its traces with --force") from None
            for rel in relations:
                self._comment(rel, rel.kind.upper())
        reference.fill(self.con)

    def _create_tables(self, runs: list[str]) -> None:
        self._check_columns(runs)
        for rel in tables().values():
            kind = "VIEW" if runs else "TABLE"
            if self._kinds.get(rel.name, kind) != kind:
                self.con.execute(f"DROP {self._kinds[rel.name]} {rel.name}")
            if runs:
                if self._by_glob:
                    files = _literal(self.store.table_glob(rel.name))
                else:
                    files = "[" + ", ".join(_literal(str(self.store.run_dir(r) / f"{rel.name}.parquet")) for r in runs) + "]"
                self.con.execute(
                    f"CREATE OR REPLACE VIEW {rel.name} AS SELECT * FROM read_parquet({files}, union_by_name = true)"
                )
            else:
                self.con.execute(rel.body.replace("CREATE TABLE", "CREATE OR REPLACE TABLE", 1))
            self._kinds[rel.name] = kind
            self._comment(rel, kind)
        if runs:
            self._check_layout()
        self._listed = list(runs)

    def _check_layout(self) -> None:
        """Refuse runs written in another table layout: their files read by column name, so an old
        run would give NULLs or old spellings (wrong answers) where it should give an error."""
        # (when no run has the column at all, commenting on it has already failed with a re-ingest hint)
        old = self.con.execute("SELECT name, layout_version FROM runs WHERE layout_version IS DISTINCT FROM ? "
                               "ORDER BY name", [LAYOUT_VERSION]).fetchall()
        if old:
            names = ", ".join(repr(name) for name, _ in old[:3]) + (f" and {len(old) - 3} more" if len(old) > 3 else "")
            raise StoreError(f"{len(old)} run(s) in {self.store.path} were written by another traceduck version "
                             f"(table layout {old[0][1] or 1}, this version reads layout {LAYOUT_VERSION}): {names}",
                             "Re-ingest their traces with `traceduck ingest TRACE --force`")

    def _check_columns(self, runs: list[str]) -> None:
        """Stop at runs whose files lack columns this version reads (written by another version):
        the tables read files by column name, so such a run would read NULL there and the views
        would answer wrongly without a word (cpu_ops would miss its ops)."""
        stale = []
        for run in runs:
            if run in self._current:
                continue
            if (self.store.run_dir(run) / schema_stamp()).exists():  # written with these columns
                self._current.add(run)
                continue
            try:
                missing = self._missing_columns(run)
            except OSError:
                continue  # being replaced right now: checked when listed again
            if missing:
                stale.append((run, missing))
            else:
                self._current.add(run)
        if stale:
            run, missing = stale[0]
            try:
                source = pq.read_table(self.store.run_dir(run) / "runs.parquet", columns=["source_path"])[0][0].as_py()
            except (OSError, KeyError, IndexError, pa.ArrowException):
                source = "TRACE"
            command = f"traceduck ingest {shlex.quote(source)} --store {shlex.quote(str(self.store.path))} --force"
            if len(stale) == 1:
                raise StoreError(f"run {run} in {self.store.path} comes from another traceduck version ({missing})",
                                 f"Re-ingest its trace: {command}")
            raise StoreError(f"run {run} and {len(stale) - 1} more in {self.store.path} come from another traceduck "
                             f"version ({missing})", f"Re-ingest their traces with --force, e.g. {command}")

    def _missing_columns(self, run: str) -> str:
        """What the run's files lack of this version's tables, e.g. 'events lacks is_cpu_op', or ''."""
        out = []
        for table, schema in arrow_schemas().items():
            have = set(pq.read_schema(self.store.run_dir(run) / f"{table}.parquet").names)
            lacking = [c for c in schema.names if c not in have]
            if lacking:
                out.append(f"{table} lacks {', '.join(lacking)}")
        return "; ".join(out)

    def _refresh(self, again: bool = False) -> None:
        """List the published runs anew; re-point the tables when the list changed (or `again`)."""
        if self._by_glob and not again:
            return
        with self._mutex:
            for attempt in range(LOST_FILE_RETRIES + 1):
                runs = self.store.run_ids() if self.run_ids is None else self.run_ids
                if not again and runs == self._listed:
                    return
                try:
                    self._create_tables(runs)
                    return
                except duckdb.Error as e:
                    if attempt == LOST_FILE_RETRIES or not self._lost_file(e):
                        raise StoreError(f"cannot read the tables of {self.store.path} ({_first_line(str(e))})",
                                         "The store may come from another traceduck version: "
                                         "re-ingest its traces with --force") from None
                again = True
                time.sleep(0.01 * (attempt + 1))

    def _lost_file(self, e: Exception) -> bool:
        """A run's file vanished between listing and reading (its run was being replaced)."""
        return isinstance(e, (duckdb.IOException, OSError)) and str(self.store.runs_dir) in str(e)

    def _comment(self, rel: Relation, kind: str) -> None:
        self.con.execute(f"COMMENT ON {kind} {rel.name} IS {_literal(rel.doc)}")
        for col in rel.columns:
            self.con.execute(f"COMMENT ON COLUMN {rel.name}.{col.name} IS {_literal(col.doc)}")

    def sql(self, query: str, params: list | dict | None = None) -> duckdb.DuckDBPyRelation:
        """Run SQL over the store; returns a DuckDB relation (`.df()`, `.pl()`, `.arrow()`, `.fetchall()`)."""
        return self._retrying(lambda: self.con.cursor().sql(query, params=params), refresh=True)

    def scoped(self, run_ids: list[str]) -> Database:
        """Another connection whose tables and views hold only these runs (reads only their files)."""
        return Database(self.store, run_ids=list(run_ids))

    def fetch(self, rel: duckdb.DuckDBPyRelation) -> tuple[list[str], list[tuple]]:
        """Column names and rows of a relation; query errors become QueryError."""
        return self._retrying(lambda: (list(rel.columns), rel.fetchall()), refresh=False)

    def stream(self, rel: duckdb.DuckDBPyRelation, batch_rows: int = 10_000) -> Stream:
        """A relation's rows in batches through Arrow record batches: memory stays bounded by the
        batch, whatever the result's size. Query errors, also those met mid-way, become QueryError."""
        fixers = [_python_fixer(t) for t in rel.types]

        def first():
            reader = rel.to_arrow_reader(batch_rows)
            return reader, next(reader, None)

        reader, batch = self._retrying(first, refresh=False)

        def batches() -> Iterator[Batch]:
            current = batch
            while current is not None:
                yield Batch(current, fixers)
                try:
                    current = next(reader, None)
                except (duckdb.Error, OSError) as e:  # Arrow reports DuckDB's errors mid-stream as OSError
                    raise query_error(e) from None

        return Stream(list(rel.columns), [t.id in _NESTED for t in rel.types], batches())

    def _retrying(self, run: Callable[[], T], refresh: bool) -> T:
        """run(); again (over a fresh list of runs when `refresh`) while a run's file turns out
        gone mid-replace; any other DuckDB error becomes QueryError."""
        attempt = 0
        while True:
            if refresh:
                self._refresh(again=attempt > 0)
            try:
                return run()
            except (duckdb.Error, OSError) as e:
                if attempt >= LOST_FILE_RETRIES or not self._lost_file(e):
                    raise query_error(e) from None
            attempt += 1
            time.sleep(0.01 * attempt)

    def relations(self) -> list[tuple[str, str, str]]:
        """(name, kind, documentation) of every documented table and view, in load order."""
        out = []
        for rel in documented_relations().values():
            kind = "table" if rel.name in tables() else rel.kind
            out.append((rel.name, kind, self._catalog_comment(rel.name) or ""))
        return out

    def describe(self, name: str) -> tuple[str, list[tuple[str, str, str]]]:
        """(documentation, [(column, type, documentation)]) of one table or view, from DuckDB's catalog."""
        known = documented_relations()
        if name not in known:
            raise RunSelectionError(f"no table or view named {name!r}",
                                    with_suggestion("Run `traceduck schema` to list them", name, known))
        rows = self.con.execute(
            "SELECT column_name, data_type, coalesce(comment, '') FROM duckdb_columns() "
            "WHERE table_name = ? AND schema_name = 'main' ORDER BY column_index", [name]).fetchall()
        return self._catalog_comment(name) or "", [tuple(r) for r in rows]

    def _catalog_comment(self, name: str) -> str | None:
        row = self.con.execute(
            "SELECT comment FROM duckdb_views() WHERE view_name = ? AND schema_name = 'main' "
            "UNION ALL SELECT comment FROM duckdb_tables() WHERE table_name = ? AND schema_name = 'main'",
            [name, name]).fetchall()
        return row[0][0] if row else None

    def runs(self) -> list[dict]:
        """Every run in the store, oldest ingest first."""
        rel = self.sql("SELECT * FROM runs ORDER BY ingested_at, run_id")
        cols = rel.columns
        return [dict(zip(cols, row)) for row in rel.fetchall()]

    def select_runs(self, selection: str) -> list[str]:
        """Run ids for a selection: a run id, a unique run id prefix, a run name, or
        `label:KEY=VALUE` (every run with that label; may match several)."""
        runs = self.runs()
        if selection.startswith("label:"):
            key, sep, value = selection[len("label:"):].partition("=")
            if not sep or not key:
                raise RunSelectionError(f"{selection!r} is not label:KEY=VALUE", "Select runs like label:job=run42")
            found = [r["run_id"] for r in runs if (r["labels"] or {}).get(key) == value]
            if not found:
                labels = sorted({f"{k}={v}" for r in runs for k, v in (r["labels"] or {}).items()})
                listed = ", ".join(labels[:LISTED]) or "none"
                if len(labels) > LISTED:
                    listed += f" and {len(labels) - LISTED:,} more"
                raise RunSelectionError(f"no run has label {key}={value}", f"Labels in the store: {listed}")
            return found
        exact = [r["run_id"] for r in runs if r["run_id"] == selection]
        if exact:
            return exact
        by_name = [r["run_id"] for r in runs if r["name"] == selection]
        by_prefix = [r["run_id"] for r in runs if r["run_id"].startswith(selection)]
        matches = list(dict.fromkeys(by_name or by_prefix))
        if len(matches) == 1:
            return matches
        if not matches:
            known = ", ".join(f"{r['run_id']} ({r['name']})" for r in runs[:LISTED]) or "none"
            if len(runs) > LISTED:
                known += f" and {len(runs) - LISTED:,} more (`traceduck runs` lists them)"
            raise RunSelectionError(f"no run matches {selection!r}",
                                    with_suggestion(f"Runs in the store: {known}", selection, (r["name"] for r in runs)))
        listed = ", ".join(f"{m} ({next(r['name'] for r in runs if r['run_id'] == m)})" for m in matches[:10])
        raise RunSelectionError(f"{selection!r} matches {len(matches)} runs: {listed}",
                                "Use a run id or a longer run id prefix")

    def resolve_run(self, selection: str) -> str:
        """Exactly one run id from a selection (see select_runs)."""
        found = self.select_runs(selection)
        if len(found) != 1:
            raise RunSelectionError(f"{selection!r} matches {len(found)} runs: {', '.join(found[:10])}",
                                    "Select a single run here")
        return found[0]

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_UNKNOWN_COLUMN = re.compile(r'(?:Referenced column|column named) "([^"]+)"')


def query_error(e: Exception) -> QueryError:
    """DuckDB's error as one line; a misspelled column gets "Did you mean" when DuckDB offers no candidate."""
    text = _first_line(str(e))
    m = _UNKNOWN_COLUMN.search(text)
    if m and "Candidate bindings" not in text and "Did you mean" not in text:
        names = (c.name for rel in documented_relations().values() for c in rel.columns)
        hint = did_you_mean(m[1], names, quote='"')
        if hint:
            text = f"{text.rstrip('.!')}! {hint}"
    return QueryError(text, "Run `traceduck schema` to see the tables and columns")


_NESTED = {"list", "array", "map", "struct", "union"}


def _rows(batch, fixers: list) -> list[tuple]:
    cols = []
    for array, fix in zip(batch.columns, fixers):
        values = array.to_pylist()
        if fix is not None:
            values = [None if v is None else fix(v) for v in values]
        cols.append(values)
    return list(zip(*cols))


def _python_fixer(t: duckdb.sqltypes.DuckDBPyType) -> Callable[[object], object] | None:
    """What turns Arrow's Python value of a DuckDB type into the one `fetchall()` gives (None: the same):
    HUGEINT (a DECIMAL in Arrow) an int, MAP (pairs) a dict, INTERVAL a timedelta, UUID a UUID,
    ARRAY a tuple."""
    kind = t.id
    if kind in ("hugeint", "uhugeint"):
        return int
    if kind == "uuid":
        return uuid.UUID
    if kind == "interval":
        return lambda v: dt.timedelta(days=v.months * 30 + v.days, microseconds=v.nanoseconds // 1000)
    if kind == "map":
        key, value = (_python_fixer(c) for _, c in t.children)
        return lambda v: {_fixed(key, k): _fixed(value, x) for k, x in v}
    if kind == "array":  # fixed-size: a tuple
        child = _python_fixer(t.children[0][1])
        return lambda v: tuple(_fixed(child, x) for x in v)
    if kind == "list":
        child = _python_fixer(t.children[0][1])
        return None if child is None else (lambda v: [_fixed(child, x) for x in v])
    if kind == "struct":
        fields = {name: _python_fixer(c) for name, c in t.children}
        if not any(fields.values()):
            return None
        return lambda v: {k: _fixed(fields.get(k), x) for k, x in v.items()}
    return None


def _fixed(fix, v):
    return v if fix is None or v is None else fix(v)


def _first_line(text: str) -> str:
    return " ".join(line.strip() for line in text.strip().splitlines()[:2])
