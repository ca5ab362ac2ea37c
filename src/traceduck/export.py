"""Writing a run back as a Chrome trace: the whole run (the proof that ingest dropped nothing), or
one window of it (a profiler step, a time range) that a trace viewer can open."""

from __future__ import annotations

import gzip
import itertools
import json
import math
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq

from .engine import Engine
from .errors import ExportError, InputError
from .folded import write_folded
from .store import Store, read_row_file, short_id
from .units import NS_PER

_BATCH = 65536
_JSON = msgspec.json.Encoder()
_EVENT_COLUMNS = ["event_id", "phase", "category", "name", "pid", "tid", "pid_is_text", "tid_is_text", "ts_ns",
                  "dur_ns", "extra"]
_ARG_COLUMNS = ["event_id", "key", "value_type", "int_value", "real_value", "string_value"]

# The events of a window that have a place on the timeline: every phase but those of `trace_phases`
# that are not (metadata and flows), unknown phases included.
_TIMELINE = ("coalesce(phase, '') NOT IN (SELECT phase FROM trace_phases WHERE NOT is_timeline) "
             "AND ts_ns IS NOT NULL")

# A step: its CPU events (`events.step`, any thread), the device work launched from them (matched
# by correlation through `launches`, so work that runs after the CPU window has ended is in), and
# device annotations (gpu_user_annotation) whose External id is that of a CPU event of the step.
_STEP_EVENTS = f"""
SELECT event_id, phase, pid, tid, ts_ns, dur_ns FROM events
WHERE {_TIMELINE} AND (
  (NOT on_device AND step = $step)
  OR (on_device AND correlation IN (SELECT correlation FROM launches WHERE step = $step))
  OR (on_device AND correlation IS NULL
      AND external_id IN (SELECT external_id FROM events WHERE step = $step AND NOT on_device)))
"""

# A time window [start, end): every timeline event, CPU or device, that overlaps it.
_RANGE_EVENTS = f"""
SELECT event_id, phase, pid, tid, ts_ns, dur_ns FROM events
WHERE {_TIMELINE} AND ts_ns < $end_ns AND (ts_ns >= $start_ns OR ts_ns + coalesce(dur_ns, 0) > $start_ns)
"""

