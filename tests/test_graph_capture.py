"""Ops inside CUDA graphs: each kernel a graph replay ran, attributed to the op that issued it while
a capture run traced the graph's capture (graph_captures, graph_launch_work, graph_kernel_ops, the
cuda-graphs report). The traces are generated here; the op each replayed kernel must get is written
down by hand next to the capture that defines it."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter, defaultdict

import pytest

import traceduck

from conftest import load_json, run_report, shared_dir, trace_events, write_trace

US = 1000  # ns per us

# The two graphs of the capture run, in capture order: (call, innermost op, top-level op) per captured
# launch call, in call order. The call outside any op has no op.
GRAPH_1 = [("cudaLaunchKernel", "aten::addmm", "aten::linear"),
           ("cudaLaunchKernel", "aten::relu", "aten::relu"),
           ("cudaMemsetAsync", "aten::fill_", "aten::zero_")]
GRAPH_2 = [("cuLaunchKernel", "aten::native_layer_norm", "aten::layer_norm"),
           ("cudaLaunchKernel", "aten::mm", "aten::matmul"),
           ("cudaLaunchKernel", "aten::add", "aten::add"),
           ("cudaMemcpyAsync", "aten::copy_", "aten::copy_"),
           ("cudaLaunchKernel", None, None),
           ("cudaLaunchKernel", "aten::_softmax", "aten::softmax")]
# What each graph runs when replayed: (category, name) of its work in capture order.
WORK_1 = [("kernel", "gemm_a"), ("kernel", "relu_k"), ("gpu_memset", "Memset (Device)")]
WORK_2 = [("kernel", "ln_k"), ("kernel", "mm_k"), ("kernel", "add_k"), ("gpu_memcpy", "Memcpy DtoD (Device -> Device)"),
          ("kernel", "misc_k"), ("kernel", "softmax_k")]


class Trace:
    """A Kineto-style trace under construction: CPU thread 1 (and 2), GPU 0 streams 7 and 8; with
    api="hip", runtime calls are HIP's (hipLaunchKernel, hipStreamBeginCapture, ...) as on ROCm."""

    def __init__(self, api: str = "cuda") -> None:
        self.events: list[dict] = []
        self.corr = 0
        self.api = api

    def x(self, cat, name, ts, dur, tid=1, **args):
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args})

    def call(self, name, ts, tid=1) -> int:
        self.corr += 1
        name = name.replace("cuda", self.api, 1)
        cat = "cuda_driver" if name.startswith("cu") and not name.startswith("cuda") else "cuda_runtime"
        self.x(cat, name, ts, 2, tid=tid, correlation=self.corr)
        return self.corr

    def gpu(self, cat, name, ts, dur, corr, stream=7, **args):
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
                            "args": {"device": 0, "stream": stream, "correlation": corr, **args}})

    def capture(self, ts, calls, noise=()) -> int:
        """A capture window at ts: the noise calls (no graph node), then each (call, op, top op) inside
        its ops, 20 us apart; returns its end."""
        self.x("cuda_runtime", f"{self.api}StreamBeginCapture", ts, 2)
        t = ts + 10
        for name in noise:
            self.call(name, t)
            t += 5
        for call, op, top in calls:
            if op is None:
                self.call(call, t + 2)
            elif op == top:
                self.x("cpu_op", op, t, 10)
                self.call(call, t + 2)
            else:
                self.x("cpu_op", top, t, 12)
                self.x("cpu_op", op, t + 1, 10)
                self.call(call, t + 3)
            t += 20
        self.x("cuda_runtime", f"{self.api}StreamEndCapture", t, 2)
        self.x("cuda_runtime", f"{self.api}GraphInstantiate", t + 5, 5)
        return t + 10


