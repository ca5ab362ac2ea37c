"""The views of sql/ defined in a DuckDB database: the view file every store attaches, and the catalog file.

The views and macros of sql/ are built once per traceduck, DuckDB and sql/ version (the key) into a
DuckDB file in the user's cache directory (shared_dir: $TRACEDUCK_CACHE_DIR, else
$XDG_CACHE_HOME/traceduck, else ~/.cache/traceduck), which every later connection to any store
attaches read-only (see engine.py): opening a store costs an ATTACH, not re-creating every view
from its SQL text. Nothing in the file belongs to a store: its tables read the Parquet files of the
directories named in each connection's session variables (session.py), so each query reads the
runs listed when it starts. Where that directory cannot be written, a connection builds a private
file, removed when it closes. A store keeps only its own derived data under STORE/cache/<key>/
(runs_table.py's snapshots).

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
from .catalog import Macro, Relation, macros, reference_tables, sql_dir, summaries, tables, view_files
from .sqltext import literal
from .store import LAYOUT_VERSION, Store

CACHE_DIR = "cache"  # STORE/cache/<key>/: a store's own derived data (runs_table.py)
CACHE_ENV = "TRACEDUCK_CACHE_DIR"  # where the view files are kept [default: the user's cache directory]
VIEWS_FILE = "views.duckdb"
EMPTY_DIR = "empty"
ALIAS = "traceduck"  # the view file's name in a connection's catalog
SEED = "seed"  # the view file's schema of the reference tables (see engine.py)
RUNS_ROWS = "_runs_rows"  # the connection's own table behind the view file's `runs` (see runs_table.py)
_CACHE_LAYOUT = "11"  # part of the key: change it when what the view file or the cache holds changes (10: macros
# commented; 11: runs snapshots hold each row's stamp)
# part of the summaries' key: change it when what a pack's summaries hold changes (3: summaries named
# after their view, see catalog.Summary; 4: the rows of the reports that compare a job's ranks)
_SUMMARIES_LAYOUT = "4"


def comments(rel: Relation, kind: str) -> list[str]:
    """COMMENT ON statements of a relation and its columns: its documentation in DuckDB's catalog."""
    out = [f"COMMENT ON {kind} {rel.name} IS {literal(rel.doc)}"]
    out += [f"COMMENT ON COLUMN {rel.name}.{col.name} IS {literal(col.doc)}" for col in rel.columns]
    return out


def macro_comment(macro: Macro) -> str:
    """COMMENT ON statement of a macro: its description in DuckDB's catalog (duckdb_functions())."""
    return f"COMMENT ON MACRO {'TABLE ' if macro.is_table else ''}{macro.name} IS {literal(macro.doc)}"


def runs_rows_sql(name: str = RUNS_ROWS, replace: bool = False) -> str:
    """CREATE TABLE of a table with the columns of the table `runs`, under another name."""
    create = "CREATE OR REPLACE TABLE" if replace else "CREATE TABLE"
    return tables()["runs"].body.strip().rstrip(";").replace("CREATE TABLE runs", f"{create} {name}", 1)


def define(con: duckdb.DuckDBPyConnection, table_sources: Callable[[str], str]) -> None:
    """Create every table's view, the reference tables (filled) and every view and macro of sql/views,
    all documented with COMMENT ON (macros too), on `con`. `table_sources(table)` is the SELECT behind each table's
    view."""
    con.execute(session.macros_sql())
    statements = []
    for rel in tables().values():
        statements.append(f"CREATE VIEW {rel.name} AS {table_sources(rel.name)}")
        statements += comments(rel, "VIEW")
    con.execute(";\n".join(statements))
    for f in view_files():
        con.execute(f.text)
        con.execute(";\n".join([s for rel in f.relations for s in comments(rel, rel.kind.upper())]
                                + [macro_comment(m) for m in f.macros]))
    reference.fill(con, [rel.name for rel in reference_tables()])


@lru_cache(maxsize=1)
def cache_key() -> str:
    """What the view file depends on: traceduck's and DuckDB's versions, the SQL it runs and the
    files its reference rows come from."""
    h = hashlib.sha256(f"{_CACHE_LAYOUT}\0{__version__}\0{duckdb.__version__}\0{LAYOUT_VERSION}\0".encode())
    h.update(session.macros_sql().encode() + b"\0" + (sql_dir() / "tables.sql").read_bytes() + b"\0")
    for path in sorted((sql_dir() / "views").glob("*.sql")):  # their bytes: no parse on the path of every query
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
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


def shared_dir() -> Path:
    """The directory of the view files: $TRACEDUCK_CACHE_DIR, else $XDG_CACHE_HOME/traceduck, else
    ~/.cache/traceduck."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "traceduck"


def store_cache_dir(store: Store) -> Path:
    """STORE/cache/<key>/: the store's own derived data for this version (made when first written)."""
    return store.path / CACHE_DIR / cache_key()


def view_file() -> Path | None:
    """The directory of this version's view file (shared_dir()/<key>/), built on first use; None
    where it cannot be written (see private_view_file)."""
    target = shared_dir() / cache_key()
    if (target / VIEWS_FILE).is_file():
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{cache_key()}.", dir=target.parent))
    except OSError:
        return None
    try:
        _build(tmp)
        os.rename(tmp, target)  # one rename: readers never see half of one
    except OSError:
        if not (target / VIEWS_FILE).is_file():
            return None
    except duckdb.Error:
        return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # gone when renamed; what is left of a failed build
    return target


def private_view_file() -> Path:
    """A view file of this process's own, in a new temporary directory (the caller removes it)."""
    directory = Path(tempfile.mkdtemp(prefix="traceduck-views-"))
    try:
        _build(directory)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return directory


def _build(directory: Path) -> None:
    """Write DIRECTORY/views.duckdb and DIRECTORY/empty/ (an empty Parquet file per table and summary,
    which the views read when a connection reads no runs: read_parquet needs a file)."""
    empty = directory / EMPTY_DIR
    empty.mkdir(exist_ok=True)
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
            con.execute(macro_comment(macros()[summary.packed.lower()]))
        refs = reference_tables()
        con.execute(";\n".join([f"CREATE SCHEMA {SEED}"]
                                + [f"CREATE TABLE {SEED}.{rel.name} AS FROM main.{rel.name}" for rel in refs]
                                + [f"DROP TABLE main.{name}" for name in [RUNS_ROWS, *(rel.name for rel in refs)]]
                                + [f"SET schema = '{SEED}'"]
                                + [s for rel in refs for s in comments(rel, "TABLE")]))
        con.execute("CHECKPOINT")
    finally:
        con.close()
