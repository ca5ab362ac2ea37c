"""`traceduck compact`: write the tables of many runs into one pack, with their summaries, the
rows of every per-run report and those of the reports that compare a job's ranks (what a pack
holds and who reads it: packs.py)."""

from __future__ import annotations

import hashlib
import json
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb

from . import selection
from .catalog import all_reports, schema_stamp, summaries
from .engine import Engine
from .errors import IO_HINT, NO_SPACE_HINT, JobSelectionError, StoreError
from .jobs import require_one_job
from .packs import MANIFEST, data_stamp, list_packs, packed_tables, packs_dir, remove, remove_superseded
from .reports import (JOB_CHUNK, JOB_RUNS_FILE, SLICED, TEXT_GROUP_BYTES, has_json_text, is_job_report, job_report_file, per_run_rows,
                      report_file, report_text_file, report_text_sql, stragglers_macro)
from .sqltext import first_line, literal
from .store import CHECKSUMS, Store, write_checksums
from .viewfile import summaries_key

# Runs per pass, so that compact's memory stays that of a slice of runs whatever the pack's size
# (measured on the 4,096-rank job of bench/jobs.py, peak RSS of one pass): the per-run reports' rows
# and their JSON text (ops-by-shape 1.5 GB over 128 runs, 0.5 GB over 32; roofline's text over
# 4,096 runs at once 4.1 GB)
REPORT_CHUNK = 32
SUMMARY_CHUNK = 128  # the summaries (gpu_time's sweeps over 1,024 runs at once took 2.6 GB; 0.7 GB this way)
_AGAIN = "A run may have been removed or replaced meanwhile: run `traceduck compact` again"


class ChangedMeanwhile(StoreError):
    """Runs being packed were removed or replaced (ingest --force) while `compact` ran, on each of its tries."""


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
    stamp = schema_stamp()
    runs = sorted(r for r in run_ids if os.path.exists(store.run_file(r, stamp)))
    skipped = sorted(set(run_ids) - set(runs))
    if not runs:
        return CompactResult(None, [], skipped, 0, remove(store, [p for p in list_packs(store) if not p.is_current(store)]))
    members = {r: data_stamp(store, r) for r in runs}
    key = summaries_key()
    pack_id = _pack_id(members, key)
    target = packs_dir(store) / pack_id
    if (target / MANIFEST).is_file():  # these very runs are packed already
        return CompactResult(pack_id, runs, skipped, size_of(target), remove_superseded(store, pack_id, runs), written=False)
    tmp = store.new_tmp_dir("pack")
    try:
        with store.writing(), _written(store):
            _write_pack(store, runs, members, key, tmp, target)
    finally:
        store.discard(tmp)
    return CompactResult(pack_id, runs, skipped, size_of(target), remove_superseded(store, pack_id, runs))


def size_of(pack: Path) -> int:
    return sum(f.stat().st_size for f in pack.iterdir())


@contextmanager
def _written(store: Store):
    """A DuckDB error writing a pack's file (no space, an I/O error) as one line with what to do."""
    try:
        yield
    except duckdb.IOException as e:
        raise _failed(store, "cannot write a pack", e) from None


def _failed(store: Store, what: str, e: duckdb.Error) -> StoreError:
    text = first_line(str(e))
    if isinstance(e, duckdb.IOException):
        hint = NO_SPACE_HINT if "No space left" in text else IO_HINT
    else:
        hint = _AGAIN
    return StoreError(f"{what} in {store.path} ({text})", hint)


def _write_pack(store: Store, runs: list[str], members: dict, key: str, tmp: Path, target: Path) -> None:
    """Write the pack of these runs in tmp and publish it as target (one rename)."""
    _write_tables(store, runs, tmp)
    with Engine(store, run_ids=runs) as engine:
        order = selection.in_order(engine.runs())  # the order of the runs in a report over them all
    _write_summaries(store, runs, tmp)
    _write_report_rows(store, runs, tmp, order)
    _write_job_rows(store, runs, tmp)
    if {r: data_stamp(store, r) for r in runs} != members:
        raise ChangedMeanwhile(f"runs of {store.path} were replaced or removed while packing", "Run `traceduck compact` again")
    (tmp / MANIFEST).write_text(json.dumps({"runs": members, "summaries": key}))
    write_checksums(tmp, skip=frozenset({CHECKSUMS}))
    packs_dir(store).mkdir(exist_ok=True)
    try:
        os.rename(tmp, target)
    except OSError:  # another process packed the same runs meanwhile: keep its pack
        if not (target / MANIFEST).is_file():
            raise


