"""Python stacks: interned per run, from `Call stack` or the enclosing python_function chain."""

from __future__ import annotations

import re
import sys
from decimal import Decimal
from pathlib import Path

import pytest

import traceduck

from conftest import load_json, shared_dir, shared_trace_files, trace_events, write_trace


def _frames(store, event_id):
    with traceduck.open(store) as db:
        rows = db.sql("""SELECT s.frame FROM events e JOIN stacks s ON s.run_id = e.run_id AND s.stack_id = e.stack_id
                         WHERE e.event_id = ? ORDER BY s.frame_index""", [event_id]).fetchall()
    return [r[0] for r in rows]


def _norm(frame: str) -> str:
    return re.sub(r" at 0x[0-9a-fA-F]+", "", frame)


def _whole_cache_copy(events):
    for i, e in enumerate(events):
        if e.get("name") == "aten::copy_" and e.get("args", {}).get("Input Dims", [None])[0] == [65536, 1, 576]:
            return i, e
    raise AssertionError("no whole-cache copy in the trace")


def test_stack_from_python_function_chain(store):
    path = shared_dir() / "cpu/full.json"
    events = trace_events(load_json(path))
    idx, op = _whole_cache_copy(events)
    # independent: innermost python_function containing the op, then Python parent ids to the root
    t0, t1 = Decimal(op["ts"]), Decimal(op["ts"]) + Decimal(op["dur"])
    pyf = [e for e in events if e.get("cat") == "python_function" and e["tid"] == op["tid"]]
    enclosing = [e for e in pyf if Decimal(e["ts"]) <= t0 and Decimal(e["ts"]) + Decimal(e["dur"]) >= t1]
    inner = max(enclosing, key=lambda e: (Decimal(e["ts"]), -Decimal(e["dur"])))
    by_id = {e["args"]["Python id"]: e for e in pyf}
    expected, node = [], inner
    while node is not None:
        expected.append(_norm(node["name"]))
        node = by_id.get(node["args"].get("Python parent id"))
    traceduck.ingest(path, store=store)
    frames = _frames(store, idx)
    assert frames == expected
    assert "gen.py(77): _read_cache" in frames
    assert not any(" at 0x" in f for f in frames)


def test_stack_from_call_stack_arg(store):
    path = shared_dir() / "cpu/verbose.json.gz"
    events = trace_events(load_json(path))
    idx, op = _whole_cache_copy(events)
    expected = [_norm(f) for f in op["args"]["Call stack"].split(";") if f]
    traceduck.ingest(path, store=store)
    assert _frames(store, idx) == expected
    assert expected[0].startswith("<built-in method") or expected[0].endswith(")")


def test_same_stack_same_id_across_runs(store):
    for rel in ("cpu/full.json", "cpu/fixed.json"):
        traceduck.ingest(shared_dir() / rel, store=store)
    with traceduck.open(store) as db:
        shared = db.sql("""SELECT count(*) FROM (SELECT stack_id FROM stacks GROUP BY stack_id
                           HAVING count(DISTINCT run_id) = 2)""").fetchall()[0][0]
        split = db.sql("""SELECT count(*) FROM stacks WHERE file IS NOT NULL
                          AND frame <> file || '(' || line || '): ' || function""").fetchall()[0][0]
    assert shared > 100
    assert split == 0


def test_stack_ids_on_ops_annotations_and_memory_events(store):
    traceduck.ingest(shared_dir() / "cpu/full.json", store=store)
    with traceduck.open(store) as db:
        rows = dict(db.sql("""SELECT category, count(*) FILTER (WHERE stack_id IS NULL) FROM events
                              WHERE category IN ('cpu_op', 'user_annotation', 'cpu_instant_event') GROUP BY 1""").fetchall())
    assert rows == {"cpu_op": 0, "user_annotation": 0, "cpu_instant_event": 0}


def test_no_stacks_without_python_frames(store):
    traceduck.ingest(shared_dir() / "cpu/nostack.json", store=store)
    with traceduck.open(store) as db:
        assert db.sql("SELECT count(*) FROM events WHERE stack_id IS NOT NULL").fetchall()[0][0] == 0
        assert db.sql("SELECT count(*) FROM stacks").fetchall()[0][0] == 0


