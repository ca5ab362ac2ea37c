"""Hostile input: traces built to hit the worst case of each part of the ingester ingest (or fail
with one line) in time linear in their size and under 1 GB of memory.

Each generator below writes one kind of file. Time is the ingest's CPU time in a child process
(so other work on the machine does not count); peak memory is that child's maximum resident set
size, read with getrusage(RUSAGE_CHILDREN) in a process that runs only it. Linear means: twice
the size costs less than three times the time (plus a little slack for the fixed costs).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

import traceduck
from traceduck.errors import InputError
from traceduck.ingester import pipeline
from traceduck.ingester.frames import StackInterner
from traceduck.ingester.nesting import FEW_CLOSED_EARLY, Nester
from traceduck.ingester.reader import MAX_EVENT_BYTES, ChunkedEvents, RawSource
from traceduck.ingester import streaming
from traceduck.ingester.repair import CONTROL_CHAR
from traceduck.ingester.streaming import DEEP_VALUE, MAX_DEPTH, StreamingEvents

from conftest import load_json
from roundtrip import trace_difference
from test_nesting import _overlap_pairs

ROOT = Path(__file__).resolve().parents[1]
GB = 1 << 30
MB = 1 << 20
SLACK_S = 0.3  # fixed costs (DuckDB's merge, writing the tables) that do not grow with the input


# -- generators --------------------------------------------------------------------------------

def _event(ts: int, name: str = "op", dur: int = 1, cat: str = "cpu_op", **extra) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, **extra}


def _trace(path: Path, events: list[bytes], before: bytes = b"", after: bytes = b"") -> Path:
    """A trace from event texts, with raw top-level keys (`"k": v, `) before and (`, "k": v`) after."""
    path.write_bytes(b"{" + before + b'"schemaVersion": 1, "traceEvents": [' + b", ".join(events) + b"]" + after + b"}")
    return path


def _with_args(event: dict, args_text: bytes) -> bytes:
    """An event's JSON text with `"args": ARGS_TEXT` (raw) as its last key."""
    return json.dumps(event).encode()[:-1] + b', "args": ' + args_text + b"}"


def deep_args_trace(path: Path, depth: int) -> Path:
    """An event whose one arg is a list nested `depth` deep: 2 * depth bytes."""
    return _trace(path, [json.dumps(_event(0)).encode(),
                         _with_args(_event(1), b'{"deep": ' + b"[" * depth + b"]" * depth + b"}")])