# What the picked events need to render: the flows (s/t/f) between them and the metadata (M) of
# their processes and threads, chosen by these statements in order over the work table
# _export_picked. A flow event belongs to the innermost slice of its track (pid, tid) whose span
# contains its time (Chrome's binding for `s`, and for `f` with bp "e"), by the nesting found at
# ingest (`depth`); a flow, by (category, id), is kept when every one of its events belongs to a
# picked slice. The track number is folded into the time so that the containment join is a range
# join on two work tables (DuckDB's IEJoin), not an equality join filtered by range.
_CONTEXT_STATEMENTS = [
    """CREATE TABLE _export_tracks AS
       SELECT pid, tid, row_number() OVER (ORDER BY pid, tid)::HUGEINT << 64 AS track_key,
              min(ts_ns) AS lo_ns, max(ts_ns + dur_ns) AS hi_ns
       FROM _export_picked WHERE phase = 'X' AND dur_ns IS NOT NULL GROUP BY pid, tid""",
    # every slice of those tracks that can contain a flow event of the picked time range
    """CREATE TABLE _export_slices AS
       SELECT e.event_id, e.depth, t.track_key + e.ts_ns AS lo_key, t.track_key + e.ts_ns + e.dur_ns AS hi_key
       FROM events e JOIN _export_tracks t ON t.pid = e.pid AND t.tid = e.tid
       WHERE e.phase = 'X' AND e.dur_ns IS NOT NULL AND e.ts_ns <= t.hi_ns AND e.ts_ns + e.dur_ns >= t.lo_ns""",
    """CREATE TABLE _export_flows AS
       SELECT event_id, coalesce(category, '') AS flow_cat, pid, tid, ts_ns,
              coalesce(flow_id::VARCHAR, json_extract(extra, '$.id')::VARCHAR, json_extract(extra, '$.id2')::VARCHAR,
                       'event ' || event_id) AS flow_key
       FROM events WHERE phase IN (SELECT phase FROM trace_phases WHERE kind = 'flow')""",
    """CREATE TABLE _export_candidates AS
       SELECT f.event_id, f.flow_cat, f.flow_key, t.track_key + f.ts_ns AS at_key
       FROM _export_flows f JOIN _export_tracks t ON t.pid = f.pid AND t.tid = f.tid
       WHERE f.ts_ns BETWEEN t.lo_ns AND t.hi_ns""",
    """CREATE TABLE _export_attached AS
       SELECT * FROM (
         SELECT c.event_id, c.flow_cat, c.flow_key, arg_max(s.event_id, s.depth) AS slice_id
         FROM _export_candidates c JOIN _export_slices s ON c.at_key >= s.lo_key AND c.at_key <= s.hi_key
         GROUP BY ALL)
       WHERE slice_id IN (SELECT event_id FROM _export_picked)""",
    """CREATE TABLE _export_ids AS
       WITH attached AS (SELECT flow_cat, flow_key, count(*) AS n FROM _export_attached GROUP BY ALL),
       whole AS (
         SELECT flow_cat, flow_key FROM attached
         JOIN (SELECT flow_cat, flow_key, count(*) AS n FROM _export_flows
               WHERE flow_key IN (SELECT flow_key FROM attached) GROUP BY ALL) f USING (flow_cat, flow_key, n)
       )
       SELECT event_id FROM _export_picked
       UNION ALL
       SELECT event_id FROM _export_attached JOIN whole USING (flow_cat, flow_key)
       UNION ALL
       SELECT m.event_id FROM events m
       WHERE m.phase = 'M'
         AND (m.pid IS NULL OR m.pid IN (SELECT pid FROM _export_picked))
         AND (coalesce(m.name, '') NOT LIKE 'thread%'
              OR EXISTS (SELECT 1 FROM _export_picked p WHERE p.pid = m.pid AND p.tid = m.tid))""",
]


# Top-level metadata can carry the profiled process's environment (tokens, keys). Redacting
# replaces the value of every key whose name looks like a secret, and every value of an
# environment mapping, with REDACTED; keys, events and args stay as they are.
_SECRET_KEY = re.compile(r"TOKEN|SECRET|PASSWORD|KEY|CREDENTIAL|AUTH", re.I)
_ENV_KEYS = frozenset(("env", "environ", "environment"))
REDACTED = "<redacted>"

_OFFSET = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(" + "|".join(NS_PER) + r")\s*")


def parse_offset(text: str, option: str = "--start") -> int:
    """A time after a run's start, `12.5ms`, `300us`, `2s` or `1500ns`, as integer ns (rounded down)."""
    m = _OFFSET.fullmatch(text)
    if not m:
        raise ExportError(f"{option} {text!r} is not a time with a unit",
                          "Write it like 12.5ms, 300us, 2s or 1500ns: a time after the run's start")
    return int(Decimal(m.group(1)) * NS_PER[m.group(2)])


