"""The table format as a user meets it: the command line in a subprocess at 100 and 200 columns, on
the samples and on shared real traces, without --wide. What tells rows apart (a call site, a shape,
a name, a diff's key, overview's finding) is never shortened: long text wraps inside its cell. A
narrow terminal leaves out detail columns first and names them below the table; key and result
columns always stay. Expected values come from the same command's csv output (exact)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

import pytest

import traceduck
from traceduck.catalog import diff_spec, get_report
from traceduck.units import column_kind, display_name

from conftest import run_report, shared_dir

WIDTHS = [100, 200]
BERT = "public/AMD-AGI__TraceLens/tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz"
CPU_FULL = "cpu/full.json"


def traceduck_cli(*args, columns: int = 200) -> str:
    """stdout of `traceduck ARGS` run as a user runs it, at a terminal width of `columns`."""
    env = {k: v for k, v in os.environ.items() if k != "TRACEDUCK_STORE"}
    env["COLUMNS"] = str(columns)
    p = subprocess.run([sys.executable, "-m", "traceduck", *map(str, args)], capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    return p.stdout


@dataclass
class Table:
    """A box-drawn table read back: its column names, its rows (each cell's lines joined by a space:
    a wrapped cell whole again), the text below it, and its widest line."""

    columns: list[str]
    rows: list[dict[str, str]]
    below: str
    width: int


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line[1:-1].split(line[0])]


def read_table(out: str, anchor: str) -> Table:
    """The table in `out`; a row starts on a line where column `anchor` (a value every row has) is
    not blank, and goes on over the lines after it (its wrapped cells)."""
    lines = out.splitlines()
    head = [_cells(line) for line in lines if line.startswith("┃")]
    columns = ["".join(parts) for parts in zip(*head)]  # a header wrapped at `_` over several lines
    assert anchor in columns, f"column {anchor} is not shown: {columns}"
    at = columns.index(anchor)
    rows: list[list[list[str]]] = []
    for line in lines:
        if not line.startswith("│"):
            continue
        cells = _cells(line)
        if cells[at]:
            rows.append([[] for _ in columns])
        for piece, cell in zip(cells, rows[-1]):
            if piece:
                cell.append(piece)
    end = max(i for i, line in enumerate(lines) if line.startswith(("└", "┗")))
    return Table(columns, [{c: " ".join(cell) for c, cell in zip(columns, row)} for row in rows],
                 " ".join(lines[end + 1:]), max(len(line) for line in lines[:end + 1] if line[:1] in "┏┃┡│└"))


def squeezed(text: str) -> str:
    """Text without its spaces: a cell wrapped at a space reads back with one, folded within a word without."""
    return re.sub(r"\s+", "", text)


def _as_text(v) -> str:
    """A value as csv writes it: NULL empty, lists as their JSON text."""
    return "" if v is None else json.dumps(v) if isinstance(v, list) else str(v)


def exact(store, report: str, run: str | None = None) -> tuple[list[str], list[dict[str, str]]]:
    """The exact answer of `traceduck report REPORT --run RUN` (what csv gives), from the library:
    (columns, rows of text)."""
    with traceduck.open(store) as db:
        columns, rows = run_report(db, report, runs=[run] if run else None)
    return columns, [{c: _as_text(v) for c, v in zip(columns, row)} for row in rows]


def exact_diff(store, a: str, b: str, by: str, exact_dims: bool = False) -> tuple[list[str], list[dict[str, str]]]:
    """The exact answer of `traceduck diff A B --by BY`, from the library."""
    with traceduck.open(store) as db:
        columns, rows = db.fetch(db.diff(a, b, by=by, exact_dims=exact_dims))
    return columns, [{c: _as_text(v) for c, v in zip(columns, row)} for row in rows]


def shown_name(column: str) -> str:
    return display_name(column, column_kind(column)[0])


def assert_whole(table: Table, column: str, values: list[str]) -> None:
    """Every value appears whole in the table's column, each in a row of its own."""
    assert "…" not in "".join(r[column] for r in table.rows)
    shown = [squeezed(r[column]) for r in table.rows]
    for value in values:
        assert squeezed(value) in shown, (value, shown)


def left_out(table: Table) -> list[str]:
    """The columns the line below the table names as left out."""
    m = re.search(r"left out: (.*?) \(--wide shows them\)", table.below)
    return m[1].split(", ") if m else []


@pytest.fixture(scope="module")
def samples(samples_template, tmp_path_factory):
    """A copy of the samples' store: reports and diffs keep rows beside its runs (kept.py), and the
    template stays as ingested for the other tests."""
    path = tmp_path_factory.mktemp("samples") / "store"
    shutil.copytree(samples_template, path)
    return path


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """A store of two shared real traces: a BERT step on an H100 (long call sites, input dims of many
    inputs, overview findings) and the CPU decoder that casts its whole KV cache each step."""
    root = shared_dir()
    path = tmp_path_factory.mktemp("tables") / "store"
    traceduck.ingest([root / BERT, root / CPU_FULL], store=path, jobs=1)
    return path


