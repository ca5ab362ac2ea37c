"""Nesting events on their tracks and deriving Python stacks from python_function events.

Events of one track (pid, tid; device tracks apart from CPU threads) are visited in start
order, longer first on equal start. A stack holds the open events; an event's parent is the
innermost open event that contains it. An event that starts inside another but ends after it
(partial overlap) is counted, and the event it overlaps is closed early: later events inside
both are children of the one that started last. Overlaps where either event is a CPU op are
counted apart: record_function annotations and Python frames overlap each other by design (their
enter/exit calls interleave), while an op that overlaps makes its self time and nesting suspect.

`Nester.feed` nests rows one by one as batches arrive (the whole run never sits in Python lists at
once); `nest_vectorized` nests whole tracks column-wise with the same results, and leaves to `feed`
the tracks it would be slow on. Results are scattered into arrays indexed by event id.
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

    def feed_arrays(self, track: np.ndarray, event_id: np.ndarray, ts: np.ndarray, end: np.ndarray,
                    frame: np.ndarray, frame_texts: list[str], call_stack: np.ndarray, has_call_stack: np.ndarray,
                    is_op: np.ndarray, fresh: bool = False) -> None:
        """`feed` from the columns `nest_vectorized` takes (frames as codes into `frame_texts`, which
        are normalized); `fresh`: the first row starts a track, whatever was fed before."""
        if fresh:
            self._track = None
        self.feed(track.tolist(), event_id.tolist(), ts.tolist(), end.tolist(),
                  [frame_texts[f] if f >= 0 else None for f in frame.tolist()],
                  [c if h else None for c, h in zip(call_stack.tolist(), has_call_stack.tolist())], is_op.tolist(),
                  normalized=True)

    def feed(self, track: list[int], event_id: list[int], ts: list[int], end: list[int],
             pyframe: list[str | None], call_stack: list[int | None], is_op: list[bool],
             normalized: bool = False) -> None:
        """Rows sorted by (track, ts, end descending, event_id), continuing the previous batch;
        `normalized`: the frames are normalized already."""
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
                node = push_frame(frame if normalized else normalize(frame), p_stack)
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




# Rows compared while counting partial overlaps, per row of the input, before a track is left to
# `Nester.feed` (whose counting stays O(log^2 n) per event on a staircase of overlaps).
OVERLAP_WORK = 64
OVERLAP_SLACK = 4096


def _previous_no_smaller(end: np.ndarray, first: np.ndarray) -> np.ndarray:
    """For each row, the nearest earlier row of its track whose end is >= its own; -1 if none.
    Pointer jumping on the rows still unresolved: a row's candidate starts at the row before it
    and, while the candidate ends too soon, moves to the candidate's own candidate (every row in
    between ends too soon as well). The moves telescope: O(n) work in all, in as many rounds as
    the deepest chain of such moves."""
    n = len(end)
    cand = np.arange(-1, n - 1, dtype=first.dtype)
    cand[first == np.arange(n, dtype=first.dtype)] = -1
    active = np.flatnonzero(cand >= 0)
    while len(active):
        c = cand[active]
        short = end[c] < end[active]
        active = active[short]
        cand[active] = cand[c[short]]
        active = active[cand[active] >= 0]
    return cand


# Row pairs compared at once while counting partial overlaps (int64 indexes: 8 bytes each, a few
# arrays of them live at a time)
OVERLAP_BLOCK = 1 << 18


def _count_later_ends(rows: np.ndarray, start: np.ndarray, stop: np.ndarray, end: np.ndarray, is_op: np.ndarray
                      ) -> tuple[int, int]:
    """For each row j of `rows`, the rows k in [start_j, stop_j) that end after it: how many, in
    all; and how many of them pair an op with j (all of them when j is an op, else those that are
    ops). Column-wise over blocks of at most about OVERLAP_BLOCK pairs."""
    lengths = (stop - start).astype(np.int64)
    keep = lengths > 0
    rows, start, lengths = rows[keep], start[keep].astype(np.int64), lengths[keep]
    overlaps = op_overlaps = 0
    if not len(rows):
        return 0, 0
    total = np.cumsum(lengths)
    lo = 0
    while lo < len(rows):
        base = int(total[lo - 1]) if lo else 0
        hi = max(lo + 1, int(np.searchsorted(total, base + OVERLAP_BLOCK, side="right")))
        n = lengths[lo:hi]
        owner = np.repeat(np.arange(lo, hi), n)
        offsets = total[lo:hi] - n - base  # each row's first pair in this block
        k = start[owner] + (np.arange(int(total[hi - 1]) - base, dtype=np.int64) - offsets[owner - lo])
        j = rows[owner]
        later = end[k] > end[j]
        overlaps += int(np.count_nonzero(later))
        op_overlaps += int(np.count_nonzero(later & (is_op[j] | is_op[k])))
        lo = hi
    return overlaps, op_overlaps


def _levels(parent: np.ndarray) -> np.ndarray:
    """The number of ancestors of each row of a forest (list ranking: each round adds the hops of
    the row jumped to, so log2 of the depth rounds)."""
    depth = (parent >= 0).astype(np.int32)
    up = parent.copy()
    live = np.flatnonzero(up >= 0)
    while len(live):
        u = up[live]
        depth[live] += depth[u]
        up[live] = up[u]
        live = live[up[live] >= 0]
    return depth


def nest_vectorized(nester: Nester, track: np.ndarray, event_id: np.ndarray, ts: np.ndarray, end: np.ndarray,
                    frame: np.ndarray, frame_texts: list[str], call_stack: np.ndarray, has_call_stack: np.ndarray,
                    is_op: np.ndarray) -> None:
    """`Nester.feed` for rows that hold whole tracks (sorted the same way), column-wise.

    The events still open when a row is reached, once the ones that ended and the ones it closes
    early (partial overlaps) are gone, form a chain whose ends never decrease outwards; its top,
    the row's parent, is therefore the nearest earlier row of the track that ends no sooner than
    this one (for a zero-length row, the first such row further out that ends after it starts).
    In the forest of those "nearest no-smaller" links, a row's subtree is the run of rows after it
    that end no later, so the first row that outlasts it follows its subtree; a row is closed
    early (and in partial-overlap pairs) when that row starts before it ends, and its pairs are
    counted over the rows that start before it ends. Depths, stacks and ops follow from the
    parents, level by level. Tracks whose counting would be long (a staircase of overlaps) are
    left to `Nester.feed`. `frame` is each row's Python frame as an index into `frame_texts`
    (normalized), -1 where the row is not a Python frame.
    """
    n = len(event_id)
    if not n:
        return
    # row positions (and positions past a subtree: under 2n) in 32 bits where they fit; event ids
    # as the nester keeps them
    at = np.int32 if n < (1 << 30) else np.int64
    ids = nester.parent.dtype
    event_id = event_id.astype(ids, copy=False)
    new_track = np.ones(n, dtype=bool)
    new_track[1:] = track[1:] != track[:-1]
    track_index = (np.cumsum(new_track) - 1).astype(at)
    starts = np.flatnonzero(new_track).astype(at)
    first = starts[track_index]  # each row's track's first row
    after = np.append(starts[1:], n).astype(at)[track_index]  # the row after its track's last
    nearest = _previous_no_smaller(end, first)
    # a zero-length row does not nest under rows that end where it starts: further out
    parent = nearest.copy()
    rows = np.flatnonzero(parent >= 0)
    rows = rows[end[parent[rows]] <= ts[rows]]
    while len(rows):
        parent[rows] = nearest[parent[rows]]
        rows = rows[parent[rows] >= 0]
        rows = rows[end[parent[rows]] <= ts[rows]]
    # the first row that outlasts each row: the one after its subtree of nearest links
    level = _levels(nearest)
    by_level = np.argsort(level, kind="stable").astype(at)
    bounds = np.searchsorted(level[by_level], np.arange(int(level.max()) + 2))
    del level
    size = np.ones(n, dtype=at)
    for d in range(len(bounds) - 2, 0, -1):
        rows = by_level[bounds[d]:bounds[d + 1]]
        np.add.at(size, nearest[rows], size[rows])
    del by_level, nearest
    outlast = np.arange(n, dtype=at) + size
    del size
    closed_early = np.flatnonzero(outlast < after)
    closed_early = closed_early[ts[outlast[closed_early]] < end[closed_early]]
    slow_rows = np.zeros(n, dtype=bool)
    overlaps = op_overlaps = 0
    if len(closed_early):
        stop = np.empty(len(closed_early), dtype=np.int64)  # the first row that starts at or after its end
        for f in np.unique(first[closed_early]).tolist():
            mine = first[closed_early] == f
            stop[mine] = f + np.searchsorted(ts[f:after[f]], end[closed_early[mine]], side="left")
        start = outlast[closed_early]
        work = np.bincount(track_index[closed_early], weights=stop - start, minlength=len(starts))
        heavy = work > OVERLAP_WORK * (np.append(starts[1:], n) - starts) + OVERLAP_SLACK
        if heavy.any():
            slow_rows = heavy[track_index]
        counted = ~slow_rows[closed_early]
        overlaps, op_overlaps = _count_later_ends(closed_early[counted], start[counted], stop[counted], end, is_op)
    nester.overlap_count += overlaps
    nester.op_overlap_count += op_overlaps
    if slow_rows.any():
        rows = np.flatnonzero(slow_rows)
        nester.feed_arrays(track[rows], event_id[rows], ts[rows], end[rows], frame[rows], frame_texts,
                           call_stack[rows], has_call_stack[rows], is_op[rows], fresh=True)
        keep = np.flatnonzero(~slow_rows)
        if not len(keep):
            return
        remap = np.full(n, -1, dtype=at)
        remap[keep] = np.arange(len(keep), dtype=at)
        parent = np.where(parent[keep] >= 0, remap[np.maximum(parent[keep], 0)], -1)
        event_id, ts, end, is_op = event_id[keep], ts[keep], end[keep], is_op[keep]
        call_stack, has_call_stack = call_stack[keep], has_call_stack[keep]
        frame = frame[keep]
        n = len(keep)
    del first, after, outlast, track_index
    depth = _levels(parent)
    by_level = np.argsort(depth, kind="stable").astype(at)
    # Stacks and ops, level by level: a parent's level is done before its children's.
    node = np.zeros(n, dtype=np.int64)  # the Python stack an open event passes to its children
    op = np.full(n, -1, dtype=ids)  # innermost op, the event included
    top = np.full(n, -1, dtype=ids)
    parent_op = np.full(n, -1, dtype=ids)
    frames = frame >= 0
    sorted_depth = depth[by_level]
    levels = np.searchsorted(sorted_depth, np.arange(int(sorted_depth[-1]) + 2))
    push = nester.stacks.push
    for d in range(len(levels) - 1):
        rows = by_level[levels[d]:levels[d + 1]]
        if not len(rows):
            continue
        if d:
            p = parent[rows]
            p_node, p_op, p_top = node[p], op[p], top[p]
            parent_op[rows] = p_op
        else:
            p_node = np.zeros(len(rows), dtype=np.int64)
            p_op = p_top = np.full(len(rows), -1, dtype=ids)
        mine = is_op[rows]
        ids = event_id[rows]
        op[rows] = np.where(mine, ids, p_op)
        top[rows] = np.where(p_top >= 0, p_top, np.where(mine, ids, -1))
        node[rows] = p_node
        with_frame = frames[rows]
        if with_frame.any():  # each distinct (frame, calling stack) pair once
            callers, caller = np.unique(p_node[with_frame], return_inverse=True)
            pairs, inverse = np.unique(frame[rows[with_frame]] * len(callers) + caller.ravel(), return_inverse=True)
            made = [push(frame_texts[f], pn) for f, pn in
                    zip((pairs // len(callers)).tolist(), callers[pairs % len(callers)].tolist())]
            node[rows[with_frame]] = np.array(made, dtype=np.int64)[inverse.ravel()]
    has_parent = parent >= 0
    nester.parent[event_id] = np.where(has_parent, event_id[np.maximum(parent, 0)], -1)
    nester.depth[event_id] = depth
    nester.stack[event_id] = np.where(frames | ~has_call_stack, node, call_stack)
    nester.cpu_op[event_id] = op
    nester.parent_op[event_id] = parent_op
    nester.top_op[event_id] = top
    np.add.at(nester.child_ns, event_id[parent[has_parent]], end[has_parent] - ts[has_parent])
