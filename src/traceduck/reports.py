"""Running canned reports (one SQL file each under sql/reports/; catalog.py parses their headers).

`query(engine, name, ...)` makes a ReportQuery: the report with its typed parameters, on a cursor
of its own that holds the runs it covers (the temp tables `report_runs` and `report_run_order`),
used as a DuckDB relation (`relation()`, `fetch()`) or as a stream of batches in the shape an
output format asks for (`stream(render.RowShape)`). Rows come grouped by run in the order of the
selections (selection.in_order), each run's rows in the report's own order.

A per-run report (`-- per-run: true`) over runs that the chosen packs all summarize, with its
default parameters, reads its rows from the packs, where `traceduck compact` wrote them
(per_run_rows, report_text_sql; see packs.py). So does a report that compares the ranks of a job
(is_job_report: overview, ranks, collectives, collective-skew) when the runs it covers are whole
jobs of the packs, grouped into the same jobs and named as when packed (job_rows_held).

Over runs that no pack summarizes, a report with its default parameters (a `--limit` only cuts
them) keeps each run's rows beside the run on first use and reads them on later calls (kept.py): a
per-run report for any runs, a report that compares a job's ranks for a selection of one run. The check costs a directory listing and a digest per run:
the report's view stack is not planned when every run's rows are kept.

Overview over more than JOB_CHUNK runs whose rows no pack holds (a packed job and a rank added
since, or a big store never packed) is computed JOB_CHUNK runs at a time, as `compact` computes it
(over 4,097 runs at once it took 104 s and 20 GB): its only comparison across runs, the straggler of
each job (macro job_stragglers), is computed once over every run covered and read by each slice.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import duckdb

from . import kept, selection
from .catalog import Column, Report, get_report, parse_params
from .engine import Engine, LostFileError
from .errors import QueryError, RunSelectionError
from .jobs import require_one_job
from .render import LINE_SEPARATOR, RowShape, is_nested_type, json_object_sql, shaped_sql
from .results import Stream
from .runs_table import LOST_FILE_RETRIES
from .sqltext import first_line, literal, quoted
from .store import short_id

RUN_COLUMNS = ("run_id", "run_name")
# overview's rows over more runs than this are computed this many runs at a time, each slice
# against the stragglers of all the runs covered (its findings read every op of the runs: 7-8 GB
# over a 1,024-rank job at once, 0.95 GB over 64 ranks, 0.6 GB over 32); compact does the same
JOB_CHUNK = 32
SLICED = "overview"  # the report computed a slice of runs at a time (its one comparison: job_stragglers)
_LAST = 9223372036854775807  # the position of rows of no listed run: last

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


def report_file(name: str) -> str:
    """The file of a pack that holds a per-run report's rows (without .parquet: a summary file name)."""
    return f"report-{name}"


def job_report_file(name: str) -> str:
    """The file of a pack that holds a job report's rows over the pack's runs (see is_job_report)."""
    return f"job-report-{name}"


# The file of a pack that lists its runs as they were grouped into jobs and named when packed, with
# the job reports whose rows it holds (run_id, run_name, job_id, reports).
JOB_RUNS_FILE = "job-runs"


def is_job_report(report: Report) -> bool:
    """A report whose rows for a run depend on the other selected runs of its job (not per-run), with
    the run's columns first: a pack holds its rows over the pack's runs."""
    names = [c.name for c in report.columns]
    return not report.per_run and tuple(names[:len(RUN_COLUMNS)]) == RUN_COLUMNS


