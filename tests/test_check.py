"""`traceduck check`: checksums written when a run or pack is published, verified later; a query
over a damaged run fails with one line naming the run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import xxhash

import traceduck

from conftest import SAMPLES


def td(*args):
    return subprocess.run([sys.executable, "-m", "traceduck", *map(str, args)], capture_output=True, text=True)


@pytest.fixture
def two_runs(samples_store):
    with traceduck.open(samples_store) as db:
        ids = dict(db.sql("SELECT name, run_id FROM runs").fetchall())
    return samples_store, ids


def test_checksums_are_written_for_every_file_but_the_runs_row(two_runs):
    store, ids = two_runs
    run_dir = store / "runs" / ids["buggy"]
    listed = json.loads((run_dir / "checksums.json").read_text())["files"]
    files = sorted(p.name for p in run_dir.iterdir() if p.name not in ("runs.parquet", "checksums.json"))
    assert sorted(listed) == files and "events.parquet" in files
    for name in files:  # independent of the code: the bytes hashed here
        data = (run_dir / name).read_bytes()
        assert listed[name] == {"bytes": len(data), "xxh3_128": xxhash.xxh3_128(data).hexdigest()}


@pytest.mark.slow  # 10 s: a dozen commands as new processes
def test_check_passes_then_names_the_damaged_run_and_file(two_runs):
    store, ids = two_runs
    ok = td("check", "--store", store)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("2 runs and 0 packs checked: no damage (")
    # a label rewrites runs.parquet: still sound
    assert td("label", "buggy", "team=x", "--store", store).returncode == 0
    assert td("check", "--store", store).returncode == 0
    # one flipped bit in the middle of a file: DuckDB may read it without noticing; check does not
    events = store / "runs" / ids["fixed"] / "events.parquet"
    data = bytearray(events.read_bytes())
    data[len(data) // 2] ^= 0x10
    events.write_bytes(bytes(data))
    bad = td("check", "--store", store)
    assert bad.returncode == 1
    assert bad.stdout == ""
    assert bad.stderr == (
        f"run {ids['fixed'][:12]} (fixed): events.parquet: its bytes changed since it was written (checksum differs)\n"
        "Error: 1 damaged files in 2 runs and 0 packs checked. Re-ingest each damaged run from its trace with "
        f"`traceduck ingest TRACE --force`, or remove it with `traceduck rm {ids['fixed'][:12]}`; run `traceduck "
        "compact` again to rewrite a damaged pack.\n")
    # cut short: both check and a query name the run, in one line
    events.write_bytes(bytes(data[: len(data) // 2]))
    bad = td("check", "--store", store)
    assert bad.stderr.splitlines()[0] == (f"run {ids['fixed'][:12]} (fixed): events.parquet: "
                                          f"{len(data) // 2} bytes where {len(data)} were written")
    query = td("report", "top-ops", "--store", store)
    assert query.returncode == 1 and query.stdout == ""
    assert query.stderr.startswith(f"Error: run {ids['fixed'][:12]} (fixed): events.parquet: damaged (")
    assert query.stderr.count("\n") == 1 and "Traceback" not in query.stderr
    # the other run still answers, and re-ingesting the damaged one from its trace repairs it
    assert td("report", "top-ops", "--run", "buggy", "--store", store).returncode == 0
    assert td("ingest", SAMPLES / "fixed.json.gz", "--force", "--store", store).returncode == 0
    assert td("check", "--store", store).returncode == 0


@pytest.mark.slow  # 8 s
def test_check_covers_packs_and_counts_runs_without_checksums(two_runs):
    store, ids = two_runs
    assert td("compact", "--store", store).returncode == 0
    (pack,) = (store / "packs").iterdir()
    assert td("check", "--store", store).stdout.startswith("2 runs and 1 packs checked: no damage")
    victim = sorted(p for p in pack.iterdir() if p.suffix == ".parquet")[0]
    victim.write_bytes(victim.read_bytes()[:-1] + b"\0")
    bad = td("check", "--store", store)
    assert bad.returncode == 1
    assert bad.stderr.splitlines()[0] == f"pack {pack.name}: {victim.name}: its bytes changed since it was written (checksum differs)"
    shutil.rmtree(pack)
    (store / "runs" / ids["buggy"] / "checksums.json").unlink()  # as a store from before checksums
    older = td("check", "--store", store)
    assert older.returncode == 0
    assert older.stdout.startswith("2 runs and 0 packs checked: no damage; 1 ingested before checksums")


def test_check_in_python_names_the_damaged_file(two_runs):
    store, ids = two_runs
    assert traceduck.check(store).damaged == []
    shapes = store / "runs" / ids["buggy"] / "shapes.parquet"
    shapes.write_bytes(shapes.read_bytes()[:-8])
    result = traceduck.check(store)
    assert (result.runs, result.packs, result.without_checksums) == (2, 0, [])
    assert [(d.kind, d.ident, d.name, d.file) for d in result.damaged] == [("run", ids["buggy"], "buggy", "shapes.parquet")]
