"""Canned reports: one SQL file each under sql/reports/, with a header the tool parses.

    -- title: Largest tensor copies by call site
    -- description: One line on what it answers.
    -- param: group_by VARCHAR = name {name|shape|call_site} -- what the parameter does
    -- column: call_site VARCHAR -- what the column holds
    -- requires: one_job
    SELECT ...

Parameters are bound ($name), never pasted into the SQL. Reports read the runs to cover from
the table `report_runs`, which the runner fills with the selected runs. `requires: one_job`
makes the runner refuse runs of several jobs, or two runs of one rank (see jobs.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import duckdb

from .catalog import Column, sql_dir
from .db import Database, _first_line
from .errors import QueryError, RunSelectionError, TraceduckError, with_suggestion
from .jobs import require_one_job

_PARAM = re.compile(r"^(\w+)\s+(\w+)\s*=\s*(.*?)\s*(?:\{([^}]*)\})?\s*--\s*(.+)$")
_COLUMN = re.compile(r"^(\w+)\s+(.+?)\s*--\s*(.+)$")
_TYPES = {"INTEGER": int, "BIGINT": int, "DOUBLE": float, "VARCHAR": str, "BOOLEAN": bool}
RUN_COLUMNS = ("run_id", "run_name")


class ReportError(TraceduckError):
    """A report name or parameter is wrong."""


@dataclass
class Param:
    name: str
    type: str
    default: object
    doc: str
    choices: list[str] = field(default_factory=list)

    def convert(self, text: str) -> object:
        if self.choices and text not in self.choices:
            raise ReportError(f"--param {self.name}={text!r} is not one of {', '.join(self.choices)}")
        try:
            if self.type == "BOOLEAN":
                if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError(text)
                return text.lower() in ("true", "1", "yes")
            return _TYPES[self.type](text)
        except ValueError:
            raise ReportError(f"--param {self.name}={text!r} is not a valid {self.type}") from None


@dataclass
class Report:
    name: str
    title: str
    description: str
    params: list[Param]
    columns: list[Column]
    sql: str
    path: Path
    requires: list[str] = field(default_factory=list)  # checks before running: one_job


def parse_report(path: Path) -> Report:
    """A report from its SQL file; the header is the leading `-- key: value` comment lines."""
    text = path.read_text()
    title = description = ""
    params: list[Param] = []
    columns: list[Column] = []
    requires: list[str] = []
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        key, _, value = line[2:].strip().partition(":")
        value = value.strip()
        if key == "title":
            title = value
        elif key == "description":
            description = value
        elif key == "param":
            m = _PARAM.match(value)
            if not m:
                raise ValueError(f"{path.name}: bad param line: {value}")
            name, typ, default, choices, doc = m.groups()
            default = default.strip("'\"") if typ == "VARCHAR" else default
            p = Param(name, typ, None, doc, choices.split("|") if choices else [])
            p.default = p.convert(default) if default != "" or typ == "VARCHAR" else None
            params.append(p)
        elif key == "column":
            m = _COLUMN.match(value)
            if not m:
                raise ValueError(f"{path.name}: bad column line: {value}")
            columns.append(Column(*m.groups()))
        elif key == "requires":
            requires += value.replace(",", " ").split()
            if not set(requires) <= {"one_job"}:
                raise ValueError(f"{path.name}: unknown requirement: {value}")
    return Report(path.stem, title, description, params, columns, text, path, requires)


@lru_cache(maxsize=1)
def all_reports() -> dict[str, Report]:
    """Every report shipped in sql/reports, by name."""
    return {p.stem: parse_report(p) for p in sorted((sql_dir() / "reports").glob("*.sql"))}


def get_report(name: str) -> Report:
    reports = all_reports()
    if name not in reports:
        raise ReportError(f"no report named {name!r}", with_suggestion(f"Reports: {', '.join(reports)}", name, reports))
    return reports[name]


def parse_params(report: Report, pairs: list[str]) -> dict[str, object]:
    """`KEY=VALUE` strings -> typed values for the report's parameters (defaults filled in)."""
    values = {p.name: p.default for p in report.params}
    known = {p.name: p for p in report.params}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep:
            raise ReportError(f"--param {pair!r} is not KEY=VALUE")
        if key not in known:
            accepted = ", ".join(known) or "none"
            raise ReportError(f"report {report.name} has no parameter {key!r}",
                              with_suggestion(f"Parameters: {accepted}", key, known))
        values[key] = known[key].convert(text)
    return values


