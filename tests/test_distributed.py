"""Distributed training analyses: comm-overlap, collective bandwidth, idle time breakdown and launch
queue, time blocked in synchronizing calls, the straggler of a job and the overview's distributed
findings. Every expected number is computed here from the trace JSON with plain Python (interval
unions by sorting), on a generated two-rank job with known overlaps and on public multi-rank traces."""

from __future__ import annotations

import re
from collections import defaultdict
from decimal import Decimal

import pytest

import traceduck

from conftest import load_json, run_report, shared_dir, trace_events, union_length, write_trace
from test_collectives import comm_kernel

HTA = "public/facebookresearch__HolisticTraceAnalysis/tests/data/"
PUBLIC = {
    "sampled_rank-0": HTA + "trace_filter/sampled_rank-0.json.gz",
    "sampled_rank-1": HTA + "trace_filter/sampled_rank-1.json.gz",
    "nccl_data": HTA + "nccl_parser_config/nccl_data.json.gz",
}
GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "Runtime"}
SYNC_CALLS = {"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy",
              "hipDeviceSynchronize", "hipStreamSynchronize", "hipMemcpyWithStream"}
US = 1000  # ns per us


def ns(v) -> int:
    return int(Decimal(str(v)) * 1000)


# --- the generated job ----------------------------------------------------------------------------

ALLREDUCE = "ncclKernel_AllReduce_RING_LL_Sum_float"
COLL_ARGS = {"Collective name": "allreduce", "dtype": "Float", "In msg nelems": 1048576, "Out msg nelems": 1048576,
             "Group size": 2, "Process Group Name": "0"}
# rank 1 starts each all-reduce later than rank 0: rank 1 is the straggler of both steps
SHIFT_US = {0: (0, 0), 1: (50, 80)}


