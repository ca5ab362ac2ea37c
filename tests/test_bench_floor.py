"""bench/floor.py does the work it claims (so its lower bound on ingest's time is a bound on the
same work): every event written, each event's args kept as its JSON text, one shapes row per
input, and each timeline row's parent as defined for nesting; checked against plain `json`."""

from __future__ import annotations

import json
import sys
from decimal import Decimal

import pyarrow.parquet as pq

from conftest import ROOT, shared_dir


def _floor():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import floor
    finally:
        sys.path.pop(0)
    return floor


def test_floor_steps_keep_every_event_arg_and_shape(tmp_path):
    path = shared_dir() / "cpu" / "full.json"
    floor = _floor()
    cpu = floor.steps(path, tmp_path)
    assert list(cpu) == ["read", "run id (xxh3-128 of the bytes)", "decode events (typed, args raw)", "core columns",
                         "decode args (promoted and shape keys)", "shapes", "nest (sort, parents)",
                         "write (events, args as text, shapes)"]
    assert all(v >= 0 for v in cpu.values())
    events = json.loads(path.read_bytes(), parse_float=Decimal)["traceEvents"]
    written = pq.read_table(tmp_path / "events.parquet").to_pylist()
    assert len(written) == len(events) > 1000
    assert [w["name"] for w in written] == [e.get("name") for e in events]
    texts = pq.read_table(tmp_path / "args.parquet").column("args_json").to_pylist()
    assert [None if t is None else json.loads(t, parse_float=Decimal) for t in texts] == [e.get("args") for e in events]
    assert [w["external_id"] for w in written] == [(e.get("args") or {}).get("External id") for e in events]
    inputs = sum(len(e["args"]["Input Dims"]) for e in events if "Input Dims" in e.get("args", {}))
    assert pq.read_metadata(tmp_path / "shapes.parquet").num_rows == inputs > 100

    # parents: the nearest earlier row of the track (sorted by start, longer first) that ends no sooner
    rows = [(str(e["pid"]), int(Decimal(e["ts"]) * 1000), i) for i, e in enumerate(events)
            if e.get("ph") == "X" and "ts" in e]
    ends = {i: int(Decimal(events[i]["ts"]) * 1000) + max(int(Decimal(events[i].get("dur", 0)) * 1000), 0)
            for _, _, i in rows}
    tracks: dict = {}
    for pid, ts, i in rows:
        tracks.setdefault((pid, str(events[i]["tid"])), []).append((ts, -ends[i], i))
    expected = {}
    for track in tracks.values():
        track.sort()
        for k, (_, neg_end, i) in enumerate(track):
            expected[i] = next((j for _, e2, j in reversed(track[:k]) if -e2 >= -neg_end), None)
    assert {i: written[i]["parent_id"] for i in expected} == expected
    assert sum(p is not None for p in expected.values()) > 1000
