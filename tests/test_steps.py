"""Steps of inference traces: SGLang's and vLLM's step markers, a user's pattern (at ingest and on a
stored run), graph replays inside a step, warm-up steps and the steady-state statistics. Expected
values come from the JSON written here (or the shared trace read with plain json)."""

from __future__ import annotations

import math
import re
import statistics
from decimal import Decimal

import pytest

import traceduck

from conftest import load_json, run_report, shared_dir, trace_events, write_trace

SGLANG = "public/AMD-AGI__TraceLens/tests/traces/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz"


def ns(v) -> int:
    return int(Decimal(str(v)) * 1000)


def annotation(name, ts, dur, tid=1):
    return {"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur}


def op(name, ts, dur, tid=1):
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur}


def launch(name, ts, dur, correlation, tid=1):
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
            "args": {"correlation": correlation}}


def kernel(name, ts, dur, correlation, stream=7):
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
            "args": {"correlation": correlation, "device": 0, "stream": stream}}


def steps_of(store, run=None) -> list[dict]:
    with traceduck.open(store) as db:
        rel = db.sql("SELECT * FROM steps" + (" WHERE run_id = $r" if run else "") + " ORDER BY run_id, ts_ns",
                     {"r": run} if run else None)
        return [dict(zip(rel.columns, r)) for r in rel.fetchall()]


def report_rows(store, name, params=None, run=None) -> list[dict]:
    with traceduck.open(store) as db:
        columns, rows = run_report(db, name, runs=[run] if run else None, params=params, keep_run_columns=True)
    return [dict(zip(columns, r)) for r in rows]


# What the test expects of each marker, from its name alone (written independently of the macros).
def expected_marker(name: str) -> tuple[str | None, int | None, int | None]:
    """(phase, batch_size, tokens) of a marker name."""
    m = re.fullmatch(r"step\[(\w+)(.*)\]", name)
    if m:
        phase = {"DECODE": "decode", "EXTEND": "prefill", "PREFILL": "prefill", "MIXED": "mixed"}.get(m.group(1))
        bs = re.search(r"bs=(\d+)", m.group(2))
        toks = re.search(r"toks=(\d+)", m.group(2))
        return phase, bs and int(bs.group(1)), toks and int(toks.group(1))
    m = re.match(r"execute_(\d+)_context_(\d+)\(.*?\)_generation_(\d+)", name)
    if m:
        tokens, ctx, gen = map(int, m.groups())
        phase = "mixed" if ctx and gen else "prefill" if ctx else "decode" if gen else None
        return phase, ctx + gen, tokens
    return None, None, None


def expected_windows(events, pattern) -> list[tuple]:
    """(step, marker, ts_ns, dur_ns, phase, batch_size, tokens) of the CPU annotations matching
    `pattern`, numbered 0, 1, ... by start."""
    marks = sorted((ns(e["ts"]), ns(e["dur"]), e["name"]) for e in events
                   if e.get("cat") == "user_annotation" and re.search(pattern, e["name"]))
    return [(k, name, ts, dur, *expected_marker(name)) for k, (ts, dur, name) in enumerate(marks)]


def got_windows(rows) -> list[tuple]:
    return [(r["step"], r["marker"], r["ts_ns"], r["dur_ns"], r["phase"], r["batch_size"], r["tokens"]) for r in rows]


def sglang_events() -> list[dict]:
    """Two prefill (EXTEND) steps, then decode steps, each with one op launching one kernel."""
    out = []
    names = ["step[EXTEND bs=2 toks=812]", "step[PREFILL bs=1 toks=77]", "step[DECODE bs=3]", "step[DECODE bs=3]",
             "step[MIXED bs=5 toks=130]", "step[DECODE bs=2]"]
    t = 1000
    for k, name in enumerate(names):
        out += [annotation(name, t, 80), op("aten::mm", t + 10, 30), launch("cudaLaunchKernel", t + 20, 5, 100 + k),
                kernel(f"gemm_{k}", t + 40, 20, 100 + k)]
        t += 100
    return out


