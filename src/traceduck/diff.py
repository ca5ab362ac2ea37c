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
        def side(run: dict) -> str:
            if run["steps"]:
                return f"{run['name']} {run['step_ns'] / 1e6:,.3f} ms/step ({run['steps']} steps)"
            if run["span_ns"] is None:
                return f"{run['name']} (no events)"
            return f"{run['name']} {run['span_ns'] / 1e6:,.3f} ms (no profiler steps)"

        return f"A: {side(self.a)}; B: {side(self.b)}"


def diff_report() -> Report:
    return parse_report(sql_dir() / "diff.sql")


def diff_runs(db: Database, a: str, b: str, by: str = "op", per_step: bool = False,
              threshold_pct: float = 5.0) -> Diff:
    """Compare run selection `a` (baseline) with `b`."""
    run_a, run_b = db.resolve_run(a), db.resolve_run(b)
    report = diff_report()
    values = parse_params(report, [f"by={by}", f"per_step={str(per_step).lower()}", f"threshold_pct={threshold_pct}"])
    values.update(a=run_a, b=run_b)
    scoped = db.scoped([run_a, run_b])
    try:
        cur = scoped.con.cursor()
        result = cur.execute(report.sql.rstrip().rstrip(";"), values)
        columns = [d[0] for d in result.description]
        rows = result.fetchall()
        info = {}
        for rid in (run_a, run_b):
            info[rid] = dict(zip(
                ["name", "steps", "step_ns", "span_ns"],
                cur.execute("""SELECT r.name, count(s.step), avg(s.dur_ns), any_value(r.end_ns - r.start_ns)
                               FROM runs r LEFT JOIN steps s USING (run_id) WHERE r.run_id = ? GROUP BY r.name""",
                            [rid]).fetchall()[0]))
    except duckdb.Error as e:
        raise QueryError(f"diff failed: {_first_line(str(e))}") from None
    finally:
        scoped.close()
    return Diff(info[run_a], info[run_b], columns, rows)
