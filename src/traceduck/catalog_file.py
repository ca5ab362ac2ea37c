"""`traceduck catalog`: a DuckDB database file in the store, for any DuckDB client.

The file holds only views (over the store's Parquet files, by glob, so runs ingested later show
up), the reference tables, macros and the COMMENT ON documentation; the data stays in Parquet.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import duckdb

from .engine import Engine
from .errors import StoreError
from .sqltext import literal
from .store import Store
from .viewfile import define

CATALOG_FILE = "catalog.duckdb"
# DuckDB 1.0's storage format, so every DuckDB CLI from 1.0 on opens the file: a CLI refuses files in a
# newer format than its own, and the CLI people have (`pip install duckdb-cli`) can lag the Python package.
STORAGE_VERSION = "v1.0.0"


def write_catalog(store: Store) -> Path:
    """Write STORE/catalog.duckdb (replacing it atomically) and return its path."""
    if not store.run_ids():
        raise StoreError(f"no runs in {store.path}", "Ingest a trace first: the catalog's views need Parquet files to read")
    Engine(store).close()  # refuses runs written by another traceduck version, whose columns would read as NULL
    target = store.path / CATALOG_FILE
    tmp = store.path / "tmp" / f"catalog.{uuid.uuid4().hex[:8]}.duckdb"
    try:
        tmp.parent.mkdir(exist_ok=True)
        # made by the OS first, so a refusal names the directory and its reason, not a random file name
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        os.unlink(tmp)
    except OSError as e:
        raise store.cannot_write(f"{e.strerror}: {tmp.parent}") from None
    try:
        duckdb.connect(str(tmp), config={"storage_compatibility_version": STORAGE_VERSION}).close()  # set at creation
    except duckdb.IOException as e:
        raise store.cannot_write(_first_line(e)) from None
    con = duckdb.connect(str(tmp))
    try:
        define(con, lambda table: f"SELECT * FROM read_parquet({literal(store.table_glob(table))}, union_by_name = true)")
        con.execute("CHECKPOINT")
    except duckdb.Error as e:
        con.close()
        _remove(tmp)
        raise StoreError(f"cannot write the catalog of {store.path} ({_first_line(e)})",
                         "The store may come from another traceduck version: re-ingest its traces with --force") from None
    con.close()
    try:
        os.replace(tmp, target)
    except OSError as e:
        _remove(tmp)
        raise store.cannot_write(f"{e.strerror}: {store.path}") from None
    wal = Path(str(tmp) + ".wal")
    if wal.exists():
        wal.unlink()
    return target


def _first_line(e: Exception) -> str:
    return str(e).strip().splitlines()[0].removeprefix("IO Error: ")


def _remove(path: Path) -> None:
    for p in (path, Path(str(path) + ".wal")):
        try:
            p.unlink()
        except OSError:
            pass
