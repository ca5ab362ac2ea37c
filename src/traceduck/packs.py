"""Packs: the tables of many runs in one Parquet file each, which readers prefer to the runs' own.

    STORE/packs/<pack_id>/<table>.parquet   the rows of every member run, in run_id order
    STORE/packs/<pack_id>/<summary>.parquet the rows of a query of sql/views over the member runs (SUMMARIES)
    STORE/packs/<pack_id>/members.json      {"runs": {run_id: [inode, mtime_ns, size] of its events.parquet},
                                             "summaries": the key of what they were computed with}

A query over a store of many runs (every rank of a job) reads each table's file of every run,
and DuckDB pays about a millisecond per file per scan: 1,024 runs cost a second for every scan
of `events` before any row is read. `traceduck compact` writes the runs' tables into one pack;
readers then read the pack instead of its members' files.

A pack is a derived copy: the runs' own files stay the truth and keep every guarantee (atomic
ingest, label, rename, rm). A reader uses a pack only when every member is among the runs it
reads and each member's events.parquet is the very file the pack was made from (a run replaced
by `ingest --force` has new files), so a pack can go stale but never be read stale. `runs` is
never packed: its rows change (labels, names). Removing a run removes the packs that hold it;
`compact` removes stale packs and the packs a new one supersedes.

A pack also holds summaries, computed once when it is written: the rows of views that cost a
sort or join over every event (SUMMARIES: the sweep of `gpu_time`, kernel, launch, copy and op
statistics), and each per-run report's rows with its default parameters (`report-<name>.parquet`,
see reports.py) and those rows as the JSON text json output prints (`report-<name>.json.parquet`,
reports.report_text_sql). Readers take a summary's rows from the packs whose summaries key is this
version's (db.summaries_key: the views, the reference data and the reports), in a session that has
not changed a reference table, and compute the rest: a summary is never read stale either.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from .catalog import schema_stamp, tables
from .errors import StoreError
from .store import REMOVE_GRACE_S, Store

PACKS_DIR = "packs"
MANIFEST = "members.json"
_PACK_ID = re.compile(r"[0-9a-f]{24}")
# summary table macro of sql/views (empty there) -> the query of sql/views whose rows of the member runs a
# pack holds in <macro>.parquet, which the store's view file makes the macro read (see db.py)
SUMMARIES = {"gpu_time_packed": "FROM gpu_time_rows()", "kernel_stats_packed": "FROM kernel_stats_of()",
             "kernel_launch_windows_packed": "FROM kernel_launch_windows_of()",
             "copy_groups_packed": "FROM copy_groups_of()", "op_self_times_packed": "FROM op_self_times_of()"}
REPORT_CHUNK = 128  # runs per pass when computing the per-run reports' rows for a pack
LEFTOVER_S = 3600  # a pack directory without a manifest this old is a removal killed midway


def packed_tables() -> list[str]:
    """Every table but `runs` (its rows change after ingest)."""
    return [name for name in tables() if name != "runs"]


def packs_dir(store: Store) -> Path:
    return store.path / PACKS_DIR


def data_stamp(store: Store, run_id: str) -> tuple[int, int, int] | None:
    """Identity of a run's events.parquet (inode, mtime, size): new when the run is replaced."""
    try:
        st = os.stat(store.run_file(run_id, "events.parquet"))
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


@dataclass
class Pack:
    path: Path
    members: dict[str, tuple[int, int, int]]
    summaries: str | None = None  # db.summaries_key of its summaries (None: a pack without summaries)

    @property
    def pack_id(self) -> str:
        return self.path.name

    def is_current(self, store: Store) -> bool:
        """Every member is still published with the very files the pack was made from."""
        return all(store.has_run(r) and data_stamp(store, r) == stamp for r, stamp in self.members.items())


def state(store: Store) -> int | None:
    """Changes whenever a pack is added or removed (the packs directory's mtime); None: no packs."""
    try:
        return os.stat(packs_dir(store)).st_mtime_ns
    except OSError:
        return None


def list_packs(store: Store) -> list[Pack]:
    out = []
    try:
        entries = list(os.scandir(packs_dir(store)))
    except OSError:
        return []
    for entry in entries:
        if not _PACK_ID.fullmatch(entry.name):
            continue
        try:
            manifest = json.loads((Path(entry.path) / MANIFEST).read_text())
            members = manifest["runs"]
            summaries = manifest.get("summaries")
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue  # being removed, or not a pack: never read
        out.append(Pack(Path(entry.path), {r: tuple(s) for r, s in members.items()},
                        summaries if isinstance(summaries, str) else None))
    return out