def capture_trace() -> list[dict]:
    t = Trace()
    t.x("cpu_op", "aten::mm", 10, 20)  # warm-up before capture: runs, is in no graph
    t.gpu("kernel", "warm_gemm", 40, 5, t.call("cudaLaunchKernel", 12))
    end = t.capture(100, GRAPH_1, noise=["cudaStreamGetCaptureInfo", "cudaLaunchHostFunc", "cudaEventRecord"])
    t.gpu("kernel", "other_thread_k", 160, 3, t.call("cudaLaunchKernel", 150, tid=2))  # not captured: another thread
    t.capture(end + 100, GRAPH_2)
    t.x("cuda_runtime", "cudaStreamBeginCapture", 900, 2)  # a capture the trace cut short: no graph
    t.x("cpu_op", "aten::relu", 910, 10)
    t.call("cudaLaunchKernel", 912)
    return t.events


def replay_trace() -> tuple[list[dict], list[dict]]:
    """Graph 1 launched three times, graph 2 twice, then a launch whose work is not in the trace; each
    launch's work written to the file last first. Returns (events, expected rows per work item)."""
    t = Trace()
    expected = []
    ts = 1000
    for n, (graph, ops, work, graph_id) in enumerate([(1, GRAPH_1, WORK_1, 11), (2, GRAPH_2, WORK_2, 12),
                                                     (1, GRAPH_1, WORK_1, 11), (2, GRAPH_2, WORK_2, 12),
                                                     (1, GRAPH_1, WORK_1, 11)]):
        t.x("cpu_op", "CompiledFunction", ts, 20)
        corr = t.call("cudaGraphLaunch", ts + 5)
        items, g = [], ts + 10
        for i, ((cat, name), (_call, op, top)) in enumerate(zip(work, ops)):
            dur = 2 + i + n  # every item of every launch its own length
            # graph 2's copy runs on stream 8, starting with the add before it (a tie broken by stream)
            stream, start = (8, items[-1]["start"]) if cat == "gpu_memcpy" else (7, g)
            items.append({"cat": cat, "name": name, "start": start, "dur": dur, "stream": stream, "corr": corr,
                          "graph_id": graph_id, "node": 100 * graph_id + i})
            expected.append({"launch_corr": corr, "name": name, "ts_ns": start * US, "dur_ns": dur * US,
                             "position": i + 1, "graph": graph, "op_name": op, "top_op_name": top})
            g = start + dur + 1
        for it in reversed(items):
            t.gpu(it["cat"], it["name"], it["start"], it["dur"], it["corr"], stream=it["stream"],
                  **{"graph id": it["graph_id"], "graph node id": it["node"]})
        ts += 100
    t.x("cpu_op", "aten::mm", ts, 10)  # an ordinary launch: no graph
    t.gpu("kernel", "plain_k", ts + 20, 3, t.call("cudaLaunchKernel", ts + 2))
    t.x("cpu_op", "CompiledFunction", ts + 50, 20)
    t.call("cudaGraphLaunch", ts + 55)  # its kernels ran after the profile stopped
    return t.events, expected


# Equal sizes: graphs 1 and 2 have two kernel launches each with different ops (a replay of two
# kernels is ambiguous), graph 3 two launches of other kinds (kernel, memset), graphs 4 and 5 three
# launches with the same ops (which of the two is unknown, the ops are not).
AMBIGUOUS_GRAPHS = [
    [("cudaLaunchKernel", "aten::mul", "aten::mul"), ("cudaLaunchKernel", "aten::add", "aten::add")],
    [("cudaLaunchKernel", "aten::sub", "aten::sub"), ("cudaLaunchKernel", "aten::div", "aten::div")],
    [("cudaLaunchKernel", "aten::neg", "aten::neg"), ("cudaMemsetAsync", "aten::zero_", "aten::zero_")],
    [("cudaLaunchKernel", "aten::exp", "aten::exp"), ("cudaLaunchKernel", "aten::log", "aten::log"),
     ("cudaLaunchKernel", "aten::sqrt", "aten::sqrt")],
    [("cudaLaunchKernel", "aten::exp", "aten::exp"), ("cudaLaunchKernel", "aten::log", "aten::log"),
     ("cudaLaunchKernel", "aten::sqrt", "aten::sqrt")],
]
# Replays against those: (work of one launch, expected match, captured graph, ops by position).
AMBIGUOUS_REPLAYS = [
    ([("kernel", "k1"), ("kernel", "k2")], "ambiguous", None, [None, None]),
    ([("kernel", "k1"), ("gpu_memset", "Memset (Device)")], "kernel_kinds", 3, ["aten::neg", "aten::zero_"]),
    ([("kernel", "e"), ("kernel", "l"), ("kernel", "s")], "same_ops", None, ["aten::exp", "aten::log", "aten::sqrt"]),
    ([("kernel", "k")] * 4, "no_match", None, [None] * 4),
]