def job_rows_held(cur: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether the packs' rows of job report `name` are its rows over the runs of `cur` (report_runs,
    every one of them summarized): each run's pack holds the report's rows, the run is in the job
    and has the name it had when packed, and no job of the runs spans two packs (so each job's runs
    are the same as when its pack computed the rows)."""
    files = f"summary_files({literal(JOB_RUNS_FILE)})"
    return bool(cur.execute(
        f"WITH held AS (SELECT *, parse_dirpath(filename) AS pack FROM read_parquet({files}, filename = true)) "
        "SELECT (SELECT count(*) FROM held) = (SELECT count(*) FROM report_runs) "
        "AND (SELECT count(*) FROM held h JOIN run_jobs j USING (run_id) WHERE h.run_name = j.run_name "
        "     AND h.job_id = j.job_id AND list_contains(h.reports, $name) "
        "     AND h.run_id IN (SELECT run_id FROM report_runs)) = (SELECT count(*) FROM report_runs) "
        "AND NOT EXISTS (SELECT job_id FROM held GROUP BY job_id HAVING count(DISTINCT pack) > 1)",
        {"name": name}).fetchall()[0][0])


def report_text_file(name: str) -> str:
    """The file of a pack that holds a per-run report's rows as JSON text (see report_text_sql)."""
    return f"report-{name}.json"


def has_json_text(report: Report) -> bool:
    """Whether a pack holds this report's JSON text: a per-run report whose first columns are the
    run's (every shipped one), with columns besides them."""
    names = [c.name for c in report.columns]
    return report.per_run and tuple(names[:len(RUN_COLUMNS)]) == RUN_COLUMNS and len(names) > len(RUN_COLUMNS)


