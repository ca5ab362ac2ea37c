"""Reports after HTA's and TraceLens's analyses (issue 31): idle-gaps, kernel-sequences, annotations,
modules and recompute, each checked against a computation of its own over the trace's JSON."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from decimal import Decimal

import pytest

import traceduck

from conftest import load_json, run_report, shared_dir, trace_events, union_length, write_trace

BERT = "public/AMD-AGI__TraceLens/tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz"
ANNOTATED = "public/facebookresearch__HolisticTraceAnalysis/tests/data/with_gpu_user_annotation/step_based_trace_2543932.json.gz"
WORK_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def ns(v) -> int:
    return int(Decimal(v) * 1000)


def rows_of(store, name, params=None):
    with traceduck.open(store) as db:
        columns, rows = run_report(db, name, params=params)
    return [dict(zip(columns, r)) for r in rows]


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    store = tmp_path_factory.mktemp("peers") / "store"
    traceduck.ingest(shared_dir() / BERT, store=store)
    return store, trace_events(load_json(shared_dir() / BERT))


def stream_of(e):
    return (int(e["pid"]), int(e.get("args", {}).get("stream", re.search(r"(\d+)$", str(e["tid"])).group(1))))


def launches_by_correlation(events):
    return {e["args"]["correlation"]: e for e in events
            if e.get("cat") in ("cuda_runtime", "cuda_driver") and e.get("ph") == "X"
            and re.search(r"(?i)launch|memcpy|memset", e["name"]) and "correlation" in e.get("args", {})}


def nearest_rank(values, q):
    s = sorted(values)
    return s[max(math.ceil(len(s) * q), 1) - 1]


def test_idle_gaps_are_the_gaps_between_stream_work(bert):
    store, events = bert
    launch = launches_by_correlation(events)
    work = defaultdict(list)
    for i, e in enumerate(events):
        if e.get("ph") == "X" and e.get("cat") in WORK_CATS:
            work[stream_of(e)].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), i, e))
    expected = {}
    for key, items in work.items():
        items.sort(key=lambda w: (w[0], w[1], w[2]))
        gaps, by_cat, prev_end = [], defaultdict(int), None
        for ts, end, _, e in items:
            if prev_end is not None and ts > prev_end:
                gap = ts - prev_end
                gaps.append(gap)
                l = launch.get(e.get("args", {}).get("correlation"))
                cat = "host_wait" if l is not None and ns(l["ts"]) > prev_end else "kernel_wait" if gap < 30_000 else "other"
                by_cat[cat] += gap
            prev_end = end if prev_end is None else max(prev_end, end)
        if gaps:
            expected[key] = (len(gaps), sum(gaps), nearest_rank(gaps, 0.5), nearest_rank(gaps, 0.9), max(gaps), dict(by_cat))
    rows = rows_of(store, "idle-gaps")
    got = {(r["device"], r["stream"]): (r["gaps"], r["idle_ns"], r["p50_ns"], r["p90_ns"], r["max_ns"],
                                        {x["category"]: x["idle_ns"] for x in rows if (x["device"], x["stream"]) == (r["device"], r["stream"]) and x["category"] != "all"})
           for r in rows if r["category"] == "all"}
    assert got == expected and expected  # bert on the H100: 60 gaps, all host waits
    assert expected[(0, 7)][0] == 60 and set(expected[(0, 7)][5]) == {"host_wait"}


def test_kernel_sequences_count_every_run_of_consecutive_kernels(bert):
    store, events = bert
    per_stream = defaultdict(list)
    for i, e in enumerate(events):
        if e.get("ph") == "X" and e.get("cat") == "kernel":
            per_stream[stream_of(e)].append((ns(e["ts"]), i, e["name"], ns(e["dur"])))
    counts, times = Counter(), Counter()
    for items in per_stream.values():
        items.sort()
        for j in range(len(items) - 2):
            seq = " | ".join(x[2] for x in items[j:j + 3])
            counts[seq] += 1
            times[seq] += sum(x[3] for x in items[j:j + 3])
    expected = {s: (c, times[s]) for s, c in counts.items() if c >= 2}
    rows = rows_of(store, "kernel-sequences", ["length=3", "top=100000"])
    assert {r["sequence"]: (r["occurrences"], r["kernel_time_ns"]) for r in rows} == expected and expected
    assert [r["occurrences"] for r in rows] == sorted((r["occurrences"] for r in rows), reverse=True)
    # length 1 is top-kernels by count
    one = rows_of(store, "kernel-sequences", ["length=1", "min_count=1", "top=100000"])
    assert {r["sequence"]: r["occurrences"] for r in one} == Counter(x[2] for v in per_stream.values() for x in v)


def test_modules_tree_against_the_module_frames(bert):
    store, events = bert
    mods = [e for e in events if e.get("ph") == "X" and e.get("cat") == "python_function" and e["name"].startswith("nn.Module: ")]

    def path_at(tid, ts, end):
        # the nn.Module frames around [ts, end] on the thread, outermost first
        around = [m for m in mods if m["tid"] == tid and ns(m["ts"]) <= ts and end <= ns(m["ts"]) + ns(m["dur"])]
        return " > ".join(m["name"][len("nn.Module: "):] for m in sorted(around, key=lambda m: (ns(m["ts"]), -ns(m["dur"]))))

    calls, cpu = Counter(), Counter()
    for m in mods:
        p = path_at(m["tid"], ns(m["ts"]), ns(m["ts"]) + ns(m["dur"]))
        calls[p] += 1
        cpu[p] += ns(m["dur"])
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    launch = launches_by_correlation(events)
    gpu = Counter()
    for k in (e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"):
        l = launch[k["args"]["correlation"]]
        lt = ns(l["ts"])
        around = [o for o in ops if o["tid"] == l["tid"] and ns(o["ts"]) <= lt and lt + ns(l["dur"]) <= ns(o["ts"]) + ns(o["dur"])]
        op = min(around, key=lambda o: ns(o["dur"]))  # the innermost op around the launch
        p = path_at(op["tid"], ns(op["ts"]), ns(op["ts"]) + ns(op["dur"]))
        parts = p.split(" > ") if p else []
        for i in range(1, len(parts) + 1):
            gpu[" > ".join(parts[:i])] += ns(k["dur"])
    rows = rows_of(store, "modules")
    assert {r["module_path"]: (r["calls"], r["cpu_ns"], r["gpu_ns"]) for r in rows} == {
        p: (calls[p], cpu[p], gpu[p]) for p in set(calls) | set(gpu)}
    assert len(rows) == 84 and rows[0]["module_path"] == "BertLMHeadModel_0" and rows[0]["gpu_pct"] == 100.0
    folded = rows_of(store, "modules", ["depth=2"])
    assert {r["module_path"]: (r["gpu_ns"], r["self_gpu_ns"]) for r in folded} == {
        r["module_path"]: (r["gpu_ns"], r["gpu_ns"] if r["module_depth"] == 2 else r["self_gpu_ns"]) for r in rows if r["module_depth"] <= 2}
    merged = rows_of(store, "modules", ["merge_instances=true"])
    layer = "BertLMHeadModel > BertModel > BertEncoder > BertLayer"
    assert {r["module_path"]: r["calls"] for r in merged}[layer] == sum(
        calls[p] for p in calls if re.fullmatch(r"BertLMHeadModel_0 > BertModel_0 > BertEncoder_0 > BertLayer_\d+", p))


def test_annotations_attribute_kernels_to_the_innermost_annotation(tmp_path):
    path = shared_dir() / ANNOTATED
    events = trace_events(load_json(path))
    store = tmp_path / "store"
    traceduck.ingest(path, store=store)
    launch = launches_by_correlation(events)
    step = re.compile(r"^ProfilerStep#\d+$")
    anns = {"gpu": [e for e in events if e.get("ph") == "X" and e.get("cat") == "gpu_user_annotation"],
            "cpu": [e for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"]}
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    expected = {}
    for timeline, items in anns.items():
        users = [a for a in items if not step.match(a["name"])]
        per = defaultdict(lambda: [0, 0, 0, 0])
        for a in users:
            per[a["name"]][0] += 1
            per[a["name"]][1] += ns(a["dur"])
        for k in kernels:
            if timeline == "gpu":
                where, ts, end = (k["pid"], k["tid"]), ns(k["ts"]), ns(k["ts"]) + ns(k["dur"])
            else:
                l = launch.get(k["args"].get("correlation"))
                if l is None:
                    continue
                where, ts, end = (l["pid"], l["tid"]), ns(l["ts"]), ns(l["ts"])
            around = [a for a in users if (a["pid"], a["tid"]) == where and ns(a["ts"]) <= ts and end <= ns(a["ts"]) + ns(a["dur"])
                      and (timeline == "gpu" or ts < ns(a["ts"]) + ns(a["dur"]))]
            name = min(around, key=lambda a: ns(a["dur"]))["name"] if around else "(none)"
            per[name][2] += 1
            per[name][3] += ns(k["dur"])
        expected.update({(timeline, n): tuple(v) for n, v in per.items()})
    rows = rows_of(store, "annotations")
    assert {(r["timeline"], r["annotation"]): (r["instances"], r["span_ns"], r["kernels"], r["kernel_time_ns"]) for r in rows} == expected
    # HTA's breakdown: the annotations' own length per name (use_gpu_annotation=True)
    assert {r["annotation"]: r["span_ns"] for r in rows if r["timeline"] == "gpu" and r["annotation"] != "(none)"} == {
        "Optimizer.step#SGD.step": 321_000, "Optimizer.zero_grad#SGD.zero_grad": 310_000}


def test_recompute_finds_the_forward_ops_run_again_in_backward(tmp_path):
    def op(name, tid, ts, dur, dims, ext):
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
                "args": {"External id": ext, "Input Dims": dims, "Input type": ["float"] * len(dims)}}

    def launch(tid, ts, corr):
        return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": tid, "ts": ts, "dur": 2,
                "args": {"correlation": corr}}

    def kernel(ts, dur, corr):
        return {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": ts, "dur": dur,
                "args": {"correlation": corr, "stream": 7, "device": 0}}

    mm = [[4, 4], [4, 4]]
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 1000, "args": {}},
        op("aten::mm", 1, 10, 10, mm, 1), launch(1, 12, 100), kernel(30, 5, 100),        # forward
        op("aten::mm", 1, 40, 10, [[8, 4], [4, 4]], 2),                                   # another shape: no match
        op("CheckpointFunctionBackward", 2, 100, 50, [], 3),                              # reentrant checkpoint
        op("aten::mm", 2, 110, 10, mm, 4), launch(2, 112, 101), kernel(130, 6, 101),
        op("aten::relu", 2, 125, 5, [[4, 4]], 5),                                         # recomputed, no forward call
        {"ph": "X", "cat": "python_function", "name": "torch/utils/checkpoint.py(1130): recompute_fn", "pid": 1, "tid": 2,
         "ts": 200, "dur": 30, "args": {}},                                               # non-reentrant checkpoint
        op("aten::mm", 2, 205, 10, mm, 6), launch(2, 207, 102), kernel(230, 7, 102),
    ]
    store = tmp_path / "store"
    traceduck.ingest(write_trace(tmp_path / "ckpt.json", events), store=store)
    rows = rows_of(store, "recompute")
    assert [(r["step"], r["name"], r["input_dims"], r["calls"], r["forward_calls"], r["gpu_ns"]) for r in rows] == [
        (1, "aten::mm", "[[4, 4], [4, 4]]", 2, 1, 13_000)]
    assert rows[0]["step_gpu_pct"] == round(100 * 13 / 18, 2)
    every = rows_of(store, "recompute", ["matched_only=false"])
    assert {(r["name"], r["calls"], r["forward_calls"]) for r in every} == {("aten::mm", 2, 1), ("aten::relu", 1, 0)}
