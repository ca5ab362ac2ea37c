"""Rendering query results, the same for every command: csv and json exact and complete (streamed in
batches), table and markdown for people (units, a row cap, the terminal's width)."""

from __future__ import annotations

import codecs
import csv
import datetime as dt
import functools
import decimal
import json
import os
import re
import textwrap
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TextIO

from . import units
from .sqltext import quoted
from .store import short_id


class Format(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"
    markdown = "markdown"


PEOPLE = (Format.table, Format.markdown)
NON_TTY_WIDTH = 200
RUN_ID = "run_id"
NOTE_RUNS = 8  # a note on the rows left out names this many runs, and counts the others


@dataclass
class View:
    """How table and markdown show a result; csv and json ignore it and give every row as it is."""

    max_rows: int = 0  # 0: every row
    per_run: bool = False  # max_rows counts per value of the run_id column (when there is one)
    wide: bool = False  # table: every column, each row on one line, whatever the terminal's width
    # table: each column's role (key, result, detail; see catalog.parse_report) by name, which decides
    # what a terminal too narrow for every column leaves out; None: no roles (a query's columns)
    roles: dict[str, str | None] | None = None
    width: int | None = None  # table: columns to fit [default: $COLUMNS, else the terminal's, else 200]
    run_starts: dict[str, int] = field(default_factory=dict)  # run_id -> runs.start_ns, for timestamps
    run_id: str | None = None  # the run of every row when there is no run_id column
    empty_note: str = "no rows"  # said under the header when there is no row at all
    # per run, its rows before the query capped them at max_rows (Stream.run_rows, filled as the rows
    # are read): the rows left out are counted from it; None when every row comes
    run_rows: dict[str, int] | None = None
    runs_left_out: int = 0  # runs whose rows were not fetched (RowShape.run_cap): said below the table


@dataclass(frozen=True)
class RowShape:
    """What an output format asks of the database, so that DuckDB does in SQL what the format would
    otherwise do in Python value by value (over a 1,024-rank job, ops-by-shape's 835,072 rows of
    input dims take 3.1 s to fetch as Python lists, 0.7 s as text):

    - `json_rows`: each row as one value, the JSON text of its object (json_object_sql): what json
      output writes as it is;
    - `lists_as_text`: columns of lists of integers as the text `json.dumps` gives them
      (`[[16384, 1, 576], []]`): what csv and the tables write;
    - `per_run_cap`: at most this many rows of each run, with each run's count of rows before the cap
      (Stream.run_rows): what the tables show, without fetching the rows they leave out;
    - `run_cap`: the rows of at most this many runs, the first in the report's order (the tables of
      a report over a job of thousands of ranks show the first runs' rows, not 40 rows of each)."""

    json_rows: bool = False
    lists_as_text: bool = False
    per_run_cap: int | None = None
    run_cap: int | None = None


def row_shape(fmt: Format, max_rows: int, max_runs: int = 0) -> RowShape:
    """The RowShape of an output format showing at most max_rows rows per run and the rows of at
    most max_runs runs (0: all)."""
    fmt = Format(fmt)
    return RowShape(json_rows=fmt is Format.json, lists_as_text=fmt is not Format.json,
                    per_run_cap=max_rows if fmt in PEOPLE and max_rows else None,
                    run_cap=max_runs if fmt in PEOPLE and max_runs else None)


# a list (of lists ...) of integers: its JSON text has no strings, so no comma but the separators
_INT_LISTS = re.compile(r"(?:TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT)(?:\[\])+")


def json_object_sql(columns: Sequence, alias: str) -> str:
    """SQL of the JSON text of a row's object (`columns`, with .name and .type as DuckDB spells it,
    of the relation `alias`, in that order), as json output writes it: `to_json` of the row, NaN and
    infinities as null (as `_write_json` writes them)."""
    values = [f"CASE WHEN isfinite({alias}.{quoted(c.name)}) THEN {alias}.{quoted(c.name)} END"
              if c.type == "DOUBLE" else f"{alias}.{quoted(c.name)}" for c in columns]
    return f"to_json(struct_pack({', '.join(f'{quoted(c.name)} := {v}' for c, v in zip(columns, values))}))::VARCHAR"


def shaped_sql(columns: Sequence, sql: str, shape: RowShape) -> tuple[str, list[bool] | None]:
    """`sql` (whose result has `columns`) made to give its rows in `shape` (json_rows, lists_as_text),
    and which of the result's columns then hold lists (None: unchanged)."""
    if shape.json_rows:
        return f"SELECT {json_object_sql(columns, 't')} AS row FROM ({sql}) t", None
    texts = [quoted(c.name) for c in columns if _INT_LISTS.fullmatch(c.type)] if shape.lists_as_text else []
    if not texts:
        return sql, None
    # to_json writes [[1,2],[]]; json.dumps the same with a space after each comma
    as_text = "replace(to_json({c})::VARCHAR, ',', ', ') AS {c}"
    return (f"SELECT * REPLACE ({', '.join(as_text.format(c=c) for c in texts)}) FROM ({sql})",
            [is_nested_type(c.type) and not _INT_LISTS.fullmatch(c.type) for c in columns])


def is_nested_type(type_: str) -> bool:
    """Whether a column type (as DuckDB spells it) holds lists, maps or structs."""
    return type_.rstrip().endswith("]") or type_.upper().startswith(("MAP", "STRUCT", "UNION"))


def _default(v: object) -> object:
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, (uuid.UUID, dt.timedelta)):
        return str(v)
    if isinstance(v, bytes):
        return v.hex()
    raise TypeError(type(v).__name__)