def ambiguous_traces() -> tuple[list[dict], list[dict]]:
    """A capture and a replay of AMBIGUOUS_GRAPHS, with HIP's calls (as SGLang writes on ROCm)."""
    cap = Trace("hip")
    ts = 100
    for calls in AMBIGUOUS_GRAPHS:
        ts = cap.capture(ts, calls) + 100
    rep = Trace("hip")
    ts = 1000
    for work, _match, _graph, _ops in AMBIGUOUS_REPLAYS:
        corr = rep.call("cudaGraphLaunch", ts)
        for i, (cat, name) in enumerate(work):
            rep.gpu(cat, name, ts + 10 + 5 * i, 3, corr)
        ts += 100
    return cap.events, rep.events


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("graphs")
    store = tmp / "store"
    replay_events, expected = replay_trace()
    amb_capture, amb_replay = ambiguous_traces()
    ids = {}
    for name, events in [("capture", capture_trace()), ("replay", replay_events),
                         ("capture2", amb_capture), ("replay2", amb_replay)]:
        ids[name] = traceduck.ingest(write_trace(tmp / f"{name}.json", events), store=store, name=name)[0].run_id
    with traceduck.open(store) as db:  # the store's views are built on first use: here, not in the first test
        db.sql("SELECT count(*) FROM graph_launch_work").fetchall()
    return store, ids, expected


def sql(store, query, params=None) -> list[dict]:
    with traceduck.open(store) as db:
        rel = db.sql(query, params)
        return [dict(zip(rel.columns, r)) for r in rel.fetchall()]


def report(store, runs, params=None) -> list[dict]:
    with traceduck.open(store) as db:
        columns, rows = run_report(db, "cuda-graphs", runs=runs, params=params)
    return [dict(zip(columns, r)) for r in rows]


def test_capture_windows_hold_the_captured_calls(graphs):
    store, ids, _ = graphs
    rows = sql(store, "SELECT * FROM graph_captures(?) ORDER BY graph_index, position", [ids["capture"]])
    got = [(r["graph_index"], r["position"], r["launches"], r["launch_name"], r["op_name"], r["top_op_name"], r["work_kind"])
           for r in rows]
    kinds = {"cudaLaunchKernel": "kernel", "cuLaunchKernel": "kernel", "cudaMemsetAsync": "memset", "cudaMemcpyAsync": "memcpy"}
    want = [(g, i + 1, len(calls), call, op, top, kinds[call])
            for g, calls in ((1, GRAPH_1), (2, GRAPH_2)) for i, (call, op, top) in enumerate(calls)]
    assert got == want


