"""One vocabulary for ingest and views: event categories, launch calls, profiler steps, ops.

Expected values come from the hand-made events written here or from plain `json` over real traces.
"""

from __future__ import annotations

import ast
import csv
import io
import re
import shutil
import subprocess
import sys
import tokenize
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import traceduck
from traceduck import reference
from traceduck.catalog import schema_stamp, sql_dir, view_files
from traceduck.errors import StoreError
from traceduck.export import Window, export
from traceduck.store import Store

from conftest import load_json, shared_dir, trace_events, write_trace

UNKNOWN = ["KERNEL", "gpu_thing"]  # spellings no exporter writes: kept, counted, never device work


def _category_trace(path):
    """Per category: a cpu_op on thread (1, 1) around a CUDA kernel launch and an event of that
    category with the launch's correlation, on the same pid and tid; then a call of that category
    named like a kernel launch. Only device categories may leave the op's thread; only device
    work may appear in the GPU views; only runtime calls may be launches."""
    events = []
    for k, cat in enumerate([c.name for c in reference.EVENT_CATEGORIES] + UNKNOWN):
        t = 1000 * k
        events += [
            {"ph": "X", "cat": "cpu_op", "name": f"op {cat}", "pid": 1, "tid": 1, "ts": t, "dur": 100},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 10, "dur": 5,
             "args": {"correlation": 2 * k}},
            {"ph": "X", "cat": cat, "name": f"work {cat}", "pid": 1, "tid": 1, "ts": t + 20, "dur": 30,
             "args": {"correlation": 2 * k, "device": 0}},
            {"ph": "X", "cat": cat, "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 60, "dur": 5,
             "args": {"correlation": 2 * k + 1}},
        ]
    return write_trace(path, events)