def _nested_text(v: object) -> str:
    """A list, map or struct cell as JSON text."""
    if not v:  # the empty labels or warnings of every run of a job
        return "{}" if isinstance(v, dict) else "[]"
    return json.dumps(v, default=_default, ensure_ascii=False)


def _text(v: object) -> str:
    """A cell as csv writes it: NULL empty, lists and maps as JSON."""
    if v is None:
        return ""
    if isinstance(v, (list, dict, tuple)):
        return _nested_text(v)
    return str(v)


def render(columns: list[str], rows: list[tuple], fmt: Format, out: TextIO, view: View | None = None) -> None:
    """Write rows in the chosen format (see render_batches)."""
    render_batches(columns, [rows], fmt, out, view)


def render_batches(columns: list[str], batches: Iterable[Sequence[tuple]], fmt: Format, out: TextIO,
                   view: View | None = None, nested: list[bool] | None = None, json_rows: bool = False) -> None:
    """Write batches of rows: csv and json every row as it comes (JSON is one array of row objects,
    one per line, lists stay arrays); table and markdown the first `view.max_rows` and how many more
    there were. `nested`: which columns hold lists or maps [default: looked up in the first batches].
    `json_rows`: json only, each row is one value, its object's JSON text (see Stream.json_rows)."""
    fmt = Format(fmt)
    if fmt is Format.json and json_rows:
        _write_lines(([row[0] for row in rows] for rows in batches), out)
    elif fmt is Format.json:
        _write_json(columns, batches, out)
    elif fmt is Format.csv:
        _write_csv(columns, batches, out, nested)
    else:
        _write_people(columns, batches, fmt, out, view or View())


def _write_json(columns: list[str], batches: Iterable[Sequence[tuple]], out: TextIO) -> None:
    import msgspec  # json output only

    encode = msgspec.json.Encoder().encode
    plain = _JSON_PLAIN

    def lines() -> Iterator[list[str]]:
        for rows in _slices(batches):
            yield [encode({c: v if v.__class__ in plain else _json_value(v) for c, v in zip(columns, row)}).decode()
                   for row in rows]

    _write_lines(lines(), out)


# Values msgspec writes as json output has always written them; NaN and infinities as null.
_JSON_PLAIN = frozenset((str, int, float, bool, type(None)))


