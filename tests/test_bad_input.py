"""Bad input: every broken variant of a real trace ingests cleanly with the expected warnings,
or fails with one line and leaves the store as it was; random damage never gives a traceback."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import traceduck
from traceduck.errors import InputError

from broken import SMALL, Variant, corpus, event_ends, write
from conftest import SHARED_TRACES, shared_dir


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
            assert {k for k in snapshot(store) if not k.startswith("runs/")} == set()
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
