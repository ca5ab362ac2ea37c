"""The Python API: `traceduck.ingest(...)`, `traceduck.open(store)`, `traceduck.export(...)`, and
changing published runs (`label`, `rename`, `remove`, `compact`).

`open()` returns a `Database`, whose `sql()`, `report()` and `diff()` return DuckDB relations: it
composes the engine (engine.py) with reports, diff and export. The command line calls exactly
these functions.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from . import packs, reports, selection
from .engine import Engine
from .errors import InputError, NotATrace, StoreError, TraceduckError
from .results import Stream
from .runs_table import run_names, write_snapshot
from .store import Store, short_id
from .viewfile import store_cache_dir

if TYPE_CHECKING:  # the ingester (pyarrow, numpy), export (pyarrow), compact, check and diff load only when used
    from .compaction import CompactResult
    from .integrity import CheckResult
    from .export import ExportResult
    from .ingester import IngestResult

TRACE_SUFFIXES = (".json", ".json.gz")


def expand(paths: Iterable[str | os.PathLike]) -> list[tuple[Path, bool]]:
    """(file, found in a directory) for each file to ingest, each once."""
    out: list[tuple[Path, bool]] = []
    seen: set[Path] = set()
    for p in paths:
        path = Path(p)
        if path.is_dir():
            found = []
            for root, dirs, names in os.walk(path):
                dirs.sort()
                found += [Path(root, n) for n in names
                          if n.endswith(TRACE_SUFFIXES) and os.path.isfile(os.path.join(root, n))]
            if not found:
                raise InputError(f"{path}: no .json or .json.gz files in this directory or below")
            listed = [(f, True) for f in sorted(found, key=lambda f: f.relative_to(path).parts)]
        elif not path.exists():
            raise InputError(f"{path}: no such file", "Check the path")
        else:
            listed = [(path, False)]
        for f, from_dir in listed:
            if f.absolute() not in seen:
                seen.add(f.absolute())
                out.append((f, from_dir))
    return out


def expand_paths(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """Files to ingest: each file as given; each directory's *.json and *.json.gz files at any
    depth, sorted by path."""
    return [f for f, _ in expand(paths)]


def ingest(paths: str | os.PathLike | Iterable[str | os.PathLike], store: str | os.PathLike | None = None,
           name: str | None = None, labels: dict[str, str] | None = None, force: bool = False,
           jobs: int | None = None, progress: Callable[[Path, int, int, str], None] | None = None,
           salvage: bool = False, step_marker: str | None = None) -> list[IngestResult]:
    """Ingest trace files (or directories of them, searched at any depth) into a store; returns one
    `IngestResult` per file (`run_id`, `name`, `events`, `seconds`, `skipped` when the same bytes
    were already there).

    `store`: the store directory (default: `$TRACEDUCK_STORE`, else `./traceduck.store`), created
    when missing. `name` (one file only) and `labels` tag the runs; `force` replaces a run ingested
    from the same bytes; `jobs` worker processes (default: the number of cores). `progress(path,
    bytes_read, events, stage)` is called as the work goes: stage `parsing`, then `sorting`,
    `nesting`, `writing` and `done` (with the file's event count). With `salvage`, a truncated or
    damaged trace keeps its complete events before the cut. `step_marker`, a regular expression
    (RE2, as DuckDB's regexp_matches), names the CPU annotations that mark the steps instead of
    ProfilerStep#N or an inference engine's markers (see `set_step_marker`).

    A file found in a directory that is JSON but not a trace (no traceEvents list) is skipped: its
    result has `not_a_trace` set. A file named alone that is not a trace is an error. When some
    files fail, the others still land and the first failure is raised, saying how many failed; its
    `outcomes` are (path, IngestResult or the file's error) for every file, in order. Default run
    names that collide (two files, or another run in the store) get their parent directory
    prefixed; see `default_names`."""
    from .ingester import IngestResult, default_jobs, ingest_file
    from .ingester.pipeline import PARALLEL_MIN_BYTES, default_names, start_workers
    from .ingester.reader import sniff
    from .ingester.steps import check_marker

    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    step_marker = check_marker(step_marker)
    listed = expand(paths)
    files = [f for f, _ in listed]
    if (jobs or default_jobs()) > 1 and (len(files) > 1 or any(_size(f) >= PARALLEL_MIN_BYTES for f in files)):
        start_workers()  # worker processes will be needed: their server starts while the store is read
    if name is not None and len(files) > 1:
        raise InputError("--name applies to one file, but several were given", "Use --label to tag many runs")
    st = Store(store, create=True)
    views = _build_view_file_beside()  # the first query after this ingest finds it built
    # joined however the ingest ends: a thread still importing DuckDB when the process exits aborts it
    try:
        results: dict[Path, IngestResult] = {}
        from_dir = {f for f, d in listed if d}
        for f in from_dir:
            reason = sniff(f)
            if reason is not None:
                results[f] = not_a_trace(f, reason)
        todo = [f for f in files if f not in results]
        names: dict[Path, str | list[str]] = {f: name for f in todo} if name is not None else default_names(todo)
        taken: dict[str, set[str]] = {}
        for run_name, run_id in run_names(st, store_cache_dir(st)):
            taken.setdefault(run_name, set()).add(run_id)
        jobs = jobs or default_jobs()
        errors: list[tuple[Path, TraceduckError]] = []
        if len(todo) > 1 and jobs > 1:
            _ingest_many(todo, names, taken, st, labels, force, jobs, progress, salvage, results, errors, step_marker)
        else:
            for f in todo:
                cb = (lambda b, n, stage, f=f: progress(f, b, n, stage)) if progress else None
                try:
                    results[f] = ingest_file(f, st, name=names[f], labels=labels, force=force, jobs=jobs, progress=cb,
                                             salvage=salvage, taken=taken, step_marker=step_marker)
                except TraceduckError as e:
                    if len(files) == 1:
                        raise
                    errors.append((f, e))  # the others land, as with worker processes
        for f, e in errors[:]:
            if f in from_dir and isinstance(e, NotATrace):  # seen only past the first bytes
                results[f] = not_a_trace(f, e.reason)
                errors.remove((f, e))
    finally:
        views.join()
    _settle_duplicates(files, results, st)
    if any(r.run_id and not r.skipped for r in results.values()):
        write_snapshot(st, store_cache_dir(st))  # the next command reads the runs' rows in one file
    _raise_first(files, results, errors)
    return [results[f] for f in files]


def _build_view_file_beside() -> threading.Thread:
    """Build this version's view file (viewfile.py) in a thread while the ingest runs, once per
    version and user: the first query after an ingest then costs what the second does. Best effort:
    a cache that cannot be written leaves it to the first query (private_view_file)."""
    from .viewfile import view_file

    def build() -> None:
        try:
            view_file()
        except Exception:  # noqa: BLE001 - the first query builds it, or says what is wrong
            pass

    thread = threading.Thread(target=build, name="traceduck-views", daemon=True)
    thread.start()
    return thread


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # ingest says what is wrong with it
        return 0


def not_a_trace(path: Path, reason: str) -> IngestResult:
    from .ingester import IngestResult

    return IngestResult("", "", path, 0, 0.0, skipped=True, not_a_trace=reason)


def _settle_duplicates(files: list[Path], results: dict[Path, IngestResult], st: Store) -> None:
    """Files with the same bytes are one run. Worker processes race to publish it; the run gets the
    name of the first such file (by path), as ingesting them one by one would give."""
    from .ingester import IngestResult

    by_run: dict[str, list[Path]] = {}
    for f in files:
        r = results.get(f)
        if r is not None and r.run_id and not r.not_a_trace:
            by_run.setdefault(r.run_id, []).append(f)
    for run_id, same in by_run.items():
        published = [f for f in same if not results[f].skipped]
        if len(same) < 2 or not published or published == same[:1]:
            continue
        first, winner = same[0], results[published[-1]]
        want = results[first].name
        if st.run_row(run_id)["name"] != want:
            st.update_run(run_id, lambda row: {**row, "name": want})
        for f in same[1:]:
            results[f] = IngestResult(run_id, want, results[f].path, 0, results[f].seconds, skipped=True)
        results[first] = IngestResult(**{**winner.__dict__, "path": results[first].path, "name": want})


def _raise_first(files: list[Path], results: dict[Path, IngestResult], errors: list[tuple[Path, TraceduckError]]) -> None:
    """Raise the first failure (by path order), saying how many files failed, with every file's
    outcome attached (see `ingest`)."""
    if errors:
        errors.sort(key=lambda pe: files.index(pe[0]))
        first = errors[0][1]
        ingested = sum(not r.not_a_trace for r in results.values())
        error = (InputError if isinstance(first, NotATrace) else type(first))(
            f"{len(errors)} of {len(files)} files failed ({ingested} ingested); first: {first.message}", first.hint)
        failed = dict(errors)
        error.outcomes = [(f, results[f] if f in results else failed[f]) for f in files]
        raise error


def _ingest_many(files: list[Path], names: dict[Path, str | list[str]], taken: dict[str, set[str]], st: Store,
                 labels: dict[str, str] | None, force: bool, jobs: int,
                 progress: Callable[[Path, int, int, str], None] | None, salvage: bool,
                 results: dict[Path, IngestResult], errors: list[tuple[Path, TraceduckError]],
                 step_marker: str | None = None) -> None:
    """One file per worker process (e.g. one trace per rank); the others land if one fails."""
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from .ingester import ingest_file
    from .ingester.pipeline import worker_context

    with ProcessPoolExecutor(max_workers=min(jobs, len(files)), mp_context=worker_context()) as pool:
        futures = {pool.submit(ingest_file, f, st, name=names[f], labels=labels, force=force, jobs=1,
                               salvage=salvage, taken=taken, step_marker=step_marker): f for f in files}
        for fut in as_completed(futures):
            f = futures[fut]
            try:
                results[f] = fut.result()
            except TraceduckError as e:
                errors.append((f, e))
                continue
            if progress:
                progress(f, f.stat().st_size, results[f].events, "done")


class Database:
    """A store opened for querying. Views `runs`, `events`, `args`, `shapes`, `stacks` (and every
    view of `traceduck schema`) span all runs, or the runs given to `scoped`.

    Each query reads the runs published when it starts, listed anew before every `sql()`: every
    table of one query sees the same runs, even while other processes publish (see engine.py).
    """

    def __init__(self, store: Store, run_ids: list[str] | None = None, threads: int | None = None) -> None:
        self.engine = Engine(store, run_ids=run_ids, threads=threads)
        self.store = store

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The DuckDB connection the views are bound on."""
        return self.engine.con

    def sql(self, query: str, params: list | dict | None = None) -> duckdb.DuckDBPyRelation:
        """Run SQL (DuckDB dialect) over the store: a DuckDB relation (`.df()`, `.pl()`,
        `.to_arrow_table()`, `.fetchall()`). Parameters are bound: `sql("... WHERE name = ?", ["aten::mm"])`."""
        return self.engine.sql(query, params)

    def stream(self, query: str, params: list | dict | None = None) -> Stream | None:
        """Run SQL over the store and read its rows in batches (`Stream.batches`, 10,000 rows each,
        the values `fetchall()` gives): memory holds one batch, whatever the result's size. None
        for a statement that gives no rows (`CREATE TEMP TABLE ...`)."""
        return self.engine.stream(query, params)

    def report(self, name: str, /, runs: str | list[str] | None = None, limit: int | None = None,
               **params: object) -> duckdb.DuckDBPyRelation:
        """A canned report (`traceduck reports` lists them) over `runs` (selections as for
        `select_runs`; default: every run) as a DuckDB relation. `params` are the report's parameters
        (`group_by="call_site"`); `limit` keeps at most that many rows of each run. `run_id` and
        `run_name` columns are there when more than one run is covered."""
        selected = [runs] if isinstance(runs, str) else runs
        pairs = [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in params.items()]
        return self.report_query(name, runs=selected or None, params=pairs, limit=limit).relation()

    def report_query(self, name: str, runs: list[str] | None = None, params: list[str] | None = None,
                     limit: int | None = None, keep_run_columns: bool | None = None) -> reports.ReportQuery:
        """A canned report ready to run (`.relation()`, `.fetch()`, or `.stream(shape)` in batches),
        its parameters as `KEY=VALUE` strings; `keep_run_columns` keeps `run_id`/`run_name` when a
        single run is covered (they are dropped then by default)."""
        return reports.query(self.engine, name, runs=runs, params=params, limit=limit, keep_run_columns=keep_run_columns)

    def diff(self, a: str, b: str, by: str = "op", per_step: bool = False,
             threshold_pct: float = 5.0, exact_dims: bool = False) -> duckdb.DuckDBPyRelation:
        """Compare run `a` (the baseline) with run `b` group by group (`by`: op, kernel, call_site,
        shape or copy), biggest change first, as a DuckDB relation: calls, times, `delta_ns`, `ratio`
        and `status` (added, removed, faster, slower, or same within `threshold_pct` percent of A).
        `per_step` divides by each run's number of profiler steps. Shape and copy keys show dims that
        grow with the sequence as ranges (`[1005..1007, 8, 128]`), or each call's own with `exact_dims`."""
        from .diff import diff_relation

        return diff_relation(self.engine, a, b, by=by, per_step=per_step, threshold_pct=threshold_pct,
                             exact_dims=exact_dims)

    def diff_header(self, a: str, b: str) -> str:
        """`A: <name> <ms>/step (<n> steps); B: ...`: each run's time per step (or its span, without steps)."""
        from .diff import diff_header

        return diff_header(self.engine, a, b)

    def fetch(self, rel: duckdb.DuckDBPyRelation) -> tuple[list[str], list[tuple]]:
        """Column names and rows of a relation; query errors become QueryError."""
        return self.engine.retrying(lambda: (list(rel.columns), rel.fetchall()))

    def export(self, run: str, output: str | os.PathLike, format: str = "chrome",  # noqa: A002
               step: int | None = None, start: str | int | None = None, end: str | int | None = None,
               start_ns: int | None = None, end_ns: int | None = None, max_events: int | None = None,
               metric: str | None = None, redact: bool | None = None,
               counters: str | list[str] | None = None) -> ExportResult:
        """Write run `run` (an id, a unique id prefix or a name) to `output`. `format="chrome"`: a
        Chrome trace (gzip when `output` ends in .gz) of the whole run, of profiler step `step`, or
        of the events overlapping [start, end): `start`/`end` after the run's start (`"12.5ms"`,
        `"300us"`, or integer ns), or `start_ns`/`end_ns` absolute (`events.ts_ns`); each event as
        ingested; `max_events` keeps the earliest ones. `format="folded"`: folded stacks, `metric`
        `cpu_self` (the default) or `gpu`. `redact` replaces the values of top-level metadata keys
        that look like secrets (TOKEN, SECRET, PASSWORD, KEY, CREDENTIAL, AUTH) and of `env`
        mappings; by default on for a step or time range, off for the whole run (exact). `counters`
        (`"queue,memory,bandwidth"`, or a list of those) adds counter tracks (ph "C") to a Chrome
        trace: launch queue length per stream, allocated memory per device, memory copy bandwidth.
        Returns what was written (`ExportResult`)."""
        from .export import Window, export, parse_offset

        def offset(value: str | int | None, option: str) -> int | None:
            return parse_offset(value, option) if isinstance(value, str) else value

        window = Window(step=step, start_ns=start_ns, end_ns=end_ns, max_events=max_events,
                        start_offset_ns=offset(start, "--start"), end_offset_ns=offset(end, "--end"))
        return export(self.engine, self.resolve_run(run), output, format, window, metric, redact, counters)

    def runs(self, columns: list[str] | None = None) -> list[dict]:
        """Every run in the store, by name (then run id): the `runs` view's rows, or only these
        `columns` of them (a store of thousands of runs lists faster)."""
        return self.engine.runs(columns)

    def select_runs(self, selection_: str) -> list[str]:
        """Run ids for a selection, one of: a run id, a unique run id prefix, a run name, a
        shell-style pattern on names (`worker*`, `rank[0-3]`), `label:KEY=VALUE`, `rank:N`; or
        several of these joined by commas, selecting the runs that match every one
        (`label:job=run42,rank:0`). A run whose whole name or id is the selection is that run, even
        with commas or pattern characters in its name."""
        return selection.select(self.runs(list(selection.COLUMNS)), selection_)

    def resolve_run(self, selection_: str) -> str:
        """Exactly one run id from a selection (see select_runs)."""
        return selection.resolve(self.runs(list(selection.COLUMNS)), selection_)

    def relations(self) -> list[tuple[str, str, str]]:
        """(name, kind, documentation) of every documented table and view, in load order, then of every
        macro (kind 'macro' or 'table macro')."""
        return self.engine.relations()

    def describe(self, name: str) -> tuple[str, list[tuple[str, ...]]]:
        """(documentation, rows) of one table, view or macro: a table's or view's columns as (column, type,
        documentation); a macro's arguments, then a table macro's columns, as (part, name, type,
        documentation) with part 'argument' or 'column'."""
        return self.engine.describe(name)

    def cursor(self, run_ids: list[str] | None = None) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection of its own (temp tables, settings) over the runs published now, or over
        only `run_ids` (then only their files are read)."""
        return self.engine.cursor(run_ids)

    def one_listing(self) -> AbstractContextManager[None]:
        """A block whose calls read the runs as listed when the store was opened (or last listed),
        instead of listing them before each call: one state of the store for several calls, and a
        store of thousands of runs listed once (each CLI command is one such block)."""
        return self.engine.held_listing()

    def scoped(self, run_ids: list[str]) -> Database:
        """Another connection whose tables and views hold only these runs (reads only their files)."""
        return Database(self.store, run_ids=list(run_ids))

    def close(self) -> None:
        """Close the connection (a `with traceduck.open(...) as db:` block does it on leaving)."""
        self.engine.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open(store: str | os.PathLike | None = None) -> Database:  # noqa: A001 - mirrors duckdb/sqlite3
    """Open a store for querying (default: `$TRACEDUCK_STORE`, else `./traceduck.store`). The
    `Database` it returns is a context manager; `sql()`, `report()` and `diff()` return DuckDB relations."""
    return Database(Store(store))


def export(run: str, output: str | os.PathLike, store: str | os.PathLike | None = None,
           format: str = "chrome", step: int | None = None, start: str | int | None = None,  # noqa: A002
           end: str | int | None = None, start_ns: int | None = None, end_ns: int | None = None,
           max_events: int | None = None, metric: str | None = None, redact: bool | None = None,
           counters: str | list[str] | None = None) -> ExportResult:
    """Write run `run` (an id, a unique id prefix or a name) to `output`: see `Database.export`."""
    with open(store) as db:
        return db.export(run, output, format=format, step=step, start=start, end=end, start_ns=start_ns,
                         end_ns=end_ns, max_events=max_events, metric=metric, redact=redact, counters=counters)


def _run_rows(st: Store) -> list[dict]:
    """Every run's row for selecting runs (selection.py), by name, read from the runs' files without DuckDB."""
    return selection.by_name(st.run_rows(["run_id", "name", "labels", "rank"]))


def label(runs: str | Iterable[str], labels: dict[str, str] | None = None, remove: Iterable[str] = (),
          store: str | os.PathLike | None = None) -> list[dict]:
    """Set labels on the selected runs (a value replaces the key's old one) and remove the keys in
    `remove`; returns each run's `run_id`, `name` and `labels` after the change. Each run's new
    labels are published at once (see `Store.update_run`): readers see the old ones or the new."""
    labels = dict(labels or {})
    remove = list(remove)
    if not labels and not remove:
        raise InputError("no labels to set or remove", "Give KEY=VALUE labels, or --remove KEY")
    for key in [*labels, *remove]:
        if not key or "=" in key:
            raise InputError(f"{key!r} is not a label key", "Keys are non-empty and have no '='")
    st = _to_change(store)
    chosen = selection.picked(_run_rows(st), runs)
    for key in remove:
        if not any(key in selection.labels_of(r) for r in chosen):
            have = sorted({k for r in chosen for k in selection.labels_of(r)})
            raise InputError(f"no selected run has label {key!r}",
                             f"Their labels: {', '.join(have)}" if have else "They have no labels")

    def change(row: dict) -> dict:
        kept = {k: v for k, v in row["labels"] if k not in remove}
        return {**row, "labels": list({**kept, **labels}.items())}

    out = []
    for r in chosen:
        row = st.update_run(r["run_id"], change)
        out.append({"run_id": row["run_id"], "name": row["name"], "labels": dict(row["labels"])})
    return out


def rename(run: str, name: str, store: str | os.PathLike | None = None) -> tuple[str, str, str]:
    """Give one run a new name, one no other run has; returns (run_id, old name, new name)."""
    if not name.strip() or not name.isprintable():
        raise InputError(f"{name!r} cannot be a run name", "Give a name with printable characters")
    if name.startswith(("label:", "rank:")):
        raise InputError(f"{name!r} cannot be a run name: it reads as a run selection",
                         "Give a name that does not start with label: or rank:")
    st = _to_change(store)
    run_id = selection.resolve(_run_rows(st), run)
    old: list[str] = []

    def change(row: dict) -> dict:
        others = [r["run_id"] for r in st.run_rows(["run_id", "name"])
                  if r["name"] == name and r["run_id"] != run_id]
        if others:
            raise InputError(f"run {short_id(others[0])} is already named {name!r}", "Give another name, or rename that run first")
        old.append(row["name"])
        return {**row, "name": name}

    st.update_run(run_id, change)
    return run_id, old[0], name


def set_step_marker(runs: str | Iterable[str], marker: str | None = None,
                    store: str | os.PathLike | None = None) -> list[dict]:
    """Derive the steps of the selected runs anew: from the CPU annotations whose names match
    `marker` (a regular expression, RE2 as DuckDB's regexp_matches), or with None the automatic
    choice of ingest (ProfilerStep#N, else SGLang's step[...], else vLLM's execute_...). Rewrites
    each run's step_windows and its events' steps, and publishes the run whole, as `ingest --force`
    replaces one: readers see the old steps or the new. Returns each run's `run_id`, `name`,
    `steps` (how many) and `family` ('profiler_step', 'sglang', 'vllm', 'pattern'; None: no step).
    A later `ingest --force` of the trace derives the steps again without the pattern unless given one."""
    from .ingester.steps import check_marker, restep_run

    marker = check_marker(marker)
    st = _to_change(store)
    chosen = selection.picked(_run_rows(st), runs)
    out = []
    for r in chosen:
        steps, family = restep_run(st, r["run_id"], marker)
        out.append({"run_id": r["run_id"], "name": r["name"], "steps": steps, "family": family})
    return out


def remove(runs: str | Iterable[str], store: str | os.PathLike | None = None) -> list[tuple[str, str]]:
    """Remove the selected runs from the store; returns (run_id, name) of each. Each run goes at
    once: readers see it whole or not at all (see `Store.remove_runs`)."""
    st = _to_change(store)
    chosen = selection.picked(_run_rows(st), runs)
    st.remove_runs([r["run_id"] for r in chosen])
    packs.remove_holding(st, [r["run_id"] for r in chosen])
    return [(r["run_id"], r["name"]) for r in chosen]


def check(store: str | os.PathLike | None = None) -> CheckResult:
    """Verify every run's and pack's files against the checksums written when they were published,
    and read each run's row back: `damaged` lists each damaged file with its run (see integrity.py).
    Runs published before checksums are listed in `without_checksums` (their rows still read)."""
    from .integrity import check as check_store

    return check_store(_existing(store))


def compact(runs: str | Iterable[str] | None = None, store: str | os.PathLike | None = None) -> CompactResult:
    """Pack the tables of the selected runs (default: every run) into one Parquet file per table,
    which queries read instead of one file per run: for stores of many runs (every rank of a job).
    The runs stay as they are; a later change to a packed run (rm, ingest --force) makes queries
    read its own files again. Returns what was packed (see `packs.py`)."""
    from .compaction import ChangedMeanwhile
    from .compaction import compact as compact_store

    st = _to_change(store)
    for attempt in range(COMPACT_ATTEMPTS):
        rows = _run_rows(st)
        chosen = [r["run_id"] for r in (selection.picked(rows, runs) if runs is not None else rows)]
        stamps = st.run_stamps(chosen)
        try:
            return compact_store(st, chosen)
        except StoreError as e:
            # a run removed or replaced by another process while packing: pack the runs there now
            if not isinstance(e, ChangedMeanwhile) and st.run_stamps(chosen) == stamps:
                raise
            if attempt == COMPACT_ATTEMPTS - 1:
                raise ChangedMeanwhile(f"runs of {st.path} were replaced or removed while packing, "
                                       f"{COMPACT_ATTEMPTS} times", "Run `traceduck compact` again") from None
    raise AssertionError("unreachable")


COMPACT_ATTEMPTS = 3


def _to_change(store: str | os.PathLike | None) -> Store:
    """The store at `store`, which must exist, for a command that changes it: first, what killed or
    failed commands left under tmp/ is removed (as an ingest does when it starts)."""
    st = _existing(store)
    st.remove_leftovers()
    return st


def _existing(store: str | os.PathLike | None) -> Store:
    """The store at `store`, which must exist."""
    st = Store(store)
    if not st.path.is_dir():
        raise StoreError(f"no store at {st.path}", "Run `traceduck ingest TRACE` first, or pass --store")
    return st