def report_run_ids(db: Database, runs: list[str] | None = None) -> list[str]:
    """The runs a report covers, in the order its rows come: the order of the selections given
    (a selection matching several runs, such as a label, lists them by name, then id), else every
    run in the store by name, then id. Run ids are hashes: ordering by them would shuffle runs."""
    names = {r["run_id"]: r["name"] or "" for r in db.runs()}

    def by_name(run_id: str) -> tuple[str, str]:
        return names.get(run_id, ""), run_id

    if runs:
        ids = [rid for r in runs for rid in sorted(db.select_runs(r), key=by_name)]
    else:
        ids = sorted(names, key=by_name)
    return list(dict.fromkeys(ids))


def order_by_run(columns: list[str], rows: list[tuple], run_ids: list[str],
                 limit: int | None = None) -> list[tuple]:
    """Rows grouped by run in the order of `run_ids`, each run's rows in the report's own order,
    and at most `limit` rows per run. Rows of a run not in `run_ids` (or without one) come last."""
    if "run_id" not in columns:
        return rows if limit is None else rows[:limit]
    at = columns.index("run_id")
    position = {rid: i for i, rid in enumerate(run_ids)}
    ordered = sorted(rows, key=lambda row: position.get(row[at], len(position)))  # stable: keeps the report's order
    if limit is None:
        return ordered
    kept: dict[object, int] = {}
    out = []
    for row in ordered:
        n = kept.get(row[at], 0)
        if n < limit:
            out.append(row)
            kept[row[at]] = n + 1
    return out


def run_report(db: Database, name: str, runs: list[str] | None = None, params: list[str] | None = None,
               limit: int | None = None, keep_run_columns: bool | None = None) -> tuple[list[str], list[tuple]]:
    """Run a report over the selected runs (all runs by default): (columns, rows).

    Runs come in the order of `report_run_ids`; `limit` keeps that many rows per run. run_id/run_name
    columns are dropped when the selection is a single run, unless asked to keep them.
    """
    report = get_report(name)
    values = parse_params(report, params or [])
    run_ids = report_run_ids(db, runs)
    scoped = db.scoped(run_ids) if runs else None  # read only the selected runs' files
    cur = (scoped or db).con.cursor()
    try:
        if "one_job" in report.requires:
            require_one_job(cur, run_ids, name)
        cur.execute("CREATE OR REPLACE TEMP TABLE report_runs AS SELECT unnest(?::VARCHAR[]) AS run_id", [run_ids])
        sql = report.sql.rstrip().rstrip(";")
        bound = {k: v for k, v in values.items() if f"${k}" in report.sql}
        result = cur.execute(sql, bound)
        columns = [d[0] for d in result.description]
        rows = result.fetchall()
    except duckdb.Error as e:
        raise QueryError(f"report {name} failed: {_first_line(str(e))}") from None
    finally:
        cur.close()
        if scoped is not None:
            scoped.close()
    rows = order_by_run(columns, rows, run_ids, None if limit is None else int(limit))
    keep = keep_run_columns if keep_run_columns is not None else len(run_ids) != 1
    if not keep:
        idx = [i for i, c in enumerate(columns) if c not in RUN_COLUMNS]
        columns = [columns[i] for i in idx]
        rows = [tuple(row[i] for i in idx) for row in rows]
    return columns, rows


__all__ = ["Report", "ReportError", "all_reports", "get_report", "report_run_ids", "run_report", "RunSelectionError"]
