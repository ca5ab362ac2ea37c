"""Packs (`traceduck compact`): queries read one file per table for the packed runs and answer
exactly as from the runs' own files; a pack is never read once one of its runs was removed or
replaced, nor for a selection that leaves one of its runs out."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

import traceduck
from traceduck import session
from traceduck.cli import main
from conftest import SAMPLES, load_json, shared_dir, write_trace
from test_crash import run_id_of

BUGGY = SAMPLES / "buggy.json.gz"
FIXED = SAMPLES / "fixed.json.gz"


def hta_ranks() -> list[Path]:
    d = shared_dir() / "public/facebookresearch__HolisticTraceAnalysis/tests/data/trace_filter"
    return [d / "sampled_rank-0.json.gz", d / "sampled_rank-1.json.gz"]


def cli(capsys, *args) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as e:
        code = e.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def sources(db) -> list[str]:
    """The directories the views read (packs first, then runs)."""
    return db.sql(f"SELECT getvariable('{session.SOURCES.name}')").fetchall()[0][0]


def answers(db) -> dict[str, list]:
    """Per-run row counts of every packed table, and three reports over every table, sorted."""
    out = {t: sorted(db.sql(f"SELECT run_id, count(*) FROM {t} GROUP BY run_id").fetchall())
           for t in ("events", "args", "shapes", "stacks", "step_windows")}
    for report in ("top-ops", "top-kernels", "comm-overlap"):
        out[report] = sorted(map(repr, db.report(report).fetchall()))
    return out


def event_counts(paths: list[Path]) -> list[tuple[str, int]]:
    """events rows per run from plain json: every object in traceEvents."""
    return sorted((run_id_of(p), sum(isinstance(e, dict) for e in load_json(p, exact=False)["traceEvents"]))
                  for p in paths)


def op_calls(path: Path) -> dict[str, int]:
    """Calls per CPU op name, by plain json."""
    calls: dict[str, int] = {}
    for e in load_json(path)["traceEvents"]:
        if e.get("cat") == "cpu_op" and e.get("ph") == "X":
            calls[e["name"]] = calls.get(e["name"], 0) + 1
    return calls


def test_compact_of_the_samples(samples_store, capsys, monkeypatch):
    """The short version of the test below: pack the samples, read them and a report's rows from the
    pack, pack again (nothing to do), remove a packed run (its pack goes)."""
    from traceduck import packs as packs_module, store as store_module

    monkeypatch.setattr(store_module, "REMOVE_GRACE_S", 0)  # no query to wait for
    monkeypatch.setattr(packs_module, "REMOVE_GRACE_S", 0)
    code, out, err = cli(capsys, "compact", "--store", samples_store)
    (pack,) = os.listdir(samples_store / "packs")
    assert (code, err) == (0, "") and re.fullmatch(rf"packed 2 runs into {pack[:12]} \(\d+(\.\d+)? KB\) in \d+\.\d s\n", out)
    with traceduck.open(samples_store) as db:
        assert sources(db) == [str(samples_store / "packs" / pack)]
        assert db.sql("SELECT getvariable('traceduck_all_summarized')").fetchall() == [(True,)]
        assert sorted(db.sql("SELECT run_id, count(*) FROM events GROUP BY run_id").fetchall()) == \
            event_counts([BUGGY, FIXED])
        top_ops = db.report("top-ops", runs="buggy")  # a per-run report: the pack's rows
        assert dict(top_ops.select("name, calls").fetchall()) == op_calls(BUGGY)
    assert cli(capsys, "compact", "--store", samples_store)[1].startswith(f"2 runs already packed in {pack[:12]} (")
    assert cli(capsys, "rm", "fixed", "--store", samples_store)[0] == 0
    assert os.listdir(samples_store / "packs") == []
    with traceduck.open(samples_store) as db:
        assert sources(db) == [str(samples_store / "runs" / run_id_of(BUGGY))]
        assert db.sql("SELECT run_id, count(*) FROM events GROUP BY run_id").fetchall() == event_counts([BUGGY])


@pytest.mark.slow  # 12 s
def test_compact_answers_the_same_and_follows_every_change(tmp_path, capsys):
    store = tmp_path / "store"
    paths = [BUGGY, FIXED, *hta_ranks()]
    traceduck.ingest(paths, store=store)
    with traceduck.open(store) as db:
        before = answers(db)
        assert len(sources(db)) == 4 and all("/runs/" in s for s in sources(db))
    assert before["events"] == event_counts(paths)

    code, out, err = cli(capsys, "compact", "--store", store)
    (pack,) = os.listdir(store / "packs")
    assert (code, err) == (0, "")
    assert out.startswith(f"packed 4 runs into {pack[:12]} (") and out.endswith(" s\n")
    with traceduck.open(store) as db:
        assert sources(db) == [str(store / "packs" / pack)]  # one file per table, none per run
        assert answers(db) == before
        # a selection that leaves packed runs out reads its runs' own files
        buggy = run_id_of(BUGGY)
        cur = db.cursor(run_ids=[buggy])
        assert cur.sql(f"SELECT getvariable('{session.SOURCES.name}')").fetchall()[0][0] == [str(store / "runs" / buggy)]
        assert cur.sql("SELECT DISTINCT run_id FROM events").fetchall() == [(buggy,)]
    assert cli(capsys, "compact", "--store", store)[1].startswith(f"4 runs already packed in {pack[:12]} (")

    # a new run: read from its own files beside the pack
    extra = write_trace(tmp_path / "extra.json", [
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0}])
    traceduck.ingest(extra, store=store)
    with traceduck.open(store) as db:
        assert sources(db) == [str(store / "packs" / pack), str(store / "runs" / run_id_of(extra))]
        assert answers(db)["events"] == event_counts([*paths, extra])

    # a packed run replaced (same bytes, new files): its pack is never read again
    traceduck.ingest(FIXED, store=store, force=True)
    with traceduck.open(store) as db:
        assert not any("/packs/" in s for s in sources(db))
        assert answers(db)["events"] == event_counts([*paths, extra])
    code, out, _ = cli(capsys, "compact", "--store", store)
    (pack2,) = os.listdir(store / "packs")  # the stale pack removed
    assert out.startswith(f"packed 5 runs into {pack2[:12]} (") and "; removed 1 older pack in " in out

    # a packed run removed: the packs holding it go
    cli(capsys, "rm", "buggy", "--store", store)
    assert os.listdir(store / "packs") == []
    with traceduck.open(store) as db:
        after = answers(db)
    assert after["events"] == event_counts([FIXED, *hta_ranks(), extra])
    assert after["top-kernels"] == before["top-kernels"]  # the samples have no kernels


def test_a_pack_found_current_is_checked_again_only_when_the_runs_change(tmp_path, monkeypatch):
    """A pack is current while each member's events.parquet is the file it was made from: statted
    once per listing of the runs, not once per command; a run labelled or replaced is a new listing."""
    from traceduck import packs

    store = tmp_path / "store"
    traceduck.ingest([BUGGY, FIXED], store=store)
    traceduck.compact(store=store)
    (pack,) = os.listdir(store / "packs")
    looked_up = []
    data_stamp = packs.data_stamp
    monkeypatch.setattr(packs, "data_stamp", lambda st, run: looked_up.append(run) or data_stamp(st, run))

    def read() -> tuple[list[str], list]:
        looked_up.clear()
        with traceduck.open(store) as db:
            return sorted(looked_up), [s.removeprefix(str(store)) for s in sources(db)]

    both = sorted([run_id_of(BUGGY), run_id_of(FIXED)])
    assert read() == (both, [f"/packs/{pack}"])
    assert read() == ([], [f"/packs/{pack}"])  # found current at this listing: no member looked up
    traceduck.label("buggy", {"phase": "decode"}, store=store)  # a new runs.parquet: a new listing
    assert read() == (both, [f"/packs/{pack}"])
    assert read() == ([], [f"/packs/{pack}"])

    traceduck.ingest(FIXED, store=store, force=True)  # a packed run replaced: the pack is stale
    looked_up.clear()
    with traceduck.open(store) as db:
        assert [s.removeprefix(str(store)) for s in sources(db)] == [f"/runs/{r}" for r in both]
        assert sorted(db.sql("SELECT run_id, count(*) FROM events GROUP BY run_id").fetchall()) == event_counts([BUGGY, FIXED])
    assert looked_up == [run_id_of(FIXED)]  # the first member found replaced: the pack is not read


@pytest.mark.slow  # 3 s
def test_a_pack_of_some_runs_is_superseded_by_one_of_all(tmp_path, capsys):
    store = tmp_path / "store"
    traceduck.ingest([BUGGY, FIXED], store=store)
    code, out, _ = cli(capsys, "compact", "buggy", "--store", store)
    (first,) = os.listdir(store / "packs")
    assert out.startswith(f"packed 1 runs into {first[:12]} (")
    with traceduck.open(store) as db:
        assert sources(db) == [str(store / "packs" / first), str(store / "runs" / run_id_of(FIXED))]
        assert db.sql("SELECT count(*) FROM events").fetchall() == [(sum(n for _, n in event_counts([BUGGY, FIXED])),)]
    code, out, _ = cli(capsys, "compact", "--store", store)
    (second,) = os.listdir(store / "packs")
    assert second != first and out.startswith(f"packed 2 runs into {second[:12]} (") and "removed 1 older pack" in out
    assert cli(capsys, "compact", "nosuch", "--store", store)[2].startswith("Error: no run matches 'nosuch'.")


def summary_answers(db) -> dict[str, list]:
    """Every summarized view and gpu_time's four settings, sorted."""
    out = {v: db.sql(f"SELECT * FROM {v} ORDER BY ALL").fetchall()
           for v in ("kernel_stats", "kernel_launch_windows", "copy_groups", "op_self_times")}
    for by_step in ("false", "true"):
        for linked in ("false", "true"):
            out[f"gpu_time {by_step} {linked}"] = db.sql(
                f"SELECT * FROM gpu_time(by_step := {by_step}, linked_only := {linked}) ORDER BY ALL").fetchall()
    return out