def test_every_replayed_kernel_gets_the_op_that_issued_it(graphs):
    store, ids, expected = graphs
    rows = sql(store, """SELECT w.*, l.correlation AS launch_corr FROM graph_kernel_ops(?) w
                         JOIN launch_calls l ON l.run_id = w.run_id AND l.event_id = w.launch_event_id
                         WHERE w.run_id = ?""", [ids["capture"], ids["replay"]])
    assert len(rows) == len(expected) == 3 * 3 + 2 * 6
    got = {(r["launch_corr"], r["position"]): r for r in rows}
    for e in expected:
        r = got[(e["launch_corr"], e["position"])]
        assert (r["name"], r["ts_ns"], r["dur_ns"]) == (e["name"], e["ts_ns"], e["dur_ns"])
        assert (r["op_name"], r["top_op_name"], r["graph_index"]) == (e["op_name"], e["top_op_name"], e["graph"])
        assert (r["match"], r["candidates"], r["replay_graph"]) == ("kernel_count", 1, e["graph"])
        assert r["launch_streams"] == e["graph"]  # graph 2's copy runs on a stream of its own
        assert r["graph_id"] == 10 + e["graph"] and r["graph_node_id"] == 100 * r["graph_id"] + e["position"] - 1
        assert r["capture_run_id"] == ids["capture"]
    # the op ids point at the capture run's events of those names
    named = sql(store, "SELECT event_id, name FROM events WHERE run_id = ? AND is_cpu_op", [ids["capture"]])
    names = {r["event_id"]: r["name"] for r in named}
    assert all(names.get(r["op_event_id"]) == r["op_name"] and names.get(r["top_op_event_id"]) == r["top_op_name"]
               for r in rows)


def test_equal_sizes_are_ambiguous_unless_kinds_or_ops_decide(graphs):
    store, ids, _ = graphs
    rows = sql(store, "SELECT * FROM graph_kernel_ops(?) WHERE run_id = ? ORDER BY launch_ts_ns, position",
               [ids["capture2"], ids["replay2"]])
    by_launch = defaultdict(list)
    for r in rows:
        by_launch[r["launch_ts_ns"]].append(r)
    assert len(by_launch) == len(AMBIGUOUS_REPLAYS)
    for (_ts, items), (work, match, graph, ops) in zip(sorted(by_launch.items()), AMBIGUOUS_REPLAYS):
        assert [r["name"] for r in items] == [name for _cat, name in work]
        assert {r["match"] for r in items} == {match}
        assert {r["graph_index"] for r in items} == {graph}
        assert [r["op_name"] for r in items] == ops
        candidates = {"ambiguous": 2, "kernel_kinds": 1, "same_ops": 2, "no_match": 0}[match]
        assert {r["candidates"] for r in items} == {candidates}
        if match != "kernel_kinds":  # no single captured call: no op ids
            assert {r["op_event_id"] for r in items} == {r["capture_launch_event_id"] for r in items} == {None}
    # graph 1 of the first replay (kernel, kernel, memset) against graphs 4 and 5 (three kernels): no match
    other = sql(store, "SELECT DISTINCT replay_graph, match, op_name FROM graph_kernel_ops(?) WHERE run_id = ?",
                [ids["capture2"], ids["replay"]])
    assert sorted((r["replay_graph"], r["match"], r["op_name"]) for r in other) == [(1, "no_match", None), (2, "no_match", None)]


def test_without_capture_windows_no_op(graphs):
    store, ids, expected = graphs
    for capture in (None, ids["replay"]):  # no run, or a run that captured nothing
        rows = sql(store, "SELECT match, op_name, count(*) AS n FROM graph_kernel_ops(?::VARCHAR) WHERE run_id = ? GROUP BY ALL",
                   [capture, ids["replay"]])
        assert rows == [{"match": "no_capture", "op_name": None, "n": len(expected)}]


