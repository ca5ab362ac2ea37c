"""The streaming fallback parser (ijson): slower, exact, tolerant of any JSON layout, and the
place where damaged files are repaired, located and (with salvage) cut.

Used when the fast chunk splitter cannot cut a file safely or a chunk does not parse. The text
goes through the lexical `Repairer` before ijson, so repairable damage is fixed with a warning;
what remains is reported as one `InputError` with the byte offset and the number of complete
events before it. ijson is driven push-style, so every event parsed before a fault is seen:
that is what `--salvage` keeps.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator

import ijson
import msgspec

from ..errors import InputError, NotATrace
from .reader import MAX_EVENT_BYTES, RawSource, TraceLayout, too_large
from .repair import Repairer

_OPEN = ("start_map", "start_array")
_CLOSE = ("end_map", "end_array")
FEED = 64 << 10  # bytes handed to ijson at a time: the resolution of "near byte N"
READ = 1 << 20
# Values nested deeper than this are kept as their JSON text (msgspec and Python recurse).
MAX_DEPTH = 200
DEEP_VALUE = f"value nested deeper than {MAX_DEPTH} levels (kept as JSON text)"
# Text that ends inside a number or a literal (`-`, `1.`, `1e`, `1e-`, `tru`, `nul`, `fals`): cut there,
# whatever the parser says of it
_CUT_TOKEN = re.compile(rb"(?:-|\d\.|\d[eE][-+]?|(?:^|[\s,:\[])(?:t|tr|tru|f|fa|fal|fals|n|nu|nul))\Z")
_TAIL = 16  # bytes of the text's end kept to look for such a cut


class Cut(Exception):
    """The text stops being usable JSON at an offset: truncation or damage."""

    def __init__(self, what: str, offset: int, truncated: bool = False, exact: bool = True) -> None:
        super().__init__(what, offset)
        self.what = what
        self.offset = offset
        self.truncated = truncated
        self.exact = exact  # False: somewhere in the block of text before the offset


def _scalar_text(event: str, value: object) -> str:
    if event == "string":
        return json.dumps(value, ensure_ascii=False)
    if event == "number":
        return str(value)
    if event == "boolean":
        return "true" if value else "false"
    return "null"


class StreamingEvents:
    """Events of a trace via ijson, in batches; `layout` is complete once iteration ends.

    With `salvage`, damage inside traceEvents (or after it) ends the events instead of failing:
    the complete events before it are kept and `cut` describes what happened.
    """

    def __init__(self, source: RawSource, batch: int = 50_000, salvage: bool = False) -> None:
        self.source = source
        self.batch = batch
        self.salvage = salvage
        self.layout = TraceLayout("object")
        self.count = 0
        self.cut: Cut | None = None
        self.warnings: Counter = Counter()
        self.repairer = Repairer()
        self._batch: list = []
        self._in_events = False
        self._item_start = 0  # input offset (about) where the event being built starts

    # -- reading: repaired text, pushed into ijson block by block -------------------------------

    def _parse_events(self) -> Iterator[tuple]:
        # basic_parse: ijson's prefixed events spell out the path to every value, O(depth) each,
        # so text nested d deep would cost O(d^2) time and memory; depth is tracked here instead.
        events = ijson.sendable_list()
        coro = ijson.basic_parse_coro(events, use_float=False)
        fed = 0  # repaired bytes fed so far
        tail = b""  # the end of the repaired text fed so far
        feed = FEED  # bytes handed to ijson in the next piece
        while True:
            # The repairer holds back a string cut by the end of a read and scans it again with
            # the next: reading at least as much as it holds keeps a string of any length to a
            # few scans in all (linear), not one per READ.
            data = self.source.read(max(READ, len(self.repairer.pending)))
            final = not data
            out = self.repairer.feed(data, final)
            if len(self.repairer.pending) > MAX_EVENT_BYTES:  # one string longer than any event may be
                raise too_large(self.source, self.repairer.consumed, exact=False)
            fault = self.repairer.fault
            tail = (tail + out[-_TAIL:])[-_TAIL:]
            start = 0
            while start < len(out):
                piece = out[start:start + feed]
                try:
                    coro.send(piece)
                except ijson.JSONError as e:
                    yield from events
                    if final and start + len(piece) >= len(out) and self._cut_in_token(tail):
                        raise Cut("the trace is truncated", self.source.offset, truncated=True) from None
                    raise Cut(_first_line(e), self._input_offset(fed + start + len(piece)), exact=False) from None
                # yajl lexes a token cut by a piece's end again from its start with the next piece:
                # a piece that gave no event (inside one long string) makes the next one twice as
                # long, so a string of any length is lexed a few times in all, not once per FEED.
                feed = FEED if events else feed * 2
                start += len(piece)
                yield from events
                del events[:]
            fed += len(out)
            if fault is not None:
                yield from events
                raise Cut(fault.what, fault.offset)
            if final:
                try:
                    coro.close()
                except ijson.JSONError as e:
                    yield from events
                    if "premature EOF" in str(e) or self._cut_in_token(tail):
                        raise Cut("the trace is truncated", self.source.offset, truncated=True) from None
                    raise Cut(_first_line(e), self.source.offset, exact=False) from None
                yield from events
                if self.source.ended_early:
                    raise Cut("the trace is truncated", self.source.offset, truncated=True)
                return

    def _cut_in_token(self, tail: bytes) -> bool:
        """Whether the text ends inside a string, a number or a literal: a cut, not damage."""
        return bool(self.repairer.pending) or _CUT_TOKEN.search(tail) is not None

    def _input_offset(self, out_offset: int) -> int:
        """An input offset near a repaired-text offset (repairs change lengths by a few bytes)."""
        return min(out_offset, self.repairer.consumed)

    # -- events -----------------------------------------------------------------------------------

    def batches(self) -> Iterator[list]:
        try:
            yield from self._batches()
        except Cut as cut:
            self.warnings.update(self.repairer.warnings)
            if self.salvage and self._in_events and self.count:
                self.cut = cut
                if self._batch:
                    yield self._batch
                    self._batch = []
                return
            raise InputError(self._message(cut), self._hint(cut)) from None
        self.warnings.update(self.repairer.warnings)

    def _message(self, cut: Cut) -> str:
        path = self.source.path
        of = " of the decompressed text" if self.source.is_gzip else ""
        after = f"after {self.count:,} complete events"
        if cut.truncated:
            what = "the gzip stream ends early" if self.source.ended_early else "the trace is truncated"
            return f"{path}: {what} (it ends at byte {cut.offset:,}{of}, {after})"
        at = "at" if cut.exact else "near"
        return f"{path}: invalid JSON, {cut.what} ({at} byte {cut.offset:,}{of}, {after})"

    def _hint(self, cut: Cut) -> str:
        if not self._in_events or not self.count:
            return "No complete event comes before it, so there is nothing to salvage"
        if cut.truncated:
            return f"Re-run with --salvage to keep the {self.count:,} complete events"
        return f"Fix the file there, or re-run with --salvage to keep the {self.count:,} complete events before it"

    def _batches(self) -> Iterator[list]:
        it = self._parse_events()
        try:
            event, _ = next(it)
        except StopIteration:
            raise InputError(f"{self.source.path}: the file is empty", "Give a Chrome trace (.json or .json.gz)") from None
        if event == "start_array":
            self.layout.trace_format = "array"
            yield from self._items(it)
            for _ in it:  # read to the end: trailing damage and the gzip check
                pass
            return
        if event != "start_map":
            raise NotATrace(self.source.path, "the top level is not an object or array")
        seen_events = False
        target = self.layout.header
        for event, value in it:
            if event == "end_map":  # values are read whole below: this is the top-level object's end
                break
            key = value
            event, value = next(it)
            if key == "traceEvents" and not seen_events:
                if event != "start_array":
                    raise NotATrace(self.source.path, "traceEvents is not a list")
                seen_events = True
                yield from self._items(it)
                target = self.layout.trailer
            else:  # metadata is stored as JSON text: a value too deep for it is kept as a string
                self._item_start = self.repairer.consumed
                target[key] = self._build(it, event, value, deep=str)
        if not seen_events:
            raise NotATrace(self.source.path, "no traceEvents key")
        for _ in it:  # read to the end: trailing damage and the gzip check
            pass

    def _items(self, it) -> Iterator[list]:
        self._in_events = True
        batch = self._batch
        for event, value in it:
            if event == "end_array":
                break
            self._item_start = self.repairer.consumed
            batch.append(self._build(it, event, value))
            self.count += 1
            if len(batch) >= self.batch:
                yield batch
                batch = self._batch = []
        if batch:
            self._batch = []
            yield batch

    def _build(self, it, event: str, value: object, deep=msgspec.Raw) -> object:
        """A parsed value; containers deeper than MAX_DEPTH become `deep(their JSON text)`."""
        if event not in _OPEN:
            return value
        b = ijson.ObjectBuilder()
        b.event(event, value)
        depth = 1
        values = 0
        while depth:
            event, value = next(it)
            values += 1
            if not values & 0xFFFF:
                self._check_size()
            if event in _OPEN and depth >= MAX_DEPTH:
                self.warnings[DEEP_VALUE] += 1
                b.event("string", deep(self._subtree_text(it, event)))
                continue
            b.event(event, value)
            if event in _OPEN:
                depth += 1
            elif event in _CLOSE:
                depth -= 1
        return b.value

    def _check_size(self) -> None:
        """Refuse the value being built once its text is past MAX_EVENT_BYTES (checked now and
        then, as the memory it takes grows with it)."""
        if self.repairer.consumed - self._item_start > MAX_EVENT_BYTES + READ:
            raise too_large(self.source, self._item_start, exact=False)

    def _subtree_text(self, it, event: str) -> str:
        """Compact JSON text of a container whose start event was just read (no recursion)."""
        out = ["{" if event == "start_map" else "["]
        first = [True]
        is_map = [event == "start_map"]
        values = 0
        while first:
            event, value = next(it)
            values += 1
            if not values & 0xFFFF:
                self._check_size()
            if event in _CLOSE:
                out.append("}" if event == "end_map" else "]")
                first.pop()
                is_map.pop()
                continue
            if event == "map_key":
                out.append(("" if first[-1] else ",") + json.dumps(value, ensure_ascii=False) + ":")
                first[-1] = False
                continue
            if not is_map[-1]:
                if not first[-1]:
                    out.append(",")
                first[-1] = False
            if event in _OPEN:
                out.append("{" if event == "start_map" else "[")
                first.append(True)
                is_map.append(event == "start_map")
            else:
                out.append(_scalar_text(event, value))
        return "".join(out)


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    if text.startswith("b'") or text.startswith('b"'):
        text = text[2:]
    line = text.splitlines()[0] if text else type(e).__name__
    return line.replace("parse error: ", "").replace("lexical error: ", "").rstrip(".")
