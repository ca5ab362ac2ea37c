"""A corpus of broken variants of real traces, each with what ingest must do with it.

Every expectation is computed here with the standard `json` module (event boundaries with
`raw_decode`), never from traceduck. A variant expects either a clean ingest (`warnings` that
must appear with these counts, `names` that must be among the events' names, `event_count`)
or a one-line error (`error`: the exact message, or `error_prefix`).
"""

from __future__ import annotations

import gzip
import json
import random
from dataclasses import dataclass, field
from pathlib import Path

# Warning kinds, spelled out independently of the code (tests fail if the code renames them).
UNESCAPED_QUOTE = "string with an unescaped quote (repaired)"
INVALID_ESCAPE = "string with an invalid backslash escape (kept as a backslash)"
CONTROL_CHAR = "string with raw control characters (escaped)"
INVALID_UTF8 = "invalid UTF-8 sequence (replaced with U+FFFD)"
NAN = "NaN or Infinity (not JSON)"
BIG_INT = "integer beyond int64 (kept as text)"
DEEP = "value nested deeper than 200 levels (kept as JSON text)"
LONG_NAME = "name longer than 65,536 bytes"
OVERLAP = "partially overlapping event pairs"
TRAILING_COMMA = "trailing comma before ] or } (ignored)"
NO_EVENTS = "traceEvents holds no events"


def skipped_items(positions: list[int]) -> str:
    """The warning key for traceEvents items that are not objects (the first 20 positions listed)."""
    more = " (the first 20)" if len(positions) > 20 else ""
    return f"traceEvents items that are not objects (skipped), at positions {', '.join(map(str, positions[:20]))}{more}"

SMALL = "public/pytorch__kineto/docs/traces/before_fix_trace.json"
SMALL_GZ = "cpu/train.json.gz"


@dataclass
class Variant:
    name: str
    file: str  # file name to write (its suffix matters: .json or .json.gz)
    data: bytes | None  # None: a directory (see `files`)
    warnings: dict[str, int] = field(default_factory=dict)  # expected counts, on top of the base trace's
    names: list[str] = field(default_factory=list)  # event names that must be present
    event_count: int | None = None
    error: str | None = None  # exact message, with {path} for the file's path
    error_prefix: str | None = None
    salvage_count: int | None = None  # with --salvage: this many events kept (None: salvage fails too)
    files: dict[str, bytes] = field(default_factory=dict)  # for a directory variant
    objects: list[dict] | None = None  # lenient variants: the events expected, in file order
    fast: bool = True  # lenient variants: the fast chunked reader reads it without the streaming parser

    def renamed(self, file: str) -> Variant:
        self.file = file
        return self

    @property
    def fails(self) -> bool:
        return self.error is not None or self.error_prefix is not None


def event_ends(text: bytes) -> tuple[int, list[int]]:
    """(offset just after the traceEvents `[`, the offset just after each event's closing `}`)."""
    s = text.decode("utf-8")
    assert s.isascii()
    dec = json.JSONDecoder()
    start = s.index("[", s.index('"traceEvents"')) + 1
    ends = []
    pos = start
    while True:
        while s[pos] in " \t\r\n,":
            pos += 1
        if s[pos] == "]":
            return start, ends
        _, pos = dec.raw_decode(s, pos)
        ends.append(pos)


def complete_before(ends: list[int], cut: int) -> int:
    return sum(1 for e in ends if e <= cut)


