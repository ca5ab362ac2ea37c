"""The critical-path report and view: generated steps whose critical path is known by construction
(CPU-bound, GPU-bound, waiting on a stream sync and on a device sync), the path tiling each step,
and HTA's own output on its simple_add trace. Expected numbers are worked out by hand from the
generated layout, or read from the trace JSON with plain Python."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal

import pytest

import traceduck

from conftest import load_json, run_report, shared_dir, trace_events, write_trace

PARTS = ["cpu_ns", "gpu_compute_ns", "communication_ns", "gpu_copy_ns", "launch_ns", "kernel_gap_ns", "sync_ns",
         "unattributed_ns"]
US = 1000  # ns per us
HTA_E2E = "public/facebookresearch__HolisticTraceAnalysis/tests/data/critical_path/end_to_end/simple_add/"


def generated() -> list[dict]:
    """Six steps on one CPU thread (times in us):
    1 CPU-bound: two short kernels done long before the CPU window ends in a sync that waits for nothing;
    2 GPU-bound: a kernel, a copy and an all-reduce queued back to back on stream 7 outlive the CPU window;
    3 a cudaStreamSynchronize on stream 7 waits for a kernel (a kernel on stream 13 ends later, inside the call);
    4 a cudaDeviceSynchronize waits for the later of two kernels on two streams;
    5, 6 a GPU-bound step whose kernels run into the next one (step 5's window ends where step 6 begins), which
         waits for its own kernel queued behind them;
    7 a kernel waits for one on another stream (cudaStreamWaitEvent), and a stream sync for it."""
    events = []

    def cpu(name, ts, dur, cat="cpu_op", **args):
        events.append({"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args})

    def launch(ts, corr, name, start, end, stream, cat="kernel", call="cudaLaunchKernel"):
        cpu(call, ts, 5, cat="cuda_runtime", correlation=corr)
        events.append({"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": start, "dur": end - start,
                       "args": {"device": 0, "stream": stream, "correlation": corr}})

    for n in range(1, 5):
        cpu(f"ProfilerStep#{n}", 2000 * (n - 1), 500 if n == 2 else 1000, cat="user_annotation")
    # step 1: window [0, 1000]
    cpu("aten::add", 90, 30)
    launch(100, 1, "add_kernel", 110, 150, 7)
    launch(500, 2, "add_kernel", 510, 560, 7)
    cpu("cudaStreamSynchronize", 900, 10, cat="cuda_runtime", correlation=3)
    # step 2: CPU window [2000, 2500], window [2000, 3000] (GPU end)
    launch(2010, 11, "gemm_kernel", 2020, 2400, 7)
    launch(2020, 12, "Memcpy DtoD (Device -> Device)", 2405, 2800, 7, cat="gpu_memcpy", call="cudaMemcpyAsync")
    launch(2030, 13, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 2800, 3000, 7)
    # step 3: window [4000, 5000]
    launch(4010, 21, "gemm_kernel", 4100, 4800, 7)
    launch(4015, 22, "elementwise_kernel", 4700, 4805, 13)
    cpu("cudaStreamSynchronize", 4020, 790, cat="cuda_runtime", correlation=23)
    events.append({"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 7, "ts": 4800, "dur": 8,
                   "args": {"stream": 7, "device": 0, "correlation": 23, "cuda_sync_kind": "Stream Sync"}})
    # step 4: window [6000, 7000]
    launch(6010, 31, "gemm_kernel", 6050, 6500, 7)
    launch(6020, 32, "gemm_kernel", 6100, 6700, 13)
    cpu("cudaDeviceSynchronize", 6030, 680, cat="cuda_runtime", correlation=33)
    # step 5: CPU window [8000, 8500], window [8000, 8900]; its two kernels run into step 6, whose kernel
    # queues behind them and whose sync waits for it: step 6's path starts inside step 5's first kernel
    cpu("ProfilerStep#5", 8000, 500, cat="user_annotation")
    cpu("ProfilerStep#6", 8600, 1000, cat="user_annotation")
    launch(8010, 41, "gemm_a", 8020, 8700, 7)
    launch(8020, 42, "gemm_b", 8700, 8900, 7)
    launch(8610, 51, "gemm_c", 8900, 9000, 7)
    cpu("cudaStreamSynchronize", 8620, 390, cat="cuda_runtime", correlation=52)
    # step 7: [11000, 12000]; stream 7 waits (cudaStreamWaitEvent) for an event recorded on stream 13
    # after wait_src, so wait_dst starts 10 us after wait_src ends
    cpu("ProfilerStep#7", 11000, 1000, cat="user_annotation")
    launch(11010, 61, "wait_src", 11020, 11600, 13)
    cpu("cudaEventRecord", 11020, 3, cat="cuda_runtime", correlation=62)
    cpu("cudaStreamWaitEvent", 11030, 3, cat="cuda_runtime", correlation=63)
    events.append({"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "pid": 0, "tid": 7, "ts": 11031, "dur": 1,
                   "args": {"stream": 7, "device": 0, "correlation": 63, "wait_on_stream": 13,
                            "wait_on_cuda_event_record_corr_id": 62, "cuda_sync_kind": "Stream Wait Event"}})
    launch(11040, 64, "wait_dst", 11610, 11700, 7)
    cpu("cudaStreamSynchronize", 11050, 660, cat="cuda_runtime", correlation=65)
    return events


# per step: the breakdown worked out by hand from the layout above (us)
EXPECTED = {
    1: {"cpu_ns": 990, "sync_ns": 10},
    2: {"cpu_ns": 10, "launch_ns": 10, "gpu_compute_ns": 380, "kernel_gap_ns": 5, "gpu_copy_ns": 395,
        "communication_ns": 200},
    3: {"cpu_ns": 10 + 190, "launch_ns": 90, "gpu_compute_ns": 700, "sync_ns": 10},
    4: {"cpu_ns": 20 + 290, "launch_ns": 80, "gpu_compute_ns": 600, "sync_ns": 10},
    5: {"cpu_ns": 10, "launch_ns": 10, "gpu_compute_ns": 580},  # cut at step 6's start (8600 us), inside gemm_a
    6: {"gpu_compute_ns": 100 + 200 + 100, "sync_ns": 10, "cpu_ns": 590},
    7: {"cpu_ns": 10 + 290, "launch_ns": 10, "gpu_compute_ns": 580 + 90, "kernel_gap_ns": 10, "sync_ns": 10},
}
# the path's elements in time order (kind, event name)
EXPECTED_ELEMENTS = {
    1: [("cpu", None), ("sync", "cudaStreamSynchronize"), ("cpu", None)],
    2: [("cpu", None), ("launch", "cudaLaunchKernel"), ("gpu", "ncclDevKernel_AllReduce_Sum_f32_RING_LL")],
    3: [("cpu", None), ("launch", "cudaLaunchKernel"), ("gpu", "gemm_kernel"), ("sync", "cudaStreamSynchronize"),
        ("cpu", None)],
    4: [("cpu", None), ("launch", "cudaLaunchKernel"), ("gpu", "gemm_kernel"), ("sync", "cudaDeviceSynchronize"),
        ("cpu", None)],
    # the window ends inside gemm_a (gemm_b starts after step 6 began)
    5: [("cpu", None), ("launch", "cudaLaunchKernel"), ("gpu", "gemm_a")],
    6: [("gpu", "gemm_a"), ("kernel_gap", "gemm_b"), ("gpu", "gemm_c"), ("sync", "cudaStreamSynchronize"), ("cpu", None)],
    7: [("cpu", None), ("launch", "cudaLaunchKernel"), ("gpu", "wait_src"), ("stream_wait", "wait_dst"), ("gpu", "wait_dst"),
        ("sync", "cudaStreamSynchronize"), ("cpu", None)],
}


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("critpath")
    trace = write_trace(tmp / "steps.json", generated())
    traceduck.ingest(trace, store=tmp / "store", name="steps")
    return tmp / "store", trace_events(load_json(trace))


def rows(store, name="critical-path", runs=None):
    with traceduck.open(store) as db:
        columns, data = run_report(db, name, runs=runs, keep_run_columns=True)
    return [dict(zip(columns, r)) for r in data]


def step_lengths(events) -> dict[int, int]:
    """End-to-end time per step from the JSON: CPU window start to the later of its end and the end
    of the GPU work launched inside it, but no later than the next step's start (windows do not overlap)."""
    launches = {e["args"]["correlation"]: e["ts"] for e in events if e.get("cat") == "cuda_runtime"}
    starts = sorted(e["ts"] for e in events if e.get("cat") == "user_annotation")
    out = {}
    for e in events:
        if e.get("cat") == "user_annotation":
            n, start, end = int(e["name"].split("#")[1]), e["ts"], e["ts"] + e["dur"]
            gpu_ends = [g["ts"] + g["dur"] for g in events if g.get("cat") in ("kernel", "gpu_memcpy")
                        and start <= launches[g["args"]["correlation"]] <= end]
            after = [t for t in starts if t > start]
            out[n] = (min([max([end, *gpu_ends]), *after]) - start) * US
    return out


def test_breakdown_by_construction(gen):
    store, events = gen
    got = {r["step"]: r for r in rows(store)}
    lengths = step_lengths(events)
    assert sorted(got) == [1, 2, 3, 4, 5, 6, 7]
    for step, parts in EXPECTED.items():
        r = got[step]
        assert r["dur_ns"] == lengths[step] == sum(parts.values()) * US
        assert {k: r[k] for k in PARTS} == {k: parts.get(k, 0) * US for k in PARTS}, step
        assert sum(r[k] for k in PARTS) == r["dur_ns"]
    assert [got[s]["bound"] for s in range(1, 8)] == ["cpu", "gpu_copy", "gpu_compute", "gpu_compute", "gpu_compute",
                                                      "cpu", "gpu_compute"]
    assert [got[s]["kernels_on_path"] for s in range(1, 8)] == [0, 3, 1, 1, 1, 3, 2]


def test_elements_in_order_tile_the_step(gen):
    store, _ = gen
    with traceduck.open(store) as db:
        data = db.sql("""SELECT p.step, p.position, p.kind, e.name, p.ts_ns, p.dur_ns, p.window_start_ns, p.window_end_ns
                         FROM critical_path p LEFT JOIN events e USING (run_id, event_id) ORDER BY step, position""").fetchall()
    for step, expected in EXPECTED_ELEMENTS.items():
        mine = [r for r in data if r[0] == step]
        assert [(r[2], r[3]) for r in mine] == expected, step
        # contiguous from the window's start to its end
        assert mine[0][4] == mine[0][6]
        assert all(a[4] + a[5] == b[4] for a, b in zip(mine, mine[1:]))
        assert mine[-1][4] + mine[-1][5] == mine[-1][7]


def hta_key(e) -> tuple:
    return e["cat"], e["name"], str(e["tid"]), int(Decimal(str(e["ts"])) * 1000)


@pytest.mark.slow  # 3 s
def test_hta_simple_add(tmp_path):
    """HTA's end-to-end output for its simple_add trace (the whole trace, no annotation) marks the events on
    its critical path with args.critical = 1; the events our path covers, read from the input JSON, match
    all but HTA's last six GPU events (see README: a sync that waited for nothing)."""
    src = shared_dir() / HTA_E2E
    with gzip.open(src / "output/overlaid_critical_path_trace.json.gz") as f:
        hta = {hta_key(e) for e in json.load(f, parse_float=Decimal)["traceEvents"]
               if e.get("ph") == "X" and e.get("args", {}).get("critical") == 1}
    events = [e for e in trace_events(load_json(src / "input/trace.json.gz")) if e.get("ph") == "X"]
    traceduck.ingest(src / "input/trace.json.gz", store=tmp_path / "s", name="simple_add")
    with traceduck.open(tmp_path / "s") as db:
        path = db.sql("SELECT kind, tid, stream, ts_ns, dur_ns FROM critical_path").fetchall()
    (report,) = rows(tmp_path / "s")

    def ns(v):
        return int(Decimal(str(v)) * 1000)

    ours = set()
    for kind, tid, stream, ts, dur in path:
        for e in events:
            if ns(e["ts"]) < ts + dur and ns(e["ts"]) + ns(e["dur"]) > ts and (
                    (kind == "gpu" and e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset") and e["args"]["stream"] == stream)
                    or (kind != "gpu" and e["cat"] in ("cpu_op", "cuda_runtime") and str(e["tid"]) == tid)):
                ours.add(hta_key(e))
    assert len(hta) == 624
    missed = hta - ours
    assert len(hta & ours) == 618
    assert {k[0] for k in missed} == {"kernel", "gpu_memset"}
    # they are the work before the trace's last cudaDeviceSynchronize, done before the call began: HTA
    # links the sync to them anyway, the walk goes on along the CPU thread
    last_sync = max((e for e in events if e["name"] == "cudaDeviceSynchronize"), key=lambda e: ns(e["ts"]))
    assert len(missed) == 6
    assert all(k[3] < ns(last_sync["ts"]) for k in missed)
    # the window: first CPU event to the last one (HTA's path spans the same)
    cpu = [e for e in events if e["cat"] in ("cpu_op", "cuda_runtime")]
    assert report["dur_ns"] == max(ns(e["ts"]) + ns(e["dur"]) for e in cpu) - min(ns(e["ts"]) for e in cpu)
    assert sum(report[k] for k in PARTS) == report["dur_ns"]


@pytest.mark.slow  # 15 s, plus ingesting the shared traces
def test_path_tiles_every_step_of_every_shared_trace(shared_store):
    """On every shared trace, each step's elements follow one another from the window's start to its end
    with no gap or overlap, every part is non-negative, and the parts add up to each element and step."""
    path, results = shared_store
    with traceduck.open(path) as db:
        broken = db.sql(f"""
            WITH p AS (SELECT *, lag(ts_ns + dur_ns) OVER (PARTITION BY run_id, step ORDER BY position) AS prev_end_ns,
                              count(*) OVER (PARTITION BY run_id, step) AS n FROM critical_path)
            SELECT run_id, step, position, kind FROM p
            WHERE ({' + '.join(PARTS)}) <> dur_ns OR least({', '.join(PARTS)}, dur_ns) < 0
               OR (position = 1 AND ts_ns <> window_start_ns) OR (position > 1 AND ts_ns <> prev_end_ns)
               OR (position = n AND ts_ns + dur_ns <> window_end_ns)""").fetchall()
        columns, data = run_report(db, "critical-path", keep_run_columns=True)
        gpu_runs = {r[0] for r in db.sql("SELECT DISTINCT run_id FROM gpu_kernels").fetchall()}
        # the steps' windows of a run do not overlap
        overlapping = db.sql("""SELECT run_id, step FROM (SELECT DISTINCT run_id, step, window_start_ns, window_end_ns FROM critical_path)
                                QUALIFY window_end_ns > lead(window_start_ns) OVER (PARTITION BY run_id ORDER BY window_start_ns)""").fetchall()
    assert broken == [] and overlapping == []
    report = [dict(zip(columns, r)) for r in data]
    assert all(sum(r[k] for k in PARTS) == r["dur_ns"] > 0 for r in report)
    # every GPU run has a path, and the GPU shows up on some of them
    assert gpu_runs <= {r["run_id"] for r in report}
    assert sum(r["gpu_compute_ns"] for r in report) > 0


def _sync_trace() -> list[dict]:
    """Synchronizing calls and the GPU work they may wait for (times in us): a device sync during
    which two kernels end at the same time; a stream sync whose Stream Sync record names stream 7
    but no device (a later kernel on stream 13 ends inside it too); a stream sync that waits for
    nothing; then bench/make_syncs.py's rounds of launches each ended by a device sync."""
    import sys

    from conftest import ROOT

    events = []

    def kernel(corr, start, end, stream):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": start - 5,
                       "dur": 1, "args": {"correlation": corr}})
        events.append({"ph": "X", "cat": "kernel", "name": f"k{corr}", "pid": 0, "tid": stream, "ts": start,
                       "dur": end - start, "args": {"device": 0, "stream": stream, "correlation": corr}})

    def sync(name, corr, ts, dur, **record):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                       "args": {"correlation": corr}})
        if record:
            events.append({"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": record["stream"],
                           "ts": ts + dur - 1, "dur": 1, "args": {**record, "correlation": corr}})

    kernel(1, 100, 200, 7)
    kernel(2, 120, 200, 13)
    sync("cudaDeviceSynchronize", 3, 150, 100)
    kernel(4, 300, 400, 7)
    kernel(5, 310, 450, 13)
    sync("cudaStreamSynchronize", 6, 320, 200, stream=7)
    sync("cudaStreamSynchronize", 7, 600, 10, stream=7, device=0)
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from make_syncs import events as rounds
    finally:
        sys.path.pop(0)
    for e in rounds(50, 3):  # after the hand-made calls, with correlations of their own
        e["ts"] += 1000
        e["args"]["correlation"] += 100
        events.append(e)
    return events