def test_report_per_graph_and_op(graphs):
    store, ids, expected = graphs
    rows = report(store, ["replay"], ["capture=capture"])
    want = defaultdict(lambda: [0, 0])
    for e in expected:
        want[(e["graph"], e["op_name"])][0] += 1
        want[(e["graph"], e["op_name"])][1] += e["dur_ns"]
    matched = [r for r in rows if r["match"] != "no_work"]
    assert {(r["replay_graph"], r["op_name"]): [r["kernels"], r["gpu_dur_ns"]] for r in matched} == want
    assert len(matched) == len(want)
    graph_ns = Counter()
    for e in expected:
        graph_ns[e["graph"]] += e["dur_ns"]
    for r in matched:
        assert (r["match"], r["graph_index"], r["graph_id"]) == ("kernel_count", r["replay_graph"], 10 + r["replay_graph"])
        assert r["launches"] == {1: 3, 2: 2}[r["replay_graph"]] and r["launch_op_name"] == "CompiledFunction"
        assert r["kernels_per_launch"] == {1: 3, 2: 6}[r["replay_graph"]]
        assert r["streams_per_launch"] == r["replay_graph"]
        assert r["first_ts_ns"] == {1: 1005, 2: 1105}[r["replay_graph"]] * US
        assert r["graph_pct"] == round(100 * r["gpu_dur_ns"] / graph_ns[r["replay_graph"]], 2)
    replay_total = sum(e["dur_ns"] for e in expected) + 3 * US  # plain_k
    assert all(r["gpu_pct"] == round(100 * r["gpu_dur_ns"] / replay_total, 2) for r in matched)
    # row order: graph by graph, biggest op first
    assert [r["replay_graph"] for r in matched] == sorted(r["replay_graph"] for r in matched)
    for g in (1, 2):
        durs = [r["gpu_dur_ns"] for r in matched if r["replay_graph"] == g]
        assert durs == sorted(durs, reverse=True)
    idle = [r for r in rows if r["match"] == "no_work"]
    assert [(r["launches"], r["kernels"], r["replay_graph"], r["op_name"]) for r in idle] == [(1, 0, None, None)]


def test_report_without_capture_says_so(graphs):
    store, ids, expected = graphs
    rows = report(store, ["replay"])
    assert [(r["replay_graph"], r["match"], r["op_name"], r["launches"], r["kernels"]) for r in rows] == \
        [(1, "no_capture", None, 3, 9), (2, "no_capture", None, 2, 12), (None, "no_work", None, 1, 0)]
    with traceduck.open(store) as db:  # the Python API takes the run selection the same way
        rel = db.report("cuda-graphs", runs="replay", capture="capture")
        assert {r[0] for r in rel.project("match").fetchall()} == {"kernel_count", "no_work"}


def td(*args):
    return subprocess.run([sys.executable, "-m", "traceduck", *map(str, args)], capture_output=True, text=True)


@pytest.mark.slow  # 3 s
def test_cli_capture_param(graphs):
    store, ids, _ = graphs
    p = td("report", "cuda-graphs", "--store", store, "--run", "replay", "--format", "csv")
    assert p.returncode == 0, p.stderr
    assert p.stdout.count(",no_capture,") == 2
    p = td("report", "cuda-graphs", "--store", store, "--run", "replay", "--param", "capture=capture", "--format", "csv")
    assert p.returncode == 0 and p.stdout.count(",kernel_count,") == 9 and "aten::addmm" in p.stdout
    p = td("report", "cuda-graphs", "--store", store, "--run", "replay", "--param", "capture=captur")
    runs = ", ".join(f"{ids[n][:12]} ({n})" for n in ("capture", "capture2", "replay", "replay2"))
    assert p.returncode == 1
    assert p.stderr == (f"Error: --param capture=captur: no run matches 'captur'. Did you mean 'capture' or 'capture2'? "
                        f"Runs in the store: {runs}.\n")
    p = td("report", "cuda-graphs", "--store", store, "--run", "replay", "--param", "capture=capture*")
    assert p.returncode == 1
    assert p.stderr.startswith("Error: --param capture=capture*: 'capture*' matches 2 runs: ")


GRAPH_TRACES = [
    "public/AMD-AGI__TraceLens/tests/traces/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz",
    "public/facebookresearch__HolisticTraceAnalysis/tests/data/negative_queue_length_values_check/rank0.json.gz",
    "public/facebookresearch__HolisticTraceAnalysis/tests/data/trace_diff/test/test.json.gz",
]


