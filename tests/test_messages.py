"""What the command line says, as a user meets it: `traceduck` run in a subprocess at two terminal
widths. Every error is one line on stderr, `Error: ...`, with exit code 1: usage errors of the
argument parser too (a misspelled option or choice gets "Did you mean ...?"), and a SQL syntax
error says where in the query it is. Ingesting files of which some fail says what happened to
each; a JSON list of objects that are not events is not a trace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import traceduck
from conftest import SAMPLES

BUGGY = SAMPLES / "buggy.json.gz"
WIDTHS = [100, 200]


def td(*args, columns: int = 100, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRACEDUCK_STORE"}
    env["COLUMNS"] = str(columns)
    return subprocess.run([sys.executable, "-m", "traceduck", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=cwd)


def error_of(*args, columns: int = 100, cwd: Path | None = None) -> str:
    """The one error line of a command that must fail with exit code 1 and print nothing else."""
    p = td(*args, columns=columns, cwd=cwd)
    assert (p.returncode, p.stdout) == (1, ""), (p.returncode, p.stdout, p.stderr)
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("Error: "), p.stderr
    return p.stderr.removesuffix("\n")


# --- usage errors: one line, exit code 1 ---------------------------------------------------------

USAGE_ERRORS = [
    (["diff", "a", "b", "--by", "shapes"],
     "Error: traceduck diff --by: 'shapes' is not one of op, kernel, call_site, shape, copy, op_tree, op_shape. Did you mean 'shape' or 'op_shape'?"),
    (["report", "top-ops", "--format", "cvs"],
     "Error: traceduck report --format: 'cvs' is not one of table, csv, json, markdown. Did you mean 'csv'?"),
    (["export", "r", "-o", "x.txt", "--metric", "cpu"],
     "Error: traceduck export --metric: 'cpu' is not one of cpu_self, gpu. Did you mean 'cpu_self'?"),
    (["runs", "--stor", "s"], "Error: traceduck runs: no option --stor. Did you mean --store?"),
    (["runs", "--bogus"], "Error: traceduck runs: no option --bogus. Run `traceduck runs --help` to see its options."),
    (["runs", "--store"], "Error: traceduck runs: --store needs a value. Run `traceduck runs --help` to see its options."),
    (["runs", "extra"], "Error: traceduck runs: got unexpected extra argument(s) (extra). Usage: traceduck runs [OPTIONS]."),
    (["diff", "a"], "Error: traceduck diff: missing argument B. Usage: traceduck diff [OPTIONS] A B."),
    (["sql"], "Error: traceduck sql: missing argument QUERY. Usage: traceduck sql [OPTIONS] QUERY."),
    (["export", "r"], "Error: traceduck export: missing option --output. Run `traceduck export --help` to see its options."),
    (["ingest", "x.json", "--jobs", "0"],
     "Error: traceduck ingest --jobs: 0 is not in the range x>=1. Run `traceduck ingest --help` to see its options."),
    (["ingets", "x.json"], "Error: traceduck: no command 'ingets'. Did you mean 'ingest'?"),
    (["--bogus"], "Error: traceduck: no option --bogus. Run `traceduck --help` to see the commands."),
]


@pytest.mark.parametrize("columns", WIDTHS)
@pytest.mark.parametrize("args,expected", USAGE_ERRORS, ids=[" ".join(a) for a, _ in USAGE_ERRORS])
def test_usage_errors_are_one_line_with_exit_code_1(args, expected, columns, tmp_path):
    assert error_of(*args, columns=columns, cwd=tmp_path) == expected


@pytest.mark.parametrize("columns", WIDTHS)
def test_help_and_version_still_work(columns):
    for args in (["--help"], ["diff", "--help"], ["ingest", "--help"], []):
        p = td(*args, columns=columns)
        assert (p.returncode, p.stderr) == (0, ""), (args, p.stderr)
        assert p.stdout.startswith("Usage: traceduck"), (args, p.stdout)
    p = td("--version", columns=columns)
    assert (p.returncode, p.stdout.startswith("traceduck ")) == (0, True)


# --- a SQL syntax error points at the position ----------------------------------------------------


@pytest.mark.parametrize("columns", WIDTHS)
def test_sql_syntax_error_says_where(samples_store, columns):
    assert error_of("sql", "SELECT name FORM events", "--store", samples_store, columns=columns) == (
        'Error: Parser Error: syntax error at or near "events", at line 1, column 18 of the query: '
        "SELECT name FORM events. Fix the SQL there (DuckDB's dialect).")
    query = "SELECT name\nFROM events\nWHERE " + " AND ".join(f"ts_ns > {k}" for k in range(12)) + " AND AND dur_ns > 0"
    column = query.splitlines()[2].index("AND AND") + 5
    assert error_of("sql", query, "--store", samples_store, columns=columns) == (
        f'Error: Parser Error: syntax error at or near "AND", at line 3, column {column} of the query: '
        "\u2026ts_ns > 10 AND ts_ns > 11 AND AND dur_ns > 0. Fix the SQL there (DuckDB's dialect).")
    # other errors keep their hint
    assert error_of("sql", "SELECT nope FROM events", "--store", samples_store, columns=columns).endswith(
        "Run `traceduck schema` to see the tables and columns.")


def test_reports_takes_store_like_every_command(tmp_path):
    p = td("reports", "--store", tmp_path / "s", "--format", "csv")
    assert p.returncode == 0 and p.stdout.startswith("report,title,description\n"), p.stderr


# --- runs: integer ns in csv and json --------------------------------------------------------------


@pytest.mark.parametrize("columns", WIDTHS)
def test_runs_gives_integer_ns(samples_store, columns):
    with traceduck.open(samples_store) as db:
        spans = dict(db.sql("SELECT name, end_ns - start_ns FROM runs").fetchall())
    rows = json.loads(td("runs", "--store", samples_store, "-f", "json", columns=columns).stdout)
    assert {r["name"]: r["duration_ns"] for r in rows} == spans and "duration_ms" not in rows[0]
    csv = td("runs", "--store", samples_store, "-f", "csv", columns=columns).stdout.splitlines()
    assert csv[0].split(",")[5] == "duration_ns" and {line.split(",")[5] for line in csv[1:]} == set(map(str, spans.values()))
    table = td("runs", "--store", samples_store, columns=columns).stdout
    assert " ms " in table or " ms\n" in table or "ms │" in table  # a table shows it in a unit


def test_ingest_result_warnings_are_the_runs_warnings(tmp_path):
    results = traceduck.ingest(BUGGY, store=tmp_path / "s", jobs=1)
    with traceduck.open(tmp_path / "s") as db:
        stored = dict(db.sql("SELECT warnings FROM runs").fetchall()[0][0])
    assert results[0].warnings == stored and stored  # the samples have overlapping slices


# --- ingesting files of which some fail -------------------------------------------------------------


def _directory(root: Path) -> Path:
    d = root / "traces"
    (d / "sub").mkdir(parents=True)
    (d / "a.json.gz").write_bytes(BUGGY.read_bytes())
    text = json.dumps({"traceEvents": [{"ph": "X", "name": f"e{k}", "pid": 1, "tid": 1, "ts": k, "dur": 1}
                                       for k in range(4)]})
    (d / "b.json").write_text(text[: text.index('"e2"') + 2])  # cut after two complete events
    (d / "sub" / "c.json").write_text(text)
    (d / "sub" / "d.json").write_text('[{"a": 1}, {"b": 2}]')  # objects, not events: not a trace
    (d / "sub" / "e.json").write_text('{"traceEvents": [{"ph": "X", "name": "x", "pid": 1, "tid": 1, "ts": 1, '
                                      '"dur": -}]}')  # damaged
    return d


@pytest.mark.parametrize("columns", WIDTHS)
@pytest.mark.slow  # several seconds: new processes or a store built for it
def test_directory_with_failures_says_what_happened_to_every_file(tmp_path, columns):
    d = _directory(tmp_path)
    store = tmp_path / "store"
    p = td("ingest", "traces", "--store", store, "-j", "2", columns=columns, cwd=tmp_path)
    assert p.returncode == 1
    runs = {r["name"]: r["run_id"] for r in traceduck.open(store).runs()}
    assert sorted(runs) == ["a", "c"]
    assert p.stdout.startswith(f"1,447 events -> {runs['a'][:12]} 'a', {runs['c'][:12]} 'c' in ")
    assert p.stderr.splitlines() == [
        f"traces/a.json.gz: ingested as run {runs['a'][:12]} 'a' (1,443 events)",
        f"traces/b.json: failed: the trace is truncated (it ends at byte {d.joinpath('b.json').stat().st_size:,}, "
        "after 2 complete events). Re-run with --salvage to keep the 2 complete events.",
        f"traces/sub/c.json: ingested as run {runs['c'][:12]} 'c' (4 events)",
        "traces/sub/d.json: not a trace (none of the 2 items of traceEvents is an event; an event has ph, or name and "
        "ts), skipped",
        "traces/sub/e.json: failed: invalid JSON, malformed number, a digit is required after the minus sign (near "
        "byte 82, after 0 complete events). No complete event comes before it, so there is nothing to salvage.",
        "Error: 2 of 5 files failed (traces/b.json, traces/sub/e.json); of the others: 2 ingested, 1 not a trace. "
        "The lines above say what happened to each file.",
    ]
    # -q: the failures and the error only
    q = td("ingest", "traces", "--store", tmp_path / "quiet", "-q", columns=columns, cwd=tmp_path)
    assert (q.returncode, q.stdout) == (1, "")
    assert [line.split(":")[0] for line in q.stderr.splitlines()] == ["traces/b.json", "traces/sub/e.json", "Error"]


# --- what is not a trace ------------------------------------------------------------------------------


@pytest.mark.parametrize("columns", WIDTHS)
def test_a_list_of_objects_that_are_not_events_is_not_a_trace(tmp_path, columns):
    path = tmp_path / "objects.json"
    path.write_text('[{"a":1},{"b":2}]')
    assert error_of("ingest", path, "--store", tmp_path / "s", columns=columns) == (
        f"Error: {path}: not a trace (none of the 2 items of traceEvents is an event; an event has ph, or name and ts). "
        "A PyTorch profiler trace is a JSON object with a traceEvents list of events.")
    assert not (tmp_path / "s" / "runs").exists() or not list((tmp_path / "s" / "runs").iterdir())


@pytest.mark.parametrize("text,events", [
    ('[{"name": "x", "ts": 1}]', 1),  # name and ts
    ('[{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "p"}}, {"a": 1}]', 2),  # ph
    ('{"traceEvents": []}', 0),  # no events at all: an empty trace
])
def test_what_looks_like_an_event_is_a_trace(tmp_path, text, events):
    path = tmp_path / "t.json"
    path.write_text(text)
    assert traceduck.ingest(path, store=tmp_path / "s", jobs=1)[0].events == events
