"""How results are printed: literal cells, units for people, the terminal's width, row caps,
streamed csv/json, and errors that suggest. Expected values come from the hand-made traces."""

from __future__ import annotations

import csv
import io
import itertools
import json
import re

import duckdb
import pytest

import traceduck
from traceduck import units
from traceduck.cli import main
from traceduck.render import TableColumn, cell_width, fit_widths, render, table_layout, write_table, _wrap_header
from traceduck.catalog import get_report

from conftest import write_trace

HOSTILE = ["aten::mm[/x]", "[red]x", "[memory]", "\u001b[31m", "\u001b]0;title\u0007", "a|b\nc", "\u009b2J"]
# how each is printed in table and markdown: literally, control characters escaped
SHOWN = ["aten::mm[/x]", "[red]x", "[memory]", "\\x1b[31m", "\\x1b]0;title\\x07", "a|b\\nc", "\\x9b2J"]
KERNEL = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
          "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)")
T0 = 1_000_000.0  # us: every hand-made run starts here


def op(name: str, ts: float, dur: float, **args) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}


def cli(capsys, monkeypatch, *args, columns: int | None = None) -> tuple[int, str, str]:
    """The command line in this process: (exit code, stdout, stderr)."""
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", str(columns))
    with pytest.raises(SystemExit) as exit_:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return exit_.value.code or 0, out.out, out.err


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """hostile: the hostile names; units: known durations, a memory peak and a long kernel-like name;
    many: 25,000 ops (more than one batch); pair: two runs with 50 distinct ops each."""
    root = tmp_path_factory.mktemp("output")
    out = {}

    hostile = [op(n, T0 + 10 * i, 5 + i) for i, n in enumerate(HOSTILE)]
    out["hostile"] = root / "hostile.store"
    traceduck.ingest(write_trace(root / "hostile.json", hostile), store=out["hostile"], name="hostile")

    units_events = [
        op("long", T0, 1234.567),  # 1,234,567 ns
        op("mid", T0 + 2000, 56.7),  # 56,700 ns
        op("tiny", T0 + 2100.5, 0.85),  # 850 ns, starts 2,100,500 ns after the run's start
        op(KERNEL, T0 + 3000, 2_010_000),  # 2.01 s
        {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": T0 + 2500.25,
         "args": {"Total Allocated": 6_039_797_760, "Bytes": 6_039_797_760, "Device Type": 0, "Device Id": -1,
                  "Addr": 1}},
    ]
    out["units"] = root / "units.store"
    traceduck.ingest(write_trace(root / "units.json", units_events), store=out["units"], name="units")

    many = [op(f"op{i % 7}", T0 + i, 0.5) for i in range(25_000)]
    out["many"] = root / "many.store"
    traceduck.ingest(write_trace(root / "many.json", many), store=out["many"], name="many")

    out["pair"] = root / "pair.store"
    for run in ("first", "second"):
        events = [op(f"{run}_op{i:02d}", T0 + 10 * i, 1 + i) for i in range(50)]
        traceduck.ingest(write_trace(root / f"{run}.json", events), store=out["pair"], name=run)
    return out


# ---- the formatter ---------------------------------------------------------------------------------

@pytest.mark.parametrize("ns,text", [
    (0, "0 ns"), (850, "850 ns"), (850.5, "850.5 ns"), (56_700, "56.70 us"), (56_730, "56.73 us"),
    (1_234_000, "1.234 ms"), (1_234_567, "1.235 ms"), (91_998_000, "92.00 ms"), (999_960, "1.000 ms"),
    (2_010_000_000, "2.010 s"), (3_725_000_000_000, "3,725 s"), (-83_084_274, "-83.08 ms"),
])
def test_duration(ns, text):
    assert units.duration(ns) == text


