"""The least CPU any ingest that keeps today's store must spend on a trace, step by step, each step
done the fastest way measured here (issue 16: is <= 0.5x `json.loads` reachable on this machine?).

Usage: python3 bench/floor.py TRACE.json [--repeat 2]

Every step runs in this one process on the whole trace and is timed in CPU seconds
(`time.process_time`, all threads). The steps are what a store with today's tables needs at the
least, whatever the design; they leave out everything ingest does besides (repairs, oddities,
warnings, Python stacks and ops, chunking, handing work between processes), so their sum is a
lower bound on ingest's CPU, and the sum over the machine's cores a lower bound on its wall time:

- read: the file's bytes into memory (from the page cache);
- run id: the hash of the bytes that names the run (re-ingesting the same bytes is a no-op);
- decode events: one typed `msgspec` decode of the whole file, each event's core keys typed and
  its args kept as raw JSON text (the fastest decoder measured: 0.2x `json.loads`);
- core columns: ph, cat, name, pid, tid, ts, dur into Arrow columns;
- decode args: the promoted keys (External id, correlation, ...) and the shape keys (Input Dims,
  Input type, Input Strides, Concrete Inputs) of every event's args, one typed decode of all of them;
- shapes: one row per op input, dims as an Arrow list column;
- nest: the timeline rows sorted by track and time (numpy), each row's parent by pointer jumping
  (nesting.nest_vectorized's first step), depths not included;
- write: the events table (core, promoted and nesting columns) and each event's args as one JSON
  text column (the smallest form that keeps every arg: no per-arg rows), and shapes, as Parquet
  with the store's settings.

`json.loads` (gc off) of the same bytes is measured beside it for the ratio.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec
import xxhash
import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from traceduck.ingester.convert import (  # noqa: E402
    _EXACT_FLOAT_LIMIT, _INT_US_LIMIT, PROMOTED, _Event, _id_column, _ns_column)
from traceduck.ingester.nesting import _previous_no_smaller  # noqa: E402


class _Trace(msgspec.Struct):
    traceEvents: list[_Event]


# the promoted columns (ingest's own list; the first spelling of each) and the shape keys, by field name
_PROMOTED_KEYS = {column: key for key, column in reversed(PROMOTED.items())}
_ARG_KEYS = {**_PROMOTED_KEYS, "dims": "Input Dims", "types": "Input type", "strides": "Input Strides",
             "concrete": "Concrete Inputs", "call_stack": "Call stack"}
_Args = msgspec.defstruct("_Args", [(field, Any, None) for field in _ARG_KEYS], rename=_ARG_KEYS)


_TRACE = msgspec.json.Decoder(_Trace)
_ARGS = msgspec.json.Decoder(list[_Args])
_PROMOTED = tuple(_PROMOTED_KEYS)


def steps(path: Path, out: Path) -> dict[str, float]:
    """CPU seconds of each step, in order."""
    cpu: dict[str, float] = {}
    t = time.process_time()

    def lap(name: str) -> None:
        nonlocal t
        now = time.process_time()
        cpu[name] = now - t
        t = now

    def untimed() -> None:  # freeing what a step made is left out (a worker could exit instead)
        nonlocal t
        t = time.process_time()

    data = path.read_bytes()
    lap("read")
    xxhash.xxh3_128_hexdigest(data)
    lap("run id (xxh3-128 of the bytes)")
    events = _TRACE.decode(data).traceEvents
    lap("decode events (typed, args raw)")
    del data
    untimed()
    n = len(events)
    cols = {
        "phase": pa.array([e.ph for e in events], pa.string()),
        "category": pa.array([e.cat for e in events], pa.string()),
        "name": pa.array([e.name for e in events], pa.string()),
    }
    cols["pid"], cols["pid_is_text"] = _id_column([e.pid for e in events])
    cols["tid"], cols["tid_is_text"] = _id_column([e.tid for e in events])
    cols["ts_ns"] = pa.array(_ns_column([e.ts for e in events], (_EXACT_FLOAT_LIMIT, _INT_US_LIMIT)), pa.int64())
    cols["dur_ns"] = pa.array(_ns_column([e.dur for e in events], (_EXACT_FLOAT_LIMIT, _INT_US_LIMIT)), pa.int64())
    raws = [e.args for e in events]
    lap("core columns")
    del events
    untimed()
    unset = msgspec.UNSET
    present = np.fromiter((r is not unset for r in raws), bool, n)
    texts = [bytes(r) if r is not unset else b"{}" for r in raws]
    # all args in one buffer for one typed decode, and in another (no separators) for the args text column
    joined = b"[" + b",".join(texts) + b"]"
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.fromiter(map(len, texts), np.int64, n), out=offsets[1:])
    args_text = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(b"".join(texts)),
                                                 pa.py_buffer(np.packbits(present, bitorder="little")))
    args = _ARGS.decode(joined)
    for k in _PROMOTED:
        cols[k] = pa.array([getattr(a, k) for a in args], pa.int64())
    lap("decode args (promoted and shape keys)")
    dims = [a.dims for a in args if a.dims is not None]
    owner = np.flatnonzero([a.dims is not None for a in args])
    types = [a.types for a in args if a.dims is not None]
    try:
        per_op = pa.array(dims, pa.list_(pa.list_(pa.int64())))
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # TensorList inputs: one level more, kept as empty dims here
        per_op = pa.array([[d if not d or d[0].__class__ is int else [] for d in ds] for ds in dims],
                          pa.list_(pa.list_(pa.int64())))
    counts = pa.compute.list_value_length(per_op).to_numpy(zero_copy_only=False)
    shapes = pa.table({"event_id": pa.array(np.repeat(owner, counts)),
                       "input_index": pa.array(np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts),
                                               pa.int32()),
                       "dims": per_op.flatten(),
                       "dtype_raw": pa.array(types, pa.list_(pa.string())).flatten()})
    lap("shapes")
    del args, dims, types, per_op, raws, texts
    untimed()
    ts = cols["ts_ns"].to_numpy(zero_copy_only=False)
    dur = np.nan_to_num(cols["dur_ns"].to_numpy(zero_copy_only=False)).astype(np.int64)
    phase = cols["phase"].to_numpy(zero_copy_only=False)
    timeline = np.flatnonzero((phase == "X") & ~np.isnan(ts.astype(np.float64)))
    track = pa.compute.dictionary_encode(
        pa.compute.binary_join_element_wise(cols["pid"], cols["tid"], "\x00")).indices.to_numpy()[timeline]
    start = ts[timeline].astype(np.int64)
    end = start + np.maximum(dur[timeline], 0)
    order = np.lexsort((-end, start, track))
    track, start, end = track[order], start[order], end[order]
    first = np.maximum.accumulate(np.where(np.r_[True, track[1:] != track[:-1]], np.arange(len(track)), 0))
    parent_row = _previous_no_smaller(end, first)
    parent = np.full(n, -1, np.int64)
    rows = timeline[order]
    parent[rows] = np.where(parent_row >= 0, rows[parent_row], -1)
    cols["parent_id"] = pa.array(parent, mask=parent < 0)
    lap("nest (sort, parents)")
    events_table = pa.table(cols)
    pq.write_table(events_table, out / "events.parquet", compression="zstd", compression_level=3,
                   column_encoding={"ts_ns": "DELTA_BINARY_PACKED"},
                   use_dictionary=[c for c in events_table.column_names if c != "ts_ns"])
    pq.write_table(pa.table({"args_json": args_text}), out / "args.parquet", compression="zstd",
                   compression_level=3, use_dictionary=False)
    pq.write_table(shapes, out / "shapes.parquet", compression="zstd", compression_level=3)
    lap("write (events, args as text, shapes)")
    return cpu


def json_loads_seconds(path: Path) -> float:
    data = path.read_bytes()
    gc.disable()
    t = time.perf_counter()
    json.loads(data)
    took = time.perf_counter() - t
    gc.enable()
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", type=Path)
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    cores = len(os.sched_getaffinity(0))
    best: dict[str, float] = {}
    loads = min(json_loads_seconds(a.trace) for _ in range(a.repeat))
    for _ in range(a.repeat):
        gc.disable()
        with tempfile.TemporaryDirectory() as d:
            run = steps(a.trace, Path(d))
        gc.enable()
        gc.collect()
        for k, v in run.items():
            best[k] = min(best.get(k, v), v)
    total = sum(best.values())
    print(f"{a.trace.name}: json.loads (gc off) {loads:.2f} s wall; floor steps, CPU s (best of {a.repeat}):")
    for k, v in best.items():
        print(f"  {k:40s} {v:6.2f}")
    print(f"  {'sum':40s} {total:6.2f}  = {total / loads:.2f}x json.loads")
    print(f"  {'sum over ' + str(cores) + ' cores (wall, at best)':40s} {total / cores:6.2f}  = "
          f"{total / cores / loads:.2f}x json.loads (goal 0.50x)")


if __name__ == "__main__":
    main()
