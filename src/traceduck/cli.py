"""The `traceduck` command: parse arguments, call one library function, render.

The library is imported inside the commands: `traceduck --version` and `--help` load neither
DuckDB nor pyarrow.
"""

from __future__ import annotations

import copy
import os
import re
import sys
import time
import traceback
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

try:  # typer 0.2x parses with its own copy of click
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover - older typer: click itself
    from click import exceptions as click_errors

from ._version import __version__
from .errors import InputError, StoreError, TraceduckError, did_you_mean, os_error_hint, os_error_text
from .render import PEOPLE, Format, View, escape, integral, render, render_batches, row_shape
from .store import short_id
from .units import column_kind, size

if TYPE_CHECKING:
    from .catalog import Report

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="traceduck: an embedded SQL database for PyTorch profiler (Kineto) Chrome traces.\n\n"
    "Ingest a trace once (`traceduck ingest trace.json`), then ask questions with SQL "
    "(`traceduck sql \"select ...\"`) over the tables runs, events, args, shapes and stacks.",
)

StoreOpt = typer.Option(None, "--store", "-s", help="Store directory [default: $TRACEDUCK_STORE, else ./traceduck.store].",
                        show_default=False)
FormatOpt = typer.Option(Format.table, "--format", "-f", help="Output format: table and markdown for people (units, "
                         "a row cap, the terminal's width), csv and json exact and complete.", case_sensitive=False)
WideOpt = typer.Option(False, "--wide", help="Table: every column, each row on one line, whatever the terminal's "
                       "width. Without it the table fits the terminal ($COLUMNS): long text wraps inside its cell, "
                       "and the columns left out to fit are named below the table.")
MAX_ROWS = 40
MAX_RUNS = 32


def _max_rows_opt(what: str) -> typer.Option:
    return typer.Option(MAX_ROWS, "--max-rows", min=0, help=f"Table and markdown: show at most N rows{what} and "
                        "say how many more there were; 0 for all. csv and json give every row.")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"traceduck {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version and exit."),
    debug: bool = typer.Option(False, "--debug", help="Show a traceback on errors."),
) -> None:
    """traceduck: an embedded SQL database for PyTorch profiler (Kineto) Chrome traces."""


def _labels(values: list[str], option: str = "--label ") -> dict[str, str]:
    out = {}
    for v in values:
        key, sep, value = v.partition("=")
        if not sep or not key:
            raise InputError(f"{option}{v!r} is not KEY=VALUE", f"Write labels like {option}job=run42")
        out[key] = value
    return out