@pytest.mark.parametrize("n,text", [
    (0, "0 B"), (512, "512 B"), (362_880, "362.9 KB"), (999_999, "1.000 MB"), (6_039_797_760, "6.040 GB"),
    (1_500_000_000_000, "1.500 TB"),
])
def test_size(n, text):
    assert units.size(n) == text


def test_counts_percentages_offsets_numbers():
    assert units.count(1_326_080) == "1,326,080"
    assert units.pct(40.94) == "40.9" and units.pct(100) == "100.0" and units.pct(0.05) == "0.1"
    assert units.offset(2_100_500) == "2.100500 ms" and units.offset(1_234_567_890) == "1,234.567890 ms"
    assert units.number(1443.0) == "1,443" and units.number(0.667) == "0.667"
    assert units.number(27969222.5) == "27,969,222.5" and units.number(float("nan")) == "nan"


def test_one_number_format_per_column():
    """Numbers that are neither durations, sizes nor percentages show every value of a column with the
    decimals of its most precise one (at most 6): overview's `value` mixed `1,030.11` and `382.491`."""
    out = io.StringIO()
    render(["value", "calls"], [(1030.11, 3), (382.491, 1_326_080), (4868.0, 2), (None, None)],
           "markdown", out)
    assert out.getvalue().splitlines()[2:] == ["| 1,030.110 | 3 |", "| 382.491 | 1,326,080 |", "| 4,868.000 | 2 |",
                                               "|  |  |"]
    assert units.decimals(0.1 + 0.2) == 1 and units.decimals(2.0) == 0 and units.decimals(float("nan")) == 0
    assert units.fixed(float("inf"), 3) == "inf" and units.fixed(-1234.5, 2) == "-1,234.50"


@pytest.mark.parametrize("column,kind,header", [
    ("dur_ns", "duration", "dur"), ("total_ms", "duration", "total"), ("rel_ts_ns", "duration", "rel_ts"),
    ("span_ns", "duration", "span"), ("ts_ns", "timestamp", "ts"), ("gpu_ts_ns", "timestamp", "gpu_ts"),
    ("start_ns", "timestamp", "start"), ("bytes", "bytes", "bytes"), ("total_bytes", "bytes", "total_bytes"),
    ("bytes_per_call", "bytes", "bytes_per_call"), ("self_pct", "pct", "self_pct"), ("event_id", "id", "event_id"),
    ("rank", "id", "rank"), ("base_time_ns", "id", "base_time_ns"), ("calls", "plain", "calls"),
    ("gb_per_s", "plain", "gb_per_s"),
])
def test_column_kinds(column, kind, header):
    assert units.column_kind(column)[0] == kind
    assert units.display_name(column, kind) == header


def test_long_text_wraps_whole_in_its_cell():
    """Text wider than its column wraps inside the cell (at spaces, folded within a longer word; wide
    characters count two columns), never shortened; numbers stay whole on the row's first line."""
    name = "日本語のカーネル名 " + KERNEL
    out = io.StringIO()
    write_table([TableColumn("name", [name, "short"], right=False, wraps=True, role="key"),
                 TableColumn("calls", ["1,326,080", "2"], right=True, wraps=False, role="result")], out, 40)
    lines = out.getvalue().splitlines()
    assert max(cell_width(line) for line in lines) <= 40 and "…" not in out.getvalue()
    body = [[c.strip() for c in line.strip("│").split("│")] for line in lines if line.startswith("│")]
    assert body[0][1] == "1,326,080" and all(not r[1] for r in body[1:-1]) and body[-1] == ["short", "2"]
    assert "".join(r[0] for r in body[:-1]).replace(" ", "") == name.replace(" ", "")