def _json_value(v: object) -> object:
    """A value made what msgspec writes as json output writes it: Decimal as a number (msgspec
    would quote it), timedelta and UUID as str(), bytes as hex (`_default`), an aware datetime as
    its isoformat (+00:00, not Z), map keys that are not text, numbers or null as text."""
    c = v.__class__
    if c in _JSON_PLAIN:
        return v
    if c is list or c is tuple:
        return [_json_value(x) for x in v]
    if c is dict:
        return {_json_key(k): _json_value(x) for k, x in v.items()}
    if c is dt.datetime and v.tzinfo is not None:
        return v.isoformat()
    if isinstance(v, (decimal.Decimal, uuid.UUID, dt.timedelta, bytes)):
        return _default(v)
    return v


def _json_key(k: object) -> object:
    if k is None:
        return "null"
    if k.__class__ is bool:
        return "true" if k else "false"
    if k.__class__ in (str, int, float):
        return k
    if isinstance(k, (dt.date, dt.time)):
        return k.isoformat()
    v = _json_value(k)
    return v if v.__class__ is str else str(v)


def _write_lines(batches: Iterable[list[str] | list[bytes]], out: TextIO) -> None:
    """One JSON array of the rows' object texts, a row per line. Texts given as UTF-8 bytes (the
    chunks of rows a pack holds, see reports.ReportQuery.stream) go to the binary stream under `out`
    as they are where `out` writes UTF-8 with a newline as the line end, else are decoded."""
    first = True
    out.write("[")
    raw = None
    for texts in batches:
        if texts and isinstance(texts[0], bytes):
            if raw is None:
                raw = _utf8_stream(out)
                if raw is not out:
                    out.flush()  # what was written before comes first
            if raw is out:
                texts = [t.decode() for t in texts]
            else:
                for text in texts:  # no copy of the text: no join, no encoding
                    raw.write(b"\n  " if first else LINE_SEPARATOR.encode())
                    raw.write(text)
                    first = False
                continue
        if texts:
            out.write("\n  " if first else LINE_SEPARATOR)
            out.write(LINE_SEPARATOR.join(texts))
            first = False
    out.write("]\n" if first else "\n]\n")


LINE_SEPARATOR = ",\n  "  # between two rows' objects in json output (_write_lines)


def _utf8_stream(out: TextIO):
    """The binary stream under `out` when what `out` writes is the UTF-8 bytes of the text as it is
    (newlines untranslated); else `out`."""
    raw, encoding = getattr(out, "buffer", None), getattr(out, "encoding", None)
    try:
        utf8 = encoding is not None and codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        utf8 = False
    return raw if raw is not None and utf8 and os.linesep == "\n" else out


def _slices(batches: Iterable[Sequence[tuple]], rows: int = 10_000) -> Iterator[Sequence[tuple]]:
    """The non-empty batches, a long list of rows in slices: the text of one slice at a time is in memory."""
    for batch in batches:
        if isinstance(batch, list) and len(batch) > rows:
            yield from (batch[i:i + rows] for i in range(0, len(batch), rows))
        elif batch:
            yield batch


def _write_csv(columns: list[str], batches: Iterable[Sequence[tuple]], out: TextIO, nested: list[bool] | None) -> None:
    w = csv.writer(out, lineterminator="\n")
    w.writerow(columns)
    unknown = set(range(len(columns))) if nested is None else set()
    nested_at = [] if nested is None else [i for i, n in enumerate(nested) if n]
    for rows in batches:
        for i in list(unknown):  # a column's type is the same in every row: its first value tells
            v = next((row[i] for row in rows if row[i] is not None), None)
            if v is not None:
                unknown.discard(i)
                if isinstance(v, (list, dict, tuple)):
                    nested_at.append(i)
        if nested_at:
            rows = [_with_text(row, nested_at) for row in rows]
        # csv writes None as empty and other scalars with str(): as _text does
        w.writerows(rows)


def _with_text(row: tuple, at: list[int]) -> list:
    row = list(row)
    for i in at:
        if row[i] is not None:
            row[i] = _nested_text(row[i])
    return row


# ---- for people -------------------------------------------------------------------------------------

