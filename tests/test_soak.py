"""The soak: for a while, ingests (some with --force), `label`, `rename`, `rm` and `compact`, and
readers running reports, all at once in several processes on one store (tests/soak.py is each
process's loop). Afterwards every run that was ingested and not removed reads back identical to a
reference ingest of its trace in a store of its own (each table's rows compared with plain DuckDB),
no operation failed but with a narrow error about a run removed meanwhile, and the store holds no
leftover temporary files. TRACEDUCK_SOAK_SECONDS sets how long (default 50).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import duckdb
import pytest
import xxhash

import traceduck
from traceduck.store import short_id

from conftest import SAMPLES

ROOT = Path(__file__).resolve().parents[1]
SECONDS = float(os.environ.get("TRACEDUCK_SOAK_SECONDS", "50"))
TABLES = ("events", "args", "shapes", "stacks", "step_windows")
RUN_ONLY = ("name", "labels", "ingested_at", "ingest_seconds")  # columns of `runs` that label, rename and each ingest set
ROLES = {"ingest": 2, "change": 2, "read": 2}  # processes of each role


def _traces(tmp_path: Path) -> dict[str, str]:
    """Six traces, {path: run_id}: the samples, the seeds, and the buggy sample under another name."""
    files = sorted(SAMPLES.glob("*.json.gz")) + sorted((ROOT / "tests" / "data" / "seeds").glob("*.json.gz"))
    doc = json.loads(gzip.decompress((SAMPLES / "buggy.json.gz").read_bytes()))
    doc["traceName"] = "soak-variant"
    variant = tmp_path / "variant.json"
    variant.write_text(json.dumps(doc))
    return {str(f): xxhash.xxh3_128(f.read_bytes()).hexdigest() for f in [*files, variant]}


def _table(store: Path, run_id: str, table: str) -> str:
    return str(store / "runs" / run_id / f"{table}.parquet")


def _differences(con, a: str, b: str, exclude: tuple[str, ...] = ()) -> int:
    """Rows of one Parquet file not in the other, either way (with multiplicity), plain DuckDB."""
    cols = f"* EXCLUDE ({', '.join(exclude)})" if exclude else "*"
    query = f"SELECT count(*) FROM (SELECT {cols} FROM read_parquet(?) EXCEPT ALL SELECT {cols} FROM read_parquet(?))"
    return con.execute(query, [a, b]).fetchone()[0] + con.execute(query, [b, a]).fetchone()[0]


def _allowed(record: dict, removed: set[str]) -> bool:
    """An error that only says a run asked for was removed meanwhile (and names it); or `compact`
    saying that runs were replaced under each of its tries (ingest --force runs all the time here)."""
    run = record["run"]
    if record["op"] == "compact":
        return record["kind"] == "ChangedMeanwhile" and "replaced or removed while packing" in record["error"]
    return (record["kind"] in ("RunSelectionError", "StoreError", "LostFileError") and bool(run) and run in removed
            and (short_id(run) in record["error"] or run in record["error"]))


@pytest.mark.slow  # 90 s (75 s of soak)
def test_soak(tmp_path):
    traces = _traces(tmp_path)
    reference = tmp_path / "reference"
    traceduck.ingest(list(traces), store=reference, jobs=1)
    con = duckdb.connect()
    counts = {run_id: {t: con.execute("SELECT count(*) FROM read_parquet(?)", [_table(reference, run_id, t)]).fetchone()[0]
                       for t in TABLES} for run_id in traces.values()}
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"traces": traces, "counts": counts}))
    store = tmp_path / "store"
    traceduck.ingest(list(traces)[:3], store=store, jobs=1)  # something to read from the start

    deadline = time.time() + SECONDS
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    procs, logs = [], []
    for role, n in ROLES.items():
        for k in range(n):
            log = tmp_path / f"{role}{k}.jsonl"
            logs.append(log)
            procs.append(subprocess.Popen([sys.executable, str(ROOT / "tests" / "soak.py"), role, str(store), str(deadline),
                                           str(len(procs) + 1), str(spec), str(log)],
                                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for p in procs:
        _, err = p.communicate(timeout=SECONDS + 300)
        assert p.returncode == 0, err

    records = [json.loads(line) for log in logs for line in log.read_text().splitlines()]
    ops = Counter(r["op"].split(" ")[0] for r in records)
    removed = {r["run"] for r in records if r["op"] == "rm"}
    errors = [r for r in records if r["error"]]
    unexpected = [r for r in errors if not _allowed(r, removed)]
    print(f"soak {SECONDS:.0f} s: {len(records)} operations {dict(ops)}; {len(errors)} errors, "
          f"{Counter(r['kind'] for r in errors)}, {len(unexpected)} unexpected")
    assert not unexpected, json.dumps(unexpected[:5], indent=1)
    assert sum(r["op"] == "compact" and not r["error"] for r in records)  # some compact got through
    assert ops["ingest"] and ops["rm"] and ops["label"] and ops["rename"] and ops["compact"] and ops["report-run"]

    listed = subprocess.run([sys.executable, "-m", "traceduck", "runs", "--store", str(store)], env=env,
                            capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    assert os.listdir(store / "tmp") == []

    # Which runs must be there: those whose last ingest began after their last removal ended (and
    # gone: those whose last removal began after their last ingest ended, or was never ingested).
    published = traceduck.open(store).runs()
    present = {r["run_id"] for r in published}
    for run_id in traces.values():
        ingests = [r for r in records if r["op"].startswith("ingest") and r["run"] == run_id and not r["error"]]
        rms = [r for r in records if r["op"] == "rm" and r["run"] == run_id and not r["error"]]
        last_in = max([r["t0"] for r in ingests], default=None)
        if last_in is not None and (not rms or last_in > max(r["t1"] for r in rms)):
            assert run_id in present, f"run {run_id} was ingested after its last removal but is gone"
        if rms and (last_in is None or max(r["t0"] for r in rms) > max(r["t1"] for r in ingests)):
            assert run_id not in present, f"run {run_id} was removed after its last ingest but is there"
    assert present <= set(traces.values())
    for run_id in present:
        for table in TABLES:
            assert _differences(con, _table(store, run_id, table), _table(reference, run_id, table)) == 0, (run_id, table)
        assert _differences(con, _table(store, run_id, "runs"), _table(reference, run_id, "runs"), RUN_ONLY) == 0, run_id
    with traceduck.open(store) as db:  # and as traceduck reads them (packs included)
        for table in TABLES:
            got = dict(db.sql(f"SELECT run_id, count(*) FROM {table} GROUP BY run_id").fetchall())
            assert got == {r: counts[r][table] for r in present if counts[r][table]}, table


def test_report_over_a_run_removed_while_it_runs(tmp_path):
    """A report whose run is removed after it listed the runs (the files gone for good, as `rm`
    leaves them a second later): over every run it answers over those still there; over the run
    asked for it is a narrow error naming it (found by the soak: an IO error before)."""
    import shutil

    from traceduck.engine import LostFileError

    store = tmp_path / "store"
    buggy, fixed = (r.run_id for r in traceduck.ingest([SAMPLES / "buggy.json.gz", SAMPLES / "fixed.json.gz"],
                                                        store=store, jobs=1))
    with traceduck.open(store) as db:
        alone = db.report_query("top-ops", runs=[fixed]).fetch()[1]
        every = db.report_query("top-ops")
        asked = db.report_query("top-ops", runs=[buggy])
        streamed = db.report_query("top-ops")
        shutil.rmtree(store / "runs" / buggy)
        columns, rows = every.fetch()
        assert {r[columns.index("run_id")] for r in rows} == {fixed}
        assert [r[2:] for r in rows] == alone
        with pytest.raises(LostFileError, match=f"run {short_id(buggy)} was removed while report top-ops ran"):
            asked.fetch()
        assert sum(len(b) for b in streamed.stream().batches) == len(alone)
