"""The store: one directory of runs, each published by one atomic rename.

    STORE/runs/<run_id>/<table>.parquet   published runs
    STORE/runs/<run_id>/schema-<hash>     empty; names the tables' columns the run was written with
    STORE/tmp/<run_id>.<random>/          runs being written (never read)
    STORE/tmp/<run_id>.<random>.lock      held by the writing process for as long as it lives

Changing a run after it is published (its labels or name: a new runs.parquet renamed over the
old one; removing it: its runs.parquet moved into tmp/, the directory a moment later) and
replacing one (`ingest --force`) hold the store's lock file, STORE/lock, so that two such changes
never interleave. A run is published exactly when its directory holds runs.parquet.

A killed ingest leaves its tmp directory behind; the next ingest removes every tmp directory
whose lock nobody holds. The lock is a POSIX record lock (`fcntl.lockf`): the kernel drops it
when the process dies, and unlike `flock` a forked worker does not inherit it, so a worker
orphaned by a killed ingest cannot keep the leftovers alive. Nothing read from a trace becomes
a path: run directories are named by the hex hash of the file's bytes.
"""

from __future__ import annotations

import ctypes
import contextlib
import errno
import functools
import os
import re
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import xxhash

try:
    import fcntl
except ImportError:  # not POSIX: no liveness locks, so leftovers of killed ingests are kept
    fcntl = None

from .errors import StoreError, os_error_hint, os_error_text

STORE_ENV = "TRACEDUCK_STORE"
DEFAULT_STORE = "traceduck.store"
# Run ids are the whole 128-bit xxh3 of the file's bytes: with fewer bits a crafted file could
# share another's id, and its ingest would silently be a no-op (or, forced, replace that run).
RUN_ID_HEX = 32
# Stores written before kept 48 bits, the first 12 hex digits of the same hash: such a run is the
# same file as a new id that starts with it.
LEGACY_RUN_ID_HEX = 12
SHOWN_RUN_ID_HEX = 12  # what messages and tables show; any unique prefix selects a run
# Version of the tables' layout, stored with every run (`runs.layout_version`). Bump it when a
# stored column changes meaning or a column that views need is added: runs written before would
# otherwise read as NULLs or old spellings (Parquet files are read by column name) and give
# wrong answers instead of an error. 2: shapes.dtype in torch's spelling, shapes.dtype_raw.
LAYOUT_VERSION = 2
LOCK_SUFFIX = ".lock"
REMOVE_GRACE_S = 1.0  # how long a removed run's files stay readable for queries that listed it
OLD_SUFFIX = ".old"  # a replaced run on its way out, when it cannot be swapped out atomically
_RUN_ID = re.compile(r"[0-9a-f]{1,64}")
_RENAME_EXCHANGE = 2  # renameat2 flag (Linux): swap two paths atomically
_AT_FDCWD = -100
WRITE_HINT = ("Make the store writable for this user, or pass --store with a directory you can write; "
              "reading this store (runs, sql, report) needs no write access")

# The tmp directories this process is writing, with the descriptor holding each one's lock.
# Process-wide because POSIX locks are: opening and closing another descriptor of a lock file
# this process holds would drop the lock, so the cleanup must know which ones are its own.
_held: dict[str, int] = {}
_held_mutex = threading.Lock()
# POSIX locks belong to the process, so threads of one process take turns on this first.
_store_mutex = threading.Lock()
STORE_LOCK = "lock"


def resolve_store(store: str | os.PathLike | None) -> Path:
    """`--store`, else $TRACEDUCK_STORE, else ./traceduck.store."""
    if store is None or str(store) == "":
        store = os.environ.get(STORE_ENV) or DEFAULT_STORE
    return Path(store).expanduser().absolute()


def content_run_id(path: Path, block: int = 8 << 20) -> str:
    """Run id: a fast hash of the file's bytes, so the same bytes give the same run."""
    h = xxhash.xxh3_128()
    with open(path, "rb") as f:
        while True:
            data = f.read(block)
            if not data:
                break
            h.update(data)
    return h.hexdigest()[:RUN_ID_HEX]


