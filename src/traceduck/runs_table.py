"""The rows of the `runs` view, which each connection keeps in a table of its own.

The view file's `runs` reads the table _runs_rows of the connection, filled here from the runs'
runs.parquet files, each read once by this process and again only when it changed (a run given
labels or a new name: identity by inode, mtime and size). DuckDB opens a file of a multi-file scan
more than once per query, so a file replaced meanwhile would read as damaged; a table does not
change under a query. The other tables' files never change once published.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path

import duckdb

from .errors import StoreError
from .sqltext import literal
from .store import Store, read_open_row_file
from .viewfile import RUNS_ROWS, runs_rows_sql

LOST_FILE_RETRIES = 5  # queries retried while a run's file is replaced or removed under them (engine.py)
SNAPSHOT_KEEP_S = 3600  # a runs snapshot not read for this long (by mtime) is removed when another is written
Stamp = tuple[int, int, int]


def stamps_key(stamps: dict[str, Stamp | None]) -> str:
    """Key of a set of runs and the identity of each one's runs.parquet (see Store.run_stamps)."""
    return hashlib.blake2b(repr(sorted(stamps.items())).encode(), digest_size=12).hexdigest()


class RunsRows:
    """The connection's table of `runs` rows and the identity of the file each row came from."""

    def __init__(self, con: duckdb.DuckDBPyConnection, store: Store, snapshot_dir: Path) -> None:
        self.con = con
        self.store = store
        self.snapshot_dir = snapshot_dir  # the store's directory of copies of every run's row (see _read_snapshot)
        self.stamps: dict[str, Stamp] = {}  # run -> identity of the runs.parquet its row came from
        self._loaded = False

    def clear(self) -> None:
        """No runs."""
        self.con.execute(runs_rows_sql(replace=True))
        self.stamps = {}
        self._loaded = True

    def load(self, runs: list[str]) -> None:
        """Fill the table with these runs' rows, read again only where a runs.parquet changed since
        last time. Each file is read through one open file, whose identity is the stamp its row is
        kept with: a file replaced while it is read (a label, a rename) gives the old row or the new
        one, never a mix, and never needs a retry."""
        fresh = not self._loaded or not self.stamps or bool(set(self.stamps) - set(runs))
        changed = list(runs) if fresh else [r for r in runs if self.stamps.get(r) != self._stat(r)]
        if not changed:
            return
        snapshot = stamps = None
        if fresh:
            stamps = {r: self._stat(r) for r in runs}
            snapshot = self.snapshot_dir / f"runs-{stamps_key(stamps)}.parquet"
            if self._read_snapshot(snapshot):
                self.stamps = stamps
                self._loaded = True
                return
        rows, read = self._read_files(changed)  # a run removed meanwhile: FileNotFoundError (the engine lists again)
        self.con.execute("BEGIN")
        try:
            if fresh:
                self.con.execute(runs_rows_sql(replace=True))
            else:
                self.con.execute(f"DELETE FROM {RUNS_ROWS} WHERE list_contains(?, run_id)", [changed])
            self.con.register("__runs_read", rows)
            self.con.execute(f"INSERT INTO {RUNS_ROWS} BY NAME SELECT * FROM __runs_read")
            self.con.unregister("__runs_read")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")
        self._loaded = True
        self.stamps = {r: read.get(r, self.stamps.get(r)) for r in runs}
        if snapshot is not None and self.stamps == stamps:
            self._write_snapshot(snapshot)

    def _read_files(self, runs: list[str]):
        """The rows of these runs' runs.parquet (an Arrow table, columns as each file has them) and the
        identity of each file read, taken from the open file itself."""
        import pyarrow as pa

        known = {c.name for c in _runs_columns()}
        tables, read = [], {}
        for run in runs:
            with open(self.store.run_file(run, "runs.parquet"), "rb") as f:
                st = os.fstat(f.fileno())
                table = read_open_row_file(f)
            tables.append(table.select([c for c in table.column_names if c in known]))
            read[run] = (st.st_ino, st.st_mtime_ns, st.st_size)
        return pa.concat_tables(tables, promote_options="permissive"), read

    def _read_snapshot(self, snapshot: Path) -> bool:
        """Fill the table from the view cache's copy of every run's row as of these stamps: one file
        read instead of one per run (a store of 1,024 runs opens in one read, not 1,024)."""
        if not snapshot.is_file():
            return False
        self.con.execute("BEGIN")
        try:
            self.con.execute(runs_rows_sql(replace=True))
            self.con.execute(f"INSERT INTO {RUNS_ROWS} BY NAME SELECT * FROM read_parquet(?)", [str(snapshot)])
        except duckdb.Error:  # removed meanwhile, or damaged: read the runs' own files
            self.con.execute("ROLLBACK")
            return False
        self.con.execute("COMMIT")
        try:
            os.utime(snapshot)  # in use: kept (see _write_snapshot)
        except OSError:
            pass
        return True

    def _write_snapshot(self, snapshot: Path) -> None:
        """Publish the rows just read as the snapshot for their stamps (one rename: readers see all
        of it or none), and remove snapshots unused for SNAPSHOT_KEEP_S. Best effort: a store this
        process cannot write still reads the runs' own files."""
        try:
            self.snapshot_dir.mkdir(parents=True, exist_ok=True)
            tmp = self.store.new_tmp_dir("runs-snapshot")
            try:
                part = tmp / snapshot.name
                self.con.execute(f"COPY {RUNS_ROWS} TO {literal(str(part))} (FORMAT parquet)")
                os.replace(part, snapshot)
            finally:
                self.store.discard(tmp)
            now = time.time()
            for old in self.snapshot_dir.glob("runs-*.parquet"):
                if old != snapshot and now - old.stat().st_mtime > SNAPSHOT_KEEP_S:
                    old.unlink(missing_ok=True)
            for other in self.snapshot_dir.parent.iterdir():  # what other versions of traceduck kept
                if other != self.snapshot_dir:
                    shutil.rmtree(other, ignore_errors=True)
        except (OSError, StoreError, duckdb.Error):
            pass

    def _stat(self, run: str) -> Stamp:
        st = os.stat(self.store.run_file(run, "runs.parquet"))
        return st.st_ino, st.st_mtime_ns, st.st_size


def _runs_columns():
    from .catalog import tables

    return tables()["runs"].columns
