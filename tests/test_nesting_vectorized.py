"""The column-wise nesting against the row-by-row one (`Nester.feed`) on random tracks: proper
nesting, partial overlaps, zero-length events, equal starts, Python frames, call stacks and ops."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import given, settings, strategies as st

from traceduck.ingester.frames import StackInterner, normalize
from traceduck.ingester.nesting import Nester, nest_vectorized

FIELDS = ("parent", "depth", "stack", "cpu_op", "parent_op", "top_op", "child_ns")


def _rows(events):
    """Rows in the merge's order: (track, ts, end descending, event id)."""
    rows = [(track, ts, ts + dur, eid, frame, cs, op) for eid, (track, ts, dur, frame, cs, op) in enumerate(events)]
    rows.sort(key=lambda r: (r[0], r[1], -r[2], r[3]))
    return rows


def _row_by_row(events, batch):
    rows = _rows(events)
    nester = Nester(len(events), StackInterner())
    for k in range(0, len(rows), batch):
        part = rows[k:k + batch]
        nester.feed(*[[r[j] for r in part] for j in (0, 3, 1, 2, 4, 5, 6)])
    return nester


def _columns(events):
    rows = _rows(events)
    nester = Nester(len(events), StackInterner())
    if rows:
        track, ts, end, eid, frame, cs, op = zip(*rows)
        texts = sorted({normalize(f) for f in frame if f is not None})
        nest_vectorized(nester, np.array(track, dtype=np.uint64), np.array(eid, dtype=np.int64),
                        np.array(ts, dtype=np.int64), np.array(end, dtype=np.int64),
                        np.array([texts.index(normalize(f)) if f is not None else -1 for f in frame], dtype=np.int64),
                        texts,
                        np.array([c or 0 for c in cs], dtype=np.int64), np.array([c is not None for c in cs]),
                        np.array(op, dtype=bool))
    return nester


def _same(a: Nester, b: Nester) -> None:
    for f in FIELDS:
        assert getattr(a, f).tolist() == getattr(b, f).tolist(), f
    assert (a.overlap_count, a.op_overlap_count) == (b.overlap_count, b.op_overlap_count)
    assert a.stacks.nodes == b.stacks.nodes


# Python frames to draw from; the last one normalizes to a text that normalizes again differently
FRAMES = [None, None, "a.py(1): f", "b.py(2): g at 0x7f00", "c.py(3): h", "d at 0 at 0x1x1"]


def _nested(rng, track, start, end, depth, out):
    """Properly nested children inside [start, end)."""
    t = start
    while t < end and rng.random() < 0.8 and depth < 6:
        dur = rng.randrange(0, max(1, end - t) + 1)
        out.append((track, t, dur, rng.choice(FRAMES), rng.choice([None, None, 11, 22]), rng.random() < 0.4))
        _nested(rng, track, t, t + dur, depth + 1, out)
        t += dur + rng.randrange(0, 3)


def _random_tracks(seed: int, tracks: int, width: int, loose: int) -> list[tuple]:
    """Events (track, ts, dur, frame, call stack, is op) of `tracks` tracks of nested events over
    [0, width), plus up to `loose` events placed anywhere on each (partial overlaps likely), shuffled."""
    rng = random.Random(seed)
    events: list[tuple] = []
    for track in range(tracks):
        _nested(rng, track, 0, width, 0, events)
        for _ in range(rng.randrange(0, loose + 1)):
            events.append((track, rng.randrange(0, width), rng.randrange(0, width // 2), rng.choice(FRAMES), None,
                           rng.random() < 0.5))
    rng.shuffle(events)
    return events


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 4), st.booleans(), st.integers(1, 7))
def test_column_wise_nesting_equals_row_by_row(seed, tracks, overlaps, batch):
    events = _random_tracks(seed, tracks, 60, 3 if overlaps else 0)
    _same(_row_by_row(events, batch), _columns(events))