@dataclass
class ReportQuery:
    """A report ready to run over the runs it covers, on a cursor of its own (see the module docstring)."""

    report: Report
    cursor: duckdb.DuckDBPyConnection
    engine: Engine
    params: dict[str, object]  # the parameters its SQL names ($name), typed
    run_ids: list[str]  # the runs covered, in the order their rows come
    dropped: list[str]  # run_id/run_name columns left out: a single run is covered
    limit: int | None  # rows per run
    packed: bool  # its rows are read from the packs
    rows_file: str = ""  # the packs' file of its rows (report_file or job_report_file), when packed
    kept_files: list[str] | None = None  # the files its rows are read from, kept beside its runs (kept.py)
    sliced: bool = False  # its rows are in the cursor's temp table __sliced, computed a slice at a time
    renew: Callable[[], ReportQuery] | None = None  # the same report over the runs published now
    selected: bool = False  # runs were asked for (else: every run)
    columns: list[Column] = field(init=False)

    def __post_init__(self) -> None:
        self.columns = [c for c in self.report.columns if c.name not in self.dropped]

    def sql(self, limit: int | None = None, run_rows: bool = False) -> str:
        """The rows' SQL: at most `limit` rows per run; `run_rows` adds a last column, __run_rows,
        each run's number of rows before the limit (only with a run_id column)."""
        if self.packed:
            return self._packed_sql(limit, run_rows)
        if self.kept_files is not None:
            return self._kept_sql(limit, run_rows)
        if self.sliced:
            return self._ordered_rows_sql("__sliced", limit, run_rows)
        sql = self.report.query
        if "run_id" not in [c.name for c in self.report.columns]:
            if self.dropped:
                sql = f"SELECT * EXCLUDE ({', '.join(self.dropped)}) FROM ({sql})"
            return sql if limit is None else f"SELECT * FROM ({sql}) LIMIT {int(limit)}"
        # row_number() OVER () numbers rows as they stream, i.e. in the report's own order
        per_run = "" if limit is None else f"QUALIFY row_number() OVER (PARTITION BY r.run_id ORDER BY r.__row) <= {int(limit)}"
        count = ", count(*) OVER (PARTITION BY r.run_id) AS __run_rows" if run_rows else ""
        return (f"SELECT r.* EXCLUDE (__row{''.join(', ' + c for c in self.dropped)}){count} "
                f"FROM (SELECT row_number() OVER () AS __row, * FROM ({sql})) r "
                f"LEFT JOIN report_run_order o ON o.run_id = r.run_id {per_run} "
                f"ORDER BY coalesce(o.position, {_LAST}), r.__row")

    def _packed_sql(self, limit: int | None, run_rows: bool, files: str | None = None) -> str:
        """The rows from the packs' files (see compaction.py), or from `files` (a per-run report's rows
        kept beside its runs), in the order of report_run_order, each run's rows in the report's."""
        files = files or f"summary_files({literal(self.rows_file)})"
        columns = ", ".join("r.name AS run_name" if c.name == "run_name" else
                            f"CAST(s.{quoted(c.name)} AS {c.type}) AS {quoted(c.name)}" for c in self.columns)
        keep = "" if limit is None else f"AND s.__pos <= {int(limit)}"
        count, counts = "", ""
        if run_rows:  # the positions alone: the other columns of the rows left out are not read
            count = ", n.__run_rows"
            counts = (f"JOIN (SELECT run_id, count(*) AS __run_rows FROM read_parquet({files}) GROUP BY run_id) n "
                      "ON n.run_id = s.run_id ")
        return (f"SELECT {columns}{count} FROM read_parquet({files}) s JOIN runs r USING (run_id) {counts}"
                f"JOIN report_run_order o ON o.run_id = s.run_id WHERE true {keep} ORDER BY o.position, s.__pos")

    def _kept_sql(self, limit: int | None, run_rows: bool) -> str:
        """The rows from the files kept beside the runs (kept.py): a per-run report's as from a pack;
        a job report's (one run) as they were computed, run_name included (its variant is the run's
        row), in their order (__ord), each run's position (__pos) for the limit."""
        files = "[" + ", ".join(literal(f) for f in self.kept_files or []) + "]"
        if self.report.per_run:
            return self._packed_sql(limit, run_rows, files)
        return self._ordered_rows_sql(f"read_parquet({files})", limit, run_rows)

    def _ordered_rows_sql(self, source: str, limit: int | None, run_rows: bool) -> str:
        """The rows of `source` (the report's columns, __ord: their order, __pos: each row's
        position in its run), at most `limit` per run, in their order."""
        columns = ", ".join(f"CAST(s.{quoted(c.name)} AS {c.type}) AS {quoted(c.name)}" for c in self.columns)
        keep = "" if limit is None else f"AND s.__pos <= {int(limit)}"
        count = ", s.__run_rows" if run_rows else ""
        return (f"SELECT {columns}{count} FROM (SELECT *, count(*) OVER (PARTITION BY run_id) AS __run_rows "
                f"FROM {source}) s WHERE true {keep} ORDER BY s.__ord")

    def _bound(self) -> dict[str, object]:
        """The parameters the rows' SQL takes: none when they are read from the packs or kept files."""
        return {} if self.packed or self.kept_files is not None or self.sliced else self.params

    def relation(self) -> duckdb.DuckDBPyRelation:
        """The rows as a DuckDB relation (`.fetchall()`, `.df()`, `.pl()`), at most `limit` per run."""
        try:
            return self.cursor.sql(self.sql(self.limit), params=self._bound())
        except duckdb.Error as e:
            raise QueryError(f"report {self.report.name} failed: {first_line(str(e))}") from None

    def fetch(self) -> tuple[list[str], list[tuple]]:
        """(columns, rows) of the relation; over the runs published now when a run it covered was
        removed or replaced while it ran (see `_again`)."""
        for attempt in range(LOST_FILE_RETRIES + 1):
            try:
                rel = self.cursor.sql(self.sql(self.limit), params=self._bound())
                return list(rel.columns), rel.fetchall()
            except duckdb.Error as e:
                if attempt == LOST_FILE_RETRIES or not self.engine._lost_file(e):
                    gone = self.engine._gone_run(e)
                    if gone is not None:
                        raise LostFileError(f"run {short_id(gone)} was removed while report {self.report.name} ran",
                                            "`traceduck runs` lists the runs", gone) from None
                    raise QueryError(f"report {self.report.name} failed: {first_line(str(e))}") from None
                self._again(attempt, self.engine._gone_run(e))
        raise AssertionError("unreachable")

    def _again(self, attempt: int, gone: str | None) -> None:
        """After a run's file vanished under the query: a run asked for that is gone is an error
        naming it; else the report is made again over the runs published now (a removed run left
        out, a replaced one read anew)."""
        if gone is not None and self.selected and gone in self.run_ids:
            raise LostFileError(f"run {short_id(gone)} was removed while report {self.report.name} ran",
                                "`traceduck runs` lists the runs", gone)
        time.sleep(0.01 * (attempt + 1))
        self.engine.relist()
        if self.renew is None:
            return
        fresh = self.renew()
        self.cursor.close()
        self.__dict__.update(fresh.__dict__)

    def stream(self, shape: RowShape = RowShape()) -> Stream:
        """The rows in batches of Python rows, in `shape`: memory holds one batch, whatever the
        report's size. With json_rows, where a pack holds the rows' JSON text (all rows, default
        parameters), each value is a chunk of rows' texts joined as json output joins them, as UTF-8
        bytes."""
        for attempt in range(LOST_FILE_RETRIES + 1):
            try:
                return self._stream(shape)
            except LostFileError as e:
                if attempt == LOST_FILE_RETRIES:
                    raise
                self._again(attempt, e.run_id)
        raise AssertionError("unreachable")

    def _stream(self, shape: RowShape) -> Stream:
        names = [c.name for c in self.columns]
        nested = [is_nested_type(c.type) for c in self.columns]
        if shape.json_rows and self.packed and self.limit is None and has_json_text(self.report):
            return Stream(names, nested, self._packed_text(), json_rows=True)
        capped = shape.per_run_cap is not None and "run_id" in names and not shape.json_rows
        limit = self.limit if not capped else shape.per_run_cap if self.limit is None else min(shape.per_run_cap, self.limit)
        sql = self.sql(limit, run_rows=capped)
        if self.runs_left_out(shape):  # the first runs' rows: the others are counted, not fetched
            sql = (f"SELECT * FROM ({sql}) WHERE run_id IN "
                   f"(SELECT run_id FROM report_run_order WHERE position <= {int(shape.run_cap)})")
        sql, shaped_nested = shaped_sql(self.columns, sql, shape)
        result = self.engine.stream(sql, self._bound(), cur=self.cursor)
        result.columns, result.nested, result.json_rows = names, shaped_nested or nested, shape.json_rows
        return _counting_runs(result, names, self.limit) if capped else result

    def runs_left_out(self, shape: RowShape) -> int:
        """How many runs' rows a stream in `shape` leaves out (RowShape.run_cap: tables only)."""
        if shape.run_cap is None or shape.json_rows or "run_id" not in [c.name for c in self.columns]:
            return 0
        return max(0, len(self.run_ids) - shape.run_cap)

    def packed_text_sql(self) -> tuple[str, dict[str, str]]:
        """The query of the packs' JSON text of the rows (report_text_sql): chunks of lines (run_id,
        text as UTF-8 bytes: written as they are, neither decoded nor encoded again) in the order the
        rows come; and the text of each run's columns, for RUN_MARK in its chunks: its id and current
        name, or none when they are dropped (put in by the caller: a lookup in the database per chunk
        costs more than all the rest). The chunks stream as the files hold them when that is this
        order (the runs of one pack, named as when packed, so no sort holds them all), else are sorted."""
        files = f"summary_files({literal(report_text_file(self.report.name))})"
        run = ("'{'" if self.dropped else
               """'{"run_id":' || to_json(r.run_id)::VARCHAR || ',"run_name":' || to_json(r.name)::VARCHAR || ','""")
        prefixes = dict(self.cursor.execute(
            f"SELECT r.run_id, {run} FROM runs r JOIN report_run_order o ON o.run_id = r.run_id").fetchall())
        position = {run_id: i for i, run_id in enumerate(self.run_ids)}
        last = (-1, -1)
        for run_id, part in self.cursor.execute(f"SELECT run_id, __part FROM read_parquet({files})").fetchall():
            if run_id not in prefixes or (position[run_id], part) <= last:
                return (f"SELECT t.run_id, encode(t.text) AS text FROM read_parquet({files}) t "
                        "JOIN runs r USING (run_id) JOIN report_run_order o ON o.run_id = t.run_id "
                        "ORDER BY o.position, t.__part"), prefixes
            last = (position[run_id], part)
        return f"SELECT run_id, encode(text) AS text FROM read_parquet({files})", prefixes

    def _packed_text(self) -> Iterator[list[tuple[bytes]]]:
        """Chunks of the rows' JSON text, a few at a time, each with its run's columns put in."""
        sql, prefixes = self.packed_text_sql()
        mark = RUN_MARK.encode()
        runs_text = {run_id: text.encode() for run_id, text in prefixes.items()}
        chunks = self.engine.stream(sql, cur=self.cursor, batch_rows=TEXT_BATCH).batches
        return ([(text.replace(mark, runs_text[run_id]),) for run_id, text in batch] for batch in chunks)

    def close(self) -> None:
        self.cursor.close()


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