def _write_people(columns: list[str], batches: Iterable[Sequence[tuple]], fmt: Format, out: TextIO, view: View) -> None:
    limit = view.max_rows or None
    run_at = columns.index(RUN_ID) if RUN_ID in columns else None
    if view.per_run and run_at is not None and limit:
        rows = [row for batch in batches for row in batch]
        shown, cut = _cap_per_run(rows, run_at, limit)
        if view.run_rows is not None:
            seen = Counter(row[run_at] for row in shown)
            cut = Counter({k: n - seen[k] for k, n in view.run_rows.items() if n > seen[k]})
        notes = _per_run_note(columns, rows, run_at, cut) if rows else \
            ["no rows in the runs shown" if view.runs_left_out else view.empty_note]
        if view.runs_left_out:
            runs = "run" if view.runs_left_out == 1 else "runs"
            notes.append(f"... and the rows of {view.runs_left_out:,} more {runs} (--max-runs N shows the first N "
                         "runs, 0 all; --run picks runs; csv and json give every row)")
        _emit(columns, shown, fmt, out, view, notes)
        return
    it: Iterator[Sequence[tuple]] = iter(batches)
    shown: list[tuple] = []
    more = 0
    for batch in it:
        room = len(batch) if limit is None else max(0, limit - len(shown))
        shown.extend(batch[:room])
        more += len(batch) - min(room, len(batch))
        if limit is not None and len(shown) >= limit:
            break
    if limit is not None and len(shown) >= limit:
        _emit(columns, shown, fmt, out, view, [])
        out.flush()  # the rows first; counting the rest reads the whole result
        more += sum(len(batch) for batch in it)
        if more:
            _note(out, fmt, f"... {more:,} more rows (--max-rows N shows N, 0 all; csv and json give every row)",
                  view.width or terminal_width(out))
        return
    _emit(columns, shown, fmt, out, view, [] if shown else [view.empty_note])


def _cap_per_run(rows: list[tuple], run_at: int, limit: int) -> tuple[list[tuple], Counter]:
    seen: Counter = Counter()
    shown = []
    for row in rows:
        seen[row[run_at]] += 1
        if seen[row[run_at]] <= limit:
            shown.append(row)
    return shown, Counter({k: n - limit for k, n in seen.items() if n > limit})


def _per_run_note(columns: list[str], rows: list[tuple], run_at: int, cut: Counter) -> list[str]:
    if not cut:
        return []
    name_at = columns.index("run_name") if "run_name" in columns else run_at
    names = {row[run_at]: row[name_at] for row in rows}
    parts = ", ".join(f"{n:,} of run {escape(str(names[k]))}" for k, n in list(cut.items())[:NOTE_RUNS])
    if len(cut) > NOTE_RUNS:
        parts += f" and {sum(list(cut.values())[NOTE_RUNS:]):,} of {len(cut) - NOTE_RUNS:,} more runs"
    return [f"... {sum(cut.values()):,} more rows ({parts}; --max-rows N shows N per run, 0 all; csv and json "
            "give every row)"]


def _spacer(fmt: Format) -> str:
    return "\n" if fmt is Format.markdown else ""  # a line right after a markdown table would join it


def _emit(columns: list[str], rows: list[tuple], fmt: Format, out: TextIO, view: View, notes: list[str]) -> None:
    headers, cells, right, kept = cells_for_people(columns, rows, view)
    width = view.width or terminal_width(out)
    if fmt is Format.markdown:
        out.write("\n".join(_markdown(headers, cells, right)) + "\n")
    else:
        kinds = [units.column_kind(c)[0] for c in kept]
        roles = [(view.roles or {}).get(c) for c in kept]
        table = [TableColumn(h, [r[i] for r in cells], right[i], wraps=not right[i] and kinds[i] != "id", role=roles[i])
                 for i, h in enumerate(headers)]
        left_out = write_table(table, out, None if view.wide else width)
        if left_out:
            notes = [f"left out: {', '.join(left_out)} (--wide shows them)"] + notes
    for note in notes:
        _note(out, fmt, note, width)


