"""Reading a trace file: plain or gzip, the top-level keys, and the events split into chunks.

The events array is cut into chunks of whole events at a `}` `,` `{` boundary found by a
cheap search. A cut inside a string or inside an event's args makes the chunk before it fail
to parse as `[chunk]`, so a chunk that parses proves its boundaries were right; when one does
not, the ingester falls back to the streaming parser (`iter_events_streaming`).
"""

from __future__ import annotations

import json
import re
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from ..errors import InputError, NotATrace
from .repair import TRAILING_COMMA, Fault, repair_text

BLOCK = 8 << 20
# Top-level keys before traceEvents are scanned token by token up to this much text (profiler
# traces have a few KB there); past it, only the key's text is looked for (files that are not
# traces, such as execution traces, can be gigabytes of nested JSON).
HEADER_SCAN = 8 << 20
PEEK = 64 << 10  # what `sniff` reads
_EVENTS_KEY = b'"traceEvents"'
_SPLIT = re.compile(rb"\}\s*,\s*\{")
_STRUCT = re.compile(rb'["{}\[\]]')
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_WS = b" \t\r\n"
# No event of a profiler trace comes near this; one that does is refused with one line, as
# parsing and storing it would take several times its size in memory.
MAX_EVENT_BYTES = 32 << 20
_WS_TEXT = re.compile(r"[ \t\r\n]*")
_DECODER = json.JSONDecoder()
# How far back from the end of the text already searched a `}, {` cut is looked for again (its
# blanks may straddle a read); longer runs of blanks only make a chunk longer.
_SPLIT_REACH = 64


def too_large(source: RawSource, offset: int, exact: bool = True) -> InputError:
    """The error for an event of more than MAX_EVENT_BYTES starting at (or near) `offset` of the text."""
    of = " of the decompressed text" if source.is_gzip else ""
    at = "at" if exact else "near"
    return InputError(f"{source.path}: an event larger than {MAX_EVENT_BYTES >> 20} MB {at} byte {offset:,}{of}",
                      "Profiler events are a few KB; remove or shorten this one")


class NotParseable(Exception):
    """The fast splitter cannot handle this file; use the streaming parser."""


@dataclass
class TraceLayout:
    """Top-level structure of a trace file."""

    trace_format: str  # "object" or "array"
    header: dict = field(default_factory=dict)  # top-level keys before traceEvents
    trailer: dict = field(default_factory=dict)  # top-level keys after traceEvents
    warnings: Counter = field(default_factory=Counter)  # what reading the top level repaired

    @property
    def metadata(self) -> dict:
        return {**self.header, **self.trailer}

    @property
    def events_key_index(self) -> int:
        return len(self.header)