def choose(store: Store, runs: list[str]) -> tuple[list[Pack], list[str]]:
    """The packs to read for `runs` (largest first, no run twice, none holding another run) and the
    runs left to read from their own files."""
    left = set(runs)
    chosen = []
    for pack in sorted(list_packs(store), key=lambda p: (-len(p.members), p.pack_id)):
        if pack.members and set(pack.members) <= left and pack.is_current(store):
            chosen.append(pack)
            left -= set(pack.members)
    return chosen, [r for r in runs if r in left]


@dataclass
class CompactResult:
    pack_id: str | None  # None: nothing to pack
    runs: list[str]  # the runs packed
    skipped: list[str]  # selected runs left out: written by another traceduck version
    bytes: int  # size of the pack's files
    removed: int  # packs removed: stale, or superseded by this one
    written: bool = True  # False: these very runs were packed already


def compact(store: Store, run_ids: list[str]) -> CompactResult:
    """Write one pack of these runs' tables and remove the packs it supersedes (all of whose members
    it holds) and the stale ones. Runs written with other columns are left out (re-ingest them)."""
    import duckdb

    from .db import Database, summaries_key
    from .reports import report_run_ids

    stamp = schema_stamp()
    runs = sorted(r for r in run_ids if os.path.exists(store.run_file(r, stamp)))
    skipped = sorted(set(run_ids) - set(runs))
    if not runs:
        return CompactResult(None, [], skipped, 0, _remove(store, [p for p in list_packs(store)
                                                                   if not p.is_current(store)]))
    members = {r: data_stamp(store, r) for r in runs}
    key = summaries_key()
    pack_id = _pack_id(members, key)
    target = packs_dir(store) / pack_id
    if (target / MANIFEST).is_file():  # these very runs are packed already
        size = sum(f.stat().st_size for f in target.iterdir())
        return CompactResult(pack_id, runs, skipped, size, _remove_superseded(store, pack_id, runs), written=False)
    tmp = store.new_tmp_dir("pack")
    try:
        con = duckdb.connect()
        try:
            for table in packed_tables():
                files = [store.run_file(r, f"{table}.parquet") for r in runs]
                # rows in the order of the files: run_id order, so row groups prune on run_id
                con.execute(f"COPY (SELECT * FROM read_parquet(?, union_by_name = true)) TO "
                            f"'{tmp / (table + '.parquet')}' (FORMAT parquet, COMPRESSION zstd)", [files])
        except duckdb.Error as e:
            raise StoreError(f"cannot pack the runs of {store.path} ({str(e).splitlines()[0]})",
                             "A run may have been removed or replaced meanwhile: run `traceduck compact` again") from None
        finally:
            con.close()
        # the summaries, computed over the member runs (never read from another pack's summaries)
        db = Database(store, run_ids=runs)
        try:
            order = report_run_ids(db)  # the order of the runs in a report over them all (by name, then id)
            for view, query in SUMMARIES.items():
                db.con.execute(f"COPY ({query} ORDER BY ALL) TO '{tmp / (view + '.parquet')}' "
                               "(FORMAT parquet, COMPRESSION zstd)")
        except duckdb.Error as e:
            raise StoreError(f"cannot summarize the runs of {store.path} ({str(e).splitlines()[0]})",
                             "A run may have been removed or replaced meanwhile: run `traceduck compact` again") from None
        finally:
            db.close()
        _write_report_rows(store, runs, tmp, order)
        if {r: data_stamp(store, r) for r in runs} != members:
            raise StoreError(f"runs of {store.path} were replaced or removed while packing",
                             "Run `traceduck compact` again")
        (tmp / MANIFEST).write_text(json.dumps({"runs": members, "summaries": key}))
        size = sum(f.stat().st_size for f in tmp.iterdir())
        packs_dir(store).mkdir(exist_ok=True)
        try:
            os.rename(tmp, target)
        except OSError:  # another process packed the same runs meanwhile: keep its pack
            if not (target / MANIFEST).is_file():
                raise
    finally:
        store.discard(tmp)
    return CompactResult(pack_id, runs, skipped, size, _remove_superseded(store, pack_id, runs))