# -- call sites: which frames are the user's code ------------------------------------------------

_FRAME = re.compile(r"^(.*)\((\d+)\): (.*)$", re.S)
_STDLIB_TABLE = Path(traceduck.__file__).resolve().parent / "stdlib_functions.txt"


def _stdlib_functions() -> dict[str, set[str]]:
    """The standard library's functions by file: the reference data the rule reads (its own test
    is test_stdlib_table_lists_the_standard_library)."""
    out = {}
    for line in _STDLIB_TABLE.read_text().splitlines():
        if line and not line.startswith("#"):
            file, names = line.split("\t")
            out[file] = set(names.split(" "))
    return out


STDLIB = _stdlib_functions()


def is_user_frame(frame: str) -> bool:
    """The call-site rule, spelled out: a frame with a file that is not torch's (relative or
    absolute), not code torch.compile generated, not a `<...>` pseudo-file, not under an installed
    packages or interpreter directory, and not a function the standard library defines in that
    file (the profiler writes the standard library's files relative, like the user's)."""
    m = _FRAME.match(frame)
    if not m:
        return False
    file, function = m.group(1), m.group(3)
    if file.startswith(("torch/", "<")) or "/torch/" in file or re.search(r"/torchinductor_[^/]*/", file):
        return False
    if "/site-packages/" in file or "/dist-packages/" in file or re.search(r"/lib(64)?/python.\..*/", file):
        return False
    return function not in STDLIB.get(file, ())


def former_is_user_frame(frame: str) -> bool:
    """The rule before paths decided: a file whose first path component is a standard-library
    module name was never the user's (so a user's `profile.py` or `code/model.py` was skipped)."""
    m = _FRAME.match(frame)
    if not m:
        return False
    file = m.group(1)
    if file.startswith(("torch/", "<")) or "/torch/" in file or re.search(r"/lib/python3\.", file):
        return False
    return re.sub(r"\.py$", "", file.split("/")[0]) not in sys.stdlib_module_names


def call_site(frames: list[str], rule=is_user_frame) -> str | None:
    return next((f for f in frames if rule(f)), None)


def python_stacks(events: list) -> tuple[dict[int, list[str]], dict[int, list[str]]]:
    """Frames (innermost first) from the trace alone: by event position, each `Call stack` arg;
    and for each python_function event, itself and its chain of `Python parent id`s."""
    pyf = {e["args"]["Python id"]: e for e in events
           if e.get("cat") == "python_function" and "Python id" in (e.get("args") or {})}
    call_stacks, chains = {}, {}
    for i, e in enumerate(events):
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        if isinstance(args.get("Call stack"), str):
            frames = [_norm(f) for f in args["Call stack"].split(";") if f]
            if frames:
                call_stacks[i] = frames
        if e.get("cat") == "python_function" and "Python id" in args:
            frames, node = [], e
            while node is not None:
                frames.append(_norm(node["name"]))
                node = pyf.get(node["args"].get("Python parent id"))
            chains[i] = frames
    return call_stacks, chains


# Where the path rule and the former module-name rule disagree on the shared traces, by trace.
# Inductor's generated module was taken for the user's code; pathlib functions Python 3.12 added
# are not in the table of Python 3.11's standard library (python_function events only, no op).
_PATHLIB_312 = {f"pathlib.py({line}): {name}" for line, name in
                ((380, "with_segments"), (407, "_load_parts"), (387, "_parse_path"), (560, "root"), (569, "_tail"),
                 (551, "drive"))}
CHANGED_CALL_SITES = {
    "public/AMD-AGI__TraceLens/tests/traces/b200/eager_trace.json.gz": (
        {("/tmp/torchinductor_root/ob/cobhwrc24pdghpldxgebph5xuspi6ydi477zebl46iwvbkhoe4qu.py(132): call",
          "vllm/model_executor/layers/vocab_parallel_embedding.py(156): get_masked_input_and_mask")}
        | {("flashinfer/jit/cubin_loader.py(185): get_cubin", f) for f in _PATHLIB_312}),
}