def test_the_table_is_what_rich_draws():
    """write_table lays the rows into the box rich draws for the header: the text is rich's own
    table with a row per row (Text cells, overflow fold), wrapped cells and wide characters included."""
    from rich import box
    from rich.console import Console
    from rich.table import Column, Table
    from rich.text import Text

    columns = [TableColumn("call_site", ["tinydecoder.py(31): _read_cache", "日本語のカーネル名 gen.py(7): f", ""],
                           right=False, wraps=True, role="key"),
               TableColumn("input_dims", ["[[65536, 1, 576], [65536, 1, 576], []]", "[]", "[[1]]"],
                           right=False, wraps=True, role="key"),
               TableColumn("self_dur_per_step", ["591.8 ms", "3.987 ms", ""], right=True, wraps=False, role="result")]
    class Ascii(io.StringIO):  # a stream that is not UTF-8: rich draws its ASCII box
        encoding = "ascii"

    for width, stream in [(200, io.StringIO), (60, io.StringIO), (40, io.StringIO), (30, io.StringIO), (40, Ascii)]:
        layout = table_layout(columns, width)
        ours = stream()
        write_table(columns, ours, width)
        theirs = stream()
        # headers wrap after `_` (ours), drawn by rich as the lines given
        table = Table(*(Column(header=Text("\n".join(_wrap_header(columns[i].header, w)),
                                           justify="right" if columns[i].right else "left"),
                               width=w, justify="right" if columns[i].right else "left", overflow="fold")
                        for i, w in layout), box=box.HEAVY_HEAD, header_style="")
        for r in range(3):
            table.add_row(*(Text(columns[i].cells[r]) for i, _ in layout))
        Console(file=theirs, width=200, color_system=None, highlight=False, markup=False).print(table)
        assert ours.getvalue() == theirs.getvalue(), width
        assert "…" not in ours.getvalue()
    assert "+" in ours.getvalue() and "┃" not in ours.getvalue()  # the ASCII box, last
    assert write_table([], io.StringIO(), 40) == []


def test_layout_leaves_out_detail_first_and_keeps_keys_and_results():
    def col(header, width, role, wraps=True):
        return TableColumn(header, ["x" * width], right=not wraps, wraps=wraps, role=role)

    columns = [col("key", 60, "key"), col("detail", 30, "detail"), col("result", 12, "result", wraps=False),
               col("more", 20, "detail"), col("plain", 10, None)]
    assert table_layout(columns, None) == [(0, 60), (1, 30), (2, 12), (3, 20), (4, 10)]
    assert table_layout(columns, 200) == [(0, 60), (1, 30), (2, 12), (3, 20), (4, 10)]  # all fit on one line
    assert table_layout(columns, 130) == [(0, 60), (1, 30), (2, 12), (4, 10)]  # the rightmost detail first
    assert table_layout(columns, 120) == [(0, 60), (2, 12), (4, 10)]  # details until the rest fits
    assert table_layout(columns, 80) == [(0, 48), (2, 12), (4, 10)]  # then the key's text wraps
    assert table_layout(columns, 40) == [(0, 21), (2, 12)]  # a column without a role before text below 16
    assert table_layout(columns, 20) == [(0, 6), (2, 12)]  # key and result stay, wider than the terminal


def test_fit_widths_gives_way_widest_first():
    assert fit_widths([10, 50, 30], [10, 20, 20], 100) == [10, 50, 30]
    assert fit_widths([10, 50, 30], [10, 20, 20], 70) == [10, 30, 30]
    assert fit_widths([10, 50, 30], [10, 20, 20], 40) == [10, 20, 20]  # the minimums: it does not fit


# ---- cells are data ------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["table", "markdown"])
@pytest.mark.slow  # 3 s
def test_hostile_names_are_printed_literally(stores, capsys, monkeypatch, fmt):
    code, out, err = cli(capsys, monkeypatch, "sql", "SELECT name FROM events WHERE phase = 'X' ORDER BY ts_ns",
                         "--store", stores["hostile"], "-f", fmt)
    assert code == 0, err
    for shown in SHOWN:
        expected = shown.replace("|", "\\|") if fmt == "markdown" else shown
        assert expected in out
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f]", out)  # no control character reaches the terminal
    code, out, err = cli(capsys, monkeypatch, "report", "top-ops", "--store", stores["hostile"], "-f", fmt)
    assert code == 0, err
    rows = [line for line in out.splitlines() if line.startswith(("│", "| "))]
    for shown in SHOWN:
        expected = shown.replace("|", "\\|") if fmt == "markdown" else shown
        assert sum(expected in line for line in rows) == 1
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f]", out)


