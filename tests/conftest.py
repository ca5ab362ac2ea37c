"""Shared fixtures: the shared real traces (required in CI), and tiny hand-made traces."""

from __future__ import annotations

import gzip
import importlib
import json
import os
import shutil
import tempfile
from decimal import Decimal
from pathlib import Path

import pytest

# The view file (built once per traceduck version, see viewfile.py) is shared by every test's stores,
# in a directory of this test session rather than the user's cache (removed at the end).
_VIEW_FILES = None
if "TRACEDUCK_CACHE_DIR" not in os.environ:
    _VIEW_FILES = os.environ["TRACEDUCK_CACHE_DIR"] = tempfile.mkdtemp(prefix="traceduck-test-views-")


@pytest.fixture(scope="session", autouse=True)
def _session_view_files():
    yield
    if _VIEW_FILES is not None:
        shutil.rmtree(_VIEW_FILES, ignore_errors=True)

ROOT = Path(__file__).resolve().parents[1]
SHARED_TRACES = ROOT.parent / "shared" / "traces"
SAMPLES = ROOT / "samples"

# Files under shared/traces that are JSON but not Chrome traces (no traceEvents list).
NOT_TRACES = {
    "public/AMD-AGI__TraceLens/tests/traces/tracediff_test/cpu_op_map_trace1.json",
    "public/facebookresearch__HolisticTraceAnalysis/tests/data/execution_trace/benchmark_simple_add_et.json.gz",
}


def shared_dir() -> Path:
    """The shared traces; a missing directory fails under CI and skips elsewhere."""
    if not SHARED_TRACES.is_dir():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"shared traces missing at {SHARED_TRACES} (required when CI=true)")
        pytest.skip("shared traces not present")
    return SHARED_TRACES


def require(module: str, extra: str = "test-all"):
    """Import an optional test dependency (Spark, the notebook stack, polars, pandas): a test that
    needs one skips where it is not installed, and fails under CI=true, where `.[test-all]` is."""
    try:
        return importlib.import_module(module)
    except ImportError:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{module} is not installed (required when CI=true: pip install '.[{extra}]')")
        pytest.skip(f"{module} is not installed (pip install '.[{extra}]')")


def all_shared_files() -> list[str]:
    """Relative paths of every .json/.json.gz under shared/traces (collected at import time)."""
    if not SHARED_TRACES.is_dir():
        return ["<missing shared traces>"]
    files = [p for p in SHARED_TRACES.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz"))]
    return sorted(str(p.relative_to(SHARED_TRACES)) for p in files)


def shared_trace_files() -> list[str]:
    return [f for f in all_shared_files() if f not in NOT_TRACES]


def load_json(path: Path, exact: bool = True):
    """The trace as plain `json` sees it (the independent reference); floats as Decimal when exact."""
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rb") as f:
        return json.loads(f.read(), parse_float=Decimal if exact else float)


def trace_events(doc) -> list:
    return doc if isinstance(doc, list) else doc["traceEvents"]


def interval_union(intervals) -> list[list[int]]:
    """Merged [start, end] intervals, sorted: the independent reference for busy time."""
    out: list[list[int]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def union_length(intervals) -> int:
    """Total length of the union of the intervals."""
    return sum(e - s for s, e in interval_union(intervals))


def write_trace(path: Path, events: list, **top) -> Path:
    """A hand-made Kineto-style trace file."""
    doc = {"schemaVersion": 1, **top, "traceEvents": events, "traceName": str(path.name)}
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture(scope="session")
def samples_template(tmp_path_factory) -> Path:
    """The two samples (runs `buggy` and `fixed`) ingested once, with the store's view file built:
    copied by `samples_store`, never changed."""
    import traceduck

    path = tmp_path_factory.mktemp("samples") / "store"
    traceduck.ingest([SAMPLES / "buggy.json.gz", SAMPLES / "fixed.json.gz"], store=path, jobs=1)
    traceduck.open(path).close()
    return path


@pytest.fixture
def samples_store(samples_template: Path, tmp_path: Path) -> Path:
    """A store of this test's own holding the two samples: a copy of `samples_template`, which
    spares each test the ingest and the view file (a second or more) of a new store."""
    path = tmp_path / "samples"
    shutil.copytree(samples_template, path)
    return path


@pytest.fixture(scope="session")
def shared_ingest(tmp_path_factory):
    """The whole shared directory ingested in one call, as a user would (recursively, one worker
    process per file): (store path, {relative path: IngestResult} for every .json/.json.gz file,
    traces or not)."""
    import traceduck
    from traceduck.api import expand_paths

    root = shared_dir()
    path = tmp_path_factory.mktemp("shared") / "store"
    results = traceduck.ingest(root, store=path)
    return path, {str(f.relative_to(root)): r for f, r in zip(expand_paths([root]), results)}


@pytest.fixture(scope="session")
def shared_store(shared_ingest):
    """One store holding every shared trace: (store path, {relative path: IngestResult}) for the traces."""
    path, results = shared_ingest
    return path, {rel: r for rel, r in results.items() if not r.not_a_trace}


def run_report(db, name: str, runs: list[str] | None = None, params: list[str] | None = None,
               limit: int | None = None, keep_run_columns: bool | None = None) -> tuple[list[str], list[tuple]]:
    """(columns, rows) of a report over a traceduck.open() database."""
    return db.report_query(name, runs=runs, params=params, limit=limit, keep_run_columns=keep_run_columns).fetch()
