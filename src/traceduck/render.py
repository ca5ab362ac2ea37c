"""Rendering query results, the same for every command: csv and json exact and complete (streamed in
batches), table and markdown for people (units, a row cap, the terminal's width)."""

from __future__ import annotations

import codecs
import csv
import datetime as dt
import decimal
import json
import os
import re
import textwrap
import unicodedata
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TextIO

import msgspec

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


@dataclass
class View:
    """How table and markdown show a result; csv and json ignore it and give every row as it is."""

    max_rows: int = 0  # 0: every row
    per_run: bool = False  # max_rows counts per value of the run_id column (when there is one)
    wide: bool = False  # table: every column and whole cells, whatever the terminal's width
    width: int | None = None  # table: columns to fit [default: $COLUMNS, else the terminal's, else 200]
    run_starts: dict[str, int] = field(default_factory=dict)  # run_id -> runs.start_ns, for timestamps
    run_id: str | None = None  # the run of every row when there is no run_id column
    empty_note: str = "no rows"  # said under the header when there is no row at all
    # per run, its rows before the query capped them at max_rows (Stream.run_rows, filled as the rows
    # are read): the rows left out are counted from it; None when every row comes
    run_rows: dict[str, int] | None = None


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
      (Stream.run_rows): what the tables show, without fetching the rows they leave out."""

    json_rows: bool = False
    lists_as_text: bool = False
    per_run_cap: int | None = None


def row_shape(fmt: Format, max_rows: int) -> RowShape:
    """The RowShape of an output format showing at most max_rows rows per run (0: all)."""
    fmt = Format(fmt)
    return RowShape(json_rows=fmt is Format.json, lists_as_text=fmt is not Format.json,
                    per_run_cap=max_rows if fmt in PEOPLE and max_rows else None)


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
        notes = _per_run_note(columns, rows, run_at, cut) if rows else [view.empty_note]
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
    parts = ", ".join(f"{n:,} of run {escape(str(names[k]))}" for k, n in cut.items())
    return [f"... {sum(cut.values()):,} more rows ({parts}; --max-rows N shows N per run, 0 all; csv and json "
            "give every row)"]


def _spacer(fmt: Format) -> str:
    return "\n" if fmt is Format.markdown else ""  # a line right after a markdown table would join it


def _emit(columns: list[str], rows: list[tuple], fmt: Format, out: TextIO, view: View, notes: list[str]) -> None:
    headers, cells, right, shrinkable = cells_for_people(columns, rows, view)
    width = view.width or terminal_width(out)
    if fmt is Format.markdown:
        lines = _markdown(headers, cells, right)
    else:
        lines, hidden = _table(headers, cells, right, shrinkable, None if view.wide else width)
        if hidden:
            notes = [f"... {len(hidden)} more column{'s' if len(hidden) > 1 else ''} not shown: {', '.join(hidden)} "
                     "(--wide shows every column)"] + notes
    out.write("\n".join(lines) + "\n")
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
                     ) -> tuple[list[str], list[list[str]], list[bool], list[bool]]:
    """(headers, cells as text, right-aligned, shortenable) for table and markdown: durations, sizes,
    counts and percentages in units (columns that now carry their unit lose `_ns`), timestamps from
    the run's start where the run is known, text escaped."""
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
    shrinkable: list[bool] = []
    for i, (kind, scale) in enumerate(kinds):
        starts = None
        if kind == "timestamp":
            starts = [view.run_starts.get(row[run_at]) for row in rows] if run_at is not None \
                else [view.run_starts.get(view.run_id)] * len(rows)
        text, is_number, is_text = _column_cells([row[i] for row in rows], kind, scale, starts)
        if columns[i] == RUN_ID:  # people see the short form; csv and json keep the whole id
            text = [short_id(t) for t in text]
        cols.append(text)
        right.append(is_number)
        shrinkable.append(is_text and kind != "id" and columns[i] != "run_name")
    keep = list(range(len(columns)))
    if run_at is not None and "run_name" in columns and rows:
        # run_name tells the runs apart for people: run_id then only takes width
        name_at = columns.index("run_name")
        if len({row[name_at] for row in rows}) == len({row[run_at] for row in rows}) and \
                all(row[name_at] is not None for row in rows):
            keep.remove(run_at)
    cols = [cols[i] for i in keep]
    cells = [list(r) for r in zip(*cols)] if cols else []
    return [escape(headers[i]) for i in keep], cells, [right[i] for i in keep], [shrinkable[i] for i in keep]


_NUMBER = (int, float, decimal.Decimal)


