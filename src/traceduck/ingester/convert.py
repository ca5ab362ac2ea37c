"""Turning parsed events into columns: the per-event work of ingest, run in worker processes.

Each chunk of events becomes three Parquet part files (events, args, shapes) holding the
chunk number and the event's position within the chunk; the ingester turns those into
global event ids when it merges the parts.
"""

from __future__ import annotations

import gc
import json
from itertools import islice
from math import prod
from collections import Counter
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..dtypes import DTYPES, DType
from ..store import WRITE_BUFFER_BYTES, write_parquet
from .frames import StackInterner
from .repair import NAN_OR_INFINITY, repair_text

_BUILT_BY_ADD = ("phase", "category", "name", "pid", "tid", "pid_is_text", "tid_is_text", "ts_ns", "dur_ns", "extra",
                 "flow_id")
CORE_KEYS = frozenset(("ph", "cat", "name", "pid", "tid", "ts", "dur", "args"))
# Flow events (`s`/`t`/`f`) add these; they stay in `extra` (for export), the id also in flow_id.
_FLOW_KEYS = CORE_KEYS | {"id", "bp"}
# Doubles below 2**43 us are within 0.5 ns of their 3-decimal text, so integer ns can be
# recovered from them; larger ones (epoch microseconds as floats) are re-read from their text.
_EXACT_FLOAT_LIMIT = float(1 << 43)
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
# Integer microseconds (older exporters) whose nanoseconds fit int64.
_INT_US_LIMIT = _INT64_MAX // 1000
# The fast paths take integer ts and dur below half that, so that ts + dur (an event's end, which
# the views compute) fits int64 too; larger ones go through `_careful`, which checks the sum.
_FAST_INT_US_LIMIT = _INT_US_LIMIT // 2
END_BEYOND = "dur whose end (ts + dur) is beyond the int64 nanosecond range (kept in extra)"
PART_COMPRESSION = "none"  # parts are read once, right away
_PART_IPC = pa.ipc.IpcWriteOptions(compression="lz4")
BIG_INT = "integer beyond int64 (kept as text)"
_JSON = msgspec.json.Encoder()

EVENT_PART_SCHEMA = pa.schema([
    ("chunk", pa.int32()),
    ("local_idx", pa.int32()),
    ("phase", pa.string()),
    ("category", pa.string()),
    ("name", pa.string()),
    ("pid", pa.string()),
    ("tid", pa.string()),
    ("pid_is_text", pa.bool_()),
    ("tid_is_text", pa.bool_()),
    ("ts_ns", pa.int64()),
    ("dur_ns", pa.int64()),
    ("external_id", pa.int64()),
    ("correlation", pa.int64()),
    ("call_stack_id", pa.int64()),
    ("python_id", pa.int64()),
    ("python_parent_id", pa.int64()),
    ("seq_num", pa.int64()),
    ("device", pa.int64()),
    ("stream", pa.int64()),
    ("flow_id", pa.int64()),
    ("extra", pa.string()),
])
ARG_PART_SCHEMA = pa.schema([
    ("chunk", pa.int32()),
    ("local_idx", pa.int32()),
    ("arg_index", pa.int32()),
    ("key", pa.string()),
    ("value_type", pa.string()),
    ("int_value", pa.int64()),
    ("real_value", pa.float64()),
    ("string_value", pa.string()),
])


# args copied into typed columns of `events` (they stay in `args` too)
PROMOTED = {
    "External id": "external_id",
    "external id": "external_id",
    "correlation": "correlation",
    "Python id": "python_id",
    "Python parent id": "python_parent_id",
    "Sequence number": "seq_num",
    "device": "device",
    "stream": "stream",
}


SHAPE_PART_SCHEMA = pa.schema([
    ("chunk", pa.int32()),
    ("local_idx", pa.int32()),
    ("input_index", pa.int32()),
    ("member_index", pa.int32()),
    ("dims", pa.list_(pa.int64())),
    ("dtype", pa.string()),
    ("dtype_raw", pa.string()),
    ("strides", pa.list_(pa.int64())),
    ("concrete", pa.string()),
    ("numel", pa.int64()),
    ("elem_bytes", pa.int32()),
    ("bytes", pa.int64()),
])


class NeedExact(Exception):
    """A float timestamp too large for exact ns; re-read the chunk keeping decimal text."""


class NotAnEvent(Exception):
    """An item of traceEvents is not a JSON object (it is skipped, as trace viewers do)."""

    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index


@dataclass
class ChunkResult:
    chunk: int
    count: int  # events: the chunk's items that are objects
    stacks: dict[int, tuple[str, int]] = field(default_factory=dict)
    warnings: Counter = field(default_factory=Counter)
    items: int = 0  # traceEvents items in the chunk, skipped ones included
    skipped: list[int] = field(default_factory=list)  # positions in the chunk of items that are not objects


