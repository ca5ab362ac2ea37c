"""Nesting by time containment per track, instants included, partial overlaps counted."""

from __future__ import annotations

import bisect
from collections import defaultdict
from decimal import Decimal

import pytest

import traceduck

from conftest import load_json, shared_dir, trace_events, write_trace


def X(name, ts, dur, tid=1, cat="cpu_op", pid=1):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}


EVENTS = [
    X("P", 0, 100),
    X("C1", 10, 20, tid="1"),  # same thread as P, written as a string
    {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "I1", "pid": 1, "tid": 1, "ts": 12},
    X("C1a", 15, 5),
    X("C2", 40, 60),  # ends exactly where P ends
    X("E2", 200, 10),  # same start as E1 but shorter: E1's child although written first
    X("E1", 200, 50),
    X("A", 300, 100),
    X("B", 350, 100),  # A.ts < B.ts < A.end < B.end: a partial overlap
    X("C", 360, 10),  # inside both A and B: child of B, which started last
    X("K", 15, 5, cat="kernel"),  # a GPU track with the same pid/tid: not nested under P
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "ts": 0, "args": {"name": "main"}},
]


def _nesting(store):
    with traceduck.open(store) as db:
        rows = db.sql("SELECT e.name, p.name, e.depth FROM events e LEFT JOIN events p "
                      "ON p.run_id = e.run_id AND p.event_id = e.parent_id ORDER BY e.event_id").fetchall()
        overlap = db.sql("SELECT overlap_count, warnings, op_overlap_count FROM runs").fetchall()[0]
    return {name: (parent, depth) for name, parent, depth in rows}, overlap


def test_hand_made_nesting(tmp_path, store):
    traceduck.ingest(write_trace(tmp_path / "nest.json", EVENTS), store=store)
    nesting, (overlap_count, warnings, op_overlap_count) = _nesting(store)
    assert nesting == {
        "P": (None, 0),
        "C1": ("P", 1),
        "I1": ("C1", 2),
        "C1a": ("C1", 2),
        "C2": ("P", 1),
        "E2": ("E1", 1),
        "E1": (None, 0),
        "A": (None, 0),
        "B": (None, 0),
        "C": ("B", 1),
        "K": (None, 0),
        "thread_name": (None, None),
    }
    assert overlap_count == 1  # only (A, B): C ends inside A, E1/E2 start together, C2 ends with P
    assert warnings == {"partially overlapping event pairs": 1}
    assert op_overlap_count == 1  # A and B are ops


def test_overlaps_that_touch_ops_are_counted_apart(tmp_path, store):
    """record_function annotations and Python frames interleave by design; only pairs with an op
    (cpu_op, or a legacy Operator without '#') count in op_overlap_count."""
    events = [
        X("frame", 0, 100, cat="python_function"),
        X("annotation", 50, 100, cat="user_annotation"),  # frame/annotation: not an op pair
        X("op", 120, 100),  # annotation/op: an op pair
        X("ProfilerStep#1", 200, 100, cat="Operator"),  # op/legacy annotation: an op pair
        X("frame2", 400, 100, cat="python_function", tid=2),
        X("aten::mm", 450, 100, cat="Operator", tid=2),  # frame2/legacy op: an op pair
    ]
    traceduck.ingest(write_trace(tmp_path / "t.json", events), store=store)
    _, (overlap_count, warnings, op_overlap_count) = _nesting(store)
    assert (overlap_count, op_overlap_count) == (_overlap_pairs(events), _overlap_pairs(events, ops_only=True)) == (4, 3)
    assert warnings == {"partially overlapping event pairs": 4}


def _overlap_pairs(events, ops_only: bool = False) -> int:
    """Pairs A.ts < B.ts < A.end < B.end on one track, counted directly; with ops_only, the pairs
    where A or B is a CPU op (cpu_op, or Operator without '#')."""
    device = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "memcpy", "memset"}
    tracks = defaultdict(list)
    for e in events:
        if e.get("ph") in ("X", "i", "I") and "ts" in e:
            ts = int(Decimal(e["ts"]) * 1000)
            end = ts + max(int(Decimal(e.get("dur", 0)) * 1000), 0)
            is_op = e.get("cat") == "cpu_op" or (e.get("cat") == "Operator" and "#" not in e["name"])
            tracks[((e.get("cat") or "").lower() in device, str(e.get("pid")), str(e.get("tid")))].append((ts, end, is_op))
    total = 0
    for spans in tracks.values():
        spans.sort()
        starts = [s for s, _, _ in spans]
        for a_ts, a_end, a_op in spans:
            lo, hi = bisect.bisect_right(starts, a_ts), bisect.bisect_left(starts, a_end)
            total += sum(1 for b_ts, b_end, b_op in spans[lo:hi]
                         if a_ts < b_ts < a_end < b_end and (a_op or b_op or not ops_only))
    return total


@pytest.mark.slow  # 4 s
def test_overlap_count_on_shared_traces(store):
    found = {}
    for rel in ("cpu/full.json", "cpu/train.json.gz", "cpu/pyexport.json",
                "public/AMD-AGI__TraceLens/tests/traces/b200/eager_trace.json.gz"):
        path = shared_dir() / rel
        events = trace_events(load_json(path))
        result = traceduck.ingest(path, store=store)[0]
        found[rel] = (result.overlap_count, result.op_overlap_count)
        assert found[rel] == (_overlap_pairs(events), _overlap_pairs(events, ops_only=True)), rel
    assert found["cpu/full.json"][0] > 0 and found["cpu/full.json"][1] == 0  # annotations and frames only
    assert found["public/AMD-AGI__TraceLens/tests/traces/b200/eager_trace.json.gz"][1] > 0


def test_every_cpu_op_in_full_nests_under_a_python_frame(store):
    traceduck.ingest(shared_dir() / "cpu/full.json", store=store)
    with traceduck.open(store) as db:
        orphans = db.sql("""SELECT count(*) FROM events e LEFT JOIN events p ON p.event_id = e.parent_id
                            WHERE e.category = 'cpu_op' AND p.event_id IS NULL""").fetchall()[0][0]
        children_inside = db.sql("""SELECT count(*) FROM events e JOIN events p ON p.event_id = e.parent_id
                                    WHERE e.ts_ns < p.ts_ns OR e.ts_ns + coalesce(e.dur_ns, 0) > p.ts_ns + p.dur_ns""").fetchall()[0][0]
    assert orphans == 0
    assert children_inside == 0
