"""The DuckDB side: one in-process connection with a view per table over every run's Parquet files.

The views and macros of sql/ are built once per store (and traceduck, DuckDB and sql/ version)
into a DuckDB file under STORE/cache/, which every later connection attaches read-only: opening a
store costs an ATTACH, not re-creating every view from its SQL text. The file's tables read the
Parquet files of the runs named in session variables, so each query still reads the runs listed
when it starts. Where the file cannot be written (a read-only store), the views are created in
memory from the SQL text.
"""

from __future__ import annotations

import datetime as dt
import errno
import fnmatch
import functools
import hashlib
import os
import re
import shlex
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import duckdb

from . import packs, reference
from .catalog import Relation, documented_relations, schema_stamp, sql_dir, tables, view_files
from .errors import QueryError, RunSelectionError, StoreError, did_you_mean, with_suggestion
from .store import LAYOUT_VERSION, Store, short_id

if TYPE_CHECKING:
    from .export import ExportResult


# A query that finds a run's file gone or changed under it (a run replaced, removed, relabelled or
# renamed meanwhile) is retried this many times, over a fresh list of the runs.
LOST_FILE_RETRIES = 5
LISTED = 10  # runs or labels named in an error before "and N more"
T = TypeVar("T")


@dataclass
class Stream:
    """A query's result read in batches of rows, the same Python values as `fetchall()`."""

    columns: list[str]
    nested: list[bool]  # which columns hold lists, maps or structs
    batches: Iterator[Sequence[tuple]]
    # each row is one value: the JSON text of the row's object, made by the database
    # (reports.stream_report with json_rows); json output writes it as it is
    json_rows: bool = False
    # rows per run before a cap on each run's rows (reports.stream_report with per_run_cap), filled
    # as the batches are read; None when uncapped
    run_rows: dict[str, int] | None = None


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

    def columns(self) -> list[list]:
        """The values column by column (as the rows hold them), without making the rows."""
        return _columns(self._batch, self._fixers)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


CACHE_DIR = "cache"  # STORE/cache/<key>/: the view file and an empty Parquet file per table
VIEWS_FILE = "views.duckdb"
CACHE_ALIAS = "traceduck"  # the view file's name in DuckDB's catalog
_CACHE_LAYOUT = "8"  # part of the key: change it when what the view file holds changes
# part of the summaries' key: change it when what a pack's summaries hold changes (2: the per-run
# reports' rows as JSON text too, see reports.report_text_sql)
_SUMMARIES_LAYOUT = "2"
# Session variables the view file's tables read: the runs to cover, where runs live, and where the
# empty files are (read_parquet needs at least one file; a store without runs reads those).
_SOURCES = "traceduck_sources"  # directories holding <table>.parquet: packs, then runs
_EMPTY_DIR = "traceduck_empty_dir"
# The packs whose summaries are read (packs.SUMMARIES) and their member runs, which the views that
# read summaries leave out of their own computation.
_SUMMARY_SOURCES = "traceduck_summary_sources"
_SUMMARIZED_RUNS = "traceduck_summarized_runs"
_ALL_SUMMARIZED = "traceduck_all_summarized"  # every run read is summarized: the views compute nothing
# With the view file, `runs` is its view over this table, which each connection fills itself (see
# Database). The reference tables are the view file's, in its schema `seed` (last on the search
# path; a view of the file reads its own `main` first, so that has none), until a session changes
# one: then each becomes the connection's own copy, found first (see Database._own_references).
_RUNS_ROWS = "_runs_rows"
SNAPSHOT_KEEP_S = 3600  # a runs snapshot not read for this long (by mtime) is removed when another is written


_SEED = "seed"
_READ_ONLY = f'on database "{CACHE_ALIAS}" which is attached in read-only mode'


def _stamps_key(stamps: dict[str, tuple[int, int, int]]) -> str:
    """Key of a set of runs and the identity of each one's runs.parquet (see Store.run_stamps)."""
    return hashlib.blake2b(repr(sorted(stamps.items())).encode(), digest_size=12).hexdigest()


def _files(table: str, sources: str = _SOURCES) -> str:
    """The Parquet files of `table` in the session's source directories (the packs chosen and the
    directories of the runs read from their own files; with sources=_SUMMARY_SOURCES, the packs whose
    summaries are read), as a SQL expression; the empty file of that name when there are none."""
    return (f"CASE WHEN len(getvariable('{sources}')) = 0 THEN [getvariable('{_EMPTY_DIR}') || '/{table}.parquet'] "
            f"ELSE list_transform(getvariable('{sources}'), lambda d: d || '/{table}.parquet') END")


def summary_files(name: str) -> str:
    """The files `name`.parquet of the packs whose summaries the session reads, as a SQL expression."""
    return _files(name, _SUMMARY_SOURCES)