def test_ingest_and_views_classify_categories_alike(tmp_path, store):
    traceduck.ingest(_category_trace(tmp_path / "cats.json"), store=store)
    with traceduck.open(store) as db:
        def categories(sql):
            return {c for (c,) in db.sql(sql).fetchall()}

        on_device = categories("SELECT category FROM events WHERE on_device")
        work = categories("""SELECT e.category FROM events e JOIN (SELECT event_id FROM gpu_kernels UNION ALL
                             SELECT event_id FROM gpu_memcpys UNION ALL SELECT event_id FROM gpu_memsets) w USING (event_id)""")
        linked = categories("""SELECT e.category FROM events e JOIN (SELECT event_id, op_name FROM gpu_kernels UNION ALL
                               SELECT event_id, op_name FROM gpu_memcpys UNION ALL SELECT event_id, op_name FROM gpu_memsets) w
                               USING (event_id) WHERE w.op_name = 'op ' || e.category""")
        busy = categories("SELECT e.category FROM activity a JOIN events e USING (event_id) WHERE a.lane <> 'cpu'")
        launchers = categories("SELECT e.category FROM launch_calls l JOIN events e USING (event_id)")
        nested = categories("SELECT category FROM events WHERE name LIKE 'work %' AND parent_id IS NOT NULL")
        annotations = categories("SELECT category FROM event_categories WHERE kind = 'device_annotation'")
        table = db.sql("SELECT category, kind, is_device, is_device_work, is_runtime, is_op FROM event_categories").fetchall()
        warnings = db.sql("SELECT warnings FROM runs").fetchall()[0][0]
    # what ingest puts on a device is what the GPU views count as work, plus device annotations
    assert on_device == work | annotations
    assert work == busy == linked and not work & annotations
    # the CPU thread's events nest under the op; device events have tracks of their own
    assert nested == set(reference.KNOWN_CATEGORIES + tuple(UNKNOWN)) - on_device
    assert {"xpu_runtime", "xpu_driver", "privateuse1_runtime", "privateuse1_driver", "hpu_op", "mtia_runtime",
            "cuda_runtime", "cuda_driver", "Runtime"} <= launchers
    assert not launchers & on_device and not launchers & set(UNKNOWN)
    assert {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset", "mtia_ccp_events"} <= work
    assert "gpu_user_annotation" in annotations and not set(UNKNOWN) & on_device
    assert warnings["unknown category (cat)"] == 2 * len(UNKNOWN)
    # the table in the connection is the Python vocabulary ingest used
    assert {r[0] for r in table if r[2]} == set(reference.DEVICE_CATEGORIES) == on_device
    assert {r[0] for r in table if r[3]} == work and {r[0] for r in table if r[4]} == launchers
    assert {r[0] for r in table if r[5]} == set(reference.OP_CATEGORIES)
    assert all(r[1] in reference.KINDS for r in table)
    assert len(table) == len({r[0] for r in table}) == len(reference.KNOWN_CATEGORIES)


def _backend_trace(path):
    """An XPU device and a PrivateUse1 device: kernels, a copy and sets launched from cpu_ops (XPU
    calls named as Kineto's XPU profiler correlates them)."""
    def x(cat, name, pid, tid, ts, dur, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}

    return write_trace(path, [
        x("user_annotation", "ProfilerStep#1", 10, 10, 50, 400),
        x("cpu_op", "aten::mm", 10, 10, 100, 50),
        x("xpu_runtime", "urEnqueueKernelLaunch", 10, 10, 110, 5, correlation=1),
        x("xpu_runtime", "urEnqueueUSMMemcpy", 10, 10, 130, 3, correlation=2),
        x("xpu_runtime", "urEnqueueUSMFill", 10, 10, 135, 2, correlation=5),
        x("kernel", "gemm_kernel", 0, 1, 120, 30, correlation=1, device=0, stream=1),
        x("gpu_memcpy", "Memcpy M2D", 0, 1, 160, 4, correlation=2, device=0, stream=1, bytes=1024),
        x("gpu_memset", "Memset (Device)", 0, 1, 170, 1, correlation=5, device=0, stream=1, bytes=32),
        x("cpu_op", "aten::add", 10, 10, 200, 50),
        x("privateuse1_runtime", "launchKernel", 10, 10, 210, 5, correlation=3),
        # written on the CPU thread's pid and tid, inside aten::add: still device work, not a child
        x("kernel", "add_kernel", 10, 10, 215, 10, correlation=3, device=1, stream=7),
        x("privateuse1_driver", "memsetAsync", 10, 10, 230, 2, correlation=4),
        x("gpu_memset", "Memset (Device)", 1, 7, 240, 2, correlation=4, device=1, stream=7, bytes=64),
    ])


def test_xpu_and_privateuse1_work_links_to_its_launch(tmp_path, store):
    traceduck.ingest(_backend_trace(tmp_path / "backends.json"), store=store)
    with traceduck.open(store) as db:
        kernels = db.sql("""SELECT name, device, stream, launch_name, op_name, queue_delay_ns, step, is_graph_launched
                            FROM gpu_kernels ORDER BY ts_ns""").fetchall()
        copies = db.sql("SELECT name, launch_name, op_name, bytes FROM gpu_memcpys").fetchall()
        sets = db.sql("SELECT name, launch_name, op_name, bytes FROM gpu_memsets ORDER BY ts_ns").fetchall()
        ops = db.sql("SELECT name, self_dur_ns, is_top_level FROM cpu_ops ORDER BY ts_ns").fetchall()
        parent = db.sql("SELECT parent_id, on_device FROM events WHERE name = 'add_kernel'").fetchall()
        lanes = db.sql("SELECT lane, kind, count(*) FROM activity GROUP BY ALL ORDER BY ALL").fetchall()
    assert kernels == [("gemm_kernel", 0, 1, "urEnqueueKernelLaunch", "aten::mm", 10_000, 1, False),
                       ("add_kernel", 1, 7, "launchKernel", "aten::add", 5_000, 1, False)]
    assert copies == [("Memcpy M2D", "urEnqueueUSMMemcpy", "aten::mm", 1024)]
    assert sets == [("Memset (Device)", "urEnqueueUSMFill", "aten::mm", 32), ("Memset (Device)", "memsetAsync", "aten::add", 64)]
    # self time: minus the runtime calls only (aten::add: 50 - 5 - 2 us; the kernel is not its child)
    assert ops == [("aten::mm", 40_000, True), ("aten::add", 43_000, True)]
    assert parent == [(None, True)]
    assert lanes == [("cpu", "cpu_op", 2), ("gpu:0", "compute", 1), ("gpu:0", "memcpy", 1), ("gpu:0", "memset", 1),
                     ("gpu:1", "compute", 1), ("gpu:1", "memset", 1)]


def test_profiler_steps_by_one_pattern(tmp_path, store):
    def x(cat, name, ts, dur, pid=1):
        return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": 1, "ts": ts, "dur": dur}

    traceduck.ingest(write_trace(tmp_path / "steps.json", [
        x("user_annotation", "ProfilerStep#3", 0, 100),
        x("gpu_user_annotation", "ProfilerStep#3", 20, 150, pid=0),
        x("Operator", "ProfilerStep#4", 200, 100),  # legacy: a step, not an op
        x("Operator", "aten::mm", 210, 10),
        x("cpu_op", "ProfilerStep#5x", 400, 10),  # an op named like a step, but not ProfilerStep#N
        x("user_annotation", "ProfilerStep#x", 500, 10),
        x("user_annotation", "ProfilerStep#99999999999999999999", 600, 10),  # beyond BIGINT: no step
        x("python_function", "ProfilerStep#6", 700, 10),  # not a category that marks steps
    ]), store=store)
    with traceduck.open(store) as db:
        steps = db.sql("SELECT step, ts_ns, dur_ns, gpu_ts_ns, gpu_dur_ns FROM steps ORDER BY step").fetchall()
        ops = db.sql("SELECT name, step, is_top_level FROM cpu_ops ORDER BY ts_ns").fetchall()
        macro = db.sql("SELECT step_number('ProfilerStep#12'), step_number('ProfilerStep#12 '), "
                       "step_number('xProfilerStep#1')").fetchall()
    assert steps == [(3, 0, 100_000, 20_000, 150_000), (4, 200_000, 100_000, None, None)]
    assert ops == [("aten::mm", 4, True), ("ProfilerStep#5x", None, True)]
    assert macro == [(12, None, None)]


TIMELINE = {"X", "i", "I", "B", "n", "P"}


def _ops_by_containment(events):
    """(CPU op indexes, top-level op indexes) with plain json: an op is a cpu_op, or a 2021
    Operator whose name has no '#', on the timeline; it is top level when no other op on its
    thread contains it (on one span, the op written first contains the other)."""
    ops, top = set(), set()
    threads = defaultdict(list)
    for i, e in enumerate(events):
        if e.get("ph") not in TIMELINE or e.get("ts") is None:
            continue
        if e.get("cat") == "cpu_op" or (e.get("cat") == "Operator" and "#" not in e.get("name", "")):
            ts = int(Decimal(e["ts"]) * 1000)
            end = ts + max(int(Decimal(e.get("dur", 0)) * 1000), 0)
            ops.add(i)
            threads[(str(e.get("pid")), str(e.get("tid")))].append((ts, -end, i))
    for spans in threads.values():
        spans.sort()
        reach = None  # the latest end among the ops that start earlier (or at once and are longer)
        for ts, neg_end, i in spans:
            if reach is None or not (reach > ts and reach >= -neg_end):
                top.add(i)
            reach = -neg_end if reach is None else max(reach, -neg_end)
    return ops, top


@pytest.mark.parametrize("rel", [
    "cpu/full.json",
    "cpu/train.json.gz",  # backward ops on their own thread
    "public/AMD-AGI__TraceLens/tests/traces/b200/eager_trace.json.gz",
    "public/pytorch__kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",  # 2021
])
@pytest.mark.slow  # 25 s
def test_op_flags_match_plain_json(shared_store, rel):
    path, results = shared_store
    ops, top = _ops_by_containment(trace_events(load_json(shared_dir() / rel)))
    with traceduck.open(path) as db:
        rows = db.sql("SELECT event_id, is_cpu_op, is_top_level_op FROM events WHERE run_id = ? AND (is_cpu_op OR is_top_level_op)",
                      [results[rel].run_id]).fetchall()
    assert {i for i, is_op, _ in rows if is_op} == ops
    assert {i for i, _, is_top in rows if is_top} == top
    assert 0 < len(top) < len(ops)


@pytest.mark.slow  # every shared trace
def test_op_flags_on_every_shared_trace(shared_store):
    path, _ = shared_store
    with traceduck.open(path) as db:
        bad = db.sql("""SELECT r.name, count(*) FROM events e JOIN runs r USING (run_id)
                        WHERE is_cpu_op IS DISTINCT FROM (cpu_op_id IS NOT DISTINCT FROM event_id)
                           OR is_top_level_op IS DISTINCT FROM (top_op_id IS NOT DISTINCT FROM event_id)
                           OR (is_top_level_op AND NOT is_cpu_op)
                           OR (is_cpu_op AND category NOT IN ('cpu_op', 'Operator'))
                        GROUP BY 1""").fetchall()
        top_level = db.sql("SELECT count(*) FROM cpu_ops WHERE is_top_level <> (parent_op_id IS NULL)").fetchall()[0][0]
    assert bad == [] and top_level == 0


def _drop_columns(run_dir, columns):
    """The run as an older traceduck wrote it: events without these columns, no stamp of this version."""
    table = pq.read_table(run_dir / "events.parquet")
    pq.write_table(table.drop_columns(columns), run_dir / "events.parquet")
    (run_dir / schema_stamp()).unlink()


@pytest.mark.slow  # 2 s
def test_a_store_from_an_older_version_asks_for_reingest(tmp_path, store):
    def x(name, ts, dur):
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}

    old_trace = write_trace(tmp_path / "old.json", [x("aten::mm", 0, 10), x("aten::add", 2, 3)])
    new_trace = write_trace(tmp_path / "new.json", [x("aten::mul", 0, 10)])
    old = traceduck.ingest(old_trace, store=store)[0].run_id
    _drop_columns(Store(store).run_dir(old), ["is_cpu_op", "is_top_level_op"])
    message = (f"run {old[:12]} in {store} comes from another traceduck version (events lacks is_cpu_op, is_top_level_op). "
               f"Re-ingest its trace: traceduck ingest {old_trace} --store {store} --force.")
    with pytest.raises(StoreError) as e:
        traceduck.open(store)
    assert str(e.value) == message
    # with runs of this version beside it: still an error, not answers without the old run's ops
    traceduck.ingest(new_trace, store=store)
    with pytest.raises(StoreError) as e:
        traceduck.open(store)
    assert str(e.value) == message
    cli = subprocess.run([sys.executable, "-m", "traceduck", "sql", "SELECT count(*) FROM cpu_ops", "--store", str(store)],
                         capture_output=True, text=True)
    assert (cli.returncode, cli.stdout, cli.stderr) == (1, "", f"Error: {message}\n")
    traceduck.ingest(old_trace, store=store, force=True)
    with traceduck.open(store) as db:
        assert db.sql("SELECT name, is_top_level FROM cpu_ops ORDER BY name").fetchall() == [
            ("aten::add", False), ("aten::mm", True), ("aten::mul", True)]