def _note(out: TextIO, fmt: Format, text: str, width: int) -> None:
    """A line about the table (rows or columns left out), wrapped to the terminal's width."""
    out.write(_spacer(fmt) + textwrap.fill(text, width=max(width, 20), break_long_words=False,
                                          break_on_hyphens=False) + "\n")


def terminal_width(out: TextIO) -> int:
    """$COLUMNS when set, else the terminal's width, else 200 (output to a file or a pipe)."""
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        if out.isatty():
            return os.get_terminal_size(out.fileno()).columns
    except (OSError, ValueError, AttributeError):
        pass
    return NON_TTY_WIDTH


# C0 and C1 controls, DEL, and the bidirectional overrides that reorder what a terminal shows.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def escape(text: str) -> str:
    """Control characters as escapes (`\\x1b`, `\\n`, `\\u202e`): a cell never drives the terminal."""
    if text.isascii() and text.isprintable():
        return text
    return _CONTROL.sub(lambda m: _NAMED.get(m[0]) or (f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100
                                                     else f"\\u{ord(m[0]):04x}"), text)


def cells_for_people(columns: list[str], rows: list[tuple], view: View
                     ) -> tuple[list[str], list[list[str]], list[bool], list[str]]:
    """(headers, cells as text, right-aligned, the columns they show) for table and markdown:
    durations, sizes, counts and percentages in units (columns that now carry their unit lose `_ns`),
    other numbers with one number of decimals per column, timestamps from the run's start where the
    run is known, text escaped; run_id left out when run_name tells the runs apart."""
    run_at = columns.index(RUN_ID) if RUN_ID in columns else None
    kinds = [list(units.column_kind(c)) for c in columns]
    for i, (kind, _) in enumerate(kinds):
        if kind == "timestamp" and not (view.run_starts and (run_at is not None or view.run_id in view.run_starts)):
            kinds[i][0] = "id"  # the run is not known: the absolute timestamp as stored, to paste into a query
    headers = [units.display_name(c, k) for c, (k, _) in zip(columns, kinds)]
    taken = set()
    for i, h in enumerate(headers):
        if h != columns[i] and (h in taken or h in columns):
            # `total_ms` shown as `total` only while no other column is called that; else as it is, unit in its name
            headers[i] = columns[i]
            kinds[i][0] = "plain"
        taken.add(headers[i])
    cols: list[list[str]] = []
    right: list[bool] = []
    for i, (kind, scale) in enumerate(kinds):
        starts = None
        if kind == "timestamp":
            starts = [view.run_starts.get(row[run_at]) for row in rows] if run_at is not None \
                else [view.run_starts.get(view.run_id)] * len(rows)
        text, is_number = _column_cells([row[i] for row in rows], kind, scale, starts)
        if columns[i] == RUN_ID:  # people see the short form; csv and json keep the whole id
            text = [short_id(t) for t in text]
        cols.append(text)
        right.append(is_number)
    keep = list(range(len(columns)))
    if run_at is not None and "run_name" in columns:
        # run_name tells the runs apart for people (in a table without rows too): run_id then only takes width
        name_at = columns.index("run_name")
        if len({row[name_at] for row in rows}) == len({row[run_at] for row in rows}) and \
                all(row[name_at] is not None for row in rows):
            keep.remove(run_at)
    cols = [cols[i] for i in keep]
    cells = [list(r) for r in zip(*cols)] if cols else []
    return [escape(headers[i]) for i in keep], cells, [right[i] for i in keep], [columns[i] for i in keep]


_NUMBER = (int, float, decimal.Decimal)
_NOT_FRACTIONAL = frozenset((str, int, bool, type(None), dict, list, dt.datetime))  # never a float or Decimal