class RawSource:
    """A trace file opened for reading, decompressed if gzip; counts bytes read.

    Gzip is decompressed with zlib directly, so a stream that ends early gives every byte
    before the cut (and sets `ended_early`) instead of failing, and the CRC of each member is
    checked by zlib when that member ends: a corrupt file fails before the last byte is handed
    out, so before anything is published.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.raw: BinaryIO = open(path, "rb")
        except FileNotFoundError:
            raise InputError(f"{path}: no such file", "Check the path") from None
        except IsADirectoryError:
            raise InputError(f"{path}: is a directory") from None
        except OSError as e:
            raise InputError(f"{path}: cannot read ({e.strerror})") from None
        magic = self.raw.read(2)
        self.raw.seek(0)
        self.is_gzip = magic == b"\x1f\x8b"
        self._z = zlib.decompressobj(31) if self.is_gzip else None
        self.offset = 0  # bytes of (decompressed) text handed out so far
        self.ended_early = False  # the gzip stream stopped before its end marker

    @property
    def raw_bytes_read(self) -> int:
        return self.raw.tell()

    def read(self, n: int = BLOCK) -> bytes:
        data = self.raw.read(n) if self._z is None else self._inflate(n)
        self.offset += len(data)
        return data

    def _inflate(self, n: int) -> bytes:
        out: list[bytes] = []
        have = 0
        z = self._z
        while have < n:
            if z.eof:  # end of a member: another member, zero padding, or the end
                data = z.unused_data or self.raw.read(BLOCK)
                while data and not data.strip(b"\x00"):
                    data = self.raw.read(BLOCK)
                if not data:
                    break
                z = self._z = zlib.decompressobj(31)
            elif z.unconsumed_tail:
                data = z.unconsumed_tail
            else:
                data = self.raw.read(BLOCK)
                if not data:
                    self.ended_early = True
                    break
            try:
                piece = z.decompress(data, n - have)
            except zlib.error as e:
                raise InputError(f"{self.path}: corrupt gzip data near byte {self.raw.tell():,} of the file ({e})",
                                 "Re-copy the file; it cannot be read past this point") from None
            out.append(piece)
            have += len(piece)
        return b"".join(out)

    def close(self) -> None:
        self.raw.close()

    def __enter__(self) -> RawSource:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _skip_ws(buf: bytes, pos: int) -> int:
    n = len(buf)
    while pos < n and buf[pos] in _WS:
        pos += 1
    return pos


def _find_events_start(buf: bytes) -> tuple[int, int] | None:
    """In a buffer starting at the top-level `{`: (start of the "traceEvents" key, position
    after its `[`). None when more data is needed. Raises NotATrace-style InputError."""
    depth = 0
    pos = 0
    n = len(buf)
    while True:
        m = _STRUCT.search(buf, pos)
        if m is None:
            return None
        c = buf[m.start()]
        if c == 0x22:  # '"'
            s = _STRING.match(buf, m.start())
            if s is None:
                return None
            end = s.end()
            if depth == 1:
                after = _skip_ws(buf, end)
                if after >= n:
                    return None
                if buf[after] == 0x3A and s.group() == b'"traceEvents"':  # ':'
                    val = _skip_ws(buf, after + 1)
                    if val >= n:
                        return None
                    if buf[val] != 0x5B:  # '['
                        raise ValueError("traceEvents is not a list")
                    return m.start(), val + 1
            pos = end
            continue
        if c in (0x7B, 0x5B):
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                raise ValueError("no traceEvents key")
        pos = m.start() + 1


def _loads_lenient(text: bytes, warnings: Counter) -> object:
    """A small piece of top-level JSON (header, trailer); lexical damage and trailing commas
    are repaired as the streaming parser would, and counted."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    except RecursionError:  # nested too deep for json: the streaming parser keeps it as text
        raise NotParseable("top-level keys") from None
    try:
        fixed, found = repair_text(text)
        value = json.loads(fixed)
    except (Fault, ValueError, RecursionError):
        raise NotParseable("top-level keys") from None
    warnings.update(found)
    return value


def _parse_header(text: bytes, warnings: Counter) -> dict:
    text = text.rstrip()
    if text.endswith(b","):  # the comma before the "traceEvents" key
        text = text[:-1]
    value = _loads_lenient(text + b"}", warnings)
    if not isinstance(value, dict):
        raise NotParseable("header")
    return value