def test_hostile_names_stay_exact_in_csv_and_json(stores, capsys, monkeypatch):
    q = "SELECT name FROM events WHERE phase = 'X' ORDER BY ts_ns"
    _, out, _ = cli(capsys, monkeypatch, "sql", q, "--store", stores["hostile"], "-f", "json")
    assert [r["name"] for r in json.loads(out)] == HOSTILE
    _, out, _ = cli(capsys, monkeypatch, "sql", q, "--store", stores["hostile"], "-f", "csv")
    assert [r[0] for r in csv.reader(io.StringIO(out))][1:] == HOSTILE


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_report_descriptions_keep_brackets(capsys, monkeypatch, fmt):
    code, out, _ = cli(capsys, monkeypatch, "reports", "-f", fmt, "--wide")
    assert code == 0
    assert "From the profiler's [memory] events: peak allocated memory per device" in out


# ---- units for people, exact for machines ---------------------------------------------------------

def _table_rows(out: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("│").split("│")] for line in out.splitlines() if line.startswith("│")]


def test_units_in_table_and_markdown(stores, capsys, monkeypatch):
    q = ("SELECT run_id, name, ts_ns, dur_ns, 6039797760 AS total_bytes, 1326080 AS calls, 40.94 AS self_pct "
         "FROM events WHERE phase = 'X' ORDER BY ts_ns")
    code, out, err = cli(capsys, monkeypatch, "sql", q, "--store", stores["units"], "--wide")
    assert code == 0, err
    header = next(line for line in out.splitlines() if line.startswith("┃"))
    assert [c.strip() for c in header.strip("┃").split("┃")] == ["run_id", "name", "ts", "dur", "total_bytes",
                                                                 "calls", "self_pct"]
    rows = _table_rows(out)
    # ts from the run's start (the first event), dur in units; trace: ts +0, +2000, +2100.5, +3000 us
    assert [(r[1], r[2], r[3]) for r in rows] == [
        ("long", "0.000000 ms", "1.235 ms"), ("mid", "2.000000 ms", "56.70 us"), ("tiny", "2.100500 ms", "850 ns"),
        (KERNEL, "3.000000 ms", "2.010 s")]
    assert {(r[4], r[5], r[6]) for r in rows} == {("6.040 GB", "1,326,080", "40.9")}
    _, md, _ = cli(capsys, monkeypatch, "sql", q, "--store", stores["units"], "-f", "markdown")
    assert md.splitlines()[0] == "| run_id | name | ts | dur | total_bytes | calls | self_pct |"
    assert "| tiny | 2.100500 ms | 850 ns | 6.040 GB | 1,326,080 | 40.9 |" in md
    # without run_id the run is not known: absolute ts_ns as stored
    _, out, _ = cli(capsys, monkeypatch, "sql", "SELECT name, ts_ns FROM events WHERE name = 'tiny'",
                    "--store", stores["units"], "-f", "markdown")
    assert out == f"| name | ts_ns |\n| --- | ---: |\n| tiny | {int((T0 + 2100.5) * 1000)} |\n"


def test_csv_and_json_stay_exact(stores, capsys, monkeypatch):
    q = "SELECT name, ts_ns, dur_ns FROM events WHERE phase = 'X' ORDER BY ts_ns"
    _, out, _ = cli(capsys, monkeypatch, "sql", q, "--store", stores["units"], "-f", "json")
    rows = json.loads(out)
    assert [(r["ts_ns"], r["dur_ns"]) for r in rows] == [
        (1_000_000_000, 1_234_567), (1_002_000_000, 56_700), (1_002_100_500, 850), (1_003_000_000, 2_010_000_000)]
    _, out, _ = cli(capsys, monkeypatch, "sql", q, "--store", stores["units"], "-f", "csv")
    assert out.splitlines()[1:3] == ["long,1000000000,1234567", "mid,1002000000,56700"]