def _column_cells(values: list, kind: str, scale: int, starts: list | None) -> tuple[list[str], bool]:
    """A column's cells as text, and whether they are all numbers."""
    out = []
    numbers = 0
    # other numbers than units show one format per column: the decimals of its most precise value
    places = max((units.decimals(v) for v in values if v.__class__ is float or
                  (v.__class__ not in _NOT_FRACTIONAL and isinstance(v, (float, decimal.Decimal)))), default=0) \
        if kind == "plain" else 0
    append = out.append
    for j, v in enumerate(values):
        c = v.__class__
        if c is str:  # the common cases first, by exact class (a table of thousands of rows)
            append(v if v.isascii() and v.isprintable() else escape(v))
        elif v is None:
            append("")
        elif c is int or c is float or (c is not bool and isinstance(v, _NUMBER)):
            numbers += 1
            append(_number(v, kind, scale, None if starts is None else starts[j], places))
        elif c is bool:
            append("True" if v else "False")
        elif c is dt.datetime:  # (its text is always printable ASCII)
            append(str(v))
        elif (c is dict or c is list) and not v:
            append("{}" if c is dict else "[]")
        elif isinstance(v, (str, list, dict, tuple)):
            append(escape(v if isinstance(v, str) else _nested_text(v)))
        else:
            append(escape(str(v)))
    return out, numbers > 0 and numbers == len(values) - values.count(None)


def _number(v, kind: str, scale: int, start: int | None, places: int) -> str:
    if kind == "duration":
        return units.duration(v * scale)
    if kind == "timestamp":
        return str(v) if start is None else units.offset(v * scale - start)
    if kind == "bytes":
        return units.size(v)
    if kind == "pct":
        return units.pct(v)
    if kind == "id":
        return str(v)
    if places:
        return units.fixed(v, places)
    return units.count(v) if isinstance(v, int) else units.number(v)


def _markdown(headers: list[str], cells: list[list[str]], right: list[bool]) -> list[str]:
    def row(values: list[str]) -> str:
        return "| " + " | ".join(v.replace("|", "\\|") for v in values) + " |"

    rule = "|" + "|".join(" ---: " if r else " --- " for r in right) + "|"
    return [row(headers), rule] + [row(r) for r in cells]


# ---- the table format, drawn by rich -------------------------------------------------------------------


def cell_width(text: str) -> int:
    """Terminal columns a text takes (wide East Asian characters two, combining marks none), as rich
    counts them."""
    if text.isascii():
        return len(text)
    from rich.cells import cell_len  # rich only where a table shows text beyond ASCII

    return cell_len(text)


@dataclass
class TableColumn:
    """A column of the table format: its header and cells as text, and how it may fit a terminal."""

    header: str
    cells: list[str]
    right: bool  # numbers: right-aligned
    wraps: bool  # long text may wrap inside the cell (numbers and ids never do)
    role: str | None = None  # key, result or detail (a report's columns, see catalog.parse_report); None: no role

    @functools.cached_property
    def widths(self) -> list[int]:
        """cell_width of each cell (one pass of len where every cell is ASCII)."""
        if "".join(self.cells).isascii():
            return list(map(len, self.cells))
        return [cell_width(c) for c in self.cells]


MIN_TEXT_WIDTH = 16  # a column without a role is left out before its text wraps narrower than this
LEAST_TEXT_WIDTH = 6  # key and result text wraps down to this before the table outgrows the terminal


def fit_widths(natural: list[int], minimum: list[int], budget: int) -> list[int]:
    """Column widths summing to at most `budget` where the minimums allow: the widest columns give
    way first, none below its minimum."""
    if sum(natural) <= budget:
        return list(natural)
    lo, hi = 0, max(natural, default=0)

    def used(cap: int) -> int:
        return sum(max(m, min(w, cap)) for w, m in zip(natural, minimum))

    while lo < hi:  # the largest cap that fits
        mid = (lo + hi + 1) // 2
        if used(mid) <= budget:
            lo = mid
        else:
            hi = mid - 1
    widths = [max(m, min(w, lo)) for w, m in zip(natural, minimum)]
    spare = budget - sum(widths)
    for i, (w, n) in enumerate(zip(widths, natural)):  # what rounding left over, to the columns still short
        if spare > 0 and w < n:
            widths[i] += 1
            spare -= 1
    return widths