def vllm_events() -> list[dict]:
    out = []
    names = ["execute_812_context_2(sq406sk406sqsq406sqsk406)_generation_0()",
             "execute_3_context_0()_generation_3(sq1sk812sqsq1sqsk812)",
             "execute_130_context_1(sq127sk127)_generation_3(sq1sk900)",
             "execute_3_context_0()_generation_3(sq1sk813)"]
    t = 500
    for k, name in enumerate(names):
        out += [annotation(name, t, 60), op("aten::mm", t + 10, 30)]
        t += 70
    return out


def test_sglang_markers(tmp_path):
    events = sglang_events()
    store = tmp_path / "store"
    traceduck.ingest(write_trace(tmp_path / "sglang.json", events), store=store)
    rows = steps_of(store)
    assert got_windows(rows) == expected_windows(events, r"^step\[")
    assert [r["phase"] for r in rows] == ["prefill", "prefill", "decode", "decode", "mixed", "decode"]
    assert [r["gpu_ts_ns"] for r in rows] == [None] * 6
    # each step's op, and the kernel its launch started, belong to it
    per_step = report_rows(store, "steps")
    assert [(r["step"], r["kernels"], r["gpu_busy_ns"], r["cpu_busy_ns"]) for r in per_step] == \
        [(k, 1, 20_000, 30_000) for k in range(6)]
    decode = report_rows(store, "steps", params=["phase=decode"])
    assert [r["step"] for r in decode] == [2, 3, 5]


def test_vllm_markers(tmp_path):
    events = vllm_events()
    store = tmp_path / "store"
    traceduck.ingest(write_trace(tmp_path / "vllm.json", events), store=store)
    rows = steps_of(store)
    assert got_windows(rows) == expected_windows(events, r"^execute_")
    assert [(r["phase"], r["batch_size"], r["tokens"]) for r in rows] == \
        [("prefill", 2, 812), ("decode", 3, 3), ("mixed", 4, 130), ("decode", 3, 3)]


def test_precedence(tmp_path):
    """ProfilerStep#N first, then SGLang, then vLLM: only one family makes the steps."""
    profiler = [annotation("ProfilerStep#7", 100, 1000), annotation("ProfilerStep#8", 1200, 1000)]
    both = sglang_events() + vllm_events()
    store = tmp_path / "store"
    traceduck.ingest(write_trace(tmp_path / "both.json", both), store=store, name="both")
    traceduck.ingest(write_trace(tmp_path / "all.json", both + profiler), store=store, name="all")
    with traceduck.open(store) as db:
        ids = dict(db.sql("SELECT name, run_id FROM runs").fetchall())
    assert got_windows(steps_of(store, ids["both"])) == expected_windows(both, r"^step\[")
    rows = steps_of(store, ids["all"])
    assert [(r["step"], r["marker"], r["ts_ns"], r["dur_ns"], r["phase"]) for r in rows] == \
        [(7, "ProfilerStep#7", 100_000, 1_000_000, None), (8, "ProfilerStep#8", 1_200_000, 1_000_000, None)]


def test_step_marker_at_ingest(tmp_path):
    """A pattern of the user's wins over ProfilerStep#N; its first group numbers the steps when it
    captures a distinct number for each; else they are numbered by start."""
    events = [annotation("ProfilerStep#1", 0, 5000),
              annotation("my_iter_12", 100, 400), op("aten::add", 150, 10),
              annotation("my_iter_13", 600, 300), op("aten::mul", 700, 10),
              annotation("my_iter_x", 1000, 100)]
    trace = write_trace(tmp_path / "mine.json", events)
    store = tmp_path / "store"
    traceduck.ingest(trace, store=store, step_marker=r"^my_iter_(\d+)$")
    rows = steps_of(store)
    assert [(r["step"], r["marker"], r["ts_ns"], r["dur_ns"]) for r in rows] == \
        [(12, "my_iter_12", 100_000, 400_000), (13, "my_iter_13", 600_000, 300_000)]
    with traceduck.open(store) as db:
        assert db.sql("SELECT e.name, s.step FROM event_steps s JOIN events e USING (run_id, event_id) "
                      "WHERE e.category = 'cpu_op' ORDER BY e.ts_ns").fetchall() == [("aten::add", 12), ("aten::mul", 13)]
    traceduck.ingest(trace, store=store, step_marker="^my_iter", force=True)  # no group: by start
    assert [(r["step"], r["marker"]) for r in steps_of(store)] == \
        [(0, "my_iter_12"), (1, "my_iter_13"), (2, "my_iter_x")]
    with pytest.raises(traceduck.InputError, match="not a regular expression"):
        traceduck.ingest(trace, store=store, step_marker="(", force=True)