@pytest.mark.slow  # every shared trace with graph launches
@pytest.mark.parametrize("rel", GRAPH_TRACES)
def test_shared_traces_with_graph_launches(shared_store, rel):
    """Every shared trace with graph launches: each kernel, copy and set of a graph launch is in
    graph_kernel_ops once, in the order it ran; none has capture windows, so nothing is attributed."""
    path, results = shared_store
    run_id = results[rel].run_id
    other = results[GRAPH_TRACES[1] if rel == GRAPH_TRACES[0] else GRAPH_TRACES[0]].run_id
    with traceduck.open(path) as db:  # the list above is every shared trace with graph launches
        launching = {r[0] for r in db.sql("SELECT DISTINCT run_id FROM launch_calls WHERE is_graph_launch").fetchall()}
    assert launching == {results[r].run_id for r in GRAPH_TRACES}
    events = trace_events(load_json(shared_dir() / rel))
    graph_corr = {e["args"]["correlation"] for e in events
                  if e.get("ph") == "X" and "GraphLaunch" in str(e.get("name")) and "correlation" in e.get("args", {})}
    work = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") \
                and e.get("args", {}).get("correlation") in graph_corr:
            work[e["args"]["correlation"]].append((e["ts"], e["args"].get("stream"), e["name"]))
    assert work
    with traceduck.open(path) as db:
        scoped = db.scoped([run_id, other])
        for capture in (run_id, other):  # itself, and another run: no capture window in either
            rel_ = scoped.sql("""SELECT l.correlation, w.position, w.name, w.match, w.op_name
                                 FROM graph_kernel_ops(?) w JOIN launch_calls l ON l.run_id = w.run_id AND l.event_id = w.launch_event_id
                                 WHERE w.run_id = ? ORDER BY l.correlation, w.position""", [capture, run_id])
            rows = [dict(zip(rel_.columns, r)) for r in rel_.fetchall()]
            assert [(r["correlation"], r["name"]) for r in rows] == \
                [(c, name) for c in sorted(work) for _ts, _s, name in sorted(work[c], key=lambda x: (x[0], x[1]))]
            assert {(r["match"], r["op_name"]) for r in rows} == {("no_capture", None)}
        columns, rows = run_report(scoped, "cuda-graphs", runs=[run_id], params=[f"capture={other}"])
        roof_columns, roof = run_report(scoped, "roofline", runs=[run_id])
        scoped.close()
    # roofline: the graph work no op takes is one row, with the note that asks for a capture run
    (graph_row,) = [r for r in (dict(zip(roof_columns, r)) for r in roof) if r["source"] == "graph"]
    assert graph_row["op_name"] is None and graph_row["calls"] == len(work)
    kernels = [e for v in work.values() for e in v]
    work_us = sum(e["dur"] for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
                  and e.get("args", {}).get("correlation") in graph_corr)
    assert abs(graph_row["dur_ns"] - work_us * 1000) <= len(kernels)  # ns rounding per item
    assert graph_row["note"].startswith("kernels inside CUDA graphs are not attributed to ops: pass --param capture=RUN")
    rows = [dict(zip(columns, r)) for r in rows]
    assert sum(r["kernels"] for r in rows) == sum(len(v) for v in work.values())
    assert sum(r["launches"] for r in rows) == len(graph_corr)
    assert {r["match"] for r in rows} <= {"no_capture", "no_work"}