def test_single_run_report_timestamps_from_the_run_start(stores, capsys, monkeypatch):
    code, out, err = cli(capsys, monkeypatch, "report", "memory", "--store", stores["units"], "--wide")
    assert code == 0, err
    peak = next(r for r in _table_rows(out) if r[0] == "peak")
    # the [memory] event: +2500.25 us after the run's first event, 6,039,797,760 bytes allocated
    assert peak[-1] == "2.500250 ms" and "6.040 GB" in peak  # ts_ns, shown from the run's start
    _, out, _ = cli(capsys, monkeypatch, "report", "memory", "--store", stores["units"], "-f", "json")
    row = next(r for r in json.loads(out) if r["section"] == "peak")
    assert row["ts_ns"] == 1_002_500_250 and row["bytes"] == 6_039_797_760 and "rel_ts_ns" not in row


# ---- width -----------------------------------------------------------------------------------------

def test_fits_columns_without_breaking_numbers(stores, capsys, monkeypatch):
    for args in (["report", "top-ops"], ["sql", "SELECT * FROM events"],
                 ["sql", "SELECT name, dur_ns, 123456789012 AS calls FROM events ORDER BY dur_ns DESC"]):
        code, out, err = cli(capsys, monkeypatch, *args, "--store", stores["units"], columns=100)
        assert code == 0, err
        assert max(cell_width(line) for line in out.splitlines()) <= 100
    rows = _table_rows(out)
    top = rows[0]
    assert top[1:] == ["2.010 s", "123,456,789,012"]  # numbers whole, on the row's first line
    # the kernel's name wraps over the lines after it, whole
    name = [rows[0][0]] + [r[0] for r in itertools.takewhile(lambda r: not r[1], rows[1:])]
    assert "".join(name).replace(" ", "") == KERNEL.replace(" ", "") and "…" not in out
    _, wide, _ = cli(capsys, monkeypatch, *args, "--store", stores["units"], "--wide", columns=100)
    assert KERNEL in wide


def test_columns_that_cannot_fit_are_named(stores, capsys, monkeypatch):
    code, out, _ = cli(capsys, monkeypatch, "sql", "SELECT * FROM events", "--store", stores["units"], columns=60)
    assert code == 0
    assert max(cell_width(line) for line in out.splitlines() if line[0] in "┏┃┡│└") <= 60
    note = " ".join(out.split("┘\n")[1].splitlines())
    hidden = note.split("left out: ")[1].split(" (--wide shows them)")[0].split(", ")
    assert hidden[-1] == "extra" and "dur" in hidden  # from the right, under their displayed names
    header = " ".join(line for line in out.splitlines() if line.startswith("┃"))
    assert "event_id" in header and "extra" not in header  # a query's columns have no role: from the right


# ---- row caps and streaming --------------------------------------------------------------------------

def test_sql_table_shows_the_first_rows_and_counts_the_rest(stores, capsys, monkeypatch):
    q = "SELECT event_id, name FROM events WHERE phase = 'X' ORDER BY event_id"
    code, out, _ = cli(capsys, monkeypatch, "sql", q, "--store", stores["many"])
    assert code == 0
    assert len(_table_rows(out)) == 40
    assert out.endswith("... 24,960 more rows (--max-rows N shows N, 0 all; csv and json give every row)\n")
    _, out, _ = cli(capsys, monkeypatch, "sql", q, "--store", stores["many"], "--max-rows", "5", "-f", "markdown")
    assert len(out.split("\n\n")[0].splitlines()) == 2 + 5 and "... 24,995 more rows" in out
    _, out, _ = cli(capsys, monkeypatch, "sql", q, "--store", stores["many"], "--max-rows", "0")
    assert len(_table_rows(out)) == 25_000 and "more rows" not in out


