"""Every shared trace ingests, keeps every event, and exports back to the same trace."""

from __future__ import annotations

import subprocess
import sys

import pytest

import traceduck
from traceduck.export import export_run
from traceduck.store import Store

from conftest import NOT_TRACES, load_json, run_report, shared_dir, shared_trace_files, trace_events
from roundtrip import trace_difference

pytestmark = pytest.mark.slow  # every shared trace, ingested and exported: minutes


@pytest.mark.parametrize("rel", shared_trace_files())
def test_counts_and_export_round_trip(shared_store, rel, tmp_path):
    path, results = shared_store
    run_id = results[rel].run_id
    original = load_json(shared_dir() / rel)
    with traceduck.open(path) as db:
        count = db.sql("SELECT count(*) FROM events WHERE run_id = ?", [run_id]).fetchall()[0][0]
        event_count = db.sql("SELECT event_count FROM runs WHERE run_id = ?", [run_id]).fetchall()[0][0]
    assert count == len(trace_events(original))
    assert event_count == count
    out = tmp_path / "export.json"
    export_run(Store(path), run_id, out)
    assert trace_difference(original, load_json(out)) is None


def test_byte_identical_files_are_one_run(shared_store):
    _, results = shared_store
    by_run = {}
    for rel, r in results.items():
        by_run.setdefault(r.run_id, []).append((rel, r.skipped))
    pairs = [v for v in by_run.values() if len(v) > 1]
    assert len(pairs) == 3  # rank_non_gpu, sampled_rank-0, simple_add are each stored twice
    for pair in pairs:
        assert [skipped for _, skipped in pair] == [False, True]


def test_every_run_is_in_one_store(shared_store):
    path, results = shared_store
    with traceduck.open(path) as db:
        n_runs = db.sql("SELECT count(*) FROM runs").fetchall()[0][0]
    assert n_runs == len({r.run_id for r in results.values()}) == len(results) - 3


@pytest.mark.parametrize("rel", sorted(NOT_TRACES))
def test_files_that_are_not_traces_fail_in_one_line(rel, tmp_path):
    path = shared_dir() / rel
    proc = subprocess.run([sys.executable, "-m", "traceduck", "ingest", str(path), "--store", str(tmp_path / "s")],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr == f"Error: {path}: not a trace (no traceEvents key). A PyTorch profiler trace is a JSON object with a traceEvents list.\n"
    assert "Traceback" not in proc.stderr
    assert not list((tmp_path / "s" / "runs").iterdir())


def test_dtypes_are_spelled_as_torch_does(shared_store):
    """Every dtype a view or report shows, on every shared trace, is torch's name (or NULL), and the
    exporter's text stays in shapes.dtype_raw."""
    from test_shapes import TORCH_NAMES

    path, _ = shared_store
    with traceduck.open(path) as db:
        torch_names = {n for (n,) in db.sql("SELECT torch_name FROM dtypes WHERE torch_name IS NOT NULL").fetchall()}
        shapes = db.sql("SELECT DISTINCT dtype, dtype_raw FROM shapes").fetchall()
        copies = db.sql("SELECT DISTINCT src_dtype FROM tensor_copies UNION SELECT dst_dtype FROM tensor_copies").fetchall()
        columns, rows = run_report(db, "collectives")
    collective_dtypes = {r[columns.index("dtype")] for r in rows}
    assert torch_names >= {"float32", "bfloat16", "float16", "float8_e4m3fn", "int64"}
    assert all(not n.startswith(("torch.", "c10::")) for n in torch_names)
    assert {d for d, _ in shapes} - {None} <= torch_names
    assert {d for (d,) in copies} - {None} <= torch_names
    assert collective_dtypes - {None} <= torch_names and collective_dtypes & {"float32", "bfloat16"}
    # the raw spelling maps to the canonical one as written out by hand in test_shapes
    for dtype, raw in shapes:
        assert dtype == TORCH_NAMES.get(raw), (dtype, raw)
    assert ("bfloat16", "c10::BFloat16") in shapes and ("int64", "long int") in shapes
