"""A seeded mutator of real traces for the fuzzer (test_fuzz.py).

`inputs(seed_files, count, seed)` yields `count` mutated trace files' bytes, each made from a small
window of a seed trace (its top-level metadata and a few hundred of its events) by one to three
mutations: structural ones on the parsed document (dropped or duplicated events and keys, duplicate
keys, huge, negative and non-finite numbers, numbers as strings and strings as numbers in one field,
nesting 10,000 deep) and textual ones on its bytes (bit and byte flips, cuts, duplicated or dropped
brackets and commas, invalid UTF-8, UTF-16 with or without a BOM, a UTF-8 BOM, gzip). Everything is
drawn from one `random.Random(seed)`, so a run of the fuzzer is reproducible, input by input.
"""

from __future__ import annotations

import copy
import gzip
import json
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

DEEP = 10_000
FIELDS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "args", "s", "bp", "flow_in", "flow_out")
NUMBERS = [b"1e308", b"-1e308", b"1e400", b"-1e400", b"NaN", b"Infinity", b"-Infinity", b"-1", b"-0", b"0",
           b"-9223372036854775809", b"9223372036854775808", b"18446744073709551616",
           b"123456789012345678901234567890", b"-123456789012345678901234567890.5", b"1e-400", b"4.9e-324",
           b"9007199254740993", b"-2147483649", b"1.7976931348623157e308", b"0.000001", b"1E+2", b"-0.0"]
NUMBER_VALUES = [1e308, -1e308, float("inf"), float("-inf"), float("nan"), -1, -0.0, 0, 2**63, -(2**63) - 1,
                 2**64, 10**30, -(10**30), 2**53 + 1, -(2**31) - 1, 5e-324, 1.5, -123.456]
BAD_UTF8 = [b"\xff", b"\xfe", b"\xc3", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"\x80",
            b"\xf0\x9f\x98", b"\x00"]


@dataclass
class Input:
    index: int
    base: str  # the seed file's name
    mutations: list[str]
    data: bytes
    suffix: str  # .json or .json.gz


def load_seed(path: Path) -> dict:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = json.loads(raw)
    return doc if isinstance(doc, dict) else {"traceEvents": doc}


def window(doc: dict, rng: random.Random) -> dict:
    """The seed's top-level keys and a window of its events: the metadata events (`ph` M) and a
    run of up to 400 consecutive others, so each input is small (tens of KB) and quick to ingest."""
    events = doc.get("traceEvents", [])
    meta = [e for e in events if isinstance(e, dict) and e.get("ph") == "M"]
    rest = [e for e in events if not (isinstance(e, dict) and e.get("ph") == "M")]
    n = rng.choice([1, 5, 40, 150, 400])
    start = rng.randrange(max(1, len(rest) - n + 1))
    out = {k: v for k, v in doc.items() if k != "traceEvents"}
    out["traceEvents"] = copy.deepcopy(meta + rest[start:start + n])
    return out


# -- structural mutations (on the parsed document) ------------------------------------------------

def _events(doc: dict) -> list:
    """The events' list (a throwaway one when a mutation made traceEvents something else)."""
    ev = doc.get("traceEvents")
    return ev if isinstance(ev, list) else []


def _some_event(doc: dict, rng: random.Random) -> dict | None:
    objs = [e for e in _events(doc) if isinstance(e, dict)]
    return rng.choice(objs) if objs else None


