"""The command line: exact messages, exit codes, formats."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import traceduck
from conftest import ROOT, SAMPLES

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
COMMANDS = ["ingest", "runs", "label", "rename", "step-marker", "rm", "compact", "check", "sql", "schema", "reports", "report", "diff",
            "catalog", "shell", "export"]


def test_the_program_writes_all_its_output_and_its_exit_code_and_stops_quietly_when_the_reader_does(samples_store):
    # The program ends without tearing the interpreter down (cli.run): what it printed must still
    # all arrive, its exit code stay, and a reader that stops early (`| head -1`) leave no traceback.
    query = "SELECT range AS n FROM range(100000)"
    full = td("sql", query, "--store", samples_store, "--format", "csv")
    assert full.returncode == 0, full.stderr
    assert full.stdout.splitlines() == ["n", *map(str, range(100000))]
    failed = td("report", "top-ops", "--run", "nosuchrun", "--store", samples_store)
    assert failed.returncode == 1 and failed.stderr.startswith("Error: ") and len(failed.stderr.splitlines()) == 1
    env = {k: v for k, v in os.environ.items() if k != "TRACEDUCK_STORE"}
    proc = subprocess.Popen([sys.executable, "-m", "traceduck", "sql", query, "--store", str(samples_store),
                             "--format", "csv"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout.readline() == b"n\n"
    proc.stdout.close()  # as `head -1` does
    assert proc.wait(timeout=60) == 1  # the parser's convention for a closed pipe (click: exit 1, nothing said)
    assert proc.stderr.read() == b""


def test_help_lists_every_command():
    p = td("--help", env={"COLUMNS": "100"})
    assert p.returncode == 0 and p.stderr == ""
    section = p.stdout.split("\nCommands:\n", 1)[1]
    listed = [line.split()[0] for line in section.splitlines() if line.startswith("  ") and line.strip()]
    assert listed == COMMANDS
    # each with its one-line description, not a bare name
    assert all(len(line.split(None, 1)) == 2 for line in section.splitlines() if line.strip())


@pytest.mark.parametrize("command", COMMANDS)
def test_a_command_parsed_alone_says_what_the_whole_cli_says(command, capsys, monkeypatch):
    """main() builds only the command it runs: its help and its usage errors read as with the whole
    CLI built (the reference: main() with the narrowing turned off)."""
    from traceduck import cli as module

    monkeypatch.setenv("COLUMNS", "100")
    for args in ([command, "--help"], [command, "--no-such-option"], ["--debug", command, "--store"]):
        alone = cli(capsys, *args)
        with monkeypatch.context() as m:
            m.setattr(module, "_app_for", lambda _args: module.app)
            assert cli(capsys, *args) == alone
    assert cli(capsys, command, "--help")[1].startswith(f"Usage: traceduck {command} [OPTIONS]")


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


# --- every command in this process, on a copy of a store of the samples (fast) ----------------------


def cli(capsys, *args) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `traceduck ARGS...`, run in this process."""
    from traceduck.cli import main

    capsys.readouterr()
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as e:
        code = e.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def run_id_of(path: Path) -> str:
    """A run's id as the README defines it: the 128-bit xxh3 hash of the file's bytes."""
    import xxhash

    return xxhash.xxh3_128(path.read_bytes()).hexdigest()


def cpu_op_calls(path: Path) -> Counter:
    """Calls per CPU op name, by plain json."""
    return Counter(e["name"] for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
                   if e.get("cat") == "cpu_op" and e.get("ph") == "X")


def test_ingest_prints_one_line_and_skips_the_same_bytes(tmp_path, capsys):
    store = tmp_path / "store"
    code, out, err = cli(capsys, "ingest", BUGGY, "--store", store, "--name", "first", "--label", "job=a", "-j", "1")
    assert (code, err) == (0, "")
    assert re.fullmatch(rf"{sample_events(BUGGY):,} events -> {run_id_of(BUGGY)[:12]} 'first' in \d+\.\d s, "
                        rf"store \d[\d.]* [KM]B \({re.escape(str(store))}\)\n", out), out
    code, out, err = cli(capsys, "ingest", BUGGY, "--store", store)
    assert code == 0 and out.startswith("0 events -> no new runs in ")
    assert err == f"buggy.json.gz: already in the store as run {run_id_of(BUGGY)[:12]} (use --force to replace it)\n"


