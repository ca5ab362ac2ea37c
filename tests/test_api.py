"""The Python API (`traceduck.open/ingest/export`, `Database.report/diff`), the view file that
spares each connection re-creating the views, and what `--version`/`--help` import."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import traceduck
from traceduck import viewfile
from traceduck.viewfile import CACHE_DIR, VIEWS_FILE
from traceduck.store import Store

from conftest import SAMPLES, load_json, require, write_trace

BUGGY = SAMPLES / "buggy.json.gz"
FIXED = SAMPLES / "fixed.json.gz"
HEAVY = ("duckdb", "pyarrow", "pandas", "polars", "numpy")


def events_of(path: Path) -> list[dict]:
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


def op_calls(path: Path) -> Counter:
    """Calls per CPU op name, by plain json."""
    return Counter(e["name"] for e in events_of(path) if e.get("cat") == "cpu_op" and e.get("ph") == "X")


def td(*args) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRACEDUCK_STORE"}
    return subprocess.run([sys.executable, "-m", "traceduck", *map(str, args)], capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("api") / "store"
    traceduck.ingest(BUGGY, store=path, name="buggy")
    traceduck.ingest(FIXED, store=path, name="fixed")
    return path


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["sql", "--help"], ["export", "--help"]])
def test_version_and_help_load_neither_duckdb_nor_arrow_nor_pandas(args):
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "traceduck", *args], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    imported = {line.rsplit("|", 1)[1].strip() for line in p.stderr.splitlines() if line.startswith("import time:")}
    assert "traceduck.cli" in imported
    assert {m.split(".")[0] for m in imported} & set(HEAVY) == set()


def test_import_traceduck_is_light_until_used():
    code = ("import sys, traceduck; before = sorted(m for m in %r if m in sys.modules); traceduck.open; "
            "print(before, 'duckdb' in sys.modules)" % (HEAVY,))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.stdout.strip() == "[] True", p.stderr


def test_report_is_a_relation_with_the_counts_of_the_trace(store):
    with traceduck.open(store) as db:
        rel = db.report("top-ops", runs="buggy")
        assert "run_id" not in rel.columns  # one run: no run columns, as on the command line
        calls = dict(rel.select("name, calls").fetchall())
        assert calls == op_calls(BUGGY)
        table = rel.arrow().read_all()  # record batches
        assert dict(zip(table.column("name").to_pylist(), table.column("calls").to_pylist())) == calls
        both = db.report("top-ops", limit=3)
        assert both.columns[:2] == ["run_id", "run_name"]
        assert [r[1] for r in both.fetchall()] == ["buggy"] * 3 + ["fixed"] * 3  # --limit is per run, in name order
        by_site = db.report("top-ops", runs=["buggy"], group_by="call_site").fetchall()
        assert len(by_site) > len(calls)  # an op called from several sites has a row per site
        with pytest.raises(traceduck.TraceduckError, match="no parameter 'group'"):
            db.report("top-ops", group="x")


def test_report_relation_converts_to_pandas(store):
    require("pandas")
    with traceduck.open(store) as db:
        df = db.report("top-ops", runs="buggy").df()
    assert dict(zip(df.name, df.calls)) == op_calls(BUGGY)


def test_report_relation_converts_to_polars(store):
    require("polars")
    with traceduck.open(store) as db:
        frame = db.report("top-ops", runs="fixed").pl()
    assert dict(zip(frame["name"], frame["calls"])) == op_calls(FIXED)


@pytest.mark.slow  # several seconds: new processes or a store built for it
def test_cli_report_prints_the_api_rows(store):
    with traceduck.open(store) as db:
        rel = db.report("copies-by-call-site", runs="buggy", limit=2)
        expected = [dict(zip(rel.columns, row)) for row in rel.fetchall()]
    p = td("report", "copies-by-call-site", "--run", "buggy", "--limit", "2", "--store", store, "-f", "json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == json.loads(json.dumps(expected, default=str))
    # independent of both: the whole-cache casts (fp8 -> bf16) of the buggy sample, by plain json
    casts = [e for e in load_json(BUGGY)["traceEvents"]
             if e.get("name") == "aten::to" and e["args"]["Input Dims"][0] == [16384, 1, 576]]
    top = json.loads(p.stdout)[0]
    assert (top["op_name"], top["dims"], top["src_dtype"], top["dst_dtype"]) == ("aten::to", [16384, 1, 576],
                                                                                 "float8_e4m3fn", "bfloat16")
    assert top["calls"] == len(casts) == 6
    assert top["bytes_per_call"] == 16384 * 576 * (1 + 2)  # one byte read, two written per element
    assert top["total_dur_ns"] == sum(int(e["dur"] * 1000) for e in casts)


def test_runs_gives_every_column_or_only_those_asked(store):
    with traceduck.open(store) as db:
        every = db.runs()
        some = db.runs(["name", "event_count", "labels"])
        with pytest.raises(traceduck.TraceduckError, match="not_a_column"):
            db.runs(["name", "not_a_column"])
    # the event counts of the traces, by plain json: every object in traceEvents
    assert [(r["name"], r["event_count"]) for r in every] == \
        [("buggy", len(events_of(BUGGY))), ("fixed", len(events_of(FIXED)))]
    assert some == [{"name": r["name"], "event_count": r["event_count"], "labels": r["labels"]} for r in every]
    assert len(every[0]) > 20


def test_diff_is_a_relation_with_both_runs_calls(store):
    a, b = op_calls(BUGGY), op_calls(FIXED)
    with traceduck.open(store) as db:
        rel = db.diff("buggy", "fixed")
        rows = {key: (a_calls, b_calls, status) for key, a_calls, b_calls, status in
                rel.select("key, a_calls, b_calls, status").fetchall()}
        per_step = dict(db.diff("buggy", "fixed", per_step=True).select("key, a_calls_per_step").fetchall())
    assert {k: (x or 0, y or 0) for k, (x, y, _s) in rows.items()} == {k: (a[k], b[k]) for k in a | b}
    assert rows["aten::copy_"][2] == "faster"
    assert per_step["aten::copy_"] == round(a["aten::copy_"] / 3, 3)  # the samples have 3 profiler steps


def test_export_writes_what_the_command_line_writes(store, tmp_path):
    result = traceduck.export("buggy", tmp_path / "api.json", store=store, step=3)
    p = td("export", "buggy", "-o", tmp_path / "cli.json", "--step", "3", "--store", store)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "api.json").read_bytes() == (tmp_path / "cli.json").read_bytes()
    written = json.loads((tmp_path / "api.json").read_text())["traceEvents"]
    assert result.events == len(written) and result.run_id == result.run_id.lower()
    # independent of both: the CPU ops inside ProfilerStep#3's window, by plain json
    evs = load_json(BUGGY)["traceEvents"]
    step = next(e for e in evs if e.get("name") == "ProfilerStep#3")
    in_step = Counter(e["name"] for e in evs if e.get("cat") == "cpu_op" and step["ts"] <= e["ts"] < step["ts"] + step["dur"])
    assert Counter(e["name"] for e in written if e.get("cat") == "cpu_op") == in_step and in_step
    assert f"{len(written):,} events from run {result.run_id[:12]}, step 3" in p.stderr


def test_views_are_built_once_and_reused_by_every_store(store, tmp_path, monkeypatch):
    monkeypatch.setenv(viewfile.CACHE_ENV, str(tmp_path / "views"))
    traceduck.open(store).close()
    files = list((tmp_path / "views").glob(f"*/{VIEWS_FILE}"))
    assert len(files) == 1
    assert list(store.glob(f"**/{VIEWS_FILE}")) == []  # nothing of the views in the store
    stamp = files[0].stat().st_mtime_ns

    def no_sql_text(*args):
        raise AssertionError("views re-created from SQL text")

    monkeypatch.setattr(viewfile, "define", no_sql_text)
    other = tmp_path / "other"
    traceduck.ingest(FIXED, store=other)
    for path, sample in ((store, BUGGY), (other, FIXED)):
        with traceduck.open(path) as db:
            assert db.sql("SELECT count(*) FROM cpu_ops WHERE run_id IN (SELECT run_id FROM runs WHERE name = ?)",
                          [sample.name.removesuffix(".json.gz")]).fetchall() == [(sum(op_calls(sample).values()),)]
            doc, columns = db.describe("tensor_copies")
            assert doc.startswith("Every tensor copy or cast") and columns[0][:2] == ("run_id", "VARCHAR")
    assert files[0].stat().st_mtime_ns == stamp


def test_a_cache_directory_that_cannot_be_written_gives_a_private_view_file(store, tmp_path, monkeypatch):
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    monkeypatch.setenv(viewfile.CACHE_ENV, str(blocked / "views"))
    with traceduck.open(store) as db:
        private = db.engine._private
        assert private is not None and (private / VIEWS_FILE).is_file()  # a view file of its own
        assert dict(db.report("top-ops", runs="fixed").select("name, calls").fetchall()) == op_calls(FIXED)
    assert not private.exists()


def test_rule_tables_belong_to_each_session(store):
    with traceduck.open(store) as db, traceduck.open(store) as other:
        sites = "SELECT count(call_site) FROM call_sites"
        ((before,),) = db.sql(sites).fetchall()
        assert before > 0
        db.sql("INSERT INTO call_site_rules VALUES ('%', 'every file')")
        assert db.sql(sites).fetchall() == [(0,)]
        assert db.report("top-ops", runs="buggy", group_by="call_site").select("count(call_site)").fetchall() == [(0,)]
        assert other.sql(sites).fetchall() == [(before,)]


def test_an_empty_store_reads_as_empty_tables_then_sees_new_runs(tmp_path):
    path = tmp_path / "store"
    Store(path, create=True)
    with traceduck.open(path) as db:
        assert db.engine._private is None
        assert db.sql("SELECT count(*) FROM events").fetchall() == [(0,)]
        assert db.describe("events")[1][0][:2] == ("run_id", "VARCHAR")
        traceduck.ingest(BUGGY, store=path)
        assert db.sql("SELECT count(*) FROM events").fetchall() == [(len(events_of(BUGGY)),)]



def test_one_listing_reads_the_runs_as_opened_until_the_block_ends(tmp_path):
    path = tmp_path / "store"
    traceduck.ingest(BUGGY, store=path, name="buggy")
    buggy, fixed = len(events_of(BUGGY)), len(events_of(FIXED))
    with traceduck.open(path) as db:
        with db.one_listing():
            traceduck.ingest(FIXED, store=path, name="fixed")  # published while the block reads
            assert db.sql("SELECT count(*) FROM events").fetchall() == [(buggy,)]
            assert [r["name"] for r in db.runs()] == ["buggy"]
            ranks = db.report("ranks")
            assert [r[ranks.columns.index("item")] for r in ranks.fetchall()] == ["buggy"]  # a rank row: the run listed
        assert db.sql("SELECT count(*) FROM events").fetchall() == [(buggy + fixed,)]
        assert [r["name"] for r in db.runs()] == ["buggy", "fixed"]
        with db.one_listing():  # the runs as listed by the last call: both
            traceduck.ingest(BUGGY, store=path, name="buggy", force=True)  # the same content, replaced
            assert db.sql("SELECT count(*) FROM events").fetchall() == [(buggy + fixed,)]
            traceduck.remove("fixed", store=path)  # its files gone: a query that reads them lists again
            columns, rows = db.report_query("top-ops").fetch()  # planned for two runs, read over one
            assert db.sql("SELECT count(*) FROM events").fetchall() == [(buggy,)]
    assert columns[:2] == ["run_id", "run_name"] and {r[1] for r in rows} == {"buggy"}
    with traceduck.open(path) as db:
        assert db.report_query("top-ops").fetch() == (columns[2:], [r[2:] for r in rows])
    assert sum(r[columns.index("calls")] for r in rows) == sum(op_calls(BUGGY).values())

@pytest.mark.slow  # 2 s
def test_a_cache_of_another_version_is_replaced(tmp_path, monkeypatch):
    store = tmp_path / "store"
    traceduck.ingest([BUGGY, FIXED], store=store)
    traceduck.open(store).close()
    (old,) = (store / CACHE_DIR).iterdir()
    viewfile.cache_key.cache_clear()
    monkeypatch.setattr(viewfile, "_CACHE_LAYOUT", "another")
    try:
        with traceduck.open(store) as db:
            assert db.sql("SELECT count(*) FROM runs").fetchall() == [(2,)]
        (new,) = (store / CACHE_DIR).iterdir()
        assert new.name != old.name
        assert os.listdir(store / "tmp") == []
    finally:
        viewfile.cache_key.cache_clear()


def test_progress_names_each_stage_and_ends_at_the_event_count(tmp_path):
    seen = []
    traceduck.ingest(BUGGY, store=tmp_path / "store", progress=lambda path, raw, events, stage: seen.append(
        (path.name, raw, events, stage)))
    stages = [stage for _name, _raw, _events, stage in seen]
    assert stages[0] == "parsing"
    assert stages[stages.index("sorting"):] == ["sorting", "nesting", "writing", "done"]
    assert seen[-1] == ("buggy.json.gz", BUGGY.stat().st_size, len(events_of(BUGGY)), "done")


def test_ingest_builds_the_view_file_for_the_first_query(tmp_path, monkeypatch):
    """The view file a query needs is built while the ingest runs (once per version and user), so
    the first report after an ingest does not build it."""
    from traceduck import viewfile

    monkeypatch.setenv("TRACEDUCK_CACHE_DIR", str(tmp_path / "cache"))
    target = tmp_path / "cache" / viewfile.cache_key() / viewfile.VIEWS_FILE
    assert not target.exists()
    traceduck.ingest(SAMPLES / "buggy.json.gz", store=tmp_path / "store")
    assert target.is_file()
    built = target.stat().st_mtime_ns
    with traceduck.open(tmp_path / "store") as db:
        assert db.sql("SELECT count(*) FROM runs").fetchall() == [(1,)]
    assert target.stat().st_mtime_ns == built  # used, not rebuilt


def test_ingest_after_ingest_in_one_process_reads_only_the_runs_new_since(tmp_path, monkeypatch):
    """`Store.run_rows` (how label, rename and rm select runs) reads each run's row once per process,
    and again only when it changed; a run renamed meanwhile keeps its new name out of the names a new
    run may take (ingest reads them from the runs snapshot); the names a third ingest sees are the
    store's names now."""
    from traceduck import store as store_module

    path = tmp_path / "store"
    traceduck.ingest(BUGGY, store=path, name="a")
    traceduck.ingest(FIXED, store=path, name="b")
    read = []
    real = store_module.read_open_row_file
    monkeypatch.setattr(store_module, "read_open_row_file", lambda f, columns=None: read.append(f.name) or real(f, columns))
    names = lambda: sorted(r["name"] for r in Store(path).run_rows(["name"]))  # noqa: E731
    assert names() == ["a", "b"]
    assert names() == ["a", "b"]
    first = len(read)
    assert first <= 2  # each run's row at most once (an earlier ingest of this process may have read them)
    traceduck.rename("a", "renamed", store=path)
    read.clear()
    assert names() == ["b", "renamed"]
    assert len(read) == 1 and read[0].endswith("runs.parquet")  # the renamed run's new file only
    third = write_trace(tmp_path / "renamed.json", [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 5,
                                                    "pid": 1, "tid": 1}])
    (result,) = traceduck.ingest(third, store=path)  # named after its file, unless that name is taken
    assert result.name != "renamed" and result.name.endswith("renamed")  # taken: its directory prefixed
    read.clear()
    assert names() == sorted(["b", "renamed", result.name])
    assert len(read) <= 1