def _header_pieces(header: str) -> list[str]:
    """Where a header may wrap: after each `_` or space (`calls_per_step` -> calls_ / per_ / step)."""
    return re.findall(r"[^_ ]+[_ ]*|[_ ]+", header) or [""]


def _wrap_header(header: str, width: int) -> list[str]:
    lines = [""]
    for piece in _header_pieces(header):
        if lines[-1] and cell_width(lines[-1] + piece) > width:
            lines.append(piece)
        else:
            lines[-1] += piece
    return lines


def table_layout(columns: list[TableColumn], width: int | None) -> list[tuple[int, int]]:
    """The columns a table shows and their widths, (index, width) each, to fit `width` terminal
    columns (None: all of them, each on one line): detail columns are left out first, from the
    right, until the rest fits on one line; then headers wrap at `_`, and long text wraps, the widest
    first; columns without a role are left out from the right where even text wrapped at
    MIN_TEXT_WIDTH does not fit. Key and result columns always stay (but for one without a value in
    any row, which goes with the details): where they cannot fit, the table is wider than the
    terminal."""
    body = [max(col.widths, default=0) for col in columns]
    piece = [max(cell_width(p) for p in _header_pieces(col.header)) for col in columns]
    natural = [max(b, cell_width(col.header)) for b, col in zip(body, columns)]
    # the narrowest each may get: numbers whole (headers wrapped), text wrapped at `floor` columns (or
    # all of it, when shorter)
    def least(i: int, floor: int) -> int:
        return max(piece[i], min(body[i], floor) if columns[i].wraps else body[i])

    shown = list(range(len(columns)))
    if width is None:
        return [(i, natural[i]) for i in shown]

    def room() -> int:  # for the cells, beside the borders and a space either side of each
        return width - 3 * len(shown) - 1

    # a column with no value in any row (GPU time in a CPU trace) shows nothing: it goes with the details
    blank = [col.cells and not any(col.cells) for col in columns]
    for i in reversed(range(len(columns))):
        if sum(natural[j] for j in shown) <= room():
            break
        if (columns[i].role == "detail" or blank[i]) and len(shown) > 1:
            shown.remove(i)
    for i in reversed(range(len(columns))):
        if sum(least(j, MIN_TEXT_WIDTH) for j in shown) <= room():
            break
        if columns[i].role is None and i in shown and len(shown) > 1:
            shown.remove(i)
    # headers wrap at `_` before any cell does (a line once, not a line per row); then the widest text
    # gives way first; what text leaves over goes back to the headers
    fixed = [i for i in shown if not columns[i].wraps]
    text = [i for i in shown if columns[i].wraps]
    text_widths = fit_widths([natural[i] for i in text], [least(i, LEAST_TEXT_WIDTH) for i in text],
                             room() - sum(least(i, LEAST_TEXT_WIDTH) for i in fixed))
    fixed_widths = fit_widths([natural[i] for i in fixed], [least(i, LEAST_TEXT_WIDTH) for i in fixed],
                              room() - sum(text_widths))
    widths = dict(zip(text, text_widths)) | dict(zip(fixed, fixed_widths))
    return [(i, widths[i]) for i in shown]


def _cell_lines(columns: list[TableColumn], widths: list[int]) -> Iterator[tuple[list[str], list[int]]]:
    """Each row's cells as lines, a list of cells per line with the width of each cell's text: a cell
    wider than its column wrapped by rich (at spaces, and folded within a word longer than the
    column), the row as many lines as its tallest cell."""
    wraps = [j for j, (col, w) in enumerate(zip(columns, widths)) if max(col.widths, default=0) > w]
    wrapped: dict[tuple[str, int], list[str]] = {}  # a call site or a shape comes back row after row

    def lines(text: str, width: int) -> list[str]:
        if cell_width(text) <= width:
            return [text]
        if (text, width) not in wrapped:
            from rich.text import Text  # only where a cell wraps

            # justify "default" leaves the lines as wrapped: rich then needs no console (importing
            # rich's console costs a command on a small store a tenth of its time)
            wrapped[text, width] = [line.plain for line in Text(text).wrap(None, width, justify="default",  # type: ignore[arg-type]
                                                                           overflow="fold")]
        return wrapped[text, width]

    for row, row_widths in zip(zip(*(col.cells for col in columns)), zip(*(col.widths for col in columns))):
        if not any(row_widths[j] > widths[j] for j in wraps):
            yield list(row), list(row_widths)
            continue
        parts = [lines(c, w) for c, w in zip(row, widths)]
        for k in range(max(len(p) for p in parts)):
            cells = [p[k] if k < len(p) else "" for p in parts]
            yield cells, [cell_width(c) for c in cells]