def part_name(table: str, chunk: int) -> str:
    """The file of one chunk's part of a table: Parquet for events (the merge queries them with
    DuckDB), Arrow IPC for args and shapes."""
    return f"{table}-{chunk:06d}.{'parquet' if table == 'events' else 'arrow'}"


def read_part(path: Path) -> pa.Table:
    """An args or shapes part file."""
    with pa.OSFile(str(path)) as source:
        return pa.ipc.open_file(source).read_all()


def dumps_json(value: object) -> str:
    """JSON text of a value (Decimals made floats first: see `_plain`); exact for integers beyond
    64 bits."""
    try:
        return _JSON.encode(value).decode()
    except (TypeError, ValueError, OverflowError):  # e.g. a lone surrogate in a string, which only `json` writes
        return json.dumps(value, default=_json_default, ensure_ascii=False, allow_nan=True)


def _json_default(v: object) -> object:
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, msgspec.Raw):  # NaN, Infinity (`_plain`), or a value nested too deep (streaming.py)
        return json.loads(bytes(v))
    raise TypeError(type(v).__name__)


# NaN and the infinities as JSON text: `NaN`, `Infinity`, `-Infinity`, as they were in the trace (not
# JSON, but what `json` reads and writes, DuckDB's JSON functions read, and export gives back)
_NAN = msgspec.Raw(b"NaN")
_INFINITY = msgspec.Raw(b"Infinity")
_MINUS_INFINITY = msgspec.Raw(b"-Infinity")


def _plain(v: object) -> object:
    """Decimals (from the exact parser) back to floats, and NaN and the infinities to their JSON
    text (an encoder writes them as null), recursively."""
    c = v.__class__
    if c is Decimal:
        v, c = float(v), float
    if c is float:
        if v - v == 0:  # finite
            return v
        return _NAN if v != v else (_INFINITY if v > 0 else _MINUS_INFINITY)
    if c is list:
        return [_plain(x) for x in v]
    if c is dict:
        return {k: _plain(x) for k, x in v.items()}
    return v


def to_ns(v: object, exact: bool) -> int | None:
    """Microseconds (int, float or Decimal) -> integer nanoseconds; None for other types."""
    c = v.__class__
    if c is int:
        return v * 1000
    if c is float:
        if -_EXACT_FLOAT_LIMIT < v < _EXACT_FLOAT_LIMIT:
            q = int(v)
            return q * 1000 + round((v - q) * 1000)
        if not exact and v == v and v not in (float("inf"), float("-inf")):
            raise NeedExact
        return None
    if c is Decimal:
        if not v.is_finite():
            return None
        return int((v * 1000).to_integral_value(ROUND_HALF_EVEN))
    return None


def parse_chunk(text: bytes, exact: bool = False, warnings: Counter | None = None) -> tuple[list, bool]:
    """Parse `[text]`: msgspec first; the standard library for what msgspec refuses (NaN,
    Infinity, numbers beyond a double) or when decimal text must be kept (exact); when both fail,
    the text is repaired (`repair.repair_text`, which raises `Fault`) and parsed again.
    Oddities seen on these slow paths are counted in `warnings`. Returns the items and whether
    msgspec read them (then every number is finite)."""
    warnings = Counter() if warnings is None else warnings
    data = b"[" + text + b"]"
    if not exact:
        try:
            return msgspec.json.decode(data), True
        except msgspec.DecodeError:
            pass
    try:
        return _std_loads(data, exact, warnings), False
    except ValueError:  # JSON and UTF-8 errors
        pass
    fixed, found = repair_text(data)
    warnings.update(found)
    if not exact:
        try:
            return msgspec.json.decode(fixed), True
        except msgspec.DecodeError:
            pass
    return _std_loads(fixed, exact, warnings), False


def _std_loads(data: bytes, exact: bool, warnings: Counter) -> list:
    def constant(word: str) -> float:
        warnings[NAN_OR_INFINITY] += 1
        return float(word)

    return json.loads(data, parse_float=Decimal if exact else float, parse_constant=constant)


