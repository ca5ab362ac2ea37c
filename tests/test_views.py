"""The linking views, checked against numbers computed here with plain json."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from decimal import Decimal

import pytest

import traceduck
from traceduck.store import Store

from conftest import load_json, run_report, shared_dir, trace_events

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
@pytest.mark.slow  # 17 s
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


@pytest.mark.slow  # ingests every GPU trace
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
    path = shared_dir() / "cpu/full.json"
    events = trace_events(load_json(path))
    casts = {i: e for i, e in enumerate(events) if e.get("name") == "aten::to"
             and e["args"].get("Input Dims", [None])[0] == [65536, 1, 576]}
    traceduck.ingest(path, store=tmp_path / "s")
    with traceduck.open(tmp_path / "s") as db:
        rows = db.sql("""SELECT op_name, dims, src_dtype, dst_dtype, src_numel, dst_numel, src_bytes, dst_bytes, bytes,
                                call_site, is_outermost, time_basis, gpu_dur_ns
                         FROM tensor_copies ORDER BY bytes DESC, is_outermost DESC, event_id LIMIT 1""").fetchall()
        nested = db.sql("""SELECT op_name, is_outermost, count(*) FROM tensor_copies WHERE dims = [65536, 1, 576]
                           GROUP BY ALL ORDER BY ALL""").fetchall()
        rates = dict(db.sql("SELECT event_id, gb_per_s FROM tensor_copies WHERE dims = [65536, 1, 576] "
                            "AND op_name = 'aten::to'").fetchall())
    numel = 65536 * 1 * 576
    assert [e["args"]["Input type"][0] for e in casts.values()] == ["c10::Float8_e4m3fn"] * 12
    assert rows == [("aten::to", [65536, 1, 576], "float8_e4m3fn", "bfloat16", numel, numel, numel * 1, numel * 2,
                     numel * (1 + 2), "gen.py(77): _read_cache", True, "cpu", None)]
    assert numel * 3 == 113_246_208
    # 12 casts of the whole cache (4 layers x 3 steps), each seen as to -> _to_copy -> copy_
    assert nested == [("aten::_to_copy", False, 12), ("aten::copy_", False, 12), ("aten::to", True, 12)]
    # a CPU trace: no GPU work, so the rate is over the op's CPU time
    assert rates == {i: round(numel * 3 / ns(e["dur"]), 3) for i, e in casts.items()}


REAL_COPIES = {"aten::copy_", "aten::copy", "aten::_to_copy", "aten::clone", "aten::index_copy_", "aten::index_copy",
               "aten::_copy_from", "aten::_copy_from_and_resize"}
MAYBE_COPIES = {"aten::to", "aten::type_as", "aten::contiguous"}  # return their input when nothing needs to change
GPU_WORK_CATS = {"kernel", "gpu_memcpy", "memcpy", "gpu_memset", "memset"}


def _expected_copies(events) -> dict[int, tuple[int | None, bool]]:
    """{op index: (GPU ns it launched or None, no copy around it)} for every copy: the ops that always
    copy, and to/type_as/contiguous with one of those nested inside. Nesting by a plain per-thread
    stack; GPU work belongs to every op around the runtime call that launched it."""
    by_thread = defaultdict(list)
    ops = set()
    launch_of = {}
    for i, e in enumerate(events):
        if e.get("ph") != "X" or "dur" not in e:
            continue
        cat, name = e.get("cat"), e.get("name", "")
        if cat == "cpu_op" or (cat == "Operator" and "#" not in name):
            ops.add(i)
        elif cat in RUNTIME_CATS and LAUNCH_NAME.search(name):
            launch_of[e["args"]["correlation"]] = i
        else:
            continue
        by_thread[(str(e.get("pid")), str(e.get("tid")))].append((ns(e["ts"]), -ns(e["dur"]), i))
    parent = {}
    for spans in by_thread.values():
        spans.sort()
        stack = []
        for ts, neg_dur, i in spans:
            end = ts - neg_dur
            while stack and not (stack[-1][0] <= ts and end <= stack[-1][1]):
                stack.pop()
            parent[i] = stack[-1][2] if stack else None
            if i in ops:
                stack.append((ts, end, i))

    def ancestors(i):
        while parent.get(i) is not None:
            i = parent[i]
            yield i

    around_a_copy = {a for i in ops if events[i]["name"] in REAL_COPIES for a in ancestors(i)}
    copies = {i for i in ops if events[i]["name"] in REAL_COPIES
              or (events[i]["name"] in MAYBE_COPIES and i in around_a_copy)}
    gpu = Counter()
    for g in events:
        if g.get("ph") == "X" and str(g.get("cat")).lower() in GPU_WORK_CATS:
            launch = launch_of.get((g.get("args") or {}).get("correlation"))
            if launch is not None:
                for a in ancestors(launch):
                    if a in copies:
                        gpu[a] += ns(g["dur"])
    return {i: (gpu.get(i), not copies.intersection(ancestors(i))) for i in copies}


@pytest.mark.parametrize("key", sorted(GPU_TRACES))
@pytest.mark.slow  # 8 s
def test_copies_are_ops_that_move_data(gpu_store, key):
    """Every op that always copies, a to/type_as/contiguous only with a copy inside, and the GPU time
    of the work each one launched."""
    store, runs = gpu_store
    expected = _expected_copies(trace_events(load_json(shared_dir() / GPU_TRACES[key])))
    with traceduck.open(store) as db:
        got = {i: (g, o) for i, g, o in db.sql("SELECT event_id, gpu_dur_ns, is_outermost FROM tensor_copies "
                                               "WHERE run_id = ?", [runs[key]]).fetchall()}
        bases = dict(db.sql("SELECT time_basis, count(*) FROM tensor_copies WHERE run_id = ? GROUP BY 1",
                            [runs[key]]).fetchall())
    assert got == expected
    assert bases.get("gpu", 0) == sum(g is not None for g, _ in expected.values())
    if key in ("flows_2022", "b200", "cuda_graph", "schema_2021"):
        assert bases["gpu"] > 20


def test_copies_of_a_cpu_training_trace(tmp_path):
    path = shared_dir() / "cpu/train.json.gz"
    events = trace_events(load_json(path))
    expected = _expected_copies(events)
    traceduck.ingest(path, store=tmp_path / "s")
    with traceduck.open(tmp_path / "s") as db:
        got = {i: (g, o) for i, g, o in db.sql("SELECT event_id, gpu_dur_ns, is_outermost FROM tensor_copies").fetchall()}
    returns_input = [i for i, e in enumerate(events) if e.get("name") == "aten::to" and i not in expected]
    assert got == expected
    assert len(returns_input) == 15  # .to() calls with nothing inside: not copies


@pytest.mark.slow  # 3 s
def test_a_to_that_returns_its_input_is_not_a_copy(gpu_store):
    """The public trace where 12 `aten::to` of an int64 [755000] tensor to int64 looked like 145 MB
    moved in 3 us (48,320 GB/s): nothing runs inside them."""
    store, runs = gpu_store
    events = trace_events(load_json(shared_dir() / GPU_TRACES["flows_2022"]))
    noop = [i for i, e in enumerate(events) if e.get("name") == "aten::to"
            and e["args"].get("Input Dims", [None])[0] == [755000] and e["args"]["Input type"][0] == "long"]
    assert len(noop) == 12
    assert sum(ns(events[i]["dur"]) for i in noop) == 3000
    expected = _expected_copies(events)
    assert not set(noop) & set(expected)
    with traceduck.open(store) as db:
        listed = db.sql("SELECT count(*) FROM tensor_copies WHERE run_id = ? AND event_id IN (SELECT unnest(?))",
                        [runs["flows_2022"], noop]).fetchall()[0][0]
        to_rows = db.sql("SELECT count(*) FROM tensor_copies WHERE run_id = ? AND op_name = 'aten::to'",
                         [runs["flows_2022"]]).fetchall()[0][0]
        columns, rows = run_report(db, "copies-by-call-site", runs=[runs["flows_2022"]])
        by_site = [dict(zip(columns, r)) for r in rows]
        columns, rows = run_report(db, "overview", runs=[runs["flows_2022"]])
        overview = [dict(zip(columns, r)) for r in rows]
    assert listed == 0
    assert to_rows == sum(events[i]["name"] == "aten::to" for i in expected) > 0
    outermost = {i: gpu for i, (gpu, is_outermost) in expected.items() if is_outermost}
    assert sum(r["calls"] for r in by_site) == len(outermost)
    assert sum(r["total_gpu_dur_ns"] or 0 for r in by_site) == sum(g or 0 for g in outermost.values())
    assert not [r for r in by_site if r["dims"] == [755000] and r["src_dtype"] == "int64"]
    for r in by_site:  # over GPU time where every call launched GPU work, else over CPU time
        time_ns = r["total_gpu_dur_ns"] if r["time_basis"] == "gpu" else r["total_dur_ns"]
        assert r["gb_per_s"] == (round(r["total_bytes"] / time_ns, 3) if time_ns else None)
    assert sum(r["time_basis"] == "gpu" for r in by_site) > 20
    top = [r for r in overview if r["section"] == "top copy"]
    assert len(top) == 1 and "[755000]" not in top[0]["detail"]


def _hand_made_copies(tmp_path):
    def op(name, ts, dur, dims, types, concrete=None):
        args = {"Input Dims": dims, "Input type": types}
        if concrete:
            args["Concrete Inputs"] = concrete
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}

    s5 = ["Scalar"] * 4
    events = [
        # 0: a broadcast: dst[16384, 576].copy_(src[576]), float32 -> bfloat16, with a GPU kernel of 50 us
        op("aten::copy_", 10, 20, [[16384, 576], [576], []], ["c10::BFloat16", "float", "Scalar"]),
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 12, "dur": 5,
         "args": {"correlation": 7}},
        {"ph": "X", "cat": "kernel", "name": "copy_kernel", "pid": 0, "tid": 7, "ts": 40, "dur": 50,
         "args": {"correlation": 7, "device": 0, "stream": 7}},
        # 3: .to(float32) of a float32 tensor: returns it, nothing inside
        op("aten::to", 100, 2, [[8, 8], [], [], [], []], ["float", *s5], ["", "6", "", "", ""]),
        # 4-6: .to(float16) of a float32 tensor: to -> _to_copy -> copy_
        op("aten::to", 200, 30, [[4, 4], [], [], [], []], ["float", *s5], ["", "5", "", "", ""]),
        op("aten::_to_copy", 201, 28, [[4, 4], [], [], [], []], ["float", *s5], ["", "5", "", "", ""]),
        op("aten::copy_", 210, 15, [[4, 4], [4, 4], []], ["c10::Half", "float", "Scalar"]),
        # 7, 8: contiguous of a contiguous tensor, type_as of the same type: nothing inside
        op("aten::contiguous", 300, 1, [[3, 5], []], ["double", "Scalar"]),
        op("aten::type_as", 310, 1, [[2], [2]], ["long int", "long int"]),
        # 9: self[100, 8].index_copy_(0, index[10], source[10, 8]) writes 80 elements
        op("aten::index_copy_", 400, 10, [[100, 8], [], [10], [10, 8]], ["float", "Scalar", "long int", "float"]),
        # 10-12: contiguous of a strided tensor: contiguous -> clone -> copy_
        op("aten::contiguous", 500, 20, [[6, 7], []], ["c10::BFloat16", "Scalar"]),
        op("aten::clone", 501, 18, [[6, 7], []], ["c10::BFloat16", "Scalar"]),
        op("aten::copy_", 505, 10, [[6, 7], [6, 7], []], ["c10::BFloat16", "c10::BFloat16", "Scalar"]),
    ]
    from conftest import write_trace

    return write_trace(tmp_path / "copies.json", events)


def test_copy_bytes_broadcast_and_time_basis(tmp_path):
    traceduck.ingest(_hand_made_copies(tmp_path), store=tmp_path / "s")
    with traceduck.open(tmp_path / "s") as db:
        rows = db.sql("""SELECT event_id, op_name, src_dtype, dst_dtype, src_numel, dst_numel, src_bytes, dst_bytes, bytes,
                                gpu_dur_ns, time_basis, gb_per_s, is_outermost
                         FROM tensor_copies ORDER BY event_id""").fetchall()
        columns, report_rows = run_report(db, "copies-by-call-site")
    n = 16384 * 576
    by_op = {(r["op_name"], r["dst_dtype"]): r for r in (dict(zip(columns, r)) for r in report_rows)}
    assert sorted(by_op) == [("aten::contiguous", "bfloat16"), ("aten::copy_", "bfloat16"),
                             ("aten::index_copy_", "float32"), ("aten::to", "float16")]
    broadcast = by_op[("aten::copy_", "bfloat16")]
    assert (broadcast["dims"], broadcast["bytes_per_call"], broadcast["total_dur_ns"], broadcast["total_gpu_dur_ns"],
            broadcast["time_basis"], broadcast["gb_per_s"]) == ([576], 576 * 4 + n * 2, 20_000, 50_000, "gpu",
                                                                round((576 * 4 + n * 2) / 50_000, 3))
    cast = by_op[("aten::to", "float16")]
    assert (cast["total_gpu_dur_ns"], cast["time_basis"], cast["gb_per_s"]) == (None, "cpu", round(96 / 30_000, 3))
    assert rows == [
        (0, "aten::copy_", "float32", "bfloat16", 576, n, 576 * 4, n * 2, 576 * 4 + n * 2, 50_000, "gpu",
         round((576 * 4 + n * 2) / 50_000, 3), True),
        (4, "aten::to", "float32", "float16", 16, 16, 64, 32, 96, None, "cpu", round(96 / 30_000, 3), True),
        (5, "aten::_to_copy", "float32", "float16", 16, 16, 64, 32, 96, None, "cpu", round(96 / 28_000, 3), False),
        (6, "aten::copy_", "float32", "float16", 16, 16, 64, 32, 96, None, "cpu", round(96 / 15_000, 3), False),
        (9, "aten::index_copy_", "float32", "float32", 80, 80, 320, 320, 640, None, "cpu", round(640 / 10_000, 3), True),
        (10, "aten::contiguous", "bfloat16", "bfloat16", 42, 42, 84, 84, 168, None, "cpu", round(168 / 20_000, 3), True),
        (11, "aten::clone", "bfloat16", "bfloat16", 42, 42, 84, 84, 168, None, "cpu", round(168 / 18_000, 3), False),
        (12, "aten::copy_", "bfloat16", "bfloat16", 42, 42, 84, 84, 168, None, "cpu", round(168 / 10_000, 3), False),
    ]


def test_dtypes_cover_real_type_names(tmp_path):
    with traceduck.Database(Store(tmp_path / "empty", create=True)) as db:
        rows = dict(db.sql("SELECT type_name, elem_bytes FROM dtypes WHERE type_name IS NOT NULL").fetchall())
        codes = dict(db.sql("SELECT scalar_type, torch_name FROM dtypes WHERE scalar_type IS NOT NULL").fetchall())
    assert rows["c10::BFloat16"] == 2 and rows["c10::Float8_e4m3fn"] == 1 and rows["__int64"] == 8
    assert rows["long int"] == 8 and rows["float"] == 4 and rows["c10::complex<float>"] == 8
    assert rows["Scalar"] is None and rows["TensorList"] is None and rows[""] is None
    assert codes[15] == "bfloat16" and codes[24] == "float8_e4m3fn" and codes[6] == "float32"


@pytest.mark.parametrize("key", ["cuda_graph", "amd_mi300", "schema_2021"])
@pytest.mark.slow  # 3 s
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