def _padded(text: str, width: int, right: bool, text_width: int | None = None) -> str:
    """A cell's text with a space either side, filling `width` columns, right- or left-aligned
    (`text_width`: the text's cell_width, when known)."""
    fill = " " * (width - (cell_width(text) if text_width is None else text_width))
    return f" {fill}{text} " if right else f" {text}{fill} "


def write_table(columns: list[TableColumn], out: TextIO, width: int | None) -> list[str]:
    """Draw the table format in rich's heavy-header box: the header's lines between its top edge and
    rule, long text wrapped inside its cell (folded where a word is longer than the cell, never
    shortened), numbers right-aligned; fit to `width` (see table_layout; None: every column on one
    line). Returns the headers of the columns left out.

    The edges and rules are rich's (`rich.box.HEAVY_HEAD`, its ASCII box where `out` is not UTF-8, as
    rich's console substitutes it), cells wrap with rich's `Text.wrap`, and the text is the table rich
    draws with a row of its own per row of the result (test_output checks it). Drawn here rather than
    by rich's `Table`: that costs rich about 1.2 ms a row (2.8 s for the 2,259 rows of ops-by-shape
    over the shared CPU traces; 47 ms this way), and importing rich's console a fifth of a command's
    time on a small store, where no cell wraps."""
    from rich import box

    layout = table_layout(columns, width)
    if not layout:  # no columns: rich draws an empty line
        out.write("\n")
        return []
    widths = [w for _, w in layout]
    right = [columns[i].right for i, _ in layout]
    encoding = (getattr(out, "encoding", None) or "utf-8").lower()
    edges = box.HEAVY_HEAD if encoding.startswith("utf") else box.ASCII  # as rich's console substitutes
    padded = [w + 2 for w in widths]
    headers = [_wrap_header(columns[i].header, w) for i, w in layout]
    tallest = max(len(h) for h in headers)
    headers = [[""] * (tallest - len(h)) + h for h in headers]  # rich sets a header's lines at the bottom
    head = [edges.get_top(padded)]
    for k in range(tallest):
        head.append(edges.head_left + edges.head_vertical.join(
            _padded(h[k], w, r) for h, w, r in zip(headers, widths, right)) + edges.head_right)
    head.append(edges.get_row(padded, level="head"))

    def line(cells_and_widths: tuple[list[str], list[int]]) -> str:
        cells, text_widths = cells_and_widths
        return edges.mid_left + edges.mid_vertical.join(map(_padded, cells, widths, right, text_widths)) + edges.mid_right

    body = _cell_lines([columns[i] for i, _ in layout], widths)
    out.write("\n".join([*head, *map(line, body), edges.get_bottom(padded)]) + "\n")
    shown = {i for i, _ in layout}
    return [c.header for i, c in enumerate(columns) if i not in shown]


def integral(columns: list[str], rows: list[tuple], names: Iterable[str]) -> list[tuple]:
    """Rows whose float values with no fraction in the named columns are ints (counts and ns stay integers)."""
    at = [i for i, c in enumerate(columns) if c in set(names)]
    if not at:
        return rows

    def fix(row: tuple) -> tuple:
        row = list(row)
        for i in at:
            v = row[i]
            if isinstance(v, float) and v.is_integer():
                row[i] = int(v)
        return tuple(row)

    return [fix(row) for row in rows]

