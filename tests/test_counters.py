"""`traceduck export --counters` and the time series of sql/views/timeseries.sql.

Every expected value is computed here from the trace with plain `json`: the launch queue by a sweep
over the launch calls and the first start of their work per stream, the allocated memory from the
`[memory]` events' `Total Allocated`, the copy bandwidth by a sweep over bytes / duration."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

import traceduck
from conftest import load_json, shared_dir, trace_events, write_trace
from roundtrip import ns

BERT = "public/AMD-AGI__TraceLens/tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz"
GPU_TRACE = "public/facebookresearch__HolisticTraceAnalysis/tests/data/negative_queue_length_values_check/rank0.json.gz"
WORK = {"kernel", "gpu_memcpy", "gpu_memset"}
LAUNCH = re.compile(r"(?i)launch|memcpy|memset")


def step_function(edges) -> list[tuple[int, float]]:
    """[(t, delta)] -> [(t, value after every change at t)], times where the net change is 0 left out."""
    net: dict[int, float] = defaultdict(float)
    for t, d in edges:
        net[t] += d
    out, value = [], 0.0
    for t in sorted(net):
        if abs(net[t]) > 1e-12:
            value += net[t]
            out.append((t, value))
    return out


def expected_queue(events) -> dict[tuple, list[tuple[int, float]]]:
    """{(device, stream): [(ts_ns, launches pending)]}: a launch call joins the queue of each stream
    its work runs on at the call's start, and leaves it when its first piece of work there starts."""
    calls = {e["args"]["correlation"]: e for e in events
             if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver") and LAUNCH.search(e["name"])
             and "correlation" in e.get("args", {})}
    first_start: dict[tuple, int] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in WORK and e["args"].get("correlation") in calls:
            key = (e["args"]["correlation"], e["args"]["device"], e["args"]["stream"])
            first_start[key] = min(first_start.get(key, ns(e["ts"])), ns(e["ts"]))
    edges = defaultdict(list)
    for (corr, device, stream), start in first_start.items():
        edges[device, stream] += [(ns(calls[corr]["ts"]), 1), (start, -1)]
    return {k: step_function(v) for k, v in edges.items()}


def expected_memory(events) -> dict[str, list[tuple[int, float]]]:
    """{device: [(ts_ns, Total Allocated)]}, the last [memory] event of a time winning."""
    series: dict[str, dict[int, int]] = defaultdict(dict)
    for e in events:
        if e.get("name") == "[memory]" and "Total Allocated" in e.get("args", {}):
            a = e["args"]
            device = "cpu" if a["Device Type"] == 0 else f"device type {a['Device Type']}:{a['Device Id']}"
            series[device][ns(e["ts"])] = a["Total Allocated"]
    return {d: sorted(v.items()) for d, v in series.items()}


def expected_bandwidth(events) -> dict[tuple, list[tuple[int, float]]]:
    """{(device, kind): [(ts_ns, GB/s)]}: the summed bytes / duration of the copies running."""
    edges = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("gpu_memcpy", "gpu_memset") and ns(e["dur"]) > 0:
            kind = "Memset" if e["cat"] == "gpu_memset" else e["name"].split()[1]
            rate = e["args"]["bytes"] / ns(e["dur"])
            edges[e["args"]["device"], kind] += [(ns(e["ts"]), rate), (ns(e["ts"]) + ns(e["dur"]), -rate)]
    return {k: step_function(v) for k, v in edges.items()}


def exported_counters(path: Path) -> dict[str, list[tuple[int, float]]]:
    """{counter name: [(ts_ns, value)]} of the exported file, read with plain json."""
    out = defaultdict(list)
    for e in trace_events(load_json(path)):
        if e.get("ph") == "C":
            assert isinstance(e["pid"], int) and len(e["args"]) == 1
            out[e["name"]].append((ns(e["ts"]), float(next(iter(e["args"].values())))))
    return out


def assert_series(got, want):
    assert [t for t, _ in got] == [t for t, _ in want]
    assert [v for _, v in got] == pytest.approx([v for _, v in want], abs=1e-6)