class ChunkedEvents:
    """Splits the traceEvents array of a source into chunks of whole events (raw JSON text)."""

    def __init__(self, source: RawSource, block: int | None = None) -> None:
        self.source = source
        self.block = block or BLOCK
        self.layout: TraceLayout | None = None
        self._buf = b""

    def open(self) -> TraceLayout:
        """Read up to the first event and return the layout (header known, trailer not yet)."""
        buf = b""
        while True:
            data = self.source.read(self.block)
            buf += data
            start = _skip_ws(buf, 0)
            if buf[start:start + 3] == b"\xef\xbb\xbf":
                start = _skip_ws(buf, start + 3)
            if start >= len(buf):
                if not data:
                    raise InputError(f"{self.source.path}: the file is empty", "Give a Chrome trace (.json or .json.gz)")
                continue
            first = buf[start]
            if first == 0x5B:  # '[': legacy top-level array
                self.layout = TraceLayout("array")
                self._buf = buf[start + 1:]
                return self.layout
            if first != 0x7B:
                raise InputError(
                    f"{self.source.path}: not JSON (starts with {bytes(buf[start:start + 12])!r})",
                    "Give a Chrome trace (.json or .json.gz)",
                )
            try:
                found = _find_events_start(buf[start:])
            except ValueError as e:
                raise NotATrace(self.source.path, str(e)) from None
            if found is None:
                if not data:  # truncated or damaged before traceEvents: the streaming parser says which
                    raise NotParseable("no traceEvents list before the end of the file")
                if len(buf) - start >= HEADER_SCAN:
                    self._hunt(buf)
                continue
            key_start, events_start = found
            warnings: Counter = Counter()
            try:
                header = _parse_header(buf[start:start + key_start], warnings)
            except (ValueError, NotParseable):
                raise NotParseable("header") from None
            self.layout = TraceLayout("object", header=header, warnings=warnings)
            self._buf = buf[start + events_start:]
            return self.layout

    def _hunt(self, buf: bytes) -> None:
        """After a long header: read on for the traceEvents key's text. Never there: not a
        trace. There (a trace with a big header, or the text inside a value): the streaming
        parser, which reads any layout."""
        tail = b""
        while True:
            if _EVENTS_KEY in tail + buf:
                raise NotParseable("traceEvents after a large header")
            tail = buf[-len(_EVENTS_KEY):]
            buf = self.source.read(self.block)
            if not buf:
                raise NotATrace(self.source.path, "no traceEvents key")

    def chunks(self) -> Iterator[bytes]:
        """Yield event text chunks (each parses as a JSON array when wrapped in brackets)."""
        assert self.layout is not None
        # A bytearray grows in place and drops a cut prefix without copying the rest, so one huge
        # event (no cut for hundreds of MB) costs each byte once, not once per read.
        buf = bytearray(self._buf)
        self._buf = b""
        floor = 0  # no cut starts before this: the text before it was searched already
        while True:
            data = self.source.read(self.block)
            buf += data
            # at the end too: _finish reads the items after the last cut strictly, one by one
            cut = self._last_split(buf, floor)
            if cut is not None:
                end, nxt = cut
                if floor:  # reads without a cut before this one: the first event is that long at least
                    first = _SPLIT.search(buf)
                    if first.start() > MAX_EVENT_BYTES:
                        raise too_large(self.source, self.source.offset - len(buf))
                with memoryview(buf) as view:  # one copy (a slice of the bytearray would be a second)
                    chunk = bytes(view[:end])
                yield chunk
                del buf[:nxt]
                floor = 0
            else:
                # a cut that straddles this end is found next time, unless its blanks are longer
                # than _SPLIT_REACH: then the chunk is merely longer
                floor = max(0, len(buf) - _SPLIT_REACH)
                if len(buf) > MAX_EVENT_BYTES:  # no cut: one event at least this long
                    raise too_large(self.source, self.source.offset - len(buf))
            if not data:
                break
        events, trailer = self._finish(bytes(buf), self.source.offset - len(buf))
        self.layout.trailer = trailer
        if events.strip():
            yield events

    @staticmethod
    def _last_split(buf: bytearray, floor: int = 0) -> tuple[int, int] | None:
        """(end of the events before, start of the events after) the last `}, {` at or after floor."""
        n = len(buf)
        window = 1 << 18
        lo = max(floor, n - window)
        while True:
            last = None
            for last in _SPLIT.finditer(buf, lo):
                pass
            if last is not None:
                return last.start() + 1, last.end() - 1
            if lo <= floor:
                return None
            lo = max(floor, lo - window * 8)

    def _finish(self, buf: bytes, offset: int) -> tuple[bytes, dict]:
        """Split the last buffer, found at `offset` of the text, into (remaining events text,
        trailer keys).

        The remaining items are read one by one from the start (trailers can hold `]` inside
        strings and lists, so the end is found by parsing forward, in time linear in the text);
        the array's `]` is the one after the last item. A trailing comma before that `]` (or
        before the object's closing `}`) is dropped and counted, as trace viewers accept it.
        Anything this cannot read (damage, values nested too deep) goes to the streaming parser.
        """
        assert self.layout is not None
        # surrogateescape: one character per invalid byte, so offsets map back; the events text
        # handed on is the original bytes, and its converter judges them
        text = buf.decode("utf-8", "surrogateescape")
        found: Counter = Counter()
        pos = _blanks(text, 0)
        last_end = 0  # after the last item, in characters
        if pos < len(text) and text[pos] != "]":
            while True:
                start = pos
                try:
                    _, pos = _DECODER.raw_decode(text, pos)
                except (ValueError, RecursionError):
                    raise NotParseable("end of traceEvents not found") from None
                if pos - start > MAX_EVENT_BYTES:  # characters: as many bytes at least
                    raise too_large(self.source, offset + len(text[:start].encode("utf-8", "surrogateescape")))
                last_end = pos
                pos = _blanks(text, pos)
                if pos < len(text) and text[pos] == ",":
                    pos = _blanks(text, pos + 1)
                    if pos < len(text) and text[pos] == "]":
                        found[TRAILING_COMMA] += 1
                        break
                    continue
                if pos < len(text) and text[pos] == "]":
                    break
                raise NotParseable("end of traceEvents not found")
        if pos >= len(text):
            raise NotParseable("end of traceEvents not found")
        # only blanks and a comma lie between the last item and `]`: one byte per character
        head_bytes = len(text[:last_end].encode("utf-8", "surrogateescape"))
        close = head_bytes + (pos - last_end)
        head = buf[:head_bytes]
        tail = buf[close + 1:].strip()
        if self.layout.trace_format == "array":
            if tail:
                raise NotParseable("text after the top-level array")
            trailer: object = {}
        elif tail == b"}":
            trailer = {}
        elif tail.startswith(b",") and tail.endswith(b"}"):
            rest = tail[1:].lstrip()
            if rest == b"}":
                found[TRAILING_COMMA] += 1
                trailer = {}
            else:
                trailer = _loads_lenient(b"{" + rest, found)
        else:
            raise NotParseable("end of the top-level object not found")
        if not isinstance(trailer, dict):
            raise NotParseable("top-level keys after traceEvents")
        self.layout.warnings.update(found)
        return head, trailer