@app.command()
def ingest(
    paths: list[Path] = typer.Argument(..., help="Trace files (.json, .json.gz) or directories of them.",
                                       show_default=False),
    store: Optional[Path] = StoreOpt,
    name: Optional[str] = typer.Option(None, "--name", "-n", help="Run name [default: the file name without .json/.json.gz]."),
    label: list[str] = typer.Option([], "--label", "-l", help="KEY=VALUE label for the runs; repeatable."),
    force: bool = typer.Option(False, "--force", help="Replace a run already ingested from the same bytes."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1, help="Worker processes [default: number of cores]."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress and no summary line."),
    timings: bool = typer.Option(False, "--timings", help="Print seconds spent per ingest stage (on stderr)."),
    salvage: bool = typer.Option(False, "--salvage", help="Keep the complete events of a truncated or damaged trace "
                                 "before the cut (the run is marked salvaged) instead of failing."),
    step_marker: Optional[str] = typer.Option(None, "--step-marker", help="Regular expression (RE2) of the CPU "
                                              "annotations that mark the steps [default: ProfilerStep#N, else "
                                              "SGLang's step[...], else vLLM's execute_...]."),
) -> None:
    """Ingest traces into the store: one run per file; the same bytes twice is a no-op."""
    from .api import ingest as ingest_traces
    from .store import Store

    labels = _labels(label)
    started = time.perf_counter()
    show_progress = not quiet and sys.stderr.isatty()
    failed: TraceduckError | None = None
    try:
        if show_progress:
            results = _ingest_with_progress(paths, store, name, labels, force, jobs, salvage, step_marker)
        else:
            results = ingest_traces(paths, store=store, name=name, labels=labels, force=force, jobs=jobs,
                                    salvage=salvage, step_marker=step_marker)
        outcomes = [(r.path, r) for r in results]
    except TraceduckError as e:
        if not hasattr(e, "outcomes"):  # one file, or nothing to ingest: the error alone says it
            raise
        # some files failed, the others landed: say what happened to each, then the error
        failed, outcomes = e, e.outcomes
        results = [r for _, r in outcomes if not isinstance(r, TraceduckError)]
    err = typer.get_text_stream("stderr")
    for path, r in outcomes:
        if isinstance(r, TraceduckError):
            err.write(f"{path}: failed: {_reason(r, path)}\n")
            continue
        if r.not_a_trace:
            if not quiet:
                err.write(f"{path}: not a trace ({r.not_a_trace}), skipped\n")
        elif r.skipped and not quiet:
            err.write(f"{r.path.name}: already in the store as run {short_id(r.run_id)} (use --force to replace it)\n")
        elif not quiet:
            if failed is not None:
                err.write(f"{path}: ingested as run {short_id(r.run_id)} '{r.name}' ({r.events:,} events)\n")
            # overlapping slices are common in real traces: counted in the run's warnings, not said here
            said = {k: v for k, v in (r.warnings or {}).items() if k != OVERLAPS}
            if said:
                listed = ", ".join(f"{v:,} {k}" for k, v in sorted(said.items()))
                err.write(f"{r.path.name}: warnings: {listed}\n")
        if timings and r.timings:
            err.write(f"{r.path.name}: " + ", ".join(f"{k} {v:.2f}s" for k, v in r.timings.items()) + "\n")
    if not quiet:
        st = Store(store)
        new = [r for r in results if not r.skipped]
        events = sum(r.events for r in new)
        runs = ", ".join(f"{short_id(r.run_id)} '{r.name}'" for r in new[:INGEST_RUNS_NAMED]) or "no new runs"
        if len(new) > INGEST_RUNS_NAMED:  # a job of many ranks: `traceduck runs` lists them all
            runs = f"{len(new):,} runs ({runs} and {len(new) - INGEST_RUNS_NAMED:,} more)"
        typer.echo(f"{events:,} events -> {runs} in {time.perf_counter() - started:.1f} s, "
                   f"store {size(st.size_bytes())} ({st.path})")
    if failed is not None:
        raise _failed_files(outcomes)


INGEST_RUNS_NAMED = 8  # the ingest summary names this many new runs
OVERLAPS = "partially overlapping event pairs"  # ingester.pipeline.OVERLAPS (the ingester loads only when used)


def _failed_files(outcomes: list) -> InputError:
    """The error of an ingest in which some files failed: which, and what came of the others."""
    bad = [str(p) for p, r in outcomes if isinstance(r, TraceduckError)]
    done = [r for _, r in outcomes if not isinstance(r, TraceduckError)]
    counts = [(sum(not r.skipped for r in done), "ingested"),
              (sum(r.skipped and not r.not_a_trace for r in done), "already in the store"),
              (sum(bool(r.not_a_trace) for r in done), "not a trace")]
    others = ", ".join(f"{n:,} {what}" for n, what in counts if n) or "none ingested"
    listed = ", ".join(bad[:INGEST_RUNS_NAMED]) + (f" and {len(bad) - INGEST_RUNS_NAMED:,} more" if len(bad) > INGEST_RUNS_NAMED else "")
    return InputError(f"{len(bad):,} of {len(outcomes):,} files failed ({listed}); of the others: {others}",
                      "The lines above say what happened to each file")


def _reason(e: TraceduckError, path: Path) -> str:
    """A file's error without the file's path it starts with."""
    text = e.one_line()
    for prefix in (f"{Path(path).absolute()}: ", f"{path}: "):
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


def _ingest_with_progress(files, store, name, labels, force, jobs, salvage, step_marker):
    from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn,
                               TransferSpeedColumn)

    from .api import ingest as ingest_traces

    with Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  TextColumn("{task.fields[events]}"), TimeElapsedColumn(), transient=True,
                  console=None) as bar:
        tasks = {}
        started = {}

        def progress(path: Path, raw_bytes: int, events: int, stage: str) -> None:
            if path not in tasks:  # first report: after the file's first chunk
                tasks[path] = bar.add_task(path.name, total=path.stat().st_size, events="")
                started[path] = (time.perf_counter(), events)
            t0, n0 = started[path]
            elapsed = time.perf_counter() - t0
            # the rate is the parser's; after parsing, the count is the file's whole count
            rate = f", {(events - n0) / elapsed / 1000:,.0f}k events/s" if stage == "parsing" and elapsed > 0.2 else ""
            bar.update(tasks[path], description=f"{stage} {path.name}", completed=raw_bytes,
                       events=f"{events:,} events{rate}")

        return ingest_traces(files, store=store, name=name, labels=labels, force=force, jobs=jobs, progress=progress,
                             salvage=salvage, step_marker=step_marker)


# The columns of `traceduck runs`, `schema` and `reports` with their roles in a table too wide for the terminal
# (see catalog.parse_report): key and result columns stay, detail columns are left out first.
RUNS_COLUMNS = {"run_id": "key", "name": "key", "labels": "result", "event_count": "result", "rank": "key",
                "duration_ns": "result", "ingested_at": "detail", "source_path": "detail", "salvaged": "detail",
                "warnings": "detail"}