def job_trace(rank: int) -> dict:
    """One rank: step 1 has a compute kernel half covered by an all-reduce on another stream, a copy
    launched after the stream went idle (host wait), back-to-back kernels 20 ns apart (kernel wait),
    a 100 us gap with the launch long done (other), an unlinked kernel, a stream sync inside
    aten::item and a synchronous copy; step 2 another all-reduce over half its compute kernel."""
    s1, s2 = SHIFT_US[rank]
    events = []

    def cpu(name, ts, dur, cat="cpu_op", **args):
        events.append({"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args})

    def gpu(name, ts, dur, stream, corr, cat="kernel", **args):
        events.append({"ph": "X", "cat": cat, "name": name, "pid": rank, "tid": stream, "ts": ts, "dur": dur,
                       "args": {"device": rank, "stream": stream, "correlation": corr, **args}})

    cpu("ProfilerStep#1", 0, 1000, cat="user_annotation")
    cpu("ProfilerStep#2", 1000, 1000, cat="user_annotation")
    launches = [  # call, launch ts, correlation, (name, start, end, stream, category, args)
        ("cudaLaunchKernel", 10, 1, ("gemm_kernel", 100, 300, 7, "kernel", {})),
        ("cudaLaunchKernel", 20, 2, (ALLREDUCE, 200 + s1, 400, 13, "kernel", COLL_ARGS)),
        ("cudaMemcpyAsync", 480, 3, ("Memcpy HtoD (Pinned -> Device)", 500, 550, 7, "gpu_memcpy", {"bytes": 1 << 20})),
        ("cudaLaunchKernel", 555, 4, ("elementwise_kernel", 560, 600, 7, "kernel", {})),
        ("cudaLaunchKernel", 558, 5, ("elementwise_kernel", 600.02, 700, 7, "kernel", {})),
        ("cudaLaunchKernel", 562, 6, ("gemm_kernel", 800, 900, 7, "kernel", {})),
        ("cudaMemcpy", 915, 7, ("Memcpy DtoH (Device -> Pageable)", 965, 975, 7, "gpu_memcpy", {"bytes": 4096})),
        ("cudaLaunchKernel", 1010, 8, ("gemm_kernel", 1100, 1300, 7, "kernel", {})),
        ("cudaLaunchKernel", 1020, 9, (ALLREDUCE, 1100 + s2, 1500, 13, "kernel", COLL_ARGS)),
    ]
    for call, ts, corr, (name, start, end, stream, cat, args) in launches:
        cpu(call, ts, 5 if call != "cudaMemcpy" else 40, cat="cuda_runtime", correlation=corr)
        gpu(name, start, round(end - start, 3), stream, corr, cat=cat, **args)
    gpu("gemm_kernel", 950, 10, 7, 99)  # no launch in the trace
    cpu("aten::item", 690, 220)
    cpu("cudaStreamSynchronize", 700, 200, cat="cuda_runtime", correlation=100)
    cpu("cudaDeviceSynchronize", 1950, 30, cat="cuda_runtime", correlation=101)
    return {"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2}, "traceEvents": events}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("distributed")
    path = tmp / "store"
    docs = {}
    for rank in (0, 1):
        doc = job_trace(rank)
        trace = write_trace(tmp / f"job-rank{rank}.json", doc["traceEvents"], distributedInfo=doc["distributedInfo"])
        traceduck.ingest(trace, store=path, name=f"job{rank}")
        docs[f"job{rank}"] = load_json(trace)
    for name, rel in PUBLIC.items():
        traceduck.ingest(shared_dir() / rel, store=path, name=name)
        docs[name] = load_json(shared_dir() / rel)
    return path, {name: trace_events(doc) for name, doc in docs.items()}


def report(path, name, runs, params=None):
    with traceduck.open(path) as db:
        columns, rows = run_report(db, name, runs=runs, params=params, keep_run_columns=True)
    return [dict(zip(columns, r)) for r in rows]


# --- plain-Python reference -----------------------------------------------------------------------

def length(*interval_lists) -> int:
    return union_length([iv for ivs in interval_lists for iv in ivs])


def steps_of(events) -> list[tuple[int, int, int]]:
    return [(int(m.group(1)), ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in events
            if e.get("ph") == "X" and e.get("cat") == "user_annotation"
            and (m := re.fullmatch(r"ProfilerStep#(\d+)", str(e.get("name"))))]


def gpu_work(events) -> list[dict]:
    """Every kernel, memcpy and memset with its kind, device, stream, launch start and launch step."""
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("ph") == "X" and e.get("cat") in RUNTIME_CATS and "correlation" in e.get("args", {})
                and re.search(r"(?i)launch|memcpy|memset", e["name"])}
    steps = steps_of(events)
    work = []
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in GPU_CATS:
            continue
        kind = GPU_CATS[e["cat"]]
        if kind == "kernel":
            kind = "communication" if comm_kernel(e["name"]) else "compute"
        launch = launches.get(e["args"].get("correlation"))
        launch_ts = ns(launch["ts"]) if launch else None
        step = next((n for n, s, t in steps if launch_ts is not None and s <= launch_ts < t), None)
        work.append({"kind": kind, "device": e["args"].get("device", e["pid"]), "stream": e["args"].get("stream", e["tid"]),
                     "start": ns(e["ts"]), "end": ns(e["ts"]) + ns(e["dur"]), "launch": launch_ts, "step": step,
                     "correlation": e["args"].get("correlation")})
    return work


def overlap_rows(events, linked_only=False) -> dict:
    """{step (None: whole run): comm-overlap's numbers}, by inclusion-exclusion over unions per device."""
    groups = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for w in gpu_work(events):
        if linked_only and w["launch"] is None:
            continue
        keys = [None] + ([w["step"]] if w["step"] is not None else [])
        for key in keys:
            groups[key][w["device"]][w["kind"]].append((w["start"], w["end"]))
    out = {}
    for key, devices in groups.items():
        row = defaultdict(int)
        for k in devices.values():
            comp, comm, cp = k["compute"], k["communication"], k["memcpy"]
            row["compute_ns"] += length(comp)
            row["comm_ns"] += length(comm)
            row["overlap_ns"] += length(comm) + length(comp) - length(comm, comp)
            row["exposed_comm_ns"] += length(comm, comp) - length(comp)
            row["memcpy_ns"] += length(cp)
            row["memcpy_overlap_ns"] += length(cp) + length(comp) - length(cp, comp)
            row["exposed_memcpy_ns"] += length(cp, comp, comm) - length(comp, comm)
            row["busy_ns"] += length(*k.values())
        row["devices"] = len(devices)
        out[key] = dict(row)
    return out


def idle_rows(events, threshold_ns=30_000) -> dict:
    """{(device, stream): HTA-style idle breakdown and launch queue} (see the idle report)."""
    per_stream = defaultdict(list)
    for w in gpu_work(events):
        per_stream[(w["device"], w["stream"])].append(w)
    out = {}
    for key, work in per_stream.items():
        work.sort(key=lambda w: (w["start"], w["end"]))
        row = {"host_wait_ns": 0, "kernel_wait_ns": 0, "other_ns": 0, "work_items": len(work)}
        prev_end = None
        for w in work:
            if prev_end is not None and w["start"] > prev_end:
                gap = w["start"] - prev_end
                cat = ("host_wait" if w["launch"] is not None and w["launch"] > prev_end
                       else "kernel_wait" if gap < threshold_ns else "other")
                row[f"{cat}_ns"] += gap
            prev_end = w["end"] if prev_end is None else max(prev_end, w["end"])
        row["window_ns"] = max(w["end"] for w in work) - min(w["start"] for w in work)
        row["busy_ns"] = length([(w["start"], w["end"]) for w in work])
        row["idle_ns"] = row["host_wait_ns"] + row["kernel_wait_ns"] + row["other_ns"]
        items = [(w["launch"], w["start"]) for w in work if w["launch"] is not None]
        first_start = {}  # a launch call (a graph launch too) is one queue item until its first work starts
        for w in work:
            if w["launch"] is not None:
                c = w["correlation"]
                first_start[c] = (w["launch"], min(w["start"], first_start.get(c, (0, w["start"]))[1]))
        for unit, pairs in (("queue_length", list(first_start.values())), ("queued_work", items)):
            edges = sorted([(a, 1) for a, _ in pairs] + [(b, -1) for _, b in pairs])
            queued, top, area = 0, None, 0
            for (t, d), nxt in zip(edges, edges[1:] + [None]):
                queued += d
                top = queued if top is None else max(top, queued)
                if nxt is not None:
                    area += queued * (nxt[0] - t)
            span = edges[-1][0] - edges[0][0] if edges else 0
            row[f"max_{unit}"], row[f"mean_{unit}"] = top, (round(area / span, 3) if span else None)
        out[key] = row
    return out


# --- comm-overlap -----------------------------------------------------------------------------------

@pytest.mark.slow  # 3 s
def test_comm_overlap_of_the_generated_job(store):
    path, events = store
    rows = {(r["run_name"], r["step"]): r for r in report(path, "comm-overlap", ["job0", "job1"])}
    # hand-checked: the all-reduce covers the second half of the 200 us gemm in step 1 on rank 0
    r = rows[("job0", 1)]
    assert (r["comm_ns"], r["overlap_ns"], r["overlap_pct"], r["exposed_comm_ns"]) == (200 * US, 100 * US, 50.0, 100 * US)
    assert (r["memcpy_ns"], r["memcpy_overlap_ns"], r["exposed_memcpy_ns"]) == (60 * US, 0, 60 * US)
    r = rows[("job1", 1)]  # rank 1 starts its all-reduce 50 us later: 50 of 150 us overlapped
    assert (r["comm_ns"], r["overlap_ns"], r["overlap_pct"]) == (150 * US, 50 * US, 33.33)
    assert rows[("job0", 2)]["overlap_pct"] == 50.0
    # the unlinked kernel counts in the whole run, not in a step, and not with linked_only
    whole, linked = rows[("job0", None)], {r["step"]: r for r in report(path, "comm-overlap", ["job0"], ["linked_only=true"])}
    assert whole["compute_ns"] - linked[None]["compute_ns"] == 10 * US
    for run in ("job0", "job1"):
        for linked_only in (False, True):
            got = {r["step"]: r for r in report(path, "comm-overlap", [run], [f"linked_only={linked_only}"])}
            want = overlap_rows(events[run], linked_only)
            assert set(got) == set(want)
            for step, w in want.items():
                assert {k: got[step][k] for k in w} == w, (run, step, linked_only)


@pytest.mark.parametrize("run", ["sampled_rank-0", "sampled_rank-1", "nccl_data"])
def test_comm_overlap_matches_the_trace(store, run):
    path, events = store
    want = overlap_rows(events[run])
    got = {r["step"]: r for r in report(path, "comm-overlap", [run])}
    assert set(got) == set(want) and len(want) > 1  # the run and its steps
    for step, w in want.items():
        r = got[step]
        assert {k: r[k] for k in w} == w, step
        assert r["overlap_pct"] == round(100 * w["overlap_ns"] / w["comm_ns"], 2)
    assert 0 < want[None]["overlap_ns"] < want[None]["comm_ns"]  # partly hidden, partly exposed


def test_gpu_time_with_ties_zero_lengths_and_every_kind_at_once(tmp_path):
    """gpu_time counts all four kinds in one running sum: many intervals of each kind at once, starts
    and ends at the same instant, zero-length work; every total checked against plain unions."""
    import random

    rnd = random.Random(7)
    cats = [("kernel", "gemm"), ("kernel", ALLREDUCE), ("gpu_memcpy", "Memcpy DtoD (Device -> Device)"),
            ("gpu_memset", "Memset (Device)")]
    events = []
    for i in range(400):
        cat, name = cats[i % 4]
        ts = rnd.randrange(0, 60) * 5  # coarse times: many ties, up to dozens of one kind running at once
        dur = rnd.choice([0, 0, 5, 10, 25, 50, 100])
        events.append({"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7 + i % 3, "ts": ts, "dur": dur,
                       "args": {"device": 0, "stream": 7 + i % 3, "correlation": 1000 + i}})
    path = write_trace(tmp_path / "ties.json", events)
    traceduck.ingest(path, store=tmp_path / "s")
    kinds = defaultdict(list)
    for e in events:
        kind = GPU_CATS[e["cat"]]
        if kind == "kernel":
            kind = "communication" if comm_kernel(e["name"]) else "compute"
        kinds[kind].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])))
    comp, comm, cp, ms = kinds["compute"], kinds["communication"], kinds["memcpy"], kinds["memset"]
    with traceduck.open(tmp_path / "s") as db:
        row = db.sql("SELECT busy_ns, compute_ns, communication_ns, memcpy_ns, memset_ns, communication_overlap_ns,"
                     " exposed_communication_ns, memcpy_overlap_ns, exposed_memcpy_ns, first_ns, last_ns"
                     " FROM gpu_time()").fetchall()
    assert row == [(length(comp, comm, cp, ms), length(comp), length(comm), length(cp), length(ms),
                    length(comm) + length(comp) - length(comm, comp), length(comm, comp) - length(comp),
                    length(cp) + length(comp) - length(cp, comp), length(cp, comp, comm) - length(comp, comm),
                    min(s for s, _ in comp + comm + cp + ms), max(e for _, e in comp + comm + cp + ms))]
    assert 0 < length(comm) + length(comp) - length(comm, comp) < length(comm)  # the case is not trivial