def test_a_store_opened_before_an_old_run_arrives_stops_at_it(tmp_path, store):
    def x(name):
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 0, "dur": 10}

    traceduck.ingest(write_trace(tmp_path / "a.json", [x("a")]), store=store)
    with traceduck.open(store) as db:
        assert db.sql("SELECT count(*) FROM cpu_ops").fetchall() == [(1,)]
        other = tmp_path / "other"
        run = traceduck.ingest(write_trace(tmp_path / "b.json", [x("b")]), store=other)[0].run_id
        _drop_columns(Store(other).run_dir(run), ["is_top_level_op"])
        shutil.copytree(Store(other).run_dir(run), Store(store).run_dir(run))
        with pytest.raises(StoreError) as e:
            db.sql("SELECT count(*) FROM cpu_ops")
        assert e.value.message == (f"run {run[:12]} in {store} comes from another traceduck version "
                                   "(events lacks is_top_level_op)")


# --- each vocabulary defined once ---------------------------------------------------------------
# The vocabularies live in sql/reference/*.csv (rows), in the macros of sql/views (name patterns)
# and in units.py (time units). The tests below read every SQL file (comments left out) and every
# Python module of traceduck and fail, naming file and line, where a second copy appears.

SRC = Path(traceduck.__file__).resolve().parent
SQL = sql_dir()


