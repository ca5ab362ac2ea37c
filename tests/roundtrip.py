"""Comparing a trace with its export, the way the issue states it: same top-level keys, same
events in the same order with the same keys and values; timestamps to the nanosecond, pid/tid
with their JSON type.

Both sides must be read with `parse_float=Decimal` (conftest.load_json does): a JSON number is then
an `int` when written without a fraction or exponent and a `Decimal` of its text otherwise, so
numbers compare exactly, type and value: 2 is not 2.0, and 0.30000000000000001 is not 0.3. Only
NaN and the infinities (which `json` reads as floats) are floats.
"""

from __future__ import annotations

import math
from decimal import Decimal

_NUMBER = (int, float, Decimal)


def same_value(a, b) -> bool:
    """True when `a` and `b` are the same JSON value: same type (int, decimal, string, bool, null,
    list, object) and the same value; lists in order, objects by key."""
    for v in (a, b):
        if type(v) is float and math.isfinite(v):
            raise TypeError(f"{v!r} was read as a float: load both sides with json.loads(..., parse_float=Decimal)")
    if type(a) is not type(b):
        return False
    if isinstance(a, float):  # NaN, Infinity, -Infinity
        return a == b or (a != a and b != b)
    if isinstance(a, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    return a == b


def ns(v) -> int:
    return int((Decimal(v) * 1000).to_integral_value())


def event_difference(a: dict, b: dict) -> str | None:
    """None when the events match, else what differs."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return None if same_value(a, b) else f"{a!r} != {b!r}"
    if a.keys() != b.keys():
        return f"keys {sorted(a)} != {sorted(b)}"
    for k in a:
        x, y = a[k], b[k]
        if k in ("ts", "dur") and isinstance(x, _NUMBER) and not isinstance(x, bool) and isinstance(y, _NUMBER):
            if ns(x) != ns(y):  # times are kept in whole ns: 1.5 and 1.500 are the same time
                return f"{k}: {x} != {y}"
        elif not same_value(x, y):
            return f"{k}: {x!r} != {y!r}"
    return None


def trace_difference(orig, back) -> str | None:
    """None when the export matches the original trace, else the first difference."""
    if isinstance(orig, list):
        if not isinstance(back, list):
            return "top level: array became an object"
        events_a, events_b = orig, back
    else:
        if list(orig.keys()) != list(back.keys()):
            return f"top-level keys {list(orig.keys())} != {list(back.keys())}"
        for k in orig:
            if k != "traceEvents" and not same_value(orig[k], back[k]):
                return f"top-level {k}: {orig[k]!r} != {back[k]!r}"
        events_a, events_b = orig["traceEvents"], back["traceEvents"]
    if len(events_a) != len(events_b):
        return f"{len(events_a)} events != {len(events_b)}"
    for i, (a, b) in enumerate(zip(events_a, events_b)):
        diff = event_difference(a, b)
        if diff:
            return f"event {i}: {diff}"
    return None