class ChunkConverter:
    """Builds column lists for one chunk of events."""

    def __init__(self, chunk: int, exact: bool, finite: bool = True) -> None:
        self.chunk = chunk
        self.exact = exact
        # False when a number may be NaN or infinite (read by `json`, not msgspec): list and object
        # args then keep them (`_plain`)
        self.finite = finite
        self.stacks = StackInterner()
        self.warnings: Counter = Counter()
        self.ev: dict[str, list] = {f.name: [] for f in EVENT_PART_SCHEMA if f.name in _BUILT_BY_ADD}
        # args grouped by their key tuple: (event indexes, value tuples); converted column-wise
        self.arg_groups: dict[tuple, tuple[list[int], list[tuple]]] = {}
        # each common key set's values column by column (`zip(*rows)`), built once for args and shapes
        self._columns: dict[tuple, list[tuple]] = {}
        self.items = 0  # traceEvents items added, objects or not
        self.skipped: list[int] = []  # positions (among the items added) of items that are not objects

    def add(self, items: list) -> None:
        """Add traceEvents items: objects become events, anything else is skipped and its
        position kept, so event indexes count objects only."""
        begin = 0
        while True:
            try:
                self._add(items, begin)
                break
            except NotAnEvent as e:
                self.skipped.append(self.items + e.index)
                begin = e.index + 1
        self.items += len(items)

    def _add(self, items: list, begin: int) -> None:
        ev = self.ev
        c_phase, c_cat, c_name = ev["phase"].append, ev["category"].append, ev["name"].append
        c_pid, c_tid = ev["pid"].append, ev["tid"].append
        c_pidt, c_tidt = ev["pid_is_text"].append, ev["tid_is_text"].append
        c_ts, c_dur, c_extra = ev["ts_ns"].append, ev["dur_ns"].append, ev["extra"].append
        c_flow = ev["flow_id"].append
        groups = self.arg_groups
        core = CORE_KEYS
        flow_keys = _FLOW_KEYS
        lim = _EXACT_FLOAT_LIMIT
        ilim = _FAST_INT_US_LIMIT
        # `start + n` is the event index of item n (the items before `begin` are done)
        start = len(ev["phase"]) - begin
        for n, e in enumerate(items if begin == 0 else islice(items, begin, None), begin):
            if e.__class__ is not dict:
                raise NotAnEvent(n)
            ph = e.get("ph")
            cat = e.get("cat")
            name = e.get("name")
            pid = e.get("pid")
            tid = e.get("tid")
            ts = e.get("ts")
            dur = e.get("dur")
            a = e.get("args")
            ts_c = ts.__class__
            dur_c = dur.__class__
            keys = e.keys()
            plain = keys <= core
            # Fast path: the shapes every exporter writes (ts/dur as floats, or as integers in
            # older traces; flow events with an integer id). Anything else goes through _careful.
            if (
                (plain or (keys <= flow_keys and e.get("id").__class__ is int
                           and _INT64_MIN <= e["id"] <= _INT64_MAX and e.get("bp", "").__class__ is str))
                and (ph.__class__ is str or ph is None)
                and (cat.__class__ is str or cat is None)
                and (name.__class__ is str or name is None)
                and (pid.__class__ is int or pid.__class__ is str)
                and (tid.__class__ is int or tid.__class__ is str)
                and ((ts_c is float and -lim < ts < lim) or (ts_c is int and -ilim < ts < ilim))
                and ((dur_c is float and -lim < dur < lim) or (dur_c is int and -ilim < dur < ilim) or dur is None)
                and ((a.__class__ is dict and a) or a is None)
            ):
                c_phase(ph)
                c_cat(cat)
                c_name(name)
                if pid.__class__ is int:
                    c_pid(str(pid))
                    c_pidt(False)
                else:
                    c_pid(pid)
                    c_pidt(True)
                if tid.__class__ is int:
                    c_tid(str(tid))
                    c_tidt(False)
                else:
                    c_tid(tid)
                    c_tidt(True)
                # Exact ns from a double below 2**43 us: split off the integer part first, so the
                # only rounding is the text -> double one (under 0.5 ns).
                if ts_c is int:
                    c_ts(ts * 1000)
                else:
                    q = int(ts)
                    c_ts(q * 1000 + round((ts - q) * 1000))
                if dur_c is int:
                    c_dur(dur * 1000)
                elif dur is not None:
                    q = int(dur)
                    c_dur(q * 1000 + round((dur - q) * 1000))
                else:
                    c_dur(None)
                if plain:
                    c_extra(None)
                    c_flow(None)
                else:
                    c_extra(_JSON.encode({k: v for k, v in e.items() if k not in core}).decode())
                    c_flow(e["id"])
                if a is not None:
                    sig = tuple(a)
                    g = groups.get(sig)
                    if g is None:
                        g = groups[sig] = ([], [])
                    g[0].append(start + n)
                    g[1].append(tuple(a.values()))
            else:
                self._careful(start + n, e)

    def _careful(self, idx: int, e: dict) -> None:
        """One event of any shape: odd types are kept verbatim in `extra` and counted."""
        ev = self.ev
        exact = self.exact
        extra = None
        if not (e.keys() <= CORE_KEYS):
            extra = {k: _plain(v) for k, v in e.items() if k not in CORE_KEYS}
        for key, column in (("ph", "phase"), ("cat", "category"), ("name", "name")):
            v = e.get(key)
            if v is not None and v.__class__ is not str:
                extra = self._odd(extra, key, v)
                v = dumps_json(_plain(v))
            ev[column].append(v)
        for key in ("pid", "tid"):
            v = e.get(key)
            if v.__class__ is int:
                ev[key].append(str(v))
                ev[f"{key}_is_text"].append(False)
            elif v.__class__ is str:
                ev[key].append(v)
                ev[f"{key}_is_text"].append(True)
            else:
                if key in e:
                    extra = self._odd(extra, key, v)
                ev[key].append(None if v is None else dumps_json(_plain(v)))
                ev[f"{key}_is_text"].append(None)
        for key, column in (("ts", "ts_ns"), ("dur", "dur_ns")):
            v = e.get(key)
            ns = to_ns(v, exact) if v is not None else None
            if ns is not None and not _INT64_MIN <= ns <= _INT64_MAX:
                ns = None
                self.warnings[f"{key} beyond the int64 nanosecond range (kept in extra)"] += 1
                extra = extra if extra is not None else {}
                extra[key] = _plain(v)
            elif ns is None and key in e:
                extra = self._odd(extra, key, v)
            if key == "dur" and ns is not None and ev["ts_ns"][-1] is not None \
                    and not _INT64_MIN <= ev["ts_ns"][-1] + ns <= _INT64_MAX:
                ns = None  # the views compute the event's end, ts + dur: it must fit int64 as well
                self.warnings[END_BEYOND] += 1
                extra = extra if extra is not None else {}
                extra[key] = _plain(v)
            ev[column].append(ns)
        a = e.get("args")
        if a.__class__ is dict:
            if a:
                g = self.arg_groups.setdefault(tuple(a), ([], []))
                g[0].append(idx)
                g[1].append(tuple(a.values()))
            else:  # `"args": {}` has no rows in `args`; remember it for export
                extra = extra if extra is not None else {}
                extra["args"] = {}
        elif "args" in e:
            extra = self._odd(extra, "args", a)
        ev["extra"].append(dumps_json(extra) if extra is not None else None)
        fid = e.get("id")
        ev["flow_id"].append(fid if fid.__class__ is int and _INT64_MIN <= fid <= _INT64_MAX else None)

    def _odd(self, extra: dict | None, key: str, value: object) -> dict:
        """Keep a core field of unexpected type verbatim in `extra` (export restores it)."""
        self.warnings[f"unexpected type of {key}"] += 1
        if extra is None:
            extra = {}
        extra[key] = _plain(value)
        return extra

    def _promote(self, n: int) -> None:
        """Fill the promoted columns (external_id, correlation, ...) from the args groups."""
        ev = self.ev
        for column in PROMOTED.values():
            ev[column] = [None] * n
        stacks = [None] * n
        for keys, (idx, rows) in self.arg_groups.items():
            for j, key in enumerate(keys):
                column = PROMOTED.get(key)
                if column is not None:
                    target = ev[column]
                    for i, values in zip(idx, rows):
                        v = values[j]
                        if v.__class__ is int and _INT64_MIN <= v <= _INT64_MAX:
                            target[i] = v
                elif key == "Call stack":
                    for i, values in zip(idx, rows):
                        v = values[j]
                        if v.__class__ is str and v:
                            stacks[i] = self.stacks.from_call_stack(v) or None
        ev["call_stack_id"] = stacks

    def columns(self, keys: tuple) -> list[tuple]:
        """A key set's values column by column (one tuple per key), built once."""
        cols = self._columns.get(keys)
        if cols is None:
            cols = self._columns[keys] = list(zip(*self.arg_groups[keys][1]))
        return cols

    def write(self, out_dir: Path) -> ChunkResult:
        n = len(self.ev["phase"])
        ev = self.ev
        self._promote(n)
        ev["chunk"] = pa.array(np.full(n, self.chunk, dtype=np.int32))
        ev["local_idx"] = pa.array(np.arange(n, dtype=np.int32))
        cols = [c if isinstance(c := ev[f.name], pa.Array) else pa.array(c, f.type) for f in EVENT_PART_SCHEMA]
        write_parquet(pa.Table.from_arrays(cols, schema=EVENT_PART_SCHEMA),
                      out_dir / f"events-{self.chunk:06d}.parquet", compression=PART_COMPRESSION)
        # args and shapes parts are read back whole by the merge (not by DuckDB): Arrow's own file
        # format writes and reads several times faster than Parquet; lz4 keeps them near Parquet's
        # size on disk (uncompressed they would be 1.7x the chunk's JSON)
        tables = (("args", self._args_table()), ("shapes", self._shapes_table()))
        self._columns.clear()
        for table, rows in tables:
            with pa.output_stream(str(out_dir / part_name(table, self.chunk)), buffer_size=WRITE_BUFFER_BYTES) as sink, \
                    pa.ipc.new_file(sink, rows.schema, options=_PART_IPC) as writer:
                writer.write_table(rows)
        return ChunkResult(self.chunk, n, dict(self.stacks.nodes), self.warnings, self.items, list(self.skipped))

    def _shapes_table(self) -> pa.Table:
        """One row per input of each op with `Input Dims` (TensorList: one per member)."""
        rows: list[tuple] = []
        tables: list[pa.Table] = []
        out = rows.append
        dtypes = DTYPES
        for keys, (idx, group) in self.arg_groups.items():
            pos = {k: j for j, k in enumerate(keys)}
            jd = pos.get("Input Dims", pos.get("Input dims"))
            if jd is None:
                continue
            jt, js, jc = pos.get("Input type"), pos.get("Input Strides"), pos.get("Concrete Inputs")
            if len(group) >= _MIN_GROUP:
                table = _shapes_vectorized(self.chunk, idx, self.columns(keys), jd, jt, js, jc)
                if table is not None:
                    tables.append(table)
                    continue
            for i, row in zip(idx, group):
                dims = row[jd]
                if dims.__class__ is not list:
                    continue
                n = len(dims)
                types = _same_length(row[jt] if jt is not None else None, n)
                strides = _same_length(row[js] if js is not None else None, n)
                concrete = _same_length(row[jc] if jc is not None else None, n)
                for k in range(n):
                    d = dims[k]
                    t = types[k]
                    if t is not None and t.__class__ is not str:
                        t = dumps_json(_plain(t))
                    cv = concrete[k]
                    if cv is not None and cv.__class__ is not str:
                        cv = dumps_json(_plain(cv))
                    st = strides[k]
                    if d.__class__ is list and d and d[0].__class__ is list:  # TensorList: a row per member
                        for m, md in enumerate(d):
                            ms = st[m] if st.__class__ is list and m < len(st) else None
                            out(_shape_row(i, k, m, md, t, ms, cv, None))
                        continue
                    info = dtypes.get(t) if t is not None else None
                    if d.__class__ is list and info is not None and info.is_tensor:
                        try:
                            numel = prod(d)
                        except TypeError:
                            numel = None
                        if numel.__class__ is int and _INT64_MIN <= numel <= _INT64_MAX:
                            out((i, k, None, d, info.canonical, t, st if st.__class__ is list else None, cv, numel,
                                 info.elem_bytes, numel * info.elem_bytes))
                            continue
                    out(_shape_row(i, k, None, d, t, st, cv, info))
        cols = list(zip(*rows)) if rows else [()] * (len(SHAPE_PART_SCHEMA) - 1)
        arrays = [pa.array(np.full(len(rows), self.chunk, dtype=np.int32))]
        for c, f in zip(cols, list(SHAPE_PART_SCHEMA)[1:]):
            arrays.append(_int_lists(list(c)) if f.name in ("dims", "strides") else pa.array(c, f.type))
        tables.append(pa.Table.from_arrays(arrays, schema=SHAPE_PART_SCHEMA))
        table = pa.concat_tables(tables)
        return table.sort_by([("local_idx", "ascending"), ("input_index", "ascending"), ("member_index", "ascending")])

    def _args_table(self) -> pa.Table:
        """Args as a table: column-wise per key for common key sets, value by value otherwise."""
        loose = ArgRows()
        tables = []
        careful = self.exact or not self.finite
        for keys, (idx, rows) in self.arg_groups.items():
            if len(rows) < _MIN_GROUP:
                for i, values in zip(idx, rows):
                    for j, (k, v) in enumerate(zip(keys, values)):
                        loose.add(i, j, k, v, careful)
                continue
            event_idx = pa.array(idx, pa.int32())
            for j, (k, column) in enumerate(zip(keys, self.columns(keys))):
                t = None if careful else _column_table(event_idx, j, k, column)
                if t is None:
                    for i, v in zip(idx, column):
                        loose.add(i, j, k, v, careful)
                else:
                    tables.append(t)
        tables.append(loose.table())
        if loose.big_ints:
            self.warnings[BIG_INT] += loose.big_ints
        t = pa.concat_tables(tables)
        # by (local_idx, arg_index): both int32 and >= 0, one int64 key (a numpy sort of it is faster
        # than Arrow's two-key sort)
        key = pc.fill_null(t.column("local_idx"), 0).to_numpy().astype(np.int64) << 32
        key |= pc.fill_null(t.column("arg_index"), 0).to_numpy().astype(np.int64)
        t = t.take(pa.array(np.argsort(key, kind="stable")))
        return t.add_column(0, "chunk", pa.array(np.full(t.num_rows, self.chunk, dtype=np.int32)))


