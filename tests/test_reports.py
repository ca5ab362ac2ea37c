"""Canned reports: documented headers, every report on every shared trace, golden values
computed here from the trace with plain json."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter, defaultdict
from decimal import Decimal

import pytest

import traceduck
from traceduck.catalog import ROLES, all_reports, diff_spec, parse_report

from conftest import SAMPLES, load_json, run_report, shared_dir, shared_trace_files, trace_events, union_length

REPORTS = sorted(all_reports())
EXPECTED_REPORTS = ["annotations", "callees", "callers", "collective-skew", "collectives", "comm-overlap", "copies-by-call-site", "critical-path", "cuda-graphs",
                    "gpu-utilization", "idle", "idle-gaps", "kernel-sequences", "launch-overhead", "memory", "modules", "ops-by-shape",
                    "overview", "ranks", "recompute", "roofline", "step-stats", "steps", "sync", "time-by-call-site", "top-kernels", "top-ops"]


def ns(v) -> int:
    return int(Decimal(v) * 1000)


def rows_as_dicts(columns, rows):
    return [dict(zip(columns, r)) for r in rows]


@pytest.fixture(scope="module")
def cpu_store(tmp_path_factory):
    store = tmp_path_factory.mktemp("reports") / "store"
    for rel in ("cpu/full.json", "cpu/fixed.json", "cpu/nostack.json"):
        traceduck.ingest(shared_dir() / rel, store=store)
    for sample in ("buggy", "fixed"):
        traceduck.ingest(SAMPLES / f"{sample}.json.gz", store=store, name=f"sample-{sample}")
    return store


def report(store, name, run=None, params=None, **kw):
    with traceduck.open(store) as db:
        columns, rows = run_report(db, name, runs=[run] if run else None, params=params, **kw)
    return rows_as_dicts(columns, rows)


def test_the_reports_exist():
    assert REPORTS == EXPECTED_REPORTS


@pytest.mark.parametrize("name", REPORTS)
def test_header_is_complete(name):
    r = all_reports()[name]
    assert len(r.title) > 5 and len(r.description) > 20
    assert all(len(p.doc) > 5 for p in r.params)
    assert all(len(c.doc) > 3 for c in r.columns)
    assert [c.name for c in r.columns][:2] == ["run_id", "run_name"]
    # every column says what a narrow terminal may do with it; the rows are told apart by a key, and
    # `rank` is only ever a distributed rank (a position in a list is `position`)
    assert {c.name: c.role for c in r.columns if c.role not in ROLES} == {}
    assert [c.name for c in r.columns if c.role == "key"][2:] and any(c.role == "result" for c in r.columns)
    assert all("rank of" in c.doc or "straggler" in c.doc for c in r.columns if c.name == "rank")


def test_diff_columns_have_roles():
    roles = {c.name: c.role for c in diff_spec().columns}
    assert set(roles.values()) <= set(ROLES) and roles["key"] == "key"
    assert [c for c, role in roles.items() if role == "result"] == ["a_dur_ns", "b_dur_ns", "delta_ns", "ratio", "status"]


def test_a_column_role_is_parsed_from_the_header(tmp_path):
    path = tmp_path / "r.sql"
    path.write_text("-- title: A report\n-- description: One line on what it answers.\n"
                    "-- column: call_site VARCHAR [key] -- where -- it is\n-- column: dims BIGINT[][] [detail] -- dims\n"
                    "-- column: calls BIGINT -- number of calls, [no role]\nSELECT 1\n")
    assert [(c.name, c.type, c.role, c.doc) for c in parse_report(path).columns] == [
        ("call_site", "VARCHAR", "key", "where -- it is"), ("dims", "BIGINT[][]", "detail", "dims"),
        ("calls", "BIGINT", None, "number of calls, [no role]")]
    path.write_text("-- title: A report\n-- column: calls BIGINT [main] -- number of calls\nSELECT 1\n")
    with pytest.raises(ValueError, match=r"r.sql: column calls: role \[main\] is not one of key, result, detail"):
        parse_report(path)


@pytest.mark.parametrize("name", REPORTS)
@pytest.mark.slow  # 6 s
def test_declared_columns_match_the_query(cpu_store, name):
    one_job = ["full"] if "one_job" in all_reports()[name].requires else None  # the store holds several jobs
    with traceduck.open(cpu_store) as db:
        columns, _ = run_report(db, name, runs=one_job, keep_run_columns=True)
        types = db.con.execute("DESCRIBE " + _sql_for(name)).fetchall()
    r = all_reports()[name]
    assert columns == [c.name for c in r.columns]
    assert [t[1] for t in types] == [c.type for c in r.columns]


def _sql_for(name):
    r = all_reports()[name]
    sql = r.sql.rstrip().rstrip(";")
    for p in r.params:
        sql = sql.replace(f"${p.name}", repr(p.default) if p.type == "VARCHAR" else "NULL" if p.default is None else str(p.default))
    return f"(WITH report_runs AS (SELECT run_id FROM runs) {sql[sql.index('WITH') + 4:] if sql.lstrip().startswith('WITH') else 'SELECT * FROM (' + sql + ')'})"


@pytest.mark.slow
@pytest.mark.parametrize("rel", shared_trace_files())
def test_every_report_runs_on_every_shared_trace(shared_store, rel):
    path, results = shared_store
    with traceduck.open(path) as db:
        scoped = db.scoped([results[rel].run_id])
        for name in REPORTS:
            columns, rows = run_report(scoped, name)
            assert "run_id" not in columns  # one run: no run columns
        scoped.close()


@pytest.mark.slow
def test_reports_on_a_store_of_every_shared_trace(shared_store):
    path, results = shared_store
    with traceduck.open(path) as db:
        columns, rows = run_report(db, "overview")
    runs = {r[0] for r in rows}
    assert columns[:2] == ["run_id", "run_name"]
    assert runs == {r.run_id for r in results.values()}
    # every run on the page, by name then id, at most N rows each and the first N of its own rows
    with traceduck.open(path) as db:
        expected = sorted((r["name"], r["run_id"]) for r in db.runs())  # same bytes twice are one run
        columns, limited = run_report(db, "overview", limit=3)
    assert list(dict.fromkeys((r[1], r[0]) for r in limited)) == expected
    for name, run_id in expected:
        assert [r for r in limited if r[0] == run_id] == [r for r in rows if r[0] == run_id][:3]


def test_copies_by_call_site_finds_the_whole_cache_cast(cpu_store):
    events = trace_events(load_json(shared_dir() / "cpu/full.json"))
    steps = sum(1 for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    casts = [e for e in events if e.get("name") == "aten::to" and e["args"].get("Input Dims", [None])[0] == [65536, 1, 576]]
    top = report(cpu_store, "copies-by-call-site", run="full", limit=1)[0]
    assert top["dims"] == [65536, 1, 576]
    assert (top["src_dtype"], top["dst_dtype"]) == ("float8_e4m3fn", "bfloat16")
    assert top["call_site"] == "gen.py(77): _read_cache"
    assert top["calls"] == len(casts) == 12
    assert top["calls_per_step"] == len(casts) / steps == 4
    assert top["bytes_per_call"] == 65536 * 576 * (1 + 2) == 113_246_208
    assert top["total_dur_ns"] == sum(ns(e["dur"]) for e in casts)
    assert (top["time_basis"], top["total_gpu_dur_ns"]) == ("cpu", None)  # a CPU trace: the rate is over CPU time
    assert top["gb_per_s"] == round(12 * 113_246_208 / sum(ns(e["dur"]) for e in casts), 3)
    fixed = report(cpu_store, "copies-by-call-site", run="fixed")
    assert not [r for r in fixed if r["dims"] == [65536, 1, 576]]


def test_top_ops_matches_key_averages(cpu_store):
    from test_views import _self_times

    expected = _self_times(trace_events(load_json(shared_dir() / "cpu/nostack.json")))
    calls = Counter(e["name"] for e in trace_events(load_json(shared_dir() / "cpu/nostack.json")) if e.get("cat") == "cpu_op")
    rows = report(cpu_store, "top-ops", run="nostack", limit=5)
    assert [(r["name"], r["self_dur_ns"], r["calls"]) for r in rows] == [(n, v, calls[n]) for n, v in expected.most_common(5)]
    total = sum(expected.values())
    assert rows[0]["self_pct"] == round(100 * expected.most_common(1)[0][1] / total, 2)
    by_site = report(cpu_store, "top-ops", run="full", params=["group_by=call_site"], limit=1)[0]
    assert (by_site["name"], by_site["call_site"]) == ("aten::copy_", "gen.py(77): _read_cache")


def _op_self_times(events) -> dict[int, int]:
    """Self time of every cpu_op event (by index): dur minus direct children, nesting by a plain per-thread stack."""
    by_tid = defaultdict(list)
    for i, e in enumerate(events):
        if e.get("ph") == "X" and "dur" in e and e.get("cat") in ("cpu_op", "user_annotation", "python_function"):
            by_tid[e["tid"]].append((ns(e["ts"]), -ns(e["dur"]), i))
    child = Counter()
    for spans in by_tid.values():
        stack = []
        for ts, neg_dur, i in sorted(spans):
            while stack and not (stack[-1][0] <= ts and ts - neg_dur <= stack[-1][1]):
                stack.pop()
            if stack:
                child[stack[-1][2]] -= neg_dur
            stack.append((ts, ts - neg_dur, i))
    return {i: max(ns(e["dur"]) - child[i], 0) for i, e in enumerate(events) if e.get("cat") == "cpu_op"}


def test_top_ops_by_name_fills_dims_and_call_site(cpu_store):
    """Grouped by name, input_dims and call_site are those of the calls with the most self time."""
    events = trace_events(load_json(shared_dir() / "cpu/nostack.json"))
    by_dims = defaultdict(Counter)
    for i, self_ns in _op_self_times(events).items():
        by_dims[events[i]["name"]][json.dumps(events[i]["args"].get("Input Dims"))] += self_ns
    rows = report(cpu_store, "top-ops", run="nostack", limit=5)
    for r in rows:
        dims, _ = by_dims[r["name"]].most_common(1)[0]
        assert json.loads(r["input_dims"]) == json.loads(dims), r["name"]
        assert r["call_site"] is None  # no Python stacks in this trace
    top = report(cpu_store, "top-ops", run="full", limit=1)[0]
    assert (top["name"], top["call_site"]) == ("aten::copy_", "gen.py(77): _read_cache")
    assert json.loads(top["input_dims"]) == [[65536, 1, 576], [65536, 1, 576], []]


def test_ops_by_shape_filters_and_lists_every_input(cpu_store):
    events = trace_events(load_json(shared_dir() / "cpu/full.json"))
    mms = Counter(json.dumps(e["args"]["Input Dims"]) for e in events if e.get("name") == "aten::mm")
    rows = report(cpu_store, "ops-by-shape", run="full", params=["op=aten::mm"])
    got = Counter()
    for r in rows:
        got[json.dumps(json.loads(r["dims"]))] += r["calls"]  # nothing grows: the dims as DuckDB writes a list
    assert {r["name"] for r in rows} == {"aten::mm"}
    assert got == mms


def test_steps_report(cpu_store):
    events = trace_events(load_json(shared_dir() / "cpu/full.json"))
    expected = sorted((int(e["name"].split("#")[1]), ns(e["dur"])) for e in events
                      if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    rows = report(cpu_store, "steps", run="full")
    assert [(r["step"], r["dur_ns"]) for r in rows] == expected
    assert all(0 < r["cpu_busy_ns"] <= r["dur_ns"] and r["gpu_busy_ns"] == 0 for r in rows)


def test_memory_peak_and_largest_allocation(cpu_store):
    events = trace_events(load_json(shared_dir() / "cpu/full.json"))
    mem = [e["args"] for e in events if e.get("name") == "[memory]"]
    rows = report(cpu_store, "memory", run="full")
    peak = [r for r in rows if r["section"] == "peak"]
    largest = [r for r in rows if r["section"] == "largest allocation"]
    assert [r["bytes"] for r in peak] == [max(a["Total Allocated"] for a in mem)]
    assert largest[0]["bytes"] == max(a["Bytes"] for a in mem) == 75_497_472
    assert largest[0]["op_name"] == "aten::empty_strided"
    assert largest[0]["call_site"] == "gen.py(77): _read_cache"
    start = _start_ns(load_json(shared_dir() / "cpu/full.json"))
    assert all(r["ts_ns"] - start >= 0 for r in rows)


def test_overview_says_what_dominates(cpu_store):
    from test_views import _self_times

    expected = _self_times(trace_events(load_json(shared_dir() / "cpu/nostack.json")))
    pct = 100 * expected["aten::copy_"] / sum(expected.values())
    rows = report(cpu_store, "overview", run="nostack")
    findings = [r["detail"] for r in rows if r["section"] == "finding"]
    # with_stack=False: the finding names the shape and says which setting would give the call site
    copy = next(f for f in findings if f.startswith("aten::copy_ over [[65536, 1, 576], [65536, 1, 576], []] "
                                                     "float8_e4m3fn -> bfloat16"))
    assert "(no Python stack: profile with with_stack=True)" in copy
    assert f"{expected['aten::copy_'] / 3 / 1e6:.3f} ms per step ({expected['aten::copy_'] / 1e6:.3f} ms over the 3 " \
           "profiled steps)" in copy  # every copy_ of this trace is inside the 3 steps
    assert copy.endswith(f"; {pct:.1f}% of CPU self time")
    assert any(f.startswith("one copy/cast group moves 453.0 MB per step ([65536, 1, 576] float8_e4m3fn -> bfloat16")
               for f in findings)
    fixed = report(cpu_store, "overview", run="fixed")
    assert not any("copy/cast group" in r["detail"] for r in fixed if r["section"] == "finding")


@pytest.fixture(scope="module")
def gpu_store(tmp_path_factory):
    store = tmp_path_factory.mktemp("gpu-reports") / "store"
    traces = {
        "graph": "public/facebookresearch__HolisticTraceAnalysis/tests/data/negative_queue_length_values_check/rank0.json.gz",
        "nccl": "public/facebookresearch__HolisticTraceAnalysis/tests/data/nccl_parser_config/nccl_data.json.gz",
        "amd": "public/AMD-AGI__TraceLens/tests/traces/mi300/gaunernst_bert-small-uncased__1016001.json.gz",
    }
    ids = {k: traceduck.ingest(shared_dir() / rel, store=store)[0].run_id for k, rel in traces.items()}
    return store, ids, traces


@pytest.mark.slow  # 4 s
def test_top_kernels_statistics(gpu_store):
    store, ids, traces = gpu_store
    events = trace_events(load_json(shared_dir() / traces["amd"]))
    durs = defaultdict(list)
    for e in events:
        if e.get("cat") == "kernel":
            durs[e["name"]].append(ns(e["dur"]))
    rows = report(store, "top-kernels", run=ids["amd"])
    top = rows[0]
    name, d = max(durs.items(), key=lambda kv: (sum(kv[1]), kv[0]))
    assert top["name"] == name and top["instances"] == len(d) and top["total_dur_ns"] == sum(d)
    assert (top["min_ns"], top["max_ns"]) == (min(d), max(d))
    assert sum(r["instances"] for r in rows) == sum(len(v) for v in durs.values())




def _start_ns(doc) -> int:
    """The run's start as plain json sees it: the earliest event start, metadata excluded."""
    base = int(doc.get("baseTimeNanoseconds", 0)) if isinstance(doc, dict) else 0
    return min(base + ns(e["ts"]) for e in trace_events(doc) if e.get("ph") != "M" and "ts" in e)


