"""One trace file -> one published run: read, convert in parallel, nest, merge, publish."""

from __future__ import annotations

import functools
import json
import multiprocessing
import os
import re
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .. import reference
from .._version import __version__
from ..catalog import arrow_schemas, reference_sql, schema_stamp
from ..errors import InputError, NotATrace, StoreError
from ..store import LAYOUT_VERSION, Store, content_run_id, legacy_run_id, parquet_writer, write_parquet
from .convert import ChunkConverter, ChunkResult, convert_chunk, part_name, read_part, repeat_text
from .frames import StackInterner, normalize, split_frame
from .nesting import Nester, nest_vectorized
from .reader import ChunkedEvents, NotParseable, RawSource, TraceLayout
from .repair import Fault
from .steps import assign_steps, check_marker, find_windows, step_windows_table
from .streaming import Cut, StreamingEvents

# Below this many raw bytes, worker processes cost more than they save.
PARALLEL_MIN_BYTES = 24 << 20
# Event categories (device, op, step marker, known) and trace phases (known, nesting) are
# traceduck's vocabulary in sql/reference (reference.py), shared with the views and export.
MERGE_MEMORY = "256MB"  # DuckDB's share while merging; it spills to disk beyond this
NEST_BATCH = 1 << 18
_RANK_IN_NAME = re.compile(r"(?:rank|worker)[-_]?(\d+)", re.I)
LONG_NAME_CHARS = 1 << 16
NO_EVENTS = "traceEvents holds no events"
# Slices on one track that overlap without nesting: a warning of the run (its count also in
# runs.overlap_count), common in real traces
OVERLAPS = "partially overlapping event pairs"
BASE_BEYOND = "baseTimeNanoseconds that puts times beyond the int64 nanosecond range (ignored)"
# Positions of skipped traceEvents items listed in the warning's key, at most.
LISTED_POSITIONS = 20

# (raw bytes read, events converted, stage): stage "parsing" while the file is read, then "sorting",
# "nesting", "writing", and "done" with the run's event count.
Progress = Callable[[int, int, str], None]


class Stopwatch:
    """Seconds spent per ingest stage (shown by `traceduck ingest --timings`)."""

    def __init__(self) -> None:
        self.stages: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.stages[stage] = self.stages.get(stage, 0.0) + now - self._last
        self._last = now


@dataclass
class IngestResult:
    """What ingesting one file did."""

    run_id: str
    name: str
    path: Path
    events: int
    seconds: float
    skipped: bool  # the same bytes were already in the store
    salvaged: bool = False  # the trace was cut (truncated or damaged); the events before the cut were kept
    overlap_count: int = 0
    op_overlap_count: int = 0
    warnings: dict | None = None
    timings: dict | None = None
    not_a_trace: str | None = None  # why the file (found in a directory) was skipped: it is not a trace


def worker_context() -> multiprocessing.context.BaseContext:
    """How worker processes start: from a fork server where there is one (POSIX), else spawned.

    Not forked from the caller: by the time it ingests, the caller may run DuckDB's or Arrow's
    thread pools (a notebook that queried first, the store's own Parquet reads), and a fork of a
    process with threads can deadlock on a lock one of them held. The server is a fresh process
    that imports the ingester once and forks each worker from there. A worker started that way
    first imports the caller's main script, as with spawn; a script without the
    `if __name__ == "__main__":` guard would ingest again in every worker, so its workers are
    forked, as before."""
    methods = multiprocessing.get_all_start_methods()
    if "forkserver" not in methods:
        return multiprocessing.get_context("spawn" if "fork" not in methods else "fork")
    if not _main_reimport_is_safe():
        return multiprocessing.get_context("fork")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([__name__])
    return ctx


_MAIN_GUARD = re.compile(r"""__name__\s*==\s*['"]__main__['"]""")


def _main_reimport_is_safe() -> bool:
    """Whether a worker may import the main module (multiprocessing does, for spawn and forkserver):
    none to import (a notebook, the REPL, `python -c`), a package's `__main__` (skipped), or a
    script whose top level is guarded."""
    main = sys.modules.get("__main__")
    spec_name = getattr(getattr(main, "__spec__", None), "name", None) or ""
    if spec_name == "__main__" or spec_name.endswith(".__main__"):
        return True
    path = getattr(main, "__file__", None)
    return path is None or _has_main_guard(path)


