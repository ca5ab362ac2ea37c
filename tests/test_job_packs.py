"""The rows of the reports that compare a job's ranks (overview, ranks, collectives, collective-skew)
kept in a pack by `traceduck compact`: read for whole jobs of the pack, grouped and named as when
packed, with default parameters; computed otherwise; the output the same byte for byte either way.
And a job whose ranks come over time (ingest some, compact, ingest the rest, compact) answers as
one ingest of all its ranks."""

from __future__ import annotations

import os
import sys
from decimal import Decimal
from pathlib import Path

import pytest

import traceduck
from conftest import ROOT, SAMPLES, load_json, shared_dir, union_length
from test_crash import run_id_of
from test_packs import cli

JOB_REPORTS = ["overview", "ranks", "collectives", "collective-skew"]
FORMATS = ["json", "csv", "table"]


def make_job(out: Path, ranks: int) -> list[Path]:
    """A job of `ranks` ranks made by bench/make_job.py from HTA's two public ranks."""
    shared_dir()
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from make_job import TEMPLATES, write_job
    finally:
        sys.path.pop(0)
    write_job(out, ranks, TEMPLATES)
    return [out / f"rank-{r}.json.gz" for r in range(ranks)]


def ns(v) -> int:
    return int(Decimal(str(v)) * 1000)