def _comments(rel: Relation, kind: str) -> list[str]:
    out = [f"COMMENT ON {kind} {rel.name} IS {_literal(rel.doc)}"]
    out += [f"COMMENT ON COLUMN {rel.name}.{col.name} IS {_literal(col.doc)}" for col in rel.columns]
    return out


def _runs_rows_body() -> str:
    """CREATE TABLE of the rows behind the view file's `runs`: the columns of the table `runs`."""
    return tables()["runs"].body.strip().rstrip(";").replace("CREATE TABLE runs", f"CREATE TABLE {_RUNS_ROWS}", 1)


def _reference_tables() -> list[Relation]:
    """The reference tables defined in sql/views (event categories, dtypes, call-site rules, ...)."""
    return [rel for _path, _text, relations in view_files() for rel in relations if rel.kind == "table"]


@lru_cache(maxsize=1)
def cache_key() -> str:
    """What the view file depends on: traceduck's and DuckDB's versions and the text of sql/'s tables and views."""
    from . import __version__

    h = hashlib.sha256(f"{_CACHE_LAYOUT}\0{__version__}\0{duckdb.__version__}\0{LAYOUT_VERSION}\0".encode())
    root = sql_dir()
    here = Path(__file__).resolve().parent
    # the reference rows (seed schema) come from these
    sources = [here / "reference.py", here / "dtypes.py", reference.STDLIB_FUNCTIONS,
               *sorted(reference.REFERENCE_DIR.glob("*.csv"))]
    for path in [root / "tables.sql", *sorted((root / "views").glob("*.sql")), *sources]:
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


@lru_cache(maxsize=1)
def summaries_key() -> str:
    """What a pack's summaries depend on (packs.py): the view file's key, what the summaries hold
    and the text of the reports."""
    h = hashlib.sha256(f"{cache_key()}\0{_SUMMARIES_LAYOUT}\0".encode())
    for path in sorted((sql_dir() / "reports").glob("*.sql")):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def view_cache(store: Store) -> Path | None:
    """STORE/cache/<key>/, written on first use; None where it cannot be: a directory that is not
    a store (no runs/), or a store this process cannot write."""
    if not store.runs_dir.is_dir():
        return None
    target = store.path / CACHE_DIR / cache_key()
    if (target / VIEWS_FILE).is_file():
        return target
    try:
        return _write_view_cache(store, target)
    except (OSError, StoreError, duckdb.Error):
        return None


def _write_view_cache(store: Store, target: Path) -> Path:
    """Build the view file under tmp/ and publish it with one rename: readers never see half of one."""
    tmp = store.new_tmp_dir(CACHE_DIR)
    try:
        (tmp / "empty").mkdir()
        con = duckdb.connect(str(tmp / VIEWS_FILE))
        try:
            for rel in tables().values():  # the empty files: each table's columns, no rows
                con.execute(rel.body.replace("CREATE TABLE", "CREATE TEMP TABLE", 1))
                con.execute(f"COPY temp.{rel.name} TO {_literal(str(tmp / 'empty' / f'{rel.name}.parquet'))} "
                            "(FORMAT parquet)")
                con.execute(f"DROP TABLE temp.{rel.name}")
            con.execute(f"SET VARIABLE {_SOURCES} = []::VARCHAR[]")
            con.execute(f"SET VARIABLE {_SUMMARY_SOURCES} = []::VARCHAR[]")
            con.execute(f"SET VARIABLE {_EMPTY_DIR} = ?", [str(tmp / "empty")])
            statements = []
            for rel in tables().values():
                if rel.name == "runs":
                    statements.append(_runs_rows_body())
                    statements.append(f"CREATE VIEW runs AS SELECT * FROM {_RUNS_ROWS}")
                else:
                    statements.append(f"CREATE VIEW {rel.name} AS SELECT * FROM read_parquet({_files(rel.name)}, "
                                      "union_by_name = true)")
                statements += _comments(rel, "VIEW")
            con.execute(";\n".join(statements))
            for _path, text, relations in view_files():
                con.execute(text)
                con.execute(";\n".join(s for rel in relations for s in _comments(rel, rel.kind.upper())))
            for macro in packs.SUMMARIES:  # empty in sql/: here they read the packs chosen (see packs.py)
                con.execute(f"COPY (FROM {macro}() LIMIT 0) TO {_literal(str(tmp / 'empty' / f'{macro}.parquet'))} "
                            "(FORMAT parquet)")
                con.execute(f"CREATE OR REPLACE MACRO {macro}() AS TABLE SELECT * FROM read_parquet({summary_files(macro)})")
            refs = [rel.name for rel in _reference_tables()]
            reference.fill(con, refs)
            con.execute(";\n".join([f"CREATE SCHEMA {_SEED}"] + [f"CREATE TABLE {_SEED}.{n} AS FROM main.{n}" for n in refs]
                                    + [f"DROP TABLE main.{n}" for n in [_RUNS_ROWS, *refs]]
                                    + [f"SET schema = '{_SEED}'"]
                                    + [s for rel in _reference_tables() for s in _comments(rel, "TABLE")]))
            con.execute("CHECKPOINT")
        finally:
            con.close()
        target.parent.mkdir(exist_ok=True)
        try:
            os.rename(tmp, target)
        except OSError:
            if not (target / VIEWS_FILE).is_file():
                raise
            return target  # another process published the same file first
        for old in target.parent.iterdir():  # files of other versions
            if old != target:
                shutil.rmtree(old, ignore_errors=True)
        return target
    finally:
        store.discard(tmp)


