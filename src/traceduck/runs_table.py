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
# and at most this many are kept, the most recently used (a loop of one-file ingests writes one per run
# added, each a copy of every run's row; a reader of one removed meanwhile reads the runs' own files)
SNAPSHOT_KEEP_COUNT = 4
Stamp = tuple[int, int, int]
# a snapshot's row of a run also holds the identity of the runs.parquet it came from (Stamp)
_STAMP_COLUMNS = ("__stamp_ino", "__stamp_mtime_ns", "__stamp_size")


def stamps_key(stamps: dict[str, Stamp | None]) -> str:
    """Key of a set of runs and the identity of each one's runs.parquet (see Store.run_stamps)."""
    global _last_key
    if _last_key is not None and _last_key[0] == stamps:  # the listing keyed just before (a command keys it twice)
        return _last_key[1]
    key = hashlib.blake2b(repr(sorted(stamps.items())).encode(), digest_size=12).hexdigest()
    _last_key = (dict(stamps), key)
    return key


_last_key: tuple[dict, str] | None = None


class RunsRows:
    """The connection's table of `runs` rows and the identity of the file each row came from."""

    def __init__(self, con: duckdb.DuckDBPyConnection, store: Store, snapshot_dir: Path,
                 write_snapshots: bool = True) -> None:
        self.con = con
        self.store = store
        self.snapshot_dir = snapshot_dir  # the store's directory of copies of every run's row (see _read_snapshot)
        self.write_snapshots = write_snapshots  # False: only read them
        self.stamps: dict[str, Stamp] = {}  # run -> identity of the runs.parquet its row came from
        self._loaded = False

    def clear(self) -> None:
        """No runs."""
        self.con.execute(runs_rows_sql(replace=True))
        self.stamps = {}
        self._loaded = True

    def load(self, runs: list[str], stamps: dict[str, Stamp] | None = None) -> None:
        """Fill the table with these runs' rows, read again only where a runs.parquet changed since
        last time (`stamps`: the identity of each one's runs.parquet when just listed, see
        Store.run_stamps; statted here when not given). Each file is read through one open file, whose identity is the stamp its row is
        kept with: a file replaced while it is read (a label, a rename) gives the old row or the new
        one, never a mix, and never needs a retry."""
        listed = stamps if stamps is not None and all(r in stamps for r in runs) else None
        stat = (lambda r: listed[r]) if listed is not None else self._stat
        fresh = not self._loaded or not self.stamps or bool(set(self.stamps) - set(runs))
        changed = list(runs) if fresh else [r for r in runs if self.stamps.get(r) != stat(r)]
        if not changed:
            return
        snapshot = stamps = None
        if fresh:
            stamps = {r: stat(r) for r in runs}
            snapshot = self.snapshot_dir / f"runs-{stamps_key(stamps)}.parquet"
            if self._read_snapshot(snapshot) is not None:
                self.stamps = stamps
                self._loaded = True
                return
            # the snapshot of another state (a run added, labelled or removed since): its rows, and
            # only the runs changed since read from their own files (a store of 4,096 runs reads one
            # new run, not 4,096)
            base = self._largest_snapshot(exclude=snapshot)
            if base is not None:
                fresh = False
                self.stamps = {r: st for r, st in base.items() if r in stamps}
                changed = [r for r in runs if base.get(r) != stamps[r]]
                gone = [r for r in base if r not in stamps]
                if gone:
                    self.con.execute(f"DELETE FROM {RUNS_ROWS} WHERE list_contains(?, run_id)", [gone])
                if not changed:
                    self._loaded = True
                    if self.write_snapshots:
                        self._write_snapshot(snapshot)
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
        if snapshot is not None and self.stamps == stamps and self.write_snapshots:
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
        return pa.concat_tables(tables, promote_options="permissive").combine_chunks(), read

    def _read_snapshot(self, snapshot: Path) -> dict[str, Stamp] | None:
        """Fill the table from the view cache's copy of every run's row as of these stamps: one file
        read instead of one per run (a store of 1,024 runs opens in one read, not 1,024). Returns
        the stamp of each run's row in it; None when there is no such snapshot (or it cannot be
        read: the runs' own files are read then)."""
        if not snapshot.is_file():
            return None
        self.con.execute("BEGIN")
        try:
            self.con.execute(runs_rows_sql(replace=True))
            self.con.execute(f"INSERT INTO {RUNS_ROWS} BY NAME SELECT * EXCLUDE ({', '.join(_STAMP_COLUMNS)}) "
                             "FROM read_parquet(?)", [str(snapshot)])
            stamps = {run: (ino, mtime, size) for run, ino, mtime, size in self.con.execute(
                f"SELECT run_id, {', '.join(_STAMP_COLUMNS)} FROM read_parquet(?)", [str(snapshot)]).fetchall()}
        except duckdb.Error:  # removed meanwhile, or damaged: read the runs' own files
            self.con.execute("ROLLBACK")
            return None
        self.con.execute("COMMIT")
        if self.write_snapshots:  # (a reader that writes nothing leaves even the times as they were)
            try:
                os.utime(snapshot)  # in use: kept (see _write_snapshot)
            except OSError:
                pass
        return stamps

    def _largest_snapshot(self, exclude: Path) -> dict[str, Stamp] | None:
        """Fill the table from the largest snapshot there is, the newest of equal size (other than
        `exclude`: a connection over some runs writes one of those runs, a command over the store
        one of every run); the stamps of its rows, or None when there is none that reads."""
        try:
            found = sorted(((st.st_size, st.st_mtime_ns, p) for p in self.snapshot_dir.glob("runs-*.parquet")
                            if p != exclude for st in [p.stat()]), reverse=True)
        except OSError:
            return None
        for _, _, path in found[:3]:  # one removed or damaged meanwhile: the next
            stamps = self._read_snapshot(path)
            if stamps is not None:
                return stamps
        return None

    def _write_snapshot(self, snapshot: Path) -> None:
        """Publish the rows just read, with their stamps, as the snapshot for those stamps (one
        rename: readers see all of it or none), and remove snapshots unused for SNAPSHOT_KEEP_S and
        all but the SNAPSHOT_KEEP_COUNT most recently used. Best effort: a store this process cannot
        write still reads the runs' own files."""
        try:
            self.snapshot_dir.mkdir(parents=True, exist_ok=True)
            tmp = self.store.new_tmp_dir("runs-snapshot")
            try:
                part = tmp / snapshot.name
                runs = sorted(self.stamps)
                self.con.execute(f"COPY (SELECT r.*, s.* EXCLUDE (run_id) FROM {RUNS_ROWS} r JOIN (SELECT unnest($runs) AS run_id, "
                                 + ", ".join(f"unnest(${c}) AS {c}" for c in _STAMP_COLUMNS)
                                 + f") s ON s.run_id = r.run_id) TO {literal(str(part))} (FORMAT parquet)",
                                 {"runs": runs, **{c: [self.stamps[r][i] for r in runs] for i, c in enumerate(_STAMP_COLUMNS)}})
                os.replace(part, snapshot)
            finally:
                self.store.discard(tmp)
            now = time.time()
            by_age = sorted(((p.stat().st_mtime, p) for p in self.snapshot_dir.glob("runs-*.parquet") if p != snapshot),
                            reverse=True)
            for i, (mtime, old) in enumerate(by_age):
                if i >= SNAPSHOT_KEEP_COUNT - 1 or now - mtime > SNAPSHOT_KEEP_S:
                    old.unlink(missing_ok=True)
            for other in self.snapshot_dir.parent.iterdir():  # what other versions of traceduck kept
                if other != self.snapshot_dir:
                    shutil.rmtree(other, ignore_errors=True)
        except (OSError, StoreError, duckdb.Error):
            pass

    def _stat(self, run: str) -> Stamp:
        st = os.stat(self.store.run_file(run, "runs.parquet"))
        return st.st_ino, st.st_mtime_ns, st.st_size


