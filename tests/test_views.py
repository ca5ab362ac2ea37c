"""The linking views, checked against numbers computed here with plain json."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from decimal import Decimal

import pytest

import traceduck
from traceduck.store import Store

from conftest import load_json, shared_dir, trace_events

RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "Runtime", "mtia_runtime", "hip_runtime"}
LAUNCH_NAME = re.compile(r"(?i)(launch|memcpy|memset)")

GPU_TRACES = {
    "hip_graph": "public/AMD-AGI__TraceLens/tests/traces/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz",
    "cuda_graph": "public/facebookresearch__HolisticTraceAnalysis/tests/data/negative_queue_length_values_check/rank0.json.gz",
    "amd_mi300": "public/AMD-AGI__TraceLens/tests/traces/mi300/gaunernst_bert-small-uncased__1016001.json.gz",
    "amd_rocm62": "public/facebookresearch__HolisticTraceAnalysis/tests/data/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "schema_2021": "public/pytorch__kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
    "flows_2022": "public/facebookresearch__HolisticTraceAnalysis/tests/data/trace_diff/control/control.json.gz",
    "b200": "public/AMD-AGI__TraceLens/tests/traces/b200/eager_trace.json.gz",
    "h100": "public/AMD-AGI__TraceLens/tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz",
}


def ns(v) -> int:
    return int(Decimal(v) * 1000)


@pytest.fixture(scope="module")
def gpu_store(tmp_path_factory):
    store = tmp_path_factory.mktemp("gpu") / "store"
    runs = {key: traceduck.ingest(shared_dir() / rel, store=store)[0].run_id for key, rel in GPU_TRACES.items()}
    return store, runs


def _expected_gpu(events):
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "Kernel")]
    launches = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in RUNTIME_CATS and LAUNCH_NAME.search(e.get("name", "")):
            c = (e.get("args") or {}).get("correlation")
            if c is not None:
                launches[c] = e
    linked = [k for k in kernels if k["args"].get("correlation") in launches]
    fan_out = Counter(k["args"]["correlation"] for k in linked if "GraphLaunch" in launches[k["args"]["correlation"]]["name"])
    return {
        "kernels": len(kernels),
        "kernel_ns": sum(ns(k["dur"]) for k in kernels),
        "linked": len(linked),
        "graph_fan_out": sorted(fan_out.values()),
    }


@pytest.mark.parametrize("key", sorted(GPU_TRACES))
def test_gpu_kernels_link_to_launches(gpu_store, key):
    store, runs = gpu_store
    expected = _expected_gpu(trace_events(load_json(shared_dir() / GPU_TRACES[key])))
    with traceduck.open(store) as db:
        kernels, kernel_ns, linked = db.sql(
            "SELECT count(*), sum(dur_ns), count(launch_event_id) FROM gpu_kernels WHERE run_id = ?",
            [runs[key]]).fetchall()[0]
        fan_out = [r[0] for r in db.sql(
            "SELECT count(*) FROM gpu_kernels WHERE run_id = ? AND is_graph_launched GROUP BY launch_event_id ORDER BY 1",
            [runs[key]]).fetchall()]
        ops = db.sql("SELECT count(*) FILTER (WHERE op_name IS NOT NULL), count(*) FILTER (WHERE launch_event_id IS NOT NULL) "
                     "FROM gpu_kernels WHERE run_id = ? AND NOT is_graph_launched", [runs[key]]).fetchall()[0]
    assert (kernels, kernel_ns, linked) == (expected["kernels"], expected["kernel_ns"], expected["linked"])
    assert fan_out == expected["graph_fan_out"]
    assert expected["kernels"] > 0
    if key in ("hip_graph", "cuda_graph"):
        assert max(fan_out) > 1  # one graph launch, many kernels
    if key in ("schema_2021", "flows_2022", "b200", "amd_mi300"):
        assert ops[0] > 0.9 * ops[1]  # eager kernels reach their CPU op


def test_launching_op_is_the_innermost_enclosing_op(gpu_store):
    store, runs = gpu_store
    events = trace_events(load_json(shared_dir() / GPU_TRACES["b200"]))
    # independent: innermost cpu_op on the same thread whose span contains the runtime call
    ops = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            ops[e["tid"]].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["name"]))
    expected = Counter()
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in RUNTIME_CATS and LAUNCH_NAME.search(e["name"]):
            t0, t1 = ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])
            inside = [o for o in ops[e["tid"]] if o[0] <= t0 and t1 <= o[1]]
            expected[min(inside, key=lambda o: o[1] - o[0])[2] if inside else None] += 1
    with traceduck.open(store) as db:
        got = Counter(dict(db.sql("SELECT op_name, count(*) FROM launches WHERE run_id = ? GROUP BY 1",
                                  [runs["b200"]]).fetchall()))
    assert got == expected


def test_steps_match_profiler_step_annotations(tmp_path):
    path = shared_dir() / "cpu/full.json"
    events = trace_events(load_json(path))
    expected = sorted((int(e["name"].split("#")[1]), ns(e["dur"])) for e in events
                      if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    traceduck.ingest(path, store=tmp_path / "s")
    with traceduck.open(tmp_path / "s") as db:
        got = db.sql("SELECT step, dur_ns FROM steps ORDER BY step").fetchall()
        per_step = db.sql("SELECT step, count(*) FROM cpu_ops GROUP BY step ORDER BY step NULLS LAST").fetchall()
    assert got == expected == [(2, got[0][1]), (3, got[1][1]), (4, got[2][1])]
    assert [s for s, _ in per_step] == [2, 3, 4]  # every op of full.json lies in an active step


def _self_times(events):
    """Self time per op name: dur minus direct children, nesting by a plain per-thread stack."""
    by_tid = defaultdict(list)
    for i, e in enumerate(events):
        if e.get("ph") == "X" and "dur" in e and e.get("cat") in ("cpu_op", "user_annotation", "python_function"):
            by_tid[e["tid"]].append((ns(e["ts"]), -ns(e["dur"]), i))
    child_ns = Counter()
    for spans in by_tid.values():
        spans.sort()
        stack = []
        for ts, neg_dur, i in spans:
            end = ts - neg_dur
            while stack and not (stack[-1][0] <= ts and end <= stack[-1][1]):
                stack.pop()
            if stack:
                child_ns[stack[-1][2]] += -neg_dur
            stack.append((ts, end, i))
    totals = Counter()
    for i, e in enumerate(events):
        if e.get("cat") == "cpu_op":
            totals[e["name"]] += max(ns(e["dur"]) - child_ns[i], 0)
    return totals


def test_self_time_of_top_ops(tmp_path):
    path = shared_dir() / "cpu/nostack.json"
    expected = _self_times(trace_events(load_json(path)))
    traceduck.ingest(path, store=tmp_path / "s")
    with traceduck.open(tmp_path / "s") as db:
        got = db.sql("SELECT name, sum(self_dur_ns) FROM cpu_ops GROUP BY name ORDER BY 2 DESC LIMIT 5").fetchall()
    assert got == expected.most_common(5)
    assert got[0][0] == "aten::copy_"


def test_largest_copy_in_full_trace(tmp_path):
    traceduck.ingest(shared_dir() / "cpu/full.json", store=tmp_path / "s")
    with traceduck.open(tmp_path / "s") as db:
        rows = db.sql("""SELECT op_name, dims, src_dtype, dst_dtype, numel, bytes, call_site, is_outermost
                         FROM tensor_copies ORDER BY bytes DESC, is_outermost DESC, event_id LIMIT 1""").fetchall()
        nested = db.sql("""SELECT op_name, is_outermost, count(*) FROM tensor_copies WHERE dims = [65536, 1, 576]
                           GROUP BY ALL ORDER BY ALL""").fetchall()
    numel = 65536 * 1 * 576
    assert rows == [("aten::to", [65536, 1, 576], "float8_e4m3fn", "bfloat16", numel, numel * (1 + 2),
                     "gen.py(77): _read_cache", True)]
    assert numel * 3 == 113_246_208
    # 12 casts of the whole cache (4 layers x 3 steps), each seen as to -> _to_copy -> copy_
    assert nested == [("aten::_to_copy", False, 12), ("aten::copy_", False, 12), ("aten::to", True, 12)]


def test_dtypes_cover_real_type_names(tmp_path):
    with traceduck.Database(Store(tmp_path / "empty", create=True)) as db:
        rows = dict(db.sql("SELECT type_name, elem_bytes FROM dtypes WHERE type_name IS NOT NULL").fetchall())
        codes = dict(db.sql("SELECT scalar_type, torch_name FROM dtypes WHERE scalar_type IS NOT NULL").fetchall())
    assert rows["c10::BFloat16"] == 2 and rows["c10::Float8_e4m3fn"] == 1 and rows["__int64"] == 8
    assert rows["long int"] == 8 and rows["float"] == 4 and rows["c10::complex<float>"] == 8
    assert rows["Scalar"] is None and rows["TensorList"] is None and rows[""] is None
    assert codes[15] == "bfloat16" and codes[24] == "float8_e4m3fn" and codes[6] == "float32"


@pytest.mark.parametrize("key", ["cuda_graph", "amd_mi300", "schema_2021"])
def test_gpu_work_gets_the_step_of_its_launch(gpu_store, key):
    store, runs = gpu_store
    events = trace_events(load_json(shared_dir() / GPU_TRACES[key]))
    windows = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), int(e["name"].split("#")[1])) for e in events
               if e.get("cat") in ("user_annotation", "Operator") and e.get("name", "").startswith("ProfilerStep#")]
    launch_ts = {e["args"]["correlation"]: ns(e["ts"]) for e in events
                 if e.get("ph") == "X" and e.get("cat") in RUNTIME_CATS and LAUNCH_NAME.search(e["name"])}
    expected = Counter()
    late = 0  # kernels that start after their step's CPU window has ended
    for k in events:
        if k.get("cat") in ("kernel", "Kernel") and k["args"].get("correlation") in launch_ts:
            t = launch_ts[k["args"]["correlation"]]
            window = next(((a, b, s) for a, b, s in windows if a <= t < b), None)
            expected[window[2] if window else None] += 1
            late += window is not None and ns(k["ts"]) >= window[1]
    with traceduck.open(store) as db:
        got = Counter(dict(db.sql("SELECT step, count(*) FROM gpu_kernels WHERE run_id = ? AND launch_event_id IS NOT NULL "
                                  "GROUP BY 1", [runs[key]]).fetchall()))
        gpu_spans = db.sql("SELECT count(gpu_ts_ns) FROM steps WHERE run_id = ?", [runs[key]]).fetchall()[0][0]
    assert got == expected
    assert sum(n for step, n in expected.items() if step is not None) > 0
    if key == "cuda_graph":
        assert late > 1000  # still counted in their step
    if key == "amd_mi300":
        assert gpu_spans == len(windows) > 0
