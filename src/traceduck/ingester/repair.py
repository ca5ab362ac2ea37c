"""Lexical repair of damaged JSON text, used only after a fast parse has failed.

Real exporters write names verbatim: an unescaped `"` inside a name, Windows paths with
invalid `\\` escapes, raw control characters and invalid UTF-8 all occur in real traces. Each is
repaired here where the intent is unambiguous, and counted:

- a `"` that is not followed by `,` `:` `}` or `]` (after blanks) cannot end a string, so it is
  part of it and gets escaped; the string then ends at the next `"` that can. A string repaired
  this way that runs into a raw newline is ambiguous and reported as a fault;
- a `\\` that starts no valid escape is a literal backslash;
- raw control characters in strings are escaped; lone UTF-16 surrogate escapes and invalid
  UTF-8 become U+FFFD;
- bare `NaN` / `Infinity` (not JSON) become the string `"NaN"` / numbers too large for a double;
- a comma before `]` or `}` (a trailing comma, which trace viewers accept) is dropped.

Clean text is matched by one regular expression per block, so repair costs one C-speed scan
plus Python work only at the damaged spots.
"""

from __future__ import annotations

import re
from collections import Counter

# Warning kinds (the keys of runs.warnings).
UNESCAPED_QUOTE = "string with an unescaped quote (repaired)"
INVALID_ESCAPE = "string with an invalid backslash escape (kept as a backslash)"
CONTROL_CHAR = "string with raw control characters (escaped)"
LONE_SURROGATE = "string with a lone UTF-16 surrogate escape (replaced with U+FFFD)"
INVALID_UTF8 = "invalid UTF-8 sequence (replaced with U+FFFD)"
NAN_OR_INFINITY = "NaN or Infinity (not JSON)"
TRAILING_COMMA = "trailing comma before ] or } (ignored)"

_VALID_ESCAPE = rb'\\["\\/bfnrt]|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u(?![dD][89a-fA-F])[0-9a-fA-F]{4}'
_BODY = re.compile(rb'(?:[^"\\\x00-\x1f]++|' + _VALID_ESCAPE + rb')*+')
# Runs of text with nothing to repair: strings whose closing quote is followed by what may
# follow a string, commas followed by something other than `]` `}`, and anything else outside
# strings but control characters, non-ASCII, N and I.
_CLEAN = re.compile(rb'(?:"(?:[^"\\\x00-\x1f]++|' + _VALID_ESCAPE + rb')*+"(?=[ \t\r\n]*+[,:}\]])'
                    rb'|[^",\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\xffNI]++|,(?=[ \t\r\n]*+[^ \t\r\n}\]]))*+')
_FOLLOW = re.compile(rb'[ \t\r\n]*+([,:}\]])?')
_BLANKS = re.compile(rb'[ \t\r\n]*+')
_CONSTANTS = {b"NaN": b'"NaN"', b"Infinity": b"1e999"}  # -Infinity: the '-' is copied as is
_REPLACEMENT = "\ufffd".encode()


class Fault(Exception):
    """Damage that cannot be repaired unambiguously, at a byte offset of the input."""

    def __init__(self, offset: int, what: str) -> None:
        super().__init__(offset, what)
        self.offset = offset
        self.what = what