_MIN_GROUP = 16
_VALUE_COLUMNS = {"int_value": pa.int64(), "real_value": pa.float64(), "string_value": pa.string()}
ARG_VALUE_SCHEMA = pa.schema([(f.name, f.type) for f in ARG_PART_SCHEMA if f.name != "chunk"])


def _column_table(event_idx: pa.Array, j: int, key: str, column: tuple) -> pa.Table | None:
    """One key's values for a group of events, when all share one JSON type; else None."""
    n = len(column)
    classes = set(map(type, column))
    if len(classes) != 1:
        return None
    c = classes.pop()
    values: dict[str, pa.Array] = {}
    try:
        if c is int:
            vtype, values["int_value"] = "int", pa.array(column, pa.int64())
        elif c is str:
            vtype, values["string_value"] = "string", pa.array(column, pa.string())
        elif c is float:
            vtype, values["real_value"] = "real", pa.array(column, pa.float64())
        elif c is bool:
            vtype, values["int_value"] = "bool", pa.array(column, pa.bool_()).cast(pa.int64())
        elif c is list or c is dict:
            vtype = "json"
            values["string_value"] = _json_texts(column)
        elif c is type(None):
            vtype = "null"
        else:
            return None
    except (OverflowError, TypeError, ValueError, pa.ArrowException):
        return None
    arrays = [event_idx, pa.array(np.full(n, j, dtype=np.int32)), repeat_text(key, n), repeat_text(vtype, n)]
    arrays += [values.get(name, pa.nulls(n, typ)) for name, typ in _VALUE_COLUMNS.items()]
    return pa.Table.from_arrays(arrays, schema=ARG_VALUE_SCHEMA)