RELATIONS_COLUMNS = {"name": "key", "kind": "result", "description": "result"}
RELATION_COLUMNS = {"column": "key", "type": "result", "description": "result"}
MACRO_PART_COLUMNS = {"part": "key", "name": "key", "type": "result", "description": "result"}
REPORTS_COLUMNS = {"report": "key", "title": "result", "description": "result"}


@app.command()
def runs(store: Optional[Path] = StoreOpt, format: Format = FormatOpt, wide: bool = WideOpt) -> None:
    """List the runs in the store."""
    from .api import open as open_store

    with open_store(store) as db, db.one_listing():
        rows = db.runs(["run_id", "name", "labels", "event_count", "rank", "start_ns", "end_ns", "ingested_at",
                        "source_path", "salvaged", "warnings"])
    # duration: integer ns like every csv and json; a table shows it in the unit that fits
    table = [(r["run_id"], r["name"], r["labels"], r["event_count"], r["rank"],
              None if r["start_ns"] is None else r["end_ns"] - r["start_ns"],
              r["ingested_at"], r["source_path"], bool(r.get("salvaged")), r.get("warnings") or {}) for r in rows]
    render(list(RUNS_COLUMNS), table, format, sys.stdout, View(wide=wide, roles=RUNS_COLUMNS))



def _show_labels(labels: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in labels.items()) or "no labels"


@app.command("label")
def label_runs(
    run: str = typer.Argument(..., help="Runs: id, unique prefix, name, name pattern, label:KEY=VALUE or rank:N "
                              "(comma-joined terms: runs matching all).", show_default=False),
    labels: list[str] = typer.Argument(None, help="KEY=VALUE labels to set.", show_default=False),
    remove: list[str] = typer.Option([], "--remove", help="Label key to remove; repeatable."),
    store: Optional[Path] = StoreOpt,
) -> None:
    """Set or remove labels of runs (`traceduck label baseline job=run42 --remove old`)."""
    from .api import label as label_traces

    for r in label_traces(run, _labels(labels or [], option=""), remove=remove, store=store):
        typer.echo(f"{short_id(r['run_id'])} '{r['name']}': {_show_labels(r['labels'])}")


@app.command()
def rename(
    run: str = typer.Argument(..., help="The run: id, unique prefix or name.", show_default=False),
    name: str = typer.Argument(..., help="Its new name.", show_default=False),
    store: Optional[Path] = StoreOpt,
) -> None:
    """Rename a run."""
    from .api import rename as rename_trace

    run_id, old, new = rename_trace(run, name, store=store)
    typer.echo(f"{short_id(run_id)}: '{old}' -> '{new}'")


STEP_FAMILIES = {"profiler_step": "ProfilerStep#N", "sglang": "SGLang step[...]", "vllm": "vLLM execute_...",
                 "pattern": "the pattern"}


@app.command("step-marker")
def step_marker(
    runs: list[str] = typer.Argument(..., help="Runs: ids, unique prefixes, names, name patterns, label:KEY=VALUE "
                                     "or rank:N.", show_default=False),
    marker: Optional[str] = typer.Option(None, "--marker", "-m", help="Regular expression (RE2) of the CPU annotations "
                                         "that mark the steps [default: as ingest chooses: ProfilerStep#N, else "
                                         "SGLang's step[...], else vLLM's execute_...]."),
    store: Optional[Path] = StoreOpt,
) -> None:
    """Derive the steps of stored runs anew, from annotations matching --marker (or as ingest does)."""
    from .api import set_step_marker

    for r in set_step_marker(runs, marker, store=store):
        n = r["steps"]
        found = f"{n:,} step{'s' if n != 1 else ''} from {STEP_FAMILIES[r['family']]}" if r["family"] else "no steps"
        typer.echo(f"{short_id(r['run_id'])} '{r['name']}': {found}")


@app.command("rm")
def remove_runs(
    runs: list[str] = typer.Argument(..., help="Runs: ids, unique prefixes, names, name patterns, label:KEY=VALUE "
                                     "or rank:N.", show_default=False),
    store: Optional[Path] = StoreOpt,
) -> None:
    """Remove runs from the store."""
    from .api import remove as remove_traces

    for run_id, name in remove_traces(runs, store=store):
        typer.echo(f"removed {short_id(run_id)} '{name}'")


