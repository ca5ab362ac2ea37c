"""The overview's findings: each fires on a trace where it must and stays quiet on one where it
must not, with the numbers computed here from the trace with plain json; findings are ranked by
the time at stake."""

from __future__ import annotations

import re
from collections import defaultdict
from decimal import Decimal

import pytest

import traceduck

from conftest import SAMPLES, interval_union, load_json, run_report, shared_dir, trace_events, union_length, write_trace
from test_nesting import _overlap_pairs

PUBLIC = "public/AMD-AGI__TraceLens/tests/traces"
TRACES = {
    "nccl": "public/facebookresearch__HolisticTraceAnalysis/tests/data/nccl_parser_config/nccl_data.json.gz",
    "compiled": f"{PUBLIC}/torch_compile_triton/trace.json.gz",  # one GPU kept busy by 12 long kernels
    "h100": f"{PUBLIC}/h100/gaunernst_bert-small-uncased__1016001.json.gz",
    "mi300": f"{PUBLIC}/mi300/gaunernst_bert-small-uncased__1016001.json.gz",
    "no_steps": "public/facebookresearch__HolisticTraceAnalysis/tests/data/with_gpu_user_annotation/step_based_trace_2543932.json.gz",
    "full": "cpu/full.json",
    "fixed": "cpu/fixed.json",
}
GPU_WORK = ("kernel", "gpu_memcpy", "gpu_memset")


def ns(v) -> int:
    return int(Decimal(v) * 1000)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("findings") / "store"
    for name, rel in TRACES.items():
        traceduck.ingest(shared_dir() / rel, store=path, name=name)
    return path


def findings(store, run):
    with traceduck.open(store) as db:
        columns, rows = run_report(db, "overview", runs=[run])
    rows = [dict(zip(columns, r)) for r in rows]
    return [r for r in rows if r["section"] == "finding"], rows


def one(rows, item):
    found = [r for r in rows if r["item"] == item]
    assert len(found) == 1, [r["item"] for r in rows]
    return found[0]


def _minus(a, b) -> int:
    """Length of union(a) not covered by union(b)."""
    total = 0
    b = interval_union(b)
    for s, e in interval_union(a):
        covered = sum(max(0, min(e, be) - max(s, bs)) for bs, be in b)
        total += e - s - covered
    return total


def _gpu_work(rel):
    """Per device: every kernel/memcpy/memset interval, and the compute and communication kernels."""
    per_device = defaultdict(lambda: {"all": [], "compute": [], "communication": []})
    for e in trace_events(load_json(shared_dir() / rel)):
        if e.get("ph") == "X" and e.get("cat") in GPU_WORK:
            iv = (ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]))
            d = per_device[e["args"].get("device", e["pid"])]
            d["all"].append(iv)
            if e["cat"] == "kernel":
                d["communication" if "nccl" in e["name"].lower() else "compute"].append(iv)
    return per_device


# --- on a trace made by hand, its numbers worked out here (fast) ------------------------------------


def X(name, ts, dur, cat="cpu_op", pid=1, tid=1, **args) -> dict:
    e = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    return {**e, "args": args} if args else e


# One step of 1000 us: aten::mm (600 us) and aten::add (50 us), nothing nested in them; then 10
# launches of 20 us each (700, 720, ... us) of kernels of 5 us that start 20 us after their launch,
# and one NCCL kernel of 40 us at 730 us on another stream of the same GPU.
HAND_GPU = [X("ProfilerStep#1", 0, 1000, "user_annotation"), X("aten::mm", 10, 600), X("aten::add", 620, 50)]
for _i in range(10):
    HAND_GPU.append(X("cudaLaunchKernel", 700 + 20 * _i, 20, "cuda_runtime", tid=2, correlation=100 + _i))
    HAND_GPU.append(X(f"gemm_{_i % 2}", 720 + 20 * _i, 5, "kernel", pid=0, tid=7, device=0, stream=7, correlation=100 + _i))