def test_each_sync_waits_for_the_work_that_ended_last_while_it_blocked(tmp_path):
    """critical_path_syncs against the trace read with json: of the GPU work that ended after the call
    began and by its return (on the stream its Stream Sync record names, on that device when it names
    one), the latest end, ties to the lowest event id; NULL when none ended meanwhile."""
    events = _sync_trace()
    trace = write_trace(tmp_path / "syncs.json", events)
    traceduck.ingest(trace, store=tmp_path / "store")
    records = {e["args"]["correlation"]: e["args"] for e in events if e["name"] == "Stream Sync"}
    expected = {}
    for i, e in enumerate(events):
        if e["cat"] != "cuda_runtime" or not e["name"].endswith("Synchronize"):
            continue
        start, end = e["ts"] * US, (e["ts"] + e["dur"]) * US
        rec = records.get(e["args"]["correlation"], {})
        found = [((g["ts"] + g["dur"]) * US, j) for j, g in enumerate(events) if g["cat"] == "kernel"
                 and start < (g["ts"] + g["dur"]) * US <= end
                 and ("stream" not in rec or g["args"]["stream"] == rec["stream"])
                 and ("device" not in rec or g["args"]["device"] == rec["device"])]
        last = max(t for t, _ in found) if found else None
        expected[i] = (min(j for t, j in found if t == last), last) if found else (None, None)
    with traceduck.open(tmp_path / "store") as db:
        (run_id,) = [r["run_id"] for r in db.runs()]
        got = {r[0]: (r[1], r[2]) for r in db.sql(
            f"SELECT event_id, awaited_event_id, awaited_end_ns FROM critical_path_syncs(['{run_id}'])").fetchall()}
    assert got == expected and len(expected) == 53
    first_sync = next(i for i, e in enumerate(events) if e["name"] == "cudaDeviceSynchronize")
    assert events[got[first_sync][0]]["name"] == "k1"  # two kernels ended at 200 us: the first in the trace
    assert [events[got[i][0]]["name"] for i in sorted(got)[1:2]] == ["k4"]  # stream 7 only: not k5 (450 us)
    assert got[sorted(got)[2]] == (None, None)