@functools.lru_cache(maxsize=8)
def _has_main_guard(path: str) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return _MAIN_GUARD.search(f.read(1 << 20)) is not None
    except OSError:
        return False


def start_workers() -> None:
    """Start the fork server now, so that its imports run while this process hashes and reads the
    file, not after, when the first chunk waits for a worker."""
    if worker_context().get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def run_name_for(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".json"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name


def default_names(files: list[Path]) -> dict[Path, list[str]]:
    """Run names for files ingested together, each file's in order of preference: the file name
    without .json/.json.gz; when two files share it, with the parent directory prefixed
    (`vllm_decode_full/graph_execution`), then the one above, until they differ; as a last
    resort the whole path with the file's extension. `ingest_file` takes the first that no other
    run in the store has."""
    choices = {}
    for f in files:
        path = Path(f).absolute()
        dirs = path.parent.parts[1:] if path.anchor else path.parent.parts
        stem = run_name_for(path)
        choices[f] = ["/".join(dirs[len(dirs) - k:] + (stem,)) for k in range(len(dirs) + 1)] + \
                     ["/".join(dirs + (path.name,))]
    level = dict.fromkeys(files, 0)
    while True:
        sharing = Counter(choices[f][level[f]] for f in files)
        bump = [f for f in files if sharing[choices[f][level[f]]] > 1 and level[f] + 1 < len(choices[f])]
        if not bump:
            return {f: choices[f][level[f]:] for f in files}
        for f in bump:
            level[f] += 1


def _pick_name(name: str | list[str] | None, path: Path, run_ids: set[str], taken: dict[str, set[str]] | None
               ) -> str:
    """The name given, else the first candidate (default: the file name) that no other run (not
    one of `run_ids`, this file's) has."""
    if isinstance(name, str):
        return name
    candidates = name or [run_name_for(path)]
    for c in candidates:
        if not (taken or {}).get(c, set()) - run_ids:
            return c
    return candidates[-1]


def ingest_file(path: Path, store: Store, name: str | list[str] | None = None, labels: dict[str, str] | None = None,
                force: bool = False, jobs: int | None = None, progress: Progress | None = None,
                salvage: bool = False, taken: dict[str, set[str]] | None = None,
                step_marker: str | None = None) -> IngestResult:
    """Ingest one trace file into the store and publish it as a run. With `salvage`, a truncated
    or damaged trace keeps its complete events before the cut instead of failing. `step_marker`:
    a regular expression of the annotations that mark the steps (see steps.py; default: the first
    marker family present). `name` is the
    run's name, or names to choose from (see `default_names`): the first that no other run has in
    `taken` (name -> run ids)."""
    started = time.perf_counter()
    watch = Stopwatch()
    path = Path(path).absolute()
    if not path.exists():
        raise InputError(f"{path}: no such file", "Check the path")
    if not path.is_file():
        raise InputError(f"{path}: not a regular file")
    jobs = jobs or default_jobs()
    step_marker = check_marker(step_marker)
    if jobs > 1 and path.stat().st_size >= PARALLEL_MIN_BYTES:
        start_workers()
    try:
        run_id = content_run_id(path)
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})") from None
    # the same file ingested by an older version, under its shorter id: the same run (skipped),
    # or with force replaced by this one under the new id
    legacy = legacy_run_id(run_id)
    old = legacy if legacy != run_id and store.has_run(legacy) else None
    name = _pick_name(name, path, {run_id, old or run_id}, taken)
    watch.lap("hash")
    if not force and (store.has_run(run_id) or old):
        return IngestResult(run_id if store.has_run(run_id) else old, name, path, 0, time.perf_counter() - started,
                            skipped=True)
    tmp = store.new_tmp_dir(run_id)
    try:
        parts = tmp / "parts"
        parts.mkdir()
        read_warnings: Counter = Counter()
        cut = None
        try:
            layout, results, cut = _convert_fast(path, parts, jobs, progress)
        except NotParseable:
            store.discard(parts)
            parts.mkdir()
            layout, results, read_warnings, cut = _convert_streaming(path, parts, progress, salvage)
        if cut is not None and not salvage:
            count = sum(r.count for r in results)
            raise InputError(f"{path}: the gzip stream ends early (after its JSON text, at byte {cut.offset:,} of the "
                             f"decompressed text, after {count:,} complete events)",
                             f"Re-run with --salvage to keep the {count:,} complete events")
        read_warnings.update(layout.warnings)
        read_warnings.update(_item_warnings(path, results))
        if not results:  # an empty traceEvents: every table is still written, empty
            results.append(ChunkConverter(0, exact=True).write(parts))
        watch.lap("parse+convert")
        try:
            count, overlaps, op_overlaps, warnings = _merge(path, tmp, parts, layout, results, run_id, jobs, watch,
                                                            progress, step_marker)
        except duckdb.OutOfMemoryException:  # DuckDB's message is many lines of tuning advice
            raise InputError(f"{path}: the merge of its events ran out of memory ({MERGE_MEMORY}, spilling included)",
                             "Its values are too large to sort here (names or args of many MB); shorten them, "
                             "or free disk space for the spill if that ran out") from None
        warnings.update(read_warnings)
        if overlaps:  # in the result as in the run's row
            warnings[OVERLAPS] = overlaps
        if cut is not None:
            warnings[f"salvaged: {cut.what} at byte {cut.offset:,}; complete events kept"] = count
        seconds = time.perf_counter() - started
        _write_run_row(tmp, path, run_id, name, labels or {}, layout, count, overlaps, dict(warnings), seconds,
                       salvaged=cut is not None, op_overlaps=op_overlaps)
        store.discard(parts)
        (tmp / schema_stamp()).touch()
        published = store.publish(tmp, run_id, replace=force)
    except OSError as e:  # a write under tmp/ failed (no space, an I/O error): nothing was published
        store.discard(tmp)
        if e.filename and Path(e.filename) == path:
            raise InputError(f"{path}: cannot read ({e.strerror})") from None
        raise store.write_error(e) from None
    except BaseException:
        store.discard(tmp)
        raise
    if old is not None:
        try:
            store.remove_runs([old])
        except StoreError:  # removed meanwhile by another process
            pass
    watch.lap("publish")
    if progress:
        progress(path.stat().st_size, count, "done")
    return IngestResult(run_id, name, path, count, time.perf_counter() - started, skipped=not published,
                        salvaged=cut is not None, overlap_count=overlaps, op_overlap_count=op_overlaps,
                        warnings=dict(warnings), timings=watch.stages)


