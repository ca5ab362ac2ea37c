"""Writing a run back as a Chrome trace: the proof that ingest dropped nothing."""

from __future__ import annotations

import gzip
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path

import orjson
import pyarrow.parquet as pq

from .errors import InputError
from .store import Store

_BATCH = 65536


def _us(ns: int) -> orjson.Fragment:
    """Integer ns -> exact decimal microseconds, 3 decimals at most."""
    sign = "-" if ns < 0 else ""
    q, r = divmod(abs(ns), 1000)
    return orjson.Fragment(f"{sign}{q}.{r:03d}" if r else f"{sign}{q}")


def _arg_value(vtype: str, iv: int | None, rv: float | None, sv: str | None) -> object:
    if vtype == "int":
        return iv
    if vtype == "string":
        return sv
    if vtype == "json" or vtype == "big_int":
        return orjson.Fragment(sv)
    if vtype == "real":
        if rv is not None and not math.isfinite(rv):
            return orjson.Fragment("NaN" if rv != rv else ("Infinity" if rv > 0 else "-Infinity"))
        return rv
    if vtype == "bool":
        return bool(iv)
    return None


def _args_by_event(path: Path) -> Iterator[tuple[int, dict]]:
    """(event_id, args dict) in event order, from a run's args.parquet (sorted by event)."""
    current = None
    args: dict = {}
    cols = ["event_id", "key", "value_type", "int_value", "real_value", "string_value"]
    for batch in pq.ParquetFile(path).iter_batches(batch_size=_BATCH, columns=cols):
        d = batch.to_pydict()
        for eid, k, t, iv, rv, sv in zip(*(d[c] for c in cols)):
            if eid != current:
                if current is not None:
                    yield current, args
                current, args = eid, {}
            args[k] = _arg_value(t, iv, rv, sv)
    if current is not None:
        yield current, args


def _events(run_dir: Path, base_ns: int) -> Iterator[dict]:
    args_iter = _args_by_event(run_dir / "args.parquet")
    next_args = next(args_iter, None)
    cols = ["event_id", "phase", "category", "name", "pid", "tid", "pid_is_text", "tid_is_text", "ts_ns", "dur_ns",
            "extra"]
    for batch in pq.ParquetFile(run_dir / "events.parquet").iter_batches(batch_size=_BATCH, columns=cols):
        d = batch.to_pydict()
        for eid, ph, cat, name, pid, tid, pid_text, tid_text, ts, dur, extra in zip(*(d[c] for c in cols)):
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
                    ev[k] = orjson.Fragment(json.dumps(v, allow_nan=True))
            yield ev


def export_run(store: Store, run_id: str, out: str | os.PathLike) -> int:
    """Write run `run_id` as a Chrome trace JSON file (gzip when OUT ends in .gz). Returns events written."""
    run_dir = store.run_dir(run_id)
    run = pq.read_table(run_dir / "runs.parquet").to_pylist()[0]
    meta = json.loads(run["metadata_json"])
    base_ns = run["base_time_ns"] or 0
    out = Path(out)
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
            keys = list(meta.items())
            k = run["events_key_index"]
            for key, value in keys[:k]:
                f.write(orjson.dumps(key) + b": " + json.dumps(value, ensure_ascii=False).encode() + b",\n")
            f.write(b'"traceEvents": [\n')
        for ev in _events(run_dir, base_ns):
            if count:
                f.write(b",\n")
            f.write(orjson.dumps(ev))
            count += 1
        if run["trace_format"] == "array":
            f.write(b"\n]\n")
        else:
            f.write(b"\n]")
            for key, value in list(meta.items())[run["events_key_index"]:]:
                f.write(b",\n" + orjson.dumps(key) + b": " + json.dumps(value, ensure_ascii=False).encode())
            f.write(b"\n}\n")
    return count