def _sql_code(text: str) -> str:
    """SQL text with its comments blanked (`--` to the end of the line, outside string literals),
    line numbers kept."""
    out, quoted, i = [], False, 0
    while i < len(text):
        ch = text[i]
        if ch == "'":
            quoted = not quoted
        elif not quoted and text.startswith("--", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _code_files() -> dict[str, str]:
    """Every SQL file of sql/ (comments blanked) and every Python module of traceduck, by path
    relative to its root (sql/views/gpu.sql, src/traceduck/export.py)."""
    files = {f"sql/{p.relative_to(SQL)}": _sql_code(p.read_text()) for p in sorted(SQL.rglob("*.sql"))}
    files.update({f"src/traceduck/{p.relative_to(SRC)}": p.read_text() for p in sorted(SRC.rglob("*.py"))})
    return files


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _literal_lists(name: str, text: str) -> list[tuple[int, list[str]]]:
    """(line, items) of every list of two or more string literals in code: a Python tuple, list or
    set of strings, a SQL list or IN list of strings."""
    found = []
    if name.endswith(".sql"):
        for m in re.finditer(r"[(\[]\s*('(?:[^']|'')*'(?:\s*,\s*'(?:[^']|'')*')+)\s*[)\]]", text):
            found.append((_line(text, m.start()), [s.replace("''", "'") for s in re.findall(r"'((?:[^']|'')*)'", m.group(1))]))
        return found
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline)
              if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)]
    for i, tok in enumerate(tokens):
        if tok.type != tokenize.OP or tok.string not in "([{":
            continue
        items, j = [], i + 1
        while j < len(tokens) and tokens[j].type == tokenize.STRING and tokens[j].string[:1] in "'\"":
            items.append(ast.literal_eval(tokens[j].string))
            j += 1
            if j < len(tokens) and tokens[j].string == ",":
                j += 1
        if len(items) >= 2 and j < len(tokens) and tokens[j].string in ")]}":
            found.append((tok.start[0], items))
    return found


