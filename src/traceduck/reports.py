"""Canned reports: one SQL file each under sql/reports/, with a header the tool parses.

    -- title: Largest tensor copies by call site
    -- description: One line on what it answers.
    -- param: group_by VARCHAR = name {name|shape|call_site} -- what the parameter does
    -- param: capture RUN = -- a run selection, bound as the one run id it selects (NULL when not given)
    -- column: call_site VARCHAR -- what the column holds
    -- requires: one_job
    -- per-run: true
    SELECT ...

Parameters are bound ($name), never pasted into the SQL. Reports read the runs to cover from
the table `report_runs`, which the runner fills with the selected runs. `requires: one_job`
makes the runner refuse runs of several jobs, or two runs of one rank (see jobs.py).
`per-run: true` says that each run's rows depend on that run alone (no other run's data, as the
reports of a job do): `traceduck compact` then writes each member run's rows with the default
parameters into the pack, and the runner reads them from there (see packs.py and report_relation).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import duckdb

from .catalog import Column, sql_dir
from .db import Database, Stream, _first_line, _literal, summary_files
from .errors import QueryError, RunSelectionError, TraceduckError, with_suggestion
from .jobs import require_one_job

_PARAM = re.compile(r"^(\w+)\s+(\w+)\s*=\s*(.*?)\s*(?:\{([^}]*)\})?\s*--\s*(.+)$")
_COLUMN = re.compile(r"^(\w+)\s+(.+?)\s*--\s*(.+)$")
_TYPES = {"INTEGER": int, "BIGINT": int, "DOUBLE": float, "VARCHAR": str, "BOOLEAN": bool, "RUN": str}
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
    empty: str = ""  # what an empty answer means (the header's `-- empty:` line), shown instead of a bare table
    per_run: bool = False  # each run's rows depend on that run alone (the header's `-- per-run: true`)


def parse_report(path: Path) -> Report:
    """A report from its SQL file; the header is the leading `-- key: value` comment lines."""
    text = path.read_text()
    title = description = ""
    params: list[Param] = []
    columns: list[Column] = []
    requires: list[str] = []
    empty = ""
    per_run = False
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        key, _, value = line[2:].strip().partition(":")
        value = value.strip()
        if key == "title":
            title = value
        elif key == "description":
            description = value
        elif key == "empty":
            empty = value
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
        elif key == "per-run":
            if value not in ("true", "false"):
                raise ValueError(f"{path.name}: per-run is true or false: {value}")
            per_run = value == "true"
        elif key == "requires":
            requires += value.replace(",", " ").split()
            if not set(requires) <= {"one_job"}:
                raise ValueError(f"{path.name}: unknown requirement: {value}")
    return Report(path.stem, title, description, params, columns, text, path, requires, empty, per_run)


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


def resolve_run_params(db: Database, report: Report, values: dict[str, object]) -> list[str]:
    """Replace the run selection of each RUN parameter in `values` by the one run id it selects
    (NULL when empty); returns those run ids."""
    ids = []
    for p in report.params:
        if p.type != "RUN":
            continue
        if not values[p.name]:
            values[p.name] = None
            continue
        try:
            values[p.name] = db.resolve_run(str(values[p.name]))
        except RunSelectionError as e:
            raise RunSelectionError(f"--param {p.name}={values[p.name]}: {e.message}", e.hint) from None
        ids.append(values[p.name])
    return ids


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


@dataclass
class PreparedReport:
    """A report ready to run, whatever the engine: its typed parameters and the runs it covers."""

    report: Report
    bound: dict[str, object]  # the parameters its SQL names ($name), typed
    run_ids: list[str]  # the runs covered, in the order their rows come (see report_run_ids)
    other_runs: list[str]  # runs named by RUN parameters, which the query reads too
    dropped: list[str]  # run_id/run_name columns left out: a single run is covered


def prepare_report(db: Database, name: str, runs: list[str] | None = None, params: list[str] | None = None,
                   keep_run_columns: bool | None = None) -> PreparedReport:
    """Parse a report's parameters (`KEY=VALUE` strings), resolve its run parameters and the runs
    it covers (all runs by default); see report_relation."""
    report = get_report(name)
    values = parse_params(report, params or [])
    other_runs = resolve_run_params(db, report, values)
    run_ids = report_run_ids(db, runs)
    bound = {k: v for k, v in values.items() if f"${k}" in report.sql}
    columns = [c.name for c in report.columns]
    keep = keep_run_columns if keep_run_columns is not None else len(run_ids) != 1
    dropped = [c for c in RUN_COLUMNS if c in columns and not keep]
    return PreparedReport(report, bound, run_ids, other_runs, dropped)


def report_relation(db: Database, name: str, runs: list[str] | None = None, params: list[str] | None = None,
                    limit: int | None = None, keep_run_columns: bool | None = None) -> duckdb.DuckDBPyRelation:
    """A report over the selected runs (all runs by default) as a DuckDB relation, on a cursor of its
    own that holds the runs to cover (`report_runs`).

    Rows are grouped by run in the order of `report_run_ids` (rows of no listed run last), each
    run's rows in the report's own order; `limit` keeps that many rows per run. run_id/run_name columns are dropped when
    the selection is a single run, unless asked to keep them.
    """
    cur, sql, bound = report_query(db, name, runs, params, limit, keep_run_columns)
    try:
        return cur.sql(sql, params=bound)
    except duckdb.Error as e:
        cur.close()
        raise QueryError(f"report {name} failed: {_first_line(str(e))}") from None


def stream_report(db: Database, name: str, runs: list[str] | None = None, params: list[str] | None = None,
                  limit: int | None = None, keep_run_columns: bool | None = None,
                  json_rows: bool = False, lists_as_text: bool = False, per_run_cap: int | None = None) -> Stream:
    """A report's rows (as report_relation gives them) in batches of Python rows: memory holds one
    batch, whatever the report's size. The options let DuckDB do what an output format would do
    in Python, value by value (over a 1,024-rank job, ops-by-shape's 835,072 rows of input dims take
    3.1 s to fetch as Python lists, 0.7 s as text):

    - `json_rows`: each row comes as one value, the JSON text of its object (column: value, in
      column order), made by `to_json`, NaN and infinities as null: what json output writes; where
      a pack holds that text (a per-run report over packed runs, all rows, default parameters),
      each value is a chunk of rows' texts joined as json output joins them, as UTF-8 bytes;
    - `lists_as_text`: columns of lists of integers come as the text `json.dumps` gives them
      (`[[16384, 1, 576], []]`): what csv and the tables write;
    - `per_run_cap`: at most this many rows of each run (with a run_id column), and Stream.run_rows
      counts each run's rows before the cap as the batches are read: what the tables show, without
      fetching the rows they leave out (not with json_rows)."""
    prepared = prepare_report(db, name, runs, params, keep_run_columns)
    columns = [c for c in prepared.report.columns if c.name not in prepared.dropped]
    names = [c.name for c in columns]
    capped = per_run_cap is not None and "run_id" in names and not json_rows
    cur, sql, bound, run_text = _query(db, prepared, runs, (per_run_cap if limit is None else min(per_run_cap, limit))
                                       if capped else limit, capped, json_text=json_rows)
    nested = [_is_nested(c.type) for c in columns]
    if run_text is not None:  # the rows' text as the pack holds it: chunks of lines, a few at a time
        chunks = db.stream_query(cur, sql, bound, batch_rows=TEXT_BATCH).batches
        mark, runs_text = RUN_MARK.encode(), {run_id: text.encode() for run_id, text in run_text.items()}
        texts = ([(text.replace(mark, runs_text[run_id]),) for run_id, text in batch] for batch in chunks)
        return Stream(names, nested, texts, json_rows=True)
    if json_rows:
        sql = f"SELECT {_json_object(columns, 't')} AS row FROM ({sql}) t"
    elif lists_as_text:
        texts = [_quoted(c.name) for c in columns if _INT_LISTS.fullmatch(c.type)]
        if texts:  # to_json writes [[1,2],[]]; json.dumps the same with a space after each comma
            as_text = "replace(to_json({c})::VARCHAR, ',', ', ') AS {c}"
            sql = f"SELECT * REPLACE ({', '.join(as_text.format(c=c) for c in texts)}) FROM ({sql})"
            nested = [n and not _INT_LISTS.fullmatch(c.type) for n, c in zip(nested, columns)]
    result = db.stream_query(cur, sql, bound)
    result.nested = nested
    if json_rows:
        result.json_rows = True
    if capped:
        result = _counting_runs(result, names, limit)
    result.columns = names
    return result


def _is_nested(type_: str) -> bool:
    """Whether a column type (as a report's header writes it) holds lists, maps or structs."""
    return type_.rstrip().endswith("]") or type_.upper().startswith(("MAP", "STRUCT", "UNION"))


# a list (of lists ...) of integers: its JSON text has no strings, so no comma but the separators
_INT_LISTS = re.compile(r"(?:TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT)(?:\[\])+")


def _counting_runs(result: Stream, columns: list[str], limit: int | None) -> Stream:
    """The stream without its last column, __run_rows, whose counts go to Stream.run_rows (with a
    `--limit`, at most the limit: the rows beyond it are no rows to mention)."""
    counts: dict[str, int] = {}
    run_at, last = columns.index("run_id"), len(columns)

    def batches() -> Iterator[Sequence[tuple]]:
        for batch in result.batches:
            for row in batch:
                counts[row[run_at]] = row[last] if limit is None else min(row[last], limit)
            yield [row[:last] for row in batch]

    return Stream(columns, result.nested, batches(), run_rows=counts)


def report_query(db: Database, name: str, runs: list[str] | None = None, params: list[str] | None = None,
                 limit: int | None = None, keep_run_columns: bool | None = None
                 ) -> tuple[duckdb.DuckDBPyConnection, str, dict[str, object]]:
    """The cursor (holding `report_runs`), SQL and parameters of a report; see report_relation."""
    return _query(db, prepare_report(db, name, runs, params, keep_run_columns), runs, limit)[:3]


def _query(db: Database, prepared: PreparedReport, runs: list[str] | None, limit: int | None,
           run_rows: bool = False, json_text: bool = False
           ) -> tuple[duckdb.DuckDBPyConnection, str, dict[str, object], dict[str, str] | None]:
    """See report_query; `run_rows` adds a last column, __run_rows, each run's number of rows before
    `limit` (only with a run_id column). `json_text`: where the pack holds the rows' JSON text
    (json output of all rows), the query gives that text instead of the rows, and the last value
    returned is the text of each run's columns (see _packed_text_sql); else it is None."""
    name = prepared.report.name
    report, run_ids, other_runs, dropped = prepared.report, prepared.run_ids, prepared.other_runs, prepared.dropped
    # with runs selected, only their files are read: those of runs named by parameters too
    cur = db.cursor(list(dict.fromkeys(run_ids + other_runs)) if runs else None)
    try:
        if "one_job" in report.requires:
            require_one_job(cur, run_ids, name)
        cur.execute("CREATE OR REPLACE TEMP TABLE report_runs AS SELECT unnest(?::VARCHAR[]) AS run_id", [run_ids])
        cur.execute("CREATE OR REPLACE TEMP TABLE report_run_order AS "
                    "SELECT unnest($ids::VARCHAR[]) AS run_id, generate_subscripts($ids::VARCHAR[], 1) AS position",
                    {"ids": run_ids})
        sql = report.sql.rstrip().rstrip(";")
        if _reads_pack(cur, prepared):
            if json_text and limit is None and not run_rows and has_json_text(report):
                text_sql, run_text = _packed_text_sql(cur, report, run_ids, dropped)
                return cur, text_sql, {}, run_text
            return cur, _packed_rows_sql(report, dropped, limit, run_rows), {}, None
        # the header's columns (a test holds them equal to the query's): binding a report's views
        # costs more than running it on a small store, so it is bound once, below
        if "run_id" in [c.name for c in report.columns]:
            # row_number() OVER () numbers rows as they stream, i.e. in the report's own order
            per_run = "" if limit is None else \
                f"QUALIFY row_number() OVER (PARTITION BY r.run_id ORDER BY r.__row) <= {int(limit)}"
            count = ", count(*) OVER (PARTITION BY r.run_id) AS __run_rows" if run_rows else ""
            sql = (f"SELECT r.* EXCLUDE (__row{''.join(', ' + c for c in dropped)}){count} "
                   f"FROM (SELECT row_number() OVER () AS __row, * FROM ({sql})) r "
                   f"LEFT JOIN report_run_order o ON o.run_id = r.run_id {per_run} "
                   "ORDER BY coalesce(o.position, 9223372036854775807), r.__row")
        else:
            if dropped:
                sql = f"SELECT * EXCLUDE ({', '.join(dropped)}) FROM ({sql})"
            if limit is not None:
                sql = f"SELECT * FROM ({sql}) LIMIT {int(limit)}"
    except duckdb.Error as e:
        cur.close()
        raise QueryError(f"report {name} failed: {_first_line(str(e))}") from None
    return cur, sql, prepared.bound, None


def report_file(name: str) -> str:
    """The file of a pack that holds a per-run report's rows."""
    return f"report-{name}.parquet"


def report_text_file(name: str) -> str:
    """The file of a pack that holds a per-run report's rows as JSON text (see report_text_sql)."""
    return f"report-{name}.json.parquet"


# A pack's JSON text of a per-run report: each row's object as json output writes it, without the
# run columns, which start every row (run_name changes: a rename shows); in their place, RUN_MARK,
# a character JSON text never holds raw (to_json escapes control characters as \u0001). The rows
# of a run are joined as json output joins them, TEXT_ROWS rows to a chunk, in the run's order; the
# chunks come in the order of the runs in a report over the pack's runs (by name, then id, when
# packed), in row groups of about TEXT_GROUP_BYTES of text: what the database holds while it
# streams them (a row group of 1,024 runs' text is 200 MB).
RUN_MARK = "\x01"
TEXT_ROWS = 1000
TEXT_GROUP_BYTES = 4_000_000
TEXT_BATCH = 8  # chunks fetched at a time: memory holds a few chunks of text, not the report's
LINE_SEPARATOR = ",\n  "  # between two rows' objects in json output (render._write_lines)


def has_json_text(report: Report) -> bool:
    """Whether a pack holds this report's JSON text: a per-run report whose first columns are the
    run's (every shipped one), with columns besides them."""
    names = [c.name for c in report.columns]
    return report.per_run and tuple(names[:len(RUN_COLUMNS)]) == RUN_COLUMNS and len(names) > len(RUN_COLUMNS)


def _json_object(columns: list[Column], alias: str) -> str:
    """The JSON text of a row's object (`columns` of the relation `alias`, in that order), as json
    output writes it: `to_json` of the row, NaN and infinities as null (as orjson writes them)."""
    values = [f"CASE WHEN isfinite({alias}.{_quoted(c.name)}) THEN {alias}.{_quoted(c.name)} END"
              if c.type == "DOUBLE" else f"{alias}.{_quoted(c.name)}" for c in columns]
    return f"to_json(struct_pack({', '.join(f'{_quoted(c.name)} := {v}' for c, v in zip(columns, values))}))::VARCHAR"


def report_text_sql(report: Report, rows_file: str) -> str:
    """A query of the JSON text of a per-run report's rows from the pack's file of its rows
    (`rows_file`, see per_run_rows): per run, the rows' objects without the run columns, each
    starting at RUN_MARK in place of `{"run_id":...,"run_name":...,` and joined as json output
    joins them, TEXT_ROWS rows a chunk (run_id, __part, text), runs in the order of the table
    report_run_order (run_id, position): what `traceduck compact` writes into a pack
    (report_text_file). The values are read as _packed_rows_sql reads them."""
    columns = [c for c in report.columns if c.name not in RUN_COLUMNS]
    values = ", ".join(f"CAST(s.{_quoted(c.name)} AS {c.type}) AS {_quoted(c.name)}" for c in columns)
    return (f"SELECT run_id, __part, string_agg('{RUN_MARK}' || substr(__json, 2), {_literal(LINE_SEPARATOR)} "
            f"ORDER BY __pos) AS text FROM (SELECT run_id, __pos, (__pos - 1) // {TEXT_ROWS} AS __part, "
            f"{_json_object(columns, 'v')} AS __json FROM (SELECT s.run_id, s.__pos, {values} "
            f"FROM read_parquet({_literal(rows_file)}) s) v) t GROUP BY run_id, __part "
            "ORDER BY (SELECT position FROM report_run_order o WHERE o.run_id = t.run_id) NULLS LAST, run_id, __part")


def _packed_text_sql(cur: duckdb.DuckDBPyConnection, report: Report, run_ids: list[str],
                     dropped: list[str]) -> tuple[str, dict[str, str]]:
    """A query of the JSON text of a per-run report's rows from the packs' text (report_text_sql):
    chunks of lines (run_id, text as UTF-8 bytes: written as they are, neither decoded nor encoded
    again) in the order _packed_rows_sql gives the rows; and the text of each run's columns, for
    RUN_MARK in its chunks: its id and current name, or none when they are dropped (put in by the
    caller: a lookup in the database per chunk costs more than all the rest). The chunks stream as
    the files hold them when that is this order (the runs of one pack, named as when packed, so no
    sort holds them all), else are sorted."""
    files = summary_files(report_text_file(report.name).removesuffix(".parquet"))
    run = ("'{'" if dropped else
           """'{"run_id":' || to_json(r.run_id)::VARCHAR || ',"run_name":' || to_json(r.name)::VARCHAR || ','""")
    prefixes = dict(cur.execute(f"SELECT r.run_id, {run} FROM runs r JOIN report_run_order o ON o.run_id = r.run_id")
                    .fetchall())
    position = {run_id: i for i, run_id in enumerate(run_ids)}
    last = (-1, -1)
    for run_id, part in cur.execute(f"SELECT run_id, __part FROM read_parquet({files})").fetchall():
        if run_id not in prefixes or (position[run_id], part) <= last:
            return (f"SELECT t.run_id, encode(t.text) AS text FROM read_parquet({files}) t "
                    "JOIN runs r USING (run_id) JOIN report_run_order o ON o.run_id = t.run_id "
                    "ORDER BY o.position, t.__part"), prefixes
        last = (position[run_id], part)
    return f"SELECT run_id, encode(text) AS text FROM read_parquet({files})", prefixes


def _reads_pack(cur: duckdb.DuckDBPyConnection, prepared: PreparedReport) -> bool:
    """Whether the rows come from the packs: a per-run report with its default parameters over runs
    that the chosen packs all summarize (the cursor's variables, see db.py)."""
    report = prepared.report
    if not report.per_run or prepared.other_runs or not prepared.run_ids:
        return False
    if any(prepared.bound.get(p.name, p.default) != p.default for p in report.params):
        return False
    return bool(cur.execute("SELECT coalesce(getvariable('traceduck_all_summarized'), false)").fetchall()[0][0])


def _packed_rows_sql(report: Report, dropped: list[str], limit: int | None, run_rows: bool = False) -> str:
    """The rows of a per-run report from the packs' files (see packs.compact), in the order
    report_relation gives: runs in the order of report_run_order, each run's rows in the report's;
    `run_rows`: with each run's number of rows (before `limit`) last, as __run_rows."""
    files = summary_files(report_file(report.name).removesuffix(".parquet"))
    columns = ", ".join(f"r.name AS run_name" if c.name == "run_name" else f"CAST(s.{_quoted(c.name)} AS {c.type}) AS {_quoted(c.name)}"
                        for c in report.columns if c.name not in dropped)
    keep = "" if limit is None else f"AND s.__pos <= {int(limit)}"
    count, counts = "", ""
    if run_rows:  # the positions alone: the other columns of the rows left out are not read
        count = ", n.__run_rows"
        counts = (f"JOIN (SELECT run_id, count(*) AS __run_rows FROM read_parquet({files}) GROUP BY run_id) n "
                  "ON n.run_id = s.run_id ")
    return (f"SELECT {columns}{count} FROM read_parquet({files}) s JOIN runs r USING (run_id) {counts}"
            f"JOIN report_run_order o ON o.run_id = s.run_id WHERE true {keep} ORDER BY o.position, s.__pos")


def per_run_rows(db: Database, name: str) -> duckdb.DuckDBPyRelation:
    """A per-run report's rows over every run of `db` with its default parameters, each with its
    position within its run (__pos) and without run_name (names change), on a cursor of its own:
    what `traceduck compact` writes into a pack (report_file)."""
    prepared = prepare_report(db, name, keep_run_columns=True)
    report = prepared.report
    cur = db.cursor()
    cur.execute("CREATE OR REPLACE TEMP TABLE report_runs AS SELECT unnest(?::VARCHAR[]) AS run_id", [prepared.run_ids])
    sql = report.sql.rstrip().rstrip(";")
    drop = ", run_name" if "run_name" in [c.name for c in report.columns] else ""
    return cur.sql(f"SELECT * EXCLUDE (__row{drop}), row_number() OVER (PARTITION BY run_id ORDER BY __row) AS __pos "
                   f"FROM (SELECT row_number() OVER () AS __row, * FROM ({sql}))", params=prepared.bound)


def run_report(db: Database, name: str, runs: list[str] | None = None, params: list[str] | None = None,
               limit: int | None = None, keep_run_columns: bool | None = None) -> tuple[list[str], list[tuple]]:
    """Run a report over the selected runs (all runs by default): (columns, rows); see report_relation."""
    rel = report_relation(db, name, runs, params, limit, keep_run_columns)
    try:
        return list(rel.columns), rel.fetchall()
    except duckdb.Error as e:
        raise QueryError(f"report {name} failed: {_first_line(str(e))}") from None


def split_pairs(pairs: list[str], option: str = "--param") -> dict[str, str]:
    """`KEY=VALUE` strings -> {KEY: VALUE} (the last of a repeated key wins)."""
    out = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep:
            raise ReportError(f"{option} {pair!r} is not KEY=VALUE")
        out[key] = text
    return out


def _quoted(column: str) -> str:
    return '"' + column.replace('"', '""') + '"'


__all__ = ["PreparedReport", "Report", "ReportError", "all_reports", "get_report", "has_json_text", "per_run_rows",
           "prepare_report", "report_file", "report_query", "report_relation", "report_run_ids", "report_text_file",
           "report_text_sql", "run_report", "stream_report", "RunSelectionError"]