def test_empty_answers_say_so(stores, capsys, monkeypatch):
    """A table with no row says why under its header; csv and json stay empty of rows."""
    _, out, _ = cli(capsys, monkeypatch, "sql", "SELECT 1 AS x WHERE false", "--store", stores["units"])
    assert out.endswith("\nno rows\n")
    # the units run has CPU ops only: no synchronizing call, no kernel
    _, out, _ = cli(capsys, monkeypatch, "report", "sync", "--store", stores["units"], columns=300)
    assert out.splitlines()[-1] == ("no rows: the selected runs call no synchronizing runtime or driver function "
                                    "(is_sync_call_name), or record no cuda_runtime / cuda_driver events")
    _, out, _ = cli(capsys, monkeypatch, "report", "top-kernels", "--store", stores["units"], "-f", "markdown",
                    columns=300)
    assert out.endswith("\n\nno rows: no GPU kernels in the selected runs\n")
    _, out, _ = cli(capsys, monkeypatch, "report", "top-kernels", "--store", stores["units"], "-f", "csv")
    # one run in the store: its run columns are left out, as for any one-run answer
    assert out.splitlines() == [",".join(c.name for c in get_report("top-kernels").columns
                                         if c.name not in ("run_id", "run_name"))]


def test_sql_csv_and_json_give_every_row(stores, capsys, monkeypatch):
    q = "SELECT event_id, name, dur_ns FROM events WHERE phase = 'X' ORDER BY event_id"
    expected = [(f"op{i % 7}", 500) for i in range(25_000)]  # the trace: op{i % 7}, 0.5 us each
    _, out, _ = cli(capsys, monkeypatch, "sql", q, "--store", stores["many"], "-f", "json")
    assert [(r["name"], r["dur_ns"]) for r in json.loads(out)] == expected
    _, out, _ = cli(capsys, monkeypatch, "sql", q, "--store", stores["many"], "-f", "csv")
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["event_id", "name", "dur_ns"] and [(r[1], int(r[2])) for r in rows[1:]] == expected


def test_stream_gives_the_values_fetchall_gives(stores):
    q = ("SELECT range AS i, sum(range) OVER () AS total, map(['k'], [range::HUGEINT]) AS m, "
         "[{'x': range::HUGEINT, 'y': 'z'}] AS l, [range, 2]::BIGINT[2] AS a, INTERVAL 1 MONTH + INTERVAL 5 SECOND AS iv, "
         "1.50::DECIMAL(10, 2) AS d, NULL::VARCHAR AS n FROM range(25000)")
    expected = duckdb.sql(q).fetchall()
    with traceduck.open(stores["many"]) as db:
        result = db.engine.stream(q, batch_rows=4096)
        got = [row for batch in result.batches for row in batch]
        assert result.nested == [False, False, True, True, True, False, False, False]
    assert got == expected
    assert [type(v) for v in got[0]] == [type(v) for v in expected[0]]
    with traceduck.open(stores["many"]) as db:
        batches = list(db.engine.stream(q, batch_rows=4096).batches)
    assert sum(len(b) for b in batches) == 25_000
    assert batches[1][:3] == expected[len(batches[0]):len(batches[0]) + 3]


def test_sql_error_met_while_streaming_is_one_line(stores, capsys, monkeypatch):
    q = "SELECT (CASE WHEN range > 20000 THEN 'x' ELSE '1' END)::INTEGER AS v FROM range(30000)"
    code, _, err = cli(capsys, monkeypatch, "sql", q, "--store", stores["many"], "-f", "csv")
    assert code == 1
    assert err.startswith("Error: Conversion Error: Could not convert string 'x' to INT32") and err.count("\n") == 1


