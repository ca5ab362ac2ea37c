"""The parallel path (worker processes, many chunks) gives exactly what one process gives,
and chunk boundaries that land inside strings or args fall back to the streaming parser."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest

import traceduck
from traceduck.export import export_run
from traceduck.ingester import pipeline, reader
from traceduck.store import Store

from conftest import ROOT, load_json, shared_dir, trace_events, write_trace
from roundtrip import trace_difference

TABLES = {
    "events": "* EXCLUDE (run_id)",
    "args": "* EXCLUDE (run_id)",
    "shapes": "* EXCLUDE (run_id)",
    "stacks": "* EXCLUDE (run_id)",
}


def _table_rows(store, table):
    with traceduck.open(store) as db:
        return db.sql(f"SELECT {TABLES[table]} FROM {table} ORDER BY ALL").fetchall()


@pytest.fixture
def grown_trace(tmp_path):
    out = tmp_path / "grown.json"
    tool = shared_dir().parent / "tools" / "bigtrace.py"
    subprocess.run([sys.executable, str(tool), str(shared_dir() / "cpu/full.json"), str(out), "--copies", "4"],
                   check=True, capture_output=True)
    return out


@pytest.mark.slow
def test_workers_and_small_chunks_match_one_process(grown_trace, tmp_path, monkeypatch):
    one = tmp_path / "one"
    traceduck.ingest(grown_trace, store=one, jobs=1)
    monkeypatch.setattr(pipeline, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(reader, "BLOCK", 1 << 18)
    many = tmp_path / "many"
    result = traceduck.ingest(grown_trace, store=many, jobs=2)[0]
    assert result.events == len(trace_events(load_json(grown_trace, exact=False)))
    for table in TABLES:
        assert _table_rows(one, table) == _table_rows(many, table), table
    out = tmp_path / "back.json"
    export_run(Store(many), result.run_id, out)
    assert trace_difference(load_json(grown_trace), load_json(out)) is None


def test_awkward_text_survives_any_chunking(tmp_path, monkeypatch):
    events = []
    for i in range(300):
        events.append({"ph": "X", "cat": "cpu_op", "name": f'op}}, {{"x": [{i}]}}, {{', "pid": 1, "tid": 1,
                       "ts": 1000.5 + i, "dur": 0.25,
                       "args": {"objs": [{"a": i}, {"b": "}, {"}], "s": 'q"}, {', "n": None, "f": 1.5}})
    path = write_trace(tmp_path / "awkward.json", events, deviceProperties=[{"id": 0}])
    monkeypatch.setattr(reader, "BLOCK", 97)
    calls = []
    streaming = pipeline._convert_streaming
    monkeypatch.setattr(pipeline, "_convert_streaming", lambda *a: calls.append(1) or streaming(*a))
    result = traceduck.ingest(path, store=tmp_path / "s")[0]
    assert result.events == 300
    assert calls == [1]  # a cut landed inside a string, so the streaming parser took over
    out = tmp_path / "back.json"
    export_run(Store(tmp_path / "s"), result.run_id, out)
    assert trace_difference(load_json(path), load_json(out)) is None


def test_python_api_returns_duckdb_relations(tmp_path):
    store = tmp_path / "s"
    traceduck.ingest(ROOT / "samples" / "buggy.json.gz", store=store)
    db = traceduck.open(store)
    rel = db.sql("SELECT name, count(*) AS n FROM events GROUP BY name ORDER BY n DESC LIMIT 3")
    table = rel.to_arrow_table()
    assert table.column_names == ["name", "n"] and table.num_rows == 3
    assert [r[0] for r in rel.fetchall()] == table.column("name").to_pylist()
    # independent: the counts of those names by plain json
    counts = Counter(e.get("name") for e in trace_events(load_json(ROOT / "samples" / "buggy.json.gz")))
    assert table.column("n").to_pylist() == [counts[n] for n in table.column("name").to_pylist()]
    assert table.column("n").to_pylist()[0] == max(counts.values())


@pytest.mark.slow
def test_mid_size_generated_trace_is_exact(tmp_path):
    """A ~50 MB trace goes through the worker processes and still round-trips exactly."""
    out = tmp_path / "mid.json"
    tool = shared_dir().parent / "tools" / "bigtrace.py"
    subprocess.run([sys.executable, str(tool), str(shared_dir() / "cpu/full.json"), str(out), "--mb", "50"],
                   check=True, capture_output=True)
    assert out.stat().st_size > pipeline.PARALLEL_MIN_BYTES
    result = traceduck.ingest(out, store=tmp_path / "s", jobs=2)[0]
    original = load_json(out)
    assert result.events == len(trace_events(original))
    back = tmp_path / "back.json"
    export_run(Store(tmp_path / "s"), result.run_id, back)
    assert trace_difference(original, load_json(back)) is None


@pytest.mark.slow
def test_benchmark_smoke(tmp_path):
    """The benchmark's small mode runs end to end (so the benchmark cannot rot)."""
    out = tmp_path / "bench.md"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "run.py"), "--small", "--cache", str(tmp_path / "cache"),
                           "--out", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert "| cpu `cpu-4mb.json` |" in text and "| gpu `gpu-4mb.json` |" in text
    assert text.count("| overview |") == 2


@pytest.mark.slow  # 30 s
def test_job_benchmark_smoke(tmp_path):
    """bench/jobs.py runs end to end on a 3-rank job, whose ranks make_job.py rewrote: rank and
    world size in distributedInfo, every timestamp shifted by the rank's offset (checked with json)."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from make_job import TEMPLATES, offset_us
    finally:
        sys.path.pop(0)
    shared_dir()
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "jobs.py"), "--ranks", "3", "--cache", str(tmp_path),
                           "--repeat", "1"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3 and lines[2].startswith("| 3 | ") and lines[0].count("per-run files / packed") == 6
    templates = [load_json(t, exact=False) for t in TEMPLATES]
    for r in range(3):
        written = load_json(tmp_path / "job-3" / f"rank-{r}.json.gz", exact=False)
        template = templates[r % 2]
        assert written["distributedInfo"] == dict(template["distributedInfo"], rank=r, world_size=3)
        assert [e.get("ts") for e in written["traceEvents"]] == [
            e["ts"] + offset_us(r) if isinstance(e.get("ts"), (int, float)) and e.get("ph") != "M" else e.get("ts")
            for e in template["traceEvents"]]
        assert [{k: v for k, v in e.items() if k != "ts"} for e in written["traceEvents"]] == [
            {k: v for k, v in e.items() if k != "ts"} for e in template["traceEvents"]]  # all else as it was