def legacy_run_id(run_id: str) -> str:
    """The id an older store gave the same file."""
    return run_id[:LEGACY_RUN_ID_HEX]


def short_id(run_id: str) -> str:
    """A run id as people see it (a prefix that selects the run)."""
    return run_id[:SHOWN_RUN_ID_HEX]


WRITE_BUFFER_BYTES = 4 << 20  # Parquet files are written through a buffer: a few large writes, not one per page

# Sorted or nearly sorted integers (ids, times) compress far better delta-encoded than dictionary-encoded.
DELTA_COLUMNS = frozenset({"event_id", "ts_ns", "dur_ns", "self_dur_ns", "parent_id", "cpu_op_id", "parent_op_id",
                           "top_op_id", "external_id", "correlation", "python_id", "python_parent_id", "seq_num",
                           "int_value", "flow_id"})


def write_parquet(table, path: Path | str, **options) -> None:
    """Write an Arrow table as a Parquet file through a WRITE_BUFFER_BYTES buffer."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with pa.output_stream(str(path), buffer_size=WRITE_BUFFER_BYTES) as sink:
        pq.write_table(table, sink, **options)


@contextlib.contextmanager
def parquet_writer(path: Path | str, schema):
    """A Parquet writer for a large table written in parts (zstd, delta-encoded id and time
    columns), through a WRITE_BUFFER_BYTES buffer; the file is complete when the block ends."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    delta = [f.name for f in schema if f.name in DELTA_COLUMNS]
    with pa.output_stream(str(path), buffer_size=WRITE_BUFFER_BYTES) as sink:
        with pq.ParquetWriter(sink, schema, compression="zstd", compression_level=3,
                              use_dictionary=[f.name for f in schema if f.name not in DELTA_COLUMNS],
                              column_encoding={c: "DELTA_BINARY_PACKED" for c in delta}) as writer:
            yield writer


def read_row_file(path: Path | str, columns: list[str] | None = None):
    """A run's runs.parquet as an Arrow table, read through one open file: `label` and `rename`
    rename a new one over it at any moment, and `pq.read_table(path)` opens the path more than once
    (the footer of one file with the pages of the other fail as a damaged file)."""
    with open(path, "rb") as f:
        return read_open_row_file(f, columns)


def read_open_row_file(f, columns: list[str] | None = None):
    """An open runs.parquet as an Arrow table, read on this thread: a Python file read by Arrow's
    thread pool leaves a thread that aborts the process at exit ("terminate called without an
    active exception", most exits with pyarrow 26), and a one-row file gains nothing from threads."""
    import pyarrow.parquet as pq

    return pq.read_table(f, columns=columns, use_threads=False)


# a runs.parquet's path -> (its identity when read, its row): Store.run_rows reads a file again
# only when it changed
_RUN_ROW_CACHE: dict[str, tuple[tuple[int, int, int], dict]] = {}

CHECKSUMS = "checksums.json"  # beside a run's or a pack's files: what `traceduck check` verifies
MUTABLE_FILES = frozenset({"runs.parquet", CHECKSUMS})  # rewritten in place (label, rename): read, not summed


def file_digest(path: Path | str, block: int = 8 << 20) -> str:
    """xxh3-128 of a file's bytes, hex."""
    h = xxhash.xxh3_128()
    with open(path, "rb") as f:
        while chunk := f.read(block):
            h.update(chunk)
    return h.hexdigest()


def write_checksums(directory: Path, skip: frozenset[str] = MUTABLE_FILES) -> None:
    """Write DIRECTORY/checksums.json: size and xxh3-128 of each file in it (but `skip`), before the
    directory is published, so that `traceduck check` can tell a damaged file from a sound one."""
    import json

    files = {}
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        if entry.is_file() and entry.name not in skip:
            files[entry.name] = {"bytes": entry.stat().st_size, "xxh3_128": file_digest(entry.path)}
    (directory / CHECKSUMS).write_text(json.dumps({"files": files}, indent=1))