def query(engine: Engine, name: str, runs: list[str] | None = None, params: list[str] | None = None,
          limit: int | None = None, keep_run_columns: bool | None = None) -> ReportQuery:
    """Report `name` over the selected runs (all runs by default), its parameters given as
    `KEY=VALUE` strings; `limit` keeps that many rows per run. run_id/run_name columns are dropped
    when a single run is covered, unless asked to keep them."""
    report = get_report(name)
    values = parse_params(report, params or [])
    rows = engine.runs(list(selection.COLUMNS))  # (4,096 runs' whole rows cost 20 ms more)
    other_runs = _resolve_run_params(rows, report, values)
    run_ids = selection.in_order(rows, runs)
    bound = {k: v for k, v in values.items() if f"${k}" in report.sql}
    keep = keep_run_columns if keep_run_columns is not None else len(run_ids) != 1
    dropped = [c for c in RUN_COLUMNS if c in [c.name for c in report.columns] and not keep]
    # with runs selected, only their files are read: those of runs named by parameters too
    cur = engine.cursor(list(dict.fromkeys(run_ids + other_runs)) if runs else None)
    try:
        if "one_job" in report.requires and len(run_ids) > 1:  # one run is one job, each rank once
            require_one_job(cur, run_ids, name)
        _cover(cur, run_ids)
        defaults = (not other_runs and bool(run_ids)
                    and all(bound.get(p.name, p.default) == p.default for p in report.params))
        packed, kept_files = False, None
        rows_file = report_file(name) if report.per_run else job_report_file(name)
        if defaults:
            every, some = cur.execute("SELECT all_runs_summarized(), list_has_any(summarized_runs(), ?::VARCHAR[])",
                                      [run_ids]).fetchall()[0]
            packed = every and (report.per_run or (is_job_report(report) and job_rows_held(cur, name)))
            if (not packed and not some and (report.per_run or len(run_ids) == 1)
                    and not engine.references_changed):
                kept_files = _kept_files(engine, report, run_ids, bound, engine.runs())
        sliced = not packed and kept_files is None and name == SLICED and len(run_ids) > JOB_CHUNK
        if sliced:
            _compute_sliced(engine, cur, report, run_ids, bound)
    except duckdb.Error as e:
        cur.close()
        raise QueryError(f"report {name} failed: {first_line(str(e))}") from None
    except BaseException:
        cur.close()
        raise
    return ReportQuery(report, cur, engine, bound, run_ids, dropped, limit, bool(packed), rows_file, kept_files,
                       sliced, renew=lambda: query(engine, name, runs, params, limit, keep), selected=bool(runs))


