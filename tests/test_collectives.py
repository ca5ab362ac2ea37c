"""Communication: the one rule that says which kernels are collectives (and which), the `collectives`
report on every shared trace against plain json, and the job a run belongs to (`ranks` refuses runs
of several jobs)."""

from __future__ import annotations

import gzip
import json
import math
import re
import subprocess
import sys
from collections import Counter, defaultdict
from datetime import datetime, timezone
from decimal import Decimal

import pytest

import traceduck
from traceduck.api import Database
from traceduck.errors import JobSelectionError
from traceduck.store import Store

from conftest import load_json, run_report, shared_dir, shared_trace_files, trace_events, union_length, write_trace

# Hand-checked: the collective and element type of every communication kernel in the shared traces,
# by the identifier in its name. The int8_t of SendRecv/Broadcast/AllGather kernels is NCCL's byte
# type, not the tensor's, so no dtype comes from those names.
KERNELS = {
    "ncclKernel_AllReduce_RING_LL_Sum_float": ("allreduce", "float32"),
    "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t": ("sendrecv", None),
    "ncclKernel_Broadcast_RING_LL_Sum_int8_t": ("broadcast", None),
    "ncclDevKernel_AllGather_RING_LL": ("allgather", None),
    "ncclKernel_AllReduce": ("allreduce", None),
    "multimem_all_reduce_kernel": ("allreduce", None),  # PyTorch symmetric memory (b200 trace)
}
# The `Collective name` and `dtype` arg values seen in the shared traces, by hand.
ARG_FAMILY = {"allreduce": "allreduce", "broadcast": "broadcast", "_allgather_base": "allgather", "wait": "wait"}
ARG_DTYPE = {"Float": ("float32", 4), "Long": ("int64", 8), "BFloat16": ("bfloat16", 2), "Byte": ("uint8", 1)}
# A cheap pre-filter: a trace without any of these bytes has no communication kernel.
MAYBE_COMM = re.compile(rb"(?i)nccl|rccl|msccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|collective name")


def ns(v) -> int:
    return int(Decimal(v) * 1000)


def comm_kernel(name: str):
    """The KERNELS entry of a kernel name, or None for compute kernels."""
    for ident in re.findall(r"\w+", name):
        if ident in KERNELS:
            return KERNELS[ident]
    return None


@pytest.fixture(scope="module")
def empty_db(tmp_path_factory):
    with Database(Store(tmp_path_factory.mktemp("empty"))) as db:
        yield db


@pytest.mark.parametrize("name, expected", [
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", ("allreduce", "float32")),
    ("ncclKernel_AllGather_RING_LL_Sum_int8_t", ("allgather", None)),
    ("ncclDevKernel_SendRecv", ("sendrecv", None)),
    ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", ("reducescatter", "bfloat16")),
    ("ncclDevKernel_Reduce_Sum_f16_TREE_LL", ("reduce", "float16")),
    ("ncclDevKernel_Broadcast_RING_LL", ("broadcast", None)),
    ("ncclKernel_AllToAllPivot_RING_SIMPLE_Sum_int8_t", ("alltoall", None)),  # RCCL
    ("ncclKernel_AllReduce_RING_LL_Sum_rccl_bfloat16(ncclDevComm*, unsigned long, ncclWork*)", ("allreduce", "bfloat16")),
    ("ncclKernel_AllReduce_RING_LL_Sum___nv_bfloat16(ncclWorkElem)", ("allreduce", "bfloat16")),
    ("ncclDevKernel_AllReduce_Sum_f8e4m3_RING_LL", ("allreduce", "float8_e4m3fn")),
    ("ncclDevKernel_AllReduce_Sum_i64_NVLS_SIMPLE", ("allreduce", "int64")),
    ("ncclDevKernel_Generic", ("unknown", None)),
    ("ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)", ("unknown", None)),
    ("void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*)", ("allreduce", None)),
    ("void at::native::reduce_kernel<512, 1>(at::native::ReduceOp<float>)", (None, None)),
    ("small_reduce_kernel", (None, None)),  # 'all_reduce' inside a longer word
    ("broadcast_add_kernel", (None, None)),
])
def test_the_communication_rule(empty_db, name, expected):
    assert empty_db.sql("SELECT kernel_collective($n), kernel_collective_dtype($n)", {"n": name}).fetchall() == [expected]


