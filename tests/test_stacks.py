"""Python stacks: interned per run, from `Call stack` or the enclosing python_function chain."""

from __future__ import annotations

import re
from decimal import Decimal

import traceduck

from conftest import load_json, shared_dir, trace_events


def _frames(store, event_id):
    with traceduck.open(store) as db:
        rows = db.sql("""SELECT s.frame FROM events e JOIN stacks s ON s.run_id = e.run_id AND s.stack_id = e.stack_id
                         WHERE e.event_id = ? ORDER BY s.frame_index""", [event_id]).fetchall()
    return [r[0] for r in rows]


def _norm(frame: str) -> str:
    return re.sub(r" at 0x[0-9a-fA-F]+", "", frame)


def _whole_cache_copy(events):
    for i, e in enumerate(events):
        if e.get("name") == "aten::copy_" and e.get("args", {}).get("Input Dims", [None])[0] == [65536, 1, 576]:
            return i, e
    raise AssertionError("no whole-cache copy in the trace")


def test_stack_from_python_function_chain(store):
    path = shared_dir() / "cpu/full.json"
    events = trace_events(load_json(path))
    idx, op = _whole_cache_copy(events)
    # independent: innermost python_function containing the op, then Python parent ids to the root
    t0, t1 = Decimal(op["ts"]), Decimal(op["ts"]) + Decimal(op["dur"])
    pyf = [e for e in events if e.get("cat") == "python_function" and e["tid"] == op["tid"]]
    enclosing = [e for e in pyf if Decimal(e["ts"]) <= t0 and Decimal(e["ts"]) + Decimal(e["dur"]) >= t1]
    inner = max(enclosing, key=lambda e: (Decimal(e["ts"]), -Decimal(e["dur"])))
    by_id = {e["args"]["Python id"]: e for e in pyf}
    expected, node = [], inner
    while node is not None:
        expected.append(_norm(node["name"]))
        node = by_id.get(node["args"].get("Python parent id"))
    traceduck.ingest(path, store=store)
    frames = _frames(store, idx)
    assert frames == expected
    assert "gen.py(77): _read_cache" in frames
    assert not any(" at 0x" in f for f in frames)


def test_stack_from_call_stack_arg(store):
    path = shared_dir() / "cpu/verbose.json.gz"
    events = trace_events(load_json(path))
    idx, op = _whole_cache_copy(events)
    expected = [_norm(f) for f in op["args"]["Call stack"].split(";") if f]
    traceduck.ingest(path, store=store)
    assert _frames(store, idx) == expected
    assert expected[0].startswith("<built-in method") or expected[0].endswith(")")


def test_same_stack_same_id_across_runs(store):
    for rel in ("cpu/full.json", "cpu/fixed.json"):
        traceduck.ingest(shared_dir() / rel, store=store)
    with traceduck.open(store) as db:
        shared = db.sql("""SELECT count(*) FROM (SELECT stack_id FROM stacks GROUP BY stack_id
                           HAVING count(DISTINCT run_id) = 2)""").fetchall()[0][0]
        split = db.sql("""SELECT count(*) FROM stacks WHERE file IS NOT NULL
                          AND frame <> file || '(' || line || '): ' || function""").fetchall()[0][0]
    assert shared > 100
    assert split == 0


def test_stack_ids_on_ops_annotations_and_memory_events(store):
    traceduck.ingest(shared_dir() / "cpu/full.json", store=store)
    with traceduck.open(store) as db:
        rows = dict(db.sql("""SELECT category, count(*) FILTER (WHERE stack_id IS NULL) FROM events
                              WHERE category IN ('cpu_op', 'user_annotation', 'cpu_instant_event') GROUP BY 1""").fetchall())
    assert rows == {"cpu_op": 0, "user_annotation": 0, "cpu_instant_event": 0}


def test_no_stacks_without_python_frames(store):
    traceduck.ingest(shared_dir() / "cpu/nostack.json", store=store)
    with traceduck.open(store) as db:
        assert db.sql("SELECT count(*) FROM events WHERE stack_id IS NOT NULL").fetchall()[0][0] == 0
        assert db.sql("SELECT count(*) FROM stacks").fetchall()[0][0] == 0