def kernel_totals(path: Path) -> dict[str, tuple[int, int]]:
    """Per kernel name, from plain json: (instances, total duration in ns)."""
    out: dict[str, tuple[int, int]] = {}
    for e in load_json(path)["traceEvents"]:
        if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in ("kernel", "Kernel"):
            n, total = out.get(e["name"], (0, 0))
            out[e["name"]] = (n + 1, total + int(e["dur"] * 1000))
    return out


@pytest.mark.slow  # 5 s
def test_summaries_come_from_the_pack_only_where_they_apply(tmp_path, monkeypatch):
    from traceduck import compaction
    from traceduck.catalog import summaries

    store = tmp_path / "store"
    rank0, rank1 = hta_ranks()
    traceduck.ingest([BUGGY, rank0, rank1], store=store)
    with traceduck.open(store) as db:
        before = summary_answers(db)
        assert [db.sql(f"SELECT count(*) FROM {s.packed}()").fetchall() for s in summaries()] == [[(0,)]] * len(summaries())
    # the kernel statistics against plain json
    r0 = run_id_of(rank0)
    expected = kernel_totals(rank0)
    assert len(expected) > 10
    assert {name: (n, total) for run, name, n, total, *_ in before["kernel_stats"] if run == r0} == expected

    monkeypatch.setattr(compaction, "SUMMARY_CHUNK", 2)  # the summaries of the three runs in two slices
    traceduck.compact(store=store)
    (pack,) = os.listdir(store / "packs")
    packed = store / "packs" / pack
    assert {f"{s.name}.parquet" for s in summaries()} <= {f.name for f in packed.iterdir()}
    assert not list(packed.glob("*.part"))
    with traceduck.open(store) as db:
        assert db.sql("SELECT all_runs_summarized()").fetchall() == [(True,)]
        assert db.sql("SELECT count(DISTINCT run_id) FROM op_self_times_packed()").fetchall() == [(3,)]
        assert summary_answers(db) == before

    # the views read the pack's rows, and compute none for its runs: a changed summary file shows
    import duckdb
    stats = packed / "kernel_stats.parquet"
    duckdb.execute(f"COPY (SELECT * REPLACE (instances + 1000 AS instances) FROM '{stats}') TO '{stats}.new' (FORMAT parquet)")
    os.replace(f"{stats}.new", stats)
    marked = sorted((run, name, n + 1000, *rest) for run, name, n, *rest in before["kernel_stats"])
    with traceduck.open(store) as db:
        assert db.sql("SELECT * FROM kernel_stats ORDER BY ALL").fetchall() == marked
        # overview reads its own rows, kept by compact (test_job_packs.py): its top kernels as before
        top = [detail for _run, _name, section, *_, detail in db.report("overview").fetchall() if section == "top kernel"]
        assert len(top) == 10 and all(int(d.split()[0]) < 1000 for d in top)
    traceduck.rename(run_id_of(rank1), "renamed", store=store)  # its kept rows no longer apply: computed
    with traceduck.open(store) as db:
        # overview's top kernels, computed now, from the view (top-kernels reads its own rows, see below)
        top = [detail for _run, _name, section, *_, detail in db.report("overview").fetchall() if section == "top kernel"]
        assert len(top) == 10 and all(int(d.split()[0]) > 1000 for d in top)
        # a selection that leaves packed runs out computes its own
        cur = db.cursor(run_ids=[r0])
        assert cur.sql("SELECT * FROM kernel_stats ORDER BY ALL").fetchall() == [r for r in before["kernel_stats"] if r[0] == r0]
        # a session that changes a reference table computes everything with it
        db.sql("DELETE FROM op_categories WHERE false")
        assert summary_answers(db) == before
        assert db.sql("SELECT all_runs_summarized()").fetchall() == [(False,)]

    # a new run beside the pack: the pack's runs from the pack, the new one computed
    extra = write_trace(tmp_path / "extra.json", [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.0, "dur": 2.0, "args": {"device": 0}}])
    traceduck.ingest(extra, store=store)
    with traceduck.open(store) as db:
        assert db.sql("SELECT all_runs_summarized()").fetchall() == [(False,)]
        assert db.sql("SELECT * FROM kernel_stats ORDER BY ALL").fetchall() == sorted(
            [*marked, (run_id_of(extra), "k", 1, 2000, 2000, 2000, 2000, 2000, None, 1)])

    # summaries from another version of the views are never read; the pack's tables still are
    manifest = packed / "members.json"
    doc = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**doc, "summaries": "another version"}))
    with traceduck.open(store) as db:
        assert str(packed) in sources(db)
        assert db.sql(f"SELECT * FROM kernel_stats WHERE run_id <> '{run_id_of(extra)}' ORDER BY ALL").fetchall() == \
            before["kernel_stats"]