def _convert_fast(path: Path, parts: Path, jobs: int, progress: Progress | None
                  ) -> tuple[TraceLayout, list[ChunkResult], Cut | None]:
    """Split with the fast splitter; convert chunks in worker processes for big files. The cut
    is set when a gzip stream ends early right after complete JSON text."""
    with RawSource(path) as src:
        layout, results = _convert_chunks(src, path, parts, jobs, progress)
        cut = Cut("the gzip stream ends early", src.offset, truncated=True) if src.ended_early else None
        return layout, results, cut


def _convert_chunks(src: RawSource, path: Path, parts: Path, jobs: int, progress: Progress | None
                    ) -> tuple[TraceLayout, list[ChunkResult]]:
    reader = ChunkedEvents(src)
    layout = reader.open()
    size = path.stat().st_size
    if jobs <= 1 or size < PARALLEL_MIN_BYTES:
        results = []
        for k, text in enumerate(reader.chunks()):
            results.append(_convert_or_fallback(text, k, str(parts)))
            if progress:
                progress(src.raw_bytes_read, sum(r.count for r in results), "parsing")
        return layout, results
    ctx = worker_context()
    results = []
    converted = 0
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        pending: set[Future] = set()
        for k, text in enumerate(reader.chunks()):
            pending.add(pool.submit(_convert_or_fallback, text, k, str(parts)))
            while len(pending) >= jobs * 2:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in done:
                    r = f.result()
                    results.append(r)
                    converted += r.count
            if progress:
                progress(src.raw_bytes_read, converted, "parsing")
        for f in pending:
            results.append(f.result())
    results.sort(key=lambda r: r.chunk)
    return layout, results


def _convert_or_fallback(text: bytes, chunk: int, parts: str) -> ChunkResult:
    """Convert a chunk; any parse failure sends the whole file to the streaming parser, which
    either reads it or reports where it breaks."""
    try:
        return convert_chunk(text, chunk, parts)
    except (ValueError, RecursionError, OverflowError, Fault, pa.ArrowException) as e:
        # JSON and UTF-8 errors are ValueErrors; a Fault is damage the chunk repair could not fix
        raise NotParseable(str(e)) from None


