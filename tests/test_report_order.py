"""Reports over several runs: runs in a human order (as selected, else by name), `--limit N` per run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import traceduck

from conftest import SAMPLES, load_json, run_report, trace_events


def td(*args):
    return subprocess.run([sys.executable, "-m", "traceduck", *map(str, args)], capture_output=True, text=True)


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    """The two samples, ingested fixed first: neither ingest order nor run id order is name order."""
    store = tmp_path_factory.mktemp("order") / "store"
    traceduck.ingest(SAMPLES / "fixed.json.gz", store=store, labels={"story": "kv"})
    traceduck.ingest(SAMPLES / "buggy.json.gz", store=store, labels={"story": "kv"})
    return store


def _names(rows):
    return [r["run_name"] for r in rows]


def _runs_in_order(names):
    return list(dict.fromkeys(names))


@pytest.mark.slow  # 5 s
def test_runs_come_in_the_order_given_and_limit_is_per_run(samples):
    for order in (["buggy", "fixed"], ["fixed", "buggy"]):
        args = [a for name in order for a in ("--run", name)]
        out = td("report", "copies-by-call-site", "--store", samples, *args, "--limit", "6", "-f", "json")
        assert out.returncode == 0, out.stderr
        rows = json.loads(out.stdout)
        assert _runs_in_order(_names(rows)) == order
        for name in order:  # each run's first 6 rows, in the report's own order
            alone = td("report", "copies-by-call-site", "--store", samples, "--run", name, "-f", "json")
            expected = json.loads(alone.stdout)[:6]
            assert [{k: v for k, v in r.items() if k not in ("run_id", "run_name")} for r in rows
                    if r["run_name"] == name] == expected
            assert len(expected) == 6


def test_the_buggy_sample_has_the_whole_cache_cast_first(samples):
    """The case the ordering fix is for: with --limit, buggy's whole-cache cast is on the page."""
    events = trace_events(load_json(SAMPLES / "buggy.json.gz"))
    whole = [e for e in events if e.get("name") == "aten::to" and e["args"].get("Input Dims", [None])[0] == [16384, 1, 576]]
    with traceduck.open(samples) as db:
        columns, rows = run_report(db, "copies-by-call-site", runs=["buggy", "fixed"], limit=1)
    rows = [dict(zip(columns, r)) for r in rows]
    assert _names(rows) == ["buggy", "fixed"]
    assert rows[0]["dims"] == [16384, 1, 576] and rows[0]["calls"] == len(whole) > 0


def test_without_run_and_with_a_label_runs_go_by_name(samples):
    with traceduck.open(samples) as db:
        names = {r["run_id"]: r["name"] for r in db.runs()}
        assert [names[i] for i in sorted(names)] == ["fixed", "buggy"]  # run id order is not name order
        for runs in (None, ["label:story=kv"]):
            columns, rows = run_report(db, "steps", runs=runs)
            assert _runs_in_order([names[r[0]] for r in rows]) == ["buggy", "fixed"]
            columns, rows = run_report(db, "overview", runs=runs, limit=3)
            assert [names[r[0]] for r in rows] == ["buggy"] * 3 + ["fixed"] * 3