def _ns(v) -> int:
    return int(Decimal(str(v)) * 1000)


def _report_and_path(tmp_path, events, name):
    trace = write_trace(tmp_path / f"{name}.json", events)
    traceduck.ingest(trace, store=tmp_path / "store", name=name)
    with traceduck.open(tmp_path / "store") as db:
        path = db.sql("""SELECT p.step, p.kind, e.name, p.ts_ns, p.dur_ns, p.edge FROM critical_path p
                         LEFT JOIN events e USING (run_id, event_id) ORDER BY step, position""").fetchall()
    return {r["step"]: r for r in rows(tmp_path / "store")}, path


def _blocking_copy_trace() -> list[dict]:
    """Two steps on one CPU thread (us). Step 1: a kernel runs 110-700 on stream 7; a cudaMemcpyAsync
    device-to-pageable-host call (200-710) waits for it, its copy runs 702-706 behind it. Step 2: the
    same with a copy into pinned memory, whose call returns at once: an async copy, CPU time."""
    events = []
    for n, base, dst, call_dur in ((1, 0, "Pageable", 510), (2, 2000, "Pinned", 5)):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1,
                       "ts": base, "dur": 1000})
        for corr, call, ts, dur, cat, name, start, end in (
                (10 * n + 1, "cudaLaunchKernel", base + 100, 5, "kernel", "gemm_kernel", base + 110, base + 700),
                (10 * n + 2, "cudaMemcpyAsync", base + 200, call_dur, "gpu_memcpy", f"Memcpy DtoH (Device -> {dst})",
                 base + 702, base + 706)):
            events.append({"ph": "X", "cat": "cuda_runtime", "name": call, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                           "args": {"correlation": corr}})
            events.append({"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": start, "dur": end - start,
                           "args": {"device": 0, "stream": 7, "correlation": corr}})
    return events


