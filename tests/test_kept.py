"""Report rows kept beside a run (kept.py): a report with its default parameters over runs no pack
summarizes writes each run's rows on first use and reads them on later calls, answering byte for
byte as when computed; never read for another version, a session that changed a reference table,
a run replaced or removed, or a damaged file; a store that cannot be written just computes."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import traceduck
from traceduck import kept
from traceduck.catalog import all_reports
from conftest import SAMPLES, shared_dir
from test_crash import run_id_of
from test_faults import strace
from test_packs import cli, hta_ranks

BUGGY = SAMPLES / "buggy.json.gz"
FORMATS = ("json", "table")  # and csv with a --limit


def kept_files(store: Path) -> list[Path]:
    return sorted(p for p in (store / "runs").glob(f"*/{kept.DERIVED_DIR}/*/*") if p.is_file())


def outputs(capsys, store: Path, name: str, selection: list[str], formats=FORMATS) -> dict[str, str]:
    """The report's output in each format (and csv with a --limit, with every format); a failing
    report's error line."""
    out = {}
    for fmt in formats:
        code, text, err = cli(capsys, "report", name, "--store", store, "--format", fmt, *selection)
        out[fmt] = text if code == 0 else f"exit {code}: {err}"
    if formats == FORMATS:
        code, text, err = cli(capsys, "report", name, "--store", store, "--format", "csv", "--limit", "2", *selection)
        out["csv --limit 2"] = text if code == 0 else f"exit {code}: {err}"
    return out


def selections(runs: list[str]) -> list[list[str]]:
    """Every run (a job report over several runs: computed, and an error where they are not one job)
    and each run alone (kept for every report)."""
    return [[]] + [["--run", r] for r in runs]


def same_answers_computed_and_kept(capsys, monkeypatch, store: Path, runs: list[str],
                                   names: list[str] | None = None, formats=FORMATS) -> int:
    """Every report's outputs: computed with kept rows never written, then the first call (writes
    them), then a second (reads them): identical. Returns how many reports read kept rows."""
    read = 0
    for name in names or sorted(all_reports()):
        for selection in selections(runs):
            with monkeypatch.context() as m:
                m.setattr(kept, "write", lambda *a, **k: False)
                computed = outputs(capsys, store, name, selection, formats)
            first = outputs(capsys, store, name, selection, formats)
            files = {p: p.read_bytes() for p in kept_files(store) if p.name.startswith(f"report-{name}.")}
            with monkeypatch.context() as m:  # the second call computes nothing: the report's SQL fails
                m.setattr(all_reports()[name], "sql", "SELECT error('computed again')")
                second = outputs(capsys, store, name, selection, formats)
            if second != first:  # computed: not kept (a job report over several runs)
                second = outputs(capsys, store, name, selection, formats)
            elif not any(text.startswith("exit ") for text in second.values()):
                read += 1
            assert computed == first == second, (name, selection)
            assert {p: p.read_bytes() for p in files} == files  # read, not written again
    return read


SOME = ["overview", "ranks", "roofline", "top-ops", "ops-by-shape"]  # job reports, and the slowest per-run ones


def test_some_reports_on_the_samples_answer_the_same_computed_and_kept(samples_store, capsys, monkeypatch):
    """The short version of the test below."""
    read = same_answers_computed_and_kept(capsys, monkeypatch, samples_store, ["buggy"], SOME)
    assert read == 3 * 2 + 2  # per-run reports over every run and over the one; job reports over the one


@pytest.mark.slow  # minutes: about 1,200 report commands
def test_every_report_on_the_samples_answers_the_same_computed_and_kept(samples_store, capsys, monkeypatch):
    with traceduck.open(samples_store) as db:
        runs = [r["name"] for r in db.runs()]
    read = same_answers_computed_and_kept(capsys, monkeypatch, samples_store, runs)
    per_run = sum(r.per_run for r in all_reports().values())
    # per-run reports over every run and over each run; job reports over each run alone
    assert read == per_run * 3 + (len(all_reports()) - per_run) * 2
    assert {p.parent.parent.parent.name for p in kept_files(samples_store)} == {run_id_of(p) for p in SAMPLES.glob("*.json.gz")}


