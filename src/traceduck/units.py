"""Numbers for people: durations, sizes, counts and percentages as the table and markdown formats show
them, and which columns hold what (by the house naming: `_ns`, `bytes`, `_pct`, `_id`)."""

from __future__ import annotations

import decimal
import math
import re

# Time units, the one table of them: unit -> ns per unit, smallest first (durations shown, times
# parsed and written by export).
NS_PER = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
# The units of time columns, by suffix (`dur_ns`, `total_ms`; no column is in seconds).
TIME_UNITS = {unit: size for unit, size in NS_PER.items() if unit != "s"}
_STEPS = tuple((unit, float(size)) for unit, size in NS_PER.items())
_SIZES = ("B", "KB", "MB", "GB", "TB", "PB")
_TIME_COLUMN = re.compile(r"^(?P<base>.+)_(?P<unit>" + "|".join(TIME_UNITS) + ")$")
# Points in time: the ends of a span, not lengths (they read as offsets from the run's start).
_INSTANT = re.compile(r"^(?:ts|start|end|first|last)$|_(?:ts|start|end)$")
# Integers that name something: printed as they are (no separators), so they paste back into a query.
_ID_NAMES = {"id", "pid", "tid", "rank", "step", "line", "correlation", "device", "stream", "seq_num",
             "base_time_ns", "year"}


def column_kind(name: str) -> tuple[str, int]:
    """(kind, ns per unit) of a column, from its name.

    kind: 'duration' (`dur_ns`, `total_ms`, `rel_ts_ns`), 'timestamp' (`ts_ns`, `start_ns`, `gpu_ts_ns`),
    'bytes' (`bytes`, `total_bytes`, `bytes_per_call`), 'pct' (`_pct`), 'id' (`_id`, `_index`, `pid`,
    `rank`, ...) or 'plain' (decided by the value: counts, other numbers, text).
    """
    n = name.lower()
    if n in _ID_NAMES or n.endswith(("_id", "_index")):
        return "id", 1
    if n == "pct" or n.endswith("_pct"):
        return "pct", 1
    if n == "bytes" or n.endswith("_bytes") or n.startswith("bytes_per_"):
        return "bytes", 1
    m = _TIME_COLUMN.match(n)
    if m:
        scale = TIME_UNITS[m["unit"]]
        if not n.startswith("rel_") and _INSTANT.search(m["base"]):
            return "timestamp", scale
        return "duration", scale
    return "plain", 1


def display_name(name: str, kind: str) -> str:
    """The header for a column whose cells carry their unit: `dur_ns` -> `dur`."""
    if kind in ("duration", "timestamp"):
        m = _TIME_COLUMN.match(name)
        if m:
            return m["base"]
    return name


def _sig(x: float, digits: int = 4) -> str:
    """x (>= 0) with `digits` significant digits (never fewer integer digits), thousands separated."""
    whole = len(str(int(x))) if x >= 1 else 1
    return f"{x:,.{max(0, digits - whole)}f}"


def _scaled(value: float, steps) -> str:
    """value in the largest unit that keeps it at 1 or more; the first unit's whole numbers stay whole."""
    sign = "-" if value < 0 else ""
    value = abs(value)
    start = 0  # units where the value reads 1000 or more are passed over below anyway: skip them
    while start < len(steps) - 1 and value / steps[start][1] >= 1000:
        start += 1
    for i in range(start, len(steps)):
        unit, size = steps[i]
        x = value / size
        if i == 0 and x < 1000 and x == int(x):
            return f"{sign}{int(x)} {unit}"
        text = _sig(x)
        # the next unit up when this one would print 1000 or more (also after rounding: 999.96 us -> 1.000 ms;
        # below 999 no rounding to four digits reaches 1000)
        if i < len(steps) - 1 and x >= 999 and float(text.replace(",", "")) >= 1000:
            continue
        return f"{sign}{text} {unit}"
    raise AssertionError("unreachable")


def duration(ns: float) -> str:
    """`1.234 ms`, `56.70 us`, `2.010 s`, `850 ns`: four significant digits (whole ns as they are), so a
    column of them lines up and 0.1% differences show."""
    return _scaled(float(ns), _STEPS)


def size(n: float) -> str:
    """Bytes in decimal units: `6.040 GB`, `362.9 KB`, `512 B` (four significant digits, whole bytes as they are)."""
    return _scaled(float(n), [(u, 1000.0 ** i) for i, u in enumerate(_SIZES)])


def offset(ns: int) -> str:
    """A time from the run's start in ms, exact to the ns: `12.345678 ms`, `1,234.567890 ms`."""
    sign = "-" if ns < 0 else ""
    ms, rest = divmod(abs(int(ns)), 1_000_000)
    return f"{sign}{ms:,}.{rest:06d} ms"


def count(n: int) -> str:
    """An integer with thousands separators: `1,326,080`."""
    return f"{n:,}"


def pct(x: float) -> str:
    """A percentage (0-100) with one decimal: `40.9`."""
    return f"{float(x):.1f}"


MAX_DECIMALS = 6


def decimals(x: float | decimal.Decimal) -> int:
    """The decimals x is written with, at most MAX_DECIMALS: 0.667 -> 3, 2.0 -> 0, NaN -> 0."""
    try:
        text = f"{x:.{MAX_DECIMALS}f}"
    except (ValueError, TypeError):
        return 0
    return len(text.partition(".")[2].rstrip("0")) if text[-1:].isdigit() else 0


def fixed(x: float | decimal.Decimal, places: int) -> str:
    """x with `places` decimals and thousands separators (`1,030.110`), the format of a column of them;
    NaN and infinities as written."""
    try:
        if not math.isfinite(x):
            return str(x)
    except (ValueError, TypeError, ArithmeticError):
        return str(x)
    return f"{x:,.{places}f}"


def number(x: float | decimal.Decimal) -> str:
    """Any other number: integral values as counts, others as written, with thousands separators."""
    try:
        if x == int(x) and abs(x) < 1e15:
            return count(int(x))
    except (ValueError, OverflowError, ArithmeticError):  # NaN, infinities
        return str(x)
    return f"{x:,}"