@pytest.mark.parametrize("trace", ["nccl", "amd", "graph"])
@pytest.mark.slow  # 2 s
def test_gpu_utilization_by_interval_union(gpu_store, trace):
    """Both idle windows: the trace's span and the device's own first-to-last GPU event window
    (HTA's and TraceLens's), each against the union of the device's kernels, memcpys and memsets."""
    store, ids, traces = gpu_store
    doc = load_json(shared_dir() / traces[trace])
    per_device = defaultdict(list)
    comm = defaultdict(list)
    starts, ends = [], []
    base = int(doc.get("baseTimeNanoseconds", 0))
    for e in trace_events(doc):
        if e.get("ph") != "M" and "ts" in e:
            starts.append(base + ns(e["ts"]))
            ends.append(base + ns(e["ts"]) + max(ns(e.get("dur", 0)), 0))
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            iv = (ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]))
            per_device[e["args"].get("device", e["pid"])].append(iv)
            if e.get("cat") == "kernel" and "nccl" in e["name"].lower():
                comm[e["args"].get("device", e["pid"])].append(iv)
    span = max(ends) - min(starts)
    window = {d: max(b for _, b in v) - min(a for a, _ in v) for d, v in per_device.items()}
    busy = {d: union_length(v) for d, v in per_device.items()}
    rows = {r["device"]: r for r in report(store, "gpu-utilization", run=ids[trace])}
    assert set(rows) == set(per_device)
    for d, r in rows.items():
        assert (r["busy_ns"], r["communication_ns"]) == (busy[d], union_length(comm.get(d, [])))
        assert (r["trace_span_ns"], r["idle_in_trace_ns"]) == (span, span - busy[d])
        assert (r["device_window_ns"], r["idle_in_device_window_ns"]) == (window[d], window[d] - busy[d])
        assert r["idle_in_trace_pct"] == round(100 * (span - busy[d]) / span, 2)
        assert r["busy_in_trace_pct"] == round(100 * busy[d] / span, 2)
        assert r["idle_in_device_window_pct"] == round(100 * (window[d] - busy[d]) / window[d], 2)
        assert r["busy_in_device_window_pct"] == round(100 * busy[d] / window[d], 2)
        assert r["device_window_ns"] < r["trace_span_ns"]