def stragglers_macro(source: str) -> str:
    """A temporary macro job_stragglers that reads the stragglers computed once over all the runs
    (`source`, a table or a read_parquet call) in place of the view file's: what each slice of
    overview's runs reads (JOB_CHUNK)."""
    return (f"CREATE OR REPLACE TEMP MACRO job_stragglers(run_ids) AS TABLE "
            f"SELECT * FROM {source} WHERE list_contains(run_ids, run_id)")


def _compute_sliced(engine: Engine, cur: duckdb.DuckDBPyConnection, report: Report, run_ids: list[str],
                    bound: dict[str, object]) -> None:
    """The report's rows over `run_ids`, JOB_CHUNK runs at a time, into the temp table __sliced of
    `cur` (which covers them all): the stragglers of every job once over all the runs, then each
    slice on a cursor over its runs' files alone, against those stragglers; rows in the order of
    report_run_order, each run's in the report's (__ord), with their position in the run (__pos).
    Each slice's rows are as one pass over every run gives them (tests/test_job_packs.py)."""
    import pyarrow as pa

    stragglers = cur.sql("SELECT * FROM job_stragglers($ids)", params={"ids": run_ids}).to_arrow_table()
    parts = []
    for i in range(0, len(run_ids), JOB_CHUNK):
        part = engine.cursor(run_ids[i:i + JOB_CHUNK])
        try:
            _cover(part, run_ids[i:i + JOB_CHUNK])
            part.register("__job_stragglers", stragglers)
            part.execute(stragglers_macro("__job_stragglers"))
            parts.append(part.sql(f"SELECT {i} AS __slice, row_number() OVER () AS __row, * FROM ({report.query})",
                                  params=bound).to_arrow_table())
        finally:
            part.close()
    cur.register("__sliced_parts", pa.concat_tables(parts) if parts else None)
    try:
        cur.execute("CREATE OR REPLACE TEMP TABLE __sliced AS SELECT s.* EXCLUDE (__slice, __row), "
                    f"row_number() OVER (ORDER BY coalesce(o.position, {_LAST}), s.__slice, s.__row) AS __ord, "
                    "row_number() OVER (PARTITION BY s.run_id ORDER BY s.__slice, s.__row) AS __pos "
                    "FROM __sliced_parts s LEFT JOIN report_run_order o ON o.run_id = s.run_id")
    finally:
        cur.unregister("__sliced_parts")