def check_counters(path: Path, events, base_ns: int = 0):
    got = exported_counters(path)
    queue, memory, bandwidth = expected_queue(events), expected_memory(events), expected_bandwidth(events)
    assert set(got) == ({f"Launch queue (stream {s})" for _, s in queue}
                        | {f"Allocated memory ({d})" for d in memory}
                        | {f"Memory bandwidth {k} (GB/s)" for _, k in bandwidth})
    assert len({d for d, _ in queue}) == 1  # one device: one series per stream
    for (_, stream), want in queue.items():
        assert_series(got[f"Launch queue (stream {stream})"], want)
    for device, want in memory.items():
        assert_series(got[f"Allocated memory ({device})"], [(t, float(v)) for t, v in want])
    for (_, kind), want in bandwidth.items():
        assert_series(got[f"Memory bandwidth {kind} (GB/s)"], [(t, max(v, 0.0)) for t, v in want])
    return got, queue, memory, bandwidth


def x(name, cat, ts, dur, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 0 if cat in WORK else 10, "tid": 7 if cat in WORK else 11,
            "ts": ts, "dur": dur, "args": args}


def test_counters_of_a_made_trace(tmp_path, store):
    """Two kernels queued on stream 7 (the queue reaches 2), a graph launch counted once though it
    runs two kernels, a copy overlapping another (bandwidths add), two [memory] events at one time
    (the last wins)."""
    events = [
        x("cudaLaunchKernel", "cuda_runtime", 100, 5, correlation=1),
        x("cudaLaunchKernel", "cuda_runtime", 110, 5, correlation=2),
        x("k1", "kernel", 120, 30, correlation=1, device=0, stream=7),
        x("k2", "kernel", 150, 10, correlation=2, device=0, stream=7),
        x("cudaGraphLaunch", "cuda_runtime", 200, 5, correlation=3),
        x("g1", "kernel", 210, 5, correlation=3, device=0, stream=7),
        x("g2", "kernel", 215, 5, correlation=3, device=0, stream=7),
        x("cudaMemcpyAsync", "cuda_runtime", 300, 2, correlation=4),
        x("cudaMemcpyAsync", "cuda_runtime", 301, 2, correlation=5),
        x("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", 310, 10, correlation=4, device=0, stream=7, bytes=20000),
        x("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", 315, 10, correlation=5, device=0, stream=8, bytes=5000),
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 10, "tid": 11, "ts": 90,
         "args": {"Device Type": 1, "Device Id": 0, "Bytes": 512, "Total Allocated": 512, "Addr": 1}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 10, "tid": 11, "ts": 90,
         "args": {"Device Type": 1, "Device Id": 0, "Bytes": 256, "Total Allocated": 768, "Addr": 2}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 10, "tid": 11, "ts": 400,
         "args": {"Device Type": 1, "Device Id": 0, "Bytes": -512, "Total Allocated": 256, "Addr": 1}},
    ]
    path = write_trace(tmp_path / "made.json", events)
    run_id = traceduck.ingest(path, store=store)[0].run_id
    out = tmp_path / "out.json"
    result = traceduck.export(run_id, out, store=store, counters="queue,memory,bandwidth")
    got, *_ = check_counters(out, events)
    # by hand: stream 7 queue 1 at 100, 2 at 110, 1 at 120, 0 at 150, 1 at 200 (graph), 0 at 210, 1 at 300, 0 at 310
    assert got["Launch queue (stream 7)"] == [(100000, 1), (110000, 2), (120000, 1), (150000, 0), (200000, 1),
                                              (210000, 0), (300000, 1), (310000, 0)]
    assert got["Allocated memory (device type 1:0)"] == [(90000, 768), (400000, 256)]
    # 20000 B in 10 us = 2 GB/s, plus 5000 B in 10 us = 0.5 GB/s while both run
    assert got["Memory bandwidth HtoD (GB/s)"] == [(310000, 2.0), (315000, 2.5), (320000, 0.5), (325000, 0.0)]
    assert result.counters == sum(map(len, got.values())) and result.events == len(events)
    # everything else exported exactly as ingested
    doc = json.loads(out.read_text())
    assert [e for e in doc["traceEvents"] if e.get("ph") != "C"] == json.loads(path.read_text())["traceEvents"]