def drop_events(doc, rng):
    ev = _events(doc)
    for _ in range(rng.randint(1, max(1, len(ev) // 4))):
        if ev:
            ev.pop(rng.randrange(len(ev)))


def duplicate_events(doc, rng):
    ev = _events(doc)
    for _ in range(rng.randint(1, 20)):
        if ev:
            i = rng.randrange(len(ev))
            ev.insert(rng.randrange(len(ev) + 1), copy.deepcopy(ev[i]))


def shuffle_events(doc, rng):
    rng.shuffle(_events(doc))


def drop_key(doc, rng):
    key = rng.choice(FIELDS)
    for e in _events(doc):
        if isinstance(e, dict) and rng.random() < 0.5:
            e.pop(key, None)


def drop_top_key(doc, rng):
    keys = [k for k in doc if k != "traceEvents"]
    if keys:
        doc.pop(rng.choice(keys))


def wrong_type(doc, rng):
    """One field of every event as another JSON type: numbers as strings, strings as numbers, or
    null, true, a list, an object."""
    key = rng.choice(FIELDS)
    how = rng.choice(["swap", "swap", "null", "bool", "list", "object", "huge"])
    for e in _events(doc):
        if not isinstance(e, dict) or (key not in e and how != "huge"):
            continue
        v = e.get(key)
        if how == "swap":
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                e[key] = str(v)
            elif isinstance(v, str):
                e[key] = rng.choice([len(v), -len(v), 1.5, 10**20, 0])
            elif isinstance(v, dict):
                for k in list(v):
                    x = v[k]
                    v[k] = str(x) if isinstance(x, (int, float)) else (7 if isinstance(x, str) else x)
        elif how == "null":
            e[key] = None
        elif how == "bool":
            e[key] = rng.choice([True, False])
        elif how == "list":
            e[key] = [v, v]
        elif how == "object":
            e[key] = {"v": v}
        else:
            e[key] = rng.choice(NUMBER_VALUES)


def odd_numbers(doc, rng):
    """Huge, negative, non-finite and tiny numbers in place of some numeric fields."""
    for _ in range(rng.randint(1, 10)):
        e = _some_event(doc, rng)
        if e is None:
            return
        key = rng.choice(["ts", "dur", "pid", "tid", "id", "ts", "dur"])
        e[key] = rng.choice(NUMBER_VALUES)
        if isinstance(e.get("args"), dict) and e["args"] and rng.random() < 0.5:
            e["args"][rng.choice(list(e["args"]))] = rng.choice(NUMBER_VALUES)


def odd_phase(doc, rng):
    for _ in range(rng.randint(1, 10)):
        e = _some_event(doc, rng)
        if e is not None:
            e["ph"] = rng.choice(["B", "E", "i", "I", "s", "t", "f", "C", "M", "b", "e", "n", "P", "O", "N", "D",
                                  "Z", "", "XX", "\u00e9", "X"])


def odd_strings(doc, rng):
    for _ in range(rng.randint(1, 5)):
        e = _some_event(doc, rng)
        if e is not None:
            key = rng.choice(["name", "cat", "ph", "tid", "pid"])
            e[key] = rng.choice(["", "\u0000", "a\"b", "\\", "\ud800", "x" * 70_000, "'; DROP TABLE events; --",
                                 "ProfilerStep#", "ProfilerStep#-1", "ProfilerStep#99999999999999999999",
                                 "\u202e\u0301", "cuda", "Kernel", "gpu_memcpy", "ac2g", "\n"])


def deep_nesting(doc, rng):
    """A value nested 10,000 deep (lists, objects or both) in an event's args, as an event's key,
    as its name, as an item of traceEvents, or at the top level (written in by `serialize`)."""
    where = rng.choice(["args", "event", "item", "top", "name"])
    kind = rng.choice(["list", "object", "mixed"])
    deep = f"@@DEEP-{kind}@@"
    e = _some_event(doc, rng)
    if where == "args" and e is not None:
        if not isinstance(e.get("args"), dict):
            e["args"] = {}
        e["args"]["deep"] = deep
    elif where == "event" and e is not None:
        e["extra"] = deep
    elif where == "name" and e is not None:
        e["name"] = deep
    elif where == "item":
        _events(doc).insert(rng.randrange(len(_events(doc)) + 1), deep)
    else:
        doc["deep"] = deep


def _deep(kind: str) -> bytes:
    if kind == "list":
        return b"[" * DEEP + b"]" * DEEP
    if kind == "object":
        return b'{"a": ' * DEEP + b"1" + b"}" * DEEP
    return b'[{"a": ' * (DEEP // 2) + b"[]" + b"}]" * (DEEP // 2)


def non_objects(doc, rng):
    ev = _events(doc)
    for _ in range(rng.randint(1, 5)):
        ev.insert(rng.randrange(len(ev) + 1), rng.choice([None, 1, "x", [], [1, 2], True, 1.5]))


def odd_top(doc, rng):
    how = rng.choice(["list", "null", "string", "object", "empty", "array-top", "two"])
    if how == "list":
        doc["traceEvents"] = [_events(doc)]
    elif how == "null":
        doc["traceEvents"] = None
    elif how == "string":
        doc["traceEvents"] = "events"
    elif how == "object":
        doc["traceEvents"] = {"0": _events(doc)[:1]}
    elif how == "empty":
        doc["traceEvents"] = []
    elif how == "array-top":
        doc["__array__"] = True  # serialized as the bare list of events
    else:
        doc["traceEvents2"] = _events(doc)[:3]


def flows(doc, rng):
    """Flow and async events whose ids and binding points are odd."""
    ev = _events(doc)
    for _ in range(rng.randint(1, 10)):
        ev.insert(rng.randrange(len(ev) + 1),
                  {"ph": rng.choice("sftbeX"), "cat": rng.choice(["ac2g", "cpu_op", "kernel", "gpu_user_annotation"]),
                   "name": "flow", "id": rng.choice(NUMBER_VALUES + ["x", None]), "pid": rng.choice([0, 1, "1", -1]),
                   "tid": rng.choice([0, 1, "stream 7", -1]), "ts": rng.choice(NUMBER_VALUES[:9] + [0, 1, 2]),
                   "bp": rng.choice(["e", "s", 1]), "args": rng.choice([{}, None, 1, {"correlation": -1},
                                                                        {"External id": "x", "correlation": 10**30}])})


def odd_metadata(doc, rng):
    """Top-level metadata of odd values: the base time, schema version, distributed info, device
    properties (huge, negative, non-finite, of another type)."""
    for _ in range(rng.randint(1, 3)):
        key = rng.choice(["baseTimeNanoseconds", "schemaVersion", "distributedInfo", "deviceProperties", "traceName",
                          "displayTimeUnit"])
        value = rng.choice(NUMBER_VALUES + ["1", None, [], {}, {"rank": rng.choice(NUMBER_VALUES + ["0"])},
                                            {"backend": "nccl", "rank": 1, "world_size": rng.choice(NUMBER_VALUES)},
                                            [{"id": rng.choice(NUMBER_VALUES), "totalGlobalMem": rng.choice(NUMBER_VALUES)}]])
        if key == "deviceProperties" and isinstance(doc.get(key), list) and doc[key] and rng.random() < 0.5:
            entry = doc[key][0]
            if isinstance(entry, dict) and entry:
                entry[rng.choice(list(entry))] = rng.choice(NUMBER_VALUES + ["x"])
                continue
        doc[key] = value


STRUCTURAL: list[Callable] = [odd_metadata, odd_metadata, drop_events, duplicate_events, shuffle_events, drop_key, drop_top_key, wrong_type,
                              wrong_type, odd_numbers, odd_phase, odd_strings, deep_nesting, non_objects, odd_top,
                              flows]


def serialize(doc: dict) -> bytes:
    top = doc.pop("__array__", False)
    data = json.dumps(doc.get("traceEvents") if top else doc, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return re.sub(rb'"@@DEEP-(\w+)@@"', lambda m: _deep(m.group(1).decode()), data)


# -- textual mutations (on the bytes) ------------------------------------------------------------

def _positions(data: bytes, chars: bytes) -> list[int]:
    return [i for i, b in enumerate(data) if b in chars]


def bit_flips(data, rng):
    b = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if b:
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
    return bytes(b)


def byte_flips(data, rng):
    b = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if b:
            b[rng.randrange(len(b))] = rng.randrange(256)
    return bytes(b)


def cut(data, rng):
    return data[:rng.randrange(len(data) + 1)]


def _edit_chars(data, rng, chars: bytes, duplicate: bool):
    where = _positions(data, chars)
    if not where:
        return data
    b = bytearray(data)
    for i in sorted(rng.sample(where, min(len(where), rng.randint(1, 4))), reverse=True):
        if duplicate:
            b[i:i] = b[i:i + 1] * rng.randint(1, 3)
        else:
            del b[i]
    return bytes(b)


def dup_brackets(data, rng):
    return _edit_chars(data, rng, b"[]{}", True)


def drop_brackets(data, rng):
    return _edit_chars(data, rng, b"[]{}", False)


def dup_commas(data, rng):
    return _edit_chars(data, rng, b",", True)


def drop_commas(data, rng):
    return _edit_chars(data, rng, b",:", False)


def drop_quotes(data, rng):
    return _edit_chars(data, rng, b'"', rng.random() < 0.5)


_KEY = re.compile(rb'"(ts|dur|pid|tid|name|ph|cat|args|id)": ?("[^"\\]*"|-?[0-9.eE+]+|\{\}|null|true|false)')


def _edit_some(data, rng, pattern, most, edit):
    """`data` with between 1 and `most` of `pattern`'s matches (chosen by `rng`) each replaced by
    `edit(m)`: (start, end, bytes) of the span to write; the last match first, so spans stay put."""
    matches = list(pattern.finditer(data))
    if not matches:
        return data
    b = data
    for m in sorted(rng.sample(matches, min(len(matches), rng.randint(1, most))), key=lambda m: -m.start()):
        start, end, text = edit(m)
        b = b[:start] + text + b[end:]
    return b


def duplicate_keys(data, rng):
    """A key of some events written twice, the second time with another value (numbers as strings,
    strings as numbers)."""
    def again(m):
        other = rng.choice([b'"1"', b"1", b"-5", b"null", b'"X"', b"1e400", b"NaN", b"[]", b"{}", m.group(2)])
        return m.end(), m.end(), b', "' + m.group(1) + b'": ' + other

    return _edit_some(data, rng, _KEY, 20, again)


_NUMBER = re.compile(rb"(?<=[:\[,] )-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?|(?<=[:\[,])-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?")


def number_literals(data, rng):
    """Some numbers replaced by huge, negative, NaN and Infinity literals (text JSON cannot hold)."""
    return _edit_some(data, rng, _NUMBER, 30, lambda m: (m.start(), m.end(), rng.choice(NUMBERS)))


def numbers_as_strings(data, rng):
    return _edit_some(data, rng, _NUMBER, 50, lambda m: (m.start(), m.end(), b'"' + m.group(0) + b'"'))


_STRING = re.compile(rb'"[^"\\]{1,40}"')


def strings_as_numbers(data, rng):
    def number(m):
        inner = m.group(0)[1:-1]
        return m.start(), m.end(), inner if re.fullmatch(rb"-?[0-9.eE+]+", inner) else rng.choice(NUMBERS)

    return _edit_some(data, rng, _STRING, 50, number)


def invalid_utf8(data, rng):
    b = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        quotes = _positions(bytes(b), b'"')
        i = rng.choice(quotes) + 1 if quotes and rng.random() < 0.8 else rng.randrange(len(b) + 1)
        b[i:i] = rng.choice(BAD_UTF8)
    return bytes(b)


def utf16(data, rng):
    text = data.decode("utf-8", "replace")
    return rng.choice([text.encode("utf-16"), text.encode("utf-16-le"), text.encode("utf-16-be"),
                       text.encode("utf-32")])


def bom(data, rng):
    return rng.choice([b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff", b"\xef\xbb\xbf\xef\xbb\xbf"]) + data


def deep_text(data, rng):
    """10,000 brackets opened at a random offset (and maybe closed)."""
    i = rng.randrange(len(data) + 1)
    opened = rng.choice([b"[", b"{", b'{"a":'])
    close = {b"[": b"]", b"{": b"}", b'{"a":': b"}"}[opened]
    middle = b"1" if opened == b'{"a":' else b""
    tail = close * DEEP if rng.random() < 0.5 else b""
    return data[:i] + opened * DEEP + middle + tail + data[i:]


def whitespace(data, rng):
    b = bytearray(data)
    for _ in range(rng.randint(1, 10)):
        i = rng.randrange(len(b) + 1)
        b[i:i] = rng.choice([b" ", b"\n", b"\t", b"\r\n", b"\x0b", b"\x00", b"\xc2\xa0"])
    return bytes(b)


def chunk_swap(data, rng):
    """A span of the text copied over another place (splices events into one another)."""
    if len(data) < 4:
        return data
    a = rng.randrange(len(data))
    n = rng.randint(1, min(2000, len(data) - a))
    at = rng.randrange(len(data))
    return data[:at] + data[a:a + n] + data[at + (n if rng.random() < 0.5 else 0):]


TEXTUAL: list[Callable] = [bit_flips, byte_flips, cut, cut, dup_brackets, drop_brackets, dup_commas, drop_commas,
                           drop_quotes, duplicate_keys, number_literals, numbers_as_strings, strings_as_numbers,
                           invalid_utf8, utf16, bom, deep_text, whitespace, chunk_swap]
LAST = {cut, utf16}  # mutations after which text mutations would mean little


def mutate(doc: dict, rng: random.Random) -> tuple[list[str], bytes]:
    names = []
    doc = window(doc, rng)
    for _ in range(rng.choice([0, 1, 1, 2])):
        m = rng.choice(STRUCTURAL)
        m(doc, rng)
        names.append(m.__name__)
    data = serialize(doc)
    textual = [m for m in rng.sample(TEXTUAL, rng.choice([0, 1, 1, 2])) if m not in LAST] + (
        [rng.choice(sorted(LAST, key=lambda f: f.__name__))] if rng.random() < 0.2 else [])
    if not names and not textual:
        textual = [rng.choice(TEXTUAL)]
    for m in textual:
        data = m(data, rng)
        names.append(m.__name__)
    return names, data


def inputs(seed_files: list[Path], count: int, seed: int, start: int = 0) -> Iterator[Input]:
    """The fuzzer's inputs `start` to `count - 1` (each drawn from its own Random, seeded by `seed`
    and its index, so any one can be made again alone)."""
    docs: dict[Path, dict] = {}
    for k in range(start, count):
        rng = random.Random(f"{seed}:{k}")
        path = rng.choice(seed_files)
        if path not in docs:
            docs[path] = load_seed(path)
        names, data = mutate(docs[path], rng)
        suffix = ".json"
        if rng.random() < 0.1:
            suffix = ".json.gz"
            data = gzip.compress(data, compresslevel=1, mtime=0)
            if rng.random() < 0.3:
                data = rng.choice([cut, bit_flips])(data, rng)
                names.append("gzip-damaged")
            else:
                names.append("gzip")
        yield Input(k, path.name, names, data, suffix)