def _blanks(text: str, pos: int) -> int:
    return _WS_TEXT.match(text, pos).end()


def sniff(path: Path, peek: int = PEEK) -> str | None:
    """Why a file is surely not a trace, judged from its first `peek` bytes (of the decompressed
    text); None when it may be one: a traceEvents key at the top level, a top-level array of
    objects, or too little seen to tell (ingest reads on and decides). Empty or damaged files are
    left to ingest, which says what is wrong with them."""
    with RawSource(path) as src:
        buf = src.read(peek)
    start = _skip_ws(buf, 0)
    if buf[start:start + 3] == b"\xef\xbb\xbf":
        start = _skip_ws(buf, start + 3)
    if start >= len(buf):
        return None
    if buf[start] == 0x5B:  # '['
        item = _skip_ws(buf, start + 1)
        if item >= len(buf) or buf[item] in b"{]":
            return None
        try:
            value, _ = json.JSONDecoder().raw_decode(buf[item:].decode("utf-8", "replace"))
            kind = type(value).__name__
        except ValueError:
            kind = {0x5B: "list", 0x22: "str"}.get(buf[item], "value")
        return f"traceEvents item 0 is a {kind}, not an object"
    if buf[start] != 0x7B:
        return None
    try:
        _find_events_start(buf[start:])
    except ValueError as e:
        return str(e)
    return None