def test_runs_lists_each_run_with_its_event_count(samples_store, capsys):
    code, out, err = cli(capsys, "runs", "--store", samples_store, "-f", "json")
    assert (code, err) == (0, "")
    rows = {r["name"]: r for r in json.loads(out)}
    assert {n: (r["run_id"], r["event_count"], r["labels"], r["salvaged"]) for n, r in rows.items()} == {
        "buggy": (run_id_of(BUGGY), sample_events(BUGGY), {}, False),
        "fixed": (run_id_of(FIXED), sample_events(FIXED), {}, False)}
    code, out, _ = cli(capsys, "runs", "--store", samples_store, "-f", "csv")
    assert out.splitlines()[0] == "run_id,name,labels,event_count,rank,duration_ns,ingested_at,source_path,salvaged,warnings"
    assert len(out.splitlines()) == 3
    # integer ns, the run's span, as every csv and json gives times
    with traceduck.open(samples_store) as db:
        spans = dict(db.sql("SELECT name, end_ns - start_ns FROM runs").fetchall())
    assert {n: r["duration_ns"] for n, r in rows.items()} == spans
    assert all(type(r["duration_ns"]) is int for r in rows.values())
    assert [line.split(",")[5] for line in out.splitlines()[1:]] == [str(spans["buggy"]), str(spans["fixed"])]


def test_sql_answers_in_every_format(samples_store, capsys):
    query = "SELECT name, count(*) AS calls FROM cpu_ops WHERE name LIKE 'aten::copy_' GROUP BY ALL"
    expected = cpu_op_calls(BUGGY)["aten::copy_"] + cpu_op_calls(FIXED)["aten::copy_"]
    assert cli(capsys, "sql", query, "--store", samples_store, "-f", "csv")[1] == f"name,calls\naten::copy_,{expected}\n"
    assert cli(capsys, "sql", query, "--store", samples_store, "-f", "json")[1] == \
        f'[\n  {{"name":"aten::copy_","calls":{expected}}}\n]\n'
    assert cli(capsys, "sql", query, "--store", samples_store, "-f", "markdown")[1] == \
        f"| name | calls |\n| --- | ---: |\n| aten::copy_ | {expected} |\n"  # numbers right-aligned
    code, out, err = cli(capsys, "sql", "SELECT nope FROM events", "--store", samples_store)
    assert (code, out) == (1, "") and err.startswith('Error: Binder Error: Referenced column "nope" not found')


def test_schema_lists_every_table_view_and_macro_and_their_columns(samples_store, capsys):
    sql = ROOT / "sql"
    texts = [(sql / "tables.sql").read_text(), *(p.read_text() for p in sorted((sql / "views").glob("*.sql")))]
    created = {m.group(1) for t in texts
               for m in re.finditer(r"^CREATE (?:OR REPLACE )?(?:TABLE|VIEW) (?:IF NOT EXISTS )?(\w+)", t, re.M)}
    # a summary (a macro NAME_of) is a view NAME, or a table macro NAME with settings, and a macro NAME_packed
    summaries = {m.group(1) for t in texts
                 for m in re.finditer(r"^-- @summary.*\n(?:-- .*\n)*CREATE OR REPLACE MACRO (\w+)_of\(", t, re.M)}
    created |= summaries
    macros = {m.group(1) for t in texts for m in re.finditer(r"^CREATE (?:OR REPLACE )?MACRO (\w+)", t, re.M)}
    macros |= {f"{name}_packed" for name in summaries}
    code, out, err = cli(capsys, "schema", "--store", samples_store, "-f", "csv")
    listed = list(csv.reader(io.StringIO(out)))
    assert (code, err, listed[0]) == (0, "", ["name", "kind", "description"])
    assert {row[0] for row in listed[1:]} == created | macros and all(len(row[2]) > 20 for row in listed[1:])
    kinds = {row[0]: row[1] for row in listed[1:]}
    assert (kinds["cpu_ops"], kinds["step_number"], kinds["busy_time"], kinds["gpu_time"]) == \
        ("view", "macro", "table macro", "table macro")
    # a view's columns: as declared above it in its file
    text = (sql / "views" / "steps.sql").read_text()
    block = text[:text.index("CREATE OR REPLACE VIEW steps")].rsplit("\n\n", 1)[-1]
    declared = re.findall(r"^-- @column (\w+) (\S+) (.+)$", block, re.M)
    code, out, _ = cli(capsys, "schema", "steps", "--store", samples_store, "-f", "csv")
    assert [tuple(r) for r in csv.reader(io.StringIO(out))][1:] == declared and len(declared) == 13
    # or as declared where `@columns-as` takes them from: op_inputs' first two are cpu_ops'
    assert "-- @columns-as cpu_ops: run_id, event_id" in (sql / "views" / "cpu.sql").read_text()
    code, out, _ = cli(capsys, "schema", "op_inputs", "--store", samples_store, "-f", "csv")
    code, cpu_ops, _ = cli(capsys, "schema", "cpu_ops", "--store", samples_store, "-f", "csv")
    assert out.splitlines()[1:3] == cpu_ops.splitlines()[1:3]
    assert cli(capsys, "schema", "nope", "--store", samples_store)[0] == 1
    # a macro's arguments, then its columns
    code, out, _ = cli(capsys, "schema", "busy_time", "--store", samples_store, "-f", "csv")
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["part", "name", "type", "description"]
    assert [r[:3] for r in rows[1:5]] == [["argument", "kinds", "VARCHAR[]"], ["argument", "by_step", "BOOLEAN"],
                                          ["argument", "by_kind", "BOOLEAN"], ["column", "run_id", "VARCHAR"]]
    assert rows[3][3].endswith("[default: false]")
    code, out, _ = cli(capsys, "schema", "step_number", "--store", samples_store)
    assert out.startswith("step_number: N of a `ProfilerStep#N` name")