@pytest.mark.slow  # 2 s
def test_reports_cap_rows_per_run(stores, capsys, monkeypatch):
    code, out, _ = cli(capsys, monkeypatch, "report", "top-ops", "--store", stores["pair"])
    assert code == 0
    names = [r[1] for r in _table_rows(out)]  # run_name tells the runs apart: run_id is left out
    assert sum(n.startswith("first_") for n in names) == 40 and sum(n.startswith("second_") for n in names) == 40
    note = " ".join(out.split("┘\n")[1].splitlines())
    assert note.startswith("... 20 more rows (10 of run ") and "10 of run first" in note and "10 of run second" in note
    _, out, _ = cli(capsys, monkeypatch, "report", "top-ops", "--store", stores["pair"], "--max-rows", "3")
    assert len(_table_rows(out)) == 6
    _, out, _ = cli(capsys, monkeypatch, "report", "top-ops", "--store", stores["pair"], "-f", "json")
    assert len(json.loads(out)) == 100  # 50 ops in each run
    _, out, _ = cli(capsys, monkeypatch, "report", "top-ops", "--store", stores["pair"], "--run", "first")
    assert len(_table_rows(out)) == 40
    assert out.endswith("... 10 more rows (--max-rows N shows N, 0 all; csv and json give every row)\n")
    # the rows a table leaves out are counted within --limit: 45 of each run's 50, 40 shown
    _, out, _ = cli(capsys, monkeypatch, "report", "top-ops", "--store", stores["pair"], "--limit", "45")
    note = " ".join(out.split("┘\n")[1].splitlines())
    assert len(_table_rows(out)) == 80
    assert note.startswith("... 10 more rows (5 of run ") and "5 of run first" in note and "5 of run second" in note
    _, out, _ = cli(capsys, monkeypatch, "report", "top-ops", "--store", stores["pair"], "--limit", "2")
    assert len(_table_rows(out)) == 4 and "more rows" not in out


def test_report_json_is_a_row_per_line_with_the_values_of_the_rows(stores, capsys, monkeypatch):
    """json output is written by DuckDB (to_json), a row object per line: the same values, in the same
    order, as the report's rows fetched into Python; floats exact, NULL as null."""
    code, out, _ = cli(capsys, monkeypatch, "report", "top-ops", "--store", stores["pair"], "-f", "json")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "[" and lines[-1] == "]" and len(lines) == 102
    rows = json.loads(out)
    assert [json.loads(line.rstrip(",")) for line in lines[1:-1]] == rows
    with traceduck.open(stores["pair"]) as db:
        rel = db.report("top-ops")
        expected = [dict(zip(rel.columns, r)) for r in rel.fetchall()]
    assert rows == expected
    assert {r["run_name"] for r in rows} == {"first", "second"}
    # by hand: second_op49 ran once for 50 us, the longest op of its run
    top = next(r for r in rows if r["run_name"] == "second")
    assert (top["name"], top["calls"], top["self_dur_ns"]) == ("second_op49", 1, 50_000)


def test_json_rows_given_as_utf8_chunks_are_the_same_text():
    """Rows' texts given as UTF-8 bytes, several rows to a chunk (what a pack holds, see
    reports.stream_report): the output is the text of the same rows given one by one, in the
    stream's encoding, after what was written before."""
    from traceduck.render import _write_lines

    rows = ['{"name":"\u00fcber \u20ac"}', '{"name":"a\\"b"}', '{"n":2}']
    expected = "before[\n  " + ",\n  ".join(rows) + "\n]\n"
    chunks = [[",\n  ".join(rows[:2]).encode()], [rows[2].encode()]]
    for encoding in ("utf-8", "utf-16", "cp1252"):
        raw = io.BytesIO()
        out = io.TextIOWrapper(raw, encoding=encoding)
        out.write("before")
        _write_lines(chunks, out)
        out.flush()
        assert raw.getvalue().decode(encoding) == expected, encoding
    text = io.StringIO()  # no binary stream under it
    text.write("before")
    _write_lines(chunks, text)
    assert text.getvalue() == expected
    plain = io.StringIO()
    _write_lines([[r] for r in rows], plain)
    assert "before" + plain.getvalue() == expected
    empty = io.StringIO()
    _write_lines([[], []], empty)
    assert empty.getvalue() == "[]\n"


