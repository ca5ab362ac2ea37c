"""The typed decode path of ingest: the part files it writes hold, event for event and arg for arg,
what plain `json` reads from the same text; it takes exactly the chunks whose events are all of the
common shape, and leaves every other chunk to the general path."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from traceduck.ingester.convert import convert_chunk, convert_chunk_typed, part_name, read_part
from traceduck.ingester.reader import ChunkedEvents, RawSource

from conftest import shared_dir, shared_trace_files

CORE = {"ph", "cat", "name", "pid", "tid", "ts", "dur", "args"}
EXTRA = {"id", "bp", "s"}
INT64 = (-(1 << 63), (1 << 63) - 1)
# Large files are covered by the slow run over every shared trace.
QUICK = ["cpu/full.json", "cpu/train.json.gz",
         "public/AMD-AGI__TraceLens/tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz"]


def chunks_of(path: Path, block: int = 1 << 20) -> list[bytes]:
    with RawSource(path) as src:
        reader = ChunkedEvents(src, block=block)
        reader.open()
        return list(reader.chunks())


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _time_ok(v) -> bool:
    """A ts/dur the typed path converts: integer microseconds whose ns fit int64, or a decimal
    below 2**43 microseconds."""
    if _is_int(v):
        return abs(v) < INT64[1] // 1000
    return isinstance(v, Decimal) and abs(v) < 2 ** 43


def common_shape(e) -> bool:
    """The event shape the typed path takes, judged on plain json's reading of the event."""
    if not isinstance(e, dict) or not set(e) <= CORE | EXTRA:
        return False
    if any(e.get(k) is not None and not isinstance(e[k], str) for k in ("ph", "cat", "name", "bp", "s")):
        return False
    if any(k in e and e[k] is None for k in ("bp", "s")):
        return False
    if not all(_is_int(e.get(k)) or isinstance(e.get(k), str) for k in ("pid", "tid")):
        return False
    if not _time_ok(e.get("ts")) or (e.get("dur") is not None and not _time_ok(e["dur"])):
        return False
    if "id" in e and not (_is_int(e["id"]) and INT64[0] <= e["id"] <= INT64[1]):
        return False
    a = e.get("args")
    return a is None or (isinstance(a, dict) and len(a) > 0)


def ns(v) -> int | None:
    return None if v is None else int((Decimal(v) * 1000).to_integral_value())


def expected_arg(v) -> tuple:
    """(value_type, int_value, real_value, parsed string_value) as the args table keeps a value."""
    if isinstance(v, bool):
        return "bool", int(v), None, None
    if _is_int(v):
        return ("int", v, None, None) if INT64[0] <= v <= INT64[1] else ("big_int", None, None, str(v))
    if isinstance(v, float):
        return "real", None, v, None
    if isinstance(v, str):
        return "string", None, None, v
    if v is None:
        return "null", None, None, None
    return "json", None, None, v


def check_chunk(text: bytes, out: Path) -> bool:
    """Whether the typed path took the chunk; when it did, its parts match plain json."""
    exact = json.loads(b"[" + text + b"]", parse_float=Decimal)
    plain = json.loads(b"[" + text + b"]")
    out.mkdir()
    done = convert_chunk_typed(text, 0, out)
    if done is None:
        return False
    assert all(common_shape(e) for e in exact)
    assert done.count == len(plain) and done.items == len(plain) and not done.skipped
    ev = pq.read_table(out / part_name("events", 0)).to_pydict()
    for k, (e, d) in enumerate(zip(exact, plain)):
        assert ev["local_idx"][k] == k
        assert (ev["phase"][k], ev["category"][k], ev["name"][k]) == (e.get("ph"), e.get("cat"), e.get("name"))
        assert (ev["pid"][k], ev["tid"][k]) == (str(e["pid"]), str(e["tid"]))
        assert (ev["pid_is_text"][k], ev["tid_is_text"][k]) == (isinstance(e["pid"], str), isinstance(e["tid"], str))
        assert (ev["ts_ns"][k], ev["dur_ns"][k]) == (ns(e["ts"]), ns(e.get("dur")))
        extra = {x: d[x] for x in d if x not in CORE}
        assert (json.loads(ev["extra"][k]) if ev["extra"][k] is not None else {}) == extra
        assert ev["flow_id"][k] == e.get("id")
    args = read_part(out / part_name("args", 0)).to_pydict()
    want = [(k, j, key, *expected_arg(v)) for k, d in enumerate(plain) for j, (key, v) in enumerate((d.get("args") or {}).items())]
    got = list(zip(args["local_idx"], args["arg_index"], args["key"], args["value_type"], args["int_value"],
                   args["real_value"], args["string_value"]))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if w[3] == "json":
            g = (*g[:6], json.loads(g[6]))
        assert g == w
    return True


