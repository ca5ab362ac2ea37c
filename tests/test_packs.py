"""Packs (`traceduck compact`): queries read one file per table for the packed runs and answer
exactly as from the runs' own files; a pack is never read once one of its runs was removed or
replaced, nor for a selection that leaves one of its runs out."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import traceduck
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
    return db.sql("SELECT getvariable('traceduck_sources')").fetchall()[0][0]


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
        assert cur.sql("SELECT getvariable('traceduck_sources')").fetchall()[0][0] == [str(store / "runs" / buggy)]
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
