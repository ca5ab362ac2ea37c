"""The streaming fallback parser (ijson): slower, exact, and tolerant of any JSON layout.

Used when the fast chunk splitter cannot cut a file safely. Yields events in batches and
fills in the layout (top-level keys) as it goes.
"""

from __future__ import annotations

from collections.abc import Iterator

import ijson

from ..errors import InputError
from .reader import RawSource, TraceLayout

_OPEN = ("start_map", "start_array")
_CLOSE = ("end_map", "end_array")


def _build(it, event: str, value: object) -> object:
    if event not in _OPEN:
        return value
    b = ijson.ObjectBuilder()
    b.event(event, value)
    depth = 1
    while depth:
        _, event, value = next(it)
        b.event(event, value)
        if event in _OPEN:
            depth += 1
        elif event in _CLOSE:
            depth -= 1
    return b.value


class StreamingEvents:
    """Events of a trace via ijson, in batches; `layout` is complete once iteration ends."""

    def __init__(self, source: RawSource, batch: int = 50_000) -> None:
        self.source = source
        self.batch = batch
        self.layout = TraceLayout("object")
        self.count = 0

    def batches(self) -> Iterator[list]:
        try:
            yield from self._batches()
        except (ijson.IncompleteJSONError, ijson.JSONError) as e:
            detail = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise InputError(
                f"{self.source.path}: invalid JSON near byte {self.source.raw_bytes_read:,} after "
                f"{self.count:,} complete events ({detail})",
                "The file may be truncated or damaged",
            ) from None
        except UnicodeDecodeError:
            raise InputError(f"{self.source.path}: invalid UTF-8 after {self.count:,} complete events",
                             "The file may be damaged") from None

    def _batches(self) -> Iterator[list]:
        it = ijson.parse(self.source.stream, use_float=False)
        try:
            _, event, _ = next(it)
        except StopIteration:
            raise InputError(f"{self.source.path}: the file is empty", "Give a Chrome trace (.json or .json.gz)") from None
        if event == "start_array":
            self.layout.trace_format = "array"
            yield from self._items(it)
            return
        if event != "start_map":
            raise InputError(f"{self.source.path}: not a trace (the top level is not an object or array)",
                             "A PyTorch profiler trace is a JSON object with a traceEvents list")
        seen_events = False
        target = self.layout.header
        for prefix, event, value in it:
            if prefix == "" and event == "end_map":
                break
            if event != "map_key":
                continue
            key = value
            _, event, value = next(it)
            if key == "traceEvents" and not seen_events:
                if event != "start_array":
                    raise InputError(f"{self.source.path}: not a trace (traceEvents is not a list)",
                                     "A PyTorch profiler trace is a JSON object with a traceEvents list")
                seen_events = True
                yield from self._items(it)
                target = self.layout.trailer
            else:
                target[key] = _build(it, event, value)
        if not seen_events:
            raise InputError(f"{self.source.path}: not a trace (no traceEvents key)",
                             "A PyTorch profiler trace is a JSON object with a traceEvents list")

    def _items(self, it) -> Iterator[list]:
        batch: list = []
        for _, event, value in it:
            if event == "end_array":
                break
            batch.append(_build(it, event, value))
            self.count += 1
            if len(batch) >= self.batch:
                yield batch
                batch = []
        if batch:
            yield batch