def huge_event_trace(path: Path, size: int, last: bool = False) -> Path:
    """One event of about `size` bytes between two small ones (or `last`), with nothing inside to
    cut at: an arg that is a list of ones."""
    ones = b"1," * (size // 2 - 1) + b"1"
    events = [json.dumps(_event(0)).encode(), _with_args(_event(1), b'{"big": [' + ones + b"]}")]
    return _trace(path, events if last else events + [json.dumps(_event(2)).encode()])


def repair_string_trace(path: Path, size: int) -> Path:
    """An arg string of `size` bytes ending in a raw tab: not strict JSON, so the streaming parser
    repairs it (escapes the tab)."""
    return _trace(path, [json.dumps(_event(0)).encode(),
                         _with_args(_event(1), b'{"s": "' + b"a" * size + b'\t"}')])


def staircase_trace(path: Path, n: int) -> Path:
    """n events on one thread, each starting 1 us after the one before and lasting n us: every
    pair partially overlaps. Every other one is a CPU op, the rest annotations."""
    events = [_event(i, dur=n, cat="cpu_op" if i % 2 == 0 else "user_annotation") for i in range(n)]
    return _trace(path, [json.dumps(e).encode() for e in events])


def long_name_trace(path: Path, size: int) -> Path:
    return _trace(path, [json.dumps(_event(0, name="n" * size)).encode(), json.dumps(_event(1)).encode()])


def deep_metadata_trace(path: Path, depth: int, after: bool) -> Path:
    """A top-level key whose value is a list nested `depth` deep, before or after traceEvents."""
    deep = b'"deep": ' + b"[" * depth + b"]" * depth
    events = [json.dumps(_event(0)).encode(), json.dumps(_event(1)).encode()]
    return _trace(path, events, after=b", " + deep) if after else _trace(path, events, before=deep + b", ")


# -- measuring -----------------------------------------------------------------------------------

_INGEST = """
import sys, time, traceduck
from traceduck.errors import TraceduckError
started = time.process_time()
try:
    traceduck.ingest(sys.argv[1], store=sys.argv[2], jobs=1)
    error = ""
except TraceduckError as e:
    error = e.one_line()
print(time.process_time() - started)
print(error)
"""

# Runs the ingest as its only child, so that RUSAGE_CHILDREN's peak is the ingest's.
_MEASURE = """
import json, resource, subprocess, sys
child = subprocess.run([sys.executable, "-c", sys.argv[1], *sys.argv[2:]], capture_output=True, text=True)
print(json.dumps({"rc": child.returncode, "out": child.stdout, "err": child.stderr,
                  "peak": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}))
"""


def measure(path: Path, store: Path) -> tuple[float, int, str]:
    """(CPU seconds of the ingest, peak RSS bytes, the one-line error or "")."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", _MEASURE, _INGEST, str(path), str(store)],
                          capture_output=True, text=True, env=env, check=True)
    result = json.loads(done.stdout)
    assert result["rc"] == 0, result["err"]
    seconds, error = result["out"].split("\n")[:2]
    return float(seconds), result["peak"], error


def assert_linear(make, sizes: tuple[int, int], tmp_path: Path) -> list[tuple[float, int, str]]:
    """Ingest the files `make(path, size)` of both sizes (the second twice the first): each under
    1 GB, the second in less than 3x the time of the first. Returns the measurements."""
    small, big = sizes
    assert big == 2 * small
    tmp_path.mkdir(exist_ok=True)
    found = []
    for size in sizes:
        path = make(tmp_path / f"{size}.json", size)
        found.append(measure(path, tmp_path / f"store-{size}"))
        path.unlink()
    (t1, peak1, _), (t2, peak2, _) = found
    assert peak1 < GB and peak2 < GB, (peak1, peak2)
    assert t2 < 3 * t1 + SLACK_S, (t1, t2)
    return found


def _run_row(store: Path) -> dict:
    columns = ["event_count", "warnings", "metadata_json", "overlap_count", "op_overlap_count"]
    with traceduck.open(store) as db:
        return dict(zip(columns, db.sql(f"SELECT {', '.join(columns)} FROM runs").fetchall()[0]))


# -- 1. nesting deep inside an event ----------------------------------------------------------------

@pytest.mark.slow  # 4 s
def test_deep_nesting_in_args_is_linear(tmp_path):
    """20,000 levels in 40 KB took 1.1 GB with the streaming parser's per-event path prefixes."""
    found = assert_linear(deep_args_trace, (20_000, 40_000), tmp_path)
    assert [error for _, _, error in found] == ["", ""]
    store = tmp_path / "store"
    traceduck.ingest(deep_args_trace(tmp_path / "deep.json", 20_000), store=store, jobs=1)
    row = _run_row(store)
    assert row["event_count"] == 2 and row["warnings"] == {DEEP_VALUE: 1}
    with traceduck.open(store) as db:
        (value,) = db.sql("SELECT string_value FROM args WHERE key = 'deep'").fetchall()[0]
    assert value == "[" * 20_000 + "]" * 20_000  # kept whole, as its JSON text


# -- 2. one huge event, nothing to cut at ------------------------------------------------------------

def test_splitter_reads_a_huge_event_in_linear_time(tmp_path):
    """The splitter searched its whole buffer backwards on every read: an event of N bytes read
    in blocks of B cost N^2/B. With 64 KB blocks that shows at a few MB."""
    times = []
    for size in (4 * MB, 8 * MB):
        path = huge_event_trace(tmp_path / f"{size}.json", size)
        expected = json.loads(path.read_bytes())["traceEvents"]
        with RawSource(path) as src:
            reader = ChunkedEvents(src, block=64 << 10)
            reader.open()
            started = time.process_time()
            chunks = list(reader.chunks())
            times.append(time.process_time() - started)
        assert json.loads(b"[" + b",".join(chunks) + b"]") == expected
    assert times[1] < 8 * times[0] + 0.05, times


@pytest.mark.slow  # 2 s
def test_huge_event_ingests_in_linear_time(tmp_path):
    found = assert_linear(huge_event_trace, (2 * MB, 4 * MB), tmp_path)
    assert [error for _, _, error in found] == ["", ""]


@pytest.mark.parametrize("last", [False, True])
@pytest.mark.slow  # 3 s
def test_event_over_the_limit_is_one_line(tmp_path, last):
    """An event larger than MAX_EVENT_BYTES (here by 1 MB, less than a read) is refused, in one
    line that says where it starts, wherever it is: followed by others or last."""
    path = huge_event_trace(tmp_path / "huge.json", MAX_EVENT_BYTES + MB, last)
    start = path.read_bytes().index(b'{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 1,')
    seconds, peak, error = measure(path, tmp_path / "store")
    assert error == (f"{path}: an event larger than {MAX_EVENT_BYTES >> 20} MB at byte {start:,}. "
                     "Profiler events are a few KB; remove or shorten this one.")
    assert peak < GB
    assert not (tmp_path / "store" / "runs").exists() or not list((tmp_path / "store" / "runs").iterdir())


@pytest.mark.slow
def test_huge_events_at_scale(tmp_path):
    """12 and 24 MB events ingest; 64, 128 and 256 MB ones are refused, in time that grows
    linearly (the reader stops at the limit, so about constant)."""
    found = assert_linear(huge_event_trace, (12 * MB, 24 * MB), tmp_path)
    assert [error for _, _, error in found] == ["", ""]
    refused = []
    for size in (64 * MB, 128 * MB, 256 * MB):
        path = huge_event_trace(tmp_path / "huge.json", size)
        refused.append(measure(path, tmp_path / f"store-{size}"))
        path.unlink()
    assert all("an event larger than" in error and peak < GB for _, peak, error in refused), refused
    assert refused[2][0] < 3 * refused[0][0] + SLACK_S, refused


# -- 3. long strings under repair ----------------------------------------------------------------------

@pytest.mark.slow  # 5 s
def test_long_strings_under_repair_are_linear(tmp_path):
    """A string cut by a read was scanned again on every 1 MB read: 8/16/32 MB took 0.7/2.7/13.4 s."""
    found = assert_linear(repair_string_trace, (4 * MB, 8 * MB), tmp_path)
    assert [error for _, _, error in found] == ["", ""]
    store = tmp_path / "store"
    traceduck.ingest(repair_string_trace(tmp_path / "s.json", 3 * MB), store=store, jobs=1)
    with traceduck.open(store) as db:
        (value,) = db.sql("SELECT string_value FROM args WHERE key = 's'").fetchall()[0]
    assert value == "a" * (3 * MB) + "\t"


@pytest.mark.slow  # several seconds: new processes or a store built for it
def test_repair_reads_a_long_string_in_linear_time(tmp_path, monkeypatch):
    """The streaming parser alone, reading 64 KB at a time, where scanning the string again on
    every read shows at a few MB: the repair's scan, and yajl's, which lexes a string cut by the
    end of a piece fed to it again from its start (4/8/16 MB took 0.07/0.42/1.59 s in yajl alone
    with 64 KB pieces). Four times the length: linear is about 4x the time, once per read 16x."""
    monkeypatch.setattr(streaming, "READ", 64 << 10)
    times = []
    for size in (4 * MB, 16 * MB):
        path = repair_string_trace(tmp_path / f"{size}.json", size)
        best = float("inf")
        for _ in range(3):  # best of three: one slow first read (page cache, allocator) is not the parser
            with RawSource(path) as src:
                stream = StreamingEvents(src)
                started = time.process_time()
                events = [e for batch in stream.batches() for e in batch]
                best = min(best, time.process_time() - started)
            assert len(events) == 2 and events[1]["args"]["s"] == "a" * size + "\t"
            assert stream.warnings == {CONTROL_CHAR: 1}
        times.append(best)
    assert times[1] < 8 * times[0] + 0.05, times


@pytest.mark.slow
def test_long_strings_under_repair_at_scale(tmp_path):
    assert_linear(repair_string_trace, (16 * MB, 32 * MB), tmp_path)


@pytest.mark.slow
def test_deep_nesting_and_staircase_at_scale(tmp_path):
    assert_linear(deep_args_trace, (100_000, 200_000), tmp_path / "deep")
    assert_linear(staircase_trace, (40_000, 80_000), tmp_path / "stairs")


# -- 4. a staircase of partial overlaps ------------------------------------------------------------------

@pytest.mark.slow  # 4 s
def test_staircase_of_overlaps_is_linear(tmp_path):
    """20,000 events that all overlap each other took 12.4 s to nest: the events closed early
    were filtered again for every event."""
    found = assert_linear(staircase_trace, (10_000, 20_000), tmp_path)
    assert [error for _, _, error in found] == ["", ""]
    n = 2_000
    store = tmp_path / "store"
    traceduck.ingest(staircase_trace(tmp_path / "stairs.json", n), store=store, jobs=1)
    row = _run_row(store)
    annotations = n // 2
    # every pair overlaps; the pairs of two annotations are the ones without an op
    assert (row["overlap_count"], row["op_overlap_count"]) == (n * (n - 1) // 2,
                                                               n * (n - 1) // 2 - annotations * (annotations - 1) // 2)


def test_overlap_counts_past_the_few_closed_early_match_a_direct_count(tmp_path, store):
    """Random overlapping events on a few tracks, enough that tracks go past FEW_CLOSED_EARLY events
    closed early: the counts equal the pairs counted directly."""
    rng = random.Random(16)
    events = []
    for k in range(1_500):
        ts = rng.randrange(0, 20_000)
        events.append(_event(ts, name=f"e{k}", dur=rng.choice([1, 5, 50, 400, 3_000]), tid=rng.choice([1, 2, 3]),
                             cat=rng.choice(["cpu_op", "user_annotation", "python_function"])))
    path = tmp_path / "random.json"
    path.write_text(json.dumps({"traceEvents": events}))
    result = traceduck.ingest(path, store=store, jobs=1)[0]
    expected = (_overlap_pairs(events), _overlap_pairs(events, ops_only=True))
    assert expected[0] > 50 * FEW_CLOSED_EARLY  # the counting past the list is exercised
    assert (result.overlap_count, result.op_overlap_count) == expected


def test_nester_staircase_counts_pairs_across_batches():
    """Fed in batches, the counts carry over: a staircase split in three batches."""
    n = 3_000
    nester = Nester(n, StackInterner())
    for lo in range(0, n, 1_000):
        ids = list(range(lo, lo + 1_000))
        nester.feed([7] * 1_000, ids, ids, [i + n for i in ids], [None] * 1_000, [None] * 1_000,
                    [i % 3 == 0 for i in ids])
    ops = len(range(0, n, 3))
    others = n - ops
    assert nester.overlap_count == n * (n - 1) // 2
    assert nester.op_overlap_count == n * (n - 1) // 2 - others * (others - 1) // 2
    assert set(nester.parent.tolist()) == {-1}  # each ends after the one before: no parent


# -- 5. one 64 MB name ----------------------------------------------------------------------------------

@pytest.mark.slow  # 2 s
def test_64_mb_name_is_one_line(tmp_path):
    path = long_name_trace(tmp_path / "name.json", 64 * MB)
    start = path.read_bytes().index(b'{"ph"')
    seconds, peak, error = measure(path, tmp_path / "store")
    assert error == (f"{path}: an event larger than {MAX_EVENT_BYTES >> 20} MB at byte {start:,}. "
                     "Profiler events are a few KB; remove or shorten this one.")
    assert peak < GB


def test_merge_out_of_memory_is_one_line(tmp_path, store, monkeypatch):
    """Values that DuckDB cannot sort within the merge's memory give one line, not its advice."""
    path = long_name_trace(tmp_path / "name.json", 8 * MB)
    monkeypatch.setattr(pipeline, "MERGE_MEMORY", "4MB")
    with pytest.raises(InputError) as err:
        traceduck.ingest(path, store=store, jobs=1)
    assert err.value.one_line() == (
        f"{path}: the merge of its events ran out of memory (4MB, spilling included). Its values are too large to "
        "sort here (names or args of many MB); shorten them, or free disk space for the spill if that ran out.")


def test_long_name_below_the_limit_ingests(tmp_path, store):
    path = long_name_trace(tmp_path / "name.json", 8 * MB)
    traceduck.ingest(path, store=store, jobs=1)
    with traceduck.open(store) as db:
        assert db.sql("SELECT strlen(name) FROM events ORDER BY event_id").fetchall() == [(8 * MB,), (2,)]


# -- 6. deep metadata ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("depth, after", [(100_000, False), (2_000, True)])
@pytest.mark.slow  # 4 s
def test_deep_metadata_takes_the_streaming_path(tmp_path, depth, after):
    """json recurses, and failed with RecursionError as an internal error; the streaming parser
    keeps a value nested deeper than MAX_DEPTH as its JSON text, with a warning."""
    path = deep_metadata_trace(tmp_path / "meta.json", depth, after)
    seconds, peak, error = measure(path, tmp_path / "measured")
    assert error == "" and peak < GB
    store = tmp_path / "store"
    traceduck.ingest(path, store=store, jobs=1)
    row = _run_row(store)
    assert row["event_count"] == 2 and row["warnings"] == {DEEP_VALUE: 1}
    meta = json.loads(row["metadata_json"])
    value = meta["deep"]
    for _ in range(MAX_DEPTH):  # the first MAX_DEPTH levels as lists, the rest as its text
        (value,) = value
    assert value == "[" * (depth - MAX_DEPTH) + "]" * (depth - MAX_DEPTH) and meta["schemaVersion"] == 1
    assert list(meta) == (["schemaVersion", "deep"] if after else ["deep", "schemaVersion"])
    assert MAX_DEPTH < 1000  # what json can read back


# -- 7. run ids: the whole 128-bit hash -------------------------------------------------------------------

def _legacy_store(store: Path, path: Path) -> tuple[str, str]:
    """A store as an older version wrote it: the run under the first 12 hex digits of the hash,
    in its directory name and in the run_id column of every table. (new id, old id)"""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (result,) = traceduck.ingest(path, store=store, jobs=1)
    new, old = result.run_id, result.run_id[:12]
    run_dir = store / "runs" / new
    for table in run_dir.glob("*.parquet"):
        t = pq.read_table(table)
        t = t.set_column(t.schema.get_field_index("run_id"), "run_id", pa.array([old] * t.num_rows, pa.string()))
        pq.write_table(t, table)
    run_dir.rename(store / "runs" / old)
    return new, old


def test_run_id_is_the_whole_xxh3_128_and_shown_short(tmp_path, store):
    import xxhash
    from traceduck.cli import app
    from typer.testing import CliRunner

    path = staircase_trace(tmp_path / "t.json", 10)
    full = xxhash.xxh3_128(path.read_bytes()).hexdigest()
    assert len(full) == 32
    done = CliRunner().invoke(app, ["ingest", str(path), "--store", str(store), "--jobs", "1"])
    assert done.exit_code == 0 and f"-> {full[:12]} 't'" in done.stdout and full not in done.stdout
    with traceduck.open(store) as db:
        assert db.sql("SELECT run_id FROM runs").fetchall() == [(full,)]
        assert db.select_runs(full[:12]) == [full]
    again = CliRunner().invoke(app, ["ingest", str(path), "--store", str(store)])
    assert again.stderr == f"t.json: already in the store as run {full[:12]} (use --force to replace it)\n"


@pytest.mark.slow  # 2 s
def test_runs_with_48_bit_ids_keep_working(tmp_path, store):
    """An old store's run answers queries; the same file ingested again is that run (skipped),
    and with force it is replaced by a run under the whole id, never a second copy."""
    path = staircase_trace(tmp_path / "t.json", 10)
    new, old = _legacy_store(store, path)
    with traceduck.open(store) as db:
        assert db.select_runs(old) == [old]
        assert db.sql("SELECT run_id, count(*) FROM events GROUP BY run_id").fetchall() == [(old, 10)]
    (again,) = traceduck.ingest(path, store=store, jobs=1)
    assert again.skipped and again.run_id == old
    (forced,) = traceduck.ingest(path, store=store, jobs=1, force=True)
    assert not forced.skipped and forced.run_id == new and forced.name == "t"
    with traceduck.open(store) as db:
        assert db.sql("SELECT run_id, name, event_count FROM runs").fetchall() == [(new, "t", 10)]
        assert db.sql("SELECT run_id, count(*) FROM events GROUP BY run_id").fetchall() == [(new, 10)]
    assert sorted(p.name for p in (store / "runs").iterdir()) == [new]


# -- 9. secrets in top-level metadata ------------------------------------------------------------------------

SECRET_META = {
    "schemaVersion": 1,
    "metadata": {"system": {"env": {"HF_TOKEN": "hf_live", "PATH": "/usr/bin"}, "hostname": "box"}},
    "api_key": "sk-live",
    "Authorization": {"bearer": "abc"},
    "launcher": {"environ": ["WANDB_API_KEY=w1", "OMP_NUM_THREADS=4"], "db_password": "pw", "retries": 3},
    "distributedInfo": {"rank": 0, "world_size": 1},
}
SECRET_TRAILER = {"Client_Secret": "cs", "traceName": "t"}


def _redacted(meta: dict) -> dict:
    """SECRET_META and SECRET_TRAILER as redaction must leave them, written out by hand."""
    r = "<redacted>"
    return {
        "schemaVersion": 1,
        "metadata": {"system": {"env": {"HF_TOKEN": r, "PATH": r}, "hostname": "box"}},
        "api_key": r,
        "Authorization": r,
        "launcher": {"environ": [f"WANDB_API_KEY={r}", f"OMP_NUM_THREADS={r}"], "db_password": r, "retries": 3},
        "distributedInfo": {"rank": 0, "world_size": 1},
        "Client_Secret": r, "traceName": "t",
    }


@pytest.fixture
def secret_run(tmp_path, store):
    events = [_event(0, name="ProfilerStep#1", dur=100, cat="user_annotation"), _event(10, name="aten::add", dur=5)]
    path = tmp_path / "secret.json"
    text = json.dumps({**SECRET_META, "traceEvents": events, **SECRET_TRAILER})
    path.write_text(text)
    traceduck.ingest(path, store=store, jobs=1)
    return store, path, json.loads(text)


def _top_level(path: Path) -> dict:
    return {k: v for k, v in json.loads(path.read_text()).items() if k != "traceEvents"}


def test_window_exports_redact_secrets_by_default(secret_run, tmp_path):
    from traceduck.cli import app
    from typer.testing import CliRunner

    store, path, doc = secret_run
    original = {k: v for k, v in doc.items() if k != "traceEvents"}
    step = tmp_path / "step.json"
    done = CliRunner().invoke(app, ["export", "secret", "-o", str(step), "--step", "1", "--store", str(store)])
    assert done.exit_code == 0, done.output
    # 8: HF_TOKEN and PATH (env), api_key, Authorization, the two environ entries, db_password, Client_Secret
    assert done.stderr.endswith("Redacted 8 metadata values that look like secrets (--no-redact keeps them).\n")
    assert _top_level(step) == _redacted(original)
    assert list(_top_level(step)) == list(original)  # keys keep their order
    assert trace_difference(load_json(path)["traceEvents"], load_json(step)["traceEvents"]) is None  # never touched
    kept = tmp_path / "kept.json"
    done = CliRunner().invoke(app, ["export", "secret", "-o", str(kept), "--start", "0ms", "--end", "1ms",
                                    "--no-redact", "--store", str(store)])
    assert done.exit_code == 0 and "Redacted" not in done.stderr
    assert _top_level(kept) == original


def test_whole_run_exports_stay_exact_unless_asked(secret_run, tmp_path):
    store, path, doc = secret_run
    original = {k: v for k, v in doc.items() if k != "traceEvents"}
    whole = tmp_path / "whole.json"
    assert traceduck.export("secret", whole, store=store).redacted == 0
    assert trace_difference(load_json(path), load_json(whole)) is None
    asked = tmp_path / "asked.json"
    assert traceduck.export("secret", asked, store=store, redact=True).redacted == 8
    assert _top_level(asked) == _redacted(original)


def test_redaction_on_a_public_trace_with_a_token(tmp_path, store):
    """A public trace carries HF_TOKEN in metadata.system.env; a time window of it does not."""
    from conftest import load_json, shared_dir

    path = shared_dir() / "public/AMD-AGI__TraceLens/tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz"
    env = load_json(path, exact=False)["metadata"]["system"]["env"]
    assert env["HF_TOKEN"] != "<redacted>"
    traceduck.ingest(path, store=store, jobs=1)
    out = tmp_path / "window.json"
    result = traceduck.export("gaunernst_bert-small-uncased__1016001", out, store=store, start="0ms", end="1ms")
    shared = json.loads(out.read_text())["metadata"]["system"]["env"]
    assert shared == dict.fromkeys(env, "<redacted>") and result.redacted >= len(env)


# -- 8. worker processes ---------------------------------------------------------------------------------------

_WORKERS = """
import json, sys
import duckdb
import traceduck
from traceduck.ingester import pipeline

def main():
    con = duckdb.connect()
    con.sql("SELECT sum(range) FROM range(3000000)").fetchall()  # DuckDB's threads now run in this process
    pipeline.PARALLEL_MIN_BYTES = 0  # a small file goes to worker processes too
    one = traceduck.ingest(sys.argv[1], store=sys.argv[3], jobs=2)
    two = traceduck.ingest(sys.argv[1:3], store=sys.argv[4], jobs=2)  # one worker per file
    print(json.dumps([pipeline.worker_context().get_start_method(), [r.events for r in one + two]]))
"""


@pytest.mark.parametrize("guarded", [True, False])
@pytest.mark.slow  # 4 s
def test_workers_are_not_forked_from_a_caller_that_may_run_threads(tmp_path, guarded):
    """From a script with the main guard, workers start from the fork server although the caller
    runs DuckDB's threads; a script without the guard cannot have them (each would run the
    script again), so its workers are forked, as before. Both ingest every event."""
    body = _WORKERS + ('if __name__ == "__main__":\n    main()\n' if guarded else "main()\n")
    script = tmp_path / "script.py"
    script.write_text(body)
    a = staircase_trace(tmp_path / "a.json", 30)
    b = staircase_trace(tmp_path / "b.json", 40)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(script), str(a), str(b), str(tmp_path / "s1"), str(tmp_path / "s2")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    method, counts = json.loads(done.stdout.strip().splitlines()[-1])
    assert method == ("forkserver" if guarded else "fork")
    assert counts == [30, 30, 40]
