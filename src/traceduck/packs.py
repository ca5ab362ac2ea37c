"""Packs: the tables of many runs in one Parquet file each, which readers prefer to the runs' own.
This module is their layout and who reads which; compaction.py writes them.

    STORE/packs/<pack_id>/<table>.parquet   the rows of every member run, in run_id order
    STORE/packs/<pack_id>/<summary>.parquet the rows of a summary of sql/views over the member runs
    STORE/packs/<pack_id>/[job-]report-<name>[.json].parquet  the rows of a report (see below)
    STORE/packs/<pack_id>/members.json      {"runs": {run_id: [inode, mtime_ns, size] of its events.parquet},
                                             "summaries": the key of what they were computed with}

A query over a store of many runs (every rank of a job) reads each table's file of every run,
and DuckDB pays about a millisecond per file per scan: 1,024 runs cost a second for every scan
of `events` before any row is read. `traceduck compact` writes the runs' tables into one pack;
readers then read the pack instead of its members' files.

A pack is a derived copy: the runs' own files stay the truth and keep every guarantee (atomic
ingest, label, rename, rm). A reader uses a pack only when every member is among the runs it
reads and each member's events.parquet is the very file the pack was made from (a run replaced
by `ingest --force` has new files), so a pack can go stale but never be read stale. That check, a
stat per member, is made once per state of the store's runs (see found_current). `runs` is
never packed: its rows change (labels, names). Removing a run removes the packs that hold it;
`compact` removes stale packs and the packs a new one supersedes.

A pack also holds summaries, computed once when it is written: the rows of views that cost a
sort or join over every event (the views tagged `@summary` in sql/views, see catalog.py: the sweep
of `gpu_time`, kernel, launch, copy and op statistics), and each per-run report's rows with its
default parameters (`report-<name>.parquet`, see reports.py) and those rows as the JSON text json
output prints (`report-<name>.json.parquet`, reports.report_text_sql); and the rows of each report
that compares a job's ranks over all member runs (`job-report-<name>.parquet`, reports.is_job_report)
with the runs' jobs and names then (`job-runs.parquet`), read only where the runs a report covers are
the chosen packs' runs, each job in one pack and grouped and named as then (reports.job_rows_held).
Readers take a summary's rows
from the packs whose summaries key is this version's (viewfile.summaries_key: the views, the
reference data and the reports), in a session that has not changed a reference table, and compute
the rest: a summary is never read stale either.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from .catalog import tables
from .store import REMOVE_GRACE_S, Store

PACKS_DIR = "packs"
MANIFEST = "members.json"
_PACK_ID = re.compile(r"[0-9a-f]{24}")
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
    summaries: str | None = None  # viewfile.summaries_key of its summaries (None: a pack without summaries)

    @property
    def pack_id(self) -> str:
        return self.path.name

    def is_current(self, store: Store, published: set[str] | None = None) -> bool:
        """Every member is still published (among `published` when the caller has just listed the
        runs) with the very files the pack was made from."""
        return all((r in published if published is not None else store.has_run(r)) and data_stamp(store, r) == stamp
                   for r, stamp in self.members.items())


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


def choose(store: Store, runs: list[str], published: set[str] | None = None,
           found: Path | None = None) -> tuple[list[Pack], list[str]]:
    """The packs to read for `runs` (largest first, no run twice, none holding another run) and the
    runs left to read from their own files; `published`: the runs the caller has just listed
    (Store.run_stamps), else each member is looked up. `found`: the file that names the packs found
    current at this very listing of the runs (see found_current), read and written here."""
    left = set(runs)
    chosen = []
    known = found_current(found) if found is not None else set()
    for pack in sorted(list_packs(store), key=lambda p: (-len(p.members), p.pack_id)):
        if pack.members and set(pack.members) <= left and (pack.pack_id in known or pack.is_current(store, published)):
            chosen.append(pack)
            left -= set(pack.members)
    if found is not None and {p.pack_id for p in chosen} - known:
        _note_current(found, [p.pack_id for p in chosen])
    return chosen, [r for r in runs if r in left]


# A pack is current while each member's events.parquet is the file it was made from: a stat per
# member (4,096 of them on a job of 4,096 ranks). Once found current at one listing of the runs,
# the identity of every listed runs.parquet, it stays current for as long as that listing does:
# a runs.parquet is never moved into another run's directory, and a run directory replaced or
# removed never comes back, so the same runs.parquet files mean the same run directories. The
# file names the listing by runs_table.stamps_key; a listing that changed (a run added, labelled,
# replaced, removed) names another file, and its packs are checked member by member again.
FOUND_PREFIX = "packs-current-"
FOUND_KEEP = 4  # the most recently written such files kept (like the runs snapshots beside them)


def found_file(cache_dir: Path, listing_key: str) -> Path:
    return cache_dir / f"{FOUND_PREFIX}{listing_key}.json"


def found_current(found: Path) -> set[str]:
    """The packs found current at the listing that `found` is named by (none when it is not there)."""
    try:
        ids = json.loads(found.read_text())
    except (OSError, ValueError):
        return set()
    return {i for i in ids if isinstance(i, str)} if isinstance(ids, list) else set()


def _note_current(found: Path, pack_ids: list[str]) -> None:
    """Write `found` (one rename: a reader sees all of it or none) and remove all but the
    FOUND_KEEP newest of its kind. Best effort: a store this process cannot write checks each time."""
    try:
        found.parent.mkdir(parents=True, exist_ok=True)
        part = found.with_name(f".{found.name}.{os.getpid()}")
        part.write_text(json.dumps(sorted(pack_ids)))
        os.replace(part, found)
        older = sorted(((p.stat().st_mtime_ns, p) for p in found.parent.glob(f"{FOUND_PREFIX}*.json") if p != found),
                       reverse=True)
        for _, p in older[FOUND_KEEP - 1:]:
            p.unlink(missing_ok=True)
    except OSError:
        pass


def remove_holding(store: Store, run_ids: list[str]) -> int:
    """Remove the packs that hold any of these runs (after `rm`)."""
    gone = set(run_ids)
    return remove(store, [p for p in list_packs(store) if gone & set(p.members)])


def remove_superseded(store: Store, pack_id: str, runs: list[str]) -> int:
    """Remove the packs all of whose members `pack_id` holds, and the stale ones; and what a removal
    killed midway left (a directory without a manifest, older than LEFTOVER_S)."""
    held = set(runs)
    removed = remove(store, [p for p in list_packs(store)
                             if p.pack_id != pack_id and (set(p.members) <= held or not p.is_current(store))])
    now = time.time()
    for entry in os.scandir(packs_dir(store)):
        try:
            if not os.path.exists(os.path.join(entry.path, MANIFEST)) and now - entry.stat().st_mtime > LEFTOVER_S:
                shutil.rmtree(entry.path, ignore_errors=True)
        except OSError:
            continue
    return removed


def remove(store: Store, packs: list[Pack]) -> int:
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
