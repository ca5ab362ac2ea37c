"""Many runs in one store: diff, label selection, ranks, parallel and concurrent ingest."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from collections import Counter, defaultdict
from decimal import Decimal

import pytest

import traceduck
from traceduck.diff import diff_runs

from conftest import ROOT, SAMPLES, load_json, run_report, shared_dir, trace_events

RANKS_DIR = "public/facebookresearch__HolisticTraceAnalysis/tests/data/trace_filter"


def ns(v) -> int:
    return int(Decimal(v) * 1000)


def per_step(total: int, steps: int) -> int:
    """total / steps rounded to the nearest integer, halves away from zero (diff's per-step ns)."""
    q, r = divmod(abs(total), steps)
    return (1 if total >= 0 else -1) * (q + (2 * r >= steps))


def td(*args):
    return subprocess.run([sys.executable, "-m", "traceduck", *map(str, args)], capture_output=True, text=True)


@pytest.fixture(scope="module")
def cpu_pair(tmp_path_factory):
    store = tmp_path_factory.mktemp("pair") / "store"
    traceduck.ingest([shared_dir() / "cpu/full.json", shared_dir() / "cpu/fixed.json"], store=store,
                     labels={"story": "kv-cache"})
    return store


@pytest.mark.slow  # 2 s
def test_diff_by_op_shows_the_copy_drop(cpu_pair):
    def copy_ns(rel):
        return sum(ns(e["dur"]) for e in trace_events(load_json(shared_dir() / rel)) if e.get("name") == "aten::copy_")

    with traceduck.open(cpu_pair) as db:
        result = diff_runs(db.engine, "full", "fixed", by="op")
    rows = [dict(zip(result.columns, r)) for r in result.rows]
    copy = next(r for r in rows if r["key"] == "aten::copy_")
    assert (copy["a_dur_ns"], copy["b_dur_ns"]) == (copy_ns("cpu/full.json"), copy_ns("cpu/fixed.json"))
    assert copy["delta_ns"] == copy["b_dur_ns"] - copy["a_dur_ns"] < 0
    assert copy["status"] == "faster"
    assert rows[0]["key"] in ("aten::to", "aten::_to_copy", "aten::copy_")  # ordered by |delta|
    assert abs(rows[0]["delta_ns"]) == max(abs(r["delta_ns"]) for r in rows)


def test_diff_by_copy_per_step_marks_the_cast_removed(cpu_pair):
    events = trace_events(load_json(shared_dir() / "cpu/full.json"))
    casts = [e for e in events if e.get("name") == "aten::to" and e["args"].get("Input Dims", [None])[0] == [65536, 1, 576]]
    steps = sum(1 for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    with traceduck.open(cpu_pair) as db:
        result = diff_runs(db.engine, "full", "fixed", by="copy", per_step=True)
    rows = [dict(zip(result.columns, r)) for r in result.rows]
    whole = next(r for r in rows if "[65536, 1, 576] float8_e4m3fn -> bfloat16" in r["key"])
    assert whole["status"] == "removed"
    assert whole["key"].startswith("gen.py(77): _read_cache | aten::to ")
    assert whole["a_calls"] == len(casts) == 12  # calls stay totals
    assert whole["a_calls_per_step"] == len(casts) / steps == 4
    assert whole["a_dur_ns"] == per_step(sum(ns(e["dur"]) for e in casts), steps)  # whole ns per step
    assert (whole["b_calls"], whole["b_calls_per_step"]) == (0, 0)
    assert result.header().startswith("A: full ") and "ms/step (3 steps); B: fixed " in result.header()


@pytest.mark.slow  # 2 s
def test_diff_by_call_site_counts_nested_ops_once(tmp_path):
    """aten::to -> _to_copy -> copy_ all sit at the _read_cache call site: the call site's calls and
    inclusive time are those of its outermost ops only (self time still sums every op)."""
    store = tmp_path / "store"
    traceduck.ingest([SAMPLES / "buggy.json.gz", SAMPLES / "fixed.json.gz"], store=store)

    def outermost_ops_in_read_cache(name):
        events = trace_events(load_json(SAMPLES / f"{name}.json.gz"))
        frames = [e for e in events if e.get("cat") == "python_function" and e["name"].endswith(": _read_cache")]
        ops = [e for e in events if e.get("cat") == "cpu_op"]
        steps = sum(1 for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))

        def inside(e, w):  # starts inside w on its thread (a few ends overrun their frame by a ns)
            return e["tid"] == w["tid"] and ns(w["ts"]) <= ns(e["ts"]) < ns(w["ts"]) + ns(w["dur"])

        chosen = [o for f in frames for o in ops if inside(o, f)
                  and not any(p is not o and inside(o, p) and inside(p, f) for p in ops)]
        return len(chosen), steps, sum(ns(o["dur"]) for o in chosen)

    with traceduck.open(store) as db:
        result = diff_runs(db.engine, "buggy", "fixed", by="call_site", per_step=True)
    row = next(dict(zip(result.columns, r)) for r in result.rows if r[1].endswith(": _read_cache"))
    a_calls, a_steps, a_dur = outermost_ops_in_read_cache("buggy")
    b_calls, b_steps, b_dur = outermost_ops_in_read_cache("fixed")
    assert a_calls / a_steps == 4  # per step: two slices and two casts (K and V)
    assert (row["a_calls"], row["b_calls"]) == (a_calls, b_calls)
    assert (row["a_calls_per_step"], row["b_calls_per_step"]) == (round(a_calls / a_steps, 3), round(b_calls / b_steps, 3))
    assert (row["a_dur_ns"], row["b_dur_ns"]) == (per_step(a_dur, a_steps), per_step(b_dur, b_steps))
    assert row["delta_ns"] == row["b_dur_ns"] - row["a_dur_ns"]
    assert row["a_self_dur_ns"] is None and row["b_self_dur_ns"] is None  # a call site's outermost ops: self time would miss their nested ops


@pytest.mark.slow  # 2 s
def test_diff_counts_and_ns_stay_integers(cpu_pair):
    """Counts and ns are integers in every output, per step too (rounded to whole ns)."""
    def ops(rel):
        events = trace_events(load_json(shared_dir() / rel))
        steps = sum(1 for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
        calls, dur = Counter(), Counter()
        for e in events:
            if e.get("cat") == "cpu_op":
                calls[e["name"]] += 1
                dur[e["name"]] += ns(e["dur"])
        return calls, dur, steps

    a_calls, a_dur, a_steps = ops("cpu/full.json")
    b_calls, b_dur, b_steps = ops("cpu/fixed.json")
    for flag, div in (([], lambda v, n: v), (["--per-step"], per_step)):
        out = td("diff", "full", "fixed", "--store", cpu_pair, "-f", "json", *flag)
        assert out.returncode == 0, out.stderr
        assert not re.findall(r'"(?:[ab]_calls|[ab]_dur_ns|[ab]_self_dur_ns|delta_ns)": -?\d+\.', out.stdout)  # no 15.0
        rows = {r["key"]: r for r in json.loads(out.stdout)}
        assert set(rows) == set(a_calls) | set(b_calls)
        for key, r in rows.items():
            assert (r["a_calls"], r["b_calls"]) == (a_calls[key], b_calls[key])
            assert (r["a_dur_ns"], r["b_dur_ns"]) == (div(a_dur[key], a_steps), div(b_dur[key], b_steps))
            assert all(type(r[c]) is int for c in ("a_calls", "b_calls", "a_dur_ns", "b_dur_ns", "delta_ns"))
            assert r["a_calls_per_step"] == round(a_calls[key] / a_steps, 3)


@pytest.mark.slow  # several seconds: new processes or a store built for it
def test_diff_cli_header_goes_to_stderr_for_json(cpu_pair):
    table = td("diff", "full", "fixed", "--store", cpu_pair, "--limit", "2")
    assert table.returncode == 0 and table.stdout.startswith("A: full ")
    as_json = td("diff", "full", "fixed", "--store", cpu_pair, "--by", "kernel", "-f", "json")
    assert as_json.returncode == 0 and json.loads(as_json.stdout) == []  # CPU traces have no kernels
    assert as_json.stderr.startswith("A: full ")


@pytest.mark.slow  # 2 s
def test_run_selection_errors(cpu_pair):
    p = td("report", "steps", "--store", cpu_pair, "--run", "label:story=other")
    assert p.returncode == 1
    assert p.stderr == "Error: no run has label story=other. Labels in the store: story=kv-cache.\n"
    q = td("diff", "label:story=kv-cache", "fixed", "--store", cpu_pair)
    assert q.returncode == 1 and q.stderr.startswith("Error: 'label:story=kv-cache' matches 2 runs: ")
    both = td("report", "steps", "--store", cpu_pair, "--run", "label:story=kv-cache", "-f", "json")
    assert {r["run_name"] for r in json.loads(both.stdout)} == {"full", "fixed"}


@pytest.mark.slow  # 4 s
def test_ranks_of_a_job_in_one_command(tmp_path):
    store = tmp_path / "store"
    p = td("ingest", shared_dir() / RANKS_DIR, "--store", store, "--label", "job=sampled", "--jobs", "2", "-q")
    assert p.returncode == 0, p.stderr
    files = sorted((shared_dir() / RANKS_DIR).glob("*.json.gz"))
    docs = [load_json(f) for f in files]
    steps = defaultdict(dict)
    comm = {}
    starts = defaultdict(dict)
    for doc in docs:
        rank = doc["distributedInfo"]["rank"]
        for e in doc["traceEvents"]:
            if e.get("cat") == "user_annotation" and e.get("name", "").startswith("ProfilerStep#"):
                steps[rank][e["name"]] = ns(e["dur"])
        nccl = sorted((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["name"]) for e in doc["traceEvents"]
                      if e.get("cat") == "kernel" and "nccl" in e["name"].lower())
        comm[rank] = sum(b - a for a, b, _ in nccl)  # these kernels do not overlap within a rank
        seen = Counter()
        for a, _, name in nccl:
            key = name.split("(")[0]
            seen[key] += 1
            starts[(key, seen[key])][rank] = a
    wait = Counter()
    for per_rank in starts.values():
        for rank, t in per_rank.items():
            wait[rank] += max(per_rank.values()) - t
    slowest = Counter(max(steps, key=lambda r: steps[r][s]) for s in steps[0])
    with traceduck.open(store) as db:
        columns, rows = run_report(db, "ranks", runs=["label:job=sampled"])
    rank_rows = {r["rank"]: r for r in (dict(zip(columns, row)) for row in rows) if r["section"] == "rank"}
    assert sorted(rank_rows) == [0, 1]
    for rank, row in rank_rows.items():
        assert row["steps"] == len(steps[rank])
        assert row["step_ns"] == sum(steps[rank].values()) // len(steps[rank])
        assert row["communication_ns"] == comm[rank]
        assert row["collective_wait_ns"] == wait[rank]
        assert row["slowest_steps"] == slowest[rank]
    spreads = [dict(zip(columns, r))["spread_ns"] for r in rows if r[columns.index("section")] == "collective"]
    assert sorted(spreads) == sorted(max(v.values()) - min(v.values()) for v in starts.values() if len(v) > 1)


@pytest.mark.slow
def test_concurrent_ingests_into_one_store(tmp_path):
    store = tmp_path / "store"
    files = [SAMPLES / "buggy.json.gz", SAMPLES / "fixed.json.gz", shared_dir() / "cpu/nostack.json"]
    procs = [subprocess.Popen([sys.executable, "-m", "traceduck", "ingest", str(f), "--store", str(store), "-q"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for f in files + files[:1]]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    with traceduck.open(store) as db:
        counts = dict(db.sql("SELECT r.name, count(e.event_id) FROM runs r JOIN events e USING (run_id) GROUP BY 1").fetchall())
    expected = {"buggy": len(json.loads(gzip.decompress(files[0].read_bytes()))["traceEvents"]),
                "fixed": len(json.loads(gzip.decompress(files[1].read_bytes()))["traceEvents"]),
                "nostack": len(trace_events(load_json(files[2], exact=False)))}
    assert counts == expected  # the file ingested twice at once is one run
    assert not list((store / "tmp").iterdir())


def test_readme_join_example(tmp_path):
    store = tmp_path / "store"
    traceduck.ingest(SAMPLES, store=store)
    query = (ROOT / "examples" / "join-two-runs.sql").read_text()
    assert "examples/join-two-runs.sql" in (ROOT / "README.md").read_text()
    with traceduck.open(store) as db:
        rel = db.sql(query)
        columns, rows = db.fetch(rel)
    counts = {}
    for name in ("buggy", "fixed"):
        events = json.loads(gzip.decompress((SAMPLES / f"{name}.json.gz").read_bytes()))["traceEvents"]
        counts[name] = Counter((e["name"], json.dumps(e["args"].get("Input Dims", []))) for e in events
                               if e.get("cat") == "cpu_op")
    assert len(rows) == 5
    for row in rows:
        r = dict(zip(columns, row))
        key = (r["op"], json.dumps([d if d is not None else [] for d in r["dims"]]))
        assert (r["buggy_calls"], r["fixed_calls"]) == (counts["buggy"][key], counts["fixed"][key])


def _lowering_trace(path, conv_op: str, kernel: str, kernel_us: int, extra: bool):
    """One step: conv2d > convolution > <conv_op> launching one kernel, then (extra) a fill_ with its own."""
    from conftest import write_trace

    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 500}]
    dims = [[8, 3, 32, 32], [16, 3, 3, 3]]

    def op(name, ts, dur, **args):
        ev.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                   "args": {"Input Dims": dims, "Input type": ["float", "float"], **args}})

    def launch(ts, corr, name, start, dur):
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts, "dur": 5,
                   "args": {"correlation": corr}})
        ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": start, "dur": dur,
                   "args": {"correlation": corr, "device": 0, "stream": 7}})

    op("aten::conv2d", 10, 100)
    op("aten::convolution", 12, 90)
    op(conv_op, 14, 80)
    launch(20, 1, kernel, 200, kernel_us)
    if extra:
        op("aten::fill_", 150, 20)
        launch(155, 2, "fill_kernel", 300, 3)
    return write_trace(path, ev)