def verify_checksums(directory: Path) -> list[tuple[str, str]] | None:
    """(file, what is wrong) for each file of DIRECTORY that differs from its checksums.json; None
    when the directory has none (published by a traceduck before checksums)."""
    import json

    try:
        listed = json.loads((directory / CHECKSUMS).read_text())["files"]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as e:
        return [(CHECKSUMS, f"unreadable ({e})")]
    problems = []
    for name, want in sorted(listed.items()):
        path = directory / name
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            problems.append((name, "missing"))
            continue
        if size != want["bytes"]:
            problems.append((name, f"{size} bytes where {want['bytes']} were written"))
        elif file_digest(path) != want["xxh3_128"]:
            problems.append((name, "its bytes changed since it was written (checksum differs)"))
    return problems


class Store:
    """A store directory."""

    def __init__(self, path: str | os.PathLike | None = None, create: bool = False) -> None:
        self.path = resolve_store(path)
        if self.path.exists() and not self.path.is_dir():
            raise StoreError(f"store {self.path} is not a directory", "Pass --store with a directory")
        if create:
            try:
                (self.path / "runs").mkdir(parents=True, exist_ok=True)
                (self.path / "tmp").mkdir(exist_ok=True)
            except OSError as e:
                if self.path.is_dir():  # it exists: this user may not write it, or the file system failed
                    raise self.write_error(e) from None
                raise StoreError(f"cannot create store {self.path} ({e.strerror})") from None
            self.remove_leftovers()

    @property
    def runs_dir(self) -> Path:
        return self.path / "runs"

    @property
    def tmp_dir(self) -> Path:
        return self.path / "tmp"

    def run_dir(self, run_id: str) -> Path:
        if not _RUN_ID.fullmatch(run_id):  # run ids are hex hashes; anything else never names a path
            raise StoreError(f"{run_id!r} is not a run id", "Run ids are hex digits; `traceduck runs` lists them")
        return self.runs_dir / run_id

    def run_file(self, run_id: str, name: str) -> str:
        """Path of a file of a run, as text: the form hot loops over 1,024 runs can afford (pathlib
        costs more than the stat)."""
        if not _RUN_ID.fullmatch(run_id):
            self.run_dir(run_id)  # raises
        return f"{self._runs_text}{os.sep}{run_id}{os.sep}{name}"

    @functools.cached_property
    def _runs_text(self) -> str:
        return str(self.runs_dir)

    def has_run(self, run_id: str) -> bool:
        return os.path.isfile(self.run_file(run_id, "runs.parquet"))

    def run_ids(self) -> list[str]:
        if not self.runs_dir.is_dir():
            return []
        return sorted(p.name for p in self.runs_dir.iterdir()
                      if _RUN_ID.fullmatch(p.name) and (p / "runs.parquet").is_file())

    def run_stamps(self, run_ids: list[str] | None = None) -> dict[str, tuple[int, int, int]]:
        """Identity (inode, mtime, size) of the runs.parquet of every published run (or of these
        runs, those still there): it changes when the run's row is rewritten."""
        if run_ids is None:
            if not self.runs_dir.is_dir():
                return {}
            run_ids = [e.name for e in os.scandir(self.runs_dir) if _RUN_ID.fullmatch(e.name)]
        out = {}
        for run_id in run_ids:
            try:
                st = os.stat(self.run_file(run_id, "runs.parquet"))
            except FileNotFoundError:
                continue
            out[run_id] = (st.st_ino, st.st_mtime_ns, st.st_size)
        return out

    def table_glob(self, table: str) -> str:
        return str(self.runs_dir / "*" / f"{table}.parquet")

    def cannot_write(self, e: OSError | str) -> StoreError:
        """The error for a store this process may read but not write (permissions, a read-only
        file system); `e` says why, and where."""
        if isinstance(e, OSError):
            e = f"{e.strerror}: {e.filename}" if e.filename else (e.strerror or str(e))
        return StoreError(f"cannot write to the store {self.path} ({e})", WRITE_HINT)

    def write_error(self, e: OSError) -> StoreError:
        """The error for a write to the store that failed: not allowed (see cannot_write), or the
        file system failed it (no space, an I/O error)."""
        if _is_write_denied(e):
            return self.cannot_write(e)
        return StoreError(f"cannot write to the store {self.path} ({os_error_text(e)})", os_error_hint(e))

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Turn a failed write (an OSError) into the store's error, one line with what to do."""
        try:
            yield
        except OSError as e:
            raise self.write_error(e) from None

    def new_tmp_dir(self, run_id: str) -> Path:
        """A fresh tmp directory for writing a run, locked for this process's lifetime;
        `publish` or `discard` gives it up."""
        try:
            return self._new_tmp_dir(run_id)
        except OSError as e:
            if _is_write_denied(e):
                raise self.cannot_write(f"{e.strerror}: {self.tmp_dir}") from None
            raise self.write_error(e) from None

    def _new_tmp_dir(self, run_id: str) -> Path:
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        with _held_mutex:
            for _attempt in range(100):
                d = self.tmp_dir / f"{run_id}.{uuid.uuid4().hex[:8]}"
                fd = _lock_new(_lock_path(d))
                if fd is None:  # a cleanup took the new lock file away before it was locked: another name
                    continue
                try:
                    d.mkdir()
                except BaseException:
                    _unlock(_lock_path(d), fd)
                    raise
                _held[str(d)] = fd
                return d
        raise StoreError(f"cannot lock a new directory in {self.tmp_dir}", "Check that nothing else removes its files")

    def publish(self, tmp: Path, run_id: str, replace: bool) -> bool:
        """Move a fully written run into place. False when the run exists and replace is off.

        A replaced run is swapped out in one atomic exchange where the system has one (Linux), so
        readers see the old run or the new one at every moment, never neither; the tmp directory
        (then holding the old run) is removed and its lock released in every case.
        """
        target = self.run_dir(run_id)
        try:
            with self.writing():
                write_checksums(tmp)
            try:
                os.rename(tmp, target)
                return True
            except OSError as e:
                if not target.is_dir():
                    raise self.cannot_write(f"{e.strerror}: {self.runs_dir}") if _is_write_denied(e) \
                        else self.write_error(e) from None
            if not replace and self.has_run(run_id):  # another process published the same content first
                return False
            try:
                with self.locked():  # replace the run, or what is left of a removed one
                    _replace(tmp, target)
            except OSError as e:
                raise self.cannot_write(f"{e.strerror}: {self.runs_dir}") if _is_write_denied(e) \
                    else self.write_error(e) from None
            return True
        finally:
            self.discard(tmp)

    def discard(self, tmp: Path) -> None:
        """Remove a tmp directory (or a part of one); a whole one's lock is released too."""
        shutil.rmtree(tmp, ignore_errors=True)
        with _held_mutex:
            fd = _held.pop(str(tmp), None)
        if fd is not None:
            shutil.rmtree(str(tmp) + OLD_SUFFIX, ignore_errors=True)
            _unlock(_lock_path(tmp), fd)

    def remove_leftovers(self) -> int:
        """Remove what killed ingests left under tmp/: directories whose lock no live process
        holds. Returns how many were removed."""
        if fcntl is None:
            return 0
        try:
            entries = list(os.scandir(self.tmp_dir))
        except OSError:
            return 0
        removed = 0
        with _held_mutex:
            # by file identity: the same store may be reached by another spelling of its path
            ours = {_identity(os.fstat(fd)) for fd in _held.values()}
            for entry in entries:
                try:
                    if entry.name.endswith(LOCK_SUFFIX):
                        base = self.tmp_dir / entry.name[: -len(LOCK_SUFFIX)]
                        if _identity(entry.stat()) not in ours and _remove_if_dead(base, Path(entry.path)):
                            removed += 1
                    elif entry.is_dir(follow_symlinks=False):
                        # A tmp directory is made after its lock file, and the lock file is removed
                        # only after the directory: one without a lock file has no live writer.
                        owner = entry.name[: -len(OLD_SUFFIX)] if entry.name.endswith(OLD_SUFFIX) else entry.name
                        if not (self.tmp_dir / (owner + LOCK_SUFFIX)).exists() and os.path.isdir(entry.path):
                            shutil.rmtree(entry.path, ignore_errors=True)
                            removed += 1
                except OSError:  # a leftover that cannot be removed now is tried again next time
                    continue
        return removed + self._remove_unpublished()

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the store's lock: changes to published runs (labels, names, removal, replacing)
        take turns. A process that dies lets go of it."""
        with _store_mutex:
            fd = os.open(self.path / STORE_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                if fcntl is not None:
                    fcntl.lockf(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # closing releases the lock

    def run_row(self, run_id: str) -> dict:
        """A run's row of the runs table, read from its runs.parquet."""
        try:
            return read_row_file(self.run_dir(run_id) / "runs.parquet").to_pylist()[0]
        except FileNotFoundError:
            raise StoreError(f"no run {run_id} in {self.path}", "`traceduck runs` lists the runs") from None

    def run_rows(self, columns: list[str]) -> list[dict]:
        """These columns of every published run's row, read from the Parquet files (no DuckDB);
        a run removed meanwhile is left out. Each file is read once by this process and again only
        when it changed (identity by inode, mtime and size, as runs_table.py). For the commands that
        select runs without opening DuckDB (label, rename, rm, compact's selection); ingest and
        queries read the runs snapshot instead (runs_table.run_names, RunsRows)."""
        rows = []
        for run_id in self.run_ids():
            path = self.run_dir(run_id) / "runs.parquet"
            try:
                st = os.stat(path)
                stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
                kept = _RUN_ROW_CACHE.get(str(path))
                if kept is None or kept[0] != stamp:
                    with open(path, "rb") as f:
                        st = os.fstat(f.fileno())
                        kept = ((st.st_ino, st.st_mtime_ns, st.st_size), read_open_row_file(f).to_pylist()[0])
                    _RUN_ROW_CACHE[str(path)] = kept
            except FileNotFoundError:
                continue
            rows.append({c: kept[1].get(c) for c in columns})
        return rows

    def update_run(self, run_id: str, change: Callable[[dict], dict]) -> dict:
        """Give a published run a new runs row, `change(old row)`, and return it. The new
        runs.parquet is written under tmp/ and renamed over the old one: a reader sees the old
        row or the new one, and the run's other tables never change."""
        import pyarrow as pa

        with self.writing(), self.locked():
            path = self.run_dir(run_id) / "runs.parquet"
            try:
                old = read_row_file(path)
            except FileNotFoundError:
                raise StoreError(f"no run {run_id} in {self.path}", "`traceduck runs` lists the runs") from None
            row = change(old.to_pylist()[0])
            tmp = self.new_tmp_dir(run_id)
            try:
                write_parquet(pa.Table.from_pylist([row], schema=old.schema), tmp / "runs.parquet")
                os.replace(tmp / "runs.parquet", path)
            finally:
                self.discard(tmp)
        return row

    def remove_runs(self, run_ids: list[str]) -> None:
        """Remove runs: each is unpublished at once (its runs.parquet moved into tmp/, so no new
        query lists it), and its directory is deleted REMOVE_GRACE_S later, so that a query that
        listed it just before can still read its files. A run directory without runs.parquet
        that no live removal holds (one killed in between) goes at the next cleanup."""
        pending: list[tuple[str, Path]] = []
        try:
            with self.writing(), self.locked():
                for run_id in run_ids:
                    if not self.has_run(run_id):
                        raise StoreError(f"no run {run_id} in {self.path}", "`traceduck runs` lists the runs")
                for run_id in run_ids:
                    pending.append((run_id, self.new_tmp_dir(run_id)))
                    os.rename(self.run_dir(run_id) / "runs.parquet", pending[-1][1] / "runs.parquet")
            time.sleep(REMOVE_GRACE_S)
            with self.writing(), self.locked():
                for run_id, tmp in pending:
                    self._take_unpublished(run_id, tmp)
        finally:
            for _, tmp in pending:
                self.discard(tmp)

    def _take_unpublished(self, run_id: str, tmp: Path) -> bool:
        """Move a run directory that has no runs.parquet (a removed run) into tmp; holding the lock."""
        target = self.run_dir(run_id)
        if not target.is_dir() or (target / "runs.parquet").exists():  # gone, or published again meanwhile
            return False
        os.rename(target, tmp / "run")
        return True

    def _remove_unpublished(self) -> int:
        """Delete run directories without runs.parquet whose removal was killed before it ended."""
        try:
            names = [p.name for p in self.runs_dir.iterdir() if _RUN_ID.fullmatch(p.name)]
            pending = {e.name.split(".", 1)[0] for e in os.scandir(self.tmp_dir)}
        except OSError:
            return 0
        removed = 0
        for run_id in names:
            if run_id in pending or self.has_run(run_id):  # a live removal or ingest of it, or a run
                continue
            try:
                with self.locked():
                    tmp = self.new_tmp_dir(run_id)
                    try:
                        removed += self._take_unpublished(run_id, tmp)
                    finally:
                        self.discard(tmp)
            except (OSError, StoreError):  # tried again by the next cleanup
                continue
        return removed

    def size_bytes(self) -> int:
        total = 0
        for root, _dirs, files in os.walk(self.runs_dir):
            for f in files:
                try:
                    total += os.path.getsize(os.path.join(root, f))
                except OSError:
                    pass
        return total


