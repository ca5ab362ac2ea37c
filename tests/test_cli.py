"""The command line: exact messages, exit codes, formats."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SAMPLES

BUGGY = SAMPLES / "buggy.json.gz"
FIXED = SAMPLES / "fixed.json.gz"


def td(*args, env=None, cwd=None):
    full_env = {k: v for k, v in os.environ.items() if k != "TRACEDUCK_STORE"}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "traceduck", *map(str, args)], capture_output=True, text=True,
                          env=full_env, cwd=cwd)


def sample_events(path: Path) -> int:
    return len(json.loads(gzip.decompress(path.read_bytes()))["traceEvents"])


@pytest.mark.slow  # 7 s
def test_ingest_summary_and_no_op(store):
    p = td("ingest", BUGGY, FIXED, "--store", store)
    assert p.returncode == 0, p.stderr
    total = sample_events(BUGGY) + sample_events(FIXED)
    assert p.stdout.startswith(f"{total:,} events -> ")
    assert "'buggy'" in p.stdout and "'fixed'" in p.stdout and "store " in p.stdout
    again = td("ingest", BUGGY, "--store", store)
    assert again.returncode == 0
    run_id = json.loads(td("sql", "SELECT run_id FROM runs WHERE name = 'buggy'", "--store", store, "-f", "json").stdout)[0]["run_id"]
    assert again.stderr == f"buggy.json.gz: already in the store as run {run_id[:12]} (use --force to replace it)\n"
    assert again.stdout.startswith("0 events -> no new runs")
    forced = td("ingest", BUGGY, "--store", store, "--force", "--name", "again", "--quiet")
    assert forced.returncode == 0 and forced.stdout == "" and forced.stderr == ""
    names = td("sql", "SELECT name FROM runs ORDER BY name", "--store", store, "-f", "csv").stdout
    assert names == "name\nagain\nfixed\n"


@pytest.mark.slow  # 5 s
def test_directory_labels_and_runs(store):
    p = td("ingest", SAMPLES, "--store", store, "--label", "job=demo", "--label", "kind=cpu", "-q")
    assert p.returncode == 0, p.stderr
    runs = json.loads(td("runs", "--store", store, "--format", "json").stdout)
    assert sorted(r["name"] for r in runs) == ["buggy", "fixed"]
    assert all(r["labels"] == {"job": "demo", "kind": "cpu"} for r in runs)
    assert {r["event_count"] for r in runs} == {sample_events(BUGGY), sample_events(FIXED)}
    by_label = td("sql", "SELECT count(*) AS n FROM runs WHERE labels['job'] = 'demo'", "--store", store, "-f", "csv")
    assert by_label.stdout == "n\n2\n"


@pytest.mark.slow  # 3 s
def test_store_from_environment_and_default(tmp_path):
    env_store = tmp_path / "from_env"
    p = td("ingest", BUGGY, "-q", env={"TRACEDUCK_STORE": str(env_store)})
    assert p.returncode == 0 and (env_store / "runs").is_dir()
    cwd = tmp_path / "work"
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "TRACEDUCK_STORE"}
    q = subprocess.run([sys.executable, "-m", "traceduck", "ingest", str(BUGGY), "-q"], cwd=cwd, env=env,
                       capture_output=True, text=True)
    assert q.returncode == 0, q.stderr
    assert len(list((cwd / "traceduck.store" / "runs").iterdir())) == 1


@pytest.mark.slow  # 5 s
def test_formats_keep_lists_as_lists(store):
    td("ingest", BUGGY, "--store", store, "-q")
    query = "SELECT dims, dtype FROM shapes WHERE dims = [16384, 1, 576] ORDER BY dtype LIMIT 1"
    as_json = json.loads(td("sql", query, "--store", store, "--format", "json").stdout)
    assert as_json == [{"dims": [16384, 1, 576], "dtype": "bfloat16"}]
    as_csv = list(csv.reader(io.StringIO(td("sql", query, "--store", store, "--format", "csv").stdout)))
    assert as_csv == [["dims", "dtype"], ["[16384, 1, 576]", "bfloat16"]]
    as_md = td("sql", query, "--store", store, "--format", "markdown").stdout
    assert as_md == "| dims | dtype |\n| --- | --- |\n| [16384, 1, 576] | bfloat16 |\n"
    table = td("sql", query, "--store", store).stdout
    assert "[16384, 1, 576]" in table and "bfloat16" in table


@pytest.mark.slow  # 3 s
def test_export_round_trip_via_cli(store, tmp_path):
    td("ingest", BUGGY, "--store", store, "-q")
    out = tmp_path / "back.json.gz"
    p = td("export", "buggy", "-o", out, "--store", store)
    assert p.returncode == 0, p.stderr
    n = sample_events(BUGGY)
    assert p.stderr.startswith(f"{n:,} events from run ")
    original = json.loads(gzip.decompress(BUGGY.read_bytes()))
    back = json.loads(gzip.decompress(out.read_bytes()))
    assert list(back) == list(original)
    assert [e["name"] for e in back["traceEvents"]] == [e["name"] for e in original["traceEvents"]]


@pytest.mark.parametrize("content,message", [
    (None, "Error: {path}: no such file. Check the path.\n"),
    (b"", "Error: {path}: the file is empty. Give a Chrome trace (.json or .json.gz).\n"),
    (b"hello world", "Error: {path}: not JSON (starts with b'hello world'). Give a Chrome trace (.json or .json.gz).\n"),
    (b'{"a": 1}', "Error: {path}: not a trace (no traceEvents key). A PyTorch profiler trace is a JSON object with a traceEvents list.\n"),
    (b'{"traceEvents": 3}', "Error: {path}: not a trace (traceEvents is not a list). A PyTorch profiler trace is a JSON object with a traceEvents list.\n"),
    (b"[1, 2]", "Error: {path}: not a trace (none of the 2 items of traceEvents is an object). A PyTorch profiler trace is a JSON object with a traceEvents list of objects.\n"),
])
@pytest.mark.slow  # 6 s
def test_bad_input_is_one_line(tmp_path, store, content, message):
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_bytes(content)
    p = td("ingest", path, "--store", store)
    assert p.returncode == 1
    assert p.stderr == message.format(path=path)
    assert p.stdout == ""
    runs = store / "runs"
    assert not runs.exists() or not list(runs.iterdir())
    assert not (store / "tmp").exists() or not list((store / "tmp").iterdir())


def test_truncated_json_is_one_line(tmp_path, store):
    data = gzip.decompress(BUGGY.read_bytes())
    path = tmp_path / "cut.json"
    path.write_bytes(data[: len(data) // 2])
    p = td("ingest", path, "--store", store)
    assert p.returncode == 1
    assert p.stderr.startswith(f"Error: {path}: the trace is truncated (it ends at byte {len(data) // 2:,}, after ")
    assert "complete events" in p.stderr and p.stderr.count("\n") == 1


@pytest.mark.slow  # 3 s
def test_query_and_selection_errors(store):
    td("ingest", BUGGY, "--store", store, "-q")
    p = td("sql", "SELECT nope FROM events", "--store", store)
    assert p.returncode == 1
    assert p.stderr.startswith('Error: Binder Error: Referenced column "nope" not found')
    assert p.stderr.endswith("Run `traceduck schema` to see the tables and columns.\n")
    q = td("export", "nosuchrun", "-o", store / "x.json", "--store", store)
    assert q.returncode == 1
    assert q.stderr.startswith("Error: no run matches 'nosuchrun'. Runs in the store: ")
    r = td("runs", "--store", store / "missing")
    assert r.returncode == 1
    assert r.stderr == f"Error: no store at {store / 'missing'}. Run `traceduck ingest TRACE` first, or pass --store.\n"
    s = td("ingest", BUGGY, "--store", store, "--label", "novalue")
    assert s.returncode == 1
    assert s.stderr == "Error: --label 'novalue' is not KEY=VALUE. Write labels like --label job=run42.\n"


# every command, in the order `--help` lists them, written out by hand (as in the README's table)
COMMANDS = ["ingest", "runs", "label", "rename", "rm", "compact", "sql", "schema", "reports", "report", "diff",
            "catalog", "shell", "export"]


def test_help_lists_every_command():
    p = td("--help", env={"COLUMNS": "100"})
    assert p.returncode == 0 and p.stderr == ""
    section = p.stdout.split("\nCommands:\n", 1)[1]
    listed = [line.split()[0] for line in section.splitlines() if line.startswith("  ") and line.strip()]
    assert listed == COMMANDS
    # each with its one-line description, not a bare name
    assert all(len(line.split(None, 1)) == 2 for line in section.splitlines() if line.strip())


@pytest.mark.slow  # 3 s
def test_readme_example_query(store):
    """The README's main job: the whole-cache cast tops the list, with its call site."""
    td("ingest", SAMPLES, "--store", store, "-q")
    query = (SAMPLES.parent / "examples" / "largest-copies.sql").read_text()
    rows = json.loads(td("sql", query, "--store", store, "-f", "json").stdout)
    # independent: the buggy sample's fp8 -> bf16 copies of the whole [16384, 1, 576] cache
    doc = json.loads(gzip.decompress(BUGGY.read_bytes()))
    cache_copies = [e for e in doc["traceEvents"] if e.get("name") == "aten::copy_"
                    and e["args"]["Input Dims"][1] == [16384, 1, 576]]
    top = rows[0]
    assert (top["run"], top["dims"], top["src_dtype"]) == ("buggy", [16384, 1, 576], "float8_e4m3fn")
    assert top["calls"] == len(cache_copies) == 6  # 2 layers x 3 profiled steps
    assert top["call_site"] == "tinydecoder.py(31): _read_cache"
    assert top["total_ms"] == round(sum(int(round(e["dur"] * 1000)) for e in cache_copies) / 1e6, 2)