def test_reports_lists_every_report_file(capsys):
    files = sorted((ROOT / "sql" / "reports").glob("*.sql"))
    titles = {p.stem: re.search(r"^-- title: (.+)$", p.read_text(), re.M).group(1) for p in files}
    code, out, err = cli(capsys, "reports", "-f", "csv")
    rows = list(csv.reader(io.StringIO(out)))
    assert (code, err, rows[0]) == (0, "", ["report", "title", "description"])
    assert {r[0]: r[1] for r in rows[1:]} == titles and len(titles) == 27


def test_report_counts_the_calls_of_the_trace(samples_store, capsys):
    code, out, err = cli(capsys, "report", "top-ops", "--run", "buggy", "--store", samples_store, "-f", "json")
    assert (code, err) == (0, "")
    rows = json.loads(out)
    assert {r["name"]: r["calls"] for r in rows} == cpu_op_calls(BUGGY)  # one run: no run columns
    assert "run_id" not in rows[0]
    code, out, _ = cli(capsys, "report", "top-ops", "--store", samples_store, "-f", "csv", "--limit", "2")
    assert [r[1] for r in csv.reader(io.StringIO(out))][1:] == ["buggy", "buggy", "fixed", "fixed"]  # per run
    code, out, _ = cli(capsys, "report", "top-ops", "--help")
    assert out.startswith("traceduck report top-ops: ") and "  group_by (VARCHAR, default 'name'): one of " in out
    code, _, err = cli(capsys, "report", "top-ops", "--param", "nope=1", "--store", samples_store)
    assert code == 1 and err.startswith("Error: ") and "nope" in err


def test_diff_compares_the_calls_of_two_runs(samples_store, capsys):
    code, out, err = cli(capsys, "diff", "buggy", "fixed", "--store", samples_store, "-f", "csv")
    assert code == 0 and re.fullmatch(r"A: buggy [\d.]+ ms/step \(3 steps\); B: fixed [\d.]+ ms/step \(3 steps\)\n", err)
    # (the header goes to stderr: stdout stays csv)
    rows = list(csv.DictReader(io.StringIO(out)))
    a, b = cpu_op_calls(BUGGY), cpu_op_calls(FIXED)
    assert {r["key"]: (int(r["a_calls"] or 0), int(r["b_calls"] or 0)) for r in rows} == {k: (a[k], b[k]) for k in a | b}
    copy = next(r for r in rows if r["key"] == "aten::copy_")
    assert copy["status"] == "faster"


def test_label_rename_and_rm(samples_store, capsys, monkeypatch):
    from traceduck import packs, store as store_module

    monkeypatch.setattr(store_module, "REMOVE_GRACE_S", 0)  # no query to wait for
    monkeypatch.setattr(packs, "REMOVE_GRACE_S", 0)
    short = run_id_of(BUGGY)[:12]
    assert cli(capsys, "label", "buggy", "job=a", "kind=cpu", "--store", samples_store) == \
        (0, f"{short} 'buggy': job=a, kind=cpu\n", "")
    assert cli(capsys, "label", "label:job=a", "--remove", "kind", "--store", samples_store)[1] == f"{short} 'buggy': job=a\n"
    assert cli(capsys, "rename", "buggy", "first", "--store", samples_store) == (0, f"{short}: 'buggy' -> 'first'\n", "")
    runs = json.loads(cli(capsys, "runs", "--store", samples_store, "-f", "json")[1])
    assert sorted((r["name"], r["labels"]) for r in runs) == [("first", {"job": "a"}), ("fixed", {})]
    assert cli(capsys, "rm", "first", "--store", samples_store) == (0, f"removed {short} 'first'\n", "")
    assert cli(capsys, "sql", "SELECT name, event_count FROM runs", "--store", samples_store, "-f", "csv")[1] == \
        f"name,event_count\nfixed,{sample_events(FIXED)}\n"
    assert cli(capsys, "rm", "first", "--store", samples_store)[2].startswith("Error: no run matches 'first'.")


def test_export_writes_the_run_back(samples_store, tmp_path, capsys):
    from conftest import load_json
    from roundtrip import trace_difference

    out = tmp_path / "back.json.gz"
    code, stdout, err = cli(capsys, "export", "buggy", "-o", out, "--store", samples_store)
    assert (code, stdout) == (0, "")
    assert err == f"{sample_events(BUGGY):,} events from run {run_id_of(BUGGY)[:12]} -> {out}\n"
    assert trace_difference(load_json(BUGGY), load_json(out)) is None