def test_blocking_copy_puts_the_awaited_kernel_on_the_path(tmp_path):
    """A device-to-pageable-host cudaMemcpyAsync blocks until its copy is done, which waits for the kernel
    queued before it: the kernel and the copy are on the path as GPU time, only the rest of the call
    (copy end to return) is sync, and the CPU time is what lies outside the call. A pinned copy's call
    returns at once and stays CPU time. Expected values read from the trace with plain Python."""
    events = _blocking_copy_trace()
    got, path = _report_and_path(tmp_path, events, "copies")
    by = {(e["name"], e["ts"] // 2000 + 1): e for e in events}
    step, kernel, call, copy = (by[k, 1] for k in ("ProfilerStep#1", "gemm_kernel", "cudaMemcpyAsync",
                                                   "Memcpy DtoH (Device -> Pageable)"))
    launch = next(e for e in events if e["name"] == "cudaLaunchKernel")
    expected = {
        "gpu_compute_ns": kernel["dur"], "gpu_copy_ns": copy["dur"],
        "kernel_gap_ns": copy["ts"] - (kernel["ts"] + kernel["dur"]),  # stream busy: the copy queued behind the kernel
        "sync_ns": call["ts"] + call["dur"] - (copy["ts"] + copy["dur"]),  # the call after its copy ended
        "launch_ns": kernel["ts"] - launch["ts"],
        "cpu_ns": (launch["ts"] - step["ts"]) + (step["ts"] + step["dur"] - call["ts"] - call["dur"]),
    }
    assert {k: got[1][k] for k in PARTS} == {k: expected.get(k, 0) * US for k in PARTS}
    assert got[1]["dur_ns"] == step["dur"] * US and got[1]["bound"] == "gpu_compute"
    assert [(k, n, e) for s, k, n, _, _, e in path if s == 1] == [
        # one gpu element: the chain of the kernel and the copy queued behind it, named by its last work
        ("cpu", None, None), ("launch", "cudaLaunchKernel", None), ("gpu", "Memcpy DtoH (Device -> Pageable)", None),
        ("sync", "cudaMemcpyAsync", "blocking_copy"), ("cpu", None, None)]
    assert got[1]["kernels_on_path"] == 2
    # the pinned copy did not block: the whole step is CPU time
    assert {k: got[2][k] for k in PARTS} == {k: (by["ProfilerStep#2", 2]["dur"] * US if k == "cpu_ns" else 0) for k in PARTS}


def _unrecorded_wait_trace() -> list[dict]:
    """One step (us): an RCCL all-reduce on stream 13 (110-700); a hipStreamWaitEvent (no `Stream Wait
    Event` record, as in ROCm traces) makes stream 7 wait for it, so gemm (launched at 130) starts at 705
    although the stream's previous kernel ended at 200; a hipDeviceSynchronize waits for gemm."""
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 1000}]

    def call(name, ts, dur, corr):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                       "args": {"correlation": corr}})

    def kernel(corr, name, start, end, stream):
        events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": start,
                       "dur": end - start, "args": {"device": 0, "stream": stream, "correlation": corr}})

    call("hipLaunchKernel", 50, 5, 1)
    kernel(1, "prep_kernel", 60, 200, 7)
    call("hipExtLaunchKernel", 100, 5, 2)
    kernel(2, "ncclDevKernel_Generic_4", 110, 700, 13)
    call("hipEventRecord", 110, 2, 3)
    call("hipStreamWaitEvent", 120, 2, 4)
    call("hipLaunchKernel", 130, 5, 5)
    kernel(5, "gemm_kernel", 705, 900, 7)
    call("hipDeviceSynchronize", 140, 770, 6)
    return events