@pytest.mark.parametrize("arg, family", [
    ("allreduce", "allreduce"), ("allreduce_coalesced", "allreduce"), ("all_gather", "allgather"),
    ("_allgather_base", "allgather"), ("all_gather_into_tensor_coalesced", "allgather"),
    ("reduce_scatter", "reducescatter"), ("_reduce_scatter_base", "reducescatter"),
    ("reduce_scatter_tensor_coalesced", "reducescatter"), ("all_to_all", "alltoall"), ("all_to_allv", "alltoall"),
    ("_broadcast_oop", "broadcast"), ("send", "send"), ("barrier", "barrier"), ("wait", "wait"),
])
def test_collective_names_are_normalised(empty_db, arg, family):
    assert empty_db.sql("SELECT collective_family($a)", {"a": arg}).fetchall() == [(family,)]


# Hand-checked: the `Input type` of the nccl:* annotations in the shared traces as torch dtypes with
# their sizes, and the annotations' collective names as families.
INPUT_TYPE = {"float": ("float32", 4), "unsigned char": ("uint8", 1), "signed char": ("int8", 1),
              "long": ("int64", 8), "int": ("int32", 4), "c10::BFloat16": ("bfloat16", 2)}
ANNOTATION_FAMILY = {"all_to_all": "alltoall", "all_reduce": "allreduce", "_all_gather_base": "allgather",
                     "_reduce_scatter_base": "reducescatter", "broadcast": "broadcast"}


def kernel_namers(events: list) -> dict:
    """{correlation: CPU event} from plain json: for each kernel launch call (not a graph launch),
    the innermost event around it on its thread that carries a `Collective name` arg, else the
    innermost `nccl:*` annotation around it."""
    launches, namers = {}, defaultdict(list)
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        args = e.get("args") or {}
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "Launch" in e["name"] and "Graph" not in e["name"]:
            launches[args["correlation"]] = e
        elif e.get("cat") != "kernel" and ("Collective name" in args or e.get("name", "").startswith("nccl:")):
            namers[(e["pid"], e["tid"])].append(e)
    found = {}
    for corr, launch in launches.items():
        t = ns(launch["ts"])
        around = [n for n in namers[(launch["pid"], launch["tid"])] if ns(n["ts"]) <= t < ns(n["ts"]) + ns(n["dur"])]
        if around:
            found[corr] = max(around, key=lambda n: ("Collective name" in n["args"], ns(n["ts"]), -ns(n["dur"])))
    return found


def annotation_sizes(annotation: dict) -> tuple:
    """(family, name, dtype, elements, bytes) of a nccl:* annotation, from its Input Dims and Input type."""
    name = annotation["name"].split(":", 1)[1]
    args = annotation["args"]
    inputs = [(d, INPUT_TYPE[t]) for d, t in zip(args.get("Input Dims", []), args.get("Input type", [])) if t in INPUT_TYPE]
    nelems = [math.prod(d) for d, _ in inputs]
    dtypes = {dt for _, (dt, _) in inputs}
    return (ANNOTATION_FAMILY[name], name, dtypes.pop() if len(dtypes) == 1 else None,
            sum(nelems) if inputs else None, sum(n * size for n, (_, (_, size)) in zip(nelems, inputs)) if inputs else None)