def _vocabularies() -> dict[str, set[str]]:
    """The values of each vocabulary of sql/reference (its key column), and the time units."""
    def column(file: str, col: str) -> set[str]:
        return {r[col] for r in reference.read_csv(file)}

    return {
        "event kinds (event_kinds.csv)": column("event_kinds", "kind"),
        "event categories (event_categories.csv)": column("event_categories", "category"),
        "trace phases (trace_phases.csv)": column("trace_phases", "phase"),
        "copy ops (copy_ops.csv)": column("copy_ops", "name"),
        "op names (op_categories.csv)": column("op_categories", "pattern") | column("op_signatures", "op") - {None},
        "call-site rules (call_site_rules.csv)": column("call_site_rules", "pattern"),
        "time units (units.py)": {"ns", "us", "ms", "s"},
    }


def second_definitions() -> list[str]:
    """Where code defines a vocabulary again: file:line and what."""
    files = _code_files()
    found = []
    # three or more values of one vocabulary written out together: a copy of the vocabulary
    vocabularies = _vocabularies()
    for name, text in files.items():
        for line, items in _literal_lists(name, text):
            for vocab, values in vocabularies.items():
                listed = sorted(set(items) & values)
                if len(listed) >= 3:
                    found.append(f"{name}:{line}: {vocab} listed again: {listed}")

    def only_in(pattern: str, home: set[str], what: str) -> None:
        for name, text in files.items():
            if name not in home:
                found.extend(f"{name}:{_line(text, m.start())}: {what}: {m.group(0)!r}" for m in re.finditer(pattern, text))

    # runtime-call names (launches, graph launches, host functions, captures, syncs, event records
    # and stream waits): the macros of reference.sql
    only_in(r"GraphLaunch|HostFunc|(Begin|End)Capture|Begin\|End|Synchroni[sz]e|EventRecord|StreamWaitEvent|\(\?i\)\(launch"
            r"|memset\|fill|\(\?i\)memcpy", {"sql/views/reference.sql"}, "runtime-call name pattern outside reference.sql")
    # collectives: the words of is_collective_name and name_collective, and the families of
    # collective_family and busbw_factor (communication.sql)
    only_in(r"(?i)all_\?(reduce|gather)|reduce_\?scatter|all_\?to_\?all|%all_?(reduce|gather|to_?all)%|%reduce_?scatter%",
            {"sql/views/communication.sql"}, "collective name pattern outside communication.sql")
    # a device's index when the event has no `device` arg: device_of (gpu.sql)
    only_in(r"TRY_CAST\(\s*(\w+\.)?pid\s+AS\s+BIGINT\s*\)", {"sql/views/gpu.sql"}, "device fallback outside device_of")
    # GPU time classes: gpu_time_class (activity.sql) classifies GPU work by its kind; no other
    # classification, nor the critical path's old label set
    only_in(r"(?i)\b(item_kind|work_kind)\s+IN\s*\(\s*'memcpy'\s*,\s*'memset'\s*\)|\bwork_kind\s*<>\s*'kernel'"
            r"|(THEN|ELSE)\s+'gpu_(compute|copy)'", {"sql/views/activity.sql"}, "GPU time class outside gpu_time_class")
    # time units: units.py's NS_PER
    only_in(r"[\"'](ns|us|ms|s)[\"']\s*:\s*1[\d_]*\b|\bns\|us\|ms\b", {"src/traceduck/units.py"}, "time unit table outside units.py")
    # cost op signatures: op_signatures says where each op's inputs are; the formulas name no op
    # and no input position but the first (any op's first input)
    cost = files["sql/views/cost.sql"]
    found.extend(f"sql/views/cost.sql:{_line(cost, m.start())}: op or input position in a cost formula: {m.group(0)!r}"
                 for m in re.finditer(r"'(aten|_C|flash_attn|vllm)::[^']*'|\bins\[(?!1\])\d+", cost))
    # vocabulary rows: only in sql/reference
    for name, text in files.items():
        if name.endswith(".py"):
            found.extend(f"{name}:{_line(text, m.start())}: vocabulary rows in Python: {m.group(0)!r}"
                         for m in re.finditer(r"\bCategory\(\s*[\"']", text))
    return found