def _convert_streaming(path: Path, parts: Path, progress: Progress | None, salvage: bool
                       ) -> tuple[TraceLayout, list[ChunkResult], Counter, Cut | None]:
    """The exact streaming parser (repairs damage; with salvage, stops at a cut)."""
    with RawSource(path) as src:
        stream = StreamingEvents(src, salvage=salvage)
        results = []
        done = 0
        for k, batch in enumerate(stream.batches()):
            conv = ChunkConverter(k, exact=True)
            try:
                conv.add(batch)
                results.append(conv.write(parts))
            except (ValueError, RecursionError, OverflowError, TypeError, pa.ArrowException) as e:
                raise InputError(f"{path}: cannot convert traceEvents items {done:,} to {done + len(batch) - 1:,} "
                                 f"({type(e).__name__}: {e})", "Re-run with --debug and report it") from None
            done += len(batch)
            if progress:
                progress(src.raw_bytes_read, stream.count, "parsing")
        return stream.layout, results, stream.warnings, stream.cut


def _item_warnings(path: Path, results: list[ChunkResult]) -> Counter:
    """Warnings about the traceEvents list as a whole: no events, or items that are not objects
    (skipped, as trace viewers skip them; their positions among the items are listed, the first
    LISTED_POSITIONS of them, in the warning's key). A list with items but no object at all is
    not a trace."""
    skipped: list[int] = []
    items = 0
    for r in results:
        skipped.extend(items + k for k in r.skipped)
        items += r.items
    if skipped and len(skipped) == items:
        raise NotATrace(path, f"none of the {items:,} items of traceEvents is an object", f"{NotATrace.HINT} of objects")
    if not items:
        return Counter({NO_EVENTS: 1})
    if not skipped:
        return Counter()
    listed = ", ".join(str(k) for k in skipped[:LISTED_POSITIONS])
    more = f" (the first {LISTED_POSITIONS})" if len(skipped) > LISTED_POSITIONS else ""
    return Counter({f"traceEvents items that are not objects (skipped), at positions {listed}{more}": len(skipped)})