def expected_collectives(rel: str):
    """(report rows keyed by side/collective/arg/source/dtype, comm union per device), from plain json."""
    raw = (shared_dir() / rel).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if not MAYBE_COMM.search(raw):
        return {}, {}
    doc = load_json(shared_dir() / rel)
    rows: dict[tuple, Counter] = defaultdict(Counter)
    per_device = defaultdict(list)
    namers = kernel_namers(trace_events(doc))
    for e in trace_events(doc):
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        args = e.get("args") or {}
        is_kernel = str(e.get("cat", "")).lower() == "kernel"
        source = "args"
        if is_kernel:
            kernel = comm_kernel(e.get("name", ""))
            if kernel is None:
                continue
            per_device[args.get("device", e.get("pid"))].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])))
            namer = namers.get(args.get("correlation"))
            if "Collective name" not in args and namer is not None:
                source = "launch_op" if "Collective name" in namer["args"] else "annotation"
                args = namer["args"] if source == "launch_op" else args
        elif "Collective name" not in args:
            continue
        if "Collective name" in args:
            dtype, size = ARG_DTYPE[args["dtype"]]
            family = ARG_FAMILY[args["Collective name"]]
            nelems = args.get("In msg nelems")
            # nccl-tests' message: the gathered output for allgather, the input otherwise
            msg = args.get("Out msg nelems" if family == "allgather" else "In msg nelems")
            key = ("gpu" if is_kernel else "cpu", family, args["Collective name"], source, dtype,
                   None if msg is None else msg * size)
            in_bytes = None if nelems is None else nelems * size
        elif source == "annotation":
            family, name, dtype, nelems, in_bytes = annotation_sizes(namer)
            # an annotation records the inputs only: no gathered size for allgather
            key = ("gpu", family, name, "annotation", dtype or kernel[1], None if family == "allgather" else in_bytes)
        else:
            key = ("gpu", kernel[0], None, "kernel_name", kernel[1], None)
            nelems = in_bytes = None
        row = rows[key]
        row["calls"] += 1
        row["total_dur_ns"] += ns(e["dur"])
        if nelems is not None:
            row["total_bytes"] += in_bytes
            row["max_in_nelems"] = max(row["max_in_nelems"], nelems)
    return rows, per_device


@pytest.mark.slow  # every shared trace
@pytest.mark.parametrize("rel", shared_trace_files())
def test_collectives_match_json_and_gpu_utilization(shared_store, rel):
    """Every communication kernel is a collective (named by its arg, else by the args or nccl:*
    annotation around its launch, else by its kernel name), and the
    report's GPU communication time is gpu-utilization's, on every shared trace."""
    path, results = shared_store
    expected, per_device = expected_collectives(rel)
    with traceduck.open(path) as db:
        scoped = db.scoped([results[rel].run_id])
        columns, rows = run_report(scoped, "collectives")
        rows = [dict(zip(columns, r)) for r in rows]
        ucols, urows = run_report(scoped, "gpu-utilization")
        util = [dict(zip(ucols, r)) for r in urows]
        scoped.close()
    got = {(r["side"], r["collective"], r["collective_arg"], r["source"], r["dtype"], r["msg_bytes"]): r for r in rows}
    assert set(got) == set(expected)
    for key, want in expected.items():
        r = got[key]
        assert (r["calls"], r["total_dur_ns"]) == (want["calls"], want["total_dur_ns"]), key
        if key[3] != "kernel_name" and "max_in_nelems" in want:
            assert (r["total_bytes"], r["max_in_nelems"]) == (want["total_bytes"], want["max_in_nelems"]), key
        else:
            assert r["total_bytes"] is None and r["max_in_nelems"] is None and r["avg_in_nelems"] is None
    comm_ns = sum(union_length(v) for v in per_device.values())
    assert sum(u["communication_ns"] for u in util) == comm_ns
    assert {r["run_comm_busy_ns"] for r in rows} <= {comm_ns}


