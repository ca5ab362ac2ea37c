"""One vocabulary for ingest and views: event categories, launch calls, profiler steps, ops.

Expected values come from the hand-made events written here or from plain `json` over real traces.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import defaultdict
from decimal import Decimal

import pyarrow.parquet as pq
import pytest

import traceduck
from traceduck import reference
from traceduck.catalog import schema_stamp
from traceduck.errors import StoreError
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