def _kept_files(engine: Engine, report: Report, run_ids: list[str], bound: dict[str, object],
                rows: list[dict]) -> list[str] | None:
    """The files of the report's rows kept beside each run (kept.py), those missing computed and
    written first; None when some could not be written (the report is then computed as before)."""
    store = engine.store
    by_id = {r["run_id"]: r for r in rows}
    variants = {r: "" if report.per_run else kept.variant(by_id[r]) for r in run_ids}
    where = {r: kept.directory(store, r) for r in run_ids}
    found = {r: kept.find(where[r], report.name, variants[r]) for r in run_ids}
    missing = [r for r in run_ids if found[r] is None]
    if missing:
        if not _keep(engine, report, missing, bound, variants, where):
            return None
        # found again, every run: the computation took a while, and a run replaced or removed
        # meanwhile took its files along (a replaced one has new files, whose rows are not kept)
        found = {r: kept.find(kept.directory(store, r), report.name, variants[r]) for r in run_ids}
    files = [found[r] for r in run_ids]
    return None if None in files else files  # type: ignore[return-value]


def _keep(engine: Engine, report: Report, run_ids: list[str], bound: dict[str, object], variants: dict[str, str],
          where: dict[str, str | None]) -> bool:
    """Compute the report's rows over these runs (reading only their files) and write each run's
    beside it: a per-run report's without run_name, each row's position in its run (__pos); a job
    report's (one run) as they are, with their order (__ord) too. False when any failed."""
    drop = ", run_name" if report.per_run and "run_name" in [c.name for c in report.columns] else ""
    order = "" if report.per_run else (f", row_number() OVER (ORDER BY coalesce(o.position, {_LAST}), r.__row) AS __ord")
    try:
        cur = engine.cursor(run_ids)
    except Exception:  # noqa: BLE001 - best effort: the report is then computed as before, its errors its own
        return False
    try:
        _cover(cur, run_ids)
        cur.execute(f"CREATE TEMP TABLE __kept AS SELECT r.* EXCLUDE (__row{drop}), "
                    f"row_number() OVER (PARTITION BY r.run_id ORDER BY r.__row) AS __pos{order} "
                    f"FROM (SELECT row_number() OVER () AS __row, * FROM ({report.query})) r "
                    f"LEFT JOIN report_run_order o ON o.run_id = r.run_id", bound)
        written = True
        for r in run_ids:
            rows_sql = (f"FROM __kept WHERE run_id = {literal(r)} ORDER BY __pos" if report.per_run
                        else "FROM __kept ORDER BY __ord")
            written = kept.write(cur, where[r], report.name, rows_sql, variants[r]) and written
        return written
    except Exception:  # noqa: BLE001 - as above
        return False
    finally:
        cur.close()


