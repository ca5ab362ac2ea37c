"""Comparing two runs: `traceduck diff A B` (the SQL is sql/diff.sql).

The rows of a comparison are kept beside run B on first use (kept.py: `report-diff.<variant>`, the
variant a hash of run A's id and the identity of its events.parquet and of the parameters) and read
on later calls with the same runs and parameters: a run replaced on either side is compared again.
Nothing is kept while the session's reference tables differ from the shipped ones."""

from __future__ import annotations

from dataclasses import dataclass

import hashlib

import duckdb

from . import kept, selection
from .catalog import diff_spec, parse_params
from .engine import Engine
from .errors import QueryError
from .packs import data_stamp
from .sqltext import first_line, literal, quoted


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


def _resolve(engine: Engine, a: str, b: str) -> tuple[str, str]:
    runs = engine.runs()
    return selection.resolve(runs, a), selection.resolve(runs, b)


def diff_relation(engine: Engine, a: str, b: str, by: str = "op", per_step: bool = False,
                  threshold_pct: float = 5.0, exact_dims: bool = False) -> duckdb.DuckDBPyRelation:
    """Compare run selection `a` (baseline) with `b`: the rows as a DuckDB relation over only their files."""
    run_a, run_b = _resolve(engine, a, b)
    spec = diff_spec()
    values = parse_params(spec, [f"by={by}", f"per_step={str(per_step).lower()}", f"threshold_pct={threshold_pct}",
                                 f"exact_dims={str(exact_dims).lower()}"])
    values.update(a=run_a, b=run_b)
    cur = engine.cursor([run_a, run_b])
    try:
        where, variant = _kept_place(engine, run_a, run_b, values)
        found = kept.find(where, "diff", variant)
        if found is None and where is not None:
            cur.execute(f"CREATE OR REPLACE TEMP TABLE __diff AS SELECT row_number() OVER () AS __ord, * FROM ({spec.query})",
                        values)
            if kept.write(cur, where, "diff", "FROM __diff ORDER BY __ord", variant):
                found = kept.find(where, "diff", variant)
            if found is None:  # not kept (the store read-only or full): the rows computed just now
                return cur.sql("SELECT * EXCLUDE (__ord) FROM __diff ORDER BY __ord")
        if found is not None:
            columns = ", ".join(f"CAST({quoted(c.name)} AS {c.type}) AS {quoted(c.name)}" for c in spec.columns)
            return cur.sql(f"SELECT {columns} FROM read_parquet({literal(found)}) ORDER BY __ord")
        return cur.sql(spec.query, params=values)
    except duckdb.Error as e:
        cur.close()
        raise QueryError(f"diff failed: {first_line(str(e))}") from None


def _kept_place(engine: Engine, run_a: str, run_b: str, values: dict) -> tuple[str | None, str]:
    """Where the rows of this comparison are kept (beside run B) and their variant; (None, '') when
    they are not kept: a run without its own files, or reference tables changed in this session."""
    stamp_a = data_stamp(engine.store, run_a)
    if stamp_a is None or engine.references_changed:
        return None, ""
    text = repr((run_a, stamp_a, sorted(values.items())))
    return kept.directory(engine.store, run_b), hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def step_times(engine: Engine, a: str, b: str) -> tuple[dict, dict]:
    """Each run's name, profiler steps, mean step time and span (ns), for the header of a diff."""
    run_a, run_b = _resolve(engine, a, b)
    rows = engine.sql("""SELECT r.run_id, r.name, count(s.step), avg(s.dur_ns), any_value(r.end_ns - r.start_ns)
                     FROM runs r LEFT JOIN steps s USING (run_id) WHERE r.run_id IN (?, ?) GROUP BY ALL""",
                  [run_a, run_b]).fetchall()
    info = {rid: dict(zip(["name", "steps", "step_ns", "span_ns"], rest)) for rid, *rest in rows}
    return info[run_a], info[run_b]


def diff_header(engine: Engine, a: str, b: str) -> str:
    """'A: <name> <ms>/step (<n> steps); B: ...': each run's time per step (or span without steps)."""
    return _header(*step_times(engine, a, b))


def diff_runs(engine: Engine, a: str, b: str, by: str = "op", per_step: bool = False,
              threshold_pct: float = 5.0, exact_dims: bool = False) -> Diff:
    """Compare run selection `a` (baseline) with `b`: the rows and each run's time per step."""
    rel = diff_relation(engine, a, b, by=by, per_step=per_step, threshold_pct=threshold_pct, exact_dims=exact_dims)
    try:
        columns, rows = list(rel.columns), rel.fetchall()
    except duckdb.Error as e:
        raise QueryError(f"diff failed: {first_line(str(e))}") from None
    return Diff(*step_times(engine, a, b), columns, rows)