@pytest.mark.slow  # the store of every shared trace
def test_collectives_when_only_some_kernels_carry_the_arg(shared_store):
    """b200 eager: one all-gather kernel has `Collective name`, 73 symmetric-memory all-reduce
    kernels do not; all are in the report and the totals add up to gpu-utilization's."""
    path, results = shared_store
    rel = "public/AMD-AGI__TraceLens/tests/traces/b200/eager_trace.json.gz"
    events = trace_events(load_json(shared_dir() / rel))
    kernels = [e for e in events if e.get("cat") == "kernel" and comm_kernel(e["name"])]
    with_arg = [e for e in kernels if "Collective name" in e["args"]]
    assert (len(kernels), len(with_arg)) == (74, 1)
    with traceduck.open(path) as db:
        columns, rows = run_report(db, "collectives", runs=[results[rel].run_id])
    gpu = {(r[columns.index("collective")], r[columns.index("source")]): r[columns.index("calls")]
           for r in rows if r[columns.index("side")] == "gpu"}
    assert gpu == {("allgather", "args"): 1, ("allreduce", "kernel_name"): 73}


SAMPLED_RANKS = ["public/facebookresearch__HolisticTraceAnalysis/tests/data/trace_filter/sampled_rank-0.json.gz",
                 "public/facebookresearch__HolisticTraceAnalysis/tests/data/trace_filter/sampled_rank-1.json.gz"]


@pytest.fixture(scope="module")
def sampled_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("sampled") / "store"
    traceduck.ingest([shared_dir() / rel for rel in SAMPLED_RANKS], store=path, jobs=1)
    with traceduck.open(path) as db:
        yield db


@pytest.mark.parametrize("rel", SAMPLED_RANKS)
def test_kernels_named_by_the_annotation_around_their_launch(sampled_db, rel):
    """HTA's sampled ranks: every NCCL kernel is `ncclKernel_SendRecv_*` and carries no collective
    args; the `nccl:*` annotation around its launch names the collective and gives its input size and
    dtype. Per kernel (by correlation) against plain json."""
    events = trace_events(load_json(shared_dir() / rel))
    namers = kernel_namers(events)
    kernels = [e for e in events if e.get("cat") == "kernel" and comm_kernel(e["name"])]
    assert {comm_kernel(e["name"]) for e in kernels} == {("sendrecv", None)}
    assert not any("Collective name" in e["args"] for e in kernels)
    want = {}
    for e in kernels:
        family, name, dtype, nelems, nbytes = annotation_sizes(namers[e["args"]["correlation"]])
        want[e["args"]["correlation"]] = (family, name, "annotation", dtype, nelems, nbytes,
                                          None if family == "allgather" else nbytes, ns(e["dur"]))
    # by hand from the json: 4 all_reduce, 4 all_to_all (int64, uint8 twice, int32), 2 _all_gather_base per rank
    assert Counter(w[0] for w in want.values()) == {"allreduce": 4, "alltoall": 4, "allgather": 2}
    name = rel.rsplit("/", 1)[1][:-len(".json.gz")]
    run_id = sampled_db.sql("SELECT run_id FROM runs WHERE name = $n", {"n": name}).fetchall()[0][0]
    got = sampled_db.sql("""
        SELECT e.correlation, c.collective, c.collective_arg, c.source, c.dtype, c.in_nelems, c.in_bytes, c.msg_bytes, c.dur_ns,
               a.name LIKE 'nccl:%' AND a.category = 'user_annotation'
        FROM collectives c JOIN events e USING (run_id, event_id)
        JOIN events a ON a.run_id = c.run_id AND a.event_id = c.named_by_event_id
        WHERE c.run_id = $r AND c.side = 'gpu'""", {"r": run_id}).fetchall()
    assert {r[0]: r[1:9] for r in got} == want
    assert all(r[9] for r in got)


