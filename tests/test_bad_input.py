"""Bad input: every broken variant of a real trace ingests cleanly with the expected warnings,
or fails with one line and leaves the store as it was; random damage never gives a traceback."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import traceduck
from traceduck.catalog import all_reports
from traceduck.errors import InputError, JobSelectionError
from traceduck.ingester import pipeline
from traceduck.ingester.reader import NotParseable

from broken import SMALL, Variant, corpus, event_ends, write
from conftest import SAMPLES, SHARED_TRACES, run_report, shared_dir


def snapshot(store: Path) -> dict[str, str]:
    """Every file of the store with a hash of its bytes."""
    return {str(p.relative_to(store)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(store.rglob("*")) if p.is_file()}


def variants() -> list[Variant]:
    if not SHARED_TRACES.is_dir():
        return []
    return corpus(SHARED_TRACES)


@pytest.fixture(scope="module")
def base_store(tmp_path_factory):
    """A store holding the undamaged small trace: (store, its warnings, its names)."""
    root = shared_dir()
    store = tmp_path_factory.mktemp("bad") / "store"
    traceduck.ingest(root / SMALL, store=store, jobs=1)
    with traceduck.open(store) as db:
        warnings = db.sql("SELECT warnings FROM runs").fetchall()[0][0]
    return store, dict(warnings)


def _run_values(store: Path, run_id: str) -> tuple[dict, int, bool, set[str]]:
    with traceduck.open(store) as db:
        warnings, count, salvaged = db.sql("SELECT warnings, event_count, salvaged FROM runs WHERE run_id = ?",
                                           [run_id]).fetchall()[0]
        names = {r[0] for r in db.sql("SELECT name FROM events WHERE run_id = ?", [run_id]).fetchall()}
    return dict(warnings), count, salvaged, names


@pytest.mark.parametrize("variant", variants(), ids=lambda v: v.name)
@pytest.mark.slow  # 36 s
def test_broken_variant(variant: Variant, base_store, tmp_path):
    store, base_warnings = base_store
    path = write(variant, tmp_path)
    before = snapshot(store)
    if variant.fails:
        with pytest.raises(InputError) as err:
            traceduck.ingest(path, store=store, jobs=1)
        message = err.value.one_line()
        if variant.error is not None:
            assert message == variant.error.format(path=path)
        else:
            assert message.startswith(variant.error_prefix.format(path=path)), message
        assert "\n" not in message
        if variant.data is None:  # a directory: the good files land, the bad one leaves nothing
            added = {k.split("/")[1] for k in set(snapshot(store)) - set(before)}
            assert {k for k in snapshot(store) if not k.startswith(("runs/", "cache/"))} == set()  # cache/: the views
            with traceduck.open(store) as db:
                names = {r[0] for r in db.sql("SELECT name FROM runs").fetchall()}
                new_names = {r[0] for r in db.sql("SELECT name FROM runs WHERE list_contains(?, run_id)",
                                                  [sorted(added)]).fetchall()}
            assert "b" not in names and new_names == {"c"}  # a.json holds the same bytes as the base run
            return
        assert snapshot(store) == before, "a failed ingest changed the store"
        if variant.salvage_count is None:
            with pytest.raises(InputError):
                traceduck.ingest(path, store=tmp_path / "salvage", jobs=1, salvage=True)
            return
        result = traceduck.ingest(path, store=tmp_path / "salvage", jobs=1, salvage=True)[0]
        assert result.salvaged and result.events == variant.salvage_count
        warnings, count, salvaged, names = _run_values(tmp_path / "salvage", result.run_id)
        assert salvaged is True and count == variant.salvage_count
        assert sum(1 for k in warnings if k.startswith("salvaged: ")) == 1
        return
    result = traceduck.ingest(path, store=store, jobs=1)[0]
    warnings, count, salvaged, names = _run_values(store, result.run_id)
    assert salvaged is False
    for kind, n in variant.warnings.items():
        assert warnings.get(kind, 0) - base_warnings.get(kind, 0) == n, (kind, warnings)
    unexpected = set(warnings) - set(base_warnings) - set(variant.warnings)
    assert not unexpected, unexpected
    if variant.event_count is not None:
        assert count == variant.event_count
    for name in variant.names:
        assert name in names


def lenient_variants() -> list[Variant]:
    return [v for v in variants() if v.objects is not None]


@pytest.mark.parametrize("path", ["fast", "streaming"])
@pytest.mark.parametrize("variant", lenient_variants(), ids=lambda v: v.name)
@pytest.mark.slow  # 24 s
def test_lenient_variant_on_both_readers(variant: Variant, path: str, base_store, tmp_path, monkeypatch):
    """Trailing commas and items that are not objects read the same with the chunked reader and
    the streaming parser: every object is an event, in file order, with event ids 0..n-1 (skipped
    items take no id), and the warnings are exactly the expected ones."""
    _, base_warnings = base_store
    streamed = []
    streaming = pipeline._convert_streaming
    monkeypatch.setattr(pipeline, "_convert_streaming", lambda *a: streamed.append(1) or streaming(*a))
    if path == "streaming":
        def no_fast_path(*a):
            raise NotParseable("forced")
        monkeypatch.setattr(pipeline, "_convert_fast", no_fast_path)
    store = tmp_path / "store"
    result = traceduck.ingest(write(variant, tmp_path), store=store, jobs=1)[0]
    if path == "fast" and variant.fast:
        assert streamed == []
    else:
        assert streamed == [1]
    with traceduck.open(store) as db:
        rows = db.sql("SELECT event_id, name, phase, ts_ns - (SELECT base_time_ns FROM runs) FROM events "
                      "ORDER BY event_id").fetchall()
        warnings, count = db.sql("SELECT warnings, event_count FROM runs").fetchall()[0]
    expected = [(k, e.get("name"), e.get("ph"), None if "ts" not in e else int(Decimal(str(e["ts"])) * 1000))
                for k, e in enumerate(variant.objects)]
    assert rows == expected
    assert result.events == count == len(variant.objects)
    assert dict(warnings) == ({**base_warnings, **variant.warnings} if variant.objects else variant.warnings)


@pytest.mark.slow  # every view and report, twice
def test_empty_runs_work_everywhere(tmp_path):
    """A store holding runs with no events answers every view and report; next to a real run,
    the real run's rows are the same as in a store without the empty runs."""
    empty = [write_trace_bytes(tmp_path / "a.json", b'{"traceEvents": []}'),
             write_trace_bytes(tmp_path / "b.json", b"[]")]
    real = shared_dir() / SMALL
    alone, mixed = tmp_path / "alone", tmp_path / "mixed"
    real_id = traceduck.ingest(real, store=alone, jobs=1)[0].run_id
    traceduck.ingest(empty + [real], store=mixed, jobs=1)
    with traceduck.open(mixed) as db:
        runs = db.sql("SELECT name, event_count, start_ns, warnings FROM runs ORDER BY name").fetchall()
        assert [(n, c, s, dict(w)) for n, c, s, w in runs if n != real.name.removesuffix(".json")] == [
            ("a", 0, None, {"traceEvents holds no events": 1}), ("b", 0, None, {"traceEvents holds no events": 1})]
        for name, kind, _doc in db.relations():
            if kind in ("table", "view"):
                db.sql(f"SELECT * FROM {name}").fetchall()
        for name, report in all_reports().items():
            if "one_job" in report.requires:  # three unrelated runs are not one job
                with pytest.raises(JobSelectionError, match="needs the runs of one job"):
                    run_report(db, name)
            else:
                columns, rows = run_report(db, name)  # every run: the empty ones included
                assert columns
            for empty_run in ("a", "b"):
                run_report(db, name, runs=[empty_run])
            with traceduck.open(alone) as only:
                assert run_report(db, name, runs=[real_id]) == run_report(only, name), name
    for args in (["diff", "a", "b"], ["diff", real_id, "a", "--by", "call_site"], ["export", "a", "-o", tmp_path / "a.json.out"]):
        p = _cli(*args, "--store", mixed)
        assert p.returncode == 0, p.stderr
    assert json.loads((tmp_path / "a.json.out").read_text()) == {"traceEvents": []}