@pytest.mark.slow  # minutes: about 650 report commands
def test_every_report_on_shared_traces_answers_the_same_computed_and_kept(tmp_path, capsys, monkeypatch):
    """As on the samples, as json only (the samples' test compares every format and --limit)."""
    d = shared_dir()
    traces = [*hta_ranks(), d / "public/pytorch__kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
              d / "cpu/fixed.json"]
    store = tmp_path / "store"
    traceduck.ingest(traces, store=store)
    with traceduck.open(store) as db:
        runs = [r["run_id"] for r in db.runs()]
    assert same_answers_computed_and_kept(capsys, monkeypatch, store, runs, formats=("json",)) > len(all_reports()) * len(runs)


def rewrite(path: Path, change: str) -> Path:
    """Rewrite a kept file with `change` (a SELECT * REPLACE list), under the name of its new bytes'
    digest: a stored file that changed soundly."""
    tmp = path.with_name("changed.tmp")
    duckdb.execute(f"COPY (SELECT * REPLACE ({change}) FROM '{path}') TO '{tmp}' (FORMAT parquet)")
    prefix = path.name[:-len(".parquet")].rsplit(".", 1)[0]
    new = path.with_name(f"{prefix}.{kept.file_digest(tmp)}.parquet")
    os.rename(tmp, new)
    path.unlink()
    return new


def top_kernels(db, **kwargs) -> list[tuple]:
    return db.report_query("top-kernels", **kwargs).fetch()[1]


def test_stored_rows_are_read_and_only_where_they_apply(tmp_path, monkeypatch):
    store = tmp_path / "store"
    rank0, rank1 = hta_ranks()
    traceduck.ingest([rank0, rank1], store=store)
    with traceduck.open(store) as db:
        with monkeypatch.context() as m:
            m.setattr(kept, "write", lambda *a, **k: False)
            computed = top_kernels(db)
            linked = db.report_query("comm-overlap", params=["linked_only=true"]).fetch()
            assert kept_files(store) == []
        assert top_kernels(db) == computed  # written
        (one,) = [p for p in kept_files(store) if p.parts[-4] == run_id_of(rank0) and "top-kernels" in p.name]
        at = [c.name for c in all_reports()["top-kernels"].columns].index("instances")
        marked = [r[:at] + (r[at] + 1000,) + r[at + 1:] if r[0] == run_id_of(rank0) else r for r in computed]
        assert marked != computed
        rewrite(one, "instances + 1000 AS instances")
        assert top_kernels(db) == marked  # read: the changed file shows
        assert top_kernels(db, limit=2) == [r for r in marked if r[0] == run_id_of(rank0)][:2] + \
            [r for r in marked if r[0] == run_id_of(rank1)][:2]
        # other parameters: computed, not kept
        files = kept_files(store)
        assert db.report_query("comm-overlap", params=["linked_only=true"]).fetch() == linked
        assert kept_files(store) == files

    # another summaries key (another version, other SQL or reference data): not read
    with monkeypatch.context() as m:
        m.setattr(kept, "summaries_key", lambda: "0123456789abcdef")
        with traceduck.open(store) as db:
            assert top_kernels(db) == computed
        assert any(p.parts[-2].startswith("0123456789abcdef-") for p in kept_files(store))

    # a session that changed a reference table neither reads nor writes kept rows
    before = kept_files(store)
    with traceduck.open(store) as db:
        db.sql("DELETE FROM op_categories WHERE false")
        assert db.engine.references_changed
        assert top_kernels(db) == computed
        assert db.report_query("top-ops").fetch()[1]
    assert kept_files(store) == before
    with traceduck.open(store) as db:
        assert top_kernels(db) == marked

    # a rename shows: per-run rows take the name from runs; a job report's rows are kept per name
    traceduck.rename(run_id_of(rank0), "renamed", store=store)
    with traceduck.open(store) as db:
        name_at = [c.name for c in all_reports()["top-kernels"].columns].index("run_name")
        assert top_kernels(db) == [r[:name_at] + ("renamed",) + r[name_at + 1:] if r[0] == run_id_of(rank0) else r
                                   for r in marked]
        ranks = db.report_query("ranks", runs=[run_id_of(rank0)]).fetch()
        assert "renamed" in repr(ranks[1])
    traceduck.rename(run_id_of(rank0), "again", store=store)
    with traceduck.open(store) as db:
        ranks = db.report_query("ranks", runs=[run_id_of(rank0)]).fetch()
        assert "again" in repr(ranks[1]) and "renamed" not in repr(ranks[1])

    # replaced (ingest --force): the new run's files have none; removed: gone with the run
    traceduck.ingest(rank0, store=store, force=True)
    assert not (store / "runs" / run_id_of(rank0) / kept.DERIVED_DIR).exists()
    with traceduck.open(store) as db:
        assert top_kernels(db) == computed  # its own name again, the changed rows gone
    from traceduck import store as store_module
    monkeypatch.setattr(store_module, "REMOVE_GRACE_S", 0)
    traceduck.remove(run_id_of(rank1), store=store)
    assert not (store / "runs" / run_id_of(rank1)).exists()