@app.command()
def compact(
    runs: list[str] = typer.Argument(None, help="Runs to pack: ids, unique prefixes, names, name patterns, "
                                     "label:KEY=VALUE or rank:N [default: every run].", show_default=False),
    store: Optional[Path] = StoreOpt,
) -> None:
    """Pack the runs' tables into one Parquet file per table, which queries then read instead of one
    file per run, with the per-run summaries the reports sort or join every event for (GPU time,
    kernel, op and copy statistics) and the reports' rows with their default parameters (also of the
    reports that compare a job's ranks: read when a report covers exactly the packed runs): for
    stores of hundreds of runs (every rank of a job). The runs stay as they are; removing or
    replacing a packed run makes queries read its own files again."""
    from .api import compact as compact_runs

    started = time.perf_counter()
    result = compact_runs(runs or None, store=store)
    err = typer.get_text_stream("stderr")
    if result.skipped:
        err.write(f"left out {len(result.skipped):,} runs written by another traceduck version "
                  f"(re-ingest them with --force): {', '.join(short_id(r) for r in result.skipped[:8])}"
                  f"{' ...' if len(result.skipped) > 8 else ''}\n")
    if result.pack_id is None:
        done = "nothing to pack"
    elif result.written:
        done = f"packed {len(result.runs):,} runs into {result.pack_id[:12]} ({size(result.bytes)})"
    else:
        done = f"{len(result.runs):,} runs already packed in {result.pack_id[:12]} ({size(result.bytes)})"
    removed = f"; removed {result.removed} older pack{'s' if result.removed != 1 else ''}" if result.removed else ""
    typer.echo(f"{done}{removed} in {time.perf_counter() - started:.1f} s")


@app.command()
def check(store: Optional[Path] = StoreOpt) -> None:
    """Verify every run's and pack's files against the checksums written when they were published
    (a flipped bit or a cut file), and read each run's row back: one line per damaged file naming
    its run, then exit 1 with what to do. Runs ingested before checksums existed are counted apart."""
    from .api import check as check_store
    from .integrity import describe

    started = time.perf_counter()
    result = check_store(store=store)
    err = typer.get_text_stream("stderr")
    for d in result.damaged:
        err.write(describe(d) + "\n")
    older = (f"; {len(result.without_checksums):,} ingested before checksums (only their rows were read: "
             "re-ingest with --force to add them)") if result.without_checksums else ""
    counted = f"{result.runs:,} runs and {result.packs:,} packs"
    if result.damaged:
        runs = sorted({d.ident for d in result.damaged if d.kind == "run"})
        raise StoreError(f"{len(result.damaged):,} damaged files in {counted} checked{older}",
                         (f"Re-ingest each damaged run from its trace with `traceduck ingest TRACE --force`, "
                          f"or remove it with `traceduck rm {short_id(runs[0])}`" if runs else "")
                         + ("; " if runs else "") + "run `traceduck compact` again to rewrite a damaged pack")
    typer.echo(f"{counted} checked: no damage{older} ({time.perf_counter() - started:.1f} s)")


@app.command()
def sql(
    query: str = typer.Argument(..., help="SQL over the views runs, events, args, shapes, stacks.", show_default=False),
    store: Optional[Path] = StoreOpt,
    format: Format = FormatOpt,
    max_rows: int = _max_rows_opt(""),
    wide: bool = WideOpt,
) -> None:
    """Run a SQL query over every run in the store (DuckDB dialect). Rows stream: csv and json start at
    once and hold one batch in memory."""
    from .api import open as open_store

    with open_store(store) as db, db.one_listing():
        result = db.stream(query)
        if result is None:  # a statement without rows
            return
        view = View(max_rows=max_rows, wide=wide)
        if format in PEOPLE and "run_id" in result.columns and any(_is_instant(c) for c in result.columns):
            view.run_starts = _run_starts(db)
        render_batches(result.columns, result.batches, format, sys.stdout, view, result.nested)


@app.command()
def schema(
    name: Optional[str] = typer.Argument(None, help="A table, view or macro; omit to list them all.", show_default=False),
    store: Optional[Path] = StoreOpt,
    format: Format = FormatOpt,
    wide: bool = WideOpt,
) -> None:
    """List the tables, views and macros, or one's columns (a macro's arguments too), with their documentation."""
    from .api import open as open_store

    with open_store(store) as db, db.one_listing():
        if name is None:
            render(list(RELATIONS_COLUMNS), db.relations(), format, sys.stdout,
                   View(wide=wide, roles=RELATIONS_COLUMNS))
            return
        doc, rows = db.describe(name)
    if format == Format.table:
        typer.echo(f"{name}: {doc}")
    is_macro = bool(rows) and len(rows[0]) == 4  # (part, name, type, documentation)
    roles = MACRO_PART_COLUMNS if is_macro else RELATION_COLUMNS
    render(list(roles), rows, format, sys.stdout, View(wide=wide, roles=roles))