def test_step_marker_on_a_stored_run(tmp_path):
    """`traceduck step-marker` re-derives the windows and the events' steps of a stored run; without
    a pattern it goes back to ingest's choice."""
    events = sglang_events() + vllm_events()
    store = tmp_path / "store"
    (result,) = traceduck.ingest(write_trace(tmp_path / "both.json", events), store=store, name="both")
    before = {p.name for p in (store / "runs" / result.run_id).iterdir()}
    assert got_windows(steps_of(store)) == expected_windows(events, r"^step\[")
    out = traceduck.set_step_marker("both", r"^execute_", store=store)
    assert out == [{"run_id": result.run_id, "name": "both", "steps": 4, "family": "pattern"}]
    assert got_windows(steps_of(store)) == expected_windows(events, r"^execute_")
    assert {p.name for p in (store / "runs" / result.run_id).iterdir()} == before
    assert not [p for p in (store / "tmp").iterdir() if p.is_dir()]
    # every CPU event's step follows: the ops inside each execute_ window, by plain json
    windows = expected_windows(events, r"^execute_")
    expected = sorted((ns(e["ts"]), k) for e in events if e["cat"] == "cpu_op"
                      for k, _, ts, dur, *_ in windows if ts <= ns(e["ts"]) < ts + dur)
    with traceduck.open(store) as db:
        got = db.sql("SELECT ts_ns, step FROM events WHERE category = 'cpu_op' AND step IS NOT NULL ORDER BY ts_ns").fetchall()
    assert got == expected and len(expected) == 4
    code, stdout, _ = cli_run(["step-marker", "both", "--store", store])
    assert code == 0 and stdout == f"{result.run_id[:12]} 'both': 6 steps from SGLang step[...]\n"
    assert got_windows(steps_of(store)) == expected_windows(events, r"^step\[")
    code, stdout, _ = cli_run(["step-marker", "both", "--marker", "nothing_like_this", "--store", store])
    assert code == 0 and stdout.endswith("'both': no steps\n")
    assert steps_of(store) == []
    with traceduck.open(store) as db:
        assert db.sql("SELECT count(*) FROM events WHERE step IS NOT NULL").fetchall() == [(0,)]


def cli_run(args) -> tuple[int, str, str]:
    import contextlib
    import io

    from traceduck.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in args])
        except SystemExit as e:
            code = e.code or 0
    return code, out.getvalue(), err.getvalue()


def test_graph_replay_inside_a_decode_step(tmp_path):
    """A decode step that replays a CUDA graph: the graph launch's kernels (one correlation, several
    kernels, some running after the step's CPU window) are the step's."""
    events = [annotation("step[DECODE bs=8]", 100, 50), launch("cudaGraphLaunch", 110, 5, 900),
              kernel("graph_k0", 120, 20, 900), kernel("graph_k1", 140, 30, 900), kernel("graph_k2", 175, 10, 900),
              annotation("step[DECODE bs=8]", 200, 50), launch("cudaGraphLaunch", 210, 5, 901),
              kernel("graph_k0", 220, 20, 901), kernel("graph_k1", 240, 30, 901), kernel("graph_k2", 275, 10, 901)]
    store = tmp_path / "store"
    traceduck.ingest(write_trace(tmp_path / "graph.json", events), store=store)
    rows = report_rows(store, "steps")
    # by hand: per step 3 kernels; busy = union [120,170] + [175,185] = 60 us; span 120..185 = 65 us
    assert [(r["step"], r["phase"], r["batch_size"], r["kernels"], r["gpu_busy_ns"], r["gpu_idle_ns"]) for r in rows] == \
        [(0, "decode", 8, 3, 60_000, 5_000), (1, "decode", 8, 3, 60_000, 5_000)]
    with traceduck.open(store) as db:
        assert db.sql("SELECT step, count(*), bool_and(is_graph_launched) FROM gpu_kernels GROUP BY step ORDER BY step"
                      ).fetchall() == [(0, 3, True), (1, 3, True)]


# --- warm-up and the steady state --------------------------------------------------------------------