def _check_file(rel: str, tmp_path: Path) -> tuple[int, int]:
    texts = chunks_of(shared_dir() / rel)
    taken = sum(check_chunk(t, tmp_path / f"c{k}") for k, t in enumerate(texts))
    return taken, len(texts)


@pytest.mark.parametrize("rel", QUICK)
@pytest.mark.slow  # 2 s
def test_typed_parts_match_plain_json(rel, tmp_path):
    taken, total = _check_file(rel, tmp_path)
    assert taken == total > 1  # every chunk of these traces is of the common shape


@pytest.mark.slow
@pytest.mark.parametrize("rel", [f for f in shared_trace_files() if f not in QUICK])
def test_typed_parts_match_plain_json_on_every_trace(rel, tmp_path):
    """Each chunk is taken exactly when every event in it is of the common shape."""
    texts = chunks_of(shared_dir() / rel)
    for k, text in enumerate(texts):
        events = json.loads(b"[" + text + b"]", parse_float=Decimal)
        taken = check_chunk(text, tmp_path / f"c{k}")
        # huge floats in args (maybe integers beyond 64 bits) are re-read exactly by the general path
        huge = any(isinstance(v, Decimal) and abs(v) >= 2 ** 63
                   for e in events if isinstance(e, dict) and isinstance(e.get("args"), dict) for v in e["args"].values())
        assert taken == (all(common_shape(e) for e in events) and not huge), k


EVENT = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 10.5, "dur": 1.25,
         "args": {"External id": 7}}


@pytest.mark.parametrize("change", [
    {"extra_key": 1},             # a key the typed decoder does not know
    {"pid": None},                # pid of an unexpected type
    {"pid": True},
    {"tid": 1.5},
    {"args": {}},                 # kept in extra by the general path
    {"args": [1, 2]},
    {"ts": 2.0 ** 44},            # a float timestamp too large for exact ns
    {"ts": "10"},
    {"ts": -(1 << 63)},           # integer microseconds whose ns overflow int64
    {"dur": 1 << 60},
    {"id": 1 << 63, "bp": "e"},   # a flow id beyond int64
    {"name": 5},
])
def test_odd_events_take_the_general_path(change, tmp_path):
    odd = {**EVENT, **change}
    text = (json.dumps(EVENT) + "," + json.dumps(odd)).encode()
    assert convert_chunk_typed(text, 0, tmp_path) is None
    result = convert_chunk(text, 0, str(tmp_path))  # the general path converts it as before
    assert result.count == 2


def test_missing_and_mixed_fields(tmp_path):
    events = [
        {"ph": "X", "pid": 1, "tid": "main", "ts": 5, "dur": 2},          # integer microseconds
        {"ph": "i", "pid": "gpu 0", "tid": 3, "ts": 5.0015, "s": "t"},    # no dur, a scope, text pid
        {"ph": "f", "pid": 1, "tid": 3, "ts": 6.25, "id": 9, "bp": "e", "cat": "ac2g", "name": "ac2g"},
        {"ph": "M", "pid": 1, "tid": 0, "ts": 0, "name": "process_name", "args": {"name": "python"}},
        {"ph": None, "cat": None, "pid": 1, "tid": 0, "ts": -3.5, "dur": None, "args": None},
    ]
    text = ",".join(json.dumps(e) for e in events).encode()
    assert check_chunk(text, tmp_path / "c")