def test_each_vocabulary_is_defined_once():
    assert second_definitions() == []


def test_a_second_definition_is_found(monkeypatch):
    """The check finds copies, each added once: the device work kinds, trace phases, a launch-call
    pattern, a collective pattern, the device fallback, the critical path's old GPU time classes, a
    unit table, an input position and an op name in a cost formula, a vocabulary row in Python."""
    real = _code_files()
    copies = {
        "src/traceduck/export.py": 'WORK = ("kernel", "memcpy", "memset")\nFLOWS = ["s", "t", "f"]\nUNITS = {"us": 1_000}\n',
        "src/traceduck/reference.py": 'EXTRA = Category("cpu_op", "op", "Kineto 2023+")\n',
        "sql/views/activity.sql": "SELECT * FROM device_work(['kernel', 'memcpy', 'memset']) WHERE phase NOT IN ('M', 's', 't', 'f');\n"
                                  "SELECT regexp_matches(name, 'GraphLaunch');\n",
        "sql/views/critical_path.sql": "SELECT coalesce(x.device, TRY_CAST(x.pid AS BIGINT)),\n"
                                       "  CASE WHEN w.work_kind <> 'kernel' THEN 'gpu_copy' ELSE 'gpu_compute' END FROM x;\n",
        "sql/views/cost.sql": "SELECT ins[3] FROM m WHERE name = 'aten::addmm' OR name LIKE '%allreduce%';\n",
    }
    monkeypatch.setattr(sys.modules[__name__], "_code_files",
                        lambda: {name: text + copies.get(name, "") for name, text in real.items()})
    found = second_definitions()
    expected = [("sql/views/activity.sql", "event kinds (event_kinds.csv) listed again: ['kernel', 'memcpy', 'memset']"),
                ("sql/views/activity.sql", "trace phases (trace_phases.csv) listed again: ['M', 'f', 's', 't']"),
                ("sql/views/activity.sql", "runtime-call name pattern outside reference.sql: 'GraphLaunch'"),
                ("sql/views/critical_path.sql", "device fallback outside device_of: 'TRY_CAST(x.pid AS BIGINT)'"),
                ("sql/views/critical_path.sql", "GPU time class outside gpu_time_class: \"work_kind <> 'kernel'\""),
                ("sql/views/critical_path.sql", "GPU time class outside gpu_time_class: \"THEN 'gpu_copy'\""),
                ("sql/views/critical_path.sql", "GPU time class outside gpu_time_class: \"ELSE 'gpu_compute'\""),
                ("sql/views/cost.sql", "op or input position in a cost formula: 'ins[3'"),
                ("sql/views/cost.sql", "op or input position in a cost formula: \"'aten::addmm'\""),
                ("sql/views/cost.sql", "collective name pattern outside communication.sql: '%allreduce%'"),
                ("src/traceduck/export.py", "event kinds (event_kinds.csv) listed again: ['kernel', 'memcpy', 'memset']"),
                ("src/traceduck/export.py", "trace phases (trace_phases.csv) listed again: ['f', 's', 't']"),
                ("src/traceduck/export.py", "time unit table outside units.py: '\"us\": 1_000'"),
                ("src/traceduck/reference.py", "vocabulary rows in Python: 'Category(\"'")]
    for file, what in expected:
        assert any(f.startswith(file + ":") and f.endswith(what) for f in found), (file, what, found)
    assert {f.split(":")[0] for f in found} == {file for file, _ in expected}