def test_column_wise_nesting_by_hand():
    # track 1: P(0,100) > C(10,20) > D(15,5); zero-length Z at 30 under P; E(100,0) at P's end: a root
    # track 2: A(0,10), B(5,10) overlap partially -> row by row; C2(6,1) under B
    events = [(1, 0, 100, None, None, True), (1, 10, 20, "f.py(1): f", None, False), (1, 15, 5, None, 7, True),
              (1, 30, 0, None, None, True), (1, 100, 0, None, None, False),
              (2, 0, 10, None, None, True), (2, 5, 10, None, None, True), (2, 6, 1, None, None, False)]
    got = _columns(events)
    assert got.parent.tolist() == [-1, 0, 1, 0, -1, -1, -1, 6]
    assert got.depth.tolist() == [0, 1, 2, 1, 0, 0, 0, 1]
    assert got.cpu_op.tolist() == [0, 0, 2, 3, -1, 5, 6, 6]
    assert got.top_op.tolist() == [0, 0, 0, 0, -1, 5, 6, 6]
    assert got.parent_op.tolist() == [-1, 0, 0, 0, -1, -1, -1, 6]
    assert got.child_ns.tolist() == [20, 5, 0, 0, 0, 0, 1, 0]
    assert got.stack[2] == 7 and got.stack[1] != 0 and got.stack[0] == 0
    assert (got.overlap_count, got.op_overlap_count) == (1, 1)
    _same(_row_by_row(events, 3), got)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 4), st.sampled_from([(0, 0), (1, 0), (64, 4096)]))
def test_tracks_left_to_the_row_by_row_nesting_mix_with_the_others(seed, tracks, limits):
    """With little or no budget for counting overlaps, tracks with overlaps go row by row and the
    result is still the same."""
    from traceduck.ingester import nesting
    events = _random_tracks(seed, tracks, 60, 3)
    saved = nesting.OVERLAP_WORK, nesting.OVERLAP_SLACK
    nesting.OVERLAP_WORK, nesting.OVERLAP_SLACK = limits
    try:
        got = _columns(events)
    finally:
        nesting.OVERLAP_WORK, nesting.OVERLAP_SLACK = saved
    _same(_row_by_row(events, 5), got)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 5), st.sampled_from([(1, 3), (4, 1), (1 << 18, 1 << 21), (2, 7)]),
       st.integers(1, 9))
def test_merge_nests_batches_of_whole_tracks_and_long_tracks_row_by_row(seed, tracks, limits, batch):
    """The merge's batching (tracks across batches, several tracks at once, long tracks row by row
    as their batches arrive) gives what nesting all rows row by row gives."""
    import pyarrow as pa
    from traceduck.ingester import pipeline
    events = _random_tracks(seed, tracks, 40, 2)
    rows = _rows(events)
    table = pa.table({"track": pa.array([r[0] for r in rows], pa.uint64()),
                      "event_id": pa.array([r[3] for r in rows], pa.int64()),
                      "ts_ns": pa.array([r[1] for r in rows], pa.int64()),
                      "end_ns": pa.array([r[2] for r in rows], pa.int64()),
                      "pyframe": pa.array([r[4] for r in rows], pa.string()),
                      "call_stack_id": pa.array([r[5] for r in rows], pa.int64()),
                      "is_op": pa.array([r[6] for r in rows], pa.bool_())})
    saved = pipeline.NEST_BATCH, pipeline.NEST_VECTOR_ROWS
    pipeline.NEST_BATCH, pipeline.NEST_VECTOR_ROWS = limits
    try:
        got = Nester(len(events), StackInterner())
        pipeline._nest_tracks(got, pa.RecordBatchReader.from_batches(table.schema, table.to_batches(batch)))
    finally:
        pipeline.NEST_BATCH, pipeline.NEST_VECTOR_ROWS = saved
    _same(_row_by_row(events, 4), got)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), block=st.sampled_from([1, 2, 3, 7, 64, 1 << 18]))
def test_partial_overlap_pairs_counted_in_blocks_as_one_by_one(seed, block):
    """The column-wise count of later-ending rows equals a count row by row, whatever the block."""
    import traceduck.ingester.nesting as nesting

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    end = rng.integers(0, 20, n).astype(np.int64)
    is_op = rng.random(n) < 0.4
    m = int(rng.integers(0, 30))
    rows = rng.integers(0, n, m)
    start = rng.integers(0, n + 1, m)
    stop = np.minimum(start + rng.integers(0, 12, m), n)
    expected = [0, 0]
    for j, a, b in zip(rows.tolist(), start.tolist(), stop.tolist()):
        later = end[a:b] > end[j]
        hit = int(np.count_nonzero(later))
        expected[0] += hit
        expected[1] += hit if is_op[j] else int(np.count_nonzero(is_op[a:b][later]))
    saved = nesting.OVERLAP_BLOCK
    nesting.OVERLAP_BLOCK = block
    try:
        got = nesting._count_later_ends(rows.astype(np.int32), start.astype(np.int32), stop.astype(np.int64), end, is_op)
    finally:
        nesting.OVERLAP_BLOCK = saved
    assert list(got) == expected