def run_names(store: Store, snapshot_dir: Path) -> list[tuple[str, str]]:
    """(name, run_id) of every published run, read as a connection reads the runs rows: from the
    snapshot of this state of the store, else from another one and the runs changed since (what
    `ingest` needs to name its runs, without opening each of thousands of runs.parquet). Writes no
    snapshot: an ingest that fails leaves the store as it was."""
    return _load_rows(store, snapshot_dir, write=False)


def write_snapshot(store: Store, snapshot_dir: Path) -> None:
    """Make the runs snapshot of the store as it is now (after an ingest: the next command reads
    one file), from another one and the runs changed since. Best effort."""
    try:
        _load_rows(store, snapshot_dir, write=True)
    except (OSError, StoreError, duckdb.Error):
        pass


def _load_rows(store: Store, snapshot_dir: Path, write: bool) -> list[tuple[str, str]]:
    for attempt in range(LOST_FILE_RETRIES + 1):
        runs = sorted(store.run_stamps())
        if not runs:
            return []
        con = duckdb.connect()
        try:
            RunsRows(con, store, snapshot_dir, write_snapshots=write).load(runs)
            return con.execute(f"SELECT name, run_id FROM {RUNS_ROWS} ORDER BY run_id").fetchall()
        except FileNotFoundError:  # a run removed meanwhile: list again
            if attempt == LOST_FILE_RETRIES:
                raise
        finally:
            con.close()
    raise AssertionError("unreachable")


def _runs_columns():
    from .catalog import tables

    return tables()["runs"].columns