# --- collectives bandwidth --------------------------------------------------------------------------

FACTOR = {"allreduce": lambda n: 2 * (n - 1) / n, "broadcast": lambda n: 1.0}
ELEM = {"Float": 4, "Long": 8}


def test_collective_bandwidth(store):
    path, events = store
    calls = defaultdict(list)  # (collective, message bytes, group size) -> kernel durations
    for e in events["nccl_data"]:
        a = e.get("args") or {}
        if e.get("cat") == "kernel" and "Collective name" in a:
            calls[(a["Collective name"], a["In msg nelems"] * ELEM[a["dtype"]], a["Group size"])].append(ns(e["dur"]))
    rows = [r for r in report(path, "collectives", ["nccl_data"]) if r["side"] == "gpu"]
    got = {(r["collective"], r["msg_bytes"], r["group_size"]): r for r in rows}
    assert set(got) == set(calls)
    for (coll, size, n), durs in calls.items():
        r = got[(coll, size, n)]
        algbw = size * len(durs) / sum(durs)  # bytes per ns = GB/s
        assert (r["calls"], r["total_dur_ns"]) == (len(durs), sum(durs))
        assert r["algbw_gb_s"] == round(algbw, 3)
        assert r["busbw_gb_s"] == round(algbw * FACTOR[coll](n), 3)
        assert r["slowest_rank"] is None  # one run of its job
    # the generated job: 4 MB all-reduces over 2 ranks; rank 0 waits inside its kernels, so it is slowest
    rows = [r for r in report(path, "collectives", ["job0", "job1"]) if r["side"] == "gpu"]
    assert {(r["run_name"], r["msg_bytes"], r["group_size"], r["slowest_rank"]) for r in rows} == {
        ("job0", 4 << 20, 2, 0), ("job1", 4 << 20, 2, 0)}
    for r in rows:
        durs = [ns(e["dur"]) for e in events[r["run_name"]] if e.get("name") == ALLREDUCE]
        assert r["busbw_gb_s"] == r["algbw_gb_s"] == round((4 << 20) * len(durs) / sum(durs), 3)  # factor 1 for n = 2
    # kernels without collective args, named by the nccl:* annotation around their launch (sizes per
    # kernel checked against plain json in test_collectives): an allgather's annotation gives no
    # output size, so no bandwidth; the others' from the sizes
    rows = [r for r in report(path, "collectives", ["sampled_rank-0"]) if r["side"] == "gpu"]
    assert rows and {r["source"] for r in rows} == {"annotation"}
    for r in rows:
        if r["collective"] == "allgather":
            assert r["msg_bytes"] is None and r["algbw_gb_s"] is None and r["busbw_gb_s"] is None
        else:
            assert r["algbw_gb_s"] == round(r["msg_bytes"] * r["calls"] / r["total_dur_ns"], 3)
    assert {r["group_size"] for r in rows} == {128}  # the world size when PyTorch wrote no Group size