def test_diff_counts_and_ns_stay_integers(stores, capsys, monkeypatch):
    code, out, err = cli(capsys, monkeypatch, "diff", "first", "second", "--store", stores["pair"], "-f", "json")
    assert code == 0, err
    rows = json.loads(out)
    assert len(rows) == 100  # no op in common: 50 removed, 50 added
    a = {r["key"]: r for r in rows if r["status"] == "removed"}
    assert a["first_op07"]["a_calls"] == 1 and isinstance(a["first_op07"]["a_calls"], int)
    assert a["first_op07"]["a_dur_ns"] == 8_000 and isinstance(a["first_op07"]["a_dur_ns"], int)
    _, out, _ = cli(capsys, monkeypatch, "diff", "first", "second", "--store", stores["pair"], "-f", "csv")
    row = next(r for r in csv.DictReader(io.StringIO(out)) if r["key"] == "first_op07")
    assert (row["a_calls"], row["a_dur_ns"]) == ("1", "8000")


# ---- errors that suggest -----------------------------------------------------------------------------

def test_errors_suggest(stores, capsys, monkeypatch):
    store = stores["pair"]
    _, _, err = cli(capsys, monkeypatch, "report", "top-op", "--store", store)
    assert err.startswith("Error: no report named 'top-op'. Did you mean 'top-ops'? Reports: annotations, callees, callers, collective-skew, collectives, ")
    _, _, err = cli(capsys, monkeypatch, "report", "top-ops", "--param", "group_bi=name", "--store", store)
    assert err == "Error: report top-ops has no parameter 'group_bi'. Did you mean 'group_by'? Parameters: group_by.\n"
    _, _, err = cli(capsys, monkeypatch, "schema", "evnts", "--store", store)
    assert err == ("Error: no table, view or macro named 'evnts'. Did you mean 'events' or 'event_steps'? "
                   "Run `traceduck schema` to list them.\n")
    _, _, err = cli(capsys, monkeypatch, "report", "steps", "--run", "frist", "--store", store)
    with traceduck.open(store) as db:
        listed = ", ".join(f"{r['run_id'][:12]} ({r['name']})" for r in db.runs())
    assert err == f"Error: no run matches 'frist'. Did you mean 'first'? Runs in the store: {listed}.\n"
    _, _, err = cli(capsys, monkeypatch, "sql", "SELECT * FROM evnts", "--store", store)
    assert err == ('Error: Catalog Error: Table with name evnts does not exist! Did you mean "events"? '
                   "Run `traceduck schema` to see the tables and columns.\n")
    _, _, err = cli(capsys, monkeypatch, "sql", "SELECT e.nmae FROM events e", "--store", store)
    assert err == ('Error: Binder Error: Values list "e" does not have a column named "nmae"! Did you mean "name" '
                   'or "numel" or "marker"? Run `traceduck schema` to see the tables and columns.\n')


@pytest.mark.slow  # 3 s
def test_no_run_matches_says_how_many_more(tmp_path, capsys, monkeypatch):
    store = tmp_path / "store"
    for i in range(12):
        traceduck.ingest(write_trace(tmp_path / f"r{i:02d}.json", [op(f"op{i}", T0, 1)]), store=store, jobs=1)
    code, _, err = cli(capsys, monkeypatch, "report", "steps", "--run", "zzz", "--store", store)
    assert code == 1
    assert err.startswith("Error: no run matches 'zzz'. Runs in the store: ")
    assert err.endswith(" and 2 more (`traceduck runs` lists them).\n") and err.count("(r") == 10
