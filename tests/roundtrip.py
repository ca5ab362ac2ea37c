"""Comparing a trace with its export, the way the issue states it: same top-level keys, same
events in the same order with the same keys and values; numbers compared as values,
timestamps to the nanosecond, pid/tid with their JSON type."""

from __future__ import annotations

from decimal import Decimal

_NUMBER = (int, float, Decimal)


def same_value(a, b) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, _NUMBER) and isinstance(b, _NUMBER):
        fa, fb = float(a), float(b)
        return fa == fb or (fa != fa and fb != fb)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


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
            if ns(x) != ns(y):
                return f"{k}: {x} != {y}"
        elif k in ("pid", "tid"):
            if type(x) is not type(y) or x != y:
                return f"{k}: {x!r} != {y!r}"
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