@pytest.mark.parametrize("collective, n, factor", [
    ("allreduce", 8, 1.75), ("allgather", 8, 0.875), ("reducescatter", 4, 0.75), ("alltoall", 2, 0.5),
    ("broadcast", 8, 1.0), ("reduce", 8, 1.0), ("sendrecv", 2, 1.0), ("barrier", 8, None), ("allreduce", None, None),
])
def test_bus_bandwidth_factors(store, collective, n, factor):
    path, _ = store
    with traceduck.open(path) as db:
        assert db.sql("SELECT busbw_factor($c, $n)", {"c": collective, "n": n}).fetchall() == [(factor,)]


# --- idle and sync ----------------------------------------------------------------------------------

def test_idle_breakdown_of_the_generated_job(store):
    path, events = store
    rows = {(r["device"], r["stream"]): r for r in report(path, "idle", ["job0"])}
    r = rows[(0, 7)]
    # hand-checked: the copy launched at 480 us after the gemm ended at 300 us (200 us), the kernel
    # launched at 555 us after the copy ended at 550 us (10 us) and step 2's gemm launched at 1010 us
    # after the copy ended at 975 us (125 us) are host waits; 20 ns between back-to-back kernels is a
    # kernel wait, and so is 5 us (a copy launched before the stream went idle: under the 30 us
    # default); 100 us (launched long before) and 50 us (a kernel without a launch) are other.
    assert (r["host_wait_ns"], r["kernel_wait_ns"], r["other_ns"]) == ((200 + 10 + 125) * US, 20 + 5 * US, (100 + 50) * US)
    assert r["idle_ns"] == r["window_ns"] - r["busy_ns"]
    assert r["max_queue_length"] == 2  # kernels launched at 555 and 558 us, the first starts at 560 us
    want = idle_rows(events["job0"])
    assert set(rows) == set(want)
    for key, w in want.items():
        assert {k: rows[key][k] for k in w} == w, key
    assert report(path, "idle", ["job0"], ["kernel_wait_threshold_ns=10"])[0]["kernel_wait_ns"] == 0


