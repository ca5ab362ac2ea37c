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
# Trailers longer than this are parsed strictly: repairing every candidate end of the events
# array would cost a scan of the rest of the buffer each.
_LENIENT_TAIL = 1 << 20


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
    try:
        fixed, found = repair_text(text)
        value = json.loads(fixed)
    except (Fault, ValueError):
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
        buf = self._buf
        self._buf = b""
        while True:
            data = self.source.read(self.block)
            if not data:
                break
            buf += data
            cut = self._last_split(buf)
            if cut is not None:
                end, nxt = cut
                yield buf[:end]
                buf = buf[nxt:]
        events, trailer = self._finish(buf)
        self.layout.trailer = trailer
        if events.strip():
            yield events

    @staticmethod
    def _last_split(buf: bytes) -> tuple[int, int] | None:
        n = len(buf)
        window = 1 << 18
        lo = max(0, n - window)
        while True:
            last = None
            for last in _SPLIT.finditer(buf, lo):
                pass
            if last is not None:
                return last.start() + 1, last.end() - 1
            if lo == 0:
                return None
            lo = max(0, lo - window * 8)

    def _finish(self, buf: bytes) -> tuple[bytes, dict]:
        """Split the last buffer into (remaining events text, trailer keys).

        The array's closing `]` is the last `]` after an object whose tail parses as the rest of
        the top-level object and whose last item parses; trailers can hold `]` inside strings and
        lists. A trailing comma before that `]` (or before the object's closing `}`) is dropped
        and counted, as trace viewers accept it.
        """
        assert self.layout is not None
        pos = len(buf)
        for _ in range(10000):
            p = buf.rfind(b"]", 0, pos)
            if p < 0:
                break
            pos = p
            head = buf[:p].rstrip()
            found: Counter = Counter()
            if head.endswith(b","):
                head = head[:-1].rstrip()
                found[TRAILING_COMMA] += 1
            if head and not head.endswith(b"}"):
                continue  # the last item is not an object (rare): the streaming parser finds the end
            tail = buf[p + 1:].strip()
            if self.layout.trace_format == "array":
                if tail:
                    continue
                trailer: object = {}
            elif tail == b"}":
                trailer = {}
            elif tail.startswith(b",") and tail.endswith(b"}"):
                rest = tail[1:].lstrip()
                if rest == b"}":
                    found[TRAILING_COMMA] += 1
                    trailer = {}
                else:
                    try:
                        trailer = (_loads_lenient(b"{" + rest, found) if len(rest) < _LENIENT_TAIL
                                   else json.loads(b"{" + rest))
                    except (NotParseable, ValueError):
                        continue
            else:
                continue
            if isinstance(trailer, dict) and (not head or _parses(head[self._last_event_start(head):])):
                self.layout.warnings.update(found)
                return head, trailer
        raise NotParseable("end of traceEvents not found")

    @staticmethod
    def _last_event_start(text: bytes) -> int:
        last = None
        for last in _SPLIT.finditer(text, max(0, len(text) - (1 << 20))):
            pass
        return last.end() - 1 if last is not None else 0


def _parses(events_text: bytes) -> bool:
    try:
        json.loads(b"[" + events_text + b"]")
        return True
    except (ValueError, RecursionError):
        return False


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