# ---- 1. never cut what tells rows apart ---------------------------------------------------------------

@pytest.mark.parametrize("columns", WIDTHS)
def test_call_sites_keep_their_line_numbers(samples, columns):
    _, rows = exact(samples, "copies-by-call-site")
    table = read_table(traceduck_cli("report", "copies-by-call-site", "--store", samples, columns=columns),
                       anchor="calls")
    assert len(table.rows) == len(rows)
    assert_whole(table, "call_site", [r["call_site"] for r in rows])
    assert "tinydecoder.py(31): _read_cache" in {r["call_site"] for r in rows}
    assert table.width <= columns


@pytest.mark.parametrize("columns", WIDTHS)
def test_diff_keys_that_differ_only_in_dims_are_whole(samples, columns):
    _, rows = exact_diff(samples, "buggy", "fixed", "copy", exact_dims=True)
    keys = [r["key"] for r in rows]
    # the casts of one call site that differ only in their dims (each step's own, --exact-dims): [105, 1, 576], ...
    alike = [k for k in keys if k.startswith("tinydecoder.py(37): forward | aten::to [") and k.endswith(
        ", 1, 576] bfloat16 -> float32")]
    assert len(alike) >= 3
    out = traceduck_cli("diff", "buggy", "fixed", "--by", "copy", "--exact-dims", "--store", samples, "--max-rows", "0",
                        columns=columns)
    table = read_table(out, anchor="status")
    assert_whole(table, "key", keys)
    assert len({squeezed(r["key"]) for r in table.rows}) == len(keys)
    assert table.width <= columns


@pytest.mark.parametrize("columns", WIDTHS)
@pytest.mark.slow  # 2 s
def test_top_ops_dims_and_call_sites_are_whole(shared, columns):
    _, rows = exact(shared, "top-ops", "gaunernst*")
    table = read_table(traceduck_cli("report", "top-ops", "--store", shared, "--run", "gaunernst*", columns=columns),
                       anchor="calls")
    shown = rows[:40]  # the first 40 rows (--max-rows)
    assert len(table.rows) == len(shown)
    assert_whole(table, "input_dims", [r["input_dims"] for r in shown])
    assert_whole(table, "call_site", [r["call_site"] for r in shown])
    assert_whole(table, "name", [r["name"] for r in shown])
    assert any(len(r["input_dims"]) > 30 for r in shown)  # long enough to have been cut
    assert table.width <= columns


@pytest.mark.parametrize("columns", WIDTHS)
@pytest.mark.parametrize("run", ["gaunernst*", "full"])
@pytest.mark.slow  # 2 s
def test_overview_findings_are_whole_sentences(shared, columns, run):
    _, rows = exact(shared, "overview", run)
    table = read_table(traceduck_cli("report", "overview", "--store", shared, "--run", run, columns=columns),
                       anchor="section")
    findings = [r["detail"] for r in rows if r["section"] == "finding"]
    assert findings and any(len(f) > 100 for f in findings)
    assert_whole(table, "detail", findings)
    assert_whole(table, "item", [r["item"] for r in rows])
    assert table.width <= columns


@pytest.mark.slow  # 2 s
def test_schema_descriptions_wrap_whole(samples):
    """`schema` as it documents a view: every description whole at 100 columns."""
    from traceduck.catalog import documented_relations

    out = traceduck_cli("schema", "copy_groups", "--store", samples, columns=100)
    table = read_table(out, anchor="type")
    docs = {c.name: c.doc for c in documented_relations()["copy_groups"].columns}
    assert [r["column"] for r in table.rows] == list(docs)
    assert [squeezed(r["description"]) for r in table.rows] == [squeezed(d) for d in docs.values()]
    assert table.width <= 100


# ---- 2. drop detail, never the result -----------------------------------------------------------------

def _roles(spec) -> dict[str, str]:
    return {shown_name(c.name): c.role for c in spec.columns}


def test_narrow_diff_keeps_its_result(samples):
    csv_columns, _ = exact_diff(samples, "buggy", "fixed", "op")
    table = read_table(traceduck_cli("diff", "buggy", "fixed", "--store", samples, columns=100), anchor="status")
    assert {"key", "delta", "ratio", "status", "a_dur", "b_dur"} <= set(table.columns)
    gone = [shown_name(c) for c in csv_columns if shown_name(c) not in table.columns]
    assert gone and left_out(table) == gone  # named below the table, in their order
    roles = _roles(diff_spec())
    assert {roles[c] for c in gone} == {"detail"}
    assert table.width <= 100