@pytest.mark.parametrize("run", ["sampled_rank-0", "nccl_data"])
def test_idle_breakdown_matches_the_trace(store, run):
    path, events = store
    want = idle_rows(events[run])
    rows = {(r["device"], r["stream"]): r for r in report(path, "idle", [run])}
    assert set(rows) == set(want)
    for key, w in want.items():
        assert {k: rows[key][k] for k in w} == w, key
    assert sum(w["host_wait_ns"] for w in want.values()) > 0


def test_kernel_wait_threshold_is_htas_30_us(tmp_path):
    """HTA's consecutive_kernel_delay=30 is compared with microsecond timestamps: 30 us. Four kernels
    all launched up front (no host wait), with gaps of 20 us and 40 us between them, and 29.999 us."""
    launch = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1 + i,
               "dur": 0.5, "args": {"correlation": 10 + i}} for i in range(4)]
    starts = [100, 130, 180, 219.999]  # each kernel runs 10 us: gaps of 20, 40 and 29.999 us
    kernels = [{"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": t, "dur": 10,
                "args": {"device": 0, "stream": 7, "correlation": 10 + i}} for i, t in enumerate(starts)]
    store = tmp_path / "store"
    traceduck.ingest(write_trace(tmp_path / "gaps.json", launch + kernels), store=store, name="gaps")
    r = report(store, "idle", ["gaps"])[0]
    assert (r["host_wait_ns"], r["kernel_wait_ns"], r["other_ns"]) == (0, 20 * US + 29_999, 40 * US)
    r = report(store, "idle", ["gaps"], ["kernel_wait_threshold_ns=30"])[0]  # the documented "30 ns"
    assert (r["kernel_wait_ns"], r["other_ns"]) == (0, 20 * US + 40 * US + 29_999)