@pytest.mark.slow  # every shared trace
@pytest.mark.parametrize("rel", shared_trace_files())
def test_call_sites_follow_the_path_rule_on_shared_traces(shared_store, rel):
    """The call site of every stack is the innermost frame the rule (spelled out here) calls the
    user's; the stacks hold exactly the trace's frames; an event with a `Call stack` arg gets the
    call site of that arg's frames; and computed from the trace alone, the path rule differs from
    the former module-name rule only as listed in CHANGED_CALL_SITES."""
    path, results = shared_store
    events = trace_events(load_json(shared_dir() / rel, exact=False))
    call_stacks, chains = python_stacks(events)
    run_id = results[rel].run_id
    with traceduck.open(path) as db:
        stacks = {}
        for stack_id, frame in db.sql("SELECT stack_id, frame FROM stacks WHERE run_id = ? ORDER BY stack_id, frame_index",
                                      [run_id]).fetchall():
            stacks.setdefault(stack_id, []).append(frame)
        got = dict(db.sql("SELECT stack_id, call_site FROM call_sites WHERE run_id = ?", [run_id]).fetchall())
        by_event = dict(db.sql("""SELECT e.event_id, cs.call_site FROM events e
                                  JOIN call_sites cs ON cs.run_id = e.run_id AND cs.stack_id = e.stack_id
                                  WHERE e.run_id = ?""", [run_id]).fetchall())
    trace_frames = {f for frames in (*call_stacks.values(), *chains.values()) for f in frames}
    assert {f for frames in stacks.values() for f in frames} == trace_frames
    if not trace_frames:
        return
    assert got == {sid: call_site(frames) for sid, frames in stacks.items()}
    assert {i: by_event[i] for i in call_stacks} == {i: call_site(frames) for i, frames in call_stacks.items()}
    assert any(got.values())
    changed = {(call_site(f, former_is_user_frame), call_site(f)) for f in (*call_stacks.values(), *chains.values())
               if call_site(f, former_is_user_frame) != call_site(f)}
    assert changed == CHANGED_CALL_SITES.get(rel, set())


def _nested(tid: int, frames_outer_first: list[str], op: str) -> list[dict]:
    """python_function events, each inside the one before, and a CPU op inside the last."""
    out = []
    for k, frame in enumerate(frames_outer_first):
        out.append({"ph": "X", "cat": "python_function", "name": frame, "pid": 1, "tid": tid,
                    "ts": 100.0 + k, "dur": 100.0 - 2 * k, "args": {"Python id": tid * 100 + k}})
    out.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": tid, "ts": 150.0, "dur": 1.0,
                "args": {"Call stack": ";".join(reversed(frames_outer_first)), "External id": tid}})
    return out


# Stacks outermost first, with the call site expected (hand-checked).
USER_FILES_NAMED_LIKE_THE_STDLIB = [
    (["main.py(1): <module>", "profile.py(10): run_model", "torch/nn/modules/module.py(1747): _call_impl"],
     "profile.py(10): run_model"),
    (["main.py(1): <module>", "copy.py(5): save_weights", "torch/serialization.py(900): save"],
     "copy.py(5): save_weights"),
    (["main.py(1): <module>", "queue.py(7): worker_loop", "<built-in method mm of type object>"],
     "queue.py(7): worker_loop"),
    (["main.py(1): <module>", "trace.py(12): step", "torch/_tensor.py(40): wrapped"], "trace.py(12): step"),
    (["main.py(1): <module>", "code/model.py(20): forward", "torch/nn/functional.py(2000): linear"],
     "code/model.py(20): forward"),
    (["/home/me/proj/copy.py(5): save", "/usr/lib/python3.10/copy.py(128): deepcopy"], "/home/me/proj/copy.py(5): save"),
    # the standard library's own copy.py, queue.py and contextlib.py, written relative, are skipped
    (["train.py(30): clone_model", "copy.py(128): deepcopy", "copy.py(259): _reconstruct", "torch/_tensor.py(100): __deepcopy__"],
     "train.py(30): clone_model"),
    (["train.py(40): loader", "threading.py(1045): _bootstrap_inner", "queue.py(154): get"], "train.py(40): loader"),
    (["train.py(50): step", "contextlib.py(137): __enter__", "torch/autograd/profiler.py(700): __enter__"],
     "train.py(50): step"),
    # absolute paths of installed packages, the interpreter and torch.compile's output are not the user's
    (["/srv/app/run.py(3): main", "/opt/conda/lib/python3.10/site-packages/transformers/modeling_utils.py(10): f",
      "/usr/lib/python3/dist-packages/numpy/core/x.py(1): g", "/usr/lib64/python3.9/functools.py(880): wrapper",
      "/tmp/torchinductor_me/ab/cab.py(132): call", "<frozen runpy>(88): _run_code"], "/srv/app/run.py(3): main"),
    (["<frozen runpy>(88): _run_code", "copy.py(128): deepcopy"], None),
]