@app.command("reports")
def list_reports(store: Optional[Path] = StoreOpt, format: Format = FormatOpt, wide: bool = WideOpt) -> None:
    """List the canned reports."""
    from .catalog import all_reports

    del store  # taken as by every command; every store has the same reports

    rows = [(r.name, r.title, r.description) for r in all_reports().values()]
    render(list(REPORTS_COLUMNS), rows, format, sys.stdout, View(wide=wide, roles=REPORTS_COLUMNS))


@app.command(context_settings={"help_option_names": []})
def report(
    name: Optional[str] = typer.Argument(None, help="Report name (see `traceduck reports`).", show_default=False),
    store: Optional[Path] = StoreOpt,
    run: list[str] = typer.Option([], "--run", "-r", help="Run id, unique prefix, name, or label:KEY=VALUE; repeatable [default: every run]."),
    param: list[str] = typer.Option([], "--param", "-p", help="KEY=VALUE report parameter; repeatable."),
    limit: Optional[int] = typer.Option(None, "--limit", "-n", min=0, help="At most this many rows."),
    format: Format = FormatOpt,
    max_rows: int = _max_rows_opt(" per run"),
    max_runs: int = typer.Option(MAX_RUNS, "--max-runs", min=0, help="Table and markdown: show the rows of the "
                                 "first N runs and say how many more runs there were; 0 for all. csv and json give "
                                 "every run's rows."),
    wide: bool = WideOpt,
    help_: bool = typer.Option(False, "--help", "-h", help="Show this message, or a report's parameters and columns."),
) -> None:
    """Run a canned report. `traceduck report NAME --help` shows its parameters and columns."""
    from .catalog import get_report, split_pairs

    if help_ or name is None:
        if name is None:
            typer.echo(_command_help("report"))
        else:
            typer.echo(report_help(get_report(name)))
        return
    from .api import open as open_store

    pairs = [f"{k}={v}" for k, v in split_pairs(param).items()]
    with open_store(store) as db, db.one_listing():
        # a batch of rows at a time: csv and json write each as it comes (a report of 800,000 rows
        # over a 1,024-rank job in bounded memory), the tables take what they show
        # json: rows as DuckDB writes them; tables: only the rows they show are fetched
        shape = row_shape(format, max_rows, max_runs)
        rq = db.report_query(name, runs=run or None, params=pairs, limit=limit)
        result = rq.stream(shape)
        spec = get_report(name)
        view = View(max_rows=max_rows, per_run=True, wide=wide, run_rows=result.run_rows,
                    roles={c.name: c.role for c in spec.columns}, runs_left_out=rq.runs_left_out(shape))
        view.empty_note = "no rows: " + (spec.empty or "nothing in the selected runs matches this report")
        if format in PEOPLE and any(_is_instant(c) for c in result.columns):
            view.run_starts = _run_starts(db)
            if "run_id" not in result.columns and view.run_starts:  # one run selected: its run columns were dropped
                view.run_id = db.select_runs(run[0])[0] if run else next(iter(view.run_starts))
        render_batches(result.columns, result.batches, format, sys.stdout, view, result.nested, result.json_rows)


def _is_instant(column: str) -> bool:
    return column_kind(column)[0] == "timestamp"


def _run_starts(db) -> dict[str, int]:
    return {r["run_id"]: r["start_ns"] for r in db.runs(["run_id", "start_ns"])}


def _command_help(command: str) -> str:
    import typer.main

    cmd = typer.main.get_command(app)
    sub = cmd.commands[command]  # type: ignore[attr-defined]
    ctx = sub.make_context(f"traceduck {command}", [], resilient_parsing=True)
    return sub.get_help(ctx)


def report_help(r: Report) -> str:
    """A report's title, description, parameters and columns as text."""
    lines = [f"traceduck report {r.name}: {r.title}", "", r.description, ""]
    if r.empty:
        lines[-1:-1] = ["", f"No rows means: {r.empty}."]
    lines.append("Parameters (--param KEY=VALUE):" if r.params else "Parameters: none")
    for p in r.params:
        choices = f" one of {'|'.join(p.choices)};" if p.choices else ""
        lines.append(f"  {p.name} ({p.type}, default {p.default!r}):{choices} {p.doc}")
    lines += ["", "Columns (NAME (TYPE, ROLE): a table too wide for the terminal leaves out detail columns; "
              "key and result columns always show):"]
    lines += [f"  {c.name} ({c.type}, {c.role or 'no role'}): {c.doc}" for c in r.columns]
    lines += ["", "Options: --store DIR, --run RUN (repeatable), --param KEY=VALUE, --limit N, --format table|csv|json|markdown, "
              "--max-rows N, --wide"]
    return "\n".join(lines)


class DiffBy(str, Enum):
    op = "op"
    kernel = "kernel"
    call_site = "call_site"
    shape = "shape"
    copy = "copy"
    op_tree = "op_tree"
    op_shape = "op_shape"