def test_op_time_for_cost_models(graphs):
    """graph_op_time: per captured op, its graph's launches and the time of its kernels over them."""
    store, ids, expected = graphs
    rows = sql(store, "SELECT * FROM graph_op_time(?) WHERE run_id = ?", [ids["capture"], ids["replay"]])
    want = defaultdict(lambda: [set(), 0, 0])
    for e in expected:
        if e["op_name"] is not None:
            w = want[(e["graph"], e["op_name"])]
            w[0].add(e["launch_corr"])
            w[1] += 1
            w[2] += e["dur_ns"]
    got = {(r["graph_index"], r["op_name"]): [r["launches"], r["kernels"], r["gpu_dur_ns"]] for r in rows}
    assert got == {k: [len(c), n, d] for k, (c, n, d) in want.items()}
    assert {r["capture_run_id"] for r in rows} == {ids["capture"]}
    shapes = sql(store, "SELECT count(*) AS n FROM graph_op_time(?) t JOIN events e ON e.run_id = t.capture_run_id "
                        "AND e.event_id = t.op_event_id AND e.name = t.op_name", [ids["capture"]])
    assert shapes == [{"n": len(rows)}]  # op_event_id is the op's event in the capture run


# roofline with a capture run: a graph of a linear (whose addmm launches the GEMM) and a mul,
# captured with shapes, then replayed ROOF_LAUNCHES times on an H100
ROOF_LAUNCHES = 4
BF = "c10::BFloat16"
M, K, N = 512, 1024, 1024
LINEAR_FLOPS = 2 * M * K * N  # one [M, K] x [K, N] product; the bias add is not counted (torch.utils.flop_counter)
LINEAR_BYTES = (M * K + N * K + N + M * N) * 2  # input, weight, bias read, output written; bf16
MUL_FLOPS = M * N  # one multiply per element
MUL_BYTES = 3 * M * N * 2  # two inputs read, one output written


def roofline_traces() -> tuple[list[dict], list[dict], dict]:
    """(capture events, replay events, expected): the replay's durations are known per kernel."""
    cap = Trace()
    shapes = lambda dims, types, concrete=None: {"Input Dims": dims, "Input type": types,  # noqa: E731
                                                 "Concrete Inputs": concrete or [""] * len(dims)}
    cap.x("cuda_runtime", "cudaStreamBeginCapture", 100, 2)
    cap.x("cpu_op", "aten::linear", 110, 20, **shapes([[M, K], [N, K], [N]], [BF] * 3))
    cap.x("cpu_op", "aten::addmm", 112, 10, **shapes([[N], [M, K], [K, N], [], []], [BF] * 3 + ["Scalar"] * 2,
                                                  ["", "", "", "1", "1"]))
    cap.call("cudaLaunchKernel", 114)
    cap.x("cpu_op", "aten::mul", 140, 10, **shapes([[M, N], [M, N]], [BF, BF]))
    cap.call("cudaLaunchKernel", 142)
    cap.x("cuda_runtime", "cudaStreamEndCapture", 170, 2)
    rep = Trace()
    gemm_ns = mul_ns = 0
    ts = 1000
    for n in range(ROOF_LAUNCHES):
        rep.x("cpu_op", "CompiledFunction", ts, 20)
        corr = rep.call("cudaGraphLaunch", ts + 5)
        rep.gpu("kernel", "gemm_k", ts + 10, 3 + n, corr)
        rep.gpu("kernel", "mul_k", ts + 20, 1 + n, corr)
        gemm_ns += (3 + n) * US
        mul_ns += (1 + n) * US
        ts += 100
    corr = rep.call("cudaGraphLaunch", ts)  # another graph (three kernels): no captured graph fits
    for i in range(3):
        rep.gpu("kernel", f"other_{i}", ts + 10 + 10 * i, 5, corr)
    rep.x("cpu_op", "aten::mm", ts + 100, 10, **shapes([[16, 16], [16, 16]], ["float", "float"]))
    rep.gpu("kernel", "eager_mm", ts + 110, 2, rep.call("cudaLaunchKernel", ts + 102))
    return cap.events, rep.events, {"gemm_ns": gemm_ns, "mul_ns": mul_ns, "other_ns": 3 * 5 * US, "mm_ns": 2 * US}


