"""The engine: one DuckDB connection with the store's views bound, over every run or only some.

The connection attaches the view file (viewfile.py) read-only; the view file's tables read
the Parquet files of the directories given to each connection in session variables (session.py):
the packs that hold only runs it reads, then the other runs' own directories (packs.py). The runs
are listed again before every query, so every table of one query sees the same runs, even while
other processes publish; `runs` reads the connection's own table of run rows (runs_table.py).
The reference tables are the view file's, in its schema `seed` (last on the search path), until a
session changes one: then each becomes the connection's own copy, found first.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import duckdb

from . import packs, session
from .catalog import (Macro, documented_relations, macros, missing_columns, parse_with, reference_tables, schema_stamp,
                      tables)
from .errors import QueryError, RunSelectionError, StoreError, with_suggestion
from .results import Stream, query_error, stream
from .integrity import damaged_file_error, other_version_error
from .runs_table import LOST_FILE_RETRIES, RunsRows, stamps_key
from .sqltext import first_line, literal, quoted
from .store import LAYOUT_VERSION, Store, short_id
from .viewfile import (ALIAS, EMPTY_DIR, SEED, VIEWS_FILE, comments, private_view_file, store_cache_dir, summaries_key,
                       view_file)

T = TypeVar("T")
_READ_ONLY = f'on database "{ALIAS}" which is attached in read-only mode'
SEARCH_PATH = ",".join(["memory.main", f"{ALIAS}.main", f"{ALIAS}.{SEED}"])  # this connection's tables, then the view file's


class LostFileError(QueryError):
    """A run that a query or report was reading was removed while it ran (a report over every run
    runs again over the runs there then; over runs asked for, this error names the run: `run_id`)."""

    def __init__(self, message: str, hint: str = "", run_id: str = "") -> None:
        super().__init__(message, hint)
        self.run_id = run_id


class Engine:
    """A DuckDB connection (`con`) whose views span the store's runs, or only `run_ids`."""

    def __init__(self, store: Store, run_ids: list[str] | None = None, threads: int | None = None,
                 pack: Path | None = None) -> None:
        if not store.path.is_dir():
            raise StoreError(f"no store at {store.path}", "Run `traceduck ingest TRACE` first, or pass --store")
        for r in run_ids or []:
            store.run_dir(r)  # run ids become paths: hex only
        self.store = store
        self.run_ids = run_ids  # None: every run
        self._pack = pack  # a pack of exactly run_ids not yet published (compaction.py): read it, summaries too
        self._listed: list[str] | None = None  # the runs whose files the tables read now
        self._current: set[str] = set()  # runs whose files have every column this version reads
        self._mutex = threading.Lock()
        self._own_refs = False  # whether the reference tables are this connection's (see _own_references)
        self._runs_memo: tuple | None = None  # (the runs listed and their stamps, runs()) of the last runs()
        self._sources: tuple | None = None  # ((runs, packs state, stamps), what _point gives them)
        self._packs_state: int | None = None  # packs.state() when the tables were last pointed
        self._private: Path | None = None  # a view file of this connection's own (a store it cannot write)
        self._held = 0  # > 0: inside held_listing(), the runs as last listed are read
        self._stale = False  # a file of the last listing was found gone: list again, even when held
        self.con = duckdb.connect()
        parse_with(self.con.cursor())
        if threads:
            self.con.execute(f"SET threads = {int(threads)}")
        self._dir = self._attach(view_file())
        self._rows = RunsRows(self.con, store, store_cache_dir(store))
        self._refresh(again=True)

    def _attach(self, directory: Path | None) -> Path:
        """Attach the view file of `directory`; a private one when there is none, or it cannot be read."""
        if directory is not None:
            try:
                self.con.execute(f"ATTACH {literal(str(directory / VIEWS_FILE))} AS {ALIAS} (READ_ONLY)")
                return directory
            except duckdb.Error:  # damaged, or written by another DuckDB
                pass
        self._private = directory = private_view_file()
        self.con.execute(f"ATTACH {literal(str(directory / VIEWS_FILE))} AS {ALIAS} (READ_ONLY)")
        return directory

    @property
    def references_changed(self) -> bool:
        """Whether this connection changed a reference table: no summary or kept rows apply then."""
        return self._own_refs

    def _own_references(self) -> bool:
        """Make the reference tables this connection's own copies (the view file's are read-only) so
        that a session can change them; False when they already are."""
        if self._own_refs:
            return False
        refs = reference_tables()
        with self._mutex:
            self.con.execute(";\n".join([rel.body.strip().rstrip(";") for rel in refs]
                                         + [f"INSERT INTO {rel.name} FROM {ALIAS}.{SEED}.{rel.name}" for rel in refs]
                                         + [s for rel in refs for s in comments(rel, "TABLE")]))
            self._own_refs = True
            if self._listed is not None:
                self._point(self.con, self._listed)  # summaries no longer apply
        return True

    def _point(self, con: duckdb.DuckDBPyConnection, runs: list[str]) -> None:
        """Make a connection of this engine read the view file's views over `runs`."""
        con.execute(f"SET search_path = '{SEARCH_PATH}'")
        sources, summary_sources, summarized = self._sources_for(runs)
        if self._own_refs:  # the summaries were made with the shipped reference tables
            summary_sources, summarized = [], []
        session.point(con, sources=sources, empty_dir=str(self._dir / EMPTY_DIR), summary_sources=summary_sources,
                      summarized_runs=summarized, all_summarized=bool(runs) and len(summarized) == len(runs))

    def _sources_for(self, runs: list[str], stamps: dict[str, tuple[int, int, int]] | None = None
                     ) -> tuple[list[str], list[str], list[str]]:
        """The directories to read `runs` from: the packs that hold only runs among them, then the
        other runs' own directories; the chosen packs whose summaries are current, and their member
        runs. Chosen once per listing of the store (`stamps`: as just listed; else the rows')."""
        # a run replaced (ingest --force) has a new runs.parquet, so a new stamp: its packs go stale
        if self._pack is not None and sorted(runs) == sorted(self.run_ids or []):
            return [str(self._pack)], [str(self._pack)], sorted(runs)
        stamps = self._rows.stamps if stamps is None else stamps
        key = (tuple(runs), packs.state(self.store), {r: stamps.get(r) for r in runs})
        if self._sources is None or self._sources[0] != key:
            listed = set(stamps) if set(runs) <= set(stamps) else None
            found = None if listed is None or not self._rows.write_snapshots else \
                packs.found_file(self._rows.snapshot_dir, stamps_key(key[2]))
            chosen, left = packs.choose(self.store, runs, listed, found) if key[1] is not None else ([], runs)
            summarized = [p for p in chosen if p.summaries == summaries_key()]
            self._sources = (key, ([str(p.path) for p in chosen] + [self.store.run_file(r, "").rstrip(os.sep) for r in left],
                                   [str(p.path) for p in summarized], sorted(r for p in summarized for r in p.members)))
        return self._sources[1]

    def _bind(self, runs: list[str], stamps: dict[str, tuple[int, int, int]]) -> None:
        """Point the tables at `runs` (`stamps`: their runs.parquet as just listed): their rows
        loaded, their files checked."""
        # a run that a current pack of this version holds had this version's columns when packed
        # (compact packs no other), and its files are the very ones packed: no check to make
        self._check_columns(runs, vouched=set(self._sources_for(runs, stamps)[2]) if runs else set())
        if runs:
            self._rows.load(runs, stamps)
        else:
            self._rows.clear()
        self._packs_state = packs.state(self.store)
        self._point(self.con, runs)
        if runs:
            self._check_layout()
        self._listed = list(runs)

    def _check_layout(self) -> None:
        """Refuse runs written in another table layout: their files read by column name, so an old
        run would give NULLs or old spellings (wrong answers) where it should give an error."""
        # a run from before layouts were versioned has no layout_version (NULL): it reads as layout 1
        old = self.con.execute("SELECT name, layout_version FROM runs WHERE layout_version IS DISTINCT FROM ? "
                               "ORDER BY name", [LAYOUT_VERSION]).fetchall()
        if old:
            names = ", ".join(repr(name) for name, _ in old[:3]) + (f" and {len(old) - 3} more" if len(old) > 3 else "")
            raise StoreError(f"{len(old)} run(s) in {self.store.path} were written by another traceduck version "
                             f"(table layout {old[0][1] or 1}, this version reads layout {LAYOUT_VERSION}): {names}",
                             "Re-ingest their traces with `traceduck ingest TRACE --force`")

    def _check_columns(self, runs: list[str], vouched: set[str] = frozenset()) -> None:
        """Stop at runs whose files lack columns this version reads (written by another version):
        the tables read files by column name, so such a run would read NULL there and the views
        would answer wrongly without a word (cpu_ops would miss its ops)."""
        stale = []
        for run in runs:
            if run in self._current or run in vouched:
                continue
            if os.path.exists(self.store.run_file(run, schema_stamp())):  # written with these columns
                self._current.add(run)
                continue
            try:
                missing = missing_columns(self.con, self.store.run_dir(run))
            except OSError:
                continue  # being replaced right now: checked when listed again
            if missing:
                stale.append((run, missing))
            else:
                self._current.add(run)
        if stale:
            raise other_version_error(self.con, self.store, stale)

    @contextmanager
    def held_listing(self) -> Iterator[None]:
        """Within it, queries read the runs as last listed (one state of the store, listed once for
        several calls) unless a file of them turns out gone (see relist)."""
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1

    def _refresh(self, again: bool = False) -> None:
        """List the published runs anew; re-point the tables when the list changed (or `again`),
        and re-read the `runs` rows when a run's runs.parquet changed."""
        if self._held and not again and self._listed is not None and not self._stale:
            return
        with self._mutex:
            for attempt in range(LOST_FILE_RETRIES + 1):
                stamps = self.store.run_stamps(self.run_ids)
                self._stale = False
                runs = sorted(stamps) if self.run_ids is None else self.run_ids
                if packs.state(self.store) != self._packs_state:
                    again = True  # a pack written or removed: point the tables anew
                try:
                    if not again and runs == self._listed:
                        if runs and stamps != self._rows.stamps:
                            self._rows.load(runs, stamps)
                            self._point(self.con, runs)
                        return
                    self._bind(runs, stamps)
                    return
                except FileNotFoundError as e:  # a run removed since it was listed: list again
                    if attempt == LOST_FILE_RETRIES:
                        raise StoreError(f"cannot read {e.filename}", "Its run was removed: `traceduck runs` "
                                         "lists the runs") from None
                except duckdb.Error as e:
                    if attempt == LOST_FILE_RETRIES or not self._lost_file(e):
                        damaged = damaged_file_error(self.store, e)
                        if damaged is not None:
                            raise damaged from None
                        raise StoreError(f"cannot read the tables of {self.store.path} ({first_line(str(e))})",
                                         "The store may come from another traceduck version: "
                                         "re-ingest its traces with --force") from None
                again = True
                time.sleep(0.01 * (attempt + 1))

    def relist(self) -> None:
        self._stale = True  # a file of the runs listed turned out gone: the next query lists anew, held or not

    def _lost_file(self, e: Exception) -> bool:
        """A run's file vanished or changed between listing and reading (a run removed, or
        swapped by `ingest --force`). DuckDB reads a Parquet file of a multi-file scan more than
        once per query, so a file replaced in between reads as damaged: a Thrift or decompression
        error (the base duckdb.Error, or one naming the file). Errors in the query itself have
        their own types."""
        if isinstance(e, (duckdb.IOException, duckdb.InvalidInputException, OSError)):
            return str(self.store.runs_dir) in str(e) or str(packs.packs_dir(self.store)) in str(e)
        return type(e) is duckdb.Error

    def _gone_run(self, e: Exception) -> str | None:
        """The run whose file a failed query could not read, when that run is no longer published."""
        if not self._lost_file(e):
            return None
        m = re.search(re.escape(str(self.store.runs_dir) + os.sep) + r"([0-9a-f]+)" + re.escape(os.sep), str(e))
        return m.group(1) if m and not self.store.has_run(m.group(1)) else None

    def retrying(self, run: Callable[[], T], refresh: bool = False, query: str | None = None) -> T:
        """run(); again (over a fresh list of runs when `refresh`) while a run's file turns out
        gone mid-replace; any other DuckDB error becomes QueryError (saying where in `query` a
        syntax error is)."""
        attempt = 0
        while True:
            if refresh:
                self._refresh(again=attempt > 0)
            try:
                return run()
            except (duckdb.Error, OSError) as e:
                if _READ_ONLY in str(e) and self._own_references():  # a session changing a reference table
                    continue
                if attempt >= LOST_FILE_RETRIES or not self._lost_file(e):
                    gone = self._gone_run(e)
                    if gone is not None:
                        raise LostFileError(f"run {short_id(gone)} was removed while the query ran",
                                            "`traceduck runs` lists the runs", gone) from None
                    raise (damaged_file_error(self.store, e) or query_error(e, query)) from None
            attempt += 1
            time.sleep(0.01 * attempt)

    def cursor(self, run_ids: list[str] | None = None) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection of its own (temp tables, settings) over the runs published now, or over
        only `run_ids` (then only their files are read)."""
        self._refresh()
        return self._cursor_over(run_ids)

    def _cursor_over(self, run_ids: list[str] | None = None) -> duckdb.DuckDBPyConnection:
        """cursor() over the runs as last listed (the caller has just listed them)."""
        for r in run_ids or []:
            self.store.run_dir(r)  # run ids become paths: hex only
        cur = self.con.cursor()
        self._point(cur, list(run_ids) if run_ids is not None else self._listed or [])
        return cur

    def sql(self, query: str, params: list | dict | None = None) -> duckdb.DuckDBPyRelation:
        """A relation of the query over the store (`.fetchall()`, `.df()`, ...), on a cursor of its own."""
        return self.retrying(lambda: self._cursor_over().sql(query, params=params), refresh=True, query=query)

    def stream(self, query: str, params: list | dict | None = None, cur: duckdb.DuckDBPyConnection | None = None,
               batch_rows: int | None = None) -> Stream | None:
        """The query's rows in batches (see results.stream), on `cur` or a new cursor over every run."""
        cur = cur if cur is not None else self.cursor()
        kwargs = {} if batch_rows is None else {"batch_rows": batch_rows}
        return stream(lambda: cur.execute(query, params), lambda f: self.retrying(f, refresh=False, query=query),
                      **kwargs)

    def runs(self, columns: list[str] | None = None) -> list[dict]:
        """Every run read (all, or `run_ids`), by name (then run id): rows of the `runs` view (only
        `columns` of them: a table of thousands of runs reads faster)."""
        self._refresh()
        key = (tuple(self._listed or ()), tuple(sorted(self._rows.stamps.items())), columns and tuple(columns))
        if self._runs_memo is None or self._runs_memo[0] != key:
            query = (f"SELECT {', '.join(map(quoted, columns)) if columns else '*'} FROM runs "
                     "ORDER BY name, run_id")  # the runs just listed: no second listing

            def read() -> tuple[list[str], list[tuple]]:
                with self._mutex:  # the engine's own connection reads the runs rows it holds
                    rel = self.con.sql(query)
                    return rel.columns, rel.fetchall()
            self._runs_memo = (key, self.retrying(read, query=query))
        cols, rows = self._runs_memo[1]
        return [dict(zip(cols, row)) for row in rows]

    def relations(self) -> list[tuple[str, str, str]]:
        """(name, kind, documentation) of every documented table and view, in load order, then of every
        macro of sql/views (kind 'macro' or 'table macro')."""
        rels = [(rel.name, "table" if rel.name in tables() else rel.kind, self._catalog_comment(rel.name) or "")
                for rel in documented_relations().values()]
        comments = self._macro_comments()
        return rels + [(m.name, m.kind, comments.get(m.name, "")) for m in macros().values()]

    def describe(self, name: str) -> tuple[str, list[tuple[str, ...]]]:
        """(documentation, rows) of one table, view or macro, the documentation from DuckDB's catalog:
        a table's or view's columns as (column, type, documentation); a macro's arguments, then a table
        macro's columns, as (part, name, type, documentation) with part 'argument' or 'column'."""
        known = documented_relations()
        if name not in known:
            macro = macros().get(name.lower())
            if macro is None:
                raise RunSelectionError(f"no table, view or macro named {name!r}",
                                        with_suggestion("Run `traceduck schema` to list them", name,
                                                        [*known, *(m.name for m in macros().values())]))
            return self._macro_comments().get(macro.name, ""), _macro_rows(macro)
        where = self._found_in(name)
        rows = self.con.execute(
            "SELECT column_name, data_type, coalesce(comment, '') FROM duckdb_columns() WHERE table_name = ? "
            "AND database_name = ? AND schema_name = ? ORDER BY column_index", [name, *where]).fetchall() if where else []
        return self._catalog_comment(name) or "", [tuple(r) for r in rows]

    def _found_in(self, name: str) -> tuple[str, str] | None:
        """The (database, schema) a query finds table or view `name` in: the first on the search path."""
        found = set(self.con.execute(
            "SELECT database_name, schema_name FROM duckdb_tables() WHERE table_name = $name UNION ALL "
            "SELECT database_name, schema_name FROM duckdb_views() WHERE view_name = $name", {"name": name}).fetchall())
        return next((tuple(p.split(".")) for p in SEARCH_PATH.split(",") if tuple(p.split(".")) in found), None)

    def _catalog_comment(self, name: str) -> str | None:
        """The comment of a table or view where a query finds it (a session's own copy of a reference
        table before the view file's)."""
        where = self._found_in(name)
        if where is None:
            return None
        row = self.con.execute(
            "SELECT comment FROM duckdb_views() WHERE view_name = $name AND database_name = $db AND schema_name = $schema "
            "UNION ALL SELECT comment FROM duckdb_tables() WHERE table_name = $name AND database_name = $db "
            "AND schema_name = $schema", {"name": name, "db": where[0], "schema": where[1]}).fetchall()
        return row[0][0] if row else None

    def _macro_comments(self) -> dict[str, str]:
        """The comment of every macro, by name, where a query finds it (the first on the search path)."""
        rows = self.con.execute("SELECT database_name, schema_name, function_name, comment FROM duckdb_functions() "
                                "WHERE function_type IN ('macro', 'table_macro') AND NOT internal").fetchall()
        order = {tuple(p.split(".")): i for i, p in enumerate(SEARCH_PATH.split(","))}
        out: dict[str, tuple[int, str]] = {}
        for db, schema, name, comment in rows:
            rank = order.get((db, schema))
            if rank is not None and (name not in out or rank < out[name][0]):
                out[name] = (rank, comment or "")
        return {name: comment for name, (_rank, comment) in out.items()}

    def close(self) -> None:
        """Close the connection; remove a private view file."""
        self.con.close()
        if self._private is not None:
            shutil.rmtree(self._private, ignore_errors=True)
            self._private = None

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _macro_rows(macro: Macro) -> list[tuple[str, str, str, str]]:
    """A macro's arguments (with their defaults), then a table macro's columns, as documented in sql/views."""
    rows = [("argument", a.name, a.type, f"{a.doc} [default: {macro.defaults[a.name]}]" if a.name in macro.defaults
             else a.doc) for a in macro.args]
    return rows + [("column", c.name, c.type, c.doc) for c in macro.columns]