def _pack_id(members: dict[str, tuple], summaries_key_: str) -> str:
    """Names the member runs and the views the summaries come from: another version packs anew."""
    return hashlib.blake2b(repr((sorted(members.items()), summaries_key_)).encode(), digest_size=12).hexdigest()


def _write_tables(store: Store, runs: list[str], tmp: Path) -> None:
    """Each table's rows of every run (but `runs`), in the order of the files: run_id order, so row
    groups prune on run_id. Every file of a table has the same columns (the runs' schema stamp:
    catalog.arrow_schemas), so they are read by position: `union_by_name` reads every file's schema
    first and held 950 MB for the events of 4,096 runs (546 MB without it; bench/jobs.py)."""
    con = duckdb.connect()
    try:
        for table in packed_tables():
            files = [store.run_file(r, f"{table}.parquet") for r in runs]
            con.execute(f"COPY (SELECT * FROM read_parquet(?)) TO "
                        f"{literal(str(tmp / (table + '.parquet')))} (FORMAT parquet, COMPRESSION zstd)", [files])
    except duckdb.Error as e:
        raise _failed(store, "cannot pack the runs", e) from None
    finally:
        con.close()


def _merge(con: duckdb.DuckDBPyConnection, parts: list[Path], target: Path, order_all: bool = False,
           options: str = "") -> None:
    """Write the rows of the part files, in their order (or in the order of all columns), as one
    file (more COPY `options`, if any), and remove the parts."""
    con.execute(f"COPY (FROM read_parquet(?){' ORDER BY ALL' if order_all else ''}) TO {literal(str(target))} "
                f"(FORMAT parquet, COMPRESSION zstd{options})", [[str(p) for p in parts]])
    for part in parts:
        part.unlink()


def _parts(tmp: Path, name: str) -> list[Path]:
    """The part files of `name` (NAME.FIRST_RUN_INDEX.part), in the order of their runs."""
    return sorted(tmp.glob(f"{name}.*.part"), key=lambda p: int(p.name.split(".")[-2]))


def _write_summaries(store: Store, runs: list[str], tmp: Path) -> None:
    """Each summary's rows of these runs (a run's rows depend on that run alone), computed over
    SUMMARY_CHUNK runs at a time, written to one file per summary in the order of all its columns."""
    try:
        for i in range(0, len(runs), SUMMARY_CHUNK):
            with Engine(store, run_ids=runs[i:i + SUMMARY_CHUNK]) as engine:
                for summary in summaries():
                    engine.con.execute(f"COPY ({summary.rows_sql()}) TO {literal(str(tmp / f'{summary.name}.{i}.part'))} "
                                       "(FORMAT parquet)")
        con = duckdb.connect()
        try:
            for summary in summaries():
                _merge(con, _parts(tmp, summary.name), tmp / f"{summary.name}.parquet", order_all=True)
        finally:
            con.close()
    except duckdb.Error as e:
        raise _failed(store, "cannot summarize the runs", e) from None


