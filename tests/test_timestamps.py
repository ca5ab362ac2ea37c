"""Timestamps are exact integer nanoseconds: base + ts(us) * 1000 with no float rounding."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

import traceduck

from conftest import load_json, shared_dir, trace_events

TRACE_TEXT = """{
  "schemaVersion": 1,
  "baseTimeNanoseconds": 1790857026000000000,
  "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 5368471939812.849, "dur": 28.080},
  {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 4458676522690.655, "dur": 0.001},
  {"ph": "X", "cat": "cpu_op", "name": "c", "pid": 1, "tid": 1, "ts": 8796093022207.999, "dur": 1}
  ],
  "traceName": "t.json"
}"""


def _times(store, name):
    with traceduck.open(store) as db:
        return db.sql("SELECT name, ts_ns, dur_ns FROM events ORDER BY event_id").fetchall()


def test_three_decimal_floats_give_exact_ns(tmp_path, store):
    path = tmp_path / "t.json"
    path.write_text(TRACE_TEXT)
    traceduck.ingest(path, store=store)
    base = 1790857026000000000
    assert _times(store, "t") == [
        ("a", base + 5368471939812849, 28080),
        ("b", base + 4458676522690655, 1),
        ("c", base + 8796093022207999, 1000),
    ]


def test_epoch_microsecond_floats_keep_their_decimals(tmp_path, store):
    # Floats near 1.7e15 us cannot hold 3 decimals exactly; ingest reads their decimal text.
    path = tmp_path / "epoch.json"
    path.write_text('{"traceEvents": [{"ph": "X", "name": "k", "pid": 0, "tid": 7, '
                    '"ts": 1712195495519689.047, "dur": 63.813}, '
                    '{"ph": "X", "name": "i", "pid": 0, "tid": 7, "ts": 1623212756351, "dur": 3}]}')
    traceduck.ingest(path, store=store)
    assert _times(store, "epoch") == [("k", 1712195495519689047, 63813), ("i", 1623212756351000, 3000)]


@pytest.mark.slow
def test_shared_epoch_float_trace_is_exact(store):
    rel = "public/facebookresearch__HolisticTraceAnalysis/tests/data/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
    path = shared_dir() / rel
    events = trace_events(load_json(path))
    expected = [int(Decimal(e["ts"]) * 1000) if "ts" in e else None for e in events]
    traceduck.ingest(path, store=store)
    with traceduck.open(store) as db:
        got = [r[0] for r in db.sql("SELECT ts_ns FROM events ORDER BY event_id").fetchall()]
    assert got == expected
    assert any(t % 1000 for t in expected if t)  # the sub-microsecond digits are really there


def test_integer_microseconds_up_to_the_int64_limit(tmp_path, store):
    """Older exporters write ts/dur as integers: ns = us * 1000 exactly; a ts whose ns would not fit
    int64 is kept (in extra, for export) and counted, not wrapped."""
    limit_us = ((1 << 63) - 1) // 1000  # 9223372036854775
    path = tmp_path / "ints.json"
    path.write_text('{"traceEvents": ['
                    '{"ph": "X", "cat": "cpu_op", "name": "epoch", "pid": 1, "tid": 1, "ts": 1661203462817620, "dur": 7},'
                    f'{{"ph": "X", "cat": "cpu_op", "name": "edge", "pid": 1, "tid": 2, "ts": {limit_us}, "dur": 0}},'
                    f'{{"ph": "X", "cat": "cpu_op", "name": "over", "pid": 1, "tid": 3, "ts": {limit_us + 1}, "dur": 1}}'
                    ']}')
    result = traceduck.ingest(path, store=store)[0]
    assert _times(store, "ints") == [
        ("epoch", 1661203462817620000, 7000),
        ("edge", 9223372036854775000, 0),
        ("over", None, 1000),
    ]
    assert result.warnings["ts beyond the int64 nanosecond range (kept in extra)"] == 1


def test_an_end_beyond_int64_keeps_dur_in_extra(tmp_path, store):
    """ts and dur that each fit int64 nanoseconds but whose sum, the event's end, does not: dur is
    kept in extra (for export) and counted, so that no view or report overflows (found by the fuzzer)."""
    path = tmp_path / "ends.json"
    path.write_text('{"traceEvents": ['
                    '{"ph": "X", "cat": "cpu_op", "name": "ok", "pid": 1, "tid": 1, "ts": 1796524658386697, "dur": 7},'
                    '{"ph": "X", "cat": "cpu_op", "name": "far", "pid": 1, "tid": 2, "ts": 1796524658386697, "dur": 9007199254740993},'
                    '{"ph": "X", "cat": "cpu_op", "name": "low", "pid": 1, "tid": 3, "ts": -9007199254740993, "dur": -1796524658386697}'
                    ']}')
    result = traceduck.ingest(path, store=store)[0]
    assert _times(store, "ends") == [("ok", 1796524658386697000, 7000), ("far", 1796524658386697000, None),
                                     ("low", -9007199254740993000, None)]
    assert result.warnings["dur whose end (ts + dur) is beyond the int64 nanosecond range (kept in extra)"] == 2
    with traceduck.open(store) as db:
        for name in ("overview", "top-ops", "idle", "critical-path"):
            db.report(name).fetchall()


def test_a_base_time_that_puts_times_beyond_int64_is_ignored(tmp_path, store):
    """baseTimeNanoseconds near the int64 limit, with events whose ts + base would wrap: times stay
    relative (base_time_ns 0) with a warning, and reports answer (found by the fuzzer)."""
    path = tmp_path / "base.json"
    path.write_text('{"baseTimeNanoseconds": 9223372036854775000, "traceEvents": ['
                    '{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 5.5, "dur": 7},'
                    '{"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 100, "dur": 1}]}')
    result = traceduck.ingest(path, store=store)[0]
    assert _times(store, "base") == [("a", 5500, 7000), ("b", 100000, 1000)]
    assert result.warnings["baseTimeNanoseconds that puts times beyond the int64 nanosecond range (ignored)"] == 1
    with traceduck.open(store) as db:
        assert db.sql("SELECT base_time_ns, start_ns, end_ns FROM runs").fetchall() == [(0, 5500, 101000)]
        for name in ("overview", "top-ops", "steps"):
            db.report(name).fetchall()
    out = tmp_path / "out.json"
    traceduck.export("base", out, store=store)
    assert [e["ts"] for e in json.loads(out.read_text())["traceEvents"]] == [5.5, 100]