def test_a_damaged_kept_file_is_computed_again(samples_store, capsys):
    code, computed, _ = cli(capsys, "report", "top-ops", "--store", samples_store, "--format", "csv")
    buggy = run_id_of(BUGGY)
    (path,) = [p for p in kept_files(samples_store) if p.parts[-4] == buggy]
    for damage in ("cut", "flip", "empty"):
        data = path.read_bytes()
        path.write_bytes({"cut": data[:len(data) // 2], "flip": data[:40] + bytes([data[40] ^ 1]) + data[41:],
                          "empty": b""}[damage])
        assert cli(capsys, "report", "top-ops", "--store", samples_store, "--format", "csv") == (0, computed, "")
        (path,) = [p for p in kept_files(samples_store) if p.parts[-4] == buggy]  # written again, whole
        assert path.name == f"report-top-ops.{kept.file_digest(path)}.parquet"
    # `traceduck check` verifies the run's own files only
    path.write_bytes(b"damaged")
    code, out, err = cli(capsys, "check", "--store", samples_store)
    assert (code, err) == (0, "") and "damaged" not in out


def test_a_store_that_cannot_be_written_computes(samples_store, capsys, monkeypatch):
    """A derived directory that cannot be made (a file in its place, as a read-only or full store
    refuses it), and a write that fails: the report answers as computed, leaving nothing."""
    code, computed, _ = cli(capsys, "report", "top-ops", "--store", samples_store, "--format", "json")
    shutil.rmtree(samples_store / "runs" / run_id_of(BUGGY) / kept.DERIVED_DIR)
    for run in (samples_store / "runs").iterdir():
        shutil.rmtree(run / kept.DERIVED_DIR, ignore_errors=True)
        (run / kept.DERIVED_DIR).write_text("")
    assert cli(capsys, "report", "top-ops", "--store", samples_store, "--format", "json") == (0, computed, "")
    for run in (samples_store / "runs").iterdir():
        (run / kept.DERIVED_DIR).unlink()
    with monkeypatch.context() as m:
        m.setattr(duckdb.DuckDBPyConnection, "execute", _failing_copy(duckdb.DuckDBPyConnection.execute))
        assert cli(capsys, "report", "top-ops", "--store", samples_store, "--format", "json") == (0, computed, "")
    assert kept_files(samples_store) == []
    assert not list((samples_store / "runs").glob(f"*/{kept.DERIVED_DIR}/*/.tmp-*"))


def _failing_copy(execute):
    def wrapped(self, query, *args, **kwargs):
        if query.startswith("COPY (FROM __kept"):
            raise duckdb.IOException("No space left on device")
        return execute(self, query, *args, **kwargs)
    return wrapped


@pytest.mark.parametrize("syscall", ["rename", "mkdir", "pwrite64"])
def test_a_failed_write_never_fails_the_report(samples_store, tmp_path, syscall):
    """Every call of `syscall` fails with ENOSPC, in a new process (DuckDB writes its files with
    pwrite64, stdout is written with write): the report answers as computed and leaves nothing."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    cmd = [sys.executable, "-m", "traceduck", "report", "top-ops", "--store", str(samples_store), "--format", "csv"]
    computed = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    for run in (samples_store / "runs").iterdir():
        shutil.rmtree(run / kept.DERIVED_DIR, ignore_errors=True)
    out = tmp_path / "out.csv"
    with open(out, "w") as f:
        got = subprocess.run([strace(), "-f", "-o", "/dev/null", "-e", f"trace={syscall}",
                              "-e", f"inject={syscall}:error=ENOSPC", *cmd],
                             stdout=f, stderr=subprocess.PIPE, text=True, env=env)
    assert (got.returncode, got.stderr, out.read_text()) == (0, "", computed)
    assert kept_files(samples_store) == []
    assert not list((samples_store / "runs").glob(f"*/{kept.DERIVED_DIR}/*/.tmp-*"))


def test_rows_of_a_run_removed_meanwhile_never_make_its_directory_again(samples_store):
    """A report that found its run's rows missing and computed them writes nothing once the run is
    gone (`rm` moved its directory away): the run's directory is not made again."""
    from traceduck.store import Store

    store = Store(samples_store)
    buggy = run_id_of(BUGGY)
    where = kept.directory(store, buggy)
    shutil.rmtree(samples_store / "runs" / buggy)
    con = duckdb.connect()
    assert not kept.write(con, where, "top-ops", "SELECT 1 AS x")
    assert not (samples_store / "runs" / buggy).exists()
    assert kept.directory(store, buggy) is None


DIFFS = [[], ["--by", "shape"], ["--by", "copy", "--per-step"], ["--by", "call_site", "--threshold", "50"],
         ["--by", "op_shape", "--exact-dims"], ["--limit", "3"]]


def test_a_comparison_is_kept_beside_run_b_and_read_while_both_runs_stay(samples_store, capsys, monkeypatch):
    """`diff A B`: computed with nothing kept, the first call (keeps its rows beside B, one file per
    A and parameters), the second (reads them: diff.sql would fail): the same output in every format."""
    from traceduck import diff as diff_module

    broken = dataclasses.replace(diff_module.diff_spec(), sql="SELECT error('computed again')")
    buggy, fixed = run_id_of(BUGGY), run_id_of(SAMPLES / "fixed.json.gz")
    for args in DIFFS:
        for fmt in FORMATS:
            cmd = ["diff", "buggy", "fixed", "--store", samples_store, "--format", fmt, *args]
            with monkeypatch.context() as m:
                m.setattr(kept, "write", lambda *a, **k: False)
                computed = cli(capsys, *cmd)
            first = cli(capsys, *cmd)
            with monkeypatch.context() as m:
                m.setattr(diff_module, "diff_spec", lambda: broken)
                second = cli(capsys, *cmd)
            assert computed == first == second and computed[0] == 0, (args, fmt)
    files = [p for p in kept_files(samples_store) if p.name.startswith("report-diff.")]
    assert {p.parts[-4] for p in files} == {fixed}
    assert len(files) == len(DIFFS) - 1  # --limit only cuts the default comparison's rows
    # the other way round is another comparison, kept beside its B
    assert cli(capsys, "diff", "fixed", "buggy", "--store", samples_store)[0] == 0
    assert {p.parts[-4] for p in kept_files(samples_store) if p.name.startswith("report-diff.")} == {fixed, buggy}
    # run A replaced (its events.parquet a new file): compared again, never the rows kept for the old one
    events = samples_store / "runs" / buggy / "events.parquet"
    data = events.read_bytes()
    events.unlink()
    events.write_bytes(data)
    with monkeypatch.context() as m:
        m.setattr(diff_module, "diff_spec", lambda: broken)
        code, _, err = cli(capsys, "diff", "buggy", "fixed", "--store", samples_store)
    assert code == 1 and err.startswith("Error: diff failed")
