"""Comparing two runs: `traceduck diff A B` (the SQL is sql/diff.sql)."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from .catalog import sql_dir
from .db import Database, _first_line
from .errors import QueryError
from .reports import Report, parse_params, parse_report


@dataclass
class Diff:
    """The comparison rows and each run's time per step (or whole span when it has no steps)."""

    a: dict
    b: dict
    columns: list[str]
    rows: list[tuple]

    def header(self) -> str:
        return _header(self.a, self.b)


def _header(a: dict, b: dict) -> str:
    def side(run: dict) -> str:
        if run["steps"]:
            return f"{run['name']} {run['step_ns'] / 1e6:,.3f} ms/step ({run['steps']} steps)"
        if run["span_ns"] is None:
            return f"{run['name']} (no events)"
        return f"{run['name']} {run['span_ns'] / 1e6:,.3f} ms (no profiler steps)"

    return f"A: {side(a)}; B: {side(b)}"


def diff_report() -> Report:
    return parse_report(sql_dir() / "diff.sql")


def diff_relation(db: Database, a: str, b: str, by: str = "op", per_step: bool = False,
                  threshold_pct: float = 5.0) -> duckdb.DuckDBPyRelation:
    """Compare run selection `a` (baseline) with `b`: the rows as a DuckDB relation over only their files."""
    run_a, run_b = db.resolve_run(a), db.resolve_run(b)
    report = diff_report()
    values = parse_params(report, [f"by={by}", f"per_step={str(per_step).lower()}", f"threshold_pct={threshold_pct}"])
    values.update(a=run_a, b=run_b)
    cur = db.cursor([run_a, run_b])
    try:
        return cur.sql(report.sql.rstrip().rstrip(";"), params=values)
    except duckdb.Error as e:
        cur.close()
        raise QueryError(f"diff failed: {_first_line(str(e))}") from None


def step_times(db: Database, a: str, b: str) -> tuple[dict, dict]:
    """Each run's name, profiler steps, mean step time and span (ns), for the header of a diff."""
    run_a, run_b = db.resolve_run(a), db.resolve_run(b)
    rows = db.sql("""SELECT r.run_id, r.name, count(s.step), avg(s.dur_ns), any_value(r.end_ns - r.start_ns)
                     FROM runs r LEFT JOIN steps s USING (run_id) WHERE r.run_id IN (?, ?) GROUP BY ALL""",
                  [run_a, run_b]).fetchall()
    info = {rid: dict(zip(["name", "steps", "step_ns", "span_ns"], rest)) for rid, *rest in rows}
    return info[run_a], info[run_b]


def diff_header(db: Database, a: str, b: str) -> str:
    """'A: <name> <ms>/step (<n> steps); B: ...': each run's time per step (or span without steps)."""
    return _header(*step_times(db, a, b))


def diff_runs(db: Database, a: str, b: str, by: str = "op", per_step: bool = False,
              threshold_pct: float = 5.0) -> Diff:
    """Compare run selection `a` (baseline) with `b`: the rows and each run's time per step."""
    rel = diff_relation(db, a, b, by=by, per_step=per_step, threshold_pct=threshold_pct)
    try:
        columns, rows = list(rel.columns), rel.fetchall()
    except duckdb.Error as e:
        raise QueryError(f"diff failed: {_first_line(str(e))}") from None
    return Diff(*step_times(db, a, b), columns, rows)