def _write_report_rows(store: Store, runs: list[str], tmp: Path, order: list[str]) -> None:
    """Each per-run report's rows of these runs with its default parameters (reports.per_run_rows),
    computed over REPORT_CHUNK runs at a time (a report's memory grows with the runs it covers) and
    written to one file per report; and the JSON text of those rows (reports.report_text_sql, stragglers_macro), which
    json output of the report's rows writes as it is, runs in the order of `order`, also REPORT_CHUNK
    runs at a time (each run's text is built whole in memory)."""
    reports = {name: report for name, report in all_reports().items() if report.per_run}
    for i in range(0, len(runs), REPORT_CHUNK):
        with Engine(store, run_ids=runs[i:i + REPORT_CHUNK]) as engine:
            try:
                for name in reports:
                    per_run_rows(engine, name).to_parquet(str(tmp / f"{name}.{i}.part"))
            except duckdb.Error as e:
                raise _failed(store, "cannot summarize the runs", e) from None
    con = duckdb.connect()
    try:
        for name, report in reports.items():
            rows_file = tmp / f"{report_file(name)}.parquet"
            _merge(con, _parts(tmp, name), rows_file)
            if not has_json_text(report):
                continue
            text = report_text_file(name)
            for i in range(0, len(order), REPORT_CHUNK):
                con.execute("CREATE OR REPLACE TEMP TABLE report_run_order AS SELECT unnest($ids::VARCHAR[]) AS run_id, "
                            "generate_subscripts($ids::VARCHAR[], 1) + $first AS position",
                            {"ids": order[i:i + REPORT_CHUNK], "first": i})
                con.execute(f"COPY ({report_text_sql(report, str(rows_file))}) TO "
                            f"{literal(str(tmp / f'{text}.{i}.part'))} (FORMAT parquet)")
            _merge(con, _parts(tmp, text), tmp / f"{text}.parquet", options=f", ROW_GROUP_SIZE_BYTES {TEXT_GROUP_BYTES}")
    finally:
        con.close()


def _write_job_rows(store: Store, runs: list[str], tmp: Path) -> None:
    """The rows of each report that compares a job's ranks (reports.is_job_report) over all these
    runs with its default parameters (a report that needs one job: only when they are one), read
    from the pack being written and its summaries; and the runs' jobs and names as they are now
    (reports.JOB_RUNS_FILE), which a reader compares with its own before it reads those rows.
    Overview's rows over more than JOB_CHUNK runs: see _write_overview_rows."""
    held = []
    with Engine(store, run_ids=runs, pack=tmp) as engine:
        cur = engine.cursor()
        try:
            for name, report in all_reports().items():
                if not is_job_report(report):
                    continue
                if "one_job" in report.requires:
                    try:
                        require_one_job(cur, runs, name)
                    except JobSelectionError:
                        continue
                target = tmp / f"{job_report_file(name)}.parquet"
                if name == SLICED and len(runs) > JOB_CHUNK:
                    _write_overview_rows(store, engine, runs, tmp, target)
                else:
                    per_run_rows(engine, name).to_parquet(str(target))
                held.append(name)
            cur.execute(f"COPY (SELECT run_id, run_name, job_id, $held::VARCHAR[] AS reports FROM run_jobs ORDER BY run_id) "
                        f"TO {literal(str(tmp / (JOB_RUNS_FILE + '.parquet')))} (FORMAT parquet, COMPRESSION zstd)",
                        {"held": held})
        except duckdb.Error as e:
            raise _failed(store, "cannot summarize the runs", e) from None
        finally:
            cur.close()


def _write_overview_rows(store: Store, engine: Engine, runs: list[str], tmp: Path, target: Path) -> None:
    """Overview's rows over many runs, JOB_CHUNK runs at a time, with the memory of a slice: its only
    comparison across runs, the straggler of each job (macro job_stragglers), computed once over
    every run of the pack (`engine`), and read by each slice in place of the macro (a temporary
    macro of that name comes first); the rest of a run's rows depend on that run alone. The same
    rows as one pass over every run (tests/test_job_packs.py)."""
    stragglers = tmp / "job-stragglers.parquet"
    cur = engine.cursor()
    try:
        cur.sql("SELECT * FROM job_stragglers($ids)", params={"ids": runs}).to_parquet(str(stragglers))
    finally:
        cur.close()
    setup = stragglers_macro(f"read_parquet({literal(str(stragglers))})")
    for i in range(0, len(runs), JOB_CHUNK):
        with Engine(store, run_ids=runs[i:i + JOB_CHUNK]) as part_engine:
            per_run_rows(part_engine, "overview", setup=setup).to_parquet(str(tmp / f"overview.{i}.part"))
    con = duckdb.connect()
    try:
        _merge(con, _parts(tmp, "overview"), target)
    finally:
        con.close()
    stragglers.unlink()
