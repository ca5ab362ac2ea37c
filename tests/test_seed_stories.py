"""The seed stories in one command each, on the project's own traces (scripts/make_seed_traces.py):
the findings name the shape, call site and caller of the bug with per-step figures; dims that grow
with the sequence are one row; callers and callees. Every expected value comes from plain `json`
over the traces (self time by a per-thread stack of the events, frames from the python_function
events around each op, steps from the ProfilerStep#N windows)."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path

import pytest

import traceduck

from conftest import load_json, run_report, trace_events

SEEDS = Path(__file__).resolve().parent / "data" / "seeds"
TRACES = {name: SEEDS / f"{name}.json.gz" for name in ("indexer_buggy", "indexer_fixed", "growing_cast")}
TORCH_NAMES = {"float": "float32", "c10::BFloat16": "bfloat16", "long int": "int64", "double": "float64"}


def ns(us) -> int:
    return int(round(float(us) * 1000))


def plain_ops(path: Path) -> list[dict]:
    """Every CPU op of the trace: name, self and inclusive time (ns), step, dims text, dtypes, and the
    user frames around it (innermost first; torch's own files and built-ins left out)."""
    events = trace_events(load_json(path, exact=False))
    steps = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), int(e["name"].split("#")[1])) for e in events
             if str(e.get("name", "")).startswith("ProfilerStep#")]
    spans = defaultdict(list)
    for i, e in enumerate(events):
        if e.get("ph") == "X" and "dur" in e and e.get("cat") in ("cpu_op", "user_annotation", "python_function"):
            spans[(e["pid"], e["tid"])].append((ns(e["ts"]), -ns(e["dur"]), i))
    child, around = Counter(), defaultdict(list)
    for track in spans.values():
        track.sort()
        stack = []
        for ts, neg, i in track:
            while stack and not (stack[-1][0] <= ts and ts - neg <= stack[-1][1]):
                stack.pop()
            if stack:
                child[stack[-1][2]] += -neg
            around[i] = [events[j]["name"] for _, _, j in reversed(stack) if events[j].get("cat") == "python_function"]
            stack.append((ts, ts - neg, i))
    out = []
    for i, e in enumerate(events):
        if e.get("cat") != "cpu_op":
            continue
        ts = ns(e["ts"])
        user = [f for f in around[i] if re.match(r"^[\w/.]+\.py\(\d+\): ", f) and not f.startswith("torch/")]
        dims = e["args"].get("Input Dims")
        types = e["args"].get("Input type") or []
        out.append({"name": e["name"], "self_ns": max(ns(e["dur"]) - child[i], 0), "dur_ns": ns(e["dur"]),
                    "step": next((n for a, b, n in steps if a <= ts < b), None), "frames": user,
                    "dims": None if dims is None else str(dims), "dtypes": [TORCH_NAMES.get(t) for t in types]})
    return out


def caller_of(frames: list[str]) -> str | None:
    """The first frame outward from the call site (frames[0]) in another file."""
    file = frames[0].split("(")[0]
    return next((f for f in frames[1:] if f.split("(")[0] != file), None)


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    store = tmp_path_factory.mktemp("seeds") / "store"
    traceduck.ingest(list(TRACES.values()), store=store, jobs=1)
    with traceduck.open(store) as db:
        yield db


def findings(db, run: str) -> list[dict]:
    cols, rows = run_report(db, "overview", runs=[run])
    return [dict(zip(cols, r)) for r in rows if r[cols.index("section")] == "finding"]


def test_the_indexer_finding_names_the_function_its_caller_and_its_ops(seeds):
    ops = plain_ops(TRACES["indexer_buggy"])
    total = sum(o["self_ns"] for o in ops)
    site = "attn/indexer.py(16): score"
    mine = [o for o in ops if o["frames"] and o["frames"][0] == site]
    assert {caller_of(o["frames"]) for o in mine} == {"model.py(54): forward"}
    share = 100 * sum(o["self_ns"] for o in mine) / total
    in_steps = sum(o["self_ns"] for o in mine if o["step"] is not None)
    (f,) = [f for f in findings(seeds, "indexer_buggy") if f["item"] == "dominant function"]
    assert (f["pct"], f["time_ns"]) == (round(share, 1), sum(o["self_ns"] for o in mine)) and share > 90
    assert f["detail"].startswith(f"{site} (called from model.py(54): forward) is {share:.1f}% of CPU self time: "
                                  f"{in_steps / 3 / 1e6:.3f} ms per step ({in_steps / 1e6:.3f} ms over the 3 profiled steps)")
    # its top ops with their shapes and dtypes, as plain json groups them
    groups = Counter()
    for o in mine:
        groups[(o["name"], o["dims"], ", ".join(dict.fromkeys(t for t in o["dtypes"] if t)))] += o["self_ns"]
    (name, dims, dtypes), ns_ = groups.most_common(1)[0]
    assert (name, dims, dtypes) == ("aten::mul", "[[8, 1, 64], [8, 131072, 64]]", "float32")
    mine_ns = sum(groups.values())
    assert f"its top ops: aten::mul over [[8, 1, 64], [8, 131072, 64]] float32 ({100 * ns_ / mine_ns:.0f}%); " \
           "aten::copy_ over [[8, 131072, 64], [8, 131072, 64], []] bfloat16 -> float32" in f["detail"]