def _is_write_denied(e: OSError) -> bool:
    return e.errno in (errno.EACCES, errno.EPERM, errno.EROFS)


def _lock_path(tmp: Path) -> Path:
    return Path(str(tmp) + LOCK_SUFFIX)


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def _lock_new(path: Path) -> int | None:
    """Create and lock a new lock file; None when a cleanup removed it before it was locked."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    if fcntl is None:
        return fd
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno not in (errno.EAGAIN, errno.EACCES):  # no locks on this file system: never cleaned up
            return fd
        os.close(fd)  # a cleanup holds it and removes it
        return None
    try:
        ours = os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        ours = False
    if not ours:
        os.close(fd)
        return None
    return fd


def _unlock(lock: Path, fd: int) -> None:
    """Remove a lock file and release its lock. A lock file that cannot be removed (a failing disk)
    is left unlocked: the next cleanup takes it for a dead writer's and removes it."""
    try:
        lock.unlink()
    except OSError:
        pass
    finally:
        os.close(fd)  # closing releases the lock


def _remove_if_dead(tmp: Path, lock: Path) -> bool:
    """Remove a tmp directory and its lock file when the lock can be taken (its writer is gone)."""
    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # held: the writer is alive
        os.close(fd)
        return False
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(str(tmp) + OLD_SUFFIX, ignore_errors=True)
    _unlock(lock, fd)
    return True


def _exchange(a: Path, b: Path) -> bool:
    """Swap two directories atomically; False where the system or file system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # C library without renameat2
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOENT):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _replace(tmp: Path, target: Path) -> None:
    """Put the run in tmp in place of the published one at target; the old one ends up under tmp/."""
    if _exchange(tmp, target):
        return
    # Two renames: readers may miss this run for a moment in between, but never see half of it.
    old = Path(str(tmp) + OLD_SUFFIX)
    try:
        os.rename(target, old)
    except FileNotFoundError:  # another process is replacing it at the same time
        pass
    try:
        os.rename(tmp, target)
    except OSError:
        if not target.is_dir():
            raise
        # another process put the same content in place meanwhile