def repeat_text(text: str, n: int) -> pa.Array:
    """A string array of n copies of one text, built from its buffers (no n Python references)."""
    try:
        data = text.encode()
    except UnicodeEncodeError:  # a lone surrogate: Arrow says what it says of it
        data = None
    if data is None or n * len(data) >= 1 << 31:  # or past 32-bit offsets
        return pc.take(pa.array([text], pa.string()), pa.array(np.zeros(n, dtype=np.int32)))
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(len(data))
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data * n))


def _json_texts(values: list | tuple) -> pa.Array:
    """msgspec's text of each value, from one dump of them all: msgspec writes a list as its items'
    texts joined by commas, so each item's text is cut out by its length (read back as raw slices)."""
    blob = _JSON.encode(values if values.__class__ is list else list(values))
    n = len(values)
    lengths = np.fromiter(map(len, _RAW_ITEMS.decode(blob)), dtype=np.int64, count=n)
    # item k spans [start_k, start_k+1) including its trailing comma (the last one: the `]`)
    offsets = np.empty(n + 1, dtype=np.int64)
    offsets[0] = 1
    np.cumsum(lengths + 1, out=offsets[1:])
    offsets[1:] += 1
    items = pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(blob)])
    return pc.binary_slice(items, 0, -1).cast(pa.large_string()).cast(pa.string())