@app.command()
def diff(
    a: str = typer.Argument(..., help="Baseline run: id, unique prefix or name.", show_default=False),
    b: str = typer.Argument(..., help="Run to compare with it.", show_default=False),
    by: DiffBy = typer.Option(DiffBy.op, "--by", help="Group by op, kernel, call_site, shape or copy (CPU time; kernel: GPU "
                                "time), or op_tree / op_shape: GPU time under ops aligned across runs whose kernels differ (two GPUs)."),
    per_step: bool = typer.Option(False, "--per-step", help="Divide times by each run's number of profiler steps (whole ns)."),
    threshold: float = typer.Option(5.0, "--threshold", min=0, help="Changes within this percent of A are 'same'."),
    exact_dims: bool = typer.Option(False, "--exact-dims", help="Shape and copy keys with each call's exact dims, instead "
                                    "of dims that grow with the sequence as ranges (lo..hi)."),
    limit: Optional[int] = typer.Option(None, "--limit", "-n", min=0, help="At most this many rows."),
    store: Optional[Path] = StoreOpt,
    format: Format = FormatOpt,
    max_rows: int = _max_rows_opt(""),
    wide: bool = WideOpt,
) -> None:
    """Compare two runs group by group; biggest change first."""
    from .api import open as open_store
    from .catalog import diff_spec

    with open_store(store) as db, db.one_listing():
        rel = db.diff(a, b, by=by.value, per_step=per_step, threshold_pct=threshold, exact_dims=exact_dims)
        columns, rows = db.fetch(rel if limit is None else rel.limit(limit))
        header = db.diff_header(a, b)
    if format in PEOPLE:
        typer.echo(escape(header))
    else:  # keep stdout machine-readable
        typer.echo(escape(header), err=True)
    # calls and ns are whole numbers unless divided per step
    rows = integral(columns, rows, [c for c in columns if c.endswith(("_calls", "_ns"))])
    roles = {c.name: c.role for c in diff_spec().columns}
    render(columns, rows, format, sys.stdout, View(max_rows=max_rows, wide=wide, roles=roles))


@app.command()
def catalog(store: Optional[Path] = StoreOpt) -> None:
    """Write STORE/catalog.duckdb: the views and their docs, for the DuckDB CLI, DBeaver or a notebook."""
    from .catalog_file import write_catalog
    from .store import Store

    path = write_catalog(Store(store))
    typer.echo(f"{path} (open it with any DuckDB client, e.g. `duckdb {path}`)")


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def shell(ctx: typer.Context, store: Optional[Path] = StoreOpt) -> None:
    """Open the DuckDB CLI on STORE/catalog.duckdb (written first); arguments after -- go to duckdb."""
    from .shell import shell_command
    from .store import Store

    argv = shell_command(Store(store), ctx.args)
    sys.stdout.flush()
    os.execv(argv[0], argv)


class ExportFormat(str, Enum):
    chrome = "chrome"
    folded = "folded"


class FoldedMetric(str, Enum):
    cpu_self = "cpu_self"
    gpu = "gpu"