def test_the_op_finding_names_shape_call_site_caller_and_per_step_figures(seeds):
    ops = plain_ops(TRACES["indexer_buggy"])
    total = sum(o["self_ns"] for o in ops)
    muls = [o for o in ops if o["name"] == "aten::mul"]
    big = [o for o in muls if o["dims"] == "[[8, 1, 64], [8, 131072, 64]]"]
    assert len(big) == 6 and {o["frames"][0] for o in big} == {"attn/indexer.py(16): score"}
    in_steps = sum(o["self_ns"] for o in muls if o["step"] is not None)
    (f,) = [f for f in findings(seeds, "indexer_buggy") if f["item"] == "dominant op" and f["detail"].startswith("aten::mul")]
    share_of_op = 100 * sum(o["self_ns"] for o in big) / sum(o["self_ns"] for o in muls)
    assert f["detail"] == (
        f"aten::mul over [[8, 1, 64], [8, 131072, 64]] float32 ({share_of_op:.0f}% of its time) at attn/indexer.py(16): "
        f"score (called from model.py(54): forward): {in_steps / 3 / 1e6:.3f} ms per step ({in_steps / 1e6:.3f} ms over the "
        f"3 profiled steps), {len(muls) / 3:.1f} calls per step ({len(big) / 3:.1f} of that shape), reads "
        f"{_decimal_size(sum(_input_bytes(o) for o in muls if o['step'] is not None) / 3)} of inputs per step; "
        f"{100 * sum(o['self_ns'] for o in muls) / total:.1f}% of CPU self time")


def _input_bytes(op: dict) -> int:
    sizes = {"float32": 4, "bfloat16": 2, "int64": 8, "float64": 8}
    total = 0
    for dims, dtype in zip(eval(op["dims"]), op["dtypes"]):  # noqa: S307 - the trace's own list text
        if dtype in sizes:
            n = 1
            for d in dims:
                n *= d
            total += n * sizes[dtype]
    return total