_RAW_ITEMS = msgspec.json.Decoder(list[msgspec.Raw])
_TYPE_NAMES = pa.array(list(DTYPES))
_TYPE_ELEM = pa.array([d.elem_bytes if d.is_tensor else None for d in DTYPES.values()], pa.int32())
_TYPE_CANONICAL = pa.array([d.canonical if d.is_tensor else None for d in DTYPES.values()], pa.string())


def _shapes_vectorized(chunk: int, idx: list[int], columns: list[tuple], jd: int, jt: int | None, js: int | None,
                       jc: int | None) -> pa.Table | None:
    """Shapes of a group of ops column-wise with Arrow, when every op's per-input lists line up
    (same length, plain int dims, string types); None sends the group to the row-by-row path.
    `columns`: the group's values column by column (`ChunkConverter.columns`)."""
    if jt is None:
        return None
    try:
        dims = pa.array(columns[jd], pa.list_(pa.list_(pa.int64())))
        types = pa.array(columns[jt], pa.list_(pa.string()))
        strides = pa.array(columns[js], pa.list_(pa.list_(pa.int64()))) if js is not None else None
        concrete = pa.array(columns[jc], pa.list_(pa.string())) if jc is not None else None
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        return None
    lengths = pc.list_value_length(dims)
    for other in (types, strides, concrete):
        if other is not None and not pc.all(pc.equal(pc.list_value_length(other), lengths)).as_py():
            return None
    if dims.null_count or types.null_count:
        return None
    parent = pc.list_parent_indices(dims).to_numpy()
    offsets = dims.offsets.to_numpy()
    n = len(parent)
    input_index = np.arange(n, dtype=np.int64) - offsets[parent]
    flat_dims = dims.flatten()
    flat_types = types.flatten()
    # numel = product of each input's dims (1 for []), for tensor types only
    values = flat_dims.flatten().to_numpy(zero_copy_only=False)
    inner = flat_dims.offsets.to_numpy()
    numel = np.ones(n, dtype=np.int64)
    nonempty = inner[1:] > inner[:-1]
    if nonempty.any():
        numel[nonempty] = np.multiply.reduceat(values, inner[:-1][nonempty])
    known = pc.index_in(flat_types, value_set=_TYPE_NAMES)
    elem = pc.take(_TYPE_ELEM, known)
    is_tensor = pc.is_valid(elem).to_numpy(zero_copy_only=False)
    numel_arr = pa.array(numel, pa.int64(), mask=~is_tensor)
    arrays = [
        pa.array(np.full(n, chunk, dtype=np.int32)),
        pa.array(np.asarray(idx, dtype=np.int32)[parent]),
        pa.array(input_index.astype(np.int32)),
        pa.nulls(n, pa.int32()),
        flat_dims,
        pc.take(_TYPE_CANONICAL, known),
        flat_types,
        strides.flatten() if strides is not None else pa.nulls(n, pa.list_(pa.int64())),
        concrete.flatten() if concrete is not None else pa.nulls(n, pa.string()),
        numel_arr,
        elem,
        pc.multiply(numel_arr, elem.cast(pa.int64())),
    ]
    return pa.Table.from_arrays(arrays, schema=SHAPE_PART_SCHEMA)