@pytest.mark.slow  # 3 s
def test_cuda_graphs_fan_out(gpu_store):
    """One row per graph (launches that ran the same work): its launches and what each ran; no
    capture run given, so no op."""
    store, ids, traces = gpu_store
    events = trace_events(load_json(shared_dir() / traces["graph"]))
    graph_corr = {e["args"]["correlation"] for e in events if e.get("cat") == "cuda_runtime" and "GraphLaunch" in e["name"]}
    work = defaultdict(list)
    for e in events:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and e["args"].get("correlation") in graph_corr:
            work[e["args"]["correlation"]].append(e)
    sequences = Counter(tuple(e["name"] for e in sorted(w, key=lambda e: e["ts"])) for w in work.values())
    rows = report(store, "cuda-graphs", run=ids["graph"])
    assert len(rows) == len(sequences) and sum(r["launches"] for r in rows) == len(graph_corr)
    assert sorted((r["kernels_per_launch"], r["launches"]) for r in rows) == sorted((len(s), n) for s, n in sequences.items())
    assert sum(r["gpu_dur_ns"] for r in rows) == sum(ns(e["dur"]) for w in work.values() for e in w)
    assert {(r["match"], r["op_name"]) for r in rows} == {("no_capture", None)}
    start = _start_ns(load_json(shared_dir() / traces["graph"]))
    assert all(r["first_ts_ns"] - start >= 0 for r in rows)
    overview = report(store, "overview", run=ids["graph"])
    assert any(r["item"] == "CUDA graphs" for r in overview)