SGLANG = "public/AMD-AGI__TraceLens/tests/traces/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz"


def test_launch_queue_counts_a_graph_launch_once(tmp_path):
    """A graph launch puts one item in the launch queue (until its first kernel on the stream starts),
    not one per kernel of the graph: max/mean_queue_length count launches, max/mean_queued_work the
    kernels, both against plain json on a shared decode trace replaying CUDA graphs (HIP on MI300X)."""
    store = tmp_path / "store"
    traceduck.ingest(shared_dir() / SGLANG, store=store, name="sglang")
    events = trace_events(load_json(shared_dir() / SGLANG))
    want = idle_rows(events)
    rows = {(r["device"], r["stream"]): r for r in report(store, "idle", ["sglang"])}
    assert set(rows) == set(want)
    for key, w in want.items():
        assert {k: rows[key][k] for k in w} == w, key
    graphs = {e["args"]["correlation"] for e in events if e.get("ph") == "X" and "GraphLaunch" in e["name"]}
    busy = max(want.values(), key=lambda w: w["work_items"])
    assert graphs and busy["max_queue_length"] < busy["max_queued_work"]  # a graph's kernels queue as one launch


@pytest.mark.parametrize("run", ["job0", "nccl_data"])
def test_time_blocked_in_synchronizing_calls(store, run):
    path, events = store
    want = defaultdict(lambda: [0, 0])
    for e in events[run]:
        if e.get("ph") == "X" and e.get("cat") in RUNTIME_CATS and e["name"] in SYNC_CALLS:
            want[e["name"]][0] += 1
            want[e["name"]][1] += ns(e["dur"])
    rows = report(path, "sync", [run])
    got = defaultdict(lambda: [0, 0])
    for r in rows:
        got[r["call"]][0] += r["calls"]
        got[r["call"]][1] += r["total_dur_ns"]
    assert got == want and want
    assert {r["run_sync_ns"] for r in rows} == {sum(v[1] for v in want.values())}
    if run == "job0":
        (item,) = [r for r in rows if r["call"] == "cudaStreamSynchronize"]
        assert (item["op_name"], item["total_dur_ns"]) == ("aten::item", 200 * US)
        assert rows[0]["call"] == "cudaStreamSynchronize"  # most blocked time first


