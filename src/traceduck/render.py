"""Rendering query results as table, csv, json or markdown: the same for every command."""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import json
import uuid
from enum import Enum
from typing import TextIO

import orjson


class Format(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"
    markdown = "markdown"


def _default(v: object) -> object:
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, (uuid.UUID, dt.timedelta)):
        return str(v)
    if isinstance(v, bytes):
        return v.hex()
    raise TypeError(type(v).__name__)


def _text(v: object) -> str:
    """A cell as text: NULL empty, lists and maps as JSON."""
    if v is None:
        return ""
    if isinstance(v, (list, dict, tuple)):
        return json.dumps(v, default=_default, ensure_ascii=False)
    if isinstance(v, float):
        return repr(v)
    return str(v)


def render(columns: list[str], rows: list[tuple], fmt: Format, out: TextIO, title: str | None = None) -> None:
    """Write rows in the chosen format. JSON is one array of row objects (lists stay arrays)."""
    fmt = Format(fmt)
    if fmt is Format.json:
        data = [dict(zip(columns, row)) for row in rows]
        out.write(orjson.dumps(data, default=_default, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode())
        out.write("\n")
    elif fmt is Format.csv:
        w = csv.writer(out, lineterminator="\n")
        w.writerow(columns)
        for row in rows:
            w.writerow([_text(v) for v in row])
    elif fmt is Format.markdown:
        out.write("| " + " | ".join(columns) + " |\n")
        out.write("|" + "|".join(" --- " for _ in columns) + "|\n")
        for row in rows:
            out.write("| " + " | ".join(_text(v).replace("|", "\\|").replace("\n", " ") for v in row) + " |\n")
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title, show_lines=False, header_style="bold")
        for c in columns:
            table.add_column(c, overflow="fold")
        for row in rows:
            table.add_row(*(_text(v) for v in row))
        Console(file=out, width=None if out.isatty() else 200).print(table)


def human_bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"