@pytest.mark.slow  # 4 s
def test_collectives(gpu_store):
    store, ids, traces = gpu_store
    events = trace_events(load_json(shared_dir() / traces["nccl"]))
    calls = Counter(("gpu" if e.get("cat") == "kernel" else "cpu", e["args"]["Collective name"]) for e in events
                    if e.get("ph") == "X" and "Collective name" in (e.get("args") or {}))
    rows = report(store, "collectives", run=ids["nccl"])
    got = Counter()
    for r in rows:  # a row per dtype too
        got[(r["side"], r["collective"])] += r["calls"]
    assert got == calls
    allreduce = [r for r in rows if (r["side"], r["collective"]) == ("gpu", "allreduce")]  # a row per message size
    sizes = [e["args"]["In msg nelems"] for e in events if e.get("cat") == "kernel" and e.get("args", {}).get("Collective name") == "allreduce"]
    assert {r["msg_bytes"]: r["calls"] for r in allreduce} == {4 * n: sizes.count(n) for n in sizes}  # Float
    assert max(r["max_in_nelems"] for r in allreduce) == max(sizes) and sum(r["total_bytes"] for r in allreduce) == 4 * sum(sizes)
    raw = {e["args"]["dtype"] for e in events if e.get("args", {}).get("Collective name") == "allreduce"}
    assert raw == {"Float"} and {r["dtype"] for r in allreduce} == {"float32"}  # c10's name in the trace, torch's in the report