@app.command()
def export(
    run: str = typer.Argument(..., help="Run id, unique run id prefix, or run name.", show_default=False),
    output: Path = typer.Option(..., "--output", "-o", help="File to write: a Chrome trace (.json, or .json.gz to "
                                "compress), or folded stacks (text).", show_default=False),
    store: Optional[Path] = StoreOpt,
    format: ExportFormat = typer.Option(ExportFormat.chrome, "--format", "-f", case_sensitive=False,
                                        help="chrome: a Chrome trace; folded: `frame;...;op value` lines for "
                                             "speedscope or flamegraph.pl."),
    step: Optional[int] = typer.Option(None, "--step", help="Only profiler step N: its CPU events and the GPU work "
                                       "they launched.", show_default=False),
    start: Optional[str] = typer.Option(None, "--start", help="Only events overlapping [START, END), times after "
                                        "the run's start with a unit: 12.5ms, 300us, 2s, 1500ns [default: 0].",
                                        show_default=False),
    end: Optional[str] = typer.Option(None, "--end", help="End of that range, after the run's start "
                                      "[default: the run's end].", show_default=False),
    start_ns: Optional[int] = typer.Option(None, "--start-ns", help="Only events overlapping [START, END) "
                                           "(ns, as events.ts_ns) [default: the run's start].", show_default=False),
    end_ns: Optional[int] = typer.Option(None, "--end-ns", help="End of that range [default: the run's end].",
                                         show_default=False),
    max_events: Optional[int] = typer.Option(None, "--max-events", help="Keep only the K earliest events of the "
                                             "window (by start), with their flows and metadata.", show_default=False),
    metric: Optional[FoldedMetric] = typer.Option(None, "--metric", case_sensitive=False,
                                                  help="Folded value: cpu_self (CPU op self time, ns) or gpu "
                                                       "(kernel time, ns) [default: cpu_self].", show_default=False),
    redact: Optional[bool] = typer.Option(None, "--redact/--no-redact", help="Replace the values of top-level "
                                          "metadata keys that look like secrets (TOKEN, SECRET, PASSWORD, KEY, "
                                          "CREDENTIAL, AUTH) and of env mappings [default: on for --step and "
                                          "time ranges, off for the whole run].", show_default=False),
    counters: Optional[str] = typer.Option(None, "--counters", help="Add counter tracks (Chrome trace), some of "
                                           "queue,memory,bandwidth joined by commas: launch queue length per "
                                           "stream, allocated memory per device ([memory] events), memory copy "
                                           "bandwidth per device and kind of copy.", show_default=False),
) -> None:
    """Write a run, or one step or time range of it, as a Chrome trace (events and args as ingested),
    or its folded stacks."""
    from .api import export as export_run

    result = export_run(run, output, store=store, format=format.value, step=step, start=start, end=end,
                        start_ns=start_ns, end_ns=end_ns, max_events=max_events, metric=metric.value if metric else None,
                        redact=redact, counters=counters)
    run_id = result.run_id
    err = typer.get_text_stream("stderr")
    if result.format == "folded":
        err.write(f"{result.stacks:,} stacks, {result.total:,} ns of {result.metric} from run {short_id(run_id)} -> {output}\n")
        return
    if result.is_cut:
        err.write(f"Warning: {result.scope} has {result.window_events:,} events; kept the first {result.kept_events:,} "
                  "by start time (--max-events).\n")
    scope = f", {result.scope}" if result.scope else ""
    added = f" and {result.counters:,} counter events" if result.counters else ""
    err.write(f"{result.events:,} events{added} from run {short_id(run_id)}{scope} -> {output}\n")
    if result.redacted:
        err.write(f"Redacted {result.redacted:,} metadata value{'s' * (result.redacted != 1)} that look like secrets "
                  "(--no-redact keeps them).\n")


def _app_for(args: list[str]) -> typer.Typer:
    """The CLI with only the command that `args` name (the root's options before it), so that the
    parser builds one command's options, not all of them; the whole CLI for `--help`, `--version`,
    no command or a word that names none (its error lists the commands)."""
    word = next((a for a in args if a != "--debug"), None)
    if word is None or word.startswith("-"):
        return app
    named = [c for c in app.registered_commands
             if (c.name or typer.main.get_command_name(c.callback.__name__)) == word]  # type: ignore[union-attr]
    if not named:
        return app
    narrow = copy.copy(app)
    narrow.registered_commands = named
    return narrow


def main(argv: list[str] | None = None) -> None:
    """Entry point: library errors and usage errors (a misspelled option or choice, a missing
    argument) become one line on stderr and exit code 1."""
    args = sys.argv[1:] if argv is None else argv
    debug = "--debug" in args
    try:
        # standalone_mode=False: the parser raises usage errors (said here in one line) and returns
        # the exit code of --help, --version and typer.Exit instead of exiting
        code = _app_for(args)(args=args, prog_name="traceduck", standalone_mode=False)
    except click_errors.NoArgsIsHelpError as e:  # `traceduck` alone: its help
        typer.echo(e.format_message())
        code = 0
    except click_errors.UsageError as e:
        typer.echo(f"Error: {usage_message(e, args)}", err=True)
        sys.exit(1)
    except typer.Abort:
        typer.echo("Interrupted.", err=True)
        sys.exit(130)
    except TraceduckError as e:
        if debug:
            traceback.print_exc()
        _say_error(e.one_line())
        sys.exit(1)
    except KeyboardInterrupt:
        typer.echo("Interrupted.", err=True)
        sys.exit(130)
    except BrokenPipeError:  # the reader stopped (`| head`): quietly, also at exit's flush
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    except OSError as e:  # the file system failed a write (no space, an I/O error) past the store's own handling
        if debug:
            traceback.print_exc()
        _say_error(TraceduckError(f"the file system failed ({os_error_text(e)})", os_error_hint(e)).one_line())
        sys.exit(1)
    except Exception as e:  # noqa: BLE001 - the last boundary: never a bare traceback
        if debug:
            traceback.print_exc()
        typer.echo(f"Error: internal error ({type(e).__name__}: {e}). Re-run with --debug and report it.", err=True)
        sys.exit(2)
    code = code if isinstance(code, int) else 0
    if code == 130:
        typer.echo("Interrupted.", err=True)
    sys.exit(code)  # as the parser's standalone mode did: callers see SystemExit, 0 too


