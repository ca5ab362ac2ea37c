"""Report collective-skew (macro collective_skew): collectives matched across the ranks of a job by
their order on the communicator, against plain-json computations over the traces."""

from __future__ import annotations

from collections import defaultdict

import pytest

import traceduck
from conftest import load_json, run_report, shared_dir, trace_events, write_trace
from roundtrip import ns

SAMPLED = "public/facebookresearch__HolisticTraceAnalysis/tests/data/trace_filter/sampled_rank-{}.json.gz"


def kernel(name, ts, dur, stream, corr, **args):
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": stream, "correlation": corr, **args}}


ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
ALLGATHER = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def test_process_groups_match_in_their_own_order(tmp_path, store):
    """Rank 0 runs PG 0's allreduce before PG 1's allgather, rank 1 the other way round: matched by
    process group, not by time. Sizes from the kernels' args give the bandwidth over the shortest
    rank's time: allreduce 1e6 floats = 4e6 B in 100 us = 40 GB/s (bus factor 2(n-1)/n = 1);
    allgather 2e6 floats gathered = 8e6 B in 50 us = 160 GB/s (bus factor (n-1)/n = 0.5)."""
    def pg_args(pg, coll, n_in, n_out):
        return {"Process Group Name": pg, "Collective name": coll, "dtype": "Float", "In msg nelems": n_in,
                "Out msg nelems": n_out, "Group size": 2}

    ar, ag = pg_args("0", "allreduce", 1_000_000, 1_000_000), pg_args("1", "_allgather_base", 1_000_000, 2_000_000)
    ranks = {0: [kernel(ALLREDUCE, 100, 400, 20, 1, **ar), kernel(ALLGATHER, 600, 50, 21, 2, **ag)],
             1: [kernel(ALLGATHER, 150, 80, 21, 1, **ag), kernel(ALLREDUCE, 250, 100, 20, 2, **ar)]}
    for r, events in ranks.items():
        write_trace(tmp_path / f"rank{r}.json", events, distributedInfo={"backend": "nccl", "rank": r, "world_size": 2})
    traceduck.ingest([tmp_path / "rank0.json", tmp_path / "rank1.json"], store=store)
    with traceduck.open(store) as db:
        columns, rows = run_report(db, "collective-skew")
    got = {r[columns.index("communicator")]: dict(zip(columns, r)) for r in rows}
    assert set(got) == {"0", "1"}
    a, g = got["0"], got["1"]
    assert (a["collective"], a["instance"], a["ranks"], a["latest_rank"], a["run_name"]) == ("allreduce", 1, 2, 1, "rank1")
    assert (a["start_skew_ns"], a["end_skew_ns"]) == (150_000, 500_000 - 350_000)
    assert (a["shortest_dur_ns"], a["longest_dur_ns"], a["msg_bytes"]) == (100_000, 400_000, 4_000_000)
    assert (a["algbw_gb_s"], a["busbw_gb_s"]) == (40.0, 40.0)
    assert (g["collective"], g["latest_rank"], g["start_skew_ns"], g["end_skew_ns"]) == ("allgather", 0, 450_000, 420_000)
    assert (g["msg_bytes"], g["algbw_gb_s"], g["busbw_gb_s"]) == (8_000_000, 160.0, 80.0)
    with traceduck.open(store) as db:
        _, only = run_report(db, "collective-skew", params=["collective=allgather"])
    assert len(only) == 1


def test_the_two_sampled_ranks_of_htas_job(store):
    """HTA's trace_filter traces, ranks 0 and 1 of one job (no process group args): the NCCL kernels
    of each stream numbered by start on each rank, matched by number."""
    paths = [shared_dir() / SAMPLED.format(r) for r in (0, 1)]
    traceduck.ingest(paths, store=store)
    per_rank = {}
    for r, p in enumerate(paths):
        streams = defaultdict(list)
        for e in trace_events(load_json(p)):
            if e.get("cat") == "kernel" and e["name"].startswith("nccl"):
                streams[e["args"]["stream"]].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), ns(e["dur"])))
        per_rank[r] = {s: sorted(v) for s, v in streams.items()}
    want = {}
    for s in per_rank[0]:
        for n, (k0, k1) in enumerate(zip(per_rank[0][s], per_rank[1].get(s, [])), start=1):
            latest = 1 if k1[0] > k0[0] else 0
            want[f"stream {s}", n] = (abs(k1[0] - k0[0]), abs(k1[1] - k0[1]), latest, min(k0[2], k1[2]))
    with traceduck.open(store) as db:
        columns, rows = run_report(db, "collective-skew")
    c = {name: i for i, name in enumerate(columns)}
    got = {(r[c["communicator"]], r[c["instance"]]): (r[c["start_skew_ns"]], r[c["end_skew_ns"]], r[c["latest_rank"]],
                                                       r[c["shortest_dur_ns"]]) for r in rows}
    assert got == want and len(got) == 10
    # sizes from the nccl:* annotations around the launches (test_collectives): an allgather's gives
    # no output size; the others' bandwidth is over the shortest rank's time
    for r in rows:
        if r[c["msg_bytes"]] is None:
            assert r[c["collective"]] == "allgather" and r[c["algbw_gb_s"]] is None
        else:
            assert r[c["algbw_gb_s"]] == round(r[c["msg_bytes"]] / r[c["shortest_dur_ns"]], 3)