class Database:
    """A store opened for querying. Views `runs`, `events`, `args`, `shapes`, `stacks` span all runs.

    In memory (the default) each table reads the files of the runs published when a query starts,
    listed by name and refreshed before every `sql()` when runs came or went: every table of one
    query sees the same runs, even while other processes publish. With the store's view file (see
    the module docstring), the list is given to each query's connection in session variables;
    `cursor()` makes such a connection. A database file (`catalog`) reads by glob instead, so runs
    ingested after it was written show up.

    In memory, the `runs` table is a DuckDB table filled from the runs.parquet files, each read
    once by this process, and refilled when one of them changed (a run given labels or a new
    name): DuckDB opens a file of a multi-file scan more than once per query, so a file replaced
    meanwhile would read as damaged. The other tables' files never change once published.
    """

    def __init__(self, store: Store, threads: int | None = None, run_ids: list[str] | None = None,
                 database: str = ":memory:") -> None:
        self.store = store
        self.run_ids = run_ids  # None: every run; else only these runs' files are read
        self._by_glob = run_ids is None and database != ":memory:"
        self._listed: list[str] | None = None  # the runs whose files the tables read now
        self._kinds: dict[str, str] = {}  # table -> "VIEW" (over Parquet files) or "TABLE" (empty)
        self._current: set[str] = set()  # runs whose files have every column this version reads
        self._stamps: dict[str, tuple] = {}  # run -> identity of the runs.parquet its `runs` row came from
        self._mutex = threading.Lock()
        self._own_refs = False  # whether the reference tables are this connection's (see _own_references)
        self._runs_memo: tuple | None = None  # (the runs listed and their stamps, runs()) of the last runs()
        self._sources: tuple | None = None  # ((runs, packs state), directories to read them from)
        self._packs_state: int | None = None  # packs.state() when the tables were last pointed
        if not store.path.is_dir():
            raise StoreError(f"no store at {store.path}", "Run `traceduck ingest TRACE` first, or pass --store")
        if run_ids is not None:
            for r in run_ids:
                store.run_dir(r)  # run ids become paths: hex only
        self._cache = view_cache(store) if database == ":memory:" else None
        self.con = duckdb.connect(database)
        if threads:
            self.con.execute(f"SET threads = {int(threads)}")
        # where tables and views are looked up, in order: (database, schema)
        self._catalogs = [("memory" if database == ":memory:"
                           else self.con.execute("SELECT current_database()").fetchone()[0], "main")]
        if self._cache is not None:
            self._attach()
        else:
            self._create_views()

    def _attach(self) -> None:
        """Use the store's view file; the reference tables and `runs` are this connection's own."""
        try:
            self.con.execute(f"ATTACH {_literal(str(self._cache / VIEWS_FILE))} AS {CACHE_ALIAS} (READ_ONLY)")
        except duckdb.Error:  # unreadable (damaged, or written by another DuckDB): build in memory
            self._cache = None
            self._create_views()
            return
        self._catalogs += [(CACHE_ALIAS, "main"), (CACHE_ALIAS, _SEED)]
        self._refresh(again=True)

    def _own_references(self) -> bool:
        """Make the reference tables this connection's own copies (the view file's are read-only) so
        that a session can change them; False when they already are, or are not the file's."""
        if self._cache is None or self._own_refs:
            return False
        refs = _reference_tables()
        with self._mutex:
            self.con.execute(";\n".join([rel.body.strip().rstrip(";") for rel in refs]
                                         + [f"INSERT INTO {rel.name} FROM {CACHE_ALIAS}.{_SEED}.{rel.name}" for rel in refs]
                                         + [s for rel in refs for s in _comments(rel, "TABLE")]))
            self._own_refs = True
            if self._listed is not None:
                self._point(self.con, self._listed)  # summaries no longer apply
        return True

    def _point(self, con: duckdb.DuckDBPyConnection, runs: list[str]) -> None:
        """Make a connection of this Database read the view file's views over `runs`."""
        con.execute(f"SET search_path = '{','.join(f'{d}.{s}' for d, s in self._catalogs)}'")
        sources, summary_sources, summarized = self._sources_for(runs)
        if self._own_refs:  # the summaries were made with the shipped reference tables
            summary_sources, summarized = [], []
        con.execute(f"SET VARIABLE {_SOURCES} = ?::VARCHAR[]", [sources])
        con.execute(f"SET VARIABLE {_SUMMARY_SOURCES} = ?::VARCHAR[]", [summary_sources])
        con.execute(f"SET VARIABLE {_SUMMARIZED_RUNS} = ?::VARCHAR[]", [summarized])
        con.execute(f"SET VARIABLE {_ALL_SUMMARIZED} = ?", [bool(runs) and len(summarized) == len(runs)])
        con.execute(f"SET VARIABLE {_EMPTY_DIR} = ?", [str(self._cache / "empty")])

    def _sources_for(self, runs: list[str]) -> tuple[list[str], list[str], list[str]]:
        """The directories to read `runs` from: the packs that hold only runs among them, then the
        other runs' own directories (see packs.py); the chosen packs whose summaries are current,
        and their member runs. Chosen once per listing of the store."""
        # a run replaced (ingest --force) has a new runs.parquet, so a new stamp: its packs go stale
        key = (tuple(runs), packs.state(self.store), _stamps_key({r: self._stamps.get(r) for r in runs}))
        if self._sources is None or self._sources[0] != key:
            chosen, left = packs.choose(self.store, runs) if key[1] is not None else ([], runs)
            summarized = [p for p in chosen if p.summaries == summaries_key()]
            self._sources = (key, ([str(p.path) for p in chosen] + [self.store.run_file(r, "").rstrip(os.sep) for r in left],
                                   [str(p.path) for p in summarized], sorted(r for p in summarized for r in p.members)))
        return self._sources[1]

    def _create_views(self) -> None:
        for attempt in range(LOST_FILE_RETRIES + 1):
            self._refresh(again=True)
            for path, text, relations in view_files():
                try:
                    self.con.execute(text)  # binding a view reads the runs' files
                except duckdb.Error as e:
                    if attempt < LOST_FILE_RETRIES and self._lost_file(e):  # a run removed meanwhile
                        break
                    raise StoreError(f"cannot define the views of {path.name} over {self.store.path} "
                                     f"({_first_line(str(e))})", "The store may come from another traceduck version: "
                                     "re-ingest its traces with --force") from None
                for rel in relations:
                    self._comment(rel, rel.kind.upper())
            else:
                break
            time.sleep(0.01 * (attempt + 1))
        reference.fill(self.con)

    def _create_tables(self, runs: list[str]) -> None:
        self._check_columns(runs)
        if self._cache is not None:  # the view file's tables read the runs given to each connection (_point)
            if runs:
                self._load_runs(runs)
            else:
                self.con.execute(_runs_rows_body().replace("CREATE TABLE", "CREATE OR REPLACE TABLE", 1))
                self._stamps = {}
            self._kinds[_RUNS_ROWS] = "TABLE"
            self._packs_state = packs.state(self.store)
            self._point(self.con, runs)
            if runs:
                self._check_layout()
            self._listed = list(runs)
            return
        for rel in tables().values():
            loaded = runs and rel.name == "runs" and not self._by_glob  # see the class docstring
            kind = "VIEW" if runs and not loaded else "TABLE"
            if self._kinds.get(rel.name, kind) != kind:
                self.con.execute(f"DROP {self._kinds[rel.name]} {rel.name}")
            if loaded:
                self._load_runs(runs)
            elif runs:
                if self._by_glob:
                    files = _literal(self.store.table_glob(rel.name))
                else:
                    files = "[" + ", ".join(_literal(str(self.store.run_dir(r) / f"{rel.name}.parquet")) for r in runs) + "]"
                self.con.execute(
                    f"CREATE OR REPLACE VIEW {rel.name} AS SELECT * FROM read_parquet({files}, union_by_name = true)"
                )
            else:
                self.con.execute(rel.body.replace("CREATE TABLE", "CREATE OR REPLACE TABLE", 1))
                if rel.name == "runs":
                    self._stamps = {}
            self._kinds[rel.name] = kind
            self._comment(rel, kind)
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

    def _check_columns(self, runs: list[str]) -> None:
        """Stop at runs whose files lack columns this version reads (written by another version):
        the tables read files by column name, so such a run would read NULL there and the views
        would answer wrongly without a word (cpu_ops would miss its ops)."""
        stale = []
        for run in runs:
            if run in self._current:
                continue
            if os.path.exists(self.store.run_file(run, schema_stamp())):  # written with these columns
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
                source = self.con.execute("SELECT source_path FROM read_parquet(?)",
                                          [str(self.store.run_dir(run) / "runs.parquet")]).fetchone()[0]
            except (duckdb.Error, TypeError):
                source = "TRACE"
            command = f"traceduck ingest {shlex.quote(source)} --store {shlex.quote(str(self.store.path))} --force"
            if len(stale) == 1:
                raise StoreError(f"run {short_id(run)} in {self.store.path} comes from another traceduck version ({missing})",
                                 f"Re-ingest its trace: {command}")
            raise StoreError(f"run {short_id(run)} and {len(stale) - 1} more in {self.store.path} come from another traceduck "
                             f"version ({missing})", f"Re-ingest their traces with --force, e.g. {command}")

    def _missing_columns(self, run: str) -> str:
        """What the run's files lack of this version's tables, e.g. 'events lacks is_cpu_op', or ''."""
        out = []
        for table, rel in tables().items():
            path = self.store.run_dir(run) / f"{table}.parquet"
            if not path.is_file():
                raise FileNotFoundError(errno.ENOENT, "no such file", str(path))
            try:
                have = {name for (name,) in self.con.execute(
                    "SELECT name FROM parquet_schema(?)", [str(path)]).fetchall()}
            except duckdb.Error as e:
                raise OSError(f"cannot read {path}: {_first_line(str(e))}") from None
            lacking = [c.name for c in rel.columns if c.name not in have]
            if lacking:
                out.append(f"{table} lacks {', '.join(lacking)}")
        return "; ".join(out)

    def _load_runs(self, runs: list[str]) -> None:
        """Fill the table `runs` with these runs' rows, read again only where a runs.parquet changed
        since last time (by identity: inode, mtime, size). DuckDB opens a file of a multi-file scan
        more than once per query, so a file replaced meanwhile (a run relabelled or renamed) could
        read as a mix of two files: a load is kept only when no file changed while it ran."""
        table = tables()["runs"]
        name, body = ("runs", table.body) if self._cache is None else (_RUNS_ROWS, _runs_rows_body())
        columns = [c.name for c in table.columns]
        fresh = not self._stamps or self._kinds.get(name) != "TABLE" or set(self._stamps) - set(runs)
        changed = list(runs) if fresh else [r for r in runs if self._stamps.get(r) != self._stat_runs_file(r)]
        if not changed:
            return
        snapshot = None
        if fresh and self._cache is not None:
            stamps = {r: self._stat_runs_file(r) for r in runs}
            snapshot = self._cache / f"runs-{_stamps_key(stamps)}.parquet"
            if self._read_snapshot(name, body, snapshot):
                self._stamps = stamps
                return
        for attempt in range(LOST_FILE_RETRIES + 1):
            before = {r: self._stat_runs_file(r) for r in changed}
            paths = [self.store.run_file(r, "runs.parquet") for r in changed]
            self.con.execute("BEGIN")
            try:
                have = {name for (name,) in self.con.execute(
                    "SELECT column_name FROM (DESCRIBE SELECT * FROM read_parquet(?, union_by_name = true))",
                    [paths]).fetchall()}
                names = ", ".join(f'"{c}"' for c in columns if c in have)
                if fresh:
                    self.con.execute(body.replace("CREATE TABLE", "CREATE OR REPLACE TABLE", 1))
                else:
                    self.con.execute(f"DELETE FROM {name} WHERE list_contains(?, run_id)", [changed])
                self.con.execute(f"INSERT INTO {name} ({names}) SELECT {names} FROM read_parquet(?, union_by_name = true)",
                                 [paths])
                steady = before == {r: self._stat_runs_file(r) for r in changed}
            except BaseException as e:
                self.con.execute("ROLLBACK")
                if attempt == LOST_FILE_RETRIES or not isinstance(e, duckdb.Error) or not self._lost_file(e):
                    raise
            else:
                if steady:
                    self.con.execute("COMMIT")
                    break
                self.con.execute("ROLLBACK")
                if attempt == LOST_FILE_RETRIES:
                    raise StoreError(f"the runs of {self.store.path} kept changing while being read",
                                     "Try again once `traceduck label`/`rename` commands have finished")
            time.sleep(0.01 * (attempt + 1))
        if fresh and self._cache is None:
            self._comment(table, "TABLE")
        self._stamps = {r: before.get(r, self._stamps.get(r)) for r in runs}
        if snapshot is not None and self._stamps == stamps:
            self._write_snapshot(name, snapshot)

    def _read_snapshot(self, name: str, body: str, snapshot: Path) -> bool:
        """Fill `runs` from the view cache's copy of every run's row as of these stamps: one file
        read instead of one per run (a store of 1,024 runs opens in one read, not 1,024)."""
        if not snapshot.is_file():
            return False
        self.con.execute("BEGIN")
        try:
            self.con.execute(body.replace("CREATE TABLE", "CREATE OR REPLACE TABLE", 1))
            self.con.execute(f"INSERT INTO {name} BY NAME SELECT * FROM read_parquet(?)", [str(snapshot)])
        except duckdb.Error:  # removed meanwhile, or damaged: read the runs' own files
            self.con.execute("ROLLBACK")
            return False
        self.con.execute("COMMIT")
        try:
            os.utime(snapshot)  # in use: kept (see _write_snapshot)
        except OSError:
            pass
        return True

    def _write_snapshot(self, name: str, snapshot: Path) -> None:
        """Publish the rows just read as the snapshot for their stamps (one rename: readers see all
        of it or none), and remove snapshots unused for SNAPSHOT_KEEP_S. Best effort: a store this
        process cannot write still reads the runs' own files."""
        try:
            tmp = self.store.new_tmp_dir("runs-snapshot")
            try:
                part = tmp / snapshot.name
                self.con.execute(f"COPY {name} TO {_literal(str(part))} (FORMAT parquet)")
                os.replace(part, snapshot)
            finally:
                self.store.discard(tmp)
            now = time.time()
            for old in self._cache.glob("runs-*.parquet"):
                if old != snapshot and now - old.stat().st_mtime > SNAPSHOT_KEEP_S:
                    old.unlink(missing_ok=True)
        except (OSError, StoreError, duckdb.Error):
            pass

    def _stat_runs_file(self, run: str) -> tuple[int, int, int]:
        return _stamp(os.stat(self.store.run_file(run, "runs.parquet")))

    def _refresh(self, again: bool = False) -> None:
        """List the published runs anew; re-point the tables when the list changed (or `again`),
        and re-read the `runs` rows when a run's runs.parquet changed."""
        if self._by_glob and not again:
            return
        with self._mutex:
            for attempt in range(LOST_FILE_RETRIES + 1):
                stamps = self.store.run_stamps(self.run_ids)
                runs = sorted(stamps) if self.run_ids is None else self.run_ids
                if self._cache is not None and packs.state(self.store) != self._packs_state:
                    again = True  # a pack written or removed: point the tables anew
                try:
                    if not again and runs == self._listed:
                        if runs and not self._by_glob and stamps != self._stamps:
                            self._load_runs(runs)
                            if self._cache is not None:
                                self._point(self.con, runs)
                        return
                    self._create_tables(runs)
                    return
                except FileNotFoundError as e:  # a run removed since it was listed: list again
                    if attempt == LOST_FILE_RETRIES:
                        raise StoreError(f"cannot read {e.filename}", "Its run was removed: `traceduck runs` "
                                         "lists the runs") from None
                except duckdb.Error as e:
                    if attempt == LOST_FILE_RETRIES or not self._lost_file(e):
                        raise StoreError(f"cannot read the tables of {self.store.path} ({_first_line(str(e))})",
                                         "The store may come from another traceduck version: "
                                         "re-ingest its traces with --force") from None
                again = True
                time.sleep(0.01 * (attempt + 1))

    def _lost_file(self, e: Exception) -> bool:
        """A run's file vanished or changed between listing and reading (a run removed, or
        swapped by `ingest --force`). DuckDB reads a Parquet file of a multi-file scan more than
        once per query, so a file replaced in between reads as damaged: a Thrift or decompression
        error (the base duckdb.Error, or one naming the file). Errors in the query itself have
        their own types."""
        if isinstance(e, (duckdb.IOException, duckdb.InvalidInputException, OSError)):
            return str(self.store.runs_dir) in str(e) or str(packs.packs_dir(self.store)) in str(e)
        return type(e) is duckdb.Error

    def _comment(self, rel: Relation, kind: str) -> None:
        self.con.execute(";\n".join(_comments(rel, kind)))

    def cursor(self, run_ids: list[str] | None = None) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection of its own (temp tables, settings) over the runs published now, or over
        only `run_ids` (then only their files are read)."""
        if run_ids is not None and self._cache is None:
            return Database(self.store, run_ids=list(run_ids)).con.cursor()  # the cursor keeps it alive
        self._refresh()
        cur = self.con.cursor()
        if self._cache is not None:
            for r in run_ids or []:
                self.store.run_dir(r)  # run ids become paths: hex only
            self._point(cur, list(run_ids) if run_ids is not None else self._listed or [])
        return cur

    def sql(self, query: str, params: list | dict | None = None) -> duckdb.DuckDBPyRelation:
        """Run SQL (DuckDB dialect) over the store: a DuckDB relation (`.df()`, `.pl()`,
        `.to_arrow_table()`, `.fetchall()`). Parameters are bound: `sql("... WHERE name = ?", ["aten::mm"])`."""
        return self._retrying(lambda: self.cursor().sql(query, params=params), refresh=True)

    def report(self, name: str, /, runs: str | list[str] | None = None, limit: int | None = None,
               **params: object) -> duckdb.DuckDBPyRelation:
        """A canned report (`traceduck reports` lists them) over `runs` (selections as for
        `select_runs`; default: every run) as a DuckDB relation. `params` are the report's parameters
        (`group_by="call_site"`); `limit` keeps at most that many rows of each run. `run_id` and
        `run_name` columns are there when more than one run is covered."""
        from .reports import report_relation

        selected = [runs] if isinstance(runs, str) else runs
        pairs = [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in params.items()]
        return report_relation(self, name, runs=selected or None, params=pairs, limit=limit)

    def diff(self, a: str, b: str, by: str = "op", per_step: bool = False,
             threshold_pct: float = 5.0) -> duckdb.DuckDBPyRelation:
        """Compare run `a` (the baseline) with run `b` group by group (`by`: op, kernel, call_site,
        shape or copy), biggest change first, as a DuckDB relation: calls, times, `delta_ns`, `ratio`
        and `status` (added, removed, faster, slower, or same within `threshold_pct` percent of A).
        `per_step` divides by each run's number of profiler steps."""
        from .diff import diff_relation

        return diff_relation(self, a, b, by=by, per_step=per_step, threshold_pct=threshold_pct)

    def export(self, run: str, output: str | os.PathLike, format: str = "chrome",  # noqa: A002
               step: int | None = None, start: str | int | None = None, end: str | int | None = None,
               start_ns: int | None = None, end_ns: int | None = None, max_events: int | None = None,
               metric: str | None = None, redact: bool | None = None) -> ExportResult:
        """Write run `run` (an id, a unique id prefix or a name) to `output`. `format="chrome"`: a
        Chrome trace (gzip when `output` ends in .gz) of the whole run, of profiler step `step`, or
        of the events overlapping [start, end): `start`/`end` after the run's start (`"12.5ms"`,
        `"300us"`, or integer ns), or `start_ns`/`end_ns` absolute (`events.ts_ns`); each event as
        ingested; `max_events` keeps the earliest ones. `format="folded"`: folded stacks, `metric`
        `cpu_self` (the default) or `gpu`. `redact` replaces the values of top-level metadata keys
        that look like secrets (TOKEN, SECRET, PASSWORD, KEY, CREDENTIAL, AUTH) and of `env`
        mappings; by default on for a step or time range, off for the whole run (exact). Returns
        what was written (`ExportResult`)."""
        from .export import Window, export, parse_offset

        def offset(value: str | int | None, option: str) -> int | None:
            return parse_offset(value, option) if isinstance(value, str) else value

        window = Window(step=step, start_ns=start_ns, end_ns=end_ns, max_events=max_events,
                        start_offset_ns=offset(start, "--start"), end_offset_ns=offset(end, "--end"))
        return export(self, self.resolve_run(run), output, format, window, metric, redact)

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

    def stream_query(self, cur: duckdb.DuckDBPyConnection, sql: str, params: dict | list | None = None,
                     batch_rows: int = 10_000) -> Stream:
        """A query's rows on `cur` (a connection of `cursor()`) in batches of Python rows: `fetchall()`'s
        values, fetched a batch at a time (no Arrow, so nothing more to import for a small answer, as
        `stream` has). Query errors, also mid-way, become QueryError."""
        def first():
            result = cur.execute(sql, params)
            return result, result.fetchmany(batch_rows)

        result, batch = self._retrying(first, refresh=False)
        types = [d[1] for d in result.description]

        def batches() -> Iterator[Sequence[tuple]]:
            current = batch
            while current:
                yield current
                try:
                    current = result.fetchmany(batch_rows)
                except (duckdb.Error, OSError) as e:
                    raise query_error(e) from None

        return Stream([d[0] for d in result.description], [t.id in _NESTED for t in types], batches())

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
                if _READ_ONLY in str(e) and self._own_references():  # a session changing a reference table
                    continue
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
        return next((where for where in self._catalogs if where in found), None)

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

    def runs(self) -> list[dict]:
        """Every run in the store, by name (then run id)."""
        if self._cache is not None:  # `runs` is then the view file's view over rows only _load_runs writes
            self._refresh()
            key = (tuple(self._listed or ()), tuple(sorted(self._stamps.items())))
            if self._runs_memo is not None and self._runs_memo[0] == key:
                return [dict(r) for r in self._runs_memo[1]]
        rel = self.sql("SELECT * FROM runs ORDER BY name, run_id")
        cols = rel.columns
        out = [dict(zip(cols, row)) for row in rel.fetchall()]
        if self._cache is not None:
            self._runs_memo = (key, [dict(r) for r in out])
        return out

    def select_runs(self, selection: str) -> list[str]:
        """Run ids for a selection, one of: a run id, a unique run id prefix, a run name, a
        shell-style pattern on names (`worker*`, `rank[0-3]`), `label:KEY=VALUE`, `rank:N`; or
        several of these joined by commas, selecting the runs that match every one
        (`label:job=run42,rank:0`). A run whose whole name or id is the selection is that run, even
        with commas or pattern characters in its name."""
        runs = self.runs()
        whole = [r["run_id"] for r in runs if r["run_id"] == selection] or \
                [r["run_id"] for r in runs if r["name"] == selection]
        if len(whole) == 1:
            return whole
        terms = selection.split(",")
        if len(terms) > 1 and not all(terms):
            raise RunSelectionError(f"{selection!r} has an empty term",
                                    "Join terms with single commas, like label:job=run42,rank:0")
        plain = [t for t in terms if not _is_filter(t)]
        found = runs
        for term in terms:
            if _is_filter(term):
                matched = {r["run_id"] for r in _filter(runs, term)}
                found = [r for r in found if r["run_id"] in matched]
        for term in plain:
            found = _plain(runs, found, term)
        if not found:  # every term matches some run, but no run matches them all
            counts = [(t, len(_filter(runs, t)) if _is_filter(t) else
                       sum(r["run_id"].startswith(t) or r["name"] == t for r in runs)) for t in terms]
            raise RunSelectionError(f"no run matches every term of {selection!r}",
                                    "; ".join(f"{t} matches {n} run{'s' * (n != 1)}" for t, n in counts))
        return [r["run_id"] for r in found]

    def resolve_run(self, selection: str) -> str:
        """Exactly one run id from a selection (see select_runs)."""
        found = self.select_runs(selection)
        if len(found) != 1:
            raise RunSelectionError(f"{selection!r} matches {len(found)} runs: {', '.join(short_id(f) for f in found[:10])}",
                                    "Select a single run here")
        return found[0]

    def close(self) -> None:
        """Close the connection (a `with traceduck.open(...) as db:` block does it on leaving)."""
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


