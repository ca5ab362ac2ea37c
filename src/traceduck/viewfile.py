"""The views of sql/ defined in a DuckDB database: the store's view file, and the catalog file.

The views and macros of sql/ are built once per store (and traceduck, DuckDB and sql/ version) into
a DuckDB file under STORE/cache/<key>/, which every later connection attaches read-only (see
engine.py): opening a store costs an ATTACH, not re-creating every view from its SQL text. The
file's tables read the Parquet files of the directories named in each connection's session
variables (session.py), so each query reads the runs listed when it starts. A store this process
cannot write gets a private file, removed when its connection closes.

`define` is the one way the SQL is loaded, into the view file or into `traceduck catalog`'s file
(whose tables read every run by glob).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import duckdb

from . import reference, session
from ._version import __version__
from .catalog import Relation, reference_tables, sql_dir, summaries, tables, view_files
from .errors import StoreError
from .sqltext import literal
from .store import LAYOUT_VERSION, Store

CACHE_DIR = "cache"  # STORE/cache/<key>/: the view file and an empty Parquet file per table and summary
VIEWS_FILE = "views.duckdb"
EMPTY_DIR = "empty"
ALIAS = "traceduck"  # the view file's name in a connection's catalog
SEED = "seed"  # the view file's schema of the reference tables (see engine.py)
RUNS_ROWS = "_runs_rows"  # the connection's own table behind the view file's `runs` (see runs_table.py)
_CACHE_LAYOUT = "9"  # part of the key: change it when what the view file holds changes
# part of the summaries' key: change it when what a pack's summaries hold changes (3: summaries named
# after their view, see catalog.Summary)
_SUMMARIES_LAYOUT = "3"


def comments(rel: Relation, kind: str) -> list[str]:
    """COMMENT ON statements of a relation and its columns: its documentation in DuckDB's catalog."""
    out = [f"COMMENT ON {kind} {rel.name} IS {literal(rel.doc)}"]
    out += [f"COMMENT ON COLUMN {rel.name}.{col.name} IS {literal(col.doc)}" for col in rel.columns]
    return out


def runs_rows_sql(name: str = RUNS_ROWS, replace: bool = False) -> str:
    """CREATE TABLE of a table with the columns of the table `runs`, under another name."""
    create = "CREATE OR REPLACE TABLE" if replace else "CREATE TABLE"
    return tables()["runs"].body.strip().rstrip(";").replace("CREATE TABLE runs", f"{create} {name}", 1)


def define(con: duckdb.DuckDBPyConnection, table_sources: Callable[[str], str]) -> None:
    """Create every table's view, the reference tables (filled) and every view and macro of sql/views,
    all documented with COMMENT ON, on `con`. `table_sources(table)` is the SELECT behind each table's
    view."""
    con.execute(session.macros_sql())
    statements = []
    for rel in tables().values():
        statements.append(f"CREATE VIEW {rel.name} AS {table_sources(rel.name)}")
        statements += comments(rel, "VIEW")
    con.execute(";\n".join(statements))
    for f in view_files():
        con.execute(f.text)
        con.execute(";\n".join(s for rel in f.relations for s in comments(rel, rel.kind.upper())))
    reference.fill(con, [rel.name for rel in reference_tables()])


@lru_cache(maxsize=1)
def cache_key() -> str:
    """What the view file depends on: traceduck's and DuckDB's versions, the SQL it runs and the
    files its reference rows come from."""
    h = hashlib.sha256(f"{_CACHE_LAYOUT}\0{__version__}\0{duckdb.__version__}\0{LAYOUT_VERSION}\0".encode())
    h.update(session.macros_sql().encode() + b"\0" + (sql_dir() / "tables.sql").read_bytes() + b"\0")
    for f in view_files():
        h.update(f.path.name.encode() + b"\0" + f.text.encode() + b"\0")
    for path in reference.sources():
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


@lru_cache(maxsize=1)
def summaries_key() -> str:
    """What a pack's summaries depend on (compaction.py): the view file's key, what the summaries hold
    and the text of the reports."""
    h = hashlib.sha256(f"{cache_key()}\0{_SUMMARIES_LAYOUT}\0".encode())
    for path in sorted((sql_dir() / "reports").glob("*.sql")):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def store_view_file(store: Store) -> Path | None:
    """STORE/cache/<key>/, written on first use; None where it cannot be: a store this process
    cannot write (see private_view_file)."""
    target = store.path / CACHE_DIR / cache_key()
    if (target / VIEWS_FILE).is_file():
        return target
    try:
        return _publish(store, target)
    except (OSError, StoreError, duckdb.Error):
        return None


def private_view_file() -> Path:
    """A view file of this process's own, in a new temporary directory (the caller removes it)."""
    directory = Path(tempfile.mkdtemp(prefix="traceduck-views-"))
    try:
        _build(directory)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return directory


def _publish(store: Store, target: Path) -> Path:
    """Build the view file under tmp/ and publish it with one rename: readers never see half of one."""
    tmp = store.new_tmp_dir(CACHE_DIR)
    try:
        _build(tmp)
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


def _build(directory: Path) -> None:
    """Write DIRECTORY/views.duckdb and DIRECTORY/empty/ (an empty Parquet file per table and summary,
    which the views read when a connection reads no runs: read_parquet needs a file)."""
    empty = directory / EMPTY_DIR
    empty.mkdir()
    con = duckdb.connect(str(directory / VIEWS_FILE))
    try:
        for rel in tables().values():  # the empty files: each table's columns, no rows
            con.execute(rel.body.replace("CREATE TABLE", "CREATE TEMP TABLE", 1))
            con.execute(f"COPY temp.{rel.name} TO {literal(str(empty / f'{rel.name}.parquet'))} (FORMAT parquet)")
            con.execute(f"DROP TABLE temp.{rel.name}")
        session.point(con, sources=[], empty_dir=str(empty), summary_sources=[], summarized_runs=[],
                      all_summarized=False)
        con.execute(runs_rows_sql())

        def sources(table: str) -> str:
            if table == "runs":  # rows each connection loads itself (runs_table.py)
                return f"SELECT * FROM {RUNS_ROWS}"
            return f"SELECT * FROM read_parquet(source_files({literal(table)}), union_by_name = true)"

        define(con, sources)
        for summary in summaries():  # empty in sql/: here they read the packs chosen (see packs.py)
            con.execute(f"COPY (FROM {summary.packed}() LIMIT 0) TO "
                        f"{literal(str(empty / f'{summary.name}.parquet'))} (FORMAT parquet)")
            con.execute(f"CREATE OR REPLACE MACRO {summary.packed}() AS TABLE "
                        f"SELECT * FROM read_parquet(summary_files({literal(summary.name)}))")
        refs = reference_tables()
        con.execute(";\n".join([f"CREATE SCHEMA {SEED}"]
                                + [f"CREATE TABLE {SEED}.{rel.name} AS FROM main.{rel.name}" for rel in refs]
                                + [f"DROP TABLE main.{name}" for name in [RUNS_ROWS, *(rel.name for rel in refs)]]
                                + [f"SET schema = '{SEED}'"]
                                + [s for rel in refs for s in comments(rel, "TABLE")]))
        con.execute("CHECKPOINT")
    finally:
        con.close()