def _decimal_size(n: float) -> str:
    """Bytes as the findings write them: one decimal in 1000-based units, whole bytes below 1 kB."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} bytes"


def test_growing_shapes_are_one_row_as_a_range(seeds):
    ops = plain_ops(TRACES["indexer_fixed"])
    copies = [o for o in ops if o["name"] == "aten::copy_" and o["frames"] and o["frames"][0] == "attn/indexer.py(16): score"]
    by_step = {o["step"]: o["dims"] for o in copies}
    assert by_step == {2: "[[8, 1005, 64], [8, 1005, 64], []]", 3: "[[8, 1006, 64], [8, 1006, 64], []]",
                       4: "[[8, 1007, 64], [8, 1007, 64], []]"}
    cols, rows = run_report(seeds, "ops-by-shape", runs=["indexer_fixed"], params=["op=aten::copy_"])
    rows = [dict(zip(cols, r)) for r in rows if r[cols.index("call_site")] == "attn/indexer.py(16): score"]
    assert [(r["dims"], r["calls"], r["self_dur_ns"]) for r in rows] == [
        ("[[8, 1005..1007, 64], [8, 1005..1007, 64], []]", len(copies), sum(o["self_ns"] for o in copies))]
    # the exact dims a parameter away
    cols, rows = run_report(seeds, "ops-by-shape", runs=["indexer_fixed"], params=["op=aten::copy_", "exact_dims=true"])
    exact = sorted(r[cols.index("dims")] for r in rows if r[cols.index("call_site")] == "attn/indexer.py(16): score")
    assert exact == sorted(by_step.values())
    # the growing cast of its own trace too: [n, 8, 128] with n = 2048..2050
    cols, rows = run_report(seeds, "ops-by-shape", runs=["growing_cast"], params=["op=aten::copy_"])
    assert "[[2048..2050, 8, 128], [2048..2050, 8, 128], []]" in [r[cols.index("dims")] for r in rows]


def test_diff_of_the_buggy_and_fixed_runs_shows_the_growing_cast_as_one_row(seeds):
    buggy, fixed = plain_ops(TRACES["indexer_buggy"]), plain_ops(TRACES["indexer_fixed"])

    def outer_casts(ops):  # aten::to at the indexer: the outermost copy op of the cast
        return [o for o in ops if o["name"] == "aten::to" and o["frames"] and o["frames"][0] == "attn/indexer.py(16): score"]

    rel = seeds.diff("indexer_buggy", "indexer_fixed", by="copy")
    rows = [dict(zip(rel.columns, r)) for r in rel.fetchall() if r[1].startswith("attn/indexer.py(16): score | aten::to")]
    assert [(r["key"], r["a_calls"], r["b_calls"], r["a_dur_ns"], r["b_dur_ns"], r["status"]) for r in rows] == [
        ("attn/indexer.py(16): score | aten::to [8, 131072, 64] bfloat16 -> float32", 6, 0,
         sum(o["dur_ns"] for o in outer_casts(buggy)), 0, "removed"),
        ("attn/indexer.py(16): score | aten::to [8, 1005..1007, 64] bfloat16 -> float32", 0, 6,
         0, sum(o["dur_ns"] for o in outer_casts(fixed)), "added")]
    exact = seeds.diff("indexer_buggy", "indexer_fixed", by="copy", exact_dims=True).fetchall()
    assert len([r for r in exact if r[1].startswith("attn/indexer.py(16): score | aten::to [8, 100")]) == 3


def test_callers_list_the_frames_above_an_op_outermost_last(seeds):
    ops = [o for o in plain_ops(TRACES["indexer_buggy"]) if o["name"] == "aten::clamp_min"]
    cols, rows = run_report(seeds, "callers", runs=["indexer_buggy"], params=["op=aten::clamp_min"])
    rows = [dict(zip(cols, r)) for r in rows]
    frames = [r["frame"] for r in rows]
    # the user frames of plain json, innermost first, all in order among the report's frames
    user = ops[0]["frames"]
    assert [f for f in frames if f in user] == user
    assert rows[-1]["level"] == max(r["level"] for r in rows)  # outermost last
    score = next(r for r in rows if r["frame"] == "attn/indexer.py(16): score")
    total = sum(o["self_ns"] for o in ops)
    assert (score["calls"], score["time_ns"], score["time_pct"]) == (len(ops), total, 100.0)
    assert score["time_per_step_ns"] == round(sum(o["self_ns"] for o in ops if o["step"]) / 3)


def test_callers_of_one_shape_as_a_range_or_exactly(seeds):
    """--param dims picks the calls of one shape: dims that grow with the sequence as a range take
    every step's calls, a call's exact dims only those calls."""
    copies = [o for o in plain_ops(TRACES["indexer_fixed"])
              if o["name"] == "aten::copy_" and "attn/indexer.py(16): score" in o["frames"]]
    by_dims = Counter(o["dims"] for o in copies)
    grown = {d: n for d, n in by_dims.items() if d.startswith("[[8, 10")}
    assert len(grown) == 3  # one shape per step, [8, 1005, 64] to [8, 1007, 64]
    ranged = "[[8, 1005..1007, 64], [8, 1005..1007, 64], []]"
    for params, want in ((["op=aten::copy_", f"dims={ranged}"], sum(grown.values())),
                         ([f"dims={ranged}"], sum(grown.values())),
                         (["op=aten::copy_", "dims=[[8, 1006, 64], [8, 1006, 64], []]"], grown["[[8, 1006, 64], [8, 1006, 64], []]"])):
        cols, rows = run_report(seeds, "callers", runs=["indexer_fixed"], params=params)
        score = dict(zip(cols, next(r for r in rows if r[cols.index("frame")] == "attn/indexer.py(16): score")))
        assert score["calls"] == want, params
        assert score["time_ns"] == sum(o["self_ns"] for o in copies if o["dims"] in grown
                                       and (want == sum(grown.values()) or o["dims"].startswith("[[8, 1006"))), params


def test_callees_list_the_ops_and_shapes_under_a_frame(seeds):
    ops = [o for o in plain_ops(TRACES["indexer_fixed"]) if "attn/indexer.py(16): score" in o["frames"]]
    expected = Counter()
    for o in ops:
        expected[o["name"]] += o["self_ns"]
    for frame in ("attn/indexer.py(16): score", "attn/indexer.py:16", "score"):
        cols, rows = run_report(seeds, "callees", runs=["indexer_fixed"], params=[f"frame={frame}"])
        got = Counter()
        for r in rows:
            got[r[cols.index("name")]] += r[cols.index("time_ns")]
        assert got == expected, frame
    top = dict(zip(cols, rows[0]))
    assert (top["name"], top["dims"], top["dtypes"]) == ("aten::copy_", "[[8, 1005..1007, 64], [8, 1005..1007, 64], []]",
                                                         "bfloat16 -> float32")