class Repairer:
    """Repairs JSON text fed block by block; holds back a string or token cut by a block end."""

    def __init__(self) -> None:
        self.warnings: Counter = Counter()
        self.consumed = 0  # input bytes turned into output so far
        self.fault: Fault | None = None  # damage that stopped the repair; nothing after it is output
        self._carry = b""

    def feed(self, data: bytes, final: bool = False) -> bytes:
        """Repaired text for the input so far, except a trailing piece that needs more input;
        after a fault, the text before it (and `fault` is set)."""
        if self.fault is not None:
            return b""
        buf = self._carry + data if self._carry else data
        base = self.consumed
        out: list[bytes] = []
        pos = 0
        n = len(buf)
        while True:
            end = _CLEAN.match(buf, pos).end()
            if end > pos:
                out.append(buf[pos:end])
                pos = end
            if pos >= n:
                break
            c = buf[pos]
            try:
                if c == 0x22:  # '"'
                    got = self._string(buf, pos, base, final)
                elif c in b"NI":
                    got = self._constant(buf, pos, base, final)
                elif c == 0x2C:  # ',' before `]` `}` or before the end of the block
                    got = self._comma(buf, pos, final)
                else:
                    raise Fault(base + pos, "a control character outside a string" if c < 0x20 else
                                f"an unexpected byte 0x{c:02x} outside a string")
            except Fault as e:
                self.fault = e
                break
            if got is None:  # cut by the end of the block: wait for more input
                break
            out.append(got[0])
            pos = got[1]
        self._carry = buf[pos:]
        self.consumed = base + pos
        text = b"".join(out)
        try:
            text.decode()
        except UnicodeDecodeError:
            fixed = text.decode(errors="replace").encode()
            self.warnings[INVALID_UTF8] += fixed.count(_REPLACEMENT) - text.count(_REPLACEMENT)
            text = fixed
        return text

    @property
    def pending(self) -> bytes:
        """Input held back at the end (an unterminated string or token when the input is over)."""
        return self._carry

    def _string(self, buf: bytes, start: int, base: int, final: bool) -> tuple[bytes, int] | None:
        parts = [b'"']
        p = start + 1
        n = len(buf)
        literal_quote = None
        warn: set[str] = set()
        while True:
            end = _BODY.match(buf, p).end()
            parts.append(buf[p:end])
            p = end
            if p >= n:
                return None  # unterminated here: more input, or a cut at the end of the input
            c = buf[p]
            if c == 0x22:
                f = _FOLLOW.match(buf, p + 1)
                if f.group(1) is not None or (f.end() >= n and final):
                    parts.append(b'"')
                    self.warnings.update(warn)  # strings repaired, by kind
                    return b"".join(parts), p + 1
                if f.end() >= n:
                    return None
                warn.add(UNESCAPED_QUOTE)
                if literal_quote is None:
                    literal_quote = p
                parts.append(b'\\"')
                p += 1
            elif c == 0x5C:  # backslash
                if not final and n - p < 12:
                    return None  # the escape may continue in the next block
                if buf[p + 1:p + 2] == b"u" and re.match(rb"u[0-9a-fA-F]{4}", buf[p + 1:p + 6]):
                    warn.add(LONE_SURROGATE)
                    parts.append(b"\\ufffd")
                    p += 6
                else:
                    warn.add(INVALID_ESCAPE)
                    parts.append(b"\\\\")
                    p += 1
            else:  # raw control character
                if c == 0x0A and literal_quote is not None:
                    raise Fault(base + literal_quote, "a quote inside a string that cannot be told from its end")
                warn.add(CONTROL_CHAR)
                parts.append(b"\\u%04x" % c)
                p += 1

    def _comma(self, buf: bytes, pos: int, final: bool) -> tuple[bytes, int] | None:
        if _BLANKS.match(buf, pos + 1).end() >= len(buf):
            # what follows is in the next block; at the very end, the parser reports the cut
            return None if not final else (b",", pos + 1)
        self.warnings[TRAILING_COMMA] += 1
        return b"", pos + 1

    def _constant(self, buf: bytes, pos: int, base: int, final: bool) -> tuple[bytes, int] | None:
        for word, value in _CONSTANTS.items():
            if buf.startswith(word, pos):
                self.warnings[NAN_OR_INFINITY] += 1
                return value, pos + len(word)
            if word.startswith(buf[pos:pos + len(word)]) and pos + len(word) > len(buf):
                return None  # cut by the end of the block (more input), or of the text (a truncation)
        raise Fault(base + pos, "an unexpected character outside a string")


def repair_text(text: bytes) -> tuple[bytes, Counter]:
    """Repair a complete piece of JSON text; raises Fault when it cannot be repaired or when a
    string or token runs past its end."""
    r = Repairer()
    out = r.feed(text, final=True)
    if r.fault is not None:
        raise r.fault
    if r.pending:
        raise Fault(r.consumed, "a string or value that does not end")
    return out, r.warnings
