"""The vocabulary traceduck reads traces with, defined once, as data: the CSV files of
sql/reference (event kinds and categories, trace phases, call-site rules, copy ops, op categories
and signatures, device peaks), with the dtypes of dtypes.py and the standard library's functions of
stdlib_functions.txt. Their rows are loaded into the reference tables of every connection (the
tables of sql/views), and ingest reads the same files; the name patterns (ProfilerStep#N, launch
and synchronizing calls, collectives) are SQL macros of sql/views, which ingest loads too.

The rows are tables (not constants baked into SQL) so a session can change them, e.g.
`INSERT INTO call_site_rules VALUES ('vendored/%', 'vendored library')`. Ingest classifies events
with the rows as shipped (events.on_device, events.is_cpu_op): changing event_categories in a
session changes what the views select, not what ingest stored.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import duckdb

from .catalog import sql_dir, view_files
from .dtypes import DTYPES, SCALAR_TYPE_CODES, SCALAR_TYPE_NAMES

# One CSV file per vocabulary: a header, then one row per line; an empty field is NULL.
REFERENCE_DIR = sql_dir() / "reference"


def read_csv(name: str) -> list[dict[str, str | None]]:
    """The rows of sql/reference/NAME.csv as text, an empty field as None."""
    with open(REFERENCE_DIR / f"{name}.csv", newline="", encoding="utf-8") as f:
        return [{k: v if v != "" else None for k, v in row.items()} for row in csv.DictReader(f)]


def _flag(text: str | None) -> bool | None:
    return None if text is None else {"true": True, "false": False}[text]


@dataclass(frozen=True)
class Category:
    """One spelling of a trace event category (`cat`) and what its events are."""

    name: str  # exactly as written in `cat`
    kind: str  # one of KINDS
    origin: str  # who writes it
    # Names of this category LIKE this are record_function annotations, not ops (legacy Operator).
    annotation_name_like: str | None = None


# What the events of a category are (event_kinds.csv), and which kinds are device work (what the
# GPU views and utilization count), run on a device, or open a profiler step (a `ProfilerStep#N`
# event of those kinds on the CPU).
_KIND_ROWS = read_csv("event_kinds")
KINDS = {r["kind"]: r["description"] for r in _KIND_ROWS}
DEVICE_WORK_KINDS = tuple(r["kind"] for r in _KIND_ROWS if _flag(r["is_device_work"]))
DEVICE_KINDS = tuple(r["kind"] for r in _KIND_ROWS if _flag(r["is_device"]))
STEP_MARKER_KINDS = tuple(r["kind"] for r in _KIND_ROWS if _flag(r["is_step_marker"]))

# Every category PyTorch's profiler (Kineto) writes, 2021 on, and a few other tracers' ones
# (event_categories.csv); anything else is kept and counted in runs.warnings as an unknown category.
EVENT_CATEGORIES = [Category(r["category"], r["kind"], r["origin"], r["annotation_name_like"])
                    for r in read_csv("event_categories")]


def categories(*kinds: str) -> tuple[str, ...]:
    """The category spellings of these kinds."""
    return tuple(c.name for c in EVENT_CATEGORIES if c.kind in kinds)


DEVICE_CATEGORIES = categories(*DEVICE_KINDS)
OP_CATEGORIES = categories(*(r["kind"] for r in _KIND_ROWS if _flag(r["is_op"])))
STEP_CATEGORIES = categories(*STEP_MARKER_KINDS)
KNOWN_CATEGORIES = tuple(c.name for c in EVENT_CATEGORIES)

# Chrome trace event phases (trace_phases.csv): every one is known (anything else is kept and
# counted in runs.warnings); events of NESTING_PHASES get their place in their thread's nesting
# (parent, depth, self time, Python stack).
_PHASE_ROWS = read_csv("trace_phases")
KNOWN_PHASES = tuple(r["phase"] for r in _PHASE_ROWS)
NESTING_PHASES = tuple(r["phase"] for r in _PHASE_ROWS if _flag(r["nests"]))

# The standard library's files and the functions each defines (scripts/make_stdlib_table.py).
STDLIB_FUNCTIONS = Path(__file__).resolve().parent / "stdlib_functions.txt"


def event_category_rows() -> dict[str, list]:
    """The event_categories table, by column: each category with the flags of its kind."""
    kinds = {r["kind"]: r for r in _KIND_ROWS}
    cs = EVENT_CATEGORIES
    return {
        "category": [c.name for c in cs],
        "kind": [c.kind for c in cs],
        "is_device": [_flag(kinds[c.kind]["is_device"]) for c in cs],
        "is_device_work": [_flag(kinds[c.kind]["is_device_work"]) for c in cs],
        "is_runtime": [_flag(kinds[c.kind]["is_runtime"]) for c in cs],
        "is_op": [_flag(kinds[c.kind]["is_op"]) for c in cs],
        "annotation_name_like": [c.annotation_name_like for c in cs],
        "is_step_marker": [_flag(kinds[c.kind]["is_step_marker"]) for c in cs],
        "origin": [c.origin for c in cs],
    }


def dtype_rows() -> dict[str, list]:
    """One row per Kineto type name, plus ScalarType codes that no type name maps to (by column)."""
    code_of = {name: code for code, (name, _size) in SCALAR_TYPE_CODES.items()}
    rows = []
    used = set()
    for d in DTYPES.values():
        code = code_of.get(d.canonical) if d.is_tensor else None
        used.add(code)
        rows.append((d.name, code, d.canonical if d.is_tensor else None, d.elem_bytes, d.is_tensor))
    for code, (name, size) in SCALAR_TYPE_CODES.items():
        if code not in used:
            rows.append((None, code, name, size, True))
    cols = [list(c) for c in zip(*rows)]
    return {"type_name": cols[0], "scalar_type": cols[1], "torch_name": cols[2], "elem_bytes": cols[3],
            "is_tensor": cols[4], "scalar_type_name": [SCALAR_TYPE_NAMES.get(c) for c in cols[1]]}


@cache
def stdlib_function_rows() -> dict[str, list]:
    """(file, function) for every function of the standard library, files relative to its directory."""
    files, names = [], []
    for line in STDLIB_FUNCTIONS.read_text().splitlines():
        if line and not line.startswith("#"):
            file, _, defined = line.partition("\t")
            for name in defined.split(" "):
                files.append(file)
                names.append(name)
    return {"file": files, "function": names}


def sources() -> list[Path]:
    """The files the reference rows come from (part of the view file's key, viewfile.cache_key)."""
    here = Path(__file__).resolve().parent
    return [here / "reference.py", here / "dtypes.py", STDLIB_FUNCTIONS, *sorted(REFERENCE_DIR.glob("*.csv"))]


def fill(con: duckdb.DuckDBPyConnection, names: list[str] | None = None) -> None:
    """Insert the rows of the reference tables (all, or these) into their empty tables on a connection.
    The values go in as lists, one per column (DuckDB casts them to the table's types): no Arrow,
    whose table constructor loads pandas, on the path of every query."""
    for table in _table_names():
        if names is None or table in names:
            columns = table_rows(table)
            select = ", ".join(f'unnest(?) AS "{c}"' for c in columns)
            con.execute(f"INSERT INTO {table} BY NAME SELECT {select}", list(columns.values()))


def tables() -> dict[str, dict[str, list]]:
    """Rows of each reference table, by table name: {column: values}."""
    return {table: table_rows(table) for table in _table_names()}


# The reference tables whose rows are not a CSV file of sql/reference.
_BUILT = {"event_categories": event_category_rows, "dtypes": dtype_rows, "stdlib_functions": stdlib_function_rows}


@cache
def _table_names() -> tuple[str, ...]:
    """The reference tables: the tables sql/views declares, in load order."""
    return tuple(rel.name for f in view_files() for rel in f.relations if rel.kind == "table")


@cache
def table_rows(table: str) -> dict[str, list]:
    """The rows of one reference table, by column, typed as sql/views declares its columns."""
    if table in _BUILT:
        return _BUILT[table]()
    (rel,) = [rel for f in view_files() for rel in f.relations if rel.name == table]
    rows = read_csv(table)
    return {c.name: [_typed(r[c.name], c.type) for r in rows] for c in rel.columns}


def _typed(text: str | None, sql_type: str) -> object:
    """A CSV field as the Python value of its column's SQL type."""
    if text is None:
        return None
    if sql_type == "BOOLEAN":
        return _flag(text)
    if sql_type in ("INTEGER", "BIGINT"):
        return int(text)
    if sql_type == "DOUBLE":
        return float(text)
    return text