HAND_GPU.append(X("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 730, 40, "kernel", pid=0, tid=8, device=0, stream=8))


def test_findings_of_a_trace_made_by_hand(samples_store, tmp_path):
    traceduck.ingest(write_trace(tmp_path / "hand.json", HAND_GPU), store=samples_store, jobs=1)
    rows, everything = findings(samples_store, "hand")
    # CPU self time: 600 + 50 us, aten::mm has 600 / 650 = 92.3% of it
    f = one(rows, "dominant op")
    assert (f["value"], f["unit"], f["pct"], f["time_ns"]) == (92.3, "%", 92.3, 600_000)
    assert f["detail"] == ("aten::mm (input shapes not recorded: profile with record_shapes=True) (no Python stack: profile "
                           "with with_stack=True): 0.600 ms per step (0.600 ms over the one profiled step), 1.0 calls per "
                           "step; 92.3% of CPU self time")
    # every kernel ran 15 us shorter than its launch: the one step is launch-bound, 10 x 15 us at stake
    f = one(rows, "launch-bound steps")
    assert (f["value"], f["unit"], f["time_ns"]) == (1, "steps", 150_000)
    assert f["detail"].startswith("1 of 1 profiler steps are launch-bound: in them 10 of 10 kernels ran shorter")
    # the GPU's window is 720 to 905 us (185 us); busy: 10 x 5 us of gemm and the 40 us of NCCL, of which
    # 10 us run beside two gemm kernels (740-745, 760-765): 80 us, so idle 105 us = 56.8%
    f = one(rows, "GPU idle")
    assert (f["value"], f["time_ns"]) == (56.8, 105_000)
    assert f["detail"].startswith("gpu:0 was idle 56.8% of its own window (first to last GPU event, 0.185 ms): 0.105 ms ")
    # communication: 40 of the 80 us busy, 30 us of it with no compute beside it
    f = one(rows, "GPU communication")
    assert (f["value"], f["pct"], f["time_ns"]) == (50.0, 50.0, 30_000)
    assert "(0.040 ms), 0.030 ms of it not overlapped by compute (75.0% of communication exposed" in f["detail"]
    # ranked by the time at stake
    assert [r["item"] for r in rows] == ["dominant op", "launch-bound steps", "GPU idle", "GPU communication"]
    assert [r["position"] for r in rows] == [1, 2, 3, 4]
    assert [(r["item"], r["time_ns"]) for r in everything if r["section"] == "top kernel"] == [
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 40_000), ("gemm_0", 25_000), ("gemm_1", 25_000)]


def test_whole_cache_cast_of_the_buggy_sample(samples_store):
    """The samples' bug: the [16384, 1, 576] fp8 cache cast to bf16 whole, twice in every step."""
    doc = load_json(SAMPLES / "buggy.json.gz")
    casts = [e for e in doc["traceEvents"] if e.get("name") == "aten::to"
             and e["args"]["Input Dims"][0] == [16384, 1, 576]]
    steps = _steps(doc["traceEvents"])
    assert len(casts) == 6 and len(steps) == 3
    rows, _ = findings(samples_store, "buggy")
    f = one(rows, "largest copy group")
    assert f["value"] == round(16384 * 576 * (1 + 2) * len(casts) / len(steps) / 1e6, 3)  # fp8 read, bf16 written
    assert f["time_ns"] == sum(ns(c["dur"]) for c in casts)
    assert "([16384, 1, 576] float8_e4m3fn -> bfloat16, 2.0 calls per step, in every step) from " \
           "tinydecoder.py(31): _read_cache" in f["detail"]
    rows, _ = findings(samples_store, "fixed")
    assert not [r for r in rows if r["item"] == "largest copy group"]


def test_overlaps_that_touch_ops_make_a_finding(samples_store, tmp_path):
    hand = [X("ProfilerStep#1", 0, 1000, "user_annotation"), X("frame", 10, 100, "python_function"),
            X("aten::add", 50, 100), X("annotation", 60, 200, "user_annotation")]
    traceduck.ingest(write_trace(tmp_path / "overlap.json", hand), store=samples_store, jobs=1)
    rows, _ = findings(samples_store, "overlap")
    f = one(rows, "overlapping ops")
    # aten::add (50-150) against the frame (10-110) and the annotation (60-260)
    assert f["value"] == _overlap_pairs(hand, ops_only=True) == 2 and f["time_ns"] is None


@pytest.mark.slow  # 4 s
def test_gpu_idle_in_the_device_window(store):
    (device, work), = _gpu_work(TRACES["nccl"]).items()
    window = max(e for _, e in work["all"]) - min(s for s, _ in work["all"])
    idle = window - union_length(work["all"])
    assert idle >= 0.2 * window
    rows, _ = findings(store, "nccl")
    f = one(rows, "GPU idle")
    assert f["time_ns"] == idle
    assert f["value"] == f["pct"] == round(100 * idle / window, 1)
    assert f["detail"].startswith(f"gpu:{device} was idle {100 * idle / window:.1f}% of its own window")
    (_, busy), = _gpu_work(TRACES["compiled"]).items()
    window = max(e for _, e in busy["all"]) - min(s for s, _ in busy["all"])
    assert window - union_length(busy["all"]) < 0.2 * window  # back-to-back kernels
    rows, _ = findings(store, "compiled")
    assert not [r for r in rows if r["item"] == "GPU idle"]


@pytest.mark.slow  # 2 s
def test_share_of_gpu_time_in_communication(store):
    (device, work), = _gpu_work(TRACES["nccl"]).items()
    comm, busy = union_length(work["communication"]), union_length(work["all"])
    exposed = _minus(work["communication"], work["compute"])
    assert 0 < exposed < comm and comm >= 0.1 * busy
    rows, _ = findings(store, "nccl")
    f = one(rows, "GPU communication")
    assert f["value"] == round(100 * comm / busy, 1)
    assert f["time_ns"] == exposed  # the part no compute hides
    assert f"({comm / 1e6:.3f} ms), {exposed / 1e6:.3f} ms of it not overlapped by compute" in f["detail"]
    assert not any(d["communication"] for d in _gpu_work(TRACES["mi300"]).values())
    rows, _ = findings(store, "mi300")
    assert not [r for r in rows if r["item"] == "GPU communication"]


def _steps(events):
    return [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in events
            if e.get("cat") == "user_annotation" and re.fullmatch(r"ProfilerStep#\d+", e["name"])]


@pytest.mark.slow  # 3 s
def test_whole_buffer_copy_every_step(store):
    events = trace_events(load_json(shared_dir() / TRACES["full"]))
    steps = _steps(events)
    casts = [e for e in events if e.get("name") == "aten::to" and e["args"].get("Input Dims", [None])[0] == [65536, 1, 576]]
    assert all(any(s <= ns(c["ts"]) < e for c in casts) for s, e in steps)  # in every step
    rows, _ = findings(store, "full")
    f = one(rows, "largest copy group")
    assert f["value"] == round(65536 * 576 * 3 * len(casts) / len(steps) / 1e6, 3)  # fp8 read, bf16 written
    assert f["time_ns"] == sum(ns(c["dur"]) for c in casts)
    assert ", in every step) from gen.py(77): _read_cache" in f["detail"]
    rows, _ = findings(store, "fixed")
    assert not [r for r in rows if r["item"] == "largest copy group"]


def _launch_bound(rel):
    """(steps, launch-bound steps, their kernels, their short kernels, launch time beyond the short
    kernels) from plain json: a kernel is short when it ran shorter than the runtime call with its
    correlation; a step is launch-bound with 10 kernels or more, more than half of them short."""
    events = trace_events(load_json(shared_dir() / rel))
    calls = {e["args"]["correlation"]: e for e in events
             if e.get("cat") in ("cuda_runtime", "cuda_driver") and e.get("ph") == "X"
             and re.search(r"(?i)launch|memcpy|memset", e["name"]) and "correlation" in e.get("args", {})}
    steps = _steps(events) or [(float("-inf"), float("inf"))]  # no steps: the run is one
    per_step = defaultdict(lambda: [0, 0, 0])
    for k in events:
        call = calls.get(k.get("args", {}).get("correlation")) if k.get("cat") == "kernel" else None
        if call is None:
            continue
        step = next((i for i, (s, e) in enumerate(steps) if s <= ns(call["ts"]) < e), None)
        if step is None:
            continue
        short = ns(k["dur"]) < ns(call["dur"]) and "GraphLaunch" not in call["name"]
        per_step[step][0] += 1
        per_step[step][1] += short
        per_step[step][2] += (ns(call["dur"]) - ns(k["dur"])) if short else 0
    bound = [v for v in per_step.values() if v[0] >= 10 and 2 * v[1] > v[0]]
    return len(per_step), len(bound), sum(v[0] for v in bound), sum(v[1] for v in bound), sum(v[2] for v in bound)


@pytest.mark.slow  # 2 s
def test_launch_bound_steps(store):
    steps, bound, kernels, short, gap = _launch_bound(TRACES["h100"])
    assert bound == steps == 1
    rows, _ = findings(store, "h100")
    f = one(rows, "launch-bound steps")
    assert (f["value"], f["unit"], f["time_ns"]) == (bound, "steps", gap)
    assert f["detail"].startswith(f"1 of 1 profiler steps are launch-bound: in them {short} of {kernels} kernels ran shorter")
    # the same model on another GPU: most kernels outlast their launch
    assert _launch_bound(TRACES["mi300"])[1] == 0
    rows, _ = findings(store, "mi300")
    assert not [r for r in rows if r["item"] == "launch-bound steps"]
    # a run without profiler steps counts as one step
    steps, bound, kernels, short, gap = _launch_bound(TRACES["no_steps"])
    f = one(findings(store, "no_steps")[0], "launch-bound steps")
    assert (f["value"], f["unit"], f["time_ns"]) == (1, "run", gap)
    assert f"{short} of {kernels} kernels ran shorter" in f["detail"]


@pytest.mark.slow  # 2 s
def test_overlaps_make_a_finding_only_when_they_touch_ops(store):
    events = trace_events(load_json(shared_dir() / TRACES["full"]))
    total, with_ops = _overlap_pairs(events), _overlap_pairs(events, ops_only=True)
    assert total > 0 and with_ops == 0  # record_function annotations against Python frames
    rows, everything = findings(store, "full")
    assert not [r for r in rows if "overlap" in r["item"]]
    warning = one([r for r in everything if r["section"] == "warning"], "overlapping events")
    assert warning["value"] == total and f", {with_ops} of them with a CPU op" in warning["detail"]
    # overlaps that touch ops: test_overlaps_that_touch_ops_make_a_finding


@pytest.mark.parametrize("run", list(TRACES))
@pytest.mark.slow  # 3 s
def test_findings_are_ranked_by_time_at_stake(store, run):
    rows, everything = findings(store, run)
    assert [r["position"] for r in rows] == list(range(1, len(rows) + 1))
    timed = [r["time_ns"] for r in rows if r["time_ns"] is not None]
    assert timed == sorted(timed, reverse=True)
    assert all(r["time_ns"] is None for r in rows[len(timed):])  # untimed findings last
    sections = [r["section"] for r in everything]
    order = ["run", "finding", "top op", "top kernel", "top copy", "warning"]
    assert sections == sorted(sections, key=order.index)