def _write_report_rows(store: Store, runs: list[str], tmp: Path, order: list[str]) -> None:
    """Each per-run report's rows of these runs with its default parameters (reports.per_run_rows),
    computed over REPORT_CHUNK runs at a time (a report's memory grows with the runs it covers) and
    written to one file per report; and the JSON text of those rows (reports.report_text_sql), which
    json output of the report's rows writes as it is, runs in the order of `order`."""
    import duckdb

    from .db import Database
    from .reports import (TEXT_GROUP_BYTES, all_reports, has_json_text, per_run_rows, report_file, report_text_file,
                          report_text_sql)

    reports = all_reports()
    names = [name for name, report in reports.items() if report.per_run]
    for i in range(0, len(runs), REPORT_CHUNK):
        db = Database(store, run_ids=runs[i:i + REPORT_CHUNK])
        try:
            for name in names:
                per_run_rows(db, name).to_parquet(str(tmp / f"{name}.{i}.part"))
        except duckdb.Error as e:
            raise StoreError(f"cannot summarize the runs of {store.path} ({str(e).splitlines()[0]})",
                             "A run may have been removed or replaced meanwhile: run `traceduck compact` again") from None
        finally:
            db.close()
    con = duckdb.connect()
    try:
        con.execute("CREATE TEMP TABLE report_run_order AS "
                    "SELECT unnest($ids::VARCHAR[]) AS run_id, generate_subscripts($ids::VARCHAR[], 1) AS position",
                    {"ids": order})
        for name in names:
            parts = sorted(tmp.glob(f"{name}.*.part"), key=lambda p: int(p.name.split(".")[-2]))
            con.execute(f"COPY (FROM read_parquet(?)) TO '{tmp / report_file(name)}' (FORMAT parquet, COMPRESSION zstd)",
                        [[str(p) for p in parts]])
            for part in parts:
                part.unlink()
            if has_json_text(reports[name]):
                con.execute(f"COPY ({report_text_sql(reports[name], str(tmp / report_file(name)))}) TO "
                            f"'{tmp / report_text_file(name)}' (FORMAT parquet, COMPRESSION zstd, "
                            f"ROW_GROUP_SIZE_BYTES {TEXT_GROUP_BYTES})")
    finally:
        con.close()


def _remove_superseded(store: Store, pack_id: str, runs: list[str]) -> int:
    """Remove the packs all of whose members `pack_id` holds, and the stale ones."""
    held = set(runs)
    removed = _remove(store, [p for p in list_packs(store)
                              if p.pack_id != pack_id and (set(p.members) <= held or not p.is_current(store))])
    now = time.time()
    for entry in os.scandir(packs_dir(store)):  # what a removal killed midway left: no manifest
        try:
            if not os.path.exists(os.path.join(entry.path, MANIFEST)) and now - entry.stat().st_mtime > LEFTOVER_S:
                shutil.rmtree(entry.path, ignore_errors=True)
        except OSError:
            continue
    return removed


def remove_holding(store: Store, run_ids: list[str]) -> int:
    """Remove the packs that hold any of these runs (after `rm`)."""
    gone = set(run_ids)
    return _remove(store, [p for p in list_packs(store) if gone & set(p.members)])


def _pack_id(members: dict[str, tuple], summaries: str) -> str:
    """Names the member runs and the views the summaries come from: another version packs anew."""
    import hashlib

    return hashlib.blake2b(repr((sorted(members.items()), summaries)).encode(), digest_size=12).hexdigest()


def _remove(store: Store, packs: list[Pack]) -> int:
    """Unpublish each pack at once (its manifest moved away: no new query chooses it), delete its
    files REMOVE_GRACE_S later so that a query that chose it just before can finish."""
    pending = []
    for pack in packs:
        tmp = store.new_tmp_dir("pack")
        try:
            os.rename(pack.path / MANIFEST, tmp / MANIFEST)
        except OSError:  # removed by another process meanwhile
            store.discard(tmp)
            continue
        pending.append((pack, tmp))
    if pending:
        time.sleep(REMOVE_GRACE_S)
    for pack, tmp in pending:
        try:
            os.rename(pack.path, tmp / "pack")
        except OSError:
            shutil.rmtree(pack.path, ignore_errors=True)
        store.discard(tmp)
    return len(pending)