def test_diff_by_op_tree_aligns_at_the_lowest_common_op(tmp_path):
    """Two lowerings of one conv (cuDNN, MIOpen): the kernels differ and the innermost ops too, so
    the time is compared at aten::convolution, the deepest op both runs have; an op of one run
    only is its own row. Times from the JSON written here."""
    store = tmp_path / "store"
    traceduck.ingest(_lowering_trace(tmp_path / "a.json", "aten::cudnn_convolution", "cudnn_kernel", 40, False),
                     store=store, name="cuda")
    traceduck.ingest(_lowering_trace(tmp_path / "b.json", "aten::miopen_convolution", "miopen_kernel", 30, True),
                     store=store, name="rocm")
    with traceduck.open(store) as db:
        result = diff_runs(db.engine, "cuda", "rocm", by="op_tree")
    rows = {r["key"]: r for r in (dict(zip(result.columns, row)) for row in result.rows)}
    dims = "[[8, 3, 32, 32], [16, 3, 3, 3]] [float32, float32]"  # dtypes as traceduck names them
    conv = rows[f"aten::conv2d > aten::convolution {dims}"]
    assert (conv["a_calls"], conv["b_calls"], conv["a_dur_ns"], conv["b_dur_ns"]) == (1, 1, 40_000, 30_000)
    assert (conv["a_kernels"], conv["b_kernels"], conv["status"], conv["ratio"]) == ("cudnn_kernel x1", "miopen_kernel x1", "faster", 0.75)
    fill = rows[f"aten::fill_ {dims}"]
    assert (fill["a_calls"], fill["b_calls"], fill["a_dur_ns"], fill["b_dur_ns"], fill["status"]) == (0, 1, 0, 3_000, "added")
    assert set(rows) == {f"aten::conv2d > aten::convolution {dims}", f"aten::fill_ {dims}"}
    with traceduck.open(store) as db:  # op_shape: the same alignment without the ancestors in the key
        result = diff_runs(db.engine, "cuda", "rocm", by="op_shape")
    rows = {r["key"]: r for r in (dict(zip(result.columns, row)) for row in result.rows)}
    assert {k: (r["a_dur_ns"], r["b_dur_ns"]) for k, r in rows.items()} == {
        f"aten::convolution {dims}": (40_000, 30_000), f"aten::fill_ {dims}": (0, 3_000)}