# --- ranks and overview -----------------------------------------------------------------------------

def stragglers(runs: dict[str, list]) -> dict:
    """{step: (straggler's run, others' wait for it)}: the n-th collective kernel of a family on each
    rank is one collective; the rank that started it last is waited for, in the step of its launch."""
    per_run = {}
    for run, events in runs.items():
        work = {(w["start"], w["end"]): w for w in gpu_work(events) if w["kind"] == "communication"}
        kernels = sorted((ns(e["ts"]), comm_kernel(e["name"])[0], work[(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]))]["step"])
                         for e in events if e.get("ph") == "X" and e.get("cat") == "kernel" and comm_kernel(e["name"]))
        seen = defaultdict(int)
        per_run[run] = {}
        for ts, family, step in kernels:
            seen[family] += 1
            per_run[run][(family, seen[family])] = (ts, step)
    blame = defaultdict(lambda: defaultdict(int))
    for inst in set.intersection(*(set(v) for v in per_run.values())):
        starts = {run: per_run[run][inst] for run in per_run}
        last = max(starts, key=lambda run: starts[run][0])
        wait = sum(starts[last][0] - ts for ts, _ in starts.values())
        if starts[last][1] is not None:
            blame[starts[last][1]][last] += wait
    return {step: max(b.items(), key=lambda kv: kv[1]) for step, b in blame.items()}


@pytest.mark.parametrize("runs", [("job0", "job1"), ("sampled_rank-0", "sampled_rank-1")])
def test_ranks_name_the_straggler_of_each_step(store, runs):
    path, events = store
    want = stragglers({run: events[run] for run in runs})
    rows = report(path, "ranks", list(runs))
    got = {int(r["item"].split()[1]): (r["run_name"], r["collective_wait_ns"]) for r in rows if r["section"] == "step"}
    assert got == want and want
    for r in (r for r in rows if r["section"] == "rank"):
        assert r["straggler_steps"] == sum(1 for run, _ in want.values() if run == r["run_name"])
        assert r["exposed_comm_ns"] == overlap_rows(events[r["run_name"]])[None]["exposed_comm_ns"]
    if runs == ("job0", "job1"):
        assert got == {1: ("job1", 50 * US), 2: ("job1", 80 * US)}


def test_overview_distributed_findings(store):
    path, events = store
    rows = [r for r in report(path, "overview", ["job0", "job1"]) if r["section"] == "finding"]
    (straggler,) = [r for r in rows if r["item"] == "straggler"]
    assert (straggler["run_name"], straggler["value"], straggler["time_ns"]) == ("job1", 100.0, 130 * US)
    assert straggler["detail"].startswith("rank 1 started last in 2 of 2 collectives matched across 2 selected ranks")
    for run in ("job0", "job1"):
        (bw,) = [r for r in rows if r["item"] == "lowest bus bandwidth" and r["run_name"] == run]
        durs = [ns(e["dur"]) for e in events[run] if e.get("name") == ALLREDUCE]
        assert (bw["value"], bw["unit"], bw["time_ns"]) == (round((4 << 20) * 2 / sum(durs), 3), "GB/s", sum(durs))
        (comm,) = [r for r in rows if r["item"] == "GPU communication" and r["run_name"] == run]
        whole = overlap_rows(events[run])[None]
        assert f"({100 * whole['exposed_comm_ns'] / whole['comm_ns']:.1f}% of communication exposed;" in comm["detail"]
    # one run of its job: no straggler
    alone = report(path, "overview", ["job0"])
    assert not [r for r in alone if r["item"] == "straggler"]