def run() -> None:
    """The `traceduck` program (the console script and `python -m traceduck`): main(), then the
    process ends without tearing the interpreter down. Output is flushed and exit handlers run
    (`atexit`, `weakref.finalize`), as at a normal exit; what is skipped is freeing every module
    and object one by one, about 25 ms of a command that takes 250 (a store's connections are
    closed by the command itself). While a thread other than daemons is still running, the exit
    waits for it as usual."""
    try:
        main()
    except SystemExit as e:
        code = e.code
    else:  # pragma: no cover - main always exits
        code = 0
    if not isinstance(code, int):  # sys.exit(None) is 0; sys.exit("text") says it on stderr, exit 1, as Python does
        if code is not None:
            sys.stderr.write(f"{code}\n")
        code = 0 if code is None else 1
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # the reader stopped (`| head`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except OSError:
        code = code or 1
    try:
        sys.stderr.flush()
    except OSError:
        code = code or 1
    import threading

    if any(t is not threading.main_thread() and not t.daemon for t in threading.enumerate()):
        sys.exit(code)
    import atexit

    atexit._run_exitfuncs()
    os._exit(code)


def _say_error(line: str) -> None:
    """`Error: LINE` on stderr; when stderr itself cannot be written (a full disk), the exit code says it."""
    try:
        typer.echo(f"Error: {line}", err=True)
    except OSError:
        pass


_CHOICE = re.compile(r"^'(.*)' is not one of\b", re.S)


def usage_message(e: click_errors.UsageError, args: list[str]) -> str:
    """A usage error of the argument parser as one line: the command and option or argument, what
    is wrong, and a hint ("Did you mean ...?" where there are choices)."""
    ctx = e.ctx
    if ctx is not None:
        where = ctx.command_path
    else:  # raised before the command's context was made: the command is the first word that names one
        commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
        where = " ".join(["traceduck", *[a for a in args if a in commands][:1]])
    see = f"Run `{where} --help` to see its options" if where != "traceduck" else \
        "Run `traceduck --help` to see the commands"
    if isinstance(e, click_errors.NoSuchOption):
        return _line(f"{where}: no option {e.option_name}",
                     did_you_mean(e.option_name, e.possibilities or [], quote="") or see)
    if isinstance(e, click_errors.MissingParameter) and e.param is not None:
        if e.param.param_type_name == "argument":
            return _line(f"{where}: missing argument {_param_name(e.param)}", f"Usage: {_usage(ctx)}")
        return _line(f"{where}: missing option {_param_name(e.param)}", see)
    if isinstance(e, click_errors.BadOptionUsage) and "requires an argument" in e.message:
        return _line(f"{where}: {e.option_name} needs a value", see)
    if isinstance(e, click_errors.BadParameter) and e.param is not None:
        name = f"{where} {_param_name(e.param)}"
        choices = list(getattr(e.param.type, "choices", None) or [])
        m = _CHOICE.match(e.message)
        if choices and m:
            values = [str(getattr(c, "value", c)) for c in choices]
            started = [v for v in values if v.startswith(m[1].lower())]  # `cpu` for cpu_self
            return _line(f"{name}: '{m[1]}' is not one of {', '.join(values)}",
                         f"Did you mean {' or '.join(repr(v) for v in started)}?" if started else
                         did_you_mean(m[1], values))
        return _line(f"{name}: {_lower_first(e.message)}", see)
    message = _lower_first(e.message)
    if message.startswith("no such command"):
        name = message.split("'")[1] if message.count("'") >= 2 else ""
        commands = list(getattr(ctx.command, "commands", {})) if ctx is not None else []
        hint = did_you_mean(name, commands) or f"Commands: {', '.join(commands)}"
        return _line(f"{where}: no command '{name}'", hint)
    if isinstance(e, click_errors.BadArgumentUsage) or message.startswith("got unexpected extra argument"):
        return _line(f"{where}: {message}", f"Usage: {_usage(ctx)}" if ctx is not None else see)
    return _line(f"{where}: {message}", see)


def _line(what: str, hint: str = "") -> str:
    return TraceduckError(" ".join(what.split()), hint).one_line()


def _lower_first(text: str) -> str:
    """A parser message ("Option '--store' requires an argument.") to go after a colon."""
    text = text.strip().rstrip(".")
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


def _param_name(param) -> str:
    if param.param_type_name == "argument":
        return (param.name or "").upper()
    opts = sorted(param.opts, key=len, reverse=True)
    return opts[0] if opts else param.name or ""


def _usage(ctx) -> str:
    """`traceduck diff [OPTIONS] A B` from the command's parameters."""
    parts = [ctx.command_path, "[OPTIONS]"]
    for p in ctx.command.params:
        if p.param_type_name != "argument":
            continue
        name = _param_name(p) + ("..." if p.nargs == -1 else "")
        parts.append(name if p.required else f"[{name}]")
    return " ".join(parts)