def truncations(base: bytes) -> list[Variant]:
    """The trace cut at many offsets: evenly spread, inside strings and numbers, at event edges."""
    start, ends = event_ends(base)
    offsets = {len(base) * k // 23 for k in range(1, 23)}
    name_at = base.index(b'"name": "', start) + len(b'"name": "') + 3  # inside a string
    ts_at = base.index(b'"ts": ', start) + len(b'"ts": ') + 4  # inside a number
    offsets |= {1, start - 5, start, name_at, ts_at, ends[3], ends[3] + 1, ends[-1], ends[-1] + 4, len(base) - 2}
    out = []
    for cut in sorted(offsets):
        k = complete_before(ends, cut)
        text = base[:cut]
        if not text.strip():
            continue
        hint = (f"Re-run with --salvage to keep the {k:,} complete events" if k and cut >= start else
                "No complete event comes before it, so there is nothing to salvage")
        out.append(Variant(f"truncated-at-{cut}", "trace.json", text,
                           error=f"{{path}}: the trace is truncated (it ends at byte {cut:,}, after {k:,} complete events). {hint}.",
                           salvage_count=k if k and cut >= start else None))
    return out


# Values whose text a cut can end inside of, and where to cut each: after the text before `|`.
CUT_VALUES = b'[-5, 1e5, 1.5e-3, 2.0, "\\u00e9x", true, null, false, NaN, -Infinity]'
CUTS_INSIDE = ["[-", "1e", "1.5e-", "2.", '"\\u0', '"\\u00e9', "tru", "nul", "fals", "Na", "-Inf"]


def truncations_inside_values(doc: dict) -> list[Variant]:
    """The trace cut inside a number, a literal or an escape (after a minus sign, inside `1e`, a
    `\\u` escape, `tru`, ...): a truncation like any other, not "invalid JSON"."""
    i = next(k for k, e in enumerate(doc["traceEvents"]) if e.get("ph") == "X" and "args" in e)
    event = doc["traceEvents"][i]
    text = _dump(_with_event(doc, i, {**event, "args": {**event["args"], "cut": "@@V@@"}}), {"V": CUT_VALUES})
    start, ends = event_ends(text)
    at = text.index(CUT_VALUES)
    out = []
    for inside in CUTS_INSIDE:
        cut = at + CUT_VALUES.index(inside.encode()) + len(inside)
        k = complete_before(ends, cut)
        out.append(Variant(f"truncated-inside-{inside}", "trace.json", text[:cut],
                           error=f"{{path}}: the trace is truncated (it ends at byte {cut:,}, after {k:,} complete "
                                 f"events). Re-run with --salvage to keep the {k:,} complete events.",
                           salvage_count=k))
    return out


def _with_event(doc: dict, index: int, event: dict) -> dict:
    events = list(doc["traceEvents"])
    events[index] = event
    return {**doc, "traceEvents": events}


def _dump(doc: dict, raw: dict[str, bytes] | None = None) -> bytes:
    """Kineto-like text (one key per line), with "@@KEY@@" placeholders replaced by raw bytes."""
    text = json.dumps(doc, indent=2).encode()
    for key, value in (raw or {}).items():
        text = text.replace(json.dumps(f"@@{key}@@").encode(), value)
    return text


def lexical(doc: dict) -> list[Variant]:
    """Damage real exporters produce, each in one event's name."""
    i = next(k for k, e in enumerate(doc["traceEvents"]) if e.get("ph") == "X")
    named = _with_event(doc, i, {**doc["traceEvents"][i], "name": "@@N@@"})
    bad_utf8 = b"bad \xff\xfe utf8 \xc3"
    return [
        Variant("unescaped-quote", "trace.json", _dump(named, {"N": b'"a "quoted" name"'}),
                warnings={UNESCAPED_QUOTE: 1}, names=['a "quoted" name']),
        Variant("unescaped-quote-at-ends", "trace.json", _dump(named, {"N": b'""x" y""'}),
                warnings={UNESCAPED_QUOTE: 1}, names=['"x" y"']),
        Variant("invalid-escape", "trace.json", _dump(named, {"N": b'"C:\\Users\\x\\q.py"'}),
                warnings={INVALID_ESCAPE: 1}, names=["C:\\Users\\x\\q.py"]),
        Variant("control-chars", "trace.json", _dump(named, {"N": b'"tab\there\x01bell"'}),
                warnings={CONTROL_CHAR: 1}, names=["tab\there\x01bell"]),
        Variant("invalid-utf8", "trace.json", _dump(named, {"N": b'"' + bad_utf8 + b'"'}),
                warnings={INVALID_UTF8: len(bad_utf8.decode(errors="replace").split("\ufffd")) - 1},
                names=[bad_utf8.decode(errors="replace")]),
        Variant("all-at-once", "trace.json", _dump(named, {"N": b'"say "hi" C:\\dir \xff\x02"'}),
                warnings={UNESCAPED_QUOTE: 1, INVALID_ESCAPE: 1, CONTROL_CHAR: 1, INVALID_UTF8: 1},
                names=['say "hi" C:\\dir \ufffd\x02']),
        # A quote followed by `,` may end the string: which one is meant cannot be told.
        Variant("ambiguous-quote", "trace.json", _dump(named, {"N": b'"a", "b"'}),
                error_prefix="{path}: invalid JSON, ", salvage_count=i),
        # A repaired string that runs into a newline: its end cannot be told either.
        Variant("quote-then-newline", "trace.json", _dump(named, {"N": b'"a "b\n'}),
                error_prefix="{path}: invalid JSON, a quote inside a string that cannot be told from its end (at byte ",
                salvage_count=i),
    ]


def types(doc: dict) -> list[Variant]:
    """Recoverable oddities: wrong types, unknown phases and categories, missing fields, ..."""
    events = doc["traceEvents"]
    i = next(k for k, e in enumerate(events) if e.get("ph") == "X" and "args" in e)
    e = events[i]

    def one(name: str, event: dict, warnings: dict, names: list[str] | None = None, raw=None) -> Variant:
        return Variant(name, "trace.json", _dump(_with_event(doc, i, event), raw), warnings=warnings,
                       names=names or [], event_count=len(events))

    no_ts = {k: v for k, v in e.items() if k != "ts"}
    no_dur = {k: v for k, v in e.items() if k != "dur"}
    return [
        one("ts-is-text", {**e, "ts": "yesterday"}, {"unexpected type of ts": 1}),
        one("dur-is-list", {**e, "dur": [1, 2]}, {"unexpected type of dur": 1}),
        one("pid-is-object", {**e, "pid": {"a": 1}}, {"unexpected type of pid": 1}),
        one("name-is-number", {**e, "name": 42}, {"unexpected type of name": 1}, names=["42"]),
        one("args-is-list", {**e, "args": [1, 2]}, {"unexpected type of args": 1}),
        one("unknown-phase", {**e, "ph": "Z"}, {"unknown phase (ph)": 1}),
        one("unknown-category", {**e, "cat": "made_up_category"}, {"unknown category (cat)": 1}),
        one("missing-ts", no_ts, {"event without ts (not metadata)": 1}),
        one("missing-dur", no_dur, {"complete event (X) without dur": 1}),
        one("missing-args", {k: v for k, v in e.items() if k != "args"}, {}),
        one("long-name", {**e, "name": "n" * 100_000}, {LONG_NAME: 1}, names=["n" * 100_000]),
        one("big-int-arg", {**e, "args": {**e["args"], "Comms Id": "@@BIG@@"}}, {BIG_INT: 1},
            raw={"BIG": str(2**70).encode()}),
        one("big-int-pid", {**e, "pid": "@@BIG@@"}, {}, raw={"BIG": str(2**70).encode()}),
        one("nan-arg", {**e, "args": {**e["args"], "ratio": "@@NAN@@"}}, {NAN: 1}, raw={"NAN": b"NaN"}),
        one("infinity-ts", {**e, "ts": "@@INF@@"}, {NAN: 1, "unexpected type of ts": 1}, raw={"INF": b"Infinity"}),
        one("deep-args", {**e, "args": {"deep": "@@DEEP@@"}}, {DEEP: 1}, raw={"DEEP": b"[" * 5000 + b"1" + b"]" * 5000}),
        # The last value wins, as in every JSON parser (not counted: the fast parser cannot see it).
        Variant("duplicate-key", "trace.json",
                _dump(_with_event(doc, i, {**e, "name": "@@DUP@@"}), {"DUP": b'"first", "name": "second"'}),
                names=["second"], event_count=len(events)),
        Variant("overlapping-pair", "trace.json",
                _dump({**doc, "traceEvents": events + [
                    {"ph": "X", "cat": "user_annotation", "name": "outer", "pid": 7, "tid": 7, "ts": 10.0, "dur": 10.0},
                    {"ph": "X", "cat": "user_annotation", "name": "inner", "pid": 7, "tid": 7, "ts": 15.0, "dur": 10.0}]}),
                warnings={OVERLAP: 1}, names=["outer", "inner"], event_count=len(events) + 2),
    ]


def _insert(text: bytes, at: int, what: bytes) -> bytes:
    return text[:at] + what + text[at:]


def _value_end(text: bytes, key: bytes, after: int = 0) -> int:
    """Offset just after the value of the first `key` at or after `after` (found with raw_decode)."""
    s = text.decode("utf-8")
    at = s.index(":", s.index(key.decode(), after)) + 1
    while s[at] in " \t\r\n":
        at += 1
    _, end = json.JSONDecoder().raw_decode(s, at)
    return end


def lenient(base: bytes) -> list[Variant]:
    """What trace viewers load although it is not strict JSON: trailing commas, and items of
    traceEvents that are not objects (skipped). Expectations from plain `json` on the text
    before the damage; positions of skipped items from `json` on the text after it."""
    doc = json.loads(base)
    events = doc["traceEvents"]
    start, ends = event_ends(base)
    k = next(j for j, e in enumerate(events) if isinstance(e.get("args"), dict) and e["args"])
    args_end = _value_end(base, b'"args"', ends[k - 1] if k else start)
    props_end = _value_end(base, b'"deviceProperties"')
    top_end = base.rstrip().rindex(b"}")
    array_text = json.dumps(events, indent=1).encode()

    def trailing(name: str, text: bytes, commas: int, **kw) -> Variant:
        return Variant(name, "trace.json", text, warnings={TRAILING_COMMA: commas}, event_count=len(events),
                       objects=events, **kw)

    # items that are not objects, where a writer could leave them: first, between two events, last
    odd = _insert(_insert(_insert(base, ends[-1], b',\n  [1, {"ph": "X"}], null'), ends[5], b', "x"'), start, b"3, ")
    odd_positions = [j for j, x in enumerate(json.loads(odd)["traceEvents"]) if not isinstance(x, dict)]
    middle = _insert(base, ends[5], b', "x", 7.5')
    middle_positions = [j for j, x in enumerate(json.loads(middle)["traceEvents"]) if not isinstance(x, dict)]
    after_last = _insert(base, ends[-1], b",")
    return [
        trailing("trailing-comma-after-last-event", after_last, 1),
        trailing("trailing-comma-after-last-event-gz", gzip.compress(after_last), 1).renamed("trace.json.gz"),
        trailing("trailing-comma-in-args", _insert(base, args_end - 1, b", "), 1),
        trailing("trailing-comma-in-header", _insert(base, props_end - 1, b",\n"), 1),
        trailing("trailing-comma-at-top-level", _insert(base, top_end, b",\n"), 1),
        trailing("trailing-comma-everywhere", _insert(_insert(_insert(after_last, top_end + 1, b","), args_end - 1, b","),
                                                      props_end - 1, b","), 4),
        trailing("trailing-comma-array-format", array_text[:-1] + b",\n]", 1),
        Variant("non-object-items-between-events", "trace.json", middle, warnings={skipped_items(middle_positions): 2},
                event_count=len(events), objects=events),
        # items after the last event are read by the fast reader too (it parses the tail item by item)
        Variant("non-object-items-first-between-last", "trace.json", odd, warnings={skipped_items(odd_positions): 4},
                event_count=len(events), objects=events),
        Variant("non-object-items-gz", "trace.json.gz", gzip.compress(middle),
                warnings={skipped_items(middle_positions): 2}, event_count=len(events), objects=events),
        Variant("non-object-items-and-trailing-comma", "trace.json", _insert(middle, ends[-1] + len(b', "x", 7.5'), b","),
                warnings={skipped_items(middle_positions): 2, TRAILING_COMMA: 1}, event_count=len(events),
                objects=events),
        Variant("many-non-object-items", "trace.json", _insert(base, ends[0], b", 0" * 25),
                warnings={skipped_items(list(range(1, 26))): 25}, event_count=len(events), objects=events),
        Variant("empty-events", "trace.json", b'{"traceEvents": []}', warnings={NO_EVENTS: 1}, event_count=0, objects=[]),
        Variant("empty-events-with-keys", "trace.json", b'{"schemaVersion": 1, "traceEvents": [\n], "traceName": "x"}',
                warnings={NO_EVENTS: 1}, event_count=0, objects=[]),
        Variant("empty-array", "trace.json", b"[]", warnings={NO_EVENTS: 1}, event_count=0, objects=[]),
        Variant("empty-events-gz", "trace.json.gz", gzip.compress(b'{"traceEvents": []}'), warnings={NO_EVENTS: 1},
                event_count=0, objects=[]),
    ]


def not_traces() -> list[Variant]:
    rng = random.Random(7)
    hint = "A PyTorch profiler trace is a JSON object with a traceEvents list"
    binary = b"\x89PNG\r\n\x1a\n" + bytes(rng.randrange(256) for _ in range(2000))
    return [
        Variant("empty", "trace.json", b"", error="{path}: the file is empty. Give a Chrome trace (.json or .json.gz)."),
        Variant("empty-object", "trace.json", b"{}", error=f"{{path}}: not a trace (no traceEvents key). {hint}."),
        Variant("array-of-numbers", "trace.json", b"[1, 2, 3]",
                error=f"{{path}}: not a trace (none of the 3 items of traceEvents is an object). {hint} of objects."),
        Variant("events-of-strings", "trace.json", b'{"traceEvents": ["a", "b"]}',
                error=f"{{path}}: not a trace (none of the 2 items of traceEvents is an object). {hint} of objects."),
        # objects, but none with ph, or name and ts: JSON of another kind
        Variant("array-of-objects-not-events", "trace.json", b'[{"a": 1}, {"b": 2}]',
                error=f"{{path}}: not a trace (none of the 2 items of traceEvents is an event; an event has ph, or name "
                      f"and ts). {hint} of events."),
        Variant("one-object-not-an-event", "trace.json", b'{"traceEvents": [{"name": "x", "dur": 1}]}',
                error=f"{{path}}: not a trace (the one item of traceEvents is not an event; an event has ph, or name "
                      f"and ts). {hint} of events."),
        Variant("binary", "trace.json", binary,
                error=f"{{path}}: not JSON (starts with {binary[:12]!r}). Give a Chrome trace (.json or .json.gz)."),
    ]


def gzips(gz: bytes) -> list[Variant]:
    """A truncated and a corrupt .json.gz."""
    text = gzip.decompress(gz)
    start, ends = event_ends(text)
    # Cut the compressed stream; what it decompresses to is found with zlib's own reader.
    cut_gz = gz[: len(gz) * 2 // 3]
    import zlib
    got = zlib.decompressobj(31).decompress(cut_gz)
    k = complete_before(ends, len(got))
    corrupt = bytearray(gz)
    corrupt[len(gz) // 2] ^= 0xFF
    return [
        Variant("gz-truncated", "trace.json.gz", cut_gz,
                error=f"{{path}}: the gzip stream ends early (it ends at byte {len(got):,} of the decompressed text, "
                      f"after {k:,} complete events). Re-run with --salvage to keep the {k:,} complete events.",
                salvage_count=k),
        Variant("gz-without-trailer", "trace.json.gz", gz[:-4],
                error=f"{{path}}: the gzip stream ends early (after its JSON text, at byte {len(text):,} of the "
                      f"decompressed text, after {len(ends):,} complete events). Re-run with --salvage to keep the "
                      f"{len(ends):,} complete events.", salvage_count=len(ends)),
        Variant("gz-corrupt", "trace.json.gz", bytes(corrupt), error_prefix="{path}: corrupt gzip data near byte "),
    ]


def corpus(shared: Path) -> list[Variant]:
    base = (shared / SMALL).read_bytes()
    doc = json.loads(base)
    gz = (shared / SMALL_GZ).read_bytes()
    good = base
    directory = Variant("directory-with-one-bad-file", "dir", None,
                        error_prefix="1 of 3 files failed (2 ingested); first: {path}/b.json: the trace is truncated",
                        files={"a.json": good, "b.json": base[: len(base) // 2], "c.json.gz": gz})
    return truncations(base) + truncations_inside_values(doc) + lexical(doc) + types(doc) + lenient(base) + not_traces() + gzips(gz) + [directory]


def write(variant: Variant, where: Path) -> Path:
    """Write a variant under `where`; returns the path to ingest."""
    path = where / variant.file
    if variant.data is None:
        path.mkdir(parents=True, exist_ok=True)
        for name, data in variant.files.items():
            (path / name).write_bytes(data)
    else:
        path.write_bytes(variant.data)
    return path