@pytest.mark.parametrize("source", ["python_function", "Call stack"])
@pytest.mark.slow  # 2 s
def test_user_files_named_like_standard_modules_are_call_sites(store, tmp_path, source):
    events = []
    for tid, (frames, _) in enumerate(USER_FILES_NAMED_LIKE_THE_STDLIB, start=1):
        nested = _nested(tid, frames, f"aten::op{tid}")
        if source == "Call stack":  # the op alone, its stack in the arg
            nested = nested[-1:]
        else:
            del nested[-1]["args"]["Call stack"]
        events += nested
    traceduck.ingest(write_trace(tmp_path / "t.json", events), store=store)
    with traceduck.open(store) as db:
        got = dict(db.sql("SELECT name, call_site FROM cpu_ops").fetchall())
    expected = {f"aten::op{tid}": cs for tid, (_, cs) in enumerate(USER_FILES_NAMED_LIKE_THE_STDLIB, start=1)}
    assert got == expected
    # the spelled-out rule agrees, and the former rule missed every user file named like a module
    assert {f"aten::op{tid}": call_site(list(reversed(f)))
            for tid, (f, _) in enumerate(USER_FILES_NAMED_LIKE_THE_STDLIB, start=1)} == expected
    assert call_site(list(reversed(USER_FILES_NAMED_LIKE_THE_STDLIB[0][0])), former_is_user_frame) == "main.py(1): <module>"


def test_rules_change_per_session(store, tmp_path):
    events = _nested(1, ["main.py(1): <module>", "vendored/lib.py(3): helper", "copy.py(5): save_weights"], "aten::x")
    traceduck.ingest(write_trace(tmp_path / "t.json", events), store=store)
    with traceduck.open(store) as db:
        assert db.sql("SELECT call_site FROM cpu_ops").fetchall() == [("copy.py(5): save_weights",)]
        db.sql("INSERT INTO stdlib_functions VALUES ('copy.py', 'save_weights')")
        assert db.sql("SELECT call_site FROM cpu_ops").fetchall() == [("vendored/lib.py(3): helper",)]
        db.sql("INSERT INTO call_site_rules VALUES ('vendored/%', 'vendored library')")
        assert db.sql("SELECT call_site FROM cpu_ops").fetchall() == [("main.py(1): <module>",)]


def test_stdlib_table_lists_the_standard_library():
    """The table holds the standard library's files (relative to its directory) with the
    functions they define, as Python itself reports them, and no `<module>`, tests or packages."""
    import concurrent.futures.thread
    import contextlib
    import copy
    import logging
    import queue

    header = _STDLIB_TABLE.read_text().splitlines()[0]
    built_by = re.search(r"Python (\d+)\.(\d+)", header).groups()
    for module in (copy, contextlib, queue, logging, concurrent.futures.thread):
        file = Path(module.__file__).relative_to(Path(copy.__file__).parent).as_posix()
        members = list(vars(module).values())
        members += [f for cls in members if isinstance(cls, type) for f in vars(cls).values()]
        defined = {f.__code__.co_name for f in members
                   if hasattr(f, "__code__") and f.__code__.co_filename == module.__file__}
        if tuple(map(str, sys.version_info[:2])) == built_by:
            assert defined <= STDLIB[file], (file, defined - STDLIB[file])
        else:  # another Python: the long-standing ones
            assert {"deepcopy", "_reconstruct", "__enter__", "__exit__", "get", "put"} & defined <= STDLIB[file]
    assert not any(file.startswith(("test/", "site-packages/")) or "/tests/" in file for file in STDLIB)
    assert not any("<module>" in names for names in STDLIB.values())
    assert "code.py" in STDLIB and not any(f.startswith("code/") for f in STDLIB)