def test_unrecorded_stream_wait_is_inferred(tmp_path):
    """Without Kineto's record of the wait, the waiting kernel's predecessor is the other stream's work that
    ended last before it started (edge inferred_wait), so the RCCL kernel is on the path as communication
    rather than the gap on stream 7 as kernel_gap. Expected values read from the trace with plain Python."""
    events = _unrecorded_wait_trace()
    got, path = _report_and_path(tmp_path, events, "waits")
    by = {e["name"]: e for e in events}
    step, comm, gemm, sync = by["ProfilerStep#1"], by["ncclDevKernel_Generic_4"], by["gemm_kernel"], by["hipDeviceSynchronize"]
    # the work on other streams than gemm's that ended last by gemm's start
    other = max((e for e in events if e["cat"] == "kernel" and e["args"]["stream"] != gemm["args"]["stream"]
                 and e["ts"] + e["dur"] <= gemm["ts"]), key=lambda e: e["ts"] + e["dur"])
    assert other is comm
    comm_launch = next(e for e in events if e["cat"] == "cuda_runtime" and e["args"]["correlation"] == comm["args"]["correlation"])
    expected = {
        "communication_ns": comm["dur"], "gpu_compute_ns": gemm["dur"],
        "kernel_gap_ns": gemm["ts"] - (comm["ts"] + comm["dur"]),
        "sync_ns": sync["ts"] + sync["dur"] - (gemm["ts"] + gemm["dur"]),
        "launch_ns": comm["ts"] - comm_launch["ts"],
        "cpu_ns": (comm_launch["ts"] - step["ts"]) + (step["ts"] + step["dur"] - sync["ts"] - sync["dur"]),
    }
    assert {k: got[1][k] for k in PARTS} == {k: expected.get(k, 0) * US for k in PARTS}
    assert sum(expected.values()) == step["dur"]
    assert got[1]["bound"] == "communication" and got[1]["inferred_waits"] == 1
    assert [(k, n, e) for _, k, n, _, _, e in path] == [
        ("cpu", None, None), ("launch", "hipExtLaunchKernel", None), ("gpu", "ncclDevKernel_Generic_4", None),
        ("stream_wait", "gemm_kernel", "inferred_wait"), ("gpu", "gemm_kernel", None),
        ("sync", "hipDeviceSynchronize", "sync_call"), ("cpu", None, None)]


