"""The Python API: `traceduck.ingest(...)` and `traceduck.open(store)`."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from .db import Database
from .errors import InputError, TraceduckError
from .ingester import IngestResult, default_jobs, ingest_file
from .store import Store

TRACE_SUFFIXES = (".json", ".json.gz")


def expand_paths(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """Files to ingest: each file as given; each directory's *.json and *.json.gz, sorted."""
    out: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            found = sorted(f for f in path.iterdir() if f.is_file() and f.name.endswith(TRACE_SUFFIXES))
            if not found:
                raise InputError(f"{path}: no .json or .json.gz files in this directory")
            out.extend(found)
        elif not path.exists():
            raise InputError(f"{path}: no such file", "Check the path")
        else:
            out.append(path)
    return out


def ingest(paths: str | os.PathLike | Iterable[str | os.PathLike], store: str | os.PathLike | None = None,
           name: str | None = None, labels: dict[str, str] | None = None, force: bool = False,
           jobs: int | None = None,
           progress: Callable[[Path, int, int], None] | None = None, salvage: bool = False) -> list[IngestResult]:
    """Ingest trace files (or directories of them) into a store; returns one result per file.
    With `salvage`, a truncated or damaged trace keeps its complete events before the cut."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files = expand_paths(paths)
    if name is not None and len(files) > 1:
        raise InputError("--name applies to one file, but several were given", "Use --label to tag many runs")
    st = Store(store, create=True)
    jobs = jobs or default_jobs()
    if len(files) > 1 and jobs > 1:
        return _ingest_many(files, st, labels, force, jobs, progress, salvage)
    results: dict[Path, IngestResult] = {}
    errors: list[tuple[Path, TraceduckError]] = []
    for f in files:
        cb = (lambda b, n, f=f: progress(f, b, n)) if progress else None
        try:
            results[f] = ingest_file(f, st, name=name, labels=labels, force=force, jobs=jobs, progress=cb,
                                     salvage=salvage)
        except TraceduckError as e:
            if len(files) == 1:
                raise
            errors.append((f, e))  # the others land, as with worker processes
    _raise_first(files, results, errors)
    return [results[f] for f in files]


def _raise_first(files: list[Path], results: dict[Path, IngestResult], errors: list[tuple[Path, TraceduckError]]) -> None:
    if errors:
        errors.sort(key=lambda pe: files.index(pe[0]))
        first = errors[0][1]
        raise type(first)(f"{len(errors)} of {len(files)} files failed ({len(results)} ingested); first: {first.message}",
                          first.hint)


def _ingest_many(files: list[Path], st: Store, labels: dict[str, str] | None, force: bool, jobs: int,
                 progress: Callable[[Path, int, int], None] | None, salvage: bool = False) -> list[IngestResult]:
    """One file per worker process (e.g. one trace per rank); the others land if one fails."""
    ctx = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
    results: dict[Path, IngestResult] = {}
    errors: list[tuple[Path, TraceduckError]] = []
    with ProcessPoolExecutor(max_workers=min(jobs, len(files)), mp_context=ctx) as pool:
        futures = {pool.submit(ingest_file, f, st, None, labels, force, 1, None, salvage): f for f in files}
        for fut in as_completed(futures):
            f = futures[fut]
            try:
                results[f] = fut.result()
            except TraceduckError as e:
                errors.append((f, e))
                continue
            if progress:
                progress(f, f.stat().st_size, results[f].events)
    _raise_first(files, results, errors)
    return [results[f] for f in files]


def open(store: str | os.PathLike | None = None) -> Database:  # noqa: A001 - mirrors duckdb/sqlite3
    """Open a store for querying; `.sql(...)` returns DuckDB relations."""
    return Database(Store(store))
