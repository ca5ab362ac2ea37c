"""Folded stacks (`frame;frame;...;op value`) of a run, for speedscope and flamegraph.pl."""

from __future__ import annotations

import os
from pathlib import Path

from .engine import Engine
from .errors import ExportError, InputError
from .store import short_id

METRICS = ("cpu_self", "gpu")

# A frame name made safe for the folded format: `;` separates frames and a line is one stack.
_CLEAN = "replace(regexp_replace(coalesce({0}, '?'), '[\\r\\n\\t]+', ' ', 'g'), ';', ',')"

# Every CPU op's path: the Python frames of its stack, outermost first, then the ops around it on
# its thread, outermost first, then the op itself. Nested ops share their parent's Python stack
# in every trace seen, so the frames come first and the op chain after them.
_PATHS = f"""
WITH RECURSIVE ops AS MATERIALIZED (
  SELECT event_id, name, parent_op_id, stack_id, self_dur_ns FROM cpu_ops
), chain(event_id, ops_path) AS (
  SELECT event_id, {_CLEAN.format('name')} FROM ops WHERE parent_op_id IS NULL
  UNION ALL
  SELECT o.event_id, c.ops_path || ';' || {_CLEAN.format('o.name')}
  FROM ops o JOIN chain c ON o.parent_op_id = c.event_id
), frames AS (
  SELECT stack_id, string_agg({_CLEAN.format('frame')}, ';' ORDER BY frame_index DESC) AS frames_path
  FROM stacks GROUP BY stack_id
)
"""

# The value of each path, by metric; lines are summed per path and sorted by path.
_QUERIES = {
    # Self time of CPU ops (ns), on the op's path.
    "cpu_self": _PATHS + """
SELECT concat_ws(';', f.frames_path, c.ops_path) AS stack, sum(o.self_dur_ns)::BIGINT AS value
FROM ops o JOIN chain c USING (event_id) LEFT JOIN frames f USING (stack_id)
GROUP BY 1 HAVING sum(o.self_dur_ns) > 0 ORDER BY 1
""",
    # GPU kernel time (ns), on the path of the op that launched the kernel, then the kernel name;
    # the launch call's stack stands in when the call is outside any op, the kernel alone when its
    # launch is not in the trace.
    "gpu": _PATHS + f"""
SELECT concat_ws(';', f.frames_path, c.ops_path, {_CLEAN.format('k.name')}) AS stack, sum(k.dur_ns)::BIGINT AS value
FROM gpu_kernels k
LEFT JOIN launches l ON l.event_id = k.launch_event_id
LEFT JOIN ops o ON o.event_id = k.op_event_id
LEFT JOIN chain c ON c.event_id = k.op_event_id
LEFT JOIN frames f ON f.stack_id = coalesce(o.stack_id, l.stack_id)
GROUP BY 1 HAVING sum(k.dur_ns) > 0 ORDER BY 1
""",
}


def folded_stacks(engine: Engine, run_id: str, metric: str = "cpu_self") -> list[tuple[str, int]]:
    """(stack, value) lines of run `run_id`: frames root first, values in ns, sorted by stack."""
    if metric not in _QUERIES:
        raise ExportError(f"unknown metric {metric!r}", f"Use one of: {', '.join(METRICS)}")
    with Engine(engine.store, run_ids=[run_id]) as one:
        rows = one.sql(_QUERIES[metric]).fetchall()
    if not rows:
        what = "CPU op self time" if metric == "cpu_self" else "GPU kernel time"
        other = "gpu" if metric == "cpu_self" else "cpu_self"
        raise ExportError(f"run {short_id(run_id)} has no {what} to fold", f"Try --metric {other}")
    return [(stack, int(value)) for stack, value in rows]


def write_folded(engine: Engine, run_id: str, out: str | os.PathLike, metric: str = "cpu_self") -> tuple[int, int]:
    """Write the folded stacks of run `run_id` to OUT, one `stack value` line each; returns
    (lines, total value)."""
    lines = folded_stacks(engine, run_id, metric)
    out = Path(out)
    try:
        with open(out, "w", encoding="utf-8", newline="\n") as f:
            for stack, value in lines:
                f.write(f"{stack} {value}\n")
    except OSError as e:
        raise InputError(f"cannot write {out} ({e.strerror})") from None
    return len(lines), sum(v for _, v in lines)