WRITE_HINT = ("Make the store writable for this user, or pass --store with a directory you can write; "
              "reading this store (runs, sql, report) needs no write access.")


def _unprivileged() -> list[str]:
    """A command prefix under which the kernel enforces permission bits. Root bypasses them
    (CAP_DAC_OVERRIDE), so as root the command runs through `setpriv` with every capability
    dropped: still uid 0, the owner of the test's files, so the owner bits apply."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: permission bits cannot be enforced")
    return [setpriv, "--bounding-set=-all", "--inh-caps=-all", "--"]


@pytest.mark.parametrize("locked", ["store,runs,tmp", "runs", "store"])
@pytest.mark.slow  # 10 s
def test_store_that_cannot_be_written(locked, tmp_path):
    """Ingest and catalog on a store this user may not write fail with one line naming the
    store, and leave it as it was; reading a read-only store keeps working."""
    store = tmp_path / "store"
    first = traceduck.ingest(SAMPLES / "buggy.json.gz", store=store, jobs=1)[0]
    dirs = {"store": store, "runs": store / "runs", "tmp": store / "tmp"}
    prefix = _unprivileged()
    for d in locked.split(","):
        dirs[d].chmod(0o555)
    try:
        before = snapshot(store)
        ingest = _cli_as(prefix, "ingest", SAMPLES / "fixed.json.gz", "--store", store)
        denied = {"store,runs,tmp": store / "tmp", "runs": store / "runs", "store": None}[locked]
        if denied is None:
            assert ingest.returncode == 0, ingest.stderr
        else:
            assert (ingest.returncode, ingest.stdout) == (1, "")
            assert ingest.stderr == (f"Error: cannot write to the store {store} (Permission denied: {denied}). "
                                     f"{WRITE_HINT}\n")
            assert snapshot(store) == before
        catalog = _cli_as(prefix, "catalog", "--store", store)
        if locked == "runs":
            assert catalog.returncode == 0, catalog.stderr
        else:
            where = store / "tmp" if "tmp" in locked else store
            assert catalog.stderr == (f"Error: cannot write to the store {store} (Permission denied: {where}). "
                                      f"{WRITE_HINT}\n")
            assert not list((store / "tmp").iterdir())
        if locked != "store,runs,tmp":
            return
        runs = _cli_as(prefix, "runs", "--store", store, "--format", "json")
        assert runs.returncode == 0, runs.stderr
        assert first.run_id in {r["run_id"] for r in json.loads(runs.stdout)}
        sql = _cli_as(prefix, "sql", "SELECT count(*) AS n FROM events WHERE run_id = ?".replace("?", f"'{first.run_id}'"),
                      "--store", store, "--format", "json")
        assert json.loads(sql.stdout) == [{"n": first.events}]
        report = _cli_as(prefix, "report", "top-ops", "--run", first.run_id, "--store", store, "--format", "json")
        assert report.returncode == 0 and json.loads(report.stdout), report.stderr
    finally:
        for d in dirs.values():
            d.chmod(0o755)


def _cli_as(prefix: list[str], *args) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRACEDUCK_STORE"}
    return subprocess.run([*prefix, sys.executable, "-m", "traceduck", *map(str, args)], capture_output=True, text=True,
                          env=env)


def write_trace_bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_salvaged_events_are_the_first_ones(tmp_path):
    """--salvage keeps exactly the complete events before the cut, in order, as json reads them."""
    base = (shared_dir() / SMALL).read_bytes()
    _, ends = event_ends(base)
    cut = ends[40] + 30
    path = tmp_path / "cut.json"
    path.write_bytes(base[:cut])
    expected = json.loads(base)["traceEvents"][:41]
    result = traceduck.ingest(path, store=tmp_path / "s", salvage=True, jobs=1)[0]
    with traceduck.open(tmp_path / "s") as db:
        rows = db.sql("SELECT name, phase FROM events ORDER BY event_id").fetchall()
        warnings = dict(db.sql("SELECT warnings FROM runs").fetchall()[0][0])
    assert rows == [(e.get("name"), e.get("ph")) for e in expected]
    assert warnings[f"salvaged: the trace is truncated at byte {cut:,}; complete events kept"] == 41
    assert result.salvaged


@pytest.mark.slow  # 2 s
def test_repaired_name_in_cpu_ops_and_export(tmp_path):
    """A repaired name is the intended string everywhere, and exports as valid JSON."""
    doc = json.loads((shared_dir() / SMALL).read_bytes())
    i = next(k for k, e in enumerate(doc["traceEvents"]) if e.get("cat") == "cpu_op")
    doc["traceEvents"][i]["name"] = "@@N@@"
    text = json.dumps(doc, indent=1).encode().replace(b'"@@N@@"', b'"with "quote" and C:\\path"')
    path = tmp_path / "t.json"
    path.write_bytes(text)
    traceduck.ingest(path, store=tmp_path / "s", jobs=1)
    with traceduck.open(tmp_path / "s") as db:
        names = [r[0] for r in db.sql("SELECT name FROM cpu_ops").fetchall()]
    assert 'with "quote" and C:\\path' in names
    p = subprocess.run([sys.executable, "-m", "traceduck", "export", "t", "-o", str(tmp_path / "out.json"),
                        "--store", str(tmp_path / "s")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    back = json.loads((tmp_path / "out.json").read_bytes())
    assert back["traceEvents"][i]["name"] == 'with "quote" and C:\\path'


def _cli(*args) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRACEDUCK_STORE"}
    return subprocess.run([sys.executable, "-m", "traceduck", *map(str, args)], capture_output=True, text=True, env=env)


@pytest.mark.parametrize("name", ["truncated", "gz-corrupt", "gz-truncated", "binary", "quote-then-newline"])
@pytest.mark.slow  # 15 s
def test_cli_failure_is_one_line(name, tmp_path):
    found = [v for v in variants() if v.name.startswith(name)]
    variant = found[len(found) // 2]
    path = write(variant, tmp_path)
    store = tmp_path / "store"
    p = _cli("ingest", path, "--store", store)
    assert p.returncode == 1
    assert p.stdout == ""
    assert p.stderr.startswith("Error: ") and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
    assert not list((store / "runs").iterdir())
    debug = _cli("--debug", "ingest", path, "--store", store)
    assert debug.returncode == 1 and "Traceback" in debug.stderr


@pytest.mark.slow  # 4 s
def test_cli_salvage_and_runs_columns(tmp_path):
    base = (shared_dir() / SMALL).read_bytes()
    _, ends = event_ends(base)
    path = tmp_path / "cut.json"
    path.write_bytes(base[: ends[9] + 3])
    store = tmp_path / "store"
    failed = _cli("ingest", path, "--store", store)
    assert failed.stderr == (f"Error: {path}: the trace is truncated (it ends at byte {ends[9] + 3:,}, after 10 complete "
                             f"events). Re-run with --salvage to keep the 10 complete events.\n")
    p = _cli("ingest", path, "--store", store, "--salvage")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("10 events -> ")
    runs = json.loads(_cli("runs", "--store", store, "--format", "json").stdout)
    assert runs[0]["salvaged"] is True
    assert runs[0]["warnings"][f"salvaged: the trace is truncated at byte {ends[9] + 3:,}; complete events kept"] == 10
    overview = json.loads(_cli("report", "overview", "--store", store, "--format", "json").stdout)
    assert any("salvaged" in (row.get("detail") or "") for row in overview)


# -- random damage never gives a traceback ---------------------------------------------------

def _damage_base() -> bytes:
    return (shared_dir() / SMALL).read_bytes()


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_damage_never_tracebacks(data, tmp_path):
    base = _damage_base()
    text = bytearray(base)
    cut = data.draw(st.one_of(st.none(), st.integers(0, len(base))), label="cut")
    flips = data.draw(st.lists(st.tuples(st.integers(0, len(base) - 1), st.integers(1, 255)), max_size=4), label="flips")
    for at, mask in flips:
        text[at] ^= mask
    if cut is not None:
        text = text[:cut]
    path = tmp_path / f"random-{hashlib.sha1(bytes(text)).hexdigest()[:12]}.json"
    path.write_bytes(bytes(text))
    store = tmp_path / "store"
    if not (store / "runs").exists():
        traceduck.ingest(shared_dir() / "public/pytorch__kineto/docs/traces/after_fix_trace.json", store=store, jobs=1)
    before = snapshot(store)
    salvage = data.draw(st.booleans(), label="salvage")
    try:
        traceduck.ingest(path, store=store, jobs=1, force=True, salvage=salvage)
    except InputError as e:
        assert "\n" not in e.one_line()
        assert snapshot(store) == before