def _cover(cur: duckdb.DuckDBPyConnection, run_ids: list[str]) -> None:
    """The runs a report covers, as the temp tables it reads (report_runs) and orders by (report_run_order)."""
    cur.execute("CREATE OR REPLACE TEMP TABLE report_runs AS SELECT unnest(?::VARCHAR[]) AS run_id", [run_ids])
    cur.execute("CREATE OR REPLACE TEMP TABLE report_run_order AS "
                "SELECT unnest($ids::VARCHAR[]) AS run_id, generate_subscripts($ids::VARCHAR[], 1) AS position",
                {"ids": run_ids})


def _resolve_run_params(runs: list[dict], report: Report, values: dict[str, object]) -> list[str]:
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
            values[p.name] = selection.resolve(runs, str(values[p.name]))
        except RunSelectionError as e:
            raise RunSelectionError(f"--param {p.name}={values[p.name]}: {e.message}", e.hint) from None
        ids.append(values[p.name])
    return ids


def per_run_rows(engine: Engine, name: str, setup: str | None = None) -> duckdb.DuckDBPyRelation:
    """A report's rows over every run of `engine` with its default parameters, each with its
    position within its run (__pos) and without run_name (names change), on a cursor of its own
    (where `setup`, SQL, runs first): what `traceduck compact` writes into a pack (report_file;
    job_report_file for a job report)."""
    report = get_report(name)
    bound = {k: v for k, v in parse_params(report, []).items() if f"${k}" in report.sql}
    cur = engine.cursor()
    _cover(cur, selection.in_order(engine.runs()))
    if setup:
        cur.execute(setup)
    drop = ", run_name" if "run_name" in [c.name for c in report.columns] else ""
    return cur.sql(f"SELECT * EXCLUDE (__row{drop}), row_number() OVER (PARTITION BY run_id ORDER BY __row) AS __pos "
                   f"FROM (SELECT row_number() OVER () AS __row, * FROM ({report.query}))", params=bound)


def report_text_sql(report: Report, rows_file: str) -> str:
    """A query of the JSON text of a per-run report's rows from the pack's file of its rows
    (`rows_file`, see per_run_rows): per run, the rows' objects without the run columns, each
    starting at RUN_MARK in place of `{"run_id":...,"run_name":...,` and joined as json output
    joins them, TEXT_ROWS rows a chunk (run_id, __part, text), of the runs in the table
    report_run_order (run_id, position), in its order: what `traceduck compact` writes into a pack
    (report_text_file), a slice of runs at a time. The values are read as ReportQuery reads packed rows."""
    columns = [c for c in report.columns if c.name not in RUN_COLUMNS]
    values = ", ".join(f"CAST(s.{quoted(c.name)} AS {c.type}) AS {quoted(c.name)}" for c in columns)
    return (f"SELECT run_id, __part, string_agg('{RUN_MARK}' || substr(__json, 2), {literal(LINE_SEPARATOR)} "
            f"ORDER BY __pos) AS text FROM (SELECT run_id, __pos, (__pos - 1) // {TEXT_ROWS} AS __part, "
            f"{json_object_sql(columns, 'v')} AS __json FROM (SELECT s.run_id, s.__pos, {values} "
            f"FROM read_parquet({literal(rows_file)}) s WHERE s.run_id IN (SELECT run_id FROM report_run_order)) v) t "
            "GROUP BY run_id, __part "
            "ORDER BY (SELECT position FROM report_run_order o WHERE o.run_id = t.run_id), run_id, __part")