def test_reference_tables_read_their_csv_files():
    """Every reference table of sql/views has its rows from sql/reference/<table>.csv (dtypes and
    the standard library's functions excepted: dtypes.py and stdlib_functions.txt), with the
    table's columns; event_categories takes its kinds' flags from event_kinds.csv; every CSV is read."""
    declared = {rel.name: rel for f in view_files() for rel in f.relations if rel.kind == "table"}
    files = {p.stem for p in reference.REFERENCE_DIR.glob("*.csv")}
    assert files == set(declared) - {"dtypes", "stdlib_functions"} | {"event_kinds"}
    for table, rel in declared.items():
        if table in files and table != "event_categories":
            with open(reference.REFERENCE_DIR / f"{table}.csv", newline="") as f:
                assert next(csv.reader(f)) == [c.name for c in rel.columns], table
        rows = reference.tables()[table]
        assert list(rows) == [c.name for c in rel.columns], table
    kinds = {r["kind"] for r in reference.read_csv("event_kinds")}
    assert {r["kind"] for r in reference.read_csv("event_categories")} <= kinds
    assert reference.REFERENCE_DIR == SQL / "reference"


def test_op_signatures_name_known_ops_and_models():
    """Every op of op_signatures has a cost formula in op_categories, every default row names a
    formula, and no op or default gives an argument twice."""
    models = {r["pattern"]: r["model"] for r in reference.read_csv("op_categories") if r["model"]}
    rows = reference.read_csv("op_signatures")
    assert all((r["op"] is None) != (r["model"] is None) for r in rows)
    assert {r["op"] for r in rows if r["op"]} <= set(models)
    assert {r["model"] for r in rows if r["model"]} <= set(models.values())
    assert all((r["input"] is None) != (r["value"] is None) for r in rows)
    keys = [(r["op"] or r["model"], r["argument"]) for r in rows]
    assert len(keys) == len(set(keys))


def test_trace_phases_agree_between_ingest_and_export(tmp_path, store):
    """Every Chrome phase ingest knows is one export knows: counters, async events and duration
    ends are kept whole and picked by a time window; they do not nest on their thread."""
    def e(ph, ts, **kw):
        return {"ph": ph, "cat": "cpu_op" if ph in "XBE" else "x", "name": f"{ph} event", "pid": 1, "tid": 1, "ts": ts, **kw}

    events = [e("X", 0, dur=100), e("B", 10), e("E", 20), e("C", 30, args={"v": 1}), e("b", 40, id=1), e("n", 45, id=1),
              e("e", 50, id=1), e("i", 60, s="t"), e("P", 70), e("s", 80, id=2), e("f", 90, id=2, bp="e"),
              {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}}]
    run = traceduck.ingest(write_trace(tmp_path / "phases.json", events), store=store)[0]
    with traceduck.open(store) as db:
        nested = {p for (p,) in db.sql("SELECT phase FROM events WHERE parent_id IS NOT NULL").fetchall()}
        phases = {r[0]: r[1:] for r in db.sql("SELECT phase, nests, is_timeline FROM trace_phases").fetchall()}
        warnings = db.sql("SELECT warnings FROM runs").fetchall()[0][0]
        out = tmp_path / "window.json"
        export(db, run.run_id, out, window=Window(start_ns=db.sql(
            "SELECT min(ts_ns) FROM events").fetchall()[0][0] + 25_000))
    written = {ev["ph"] for ev in load_json(out)["traceEvents"]}
    assert nested == {"B", "i", "P"}  # under the X; C, E, b, n, e and the flows do not nest
    assert nested == {p for p, (nests, _) in phases.items() if nests} - {"X", "I"}
    assert set(phases) == set(reference.KNOWN_PHASES) and "unknown phase (ph)" not in warnings
    assert {p for p, (_, timeline) in phases.items() if not timeline} == {"M", "s", "t", "f"}
    # from 25 us on: the X around it and every timeline event from there, the flows on the X, the
    # thread's metadata; not the B and E before
    assert written == {"X", "C", "b", "n", "e", "i", "P", "s", "f", "M"}