@pytest.mark.slow  # 10 s
def test_per_run_reports_come_from_the_pack_with_their_default_parameters(tmp_path):
    from traceduck.catalog import all_reports
    from traceduck.reports import report_file

    store = tmp_path / "store"
    rank0, rank1 = hta_ranks()
    traceduck.ingest([BUGGY, rank0, rank1], store=store)
    names = [name for name, r in all_reports().items() if r.per_run]
    # every report without a job's view of several runs (collectives, overview, ranks)
    assert set(all_reports()) - set(names) == {"collective-skew", "collectives", "overview", "ranks"}
    with traceduck.open(store) as db:
        before = {name: db.report(name).fetchall() for name in names}
        # per run indeed: the rows over all runs are each run's rows on its own, run after run
        from conftest import run_report
        runs = [r for r in (run_id_of(BUGGY), run_id_of(rank0), run_id_of(rank1))]
        names_order = sorted(runs, key=lambda r: {run_id_of(BUGGY): "buggy", run_id_of(rank0): "sampled_rank-0",
                                                  run_id_of(rank1): "sampled_rank-1"}[r])
        for name in names:
            alone = [row for r in names_order for row in run_report(db, name, runs=[r], keep_run_columns=True)[1]]
            assert before[name] == alone, name
        assert sum(map(len, before.values())) > 1000
        # independent of both: each kernel's instances and total time, by plain json
        assert {name: (n, total) for run, _, name, n, total, *_ in before["top-kernels"]
                if run == run_id_of(rank0)} == kernel_totals(rank0)
        wanted = db.report("top-kernels", limit=3).fetchall()
        by_step = db.report("comm-overlap", linked_only=True).fetchall()
    traceduck.compact(store=store)
    (pack,) = os.listdir(store / "packs")
    packed = store / "packs" / pack
    with traceduck.open(store) as db:
        assert {name: db.report(name).fetchall() for name in names} == before
        assert db.report("top-kernels", limit=3).fetchall() == wanted

    # the rows are the pack's: a changed file shows (the report computes nothing)
    import duckdb
    rows = packed / f"{report_file('top-kernels')}.parquet"
    duckdb.execute(f"COPY (SELECT * REPLACE (instances + 1000 AS instances) FROM '{rows}') TO '{rows}.new' (FORMAT parquet)")
    os.replace(f"{rows}.new", rows)
    at = [c.name for c in all_reports()["top-kernels"].columns].index("instances")
    marked = [r[:at] + (r[at] + 1000,) + r[at + 1:] for r in before["top-kernels"]]
    with traceduck.open(store) as db:
        assert db.report("top-kernels").fetchall() == marked
        # other parameters, a part of the pack's runs: computed as before
        assert db.report("comm-overlap", linked_only=True).fetchall() == by_step
        one = db.report("top-kernels", runs=[run_id_of(rank0)]).fetchall()
        assert one == [r[2:] for r in before["top-kernels"] if r[0] == run_id_of(rank0)]
        # a session that changes a reference table computes it with its tables
        db.sql("DELETE FROM op_categories WHERE false")
        assert db.report("top-kernels").fetchall() == before["top-kernels"]

    # run names are the runs' own, also after a rename
    name_at = [c.name for c in all_reports()["top-kernels"].columns].index("run_name")
    traceduck.rename(run_id_of(rank0), "renamed", store=store)
    with traceduck.open(store) as db:
        assert db.sql("SELECT all_runs_summarized()").fetchall() == [(True,)]
        assert db.report("top-kernels").fetchall() == [
            r[:name_at] + ("renamed" if r[0] == run_id_of(rank0) else r[name_at],) + r[name_at + 1:] for r in marked]