def gpu_busy_ns(path: Path) -> int:
    """GPU busy time of a trace by plain json: the union of its kernels, memcpys and memsets per
    device, summed over devices."""
    by_device: dict = {}
    for e in load_json(path)["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            by_device.setdefault(e["args"].get("device", e["pid"]), []).append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])))
    return sum(union_length(ivs) for ivs in by_device.values())


def outputs(capsys, store: Path, selections: list[list[str]]) -> dict:
    """Every job report in every format over each selection: (exit code, stdout, stderr)."""
    out = {}
    for sel in selections:
        args = [a for name in sel for a in ("--run", name)]
        for report in JOB_REPORTS:
            for fmt in FORMATS:
                out[(tuple(sel), report, fmt)] = cli(capsys, "report", report, "--store", store, "--format", fmt,
                                                     "--wide", *args) if fmt == "table" else \
                    cli(capsys, "report", report, "--store", store, "--format", fmt, *args)
    return out


def packed(store: Path, report: str, runs: list[str] | None = None, params: list[str] | None = None) -> bool:
    with traceduck.open(store) as db:
        query = db.report_query(report, runs=runs, params=params)
        try:
            return query.packed
        finally:
            query.close()


@pytest.mark.slow  # 100 s on two busy cores
def test_job_reports_come_from_the_pack_for_whole_jobs(tmp_path, capsys):
    import duckdb

    from traceduck.reports import JOB_RUNS_FILE, job_report_file

    ranks = make_job(tmp_path / "job", 4)
    store = tmp_path / "store"
    traceduck.ingest([*ranks, SAMPLES / "buggy.json.gz", SAMPLES / "fixed.json.gz"], store=store)
    job = [f"rank-{r}" for r in range(4)]
    selections = [[], job, job[:2], ["buggy"]]
    before = outputs(capsys, store, selections)
    # the store is two runs and a job: the reports of one job refuse it, the others answer
    assert before[((), "ranks", "json")][0] == 1 and "needs the runs of one job" in before[((), "ranks", "json")][2]
    assert before[(tuple(job), "ranks", "json")][0] == 0

    traceduck.compact(store=store)
    (pack,) = os.listdir(store / "packs")
    pack_dir = store / "packs" / pack
    # read from the pack over the runs it holds, with default parameters; a selection that leaves
    # some of its runs out reads the runs' own files (the pack is not read), so computes
    for report in ("overview", "collectives"):
        assert packed(store, report), report
        assert not packed(store, report, job) and not packed(store, report, ["buggy"])
    # a pack of several jobs keeps no rows of the reports that need one job
    assert not (pack_dir / f"{job_report_file('ranks')}.parquet").exists()
    # the output is the same, byte for byte, in every format
    assert outputs(capsys, store, selections) == before

    # a pack of one job keeps them all, read for that job
    traceduck.compact(job, store=store)
    (one,) = [p for p in os.listdir(store / "packs") if p != pack]
    assert {f"{job_report_file(r)}.parquet" for r in JOB_REPORTS} <= set(os.listdir(store / "packs" / one))
    for report in JOB_REPORTS:
        assert packed(store, report, job), report
        assert not packed(store, report, job[:3])
    assert not packed(store, "collective-skew", job, params=["collective=allreduce"])  # not its default
    assert packed(store, "overview")  # every run: the pack of all of them
    assert outputs(capsys, store, selections) == before

    # independent of both: one rank row per rank, each with its GPU busy time by plain json
    with traceduck.open(store) as db:
        rel = db.report("ranks", runs=job)
        rows = [dict(zip(rel.columns, r)) for r in rel.fetchall()]
    rank_rows = [r for r in rows if r["section"] == "rank"]
    assert [(r["rank"], r["item"]) for r in rank_rows] == [(r, f"rank-{r}") for r in range(4)]
    assert [r["gpu_busy_ns"] for r in rank_rows] == [gpu_busy_ns(p) for p in ranks]

    # the rows are the pack's: a changed file shows
    rows_file = store / "packs" / one / f"{job_report_file('ranks')}.parquet"
    duckdb.execute(f"COPY (SELECT * REPLACE (collective_wait_ns + 1000 AS collective_wait_ns) FROM '{rows_file}') "
                   f"TO '{rows_file}.new' (FORMAT parquet)")
    os.replace(f"{rows_file}.new", rows_file)
    with traceduck.open(store) as db:
        changed = db.report("ranks", runs=job).fetchall()
        at = list(db.report("ranks", runs=job).columns).index("collective_wait_ns")
        assert changed == [r[:at] + (r[at] + 1000,) + r[at + 1:] for r in map(tuple, (row.values() for row in rows))]
        # a session that changes a reference table computes with its tables
        db.sql("DELETE FROM op_categories WHERE false")
        assert db.report("ranks", runs=job).fetchall() == [tuple(r.values()) for r in rows]

    # a run renamed, or a job label that regroups the runs: computed, with the new name and job
    traceduck.rename(run_id_of(ranks[1]), "renamed", store=store)
    assert not packed(store, "ranks", [j if j != "rank-1" else "renamed" for j in job])
    with traceduck.open(store) as db:
        after = db.report("ranks", runs=[j if j != "rank-1" else "renamed" for j in job]).fetchall()
        name_at = list(db.report("ranks", runs=job[:1] + ["renamed"] + job[2:]).columns).index("run_name")
    assert [r[name_at] for r in after if r[2] == "rank"] == ["rank-0", "renamed", "rank-2", "rank-3"]
    assert [r[:name_at] + r[name_at + 1:] for r in after if r[2] != "rank"] == \
        [r[:name_at] + r[name_at + 1:] for r in map(tuple, (row.values() for row in rows)) if r[2] != "rank"]
    traceduck.rename(run_id_of(ranks[1]), "rank-1", store=store)
    assert packed(store, "ranks", job)
    traceduck.label([run_id_of(p) for p in ranks[:2]], {"job": "half"}, store=store)
    assert not packed(store, "overview", job[:2]) and not packed(store, "overview", job)
    # the runs' job list stored with the pack: the job of each run as when packed
    held = duckdb.execute(f"SELECT run_id, job_id FROM '{store / 'packs' / one / (JOB_RUNS_FILE + '.parquet')}'").fetchall()
    assert sorted(r for r, _ in held) == sorted(run_id_of(p) for p in ranks) and len({j for _, j in held}) == 1


def report_json(capsys, store: Path) -> dict[str, str]:
    """Every report's JSON over every run (its error, for the reports that need one job), and `runs`
    without ingested_at (when it was ingested)."""
    import json

    from traceduck.catalog import all_reports

    out = {name: cli(capsys, "report", name, "--store", store, "--format", "json") for name in sorted(all_reports())}
    code, text, err = cli(capsys, "runs", "--store", store, "--format", "json")
    out["runs"] = (code, [{k: v for k, v in r.items() if k != "ingested_at"} for r in json.loads(text)], err)
    return out


@pytest.mark.slow  # 200 s on two busy cores
def test_ranks_added_over_time_answer_as_one_ingest(tmp_path, capsys):
    ranks = make_job(tmp_path / "job", 6)
    once, over_time = tmp_path / "once", tmp_path / "over-time"
    traceduck.ingest(ranks, store=once)
    traceduck.compact(store=once)
    expected = report_json(capsys, once)
    assert all(code == 0 for code, _out, _err in expected.values())
    # key numbers by plain json: six ranks, each with its GPU busy time
    import json

    rank_rows = [r for r in json.loads(expected["ranks"][1]) if r["section"] == "rank"]
    assert [r["rank"] for r in rank_rows] == list(range(6))
    assert [r["gpu_busy_ns"] for r in rank_rows] == [gpu_busy_ns(p) for p in ranks]
    assert len(expected["runs"][1]) == 6

    traceduck.ingest(ranks[:4], store=over_time)
    traceduck.compact(store=over_time)
    traceduck.ingest(ranks[4:], store=over_time)
    assert report_json(capsys, over_time) == expected  # a pack of four ranks, two runs' own files
    assert not packed(over_time, "overview")
    traceduck.compact([run_id_of(p) for p in ranks[4:]], store=over_time)
    assert len(os.listdir(over_time / "packs")) == 2  # the job in two packs: its ranks compared anew
    assert not packed(over_time, "overview") and not packed(over_time, "ranks")
    assert report_json(capsys, over_time) == expected
    traceduck.compact(store=over_time)
    (pack,) = os.listdir(over_time / "packs")  # the packs of four and two are superseded
    assert packed(over_time, "overview") and packed(over_time, "ranks")
    assert report_json(capsys, over_time) == expected


@pytest.mark.slow  # 40 s
def test_overview_over_more_runs_than_a_slice_is_packed_a_slice_at_a_time(tmp_path, capsys, monkeypatch):
    """Over more than JOB_CHUNK runs compact computes overview's rows a slice of runs at a time (its
    findings read every op of the runs it covers), each slice against the stragglers of the whole
    pack: the packed rows are the rows computed over all runs at once, straggler included."""
    import duckdb

    from traceduck import compaction
    from traceduck.reports import job_report_file

    store = tmp_path / "store"
    traceduck.ingest(make_job(tmp_path / "job", 3), store=store)
    before = outputs(capsys, store, [[]])
    assert '"straggler"' in before[((), "overview", "json")][1]  # the finding that compares the ranks
    slices = []
    real = compaction.per_run_rows
    monkeypatch.setattr(compaction, "JOB_CHUNK", 2)
    monkeypatch.setattr(compaction, "per_run_rows", lambda engine, name, setup=None: (
        slices.append((name, len(engine.runs()))) if name == "overview" else None) or real(engine, name, setup))
    assert cli(capsys, "compact", "--store", store)[0] == 0
    assert [n for name, n in slices if name == "overview"] == [2, 1]
    pack = next((store / "packs").iterdir())
    assert not list(pack.glob("*.part"))
    rows = duckdb.sql(f"SELECT count(DISTINCT run_id), count(*) FILTER (WHERE item = 'straggler') "
                      f"FROM '{pack / (job_report_file('overview') + '.parquet')}'").fetchall()
    assert rows == [(3, 1)]
    assert all(packed(store, report) for report in JOB_REPORTS)
    assert outputs(capsys, store, [[]]) == before


@pytest.mark.slow  # 40 s
def test_overview_over_more_runs_than_a_slice_is_computed_a_slice_at_a_time(tmp_path, capsys, monkeypatch):
    """A report of overview over more than JOB_CHUNK runs whose rows no pack holds (a packed job and
    a rank added since: 20 GB over 4,097 ranks at once) is computed a slice of runs at a time, each
    against the stragglers of all the runs covered: the same output, in every format and with a
    limit, as one pass over all of them."""
    from traceduck import reports

    store = tmp_path / "store"
    ranks = make_job(tmp_path / "job", 3)
    traceduck.ingest(ranks[:2], store=store)
    traceduck.compact(store=store)
    traceduck.ingest(ranks[2:], store=store)  # a rank added after compact: no pack holds the job
    selections = [[], ["rank-0", "rank-2"]]
    limited = ["report", "overview", "--store", store, "--format", "json", "--limit", "2"]
    before = outputs(capsys, store, selections)
    before_limited = cli(capsys, *limited)
    assert '"straggler"' in before[((), "overview", "json")][1]  # the finding that compares the ranks
    with traceduck.open(store) as db:
        query = db.report_query("overview")
        assert not query.sliced and not query.packed
        query.close()

    monkeypatch.setattr(reports, "JOB_CHUNK", 1)
    cursors = []
    real = reports._cover
    monkeypatch.setattr(reports, "_cover", lambda cur, run_ids: cursors.append(len(run_ids)) or real(cur, run_ids))
    with traceduck.open(store) as db:
        query = db.report_query("overview")
        assert query.sliced
        query.close()
    assert cursors == [3, 1, 1, 1]  # the report's cursor over all three runs, then a slice per run
    assert outputs(capsys, store, selections) == before
    assert cli(capsys, *limited) == before_limited
    assert before_limited[0] == 0 and before_limited[1].count('"item"') <= 6