def _same_length(values: object, n: int) -> list:
    """A per-input arg list padded (or cut) to n entries; None entries when missing."""
    if values.__class__ is list:
        return values if len(values) == n else (values + [None] * n)[:n]
    return [None] * n


def _shape_row(i: int, k: int, m: int | None, d: object, t: str | None, st: object, cv: str | None,
               info: DType | None) -> tuple:
    """One shapes row; numel and bytes only for tensors (and TensorList members), the canonical
    dtype only for tensor element types (a TensorList's members have no type of their own)."""
    numel = elem = nbytes = None
    canonical = info.canonical if info is not None and info.is_tensor else None
    if d.__class__ is not list:
        d = None
    elif m is not None or (info is not None and info.is_tensor):
        try:
            numel = prod(d)
        except TypeError:
            numel = None
        if numel is not None and not (numel.__class__ is int and _INT64_MIN <= numel <= _INT64_MAX):
            numel = None
        if info is not None and info.is_tensor:
            elem = info.elem_bytes
            if numel is not None:
                nbytes = numel * elem
    if st.__class__ is not list:
        st = None
    return (i, k, m, d, canonical, t, st, cv, numel, elem, nbytes)


def _int_lists(values: list) -> pa.Array:
    """A list<int64> array; entries that are not lists of int64 become null."""
    try:
        return pa.array(values, pa.list_(pa.int64()))
    except (pa.ArrowException, OverflowError, TypeError):
        clean = [v if v is not None and all(x.__class__ is int and _INT64_MIN <= x <= _INT64_MAX for x in v) else None
                 for v in values]
        return pa.array(clean, pa.list_(pa.int64()))


class ArgRows:
    """Args converted one value at a time (mixed types, rare key sets, the exact parser)."""

    def __init__(self) -> None:
        self.cols: list[list] = [[] for _ in range(len(ARG_VALUE_SCHEMA))]
        self.big_ints = 0

    def add(self, i: int, j: int, k: str, v: object, careful: bool) -> None:
        """Add one value; `careful`: lists and objects may hold Decimals, NaN or infinities."""
        vc = v.__class__
        iv = rv = sv = None
        if vc is int:
            if _INT64_MIN <= v <= _INT64_MAX:
                t, iv = "int", v
            else:
                t, sv = "big_int", str(v)
                self.big_ints += 1
        elif vc is str:
            t, sv = "string", v
        elif vc is float:
            t, rv = "real", v
        elif vc is bool:
            t, iv = "bool", int(v)
        elif v is None:
            t = "null"
        elif vc is Decimal:
            t, rv = "real", float(v)
        else:
            t, sv = "json", dumps_json(_plain(v) if careful else v)
        for col, x in zip(self.cols, (i, j, k, t, iv, rv, sv)):
            col.append(x)

    def table(self) -> pa.Table:
        return pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(self.cols, ARG_VALUE_SCHEMA)],
                                    schema=ARG_VALUE_SCHEMA)