def _columns(batch, fixers: list) -> list[list]:
    cols = []
    for array, fix in zip(batch.columns, fixers):
        values = array.to_pylist()
        if fix is not None:
            values = [None if v is None else fix(v) for v in values]
        cols.append(values)
    return cols


def _rows(batch, fixers: list) -> list[tuple]:
    return list(zip(*_columns(batch, fixers)))


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


_PATTERN_CHARS = ("*", "?", "[")


def _is_filter(term: str) -> bool:
    """A term that may select several runs (as opposed to a run id, prefix or name)."""
    return term.startswith(("label:", "rank:")) or any(c in term for c in _PATTERN_CHARS)


def _listed(runs: list[dict]) -> str:
    shown = ", ".join(f"{short_id(r['run_id'])} ({r['name']})" for r in runs[:LISTED]) or "none"
    more = len(runs) - LISTED
    return shown + (f" and {more:,} more (`traceduck runs` lists them)" if more > 0 else "")


def _filter(runs: list[dict], term: str) -> list[dict]:
    """The runs a `label:`, `rank:` or name-pattern term selects; never empty."""
    if term.startswith("label:"):
        key, sep, value = term[len("label:"):].partition("=")
        if not sep or not key:
            raise RunSelectionError(f"{term!r} is not label:KEY=VALUE", "Select runs like label:job=run42")
        found = [r for r in runs if (r["labels"] or {}).get(key) == value]
        if not found:
            labels = sorted({f"{k}={v}" for r in runs for k, v in (r["labels"] or {}).items()})
            listed = ", ".join(labels[:LISTED]) or "none"
            if len(labels) > LISTED:
                listed += f" and {len(labels) - LISTED:,} more"
            raise RunSelectionError(f"no run has label {key}={value}", f"Labels in the store: {listed}")
        return found
    if term.startswith("rank:"):
        text = term[len("rank:"):]
        if not text.isdigit():
            raise RunSelectionError(f"{term!r} is not rank:N", "Select a rank like rank:0")
        found = [r for r in runs if r["rank"] == int(text)]
        if not found:
            ranks = sorted({r["rank"] for r in runs if r["rank"] is not None})
            raise RunSelectionError(f"no run has rank {int(text)}",
                                    f"Ranks in the store: {', '.join(map(str, ranks))}" if ranks else
                                    "No run has a rank: it comes from distributedInfo, else the file name (rank3, worker3)")
        return found
    found = [r for r in runs if fnmatch.fnmatchcase(r["name"], term)]
    if not found:
        raise RunSelectionError(f"no run name matches {term!r}", f"Runs in the store: {_listed(runs)}")
    return found


def _plain(runs: list[dict], among: list[dict], term: str) -> list[dict]:
    """The one run of `among` a run id, unique run id prefix or name selects (checked against every
    run first, so that a term matching no run at all says so)."""
    if not any(r["run_id"].startswith(term) or r["name"] == term for r in runs):
        raise RunSelectionError(f"no run matches {term!r}",
                                with_suggestion(f"Runs in the store: {_listed(runs)}", term, (r["name"] for r in runs)))
    exact = [r for r in among if r["run_id"] == term]
    if exact:
        return exact
    by_name = [r for r in among if r["name"] == term]
    matches = by_name or [r for r in among if r["run_id"].startswith(term)]
    if len(matches) > 1:
        listed = ", ".join(f"{r['run_id']} ({r['name']})" for r in matches[:LISTED])
        raise RunSelectionError(f"{term!r} matches {len(matches)} runs: {listed}",
                                "Use a run id or a longer run id prefix")
    return matches


def _stamp(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_ino, st.st_mtime_ns, st.st_size


def _first_line(text: str) -> str:
    return " ".join(line.strip() for line in text.strip().splitlines()[:2])