@pytest.mark.slow  # 6 s
def test_runs_written_in_another_layout_are_refused(store):
    """Parquet files are read by column name: a run from before a column changed meaning would read
    as old spellings or NULLs. Such runs stop every query until re-ingested."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from traceduck.store import LAYOUT_VERSION

    assert td("ingest", BUGGY, FIXED, "--store", store, "-q").returncode == 0
    runs_file = next(p for p in (store / "runs").glob("*/runs.parquet") if pq.read_table(p)["name"][0].as_py() == "fixed")
    table = pq.read_table(runs_file)
    old = table.set_column(table.schema.get_field_index("layout_version"), "layout_version",
                           pc.cast(pc.subtract(table["layout_version"], 1), table.schema.field("layout_version").type))
    pq.write_table(old, runs_file)
    p = td("sql", "SELECT count(*) FROM shapes", "--store", store)
    assert p.returncode == 1
    assert p.stderr == (f"Error: 1 run(s) in {store} were written by another traceduck version (table layout "
                        f"{LAYOUT_VERSION - 1}, this version reads layout {LAYOUT_VERSION}): 'fixed'. "
                        "Re-ingest their traces with `traceduck ingest TRACE --force`.\n")
    # a store written before layouts were versioned at all: layout 1
    for f in (store / "runs").glob("*/runs.parquet"):
        pq.write_table(pq.read_table(f).drop_columns(["layout_version"]), f)
    q = td("report", "copies-by-call-site", "--store", store)
    assert q.returncode == 1
    assert q.stderr == (f"Error: 2 run(s) in {store} were written by another traceduck version (table layout 1, this "
                        f"version reads layout {LAYOUT_VERSION}): 'buggy', 'fixed'. "
                        "Re-ingest their traces with `traceduck ingest TRACE --force`.\n")
    assert td("ingest", BUGGY, FIXED, "--store", store, "--force", "-q").returncode == 0
    r = td("sql", "SELECT DISTINCT dtype FROM shapes WHERE dims = [16384, 1, 576] ORDER BY 1", "--store", store, "-f", "csv")
    assert r.returncode == 0 and r.stdout.split() == ["dtype", "bfloat16", "float8_e4m3fn"]