DECODE_US = [500, 400, 100, 110, 120, 100, 450, 130, 110, 105]
PREFILL_US = [900, 950]


def warm_events() -> list[dict]:
    out, t = [], 0
    for d in PREFILL_US:
        out.append(annotation("step[EXTEND bs=4 toks=4096]", t, d))
        t += d + 10
    for d in DECODE_US:
        out.append(annotation("step[DECODE bs=4]", t, d))
        t += d + 10
    return out


def warmups(durs: list[int]) -> list[bool]:
    """The rule, written out: the leading steps longer than 3x the median of the phase."""
    limit = 3 * statistics.median(durs)
    out, leading = [], True
    for d in durs:
        leading = leading and d > limit
        out.append(leading)
    return out


def p90(values) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[8] if len(values) > 1 else values[0]


def round_half_up(x: float) -> int:
    return math.floor(x + 0.5)


def test_warmup_steps_and_statistics(tmp_path):
    store = tmp_path / "store"
    traceduck.ingest(write_trace(tmp_path / "warm.json", warm_events()), store=store)
    rows = steps_of(store)
    flags = warmups(PREFILL_US) + warmups(DECODE_US)
    assert flags == [False, False, True, True] + [False] * 8  # the 450 us step amid steady ones is no warm-up
    assert [r["is_warmup"] for r in rows] == flags
    for params, include in ((["include_warmup=false"], False), (["include_warmup=true"], True)):
        stats = report_rows(store, "step-stats", params=params)
        assert [r["phase"] for r in stats] == ["prefill", "decode"]
        for r, durs in zip(stats, (PREFILL_US, DECODE_US)):
            kept = [ns(d) for d, w in zip(durs, warmups(durs)) if include or not w]
            assert r["steps"] == len(kept) and r["warmup_steps"] == sum(warmups(durs))
            assert r["median_ns"] == round_half_up(statistics.median(kept))
            assert r["p90_ns"] == round_half_up(p90(kept))
            assert r["mean_ns"] == round_half_up(statistics.mean(kept))
            assert (r["min_ns"], r["max_ns"]) == (min(kept), max(kept))
            assert r["cv"] == pytest.approx(statistics.pstdev(kept) / statistics.mean(kept), rel=1e-9)
    decode = report_rows(store, "step-stats", params=["phase=decode"])
    assert [(r["phase"], r["steps"]) for r in decode] == [("decode", 8)]


# --- the shared SGLang decode trace ------------------------------------------------------------------

def test_sglang_shared_trace(tmp_path):
    path = shared_dir() / SGLANG
    doc = load_json(path)
    events, base = trace_events(doc), int(doc.get("baseTimeNanoseconds", 0))
    (mark,) = [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("step[")]
    start, dur = base + ns(mark["ts"]), ns(mark["dur"])
    store = tmp_path / "store"
    traceduck.ingest(path, store=store)
    (row,) = steps_of(store)
    assert (row["step"], row["marker"], row["ts_ns"], row["dur_ns"], row["phase"], row["batch_size"], row["tokens"],
            row["is_warmup"]) == (0, "step[DECODE bs=32]", start, dur, "decode", 32, None, False)
    # the CPU events that start inside the window, and the kernels their launches started
    cpu = ("cpu_op", "cuda_runtime", "python_function", "user_annotation")
    inside = [e for e in events if e.get("cat") in cpu and start <= base + ns(e["ts"]) < start + dur]
    launched = {e["args"]["correlation"] for e in inside if e["cat"] == "cuda_runtime" and "correlation" in e.get("args", {})}
    kernels = [e for e in events if e.get("cat") == "kernel" and e["args"].get("correlation") in launched]
    with traceduck.open(store) as db:
        got = db.sql("SELECT category, count(*) FROM event_steps JOIN events USING (run_id, event_id) "
                     "WHERE event_steps.step = 0 AND category IN ('cpu_op', 'cuda_runtime', 'python_function', 'user_annotation') "
                     "GROUP BY ALL ORDER BY ALL").fetchall()
    expected = sorted({c: sum(1 for e in inside if e["cat"] == c) for c in cpu}.items())
    assert got == [x for x in expected if x[1]]
    (rep,) = report_rows(store, "steps")
    assert rep["kernels"] == len(kernels) == 550