def test_kernels_named_by_the_op_around_their_launch(tmp_path):
    """A kernel without args launched inside a record_param_comms op with `Collective name` takes the
    op's args (launch_op) even inside a nccl:* annotation; a kernel inside an annotation only takes
    the annotation's name and input; a graph launch takes neither (one graph holds many kernels)."""
    def x(cat, name, ts, dur, tid=1, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}

    def kernel(name, ts, corr):
        return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 20, "ts": ts, "dur": 10,
                "args": {"correlation": corr, "device": 0, "stream": 20}}

    events = [
        x("cpu_op", "record_param_comms", 100, 50, **{"Collective name": "all_to_allv", "dtype": "BFloat16",
          "In msg nelems": 1024, "Out msg nelems": 2048, "Group size": 4, "Process Group Name": "0"}),
        x("user_annotation", "nccl:all_to_all", 105, 40, **{"Input Dims": [[1024]], "Input type": ["c10::BFloat16"]}),
        x("cuda_runtime", "cudaLaunchKernel", 110, 5, correlation=7),
        kernel("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", 120, 7),
        x("user_annotation", "nccl:all_reduce", 200, 20, **{"Input Dims": [[256], [64]], "Input type": ["float", "float"]}),
        x("cuda_runtime", "cudaLaunchKernel", 205, 5, correlation=8),
        kernel("ncclDevKernel_Generic", 210, 8),
        x("user_annotation", "nccl:all_reduce", 300, 20, **{"Input Dims": [[256]], "Input type": ["float"]}),
        x("cuda_runtime", "cudaGraphLaunch", 305, 5, correlation=9),
        kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 310, 9),
        # on another thread: the annotation on thread 1 does not name it
        x("cuda_runtime", "cudaLaunchKernel", 206, 5, tid=2, correlation=10),
        kernel("ncclDevKernel_SendRecv", 400, 10),
    ]
    trace = write_trace(tmp_path / "t.json", events, distributedInfo={"rank": 0, "world_size": 8})
    store = tmp_path / "store"
    traceduck.ingest([trace], store=store, jobs=1)
    with traceduck.open(store) as db:
        rows = db.sql("""SELECT side, name, collective, collective_arg, source, named_by_event_id, dtype, in_nelems,
                                out_nelems, in_bytes, out_bytes, group_size, msg_bytes, n_ranks
                         FROM collectives ORDER BY ts_ns, side""").fetchall()
    assert rows == [
        ("cpu", "record_param_comms", "alltoall", "all_to_allv", "args", 0, "bfloat16", 1024, 2048, 2048, 4096, 4, 2048, 4),
        ("gpu", "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "alltoall", "all_to_allv", "launch_op", 0,
         "bfloat16", 1024, 2048, 2048, 4096, 4, 2048, 4),
        ("gpu", "ncclDevKernel_Generic", "allreduce", "all_reduce", "annotation", 4, "float32", 320, None, 1280, None,
         None, 1280, 8),
        ("gpu", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "allreduce", None, "kernel_name", None, "float32", None, None,
         None, None, None, None, 8),
        ("gpu", "ncclDevKernel_SendRecv", "sendrecv", None, "kernel_name", None, None, None, None, None, None, None,
         None, 8),
    ]


# --- jobs ---------------------------------------------------------------------------------------

HTA = "public/facebookresearch__HolisticTraceAnalysis/tests/data/"
SAMPLED = [HTA + "trace_filter/sampled_rank-0.json.gz", HTA + "trace_filter/sampled_rank-1.json.gz"]
GLOO = HTA + "cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
RANK1 = HTA + "trace_file_list/inference_rank_1.json.gz"


def td(*args):
    return subprocess.run([sys.executable, "-m", "traceduck", *map(str, args)], capture_output=True, text=True)