def _column_cells(values: list, kind: str, scale: int, starts: list | None) -> tuple[list[str], bool, bool]:
    """A column's cells as text; (cells, all numbers, any text)."""
    out = []
    numbers = texts = 0
    for j, v in enumerate(values):
        if v is None:
            out.append("")
            continue
        if isinstance(v, _NUMBER) and not isinstance(v, bool):
            numbers += 1
            out.append(_number(v, kind, scale, None if starts is None else starts[j]))
            continue
        if isinstance(v, (str, list, dict, tuple)):
            texts += 1
            out.append(escape(v if isinstance(v, str) else _nested_text(v)))
        else:
            out.append(escape(str(v)))
    return out, numbers > 0 and numbers == len(values) - values.count(None), texts > 0


def _number(v, kind: str, scale: int, start: int | None) -> str:
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
    return units.count(v) if isinstance(v, int) else units.number(v)


def _markdown(headers: list[str], cells: list[list[str]], right: list[bool]) -> list[str]:
    def row(values: list[str]) -> str:
        return "| " + " | ".join(v.replace("|", "\\|") for v in values) + " |"

    rule = "|" + "|".join(" ---: " if r else " --- " for r in right) + "|"
    return [row(headers), rule] + [row(r) for r in cells]


def cell_width(text: str) -> int:
    """Terminal columns a text takes (wide East Asian characters two, combining marks none)."""
    if text.isascii():
        return len(text)
    # only the characters beyond ASCII are looked up (a shortened name holds one: the ellipsis)
    return len(text) + sum(_char_width(c) - 1 for c in _NON_ASCII.findall(text))


_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _char_width(c: str) -> int:
    if unicodedata.combining(c):
        return 0
    return 2 if unicodedata.east_asian_width(c) in "WF" else 1


def shorten(text: str, width: int) -> str:
    """Text cut to `width` columns with an ellipsis in the middle: a kernel name keeps its start and end."""
    if cell_width(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    head_w = (width - 1 + 1) // 2
    tail_w = width - 1 - head_w
    if text.isascii():
        return text[:head_w] + "…" + (text[-tail_w:] if tail_w else "")
    def take(chars, budget: int) -> tuple[list[str], int]:
        got, used = [], 0
        for c in chars:
            if used + _char_width(c) > budget:
                break
            got.append(c)
            used += _char_width(c)
        return got, used

    head, used = take(text, head_w)
    tail, _ = take(reversed(text), width - 1 - used)  # what a wide character left over goes to the end
    return "".join(head) + "…" + "".join(reversed(tail))


MIN_TEXT_WIDTH = 16


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


def _table(headers: list[str], cells: list[list[str]], right: list[bool], shrinkable: list[bool],
           width: int | None) -> tuple[list[str], list[str]]:
    """Box-drawn table lines; (lines, headers of the columns left out to fit `width`).

    To fit, headers wrap at `_` and long text is shortened in the middle (never a number or an id);
    columns that still do not fit are left out from the right."""
    n = len(headers)
    body = [max([0] + [cell_width(r[i]) for r in cells]) for i in range(n)]
    natural = [max(cell_width(headers[i]), body[i]) for i in range(n)]
    shown = list(range(n))
    widths = list(natural)
    if width is not None:
        # first long text gives way, then headers wrap; what then still does not fit is left out
        cells_min = [min(body[i], MIN_TEXT_WIDTH) if shrinkable[i] else body[i] for i in range(n)]
        whole_head = [max(cell_width(headers[i]), cells_min[i]) for i in range(n)]
        wrapped_head = [max([cells_min[i]] + [cell_width(p) for p in _header_pieces(headers[i])]) for i in range(n)]
        while len(shown) > 1 and sum(wrapped_head[i] + 3 for i in shown) + 1 > width:
            shown.pop()
        budget = width - 3 * len(shown) - 1
        fitted = fit_widths([natural[i] for i in shown], [whole_head[i] for i in shown], budget)
        if sum(fitted) > budget:
            fitted = fit_widths([whole_head[i] for i in shown], [wrapped_head[i] for i in shown], budget)
        for i, w in zip(shown, fitted):
            widths[i] = w
    hidden = [headers[i] for i in range(n) if i not in shown]

    def line(values: list[str]) -> list[str]:
        parts = []
        for i in shown:
            text = shorten(values[i], widths[i])
            pad = " " * (widths[i] - cell_width(text))
            parts.append(pad + text if right[i] else text + pad)
        return parts

    def rule(left: str, fill: str, mid: str, end: str) -> str:
        return left + mid.join(fill * (widths[i] + 2) for i in shown) + end

    wrapped = {i: _wrap_header(headers[i], widths[i]) for i in shown}
    depth = max((len(w) for w in wrapped.values()), default=1)
    head = []
    for k in range(depth):
        values = [""] * n
        for i in shown:
            values[i] = wrapped[i][k] if k < len(wrapped[i]) else ""
        head.append("┃ " + " ┃ ".join(line(values)) + " ┃")
    out = [rule("┏", "━", "┳", "┓"), *head, rule("┡", "━", "╇", "┩")]
    out += ["│ " + " │ ".join(line(r)) + " │" for r in cells]
    out.append(rule("└", "─", "┴", "┘"))
    return out, hidden


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