class _Event(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The keys of an event the typed decoder reads, with the types of the common case: any
    other key or type makes it reject the chunk (the general path then converts it)."""

    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    pid: int | str
    tid: int | str
    ts: int | float
    dur: int | float | None = None
    args: msgspec.Raw = msgspec.UNSET
    # kept in `extra` (flow events' id and binding point; instant events' scope)
    id: int = msgspec.UNSET
    bp: str = msgspec.UNSET
    s: str = msgspec.UNSET


_EVENTS = msgspec.json.Decoder(list[_Event])
_EXTRA_FIELDS = ("id", "bp", "s")


def _ns_column(values: list, limits: tuple[float, int]) -> pa.Array | list | None:
    """Microseconds (int, float or None) -> integer nanoseconds, as `ChunkConverter._add` computes
    them; None when a value is out of its range (the general path decides what to do)."""
    classes = set(map(type, values))
    flim, ilim = limits
    if classes <= {float, type(None)}:
        a = pa.array(values, pa.float64())
        x = pc.fill_null(a, 0.0).to_numpy()
        if not (np.abs(x) < flim).all():
            return None
        q = np.trunc(x)
        # the same operations on the same doubles as the per-event formula, so the same result
        ns = q.astype(np.int64) * 1000 + np.round((x - q) * 1000).astype(np.int64)
        return pa.array(ns, pa.int64(), mask=a.is_null().to_numpy(zero_copy_only=False) if a.null_count else None)
    if classes <= {int, type(None)}:
        try:
            a = pa.array(values, pa.int64())
        except OverflowError:
            return None
        x = pc.fill_null(a, 0).to_numpy()
        if not ((x > -ilim) & (x < ilim)).all():  # not np.abs: it overflows at -2**63
            return None
        return pa.array(x * 1000, pa.int64(), mask=a.is_null().to_numpy(zero_copy_only=False) if a.null_count else None)
    out = []
    for v in values:
        c = v.__class__
        if c is float and -flim < v < flim:
            q = int(v)
            out.append(q * 1000 + round((v - q) * 1000))
        elif c is int and -ilim < v < ilim:
            out.append(v * 1000)
        elif v is None:
            out.append(None)
        else:
            return None
    return out


def _id_column(values: list) -> tuple[pa.Array, pa.Array]:
    """pid or tid as text, and whether each was JSON text (else an integer)."""
    classes = set(map(type, values))
    if classes == {str}:
        return pa.array(values, pa.string()), pa.array(np.ones(len(values), dtype=bool))
    if classes == {int}:
        try:
            return pa.array(values, pa.int64()).cast(pa.string()), pa.array(np.zeros(len(values), dtype=bool))
        except OverflowError:
            pass
    return pa.array(list(map(str, values)), pa.string()), pa.array([v.__class__ is str for v in values], pa.bool_())


def convert_typed(text: bytes, chunk: int) -> ChunkConverter | None:
    """A chunk's events decoded straight into typed fields (args as raw text, then all args of the
    chunk in one parse); None when any event is not of the common shape that `ChunkConverter.add`
    converts on its fast path, so the general path handles it and its oddities stay counted."""
    try:
        events = _EVENTS.decode(b"[" + text + b"]")
    except msgspec.DecodeError:  # also any key or type outside _Event
        return None
    conv = ChunkConverter(chunk, exact=False)
    n = len(events)
    ev = conv.ev
    ts = _ns_column([e.ts for e in events], (_EXACT_FLOAT_LIMIT, _FAST_INT_US_LIMIT))
    dur = _ns_column([e.dur for e in events], (_EXACT_FLOAT_LIMIT, _FAST_INT_US_LIMIT))
    if ts is None or dur is None:
        return None
    ev["ts_ns"], ev["dur_ns"] = ts, dur
    ev["phase"] = [e.ph for e in events]
    ev["category"] = [e.cat for e in events]
    ev["name"] = [e.name for e in events]
    ev["pid"], ev["pid_is_text"] = _id_column([e.pid for e in events])
    ev["tid"], ev["tid_is_text"] = _id_column([e.tid for e in events])
    extra: list = [None] * n
    flow: list = [None] * n
    unset = msgspec.UNSET
    if any([getattr(e, f) for e in events].count(unset) < n for f in _EXTRA_FIELDS):
        for i, e in enumerate(events):
            if e.id is unset and e.bp is unset and e.s is unset:
                continue
            keys = {f: v for f in _EXTRA_FIELDS if (v := getattr(e, f)) is not unset}
            fid = keys.get("id")
            if fid is not None:
                if not _INT64_MIN <= fid <= _INT64_MAX:
                    return None
                flow[i] = fid
            extra[i] = _JSON.encode(keys).decode()
    ev["extra"], ev["flow_id"] = extra, flow
    raws = [e.args for e in events]
    idx = [i for i, r in enumerate(raws) if r is not unset]
    if idx:
        try:
            args = msgspec.json.decode(b"[" + b",".join([raws[i] for i in idx]) + b"]")
        except msgspec.DecodeError:
            return None
        groups = conv.arg_groups
        for i, a in zip(idx, args):
            if a.__class__ is dict and a:
                sig = tuple(a)
                g = groups.get(sig)
                if g is None:
                    g = groups[sig] = ([], [])
                g[0].append(i)
                g[1].append(tuple(a.values()))
            elif a is not None:  # `{}` or not an object: the general path keeps it in extra
                return None
    conv.items = n
    return conv


def convert_chunk_typed(text: bytes, chunk: int, out_dir: Path) -> ChunkResult | None:
    """The typed path for one chunk: its part files written, or None (nothing to keep) when the
    chunk needs the general path."""
    conv = convert_typed(text, chunk)
    return None if conv is None else conv.write(out_dir)


def convert_chunk(text: bytes, chunk: int, out_dir: str) -> ChunkResult:
    """Parse one chunk of event text and write its part files (runs in a worker process)."""
    # The cyclic GC finds nothing to free in freshly parsed JSON but costs more than the parse.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        done = convert_chunk_typed(text, chunk, Path(out_dir))
        if done is not None:
            return done
        exact = False
        while True:
            warnings: Counter = Counter()
            events, finite = parse_chunk(text, exact, warnings)
            conv = ChunkConverter(chunk, exact, finite)
            conv.warnings.update(warnings)
            try:
                conv.add(events)
                return conv.write(Path(out_dir))
            except NeedExact:
                exact = True
    finally:
        if was_enabled:
            gc.enable()