def _int_or_none(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and -(1 << 63) <= v < (1 << 63) else None


def _merge(path: Path, tmp: Path, parts: Path, layout: TraceLayout, results: list[ChunkResult],
           run_id: str, jobs: int, watch: Stopwatch, progress: Progress | None = None,
           step_marker: str | None = None) -> tuple[int, int, int, dict]:
    """Give events global ids, nest them, derive stacks, and write the run's final tables; `progress`
    hears of each stage as it starts."""
    offsets = []
    total = 0
    warnings: Counter = Counter()
    stacks = StackInterner()
    for r in results:
        offsets.append(total)
        total += r.count
        warnings.update(r.warnings)
        stacks.nodes.update(r.stacks)
    base_ns = _int_or_none(layout.metadata.get("baseTimeNanoseconds")) or 0

    def stage(name: str) -> None:
        if progress:
            progress(path.stat().st_size, total, name)

    stage("sorting")
    nester = Nester(total, stacks)
    con = duckdb.connect(config={"threads": max(1, jobs), "memory_limit": MERGE_MEMORY,
                                 "temp_directory": str(tmp / "spill")})
    try:
        con.execute(reference_sql())  # the name macros, and the reference tables to fill
        reference.fill(con, ["event_categories"])
        # Sort the timeline events by track and time, in DuckDB; nest them in batches.
        con.execute("CREATE TEMP TABLE p AS SELECT ?::BIGINT[] AS offsets, ?::VARCHAR[] AS nesting_phases",
                    [offsets, list(reference.NESTING_PHASES)])
        found, like_events = _event_warnings(con, parts)
        if total and not like_events:
            items = sum(r.items for r in results)
            which = "the one item of traceEvents is not" if items == 1 else f"none of the {items:,} items of traceEvents is"
            raise NotATrace(path, f"{which} an event; {EVENT_LIKE}", f"{NotATrace.HINT} of events")
        warnings.update(found)
        if base_ns and not _fits_with_base(con, parts, base_ns):
            warnings[BASE_BEYOND] += 1  # times stay relative (base_time_ns 0), never wrap
            base_ns = 0
        windows = _step_windows(con, parts, base_ns, step_marker)
        reader = con.sql(
            f"""SELECT hash(coalesce(c.is_device, false), x.pid, x.tid) AS track,
                       p.offsets[x.chunk + 1] + x.local_idx AS event_id, x.ts_ns,
                       x.ts_ns + greatest(coalesce(x.dur_ns, 0), 0) AS end_ns,
                       CASE WHEN c.kind = 'python' THEN x.name END AS pyframe, x.call_stack_id,
                       coalesce(c.is_op AND NOT coalesce(x.name LIKE c.annotation_name_like, false), false) AS is_op
                FROM read_parquet('{_q(str(parts / "events-*.parquet"))}') x
                LEFT JOIN event_categories c ON c.category = x.category CROSS JOIN p
                WHERE x.ts_ns IS NOT NULL AND list_contains(p.nesting_phases, x.phase)
                ORDER BY track, x.ts_ns, end_ns DESC, event_id"""
        ).to_arrow_reader(NEST_BATCH)
        watch.lap("merge: sort for nesting")
        stage("nesting")
        # args and shapes need no nesting: write them in a thread (Parquet work releases the GIL)
        # while this thread nests events.
        with ThreadPoolExecutor(max_workers=1) as pool:
            side = pool.submit(lambda: [_write_parts(tmp, parts, t, results, offsets, run_id) for t in ("args", "shapes")])
            _nest_tracks(nester, reader)
            del reader
            watch.lap("merge: nesting (args and shapes written meanwhile)")
            stage("writing")
            _write_events(tmp, parts, results, offsets, run_id, base_ns, nester, windows)
            _write_step_windows(tmp, run_id, windows)
            watch.lap("merge: write events")
            side.result()
            watch.lap("merge: wait for args and shapes")
        used = np.unique(nester.stack)
        _write_stacks(tmp, run_id, stacks, used[used != 0].tolist())
        watch.lap("merge: write stacks")
    finally:
        con.close()
        shutil.rmtree(tmp / "spill", ignore_errors=True)
    return total, nester.overlap_count, nester.op_overlap_count, warnings


# Rows nested column-wise at once (whole tracks; about 100 bytes a row while it runs): all of a run's
# rows when it has at most this many; else tracks of at most NEST_BATCH rows, and a longer track row by
# row as its batches arrive, so that the merge of a big trace holds no more than before.
NEST_VECTOR_ROWS = 1 << 21


class _FrameCodes:
    """Python frames as integer codes: normalized frame text -> code, for the whole merge."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}
        self.texts: list[str] = []

    def encode(self, column: pa.Array) -> np.ndarray:
        encoded = pc.dictionary_encode(column)
        lookup = np.empty(len(encoded.dictionary) + 1, dtype=np.int64)
        lookup[-1] = -1  # null: not a Python frame
        for k, text in enumerate(encoded.dictionary.to_pylist()):
            text = normalize(text)
            code = self.codes.get(text)
            if code is None:
                code = self.codes[text] = len(self.texts)
                self.texts.append(text)
            lookup[k] = code
        return lookup[pc.fill_null(encoded.indices, -1).to_numpy()]


_NEST_COLUMNS = ("track", "event_id", "ts_ns", "end_ns", "frame", "call_stack_id", "has_call_stack", "is_op")


def _nest_tracks(nester: Nester, reader: pa.RecordBatchReader) -> None:
    """Nest the sorted rows: whole tracks column-wise, several at once (see NEST_VECTOR_ROWS); a
    longer track row by row (`Nester.feed`) as its batches arrive."""
    longest = NEST_VECTOR_ROWS if len(nester.parent) <= NEST_VECTOR_ROWS else NEST_BATCH
    frames = _FrameCodes()
    pending: list[dict[str, np.ndarray]] = []  # pieces of one track each, whole tracks but the last
    pending_rows = 0
    last_rows = 0  # rows of the last track in pending
    streaming = None  # the track being nested row by row

    def flush(pieces: list[dict[str, np.ndarray]]) -> None:
        if pieces:
            cols = {k: np.concatenate([p[k] for p in pieces]) for k in _NEST_COLUMNS}
            pieces.clear()  # the batches' own arrays can go
            nest_vectorized(nester, cols["track"], cols["event_id"], cols["ts_ns"], cols["end_ns"], cols["frame"],
                            frames.texts, cols["call_stack_id"], cols["has_call_stack"], cols["is_op"])

    def feed(piece: dict[str, np.ndarray], fresh: bool = False) -> None:
        nester.feed_arrays(*(piece[k] for k in _NEST_COLUMNS[:5]), frames.texts,
                           *(piece[k] for k in _NEST_COLUMNS[5:]), fresh=fresh)

    for batch in reader:
        if not batch.num_rows:
            continue
        stacks = batch.column("call_stack_id")
        cols = {"track": batch.column("track").to_numpy(), "event_id": batch.column("event_id").to_numpy(),
                "ts_ns": batch.column("ts_ns").to_numpy(), "end_ns": batch.column("end_ns").to_numpy(),
                "frame": frames.encode(batch.column("pyframe")),
                "call_stack_id": pc.fill_null(stacks, 0).to_numpy(),
                "has_call_stack": pc.is_valid(stacks).to_numpy(zero_copy_only=False),
                "is_op": batch.column("is_op").to_numpy(zero_copy_only=False)}
        track = cols["track"]
        cuts = [0, *(np.flatnonzero(track[1:] != track[:-1]) + 1).tolist(), len(track)]
        for a, b in zip(cuts[:-1], cuts[1:]):
            piece = {k: v[a:b] for k, v in cols.items()}
            t = int(track[a])
            if streaming is not None:
                if t == streaming:
                    feed(piece)
                    continue
                streaming = None
            if pending and int(pending[-1]["track"][0]) != t:  # the last pending track is whole
                if pending_rows >= NEST_BATCH:
                    flush(pending)
                    pending_rows = 0
                last_rows = 0
            pending.append(piece)
            pending_rows += b - a
            last_rows += b - a
            if last_rows > longest:  # too long for column-wise: row by row from here on
                own = [p for p in pending if int(p["track"][0]) == t]
                flush([p for p in pending if int(p["track"][0]) != t])
                pending, pending_rows, last_rows = [], 0, 0
                for k, p in enumerate(own):
                    feed(p, fresh=k == 0)
                streaming = t
    flush(pending)


# What makes a traceEvents object an event, for telling a trace from other JSON: a list of objects
# none of which is like this is not a trace
EVENT_LIKE = "an event has ph, or name and ts"


def _event_warnings(con: duckdb.DuckDBPyConnection, parts: Path) -> tuple[Counter, int]:
    """Counts of events with missing or unexpected core fields, and how many events look like
    events (EVENT_LIKE; one scan of the parts)."""
    row = con.execute(
        f"""SELECT count(*) FILTER (phase IS NULL AND (extra IS NULL OR json_extract(extra, '$.ph') IS NULL)),
                   count(*) FILTER (NOT list_contains(?::VARCHAR[], phase)),
                   count(*) FILTER (category IS NOT NULL AND NOT list_contains(?::VARCHAR[], category)),
                   count(*) FILTER (ts_ns IS NULL AND phase IS DISTINCT FROM 'M'
                                    AND (extra IS NULL OR json_extract(extra, '$.ts') IS NULL)),
                   count(*) FILTER (phase = 'X' AND dur_ns IS NULL
                                    AND (extra IS NULL OR json_extract(extra, '$.dur') IS NULL)),
                   count(*) FILTER (strlen(name) > ?),
                   count(*) FILTER (phase IS NOT NULL OR (extra IS NOT NULL AND json_extract(extra, '$.ph') IS NOT NULL)
                                    OR (name IS NOT NULL AND (ts_ns IS NOT NULL OR (extra IS NOT NULL
                                                                  AND json_extract(extra, '$.ts') IS NOT NULL))))
            FROM read_parquet('{_q(str(parts / "events-*.parquet"))}')""",
        [list(reference.KNOWN_PHASES), list(reference.KNOWN_CATEGORIES), LONG_NAME_CHARS]).fetchone()
    kinds = ("event without ph", "unknown phase (ph)", "unknown category (cat)", "event without ts (not metadata)",
             "complete event (X) without dur", f"name longer than {LONG_NAME_CHARS:,} bytes")
    return Counter({k: n for k, n in zip(kinds, row) if n}), row[-1]


def _masked(values: np.ndarray, missing: np.ndarray, typ: pa.DataType) -> pa.Array:
    return pa.array(values.astype(typ.to_pandas_dtype(), copy=False), typ, mask=missing)


def _fits_with_base(con: duckdb.DuckDBPyConnection, parts: Path, base_ns: int) -> bool:
    """Whether every event's start and end (ts + dur, which the views compute) stay within int64
    nanoseconds once the trace's base time is added (each fits without it: see convert.py)."""
    lo, hi = con.execute(
        f"""SELECT min(ts_ns::HUGEINT + least(coalesce(dur_ns, 0), 0)), max(ts_ns::HUGEINT + greatest(coalesce(dur_ns, 0), 0))
            FROM read_parquet('{_q(str(parts / "events-*.parquet"))}')""").fetchone()
    return lo is None or (-(1 << 63) <= lo + base_ns and hi + base_ns < (1 << 63))


def _step_windows(con: duckdb.DuckDBPyConnection, parts: Path, base_ns: int, marker: str | None
                  ) -> dict[str, np.ndarray]:
    """The run's step windows, by start (see steps.py): the annotations of `marker`, else of the
    first marker family present."""
    source = (f"""SELECT p.offsets[x.chunk + 1] + x.local_idx AS event_id, x.ts_ns + {int(base_ns)} AS ts_ns,
                         x.dur_ns, x.name, x.category, x.phase
                  FROM read_parquet('{_q(str(parts / "events-*.parquet"))}') x, p""")
    return find_windows(con, source, marker)[0]


def _write_step_windows(tmp: Path, run_id: str, windows: dict[str, np.ndarray]) -> None:
    write_parquet(step_windows_table(run_id, windows), tmp / "step_windows.parquet", compression="zstd")


def _write_events(tmp: Path, parts: Path, results: list[ChunkResult], offsets: list[int], run_id: str,
                  base_ns: int, nester: Nester, windows: dict[str, np.ndarray]) -> None:
    """events.parquet: the parts in file order, with global ids, absolute times and nesting."""
    schema = arrow_schemas()["events"]
    device = pa.array(list(reference.DEVICE_CATEGORIES))
    with parquet_writer(tmp / "events.parquet", schema) as writer, ThreadPoolExecutor(max_workers=1) as reader:
        # the next part is read while this one is written (both release the GIL)
        def read(r: ChunkResult) -> pa.Table:
            return pq.read_table(parts / f"events-{r.chunk:06d}.parquet")

        ahead = reader.submit(read, results[0]) if results else None
        for k, (r, off) in enumerate(zip(results, offsets)):
            part = ahead.result()
            ahead = reader.submit(read, results[k + 1]) if k + 1 < len(results) else None
            n = part.num_rows
            sl = slice(off, off + n)
            parent = nester.parent[sl]
            depth = nester.depth[sl]
            stack = nester.stack[sl]
            cpu_op = nester.cpu_op[sl]
            parent_op = nester.parent_op[sl]
            top_op = nester.top_op[sl]
            ids = np.arange(off, off + n, dtype=np.int64)
            call_stack = part.column("call_stack_id")
            stack_col = pc.coalesce(call_stack, _masked(stack, stack == 0, pa.int64()))
            ts_abs = pc.add(part.column("ts_ns"), pa.scalar(base_ns, pa.int64()))
            on_device = pc.is_in(pc.fill_null(part.column("category"), ""), value_set=device)
            ts_np = pc.fill_null(ts_abs, 0).to_numpy()
            cpu_timed = (pc.is_valid(ts_abs).to_numpy(zero_copy_only=False)
                         & ~on_device.to_numpy(zero_copy_only=False))
            step, no_step = assign_steps(ts_np, cpu_timed, windows)
            dur = part.column("dur_ns")
            self_dur = np.maximum(pc.fill_null(dur, 0).to_numpy() - nester.child_ns[sl], 0)
            no_self = ~pc.is_valid(dur).to_numpy(zero_copy_only=False) | (depth < 0)
            cols = {
                "run_id": repeat_text(run_id, n),
                "event_id": pa.array(ids),
                "ts_ns": ts_abs,
                "self_dur_ns": _masked(self_dur, no_self, pa.int64()),
                "step": _masked(step, no_step, pa.int64()),
                "parent_id": _masked(parent, parent < 0, pa.int64()),
                "depth": _masked(depth, depth < 0, pa.int32()),
                "on_device": on_device,
                "stack_id": stack_col,
                "cpu_op_id": _masked(cpu_op, cpu_op < 0, pa.int64()),
                "parent_op_id": _masked(parent_op, parent_op < 0, pa.int64()),
                "top_op_id": _masked(top_op, top_op < 0, pa.int64()),
                "is_cpu_op": pa.array(cpu_op == ids),
                "is_top_level_op": pa.array(top_op == ids),
            }
            arrays = [cols[f.name] if f.name in cols else part.column(f.name) for f in schema]
            writer.write_table(pa.Table.from_arrays(arrays, schema=schema))


def _write_parts(tmp: Path, parts: Path, table: str, results: list[ChunkResult], offsets: list[int],
                run_id: str) -> None:
    """A run table from its parts: event ids made global, run_id added, in event order."""
    schema = arrow_schemas()[table]
    with parquet_writer(tmp / f"{table}.parquet", schema) as writer:
        for r, off in zip(results, offsets):
            part = read_part(parts / part_name(table, r.chunk))
            n = part.num_rows
            cols = {
                "run_id": repeat_text(run_id, n),
                "event_id": pc.add(part.column("local_idx").cast(pa.int64()), pa.scalar(off, pa.int64())),
            }
            arrays = [cols[f.name] if f.name in cols else part.column(f.name) for f in schema]
            writer.write_table(pa.Table.from_arrays(arrays, schema=schema))


def _write_stacks(tmp: Path, run_id: str, stacks: StackInterner, used: list[int]) -> None:
    wanted = set(used)
    wanted.update(stacks.nodes)  # Call stack args: every interned stack is referenced by some event
    rows = {"run_id": [], "stack_id": [], "frame_index": [], "frame": [], "file": [], "line": [], "function": []}
    for sid in sorted(wanted):
        for k, frame in enumerate(stacks.frames(sid)):
            file, line, func = split_frame(frame)
            rows["run_id"].append(run_id)
            rows["stack_id"].append(sid)
            rows["frame_index"].append(k)
            rows["frame"].append(frame)
            rows["file"].append(file)
            rows["line"].append(line)
            rows["function"].append(func)
    schema = arrow_schemas()["stacks"]
    write_parquet(pa.Table.from_pydict(rows, schema=schema), tmp / "stacks.parquet", compression="zstd")


def _rank_from(layout: TraceLayout, path: Path) -> tuple[int | None, int | None]:
    info = layout.metadata.get("distributedInfo")
    rank = world = None
    if isinstance(info, dict):
        rank = _int_or_none(info.get("rank"))
        world = _int_or_none(info.get("world_size"))
    if rank is None:
        m = _RANK_IN_NAME.search(path.name)
        if m:
            rank = int(m.group(1))
    return rank, world


def _json_or_none(v: object) -> str | None:
    if v is None:
        return None
    return json.dumps(v, ensure_ascii=False, default=float)


def _write_run_row(tmp: Path, path: Path, run_id: str, name: str, labels: dict[str, str], layout: TraceLayout,
                   count: int, overlaps: int, warnings: dict, seconds: float, salvaged: bool = False,
                   op_overlaps: int = 0) -> None:
    con = duckdb.connect()
    try:
        start, end = con.execute(
            f"""SELECT min(ts_ns), max(ts_ns + greatest(coalesce(dur_ns, 0), 0))
                FROM read_parquet('{_q(str(tmp / 'events.parquet'))}') WHERE phase IS DISTINCT FROM 'M'"""
        ).fetchone()
    finally:
        con.close()
    meta = layout.metadata
    rank, world = _rank_from(layout, path)
    trace_name = meta.get("traceName")
    row = {
        "run_id": [run_id],
        "name": [name],
        "labels": [list(labels.items())],
        "source_path": [str(path)],
        "source_bytes": [path.stat().st_size],
        "event_count": [count],
        "rank": [rank],
        "world_size": [world],
        "base_time_ns": [0 if BASE_BEYOND in warnings else _int_or_none(meta.get("baseTimeNanoseconds")) or 0],
        "start_ns": [start],
        "end_ns": [end],
        "trace_format": [layout.trace_format],
        "schema_version": [_int_or_none(meta.get("schemaVersion"))],
        "trace_name": [trace_name if isinstance(trace_name, str) else None],
        "distributed_info": [_json_or_none(meta.get("distributedInfo"))],
        "device_properties": [_json_or_none(meta.get("deviceProperties"))],
        "metadata_json": [json.dumps(meta, ensure_ascii=False, default=float)],
        "events_key_index": [layout.events_key_index],
        "overlap_count": [overlaps],
        "op_overlap_count": [op_overlaps],
        "warnings": [sorted(warnings.items())],
        "salvaged": [salvaged],
        "ingested_at": [datetime.now(timezone.utc).replace(tzinfo=None)],
        "tool_version": [__version__],
        "layout_version": [LAYOUT_VERSION],
        "ingest_seconds": [seconds],
    }
    write_parquet(pa.Table.from_pydict(row, schema=arrow_schemas()["runs"]), tmp / "runs.parquet")


def _q(text: str) -> str:
    """A path inside a single-quoted SQL literal."""
    return text.replace("'", "''")