@pytest.mark.slow  # 3 s
def test_report_cli(cpu_store):
    def td(*args):
        return subprocess.run([sys.executable, "-m", "traceduck", *map(str, args)], capture_output=True, text=True)

    listing = td("reports", "--format", "csv")
    assert listing.returncode == 0 and listing.stdout.count("\n") == len(REPORTS) + 1
    out = td("report", "copies-by-call-site", "--store", cpu_store, "--run", "full", "--limit", "1", "-f", "json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)[0]["bytes_per_call"] == 113_246_208
    help_ = td("report", "top-ops", "--help")
    assert "group_by (VARCHAR, default 'name'): one of name|shape|call_site" in help_.stdout
    bad = td("report", "top-ops", "--store", cpu_store, "--param", "group_by=colour")
    assert bad.returncode == 1
    assert bad.stderr == "Error: --param group_by='colour' is not one of name, shape, call_site, category.\n"
    unknown = td("report", "nope", "--store", cpu_store)
    assert unknown.stderr.startswith("Error: no report named 'nope'. Reports: annotations, callees, callers, collective-skew, collectives, ")
    extra = td("report", "steps", "--store", cpu_store, "--param", "x=1")
    assert extra.stderr == "Error: report steps has no parameter 'x'. Parameters: phase.\n"


def test_time_by_call_site_totals(cpu_store, gpu_store):
    from test_views import _self_times

    expected = _self_times(trace_events(load_json(shared_dir() / "cpu/nostack.json")))
    rows = report(cpu_store, "time-by-call-site", run="nostack")
    assert [(r["call_site"], r["cpu_self_dur_ns"], r["cpu_pct"]) for r in rows] == [
        ("(no Python stack)", sum(expected.values()), 100.0)]
    full = report(cpu_store, "time-by-call-site", run="full")
    assert full[0]["call_site"] == "gen.py(77): _read_cache" and full[0]["cpu_pct"] > 90
    store, ids, traces = gpu_store
    events = trace_events(load_json(shared_dir() / traces["amd"]))
    kernel_ns = sum(ns(e["dur"]) for e in events if e.get("cat") == "kernel")
    gpu_rows = report(store, "time-by-call-site", run=ids["amd"])
    assert sum(r["gpu_dur_ns"] for r in gpu_rows) == kernel_ns
    assert sum(r["kernels"] for r in gpu_rows) == sum(1 for e in events if e.get("cat") == "kernel")


def test_launch_overhead_counts(gpu_store):
    store, ids, traces = gpu_store
    events = trace_events(load_json(shared_dir() / traces["amd"]))
    launch_dur = {e["args"]["correlation"]: ns(e["dur"]) for e in events
                  if e.get("cat") == "cuda_runtime" and e.get("args", {}).get("correlation") is not None
                  and any(w in e["name"].lower() for w in ("launch", "memcpy", "memset"))}
    kernels = [e for e in events if e.get("cat") == "kernel" and e["args"].get("correlation") in launch_dur]
    short = sum(1 for k in kernels if ns(k["dur"]) < launch_dur[k["args"]["correlation"]])
    launch_span = {e["args"]["correlation"]: (ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in events
                   if e.get("cat") == "cuda_runtime" and e.get("args", {}).get("correlation") in launch_dur}
    from_start = [ns(k["ts"]) - launch_span[k["args"]["correlation"]][0] for k in kernels]
    from_end = [ns(k["ts"]) - launch_span[k["args"]["correlation"]][1] for k in kernels]
    rows = report(store, "launch-overhead", run=ids["amd"])
    assert max(r["max_queue_delay_ns"] for r in rows) == max(from_start)
    assert max(r["max_queue_delay_after_launch_ns"] for r in rows) == max(from_end)
    assert all(r["avg_queue_delay_ns"] - r["avg_queue_delay_after_launch_ns"] > 0 for r in rows)  # the call's own time
    assert sum(r["kernels"] for r in rows) == len(kernels)
    assert sum(r["short_kernels"] for r in rows) == short
    assert sum(r["kernel_dur_ns"] for r in rows) == sum(ns(k["dur"]) for k in kernels)