def test_cpu_only_path_walks_the_outermost_ops(tmp_path):
    """On a run without GPU work the path within each step is the chain of outermost CPU ops on the step's
    thread (clipped to the step) and the time between them; the ops and their times are read from the
    seed trace with plain json, outermost meaning no other cpu_op on the thread encloses the op."""
    from conftest import ROOT

    src = ROOT / "tests/data/seeds/indexer_buggy.json.gz"
    events = [e for e in trace_events(load_json(src)) if e.get("ph") == "X"]
    traceduck.ingest(src, store=tmp_path / "store", name="seed")
    with traceduck.open(tmp_path / "store") as db:
        # times from the window's start (the store adds the trace's base time)
        path = db.sql("""SELECT p.step, p.kind, e.name, p.ts_ns - p.window_start_ns, p.dur_ns, p.cpu_ns FROM critical_path p
                         LEFT JOIN events e USING (run_id, event_id) ORDER BY step, position""").fetchall()
    report = {r["step"]: r for r in rows(tmp_path / "store")}
    steps = sorted((e for e in events if e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"])
    assert len(steps) == 3
    for st in steps:
        n, lo, hi = int(st["name"].split("#")[1]), _ns(st["ts"]), _ns(st["ts"]) + _ns(st["dur"])
        ops = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]), e["name"]) for e in events
               if e["cat"] == "cpu_op" and e["tid"] == st["tid"]]
        outer = sorted(o for o in ops if not any(p is not o and p[0] <= o[0] and o[1] <= p[1] and p[:2] != o[:2] for p in ops))
        expected, t = [], lo
        for a, b, name in outer:
            a, b = max(a, t), min(b, hi)
            if b <= a:
                continue
            if a > t:
                expected.append((None, t, a - t))
            expected.append((name, a, b - a))
            t = b
        if t < hi:
            expected.append((None, t, hi - t))
        mine = [r for r in path if r[0] == n]
        assert all(r[1] == "cpu" and r[5] == r[4] for r in mine)
        assert [(r[2], r[3], r[4]) for r in mine] == [(name, a - lo, d) for name, a, d in expected]
        assert sum(1 for e in expected if e[0]) > 50
        assert report[n]["cpu_ns"] == report[n]["dur_ns"] == hi - lo
        top = max((e for e in expected if e[0]), key=lambda e: e[2])
        assert (report[n]["longest_event"], report[n]["longest_event_ns"]) == (top[0], top[2])