def test_counters_over_a_time_range_start_with_the_value_at_its_start(tmp_path, store):
    events = [x("cudaLaunchKernel", "cuda_runtime", 100, 5, correlation=1),
              x("cudaLaunchKernel", "cuda_runtime", 110, 5, correlation=2),
              x("k1", "kernel", 200, 30, correlation=1, device=0, stream=7),
              x("k2", "kernel", 300, 10, correlation=2, device=0, stream=7)]
    run_id = traceduck.ingest(write_trace(tmp_path / "t.json", events), store=store)[0].run_id
    out = tmp_path / "w.json"
    traceduck.export(run_id, out, store=store, start_ns=150_000, end_ns=250_000, counters=["queue"])
    assert exported_counters(out) == {"Launch queue (stream 7)": [(150000, 2), (200000, 1)]}


def test_counter_errors(tmp_path, samples_store):
    from traceduck.errors import ExportError

    with pytest.raises(ExportError, match="unknown counter 'queues'"):
        traceduck.export("buggy", tmp_path / "o.json", store=samples_store, counters="queue,queues")
    with pytest.raises(ExportError, match="--counters applies to Chrome traces"):
        traceduck.export("buggy", tmp_path / "o.txt", store=samples_store, format="folded", counters="memory")


def test_counters_of_a_shared_trace(tmp_path, store):
    """A real H100 trace with [memory] events (CPU and GPU), a copy and kernels (2 s)."""
    path = shared_dir() / BERT
    run_id = traceduck.ingest(path, store=store)[0].run_id
    out = tmp_path / "bert.json"
    traceduck.export(run_id, out, store=store, counters="queue,memory,bandwidth")
    got, queue, memory, bandwidth = check_counters(out, trace_events(load_json(path)))
    assert set(memory) == {"cpu", "device type 1:0"} and len(got["Allocated memory (device type 1:0)"]) > 100


@pytest.mark.slow  # 8 s: 109k events
def test_counters_and_series_of_a_large_trace(tmp_path, store):
    """HTA's trace whose stream 7 queues 958 launches: the counters, and the time series macros
    against the same plain-json sweeps (bucket means, time at or above a threshold)."""
    path = shared_dir() / GPU_TRACE
    run_id = traceduck.ingest(path, store=store)[0].run_id
    out = tmp_path / "big.json"
    traceduck.export(run_id, out, store=store, counters="queue,bandwidth")
    events = trace_events(load_json(path))
    _, queue, _, bandwidth = check_counters(out, [e for e in events if e.get("name") != "[memory]"])
    q7 = queue[0, 7]
    assert max(v for _, v in q7) == 958
    starts = [ns(e["ts"]) for e in events if e.get("ph") == "X" and "dur" in e]
    origin = min(starts)
    bucket = 1_000_000
    want_mean: dict[int, float] = defaultdict(float)
    for (t, v), (t2, _) in zip(q7, q7[1:]):
        for b in range((t - origin) // bucket, (t2 - 1 - origin) // bucket + 1):
            lo, hi = max(t - origin, b * bucket), min(t2 - origin, (b + 1) * bucket)
            want_mean[b] += v * (hi - lo) / bucket
    full = sum(t2 - t for (t, v), (t2, _) in zip(q7, q7[1:]) if v >= 500)
    with traceduck.open(store) as db:
        rows = db.sql("SELECT bucket, mean_queue_length FROM queue_length_series(1000000) "
                      "WHERE stream = 7 ORDER BY bucket").fetchall()
        assert dict(rows) == pytest.approx(dict(want_mean))
        ((full_ns, peak),) = db.sql("SELECT full_ns, peak_queue_length FROM queue_full_time(max_queue_length := 500) "
                                    "WHERE stream = 7").fetchall()
        assert (full_ns, peak) == (full, 958)
        assert db.sql("SELECT count(*) FROM queue_full_time()").fetchall() == [(0,)]  # HTA's 1024: never full
        bw = dict(db.sql("SELECT kind, sum(bytes) FROM memory_bw_series(1000000) GROUP BY kind").fetchall())
    moved = defaultdict(int)
    for e in events:
        if e.get("cat") in ("gpu_memcpy", "gpu_memset"):
            moved["Memset" if e["cat"] == "gpu_memset" else e["name"].split()[1]] += e["args"]["bytes"]
    assert bw == pytest.approx(dict(moved))