def json_rows(db, name: str, **kwargs) -> list[dict]:
    """A report's rows fetched as Python values, as JSON objects (NaN and infinities as null)."""
    import math

    rel = db.report(name, **kwargs)
    return [{c: None if isinstance(v, float) and not math.isfinite(v) else v for c, v in zip(rel.columns, row)}
            for row in rel.fetchall()]


def text_query(db, name: str) -> str:
    """The query json output of a report over every run reads its text with."""
    query = db.report_query(name)
    assert query.packed
    sql, _prefixes = query.packed_text_sql()
    query.close()
    return sql


@pytest.mark.slow  # 15 s
def test_json_output_of_per_run_reports_is_the_packs_text(tmp_path, capsys, monkeypatch):
    """`--format json` of a per-run report over packed runs writes the JSON text `compact` stored,
    byte for byte what it wrote from the rows before, with the runs' current names; the rows and the
    text computed a slice of runs at a time (compaction.REPORT_CHUNK) and joined in the runs' order."""
    import duckdb

    from traceduck import compaction
    from traceduck.catalog import all_reports
    from traceduck.reports import report_text_file

    store = tmp_path / "store"
    rank0, _ = hta_ranks()
    hostile = write_trace(tmp_path / "hostile.json", [
        {"ph": "X", "cat": "cpu_op", "name": n, "pid": 1, "tid": 1, "ts": 1.0 + 10 * i, "dur": 5.0}
        for i, n in enumerate(['q"uote\\back', "\u0001ctl\u001b", "ünï €"])])
    traceduck.ingest([BUGGY, rank0, hostile], store=store)
    names = [name for name, r in all_reports().items() if r.per_run]

    def json_out(name: str, *args) -> str:
        code, out, err = cli(capsys, "report", name, "--store", store, "-f", "json", *args)
        assert (code, err) == (0, ""), (name, err)
        return out

    before = {name: json_out(name) for name in names}
    with traceduck.open(store) as db:
        for name in names:  # the text holds the rows' values
            assert json.loads(before[name]) == json_rows(db, name), name
    assert sum(len(json.loads(t)) for t in before.values()) > 1000
    assert '"name":"q\\"uote\\\\back"' in before["top-ops"] and '"name":"\\u0001ctl\\u001B"' in before["top-ops"]
    limited = json_out("top-ops", "--limit", "2")
    one = json_out("ops-by-shape", "--run", run_id_of(rank0))

    monkeypatch.setattr(compaction, "REPORT_CHUNK", 2)  # the three runs in slices of two and one
    traceduck.compact(store=store)
    (pack,) = os.listdir(store / "packs")
    packed = store / "packs" / pack
    assert all((packed / f"{report_text_file(name)}.parquet").is_file() for name in names)
    assert not list(packed.glob("*.part"))
    assert duckdb.sql(f"SELECT count(DISTINCT run_id) FROM '{packed / report_text_file('top-ops')}.parquet'").fetchall() == [(3,)]
    assert {name: json_out(name) for name in names} == before
    assert json_out("top-ops", "--limit", "2") == limited  # computed from the pack's rows
    # runs named as they are now: a rename shows, its name escaped as JSON escapes it
    traceduck.rename(run_id_of(rank0), 'ré"named', store=store)
    renamed = {name: json_out(name) for name in names}
    for name in names:
        assert renamed[name] == before[name].replace('"run_name":"sampled_rank-0"', '"run_name":"r\u00e9\\"named"'), name
    assert renamed["top-kernels"].count('"run_name":"ré\\"named"') == len(json.loads(before["top-kernels"])) > 10
    with traceduck.open(store) as db:
        assert json.loads(renamed["ops-by-shape"]) == json_rows(db, "ops-by-shape")
        assert "ORDER BY" not in text_query(db, "ops-by-shape")  # the runs' order when packed: streamed
    manifest = packed / "members.json"
    doc = json.loads(manifest.read_text())

    def computed(name: str) -> str:
        """The json output computed from the pack's tables: its summaries made another version's."""
        manifest.write_text(json.dumps({**doc, "summaries": "another version"}))
        try:
            return json_out(name)
        finally:
            manifest.write_text(json.dumps(doc))

    assert computed("ops-by-shape") == renamed["ops-by-shape"]
    # renamed into another order of the runs: the pack's text in the new order
    traceduck.rename(run_id_of(BUGGY), "zz last", store=store)
    with traceduck.open(store) as db:
        assert "ORDER BY" in text_query(db, "ops-by-shape")
    for name in ("ops-by-shape", "roofline", "top-ops", "memory"):
        out = json_out(name)
        assert out == computed(name), name
        runs = [row["run_name"] for row in json.loads(out)]
        assert runs == sorted(runs, key=lambda n: n != "hostile") and runs[-1] == "zz last", name
    traceduck.rename(run_id_of(BUGGY), "buggy", store=store)

    # the text is the pack's: a changed file shows (the rows are neither computed nor read)
    text = packed / f"{report_text_file('top-ops')}.parquet"
    duckdb.execute(f"COPY (SELECT * REPLACE (replace(text, '\"calls\":', '\"CALLS\":') AS text) FROM '{text}') "
                   f"TO '{text}.new' (FORMAT parquet)")
    os.replace(f"{text}.new", text)
    assert json_out("top-ops") == renamed["top-ops"].replace('"calls":', '"CALLS":') != renamed["top-ops"]
    assert computed("top-ops") == renamed["top-ops"]  # summaries of another version are never read

    # a pack of one run: its text without the run columns, as a single run's output leaves them out
    cli(capsys, "compact", run_id_of(rank0), "--store", store)
    assert json_out("ops-by-shape", "--run", run_id_of(rank0)) == one
    assert '"run_id"' not in one and len(json.loads(one)) > 10