@pytest.fixture(scope="module")
def roof(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("roof")
    cap, rep, expected = roofline_traces()
    store = tmp / "store"
    traceduck.ingest(write_trace(tmp / "cap.json", cap), store=store, name="cap")
    traceduck.ingest(write_trace(tmp / "rep.json", rep, deviceProperties=[{"id": 0, "name": "NVIDIA H100 80GB HBM3",
                                                                            "numSms": 132}]), store=store, name="rep")
    return store, expected


def roofline(store, runs, params=None) -> list[dict]:
    with traceduck.open(store) as db:
        columns, rows = run_report(db, "roofline", runs=runs, params=params)
    return [dict(zip(columns, r)) for r in rows]


@pytest.mark.slow  # 3 s
def test_roofline_shows_ops_inside_graphs(roof):
    store, exp = roof
    rows = roofline(store, ["rep"], ["capture=cap"])
    by = {(r["source"], r["op_name"]): r for r in rows}
    assert set(by) == {("graph", "aten::linear"), ("graph", "aten::mul"), ("eager", "aten::mm"), ("graph", None)}
    bf16_peak, h100_tbps = 989.4, 3.35  # H100 SXM, bf16 dense
    for op, flops, nbytes, gpu_ns in (("aten::linear", LINEAR_FLOPS, LINEAR_BYTES, exp["gemm_ns"]),
                                      ("aten::mul", MUL_FLOPS, MUL_BYTES, exp["mul_ns"])):
        r = by[("graph", op)]
        assert (r["calls"], r["dur_ns"]) == (ROOF_LAUNCHES, gpu_ns)
        assert (r["flops"], r["bytes"]) == (ROOF_LAUNCHES * flops, ROOF_LAUNCHES * nbytes)
        assert r["tflops_per_s"] == round(ROOF_LAUNCHES * flops / gpu_ns / 1e3, 6)
        assert r["tb_per_s"] == round(ROOF_LAUNCHES * nbytes / gpu_ns / 1e3, 6)
        assert (r["peak_tflops"], r["peak_tbps"], r["device"], r["dtype"], r["note"]) == \
            (bf16_peak, h100_tbps, "H100 SXM", "bfloat16", None)
        roof_ns = max(ROOF_LAUNCHES * flops / (bf16_peak * 1e3), ROOF_LAUNCHES * nbytes / (h100_tbps * 1e3))
        assert r["lost_dur_ns"] == gpu_ns - round(roof_ns)
    mm = by[("eager", "aten::mm")]
    assert (mm["calls"], mm["dur_ns"], mm["flops"]) == (1, exp["mm_ns"], 2 * 16 * 16 * 16)
    rest = by[("graph", None)]
    assert (rest["calls"], rest["dur_ns"], rest["flops"]) == (1, exp["other_ns"], None)
    assert rest["note"] == "graph work that no captured op issued (match: no_match): see the cuda-graphs report with the same --param capture"
    assert rows[-1] is rest  # after the run's ops


@pytest.mark.slow  # 1 s
def test_roofline_without_capture_says_graphs_are_not_attributed(roof):
    store, exp = roof
    rows = roofline(store, ["rep"])
    assert [(r["source"], r["op_name"], r["calls"], r["dur_ns"]) for r in rows] == \
        [("eager", "aten::mm", 1, exp["mm_ns"]), ("graph", None, ROOF_LAUNCHES + 1, exp["gemm_ns"] + exp["mul_ns"] + exp["other_ns"])]
    assert rows[1]["note"] == ("kernels inside CUDA graphs are not attributed to ops: pass --param capture=RUN, "
                               "a run that traced the graphs' capture")
    # the capture run's own rows: its captured ops ran nothing there
    cap = {r["op_name"]: r for r in roofline(store, ["cap"])}
    assert set(cap) == {"aten::linear", "aten::mul"}
    assert all(r["source"] == "eager" and r["dur_ns"] is None and r["note"].startswith("no GPU time is linked")
               for r in cap.values())
    assert (cap["aten::linear"]["flops"], cap["aten::mul"]["bytes"]) == (LINEAR_FLOPS, MUL_BYTES)
