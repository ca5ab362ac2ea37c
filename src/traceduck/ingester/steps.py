"""Step windows: which annotations mark a run's steps, at ingest and on a stored run.

A run's steps are the windows of one family of CPU annotations (events of the step marker kinds
of sql/reference, phase X): the user's pattern when one is given (`ingest --step-marker`,
`traceduck step-marker`); else `ProfilerStep#N` when present; else the first inference marker
family found, SGLang's `step[...]` then vLLM's `execute_..._context_..._generation_...`
(macro step_marker_family). ProfilerStep#N windows keep their N; the windows of a pattern with a
capture group take the number it captures when every window has one and no two share it; any
other windows are numbered 0, 1, ... by start. Every CPU event gets the step whose window contains
its start (the latest-starting such window).

`restep_run` re-derives the windows of a published run and rewrites its events' steps: the run's
directory is copied into tmp/ (unchanged files hard-linked), events.parquet and step_windows.parquet
written anew, and the copy swapped in for the run as `ingest --force` swaps a run in.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .. import reference
from ..catalog import arrow_schemas, reference_sql
from ..errors import InputError, StoreError
from ..sqltext import literal
from ..store import Store, parquet_writer, write_parquet

# The marker families in order of precedence (macro step_marker_family); 'pattern': the user's.
FAMILIES = ("profiler_step", "sglang", "vllm")
PATTERN = "pattern"
REWRITE_BATCH = 1 << 18  # events per batch when a stored run's events are rewritten


def check_marker(marker: str | None) -> str | None:
    """The pattern, once DuckDB (RE2) has compiled it; InputError when it cannot."""
    if marker is None:
        return None
    if not marker:
        raise InputError("the step marker pattern is empty", "Give a regular expression, e.g. '^my_step'")
    try:
        duckdb.execute("SELECT regexp_matches('', ?)", [marker]).fetchall()
    except duckdb.Error as e:
        first = str(e).splitlines()[0]
        raise InputError(f"the step marker {marker!r} is not a regular expression ({first})",
                         "Write it in RE2 syntax (as DuckDB's regexp_matches), e.g. '^decode_step'") from None
    return marker


def find_windows(con: duckdb.DuckDBPyConnection, source: str, marker: str | None = None
                 ) -> tuple[dict[str, np.ndarray], str | None]:
    """The step windows among the events of `source` (SQL with columns event_id, ts_ns, dur_ns,
    name, category, phase), sorted by start, and the family they come from (None: no step). `con`
    has the name macros (catalog.reference_sql)."""
    if marker is not None:
        match, number, family = ("regexp_matches(x.name, $marker)",
                                 "TRY_CAST(regexp_extract(x.name, $marker, 1) AS BIGINT)", "NULL")
        params = {"marker": marker, "categories": list(reference.STEP_CATEGORIES)}
    else:
        match, number, family = ("step_marker_family(x.name) IS NOT NULL", "step_number(x.name)",
                                 "step_marker_family(x.name)")
        params = {"categories": list(reference.STEP_CATEGORIES)}
    rows = con.execute(
        f"""SELECT x.event_id, x.ts_ns, x.dur_ns, {number} AS number, {family} AS family
            FROM ({source}) x
            WHERE x.phase = 'X' AND list_contains($categories::VARCHAR[], x.category) AND {match}
              AND x.ts_ns IS NOT NULL AND x.dur_ns IS NOT NULL
            ORDER BY x.ts_ns, x.event_id""", params).fetchall()
    family = PATTERN if marker is not None and rows else None
    if marker is None and rows:
        present = {r[4] for r in rows}
        family = next(f for f in FAMILIES if f in present)
        rows = [r for r in rows if r[4] == family]
    numbers = [r[3] for r in rows]
    if family == "profiler_step" or (family == PATTERN and None not in numbers and len(set(numbers)) == len(numbers)):
        steps = numbers
    else:
        steps = list(range(len(rows)))
    cols = [[r[k] for r in rows] for k in range(3)] + [steps]
    return {k: np.asarray(v, dtype=np.int64) for k, v in zip(("event_id", "ts_ns", "dur_ns", "step"), cols)}, family


def assign_steps(ts: np.ndarray, valid: np.ndarray, windows: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(step, missing mask) for start times: the window that contains each start, by binary search."""
    steps = np.zeros(len(ts), dtype=np.int64)
    if not len(windows["ts_ns"]):
        return steps, np.ones(len(ts), dtype=bool)
    i = np.searchsorted(windows["ts_ns"], ts, side="right") - 1
    safe = np.clip(i, 0, None)
    inside = valid & (i >= 0) & (ts < windows["ts_ns"][safe] + windows["dur_ns"][safe])
    steps[inside] = windows["step"][safe[inside]]
    return steps, ~inside


def step_windows_table(run_id: str, windows: dict[str, np.ndarray]) -> pa.Table:
    n = len(windows["step"])
    return pa.table({"run_id": pa.array([run_id] * n, pa.string()), "step": windows["step"],
                     "event_id": windows["event_id"], "ts_ns": windows["ts_ns"], "dur_ns": windows["dur_ns"]},
                    schema=arrow_schemas()["step_windows"])


def restep_run(store: Store, run_id: str, marker: str | None = None) -> tuple[int, str | None]:
    """Re-derive a published run's steps with `marker` (None: the automatic choice) and publish
    the run with its new step_windows and events.step; returns (steps, family)."""

    marker = check_marker(marker)
    run_dir = store.run_dir(run_id)
    if not store.has_run(run_id):
        raise StoreError(f"no run {run_id} in {store.path}", "`traceduck runs` lists the runs")
    events = run_dir / "events.parquet"
    before = _identity(events)
    tmp = store.new_tmp_dir(run_id)
    try:
        con = duckdb.connect()
        try:
            con.execute(reference_sql())
            windows, family = find_windows(
                con, f"SELECT event_id, ts_ns, dur_ns, name, category, phase FROM read_parquet({literal(str(events))})",
                marker)
        finally:
            con.close()
        source = pq.ParquetFile(events)
        schema = source.schema_arrow
        with parquet_writer(tmp / "events.parquet", schema) as writer:
            for batch in source.iter_batches(batch_size=REWRITE_BATCH):
                ts = batch.column("ts_ns")
                timed = (pc.is_valid(ts).to_numpy(zero_copy_only=False)
                         & ~pc.fill_null(batch.column("on_device"), False).to_numpy(zero_copy_only=False))
                step, missing = assign_steps(pc.fill_null(ts, 0).to_numpy(), timed, windows)
                at = schema.get_field_index("step")
                batch = batch.set_column(at, schema.field("step"), pa.array(step, pa.int64(), mask=missing))
                writer.write_table(pa.Table.from_batches([batch], schema=schema))
        write_parquet(step_windows_table(run_id, windows), tmp / "step_windows.parquet", compression="zstd")
        for entry in os.scandir(run_dir):
            if entry.name in ("events.parquet", "step_windows.parquet") or not entry.is_file():
                continue
            if entry.name == "runs.parquet":  # a new file: readers see that the run changed (its stamp)
                shutil.copyfile(entry.path, tmp / entry.name)
                continue
            try:
                os.link(entry.path, tmp / entry.name)
            except OSError:
                shutil.copyfile(entry.path, tmp / entry.name)
        if _identity(events) != before:
            raise StoreError(f"run {run_id} changed while its steps were derived", "Run the command again")
        store.publish(tmp, run_id, replace=True)
    except BaseException:
        store.discard(tmp)
        raise
    return len(windows["step"]), family


def _identity(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size