BERT = "public/AMD-AGI__TraceLens/tests/traces/{}/gaunernst_bert-small-uncased__1016001.json.gz"


@pytest.mark.slow  # 3 s
def test_diff_by_op_tree_across_gpus(tmp_path):
    """One model on an H100 and an MI300X: every kernel lands in a row that both runs have, and each
    Linear module's rows hold the GPU time of the kernels launched inside that module's Python
    frame, from plain json (launch -> correlation -> kernel)."""
    store = tmp_path / "store"
    for gpu in ("h100", "mi300"):
        traceduck.ingest(shared_dir() / BERT.format(gpu), store=store, name=gpu)
    with traceduck.open(store) as db:
        result = diff_runs(db.engine, "h100", "mi300", by="op_tree")
    rows = [dict(zip(result.columns, r)) for r in result.rows]

    def linear_kernel_ns(gpu):
        events = trace_events(load_json(shared_dir() / BERT.format(gpu)))
        kernels = {e["args"]["correlation"]: ns(e["dur"]) for e in events if e.get("cat") == "kernel" and e.get("ph") == "X"}
        launches = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver") and e["args"].get("correlation") in kernels]
        out = {}
        for m in (e for e in events if e.get("cat") == "python_function" and re.fullmatch(r"nn\.Module: Linear_\d+", e["name"])):
            inside = [kernels[x["args"]["correlation"]] for x in launches
                      if x["tid"] == m["tid"] and m["ts"] <= x["ts"] < m["ts"] + m["dur"]]
            out[m["name"].split(": ")[1]] = sum(inside)
        return out, sum(kernels.values())

    for side, gpu in (("a", "h100"), ("b", "mi300")):
        want, total = linear_kernel_ns(gpu)
        assert len(want) == 26 and all(want.values())
        got = defaultdict(int)
        for r in rows:
            m = re.search(r"> (Linear_\d+) \|", r["key"])
            if m:
                got[m.group(1)] += r[f"{side}_dur_ns"]
        assert dict(got) == want
        assert sum(r[f"{side}_dur_ns"] for r in rows) == total  # each kernel once
    assert {r["status"] for r in rows} <= {"faster", "slower", "same"}  # all 60 kernels align op by op