@pytest.mark.parametrize("store,run", [("samples", "buggy"), pytest.param("shared", "full", marks=pytest.mark.slow)])
def test_narrow_copies_keep_bytes_and_time(request, store, run):
    path = request.getfixturevalue(store)
    csv_columns, rows = exact(path, "copies-by-call-site", run)
    table = read_table(traceduck_cli("report", "copies-by-call-site", "--store", path, "--run", run, columns=100),
                       anchor="calls")
    assert {"call_site", "op_name", "dims", "src_dtype", "dst_dtype", "calls", "total_bytes", "total_dur"} <= \
        set(table.columns)
    gone = [shown_name(c) for c in csv_columns if shown_name(c) not in table.columns]
    assert gone and left_out(table) == gone
    roles = _roles(get_report("copies-by-call-site"))
    # detail columns, and a column with no value in any row (GPU time in a CPU trace)
    blank = {shown_name(c) for c in csv_columns if not any(r[c] for r in rows)}
    assert "total_gpu_dur" in blank and all(roles[c] == "detail" or c in blank for c in gone)
    assert all(roles[c] in ("key", "result") for c in table.columns)
    assert_whole(table, "call_site", [r["call_site"] for r in rows])
    assert_whole(table, "dims", [r["dims"] for r in rows])
    assert table.width <= 100


@pytest.mark.slow  # 2 s
def test_a_wide_enough_terminal_leaves_nothing_out(samples):
    csv_columns, _ = exact(samples, "copies-by-call-site", "buggy")
    for extra in (["--wide"], []):
        out = traceduck_cli("report", "copies-by-call-site", "--store", samples, "--run", "buggy", *extra,
                            columns=100 if extra else 400)
        table = read_table(out, anchor="calls")
        assert table.columns == [shown_name(c) for c in csv_columns] and "left out" not in out


# ---- 3. names and number formats ----------------------------------------------------------------------

@pytest.mark.parametrize("report", ["overview", "memory"])
def test_a_position_in_a_list_is_called_position(samples, report):
    header = traceduck_cli("report", report, "--store", samples, "--format", "csv").splitlines()[0].split(",")
    assert "position" in header and "rank" not in header


def _decimals(cell: str) -> int:
    return len(cell.partition(".")[2])


@pytest.mark.parametrize("columns", WIDTHS)
@pytest.mark.slow  # 3 s
def test_one_number_format_per_column(shared, columns):
    out = traceduck_cli("report", "overview", "--store", shared, "--run", "full", columns=columns)
    values = [r["value"] for r in read_table(out, anchor="section").rows if r["value"]]
    assert len({_decimals(v) for v in values}) == 1, values
    out = traceduck_cli("report", "copies-by-call-site", "--store", shared, "--run", "full", columns=columns)
    per_step = [r["calls_per_step"] for r in read_table(out, anchor="calls").rows if r.get("calls_per_step")]
    assert len({_decimals(v) for v in per_step}) <= 1, per_step


def test_an_empty_table_shows_run_name_not_run_id(samples):
    """A report without rows draws its header as one with rows would: run_name, not run_id too."""
    out = traceduck_cli("report", "recompute", "--store", samples, columns=200)
    head = [_cells(line) for line in out.splitlines() if line.startswith("┃")]
    columns = ["".join(parts) for parts in zip(*head)]
    assert columns[:3] == ["run_name", "step", "name"], columns
    assert "no rows:" in out


def test_max_runs_shows_the_first_runs_and_counts_the_others(samples):
    """A report's table over many runs shows the first --max-runs runs' rows (a 4,096-rank job's table
    would otherwise draw 40 rows of every rank) and says how many runs it left out; csv keeps all."""
    runs = [r.split(",")[1] for r in traceduck_cli("runs", "--store", samples, "--format", "csv").splitlines()[1:]]
    assert sorted(runs) == ["buggy", "fixed"]
    out = traceduck_cli("report", "top-ops", "--store", samples, "--max-runs", "1", "--max-rows", "3")
    table = read_table(out, anchor="calls")
    assert {r["run_name"] for r in table.rows} == {"buggy"} and len(table.rows) == 3
    assert ("... and the rows of 1 more run (--max-runs N shows the first N runs, 0 all; --run picks runs; csv "
            "and json give every row)") in " ".join(out.split())
    every = traceduck_cli("report", "top-ops", "--store", samples, "--max-runs", "0", "--max-rows", "3")
    assert {r["run_name"] for r in read_table(every, anchor="calls").rows} == {"buggy", "fixed"}
    assert "more run" not in every
    csv_rows = traceduck_cli("report", "top-ops", "--store", samples, "--max-runs", "1", "--format", "csv").splitlines()
    assert {line.split(",")[1] for line in csv_rows[1:]} == {"buggy", "fixed"}


def test_a_note_on_rows_left_out_names_a_few_runs_and_counts_the_rest():
    from collections import Counter

    from traceduck.render import NOTE_RUNS, _per_run_note

    rows = [(f"id{i}", f"rank-{i}") for i in range(20)]
    note = _per_run_note(["run_id", "run_name"], rows, 0, Counter({f"id{i}": 5 for i in range(20)}))
    assert note == ["... 100 more rows (" + ", ".join(f"5 of run rank-{i}" for i in range(NOTE_RUNS))
                    + f" and {5 * (20 - NOTE_RUNS)} of {20 - NOTE_RUNS} more runs; --max-rows N shows N per run, 0 all; "
                    "csv and json give every row)"]