def offset_text(ns: int) -> str:
    """Integer ns in the largest unit that shows it exactly in at most 3 decimals: 12.5ms, 300us."""
    for unit, size in reversed(NS_PER.items()):
        if unit != "ns" and ns >= size and ns % (size // 1000) == 0:
            return f"{(Decimal(ns) / size).normalize():f}{unit}"
    return f"{ns}ns"


@dataclass(frozen=True)
class Window:
    """The part of a run to export: one profiler step, or the events overlapping [start, end);
    `max_events` keeps only the earliest events of it (by start, then file order). Each bound is
    absolute (`start_ns`, as events.ts_ns) or after the run's start (`start_offset_ns`), not both."""

    step: int | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    max_events: int | None = None
    start_offset_ns: int | None = None
    end_offset_ns: int | None = None

    @property
    def is_whole_run(self) -> bool:
        return self.step is None and self.max_events is None and not self.has_range

    @property
    def has_range(self) -> bool:
        return any(v is not None for v in (self.start_ns, self.end_ns, self.start_offset_ns, self.end_offset_ns))


@dataclass(frozen=True)
class ExportResult:
    """What an export wrote. Chrome: `events` written; for a window, `window_events` events
    (metadata and flows not counted) were in the window and `kept_events` of them were written,
    fewer when --max-events cut it. Folded: `stacks` lines summing to `total` of `metric`."""

    run_id: str
    format: str
    events: int = 0
    window_events: int | None = None
    kept_events: int | None = None
    stacks: int = 0
    total: int = 0
    metric: str | None = None
    scope: str | None = None  # the window in words: 'step 552', '[A, B) ns'
    redacted: int = 0  # metadata values replaced by REDACTED
    counters: int = 0  # counter events (ph "C") added by --counters, not in `events`

    @property
    def is_cut(self) -> bool:
        return self.window_events is not None and self.kept_events != self.window_events


def _us(ns: int) -> msgspec.Raw:
    """Integer ns -> exact decimal microseconds, 3 decimals at most."""
    sign = "-" if ns < 0 else ""
    q, r = divmod(abs(ns), 1000)
    return msgspec.Raw(f"{sign}{q}.{r:03d}" if r else f"{sign}{q}")


def _arg_value(vtype: str, iv: int | None, rv: float | None, sv: str | None) -> object:
    if vtype == "int":
        return iv
    if vtype == "string":
        return sv
    if vtype == "json" or vtype == "big_int":
        return msgspec.Raw(sv)
    if vtype == "real":
        if rv is not None and not math.isfinite(rv):
            return msgspec.Raw("NaN" if rv != rv else ("Infinity" if rv > 0 else "-Infinity"))
        return rv
    if vtype == "bool":
        return bool(iv)
    return None


def _args_by_event(batches: Iterable[pa.RecordBatch]) -> Iterator[tuple[int, dict]]:
    """(event_id, args dict) in event order, from batches of args rows sorted by event and position."""
    current = None
    args: dict = {}
    for batch in batches:
        d = batch.to_pydict()
        for eid, k, t, iv, rv, sv in zip(*(d[c] for c in _ARG_COLUMNS)):
            if eid != current:
                if current is not None:
                    yield current, args
                current, args = eid, {}
            args[k] = _arg_value(t, iv, rv, sv)
    if current is not None:
        yield current, args


def _events(event_batches: Iterable[pa.RecordBatch], arg_batches: Iterable[pa.RecordBatch],
            base_ns: int) -> Iterator[dict]:
    """Chrome events from batches of events rows and of their args rows, both in event order."""
    args_iter = _args_by_event(arg_batches)
    next_args = next(args_iter, None)
    for batch in event_batches:
        d = batch.to_pydict()
        for eid, ph, cat, name, pid, tid, pid_text, tid_text, ts, dur, extra in zip(*(d[c] for c in _EVENT_COLUMNS)):
            while next_args is not None and next_args[0] < eid:  # args of an event not exported
                next_args = next(args_iter, None)
            ev: dict = {}
            if ph is not None:
                ev["ph"] = ph
            if cat is not None:
                ev["cat"] = cat
            if name is not None:
                ev["name"] = name
            if pid is not None and pid_text is not None:
                ev["pid"] = pid if pid_text else int(pid)
            if tid is not None and tid_text is not None:
                ev["tid"] = tid if tid_text else int(tid)
            if ts is not None:
                ev["ts"] = _us(ts - base_ns)
            if dur is not None:
                ev["dur"] = _us(dur)
            if next_args is not None and next_args[0] == eid:
                ev["args"] = next_args[1]
                next_args = next(args_iter, None)
            if extra is not None:
                for k, v in json.loads(extra).items():
                    ev[k] = msgspec.Raw(json.dumps(v, allow_nan=True))
            yield ev


def redact_secrets(meta: dict) -> int:
    """Replace secrets in top-level metadata, in place (see _SECRET_KEY); returns how many values.
    An environment given as a list of `NAME=value` strings keeps the names."""
    count = 0
    todo: list = [meta]  # no recursion: metadata may be nested hundreds deep
    while todo:
        node = todo.pop()
        if isinstance(node, list):
            todo.extend(x for x in node if isinstance(x, (dict, list)))
            continue
        for key, value in node.items():
            if key.lower() in _ENV_KEYS and isinstance(value, dict):
                count += len(value)
                node[key] = dict.fromkeys(value, REDACTED)
            elif key.lower() in _ENV_KEYS and isinstance(value, list):
                count += len(value)
                node[key] = [f"{x.split('=', 1)[0]}={REDACTED}" if isinstance(x, str) and "=" in x else REDACTED
                             for x in value]
            elif _SECRET_KEY.search(key) or key.lower() in _ENV_KEYS:
                count += 1
                node[key] = REDACTED
            elif isinstance(value, (dict, list)):
                todo.append(value)
    return count


def _write_trace(run: dict, out: Path, events: Iterable[dict], redact: bool = False) -> tuple[int, int]:
    """Write a Chrome trace with the run's top-level keys, in their order, around `events`;
    (events written, metadata values redacted)."""
    meta = json.loads(run["metadata_json"])
    redacted = redact_secrets(meta) if redact else 0
    try:
        raw = gzip.open(out, "wb") if out.name.endswith(".gz") else open(out, "wb")
    except OSError as e:
        raise InputError(f"cannot write {out} ({e.strerror})") from None
    count = 0
    with raw as f:
        if run["trace_format"] == "array":
            f.write(b"[\n")
        else:
            f.write(b"{\n")
            for key, value in list(meta.items())[:run["events_key_index"]]:
                f.write(_JSON.encode(key) + b": " + json.dumps(value, ensure_ascii=False).encode() + b",\n")
            f.write(b'"traceEvents": [\n')
        for ev in events:
            if count:
                f.write(b",\n")
            f.write(_JSON.encode(ev))
            count += 1
        if run["trace_format"] == "array":
            f.write(b"\n]\n")
        else:
            f.write(b"\n]")
            for key, value in list(meta.items())[run["events_key_index"]:]:
                f.write(b",\n" + _JSON.encode(key) + b": " + json.dumps(value, ensure_ascii=False).encode())
            f.write(b"\n}\n")
    return count, redacted


COUNTERS = ("queue", "memory", "bandwidth")

# The pid under which a device's counters are drawn: the pid its work has in the trace (Kineto
# writes a GPU's work under pid = device index), as written (number or text).
_DEVICE_PIDS = """
SELECT device_of(e.device, e.pid) AS device, min(e.pid) AS pid, bool_or(e.pid_is_text) AS pid_is_text
FROM events e JOIN event_categories c ON c.category = e.category AND c.is_device_work
WHERE e.phase = 'X' AND e.pid IS NOT NULL GROUP BY ALL
"""

# Each counter kind as rows (series, device, pid, pid_is_text, ts_ns, value, arg) ordered by series
# and time: one row per change of the value.
_COUNTER_QUERIES = {
    # the launch queue of each stream (view launch_queue: the idle report's queue)
    "queue": f"""
        SELECT 'Launch queue (stream ' || q.stream || ')' AS series, p.pid, p.pid_is_text, q.ts_ns,
               q.queue_length::DOUBLE AS value, 'launches' AS arg
        FROM launch_queue q JOIN ({_DEVICE_PIDS}) p USING (device)
        ORDER BY q.device, q.stream, q.ts_ns""",
    # allocated memory per device from [memory] events; of several at one time, the last
    "memory": """
        SELECT 'Allocated memory (' || m.device || ')' AS series, any_value(m.pid) AS pid,
               bool_or(e.pid_is_text) AS pid_is_text, m.ts_ns,
               arg_max(m.total_allocated, m.event_id)::DOUBLE AS value, 'bytes' AS arg
        FROM memory_allocated m JOIN events e USING (run_id, event_id)
        GROUP BY m.device, m.ts_ns ORDER BY m.device, m.ts_ns""",
    # the summed rate of the copies and sets running at each time, per device and kind (HTA's
    # memory bandwidth time series); 0-ns copies have no rate
    "bandwidth": f"""
        WITH edges AS (
          SELECT device, kind, ts_ns AS t, gb_s AS d FROM memory_transfers WHERE gb_s IS NOT NULL
          UNION ALL
          SELECT device, kind, ts_ns + dur_ns, -gb_s FROM memory_transfers WHERE gb_s IS NOT NULL
        ), changes AS (SELECT device, kind, t, sum(d) AS d FROM edges GROUP BY ALL)
        SELECT 'Memory bandwidth ' || c.kind || ' (GB/s)' AS series, p.pid, p.pid_is_text, c.t AS ts_ns,
               greatest(round(sum(c.d) OVER (PARTITION BY c.device, c.kind ORDER BY c.t ROWS UNBOUNDED PRECEDING), 6), 0)
                 AS value, 'GB/s' AS arg
        FROM changes c JOIN ({_DEVICE_PIDS}) p USING (device)
        ORDER BY c.device, c.kind, c.t""",
}


def parse_counters(text: str | Iterable[str] | None) -> tuple[str, ...]:
    """'queue,memory' (or a list of names) -> ('queue', 'memory'), each checked, in COUNTERS order."""
    if text is None:
        return ()
    names = [n.strip().lower() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()]
    unknown = [n for n in names if n not in COUNTERS]
    if unknown:
        raise ExportError(f"unknown counter {unknown[0]!r}", f"Give some of {', '.join(COUNTERS)}, joined by commas")
    return tuple(c for c in COUNTERS if c in names)


def _counter_events(one: Engine, kinds: tuple[str, ...], base_ns: int,
                    bounds: tuple[int, int] | None = None) -> list[dict]:
    """Counter events (ph "C") of the run of engine `one` for the counter kinds: one event per change
    of each series, on the pid of its device (memory: of its [memory] events). Within `bounds`
    [lo, hi) only, each series starting at lo with the value it had there."""
    out: list[dict] = []
    for kind in kinds:
        rows = one.sql(_COUNTER_QUERIES[kind]).fetchall()
        before: dict[str, tuple] = {}  # the last change of each series before lo
        for series, pid, pid_is_text, ts, value, arg in rows:
            if bounds is not None:
                lo, hi = bounds
                if ts < lo:
                    before[series] = (series, pid, pid_is_text, lo, value, arg)
                    continue
                if ts >= hi:
                    continue
                if series in before:
                    first = before.pop(series)
                    if ts > lo:
                        out.append(_counter(*first, base_ns))
            out.append(_counter(series, pid, pid_is_text, ts, value, arg, base_ns))
        out.extend(_counter(*row, base_ns) for row in before.values() if row[4])
    return out


def _counter(series: str, pid, pid_is_text: bool, ts: int, value: float, arg: str, base_ns: int) -> dict:
    ev: dict = {"ph": "C", "cat": "traceduck_counter", "name": series}
    if pid is not None:
        ev["pid"] = pid if pid_is_text else int(pid)
    ev["ts"] = _us(ts - base_ns)
    ev["args"] = {arg: int(value) if float(value).is_integer() else value}
    return ev


def _run_row(store: Store, run_id: str) -> dict:
    return read_row_file(store.run_dir(run_id) / "runs.parquet").to_pylist()[0]


def export_run(store: Store, run_id: str, out: str | os.PathLike, redact: bool = False,
               extra: Iterable[dict] = ()) -> tuple[int, int]:
    """Write run `run_id` as a Chrome trace JSON file (gzip when OUT ends in .gz), exact unless
    `redact`, with the events `extra` (counters) after the run's. Returns (events written,
    metadata values redacted)."""
    run_dir = store.run_dir(run_id)
    run = _run_row(store, run_id)
    events = pq.ParquetFile(run_dir / "events.parquet").iter_batches(batch_size=_BATCH, columns=_EVENT_COLUMNS)
    args = pq.ParquetFile(run_dir / "args.parquet").iter_batches(batch_size=_BATCH, columns=_ARG_COLUMNS)
    return _write_trace(run, Path(out), itertools.chain(_events(events, args, run["base_time_ns"] or 0), extra), redact)


def _ranges(values: list[int]) -> str:
    """[2, 3, 4, 7] -> '2-4, 7'."""
    parts: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        parts.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ", ".join(parts)


def check_window(window: Window) -> None:
    """Reject windows that are contradictory before anything is read."""
    if window.step is not None and window.has_range:
        raise ExportError("--step cannot be combined with a time range (--start/--end, --start-ns/--end-ns)",
                          "Export one step or one time range")
    for absolute, offset, name in ((window.start_ns, window.start_offset_ns, "start"),
                                   (window.end_ns, window.end_offset_ns, "end")):
        if absolute is not None and offset is not None:
            raise ExportError(f"--{name} cannot be combined with --{name}-ns",
                              f"Give the {name} after the run's start (--{name}) or as events.ts_ns (--{name}-ns)")
    if window.start_ns is not None and window.end_ns is not None and window.end_ns <= window.start_ns:
        raise ExportError(f"--end-ns {window.end_ns} is not after --start-ns {window.start_ns}",
                          "Give a range with START < END, in ns as in events.ts_ns")
    start, end = window.start_offset_ns, window.end_offset_ns
    if start is not None and end is not None and end <= start:
        raise ExportError(f"--end {offset_text(end)} is not after --start {offset_text(start)}",
                          "Give a range with START < END, both after the run's start")
    if window.max_events is not None and window.max_events < 1:
        raise ExportError(f"--max-events {window.max_events} is below 1", "Give a positive number of events")


def export_window(engine: Engine, run_id: str, out: str | os.PathLike, window: Window, redact: bool = True,
                  counters: tuple[str, ...] = ()) -> ExportResult:
    """Write one window of run `run_id` as a Chrome trace: the window's events, the flows between
    them and the metadata of their processes and threads, each event exactly as ingested; the
    top-level metadata with its secrets redacted unless `redact` is off; the `counters` over the
    window's span (a time range: the range; a step: its events' first start to last end)."""
    check_window(window)
    with Engine(engine.store, run_ids=[run_id]) as one:
        run = _run_row(engine.store, run_id)
        if window.step is not None:
            steps = [s for (s,) in one.sql("SELECT step FROM steps ORDER BY step").fetchall()]
            if window.step not in steps:
                hint = (f"Steps in the run: {_ranges(steps)}" if steps else
                        "The run has no ProfilerStep#N annotation; export a time range with --start-ns/--end-ns")
                raise ExportError(f"no step {window.step} in run {short_id(run_id)}", hint)
            picked, params = _STEP_EVENTS, {"step": window.step}
        else:
            start, end = _bounds(window, run)
            picked, params = _RANGE_EVENTS, {"start_ns": start, "end_ns": end}
        one.sql(f"CREATE TABLE _export_picked AS {picked}", params=params)
        ((total,),) = one.sql("SELECT count(*) FROM _export_picked").fetchall()
        if not total:
            if window.start_offset_ns is not None or window.end_offset_ns is not None:
                lasts = (run["end_ns"] or 0) - (run["start_ns"] or 0)
                hint = f"The run lasts {lasts / 1e6:,.3f} ms ({lasts:,} ns)"
            else:
                hint = f"The run spans {run['start_ns']} to {run['end_ns']} ns (events.ts_ns)"
            raise ExportError(f"no events in {_describe(window, run)} of run {short_id(run_id)}", hint)
        kept = total
        if window.max_events is not None and total > window.max_events:
            one.sql("DELETE FROM _export_picked WHERE event_id NOT IN "
                    "(SELECT event_id FROM _export_picked ORDER BY ts_ns, event_id LIMIT $k)",
                    params={"k": window.max_events})
            kept = window.max_events
        for statement in _CONTEXT_STATEMENTS:
            one.sql(statement)
        cols = ", ".join(_EVENT_COLUMNS)
        events = one.sql(f"SELECT {cols} FROM events WHERE event_id IN (SELECT event_id FROM _export_ids) "
                         "ORDER BY event_id").to_arrow_reader(_BATCH)
        args = one.sql(f"SELECT {', '.join(_ARG_COLUMNS)} FROM args "
                       "WHERE event_id IN (SELECT event_id FROM _export_ids) ORDER BY event_id, arg_index"
                       ).to_arrow_reader(_BATCH)
        counter_events: list[dict] = []
        if counters:
            if window.step is not None or window.max_events is not None:
                ((lo, hi),) = one.sql("SELECT min(ts_ns), max(ts_ns + coalesce(dur_ns, 0)) + 1 FROM _export_picked").fetchall()
            else:
                lo, hi = _bounds(window, run)
            counter_events = _counter_events(one, counters, run["base_time_ns"] or 0, (lo, hi))
        written, redacted = _write_trace(run, Path(out), itertools.chain(
            _events(events, args, run["base_time_ns"] or 0), counter_events), redact)
    return ExportResult(run_id, "chrome", events=written - len(counter_events), window_events=total, kept_events=kept,
                        scope=_describe(window, run), redacted=redacted, counters=len(counter_events))


def _bounds(window: Window, run: dict) -> tuple[int, int]:
    """[start, end) in ns as events.ts_ns; the run's own start and end where not given."""
    first, last = run["start_ns"] or 0, run["end_ns"] or 0
    start = (window.start_ns if window.start_ns is not None else
             first + window.start_offset_ns if window.start_offset_ns is not None else first)
    end = (window.end_ns if window.end_ns is not None else
           first + window.end_offset_ns if window.end_offset_ns is not None else last + 1)
    return start, end


def _describe(window: Window, run: dict) -> str:
    if window.step is not None:
        return f"step {window.step}"
    if window.start_offset_ns is None and window.end_offset_ns is None:
        return f"[{window.start_ns if window.start_ns is not None else 'start'}, " \
               f"{window.end_ns if window.end_ns is not None else 'end'}) ns"

    start, end = _bounds(window, run)
    first = run["start_ns"] or 0

    def after(t: int) -> str:
        return offset_text(t - first) if t >= first else "-" + offset_text(first - t)

    shown_end = "end" if window.end_ns is None and window.end_offset_ns is None else after(end)
    return f"[{after(start)}, {shown_end}) after the run's start = [{start}, {end}) ns"


def export(engine: Engine, run_id: str, out: str | os.PathLike, format: str = "chrome",  # noqa: A002
           window: Window = Window(), metric: str | None = None, redact: bool | None = None,
           counters: str | Iterable[str] | None = None) -> ExportResult:
    """Export run `run_id` to OUT: a Chrome trace of the whole run or of a window, or folded stacks.
    `redact` (default: on for a window, meant for sharing; off for the whole run, which stays
    exact) replaces secrets in the top-level metadata (see redact_secrets). `counters` (some of
    COUNTERS: 'queue,memory,bandwidth' or a list) adds counter tracks to a Chrome trace: the launch
    queue length of each stream (view `launch_queue`), the allocated memory of each device
    (`memory_allocated`), the memory copy bandwidth per device and kind (`memory_transfers`)."""
    kinds = parse_counters(counters)
    if kinds and format != "chrome":
        raise ExportError("--counters applies to Chrome traces", "Drop --counters, or use --format chrome")
    if format == "folded":
        if not window.is_whole_run:
            raise ExportError("--step, --start, --end, --start-ns, --end-ns and --max-events apply to Chrome traces",
                              "Folded stacks cover the whole run: drop those options or use --format chrome")
        metric = metric or "cpu_self"
        stacks, total = write_folded(engine, run_id, out, metric)
        return ExportResult(run_id, "folded", stacks=stacks, total=total, metric=metric)
    if format != "chrome":
        raise ExportError(f"unknown export format {format!r}", "Use chrome or folded")
    if metric is not None:
        raise ExportError("--metric applies to --format folded", "Add --format folded, or drop --metric")
    if window.is_whole_run:
        counter_events: list[dict] = []
        if kinds:
            run = _run_row(engine.store, run_id)
            with Engine(engine.store, run_ids=[run_id]) as one:
                counter_events = _counter_events(one, kinds, run["base_time_ns"] or 0)
        written, redacted = export_run(engine.store, run_id, out, redact=bool(redact), extra=counter_events)
        return ExportResult(run_id, "chrome", events=written - len(counter_events), redacted=redacted,
                            counters=len(counter_events))
    return export_window(engine, run_id, out, window, redact=redact is not False, counters=kinds)
