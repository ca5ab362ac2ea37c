"""Nesting events on their tracks and deriving Python stacks from python_function events.

Events of one track (pid, tid; device tracks apart from CPU threads) are visited in start
order, longer first on equal start. A stack holds the open events; an event's parent is the
innermost open event that contains it. An event that starts inside another but ends after it
(partial overlap) is counted, and the event it overlaps is closed early: later events inside
both are children of the one that started last. Overlaps where either event is a CPU op are
counted apart: record_function annotations and Python frames overlap each other by design (their
enter/exit calls interleave), while an op that overlaps makes its self time and nesting suspect.

Rows arrive in batches (the whole run never sits in Python lists at once); results are
scattered into arrays indexed by event id.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort

import numpy as np

from .frames import StackInterner, normalize

# Events closed early are kept in a plain list and scanned per event while there are few (real
# traces); past this many (a staircase of partial overlaps) they move to _EndCounter.
FEW_CLOSED_EARLY = 32


class _EndCounter:
    """A multiset of end times that counts the ends inside an open range in O(log^2 n) and adds
    one in amortised O(log n): sorted runs of doubling sizes, merged like a binary counter."""

    _BUFFER = 64

    def __init__(self) -> None:
        self.runs: list[list[int]] = []  # each sorted, sizes decreasing
        self.recent: list[int] = []  # sorted, the latest additions

    def add(self, end: int) -> None:
        insort(self.recent, end)
        if len(self.recent) >= self._BUFFER:
            run, self.recent = self.recent, []
            while self.runs and len(self.runs[-1]) <= len(run):
                run = sorted(self.runs.pop() + run)  # two sorted runs: timsort merges them in linear time
            self.runs.append(run)

    def count(self, lo: int, hi: int) -> int:
        """How many ends e with lo < e < hi."""
        n = bisect_left(self.recent, hi) - bisect_right(self.recent, lo)
        for run in self.runs:
            n += bisect_left(run, hi) - bisect_right(run, lo)
        return n


class _ClosedEarly:
    """The events of a track closed early, as ends (all of them, and those of ops).

    Every event already visited on the track whose end lies in (ts, end) of the current event
    was closed early, so the overlaps are a range count over every end ever added: nothing needs
    removing as time moves on.
    """

    def __init__(self, entries: list[tuple[int, bool]]) -> None:
        self.all = _EndCounter()
        self.ops = _EndCounter()
        for end, is_op in entries:
            self.add(end, is_op)

    def add(self, end: int, is_op: bool) -> None:
        self.all.add(end)
        if is_op:
            self.ops.add(end)


class Nester:
    """Feeds sorted rows batch by batch; keeps the open-event stack across batches."""

    def __init__(self, total_events: int, stacks: StackInterner) -> None:
        # event ids fit 32 bits below 2**31 events; halves what the merge holds for big traces
        ids = np.int32 if total_events < (1 << 31) else np.int64
        self.parent = np.full(total_events, -1, dtype=ids)
        self.depth = np.full(total_events, -1, dtype=np.int32)
        self.stack = np.zeros(total_events, dtype=np.int64)
        self.cpu_op = np.full(total_events, -1, dtype=ids)
        self.parent_op = np.full(total_events, -1, dtype=ids)  # innermost enclosing op, the event excluded
        self.top_op = np.full(total_events, -1, dtype=ids)
        self.child_ns = np.zeros(total_events, dtype=np.int64)  # summed duration of direct children
        self.overlap_count = 0
        self.op_overlap_count = 0  # the overlaps where either event is a CPU op
        self.stacks = stacks
        # (end, event_id, depth, python stack, innermost cpu op, outermost cpu op); -1 = no op
        self._open: list[tuple[int, int, int, int, int, int]] = []
        # (end, is_op) of open events closed by a partial overlap
        self._closed_early: list[tuple[int, bool]] = []
        self._many_closed_early: _ClosedEarly | None = None  # instead of _closed_early, once it is long
        self._track: int | None = None

    def feed(self, track: list[int], event_id: list[int], ts: list[int], end: list[int],
             pyframe: list[str | None], call_stack: list[int | None], is_op: list[bool]) -> None:
        """Rows sorted by (track, ts, end descending, event_id), continuing the previous batch."""
        n = len(event_id)
        parent_out = [-1] * n
        depth_out = [0] * n
        stack_out = [0] * n
        op_out = [-1] * n
        parent_op_out = [-1] * n
        top_out = [-1] * n
        open_ = self._open
        closed_early = self._closed_early
        many = self._many_closed_early
        current = self._track
        overlaps = op_overlaps = 0
        push_frame = self.stacks.push
        for i in range(n):
            t = ts[i]
            e = end[i]
            if track[i] != current:
                current = track[i]
                open_.clear()
                closed_early.clear()
                many = None
            while open_ and open_[-1][0] <= t:
                open_.pop()
            if open_ and open_[-1][0] < e:
                k = len(open_) - 1
                while k > 0 and open_[k - 1][0] < e:
                    k -= 1
                if many is None:
                    closed_early.extend((entry[0], entry[4] == entry[1]) for entry in open_[k:])
                else:
                    for entry in open_[k:]:
                        many.add(entry[0], entry[4] == entry[1])
                del open_[k:]
            if many is not None:
                hit = many.all.count(t, e)
                overlaps += hit
                op_overlaps += hit if is_op[i] else many.ops.count(t, e)
            elif closed_early:
                closed_early[:] = [x for x in closed_early if x[0] > t]
                hit = [x_op for x, x_op in closed_early if x < e]
                overlaps += len(hit)
                op_overlaps += len(hit) if is_op[i] else sum(hit)
                if len(closed_early) > FEW_CLOSED_EARLY:
                    many = _ClosedEarly(closed_early)
                    closed_early.clear()
            if open_:
                _, p_id, p_depth, p_stack, op, top = open_[-1]
                parent_out[i] = p_id
                d = p_depth + 1
            else:
                p_stack = 0
                d = 0
                op = top = -1
            parent_op_out[i] = op
            if is_op[i]:
                op = event_id[i]
                if top < 0:
                    top = op
            op_out[i] = op
            top_out[i] = top
            depth_out[i] = d
            frame = pyframe[i]
            if frame is not None:
                node = push_frame(normalize(frame), p_stack)
                stack_out[i] = node
            else:
                node = p_stack
                cs = call_stack[i]
                stack_out[i] = cs if cs is not None else node
            open_.append((e, event_id[i], d, node, op, top))
        self._track = current
        self._many_closed_early = many
        self.overlap_count += overlaps
        self.op_overlap_count += op_overlaps
        ids = np.asarray(event_id, dtype=np.int64)
        self.parent[ids] = parent_out
        self.depth[ids] = depth_out
        self.stack[ids] = stack_out
        self.cpu_op[ids] = op_out
        self.parent_op[ids] = parent_op_out
        self.top_op[ids] = top_out
        parents = np.asarray(parent_out, dtype=np.int64)
        has_parent = parents >= 0
        durations = np.asarray(end, dtype=np.int64) - np.asarray(ts, dtype=np.int64)
        np.add.at(self.child_ns, parents[has_parent], durations[has_parent])