def job_start(rels: list[str]) -> str:
    """UTC start (to the second) of the earliest event of these traces, from plain json."""
    starts = []
    for rel in rels:
        doc = load_json(shared_dir() / rel)
        base = doc.get("baseTimeNanoseconds", 0)
        starts.append(min(base + ns(e["ts"]) for e in trace_events(doc) if e.get("ph") != "M" and "ts" in e))
    return datetime.fromtimestamp(min(starts) // 10**9, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


@pytest.fixture(scope="module")
def jobs_store(tmp_path_factory):
    store = tmp_path_factory.mktemp("jobs") / "store"
    for rel in SAMPLED + [GLOO]:
        assert td("ingest", shared_dir() / rel, "--store", store, "-q").returncode == 0
    assert td("ingest", shared_dir() / RANK1, "--store", store, "-q", "--label", "job=mixed").returncode == 0
    return store


@pytest.mark.slow  # 7 s
def test_jobs_group_runs_by_label_else_distributed_identity(jobs_store):
    docs = {rel: load_json(shared_dir() / rel) for rel in SAMPLED + [GLOO]}
    info = {rel: d["distributedInfo"] for rel, d in docs.items()}
    assert {(i["backend"], i["world_size"]) for rel, i in info.items() if rel in SAMPLED} == {("nccl", 128)}
    with traceduck.open(jobs_store) as db:
        jobs = db.sql("SELECT job, job_source, runs, ranks, run_names FROM jobs ORDER BY job").fetchall()
    gloo = info[GLOO]
    assert jobs == [
        (f"gloo world_size={gloo['world_size']} from {job_start([GLOO])}", "distributed", 1, [gloo["rank"]],
         ["rank-34.Jul_15_10_52_41.1074.pt.trace"]),
        ("job=mixed", "label", 1, [1], ["inference_rank_1"]),
        (f"nccl world_size=128 from {job_start(SAMPLED)}", "distributed", 2, [0, 1], ["sampled_rank-0", "sampled_rank-1"]),
    ]


@pytest.mark.slow  # 2 s
def test_ranks_refuses_runs_of_several_jobs(jobs_store):
    p = td("report", "ranks", "--store", jobs_store, "--run", "sampled_rank-0", "--run", "sampled_rank-1",
           "--run", "rank-34.Jul_15_10_52_41.1074.pt.trace")
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr == (
        "Error: report ranks needs the runs of one job, the selected runs form 2 jobs: "
        f"gloo world_size=300 from {job_start([GLOO])} (1 run: rank-34.Jul_15_10_52_41.1074.pt.trace), "
        f"nccl world_size=128 from {job_start(SAMPLED)} (2 runs: sampled_rank-0, sampled_rank-1). "
        "Select one job with --run label:job=NAME (label its runs at ingest: --label job=NAME), "
        "or name each of its runs with --run.\n")
    everything = td("report", "ranks", "--store", jobs_store)  # default: every run, three jobs
    assert everything.returncode == 1
    assert everything.stderr.startswith("Error: report ranks needs the runs of one job, the selected runs form 3 jobs: ")
    one = td("report", "ranks", "--store", jobs_store, "--run", "sampled_rank-0", "--run", "sampled_rank-1", "-f", "json")
    assert one.returncode == 0, one.stderr
    assert sorted(r["rank"] for r in json.loads(one.stdout) if r["section"] == "rank") == [0, 1]


@pytest.mark.slow  # 4 s
def test_ranks_refuses_a_repeated_rank(jobs_store, tmp_path):
    store = tmp_path / "store"
    for rel in (SAMPLED[1], RANK1):
        assert td("ingest", shared_dir() / rel, "--store", store, "-q", "--label", "job=mixed").returncode == 0
    ranks = {load_json(shared_dir() / rel)["distributedInfo"]["rank"] for rel in (SAMPLED[1], RANK1)}
    assert ranks == {1}
    p = td("report", "ranks", "--store", store, "--run", "label:job=mixed")
    assert p.returncode == 1
    assert p.stderr == (
        "Error: report ranks needs one run per rank, the selected runs of job=mixed repeat rank 1 "
        "(inference_rank_1, sampled_rank-1). Select one job with --run label:job=NAME (label its runs at ingest: "
        "--label job=NAME), or name each of its runs with --run.\n")
    with traceduck.open(store) as db, pytest.raises(JobSelectionError):
        run_report(db, "ranks")
