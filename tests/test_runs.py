"""Managing runs: label, rename and rm (exact messages; atomic under a concurrent reader), run
selectors (rank:, label:, name patterns, comma-joined terms), and recursive directory ingest
(files that are not traces skipped, colliding names prefixed with their directory)."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import pytest

import traceduck
from traceduck.cli import main
from conftest import NOT_TRACES, SAMPLES, load_json, shared_dir, write_trace
from test_crash import TABLES, count_events, grow, run_id_of, start_reader, stop_reader

BUGGY = SAMPLES / "buggy.json.gz"
FIXED = SAMPLES / "fixed.json.gz"


@pytest.fixture
def cli(capsys):
    """`traceduck ARGS...` in this process: (exit code, stdout, stderr)."""
    def run(*args) -> tuple[int, str, str]:
        capsys.readouterr()
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as e:
            code = e.code or 0
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


@pytest.fixture
def ok(cli):
    def run(*args) -> str:
        code, out, err = cli(*args)
        assert (code, err) == (0, ""), err
        return out

    return run


@pytest.fixture
def fails(cli):
    """The one-line error of a command that must fail."""
    def run(*args) -> str:
        code, out, err = cli(*args)
        assert (code, out) == (1, ""), (out, err)
        assert err.count("\n") == 1
        return err

    return run


def runs_json(store: Path) -> list[dict]:
    with traceduck.open(store) as db:
        return db.runs()


def table_counts(store: Path) -> dict[str, dict[str, int]]:
    with traceduck.open(store) as db:
        return {t: dict(db.sql(f"SELECT run_id, count(*) FROM {t} GROUP BY run_id").fetchall()) for t in TABLES}


# --- label, rename, rm ------------------------------------------------------------------------


@pytest.mark.slow  # 6 s
def test_label_rename_rm_via_cli(store, ok, fails):
    ok("ingest", BUGGY, FIXED, "--store", store, "-q", "--label", "job=demo")
    buggy, fixed = run_id_of(BUGGY), run_id_of(FIXED)
    b12, f12 = buggy[:12], fixed[:12]  # messages show run ids by their first 12 hex digits
    before = table_counts(store)

    assert ok("label", "buggy", "kind=cpu", "job=run42", "--store", store) == f"{b12} 'buggy': job=run42, kind=cpu\n"
    assert ok("label", "label:job=demo", "note=a=b", "--store", store) == f"{f12} 'fixed': job=demo, note=a=b\n"
    assert ok("label", "*", "--remove", "job", "--store", store) == (f"{b12} 'buggy': kind=cpu\n"
                                                                     f"{f12} 'fixed': note=a=b\n")
    assert ok("label", fixed[:5], "--remove", "note", "--store", store) == f"{f12} 'fixed': no labels\n"
    assert {r["name"]: r["labels"] for r in runs_json(store)} == {"buggy": {"kind": "cpu"}, "fixed": {}}

    assert ok("rename", "buggy", "before fix", "--store", store) == f"{b12}: 'buggy' -> 'before fix'\n"
    assert ok("rename", fixed, "after", "--store", store) == f"{f12}: 'fixed' -> 'after'\n"
    listed = runs_json(store)
    assert [(r["run_id"], r["name"], r["labels"]) for r in listed] == [(fixed, "after", {}),
                                                                        (buggy, "before fix", {"kind": "cpu"})]
    assert table_counts(store) == before  # the runs' data never changes
    assert {r["run_id"]: r["event_count"] for r in listed} == {buggy: count_events(BUGGY), fixed: count_events(FIXED)}

    runs_hint = f"Runs in the store: {f12} (after), {b12} (before fix)."
    assert fails("label", "nosuch", "a=b", "--store", store) == f"Error: no run matches 'nosuch'. {runs_hint}\n"
    assert fails("rename", "nosuch", "x", "--store", store) == f"Error: no run matches 'nosuch'. {runs_hint}\n"
    assert fails("rm", "after", "nosuch", "--store", store) == f"Error: no run matches 'nosuch'. {runs_hint}\n"
    assert fails("label", "after", "--store", store) == \
        "Error: no labels to set or remove. Give KEY=VALUE labels, or --remove KEY.\n"
    assert fails("label", "after", "novalue", "--store", store) == \
        "Error: 'novalue' is not KEY=VALUE. Write labels like job=run42.\n"
    assert fails("label", "*", "--remove", "job", "--store", store) == \
        "Error: no selected run has label 'job'. Their labels: kind.\n"
    assert fails("rename", "after", "before fix", "--store", store) == \
        f"Error: run {b12} is already named 'before fix'. Give another name, or rename that run first.\n"
    assert fails("rename", "after", "rank:3", "--store", store) == \
        "Error: 'rank:3' cannot be a run name: it reads as a run selection. Give a name that does not start with label: or rank:.\n"
    assert fails("rename", "*", "x", "--store", store) == \
        f"Error: '*' matches 2 runs: {f12}, {b12}. Select a single run here.\n"
    assert [r["name"] for r in runs_json(store)] == ["after", "before fix"]  # failed commands changed nothing

    assert ok("rm", "after", "--store", store) == f"removed {f12} 'after'\n"
    assert [r["run_id"] for r in runs_json(store)] == [buggy]
    assert table_counts(store) == {t: {k: v for k, v in n.items() if k == buggy} for t, n in before.items()}
    assert not (store / "runs" / fixed).exists() and os.listdir(store / "tmp") == []
    assert ok("rm", "before*", "--store", store) == f"removed {b12} 'before fix'\n"
    assert runs_json(store) == []
    assert fails("rm", "x", "--store", store) == "Error: no run matches 'x'. Runs in the store: none.\n"
    # removed runs come back with a new ingest
    ok("ingest", BUGGY, "--store", store, "-q")
    assert [(r["name"], r["event_count"]) for r in runs_json(store)] == [("buggy", count_events(BUGGY))]


@pytest.mark.slow  # 4 s
def test_runs_snapshot_is_one_file_and_follows_every_change(store, ok):
    """`runs` is read from one snapshot file per state of the store; a label, a rename, a new run
    or a damaged snapshot never shows stale rows."""
    ok("ingest", BUGGY, FIXED, "--store", store, "-q")
    expected = {r["run_id"]: (r["name"], r["labels"]) for r in runs_json(store)}
    assert set(expected) == {run_id_of(BUGGY), run_id_of(FIXED)}
    snapshots = sorted(store.glob("cache/*/runs-*.parquet"))
    assert len(snapshots) == 1
    import duckdb  # the snapshot holds exactly the runs' own rows
    own = duckdb.sql("SELECT run_id, name FROM read_parquet(?) ORDER BY run_id",
                     params=[[str(store / "runs" / r / "runs.parquet") for r in expected]]).fetchall()
    assert duckdb.sql("SELECT run_id, name FROM read_parquet(?) ORDER BY run_id",
                      params=[str(snapshots[0])]).fetchall() == own
    assert {r["run_id"]: (r["name"], r["labels"]) for r in runs_json(store)} == expected
    # it is what a new process reads: a snapshot changed by hand shows (stores never do this)
    marked = snapshots[0].with_suffix(".marked")
    duckdb.sql(f"COPY (SELECT * REPLACE (upper(name) AS name) FROM read_parquet('{snapshots[0]}')) TO '{marked}' "
               "(FORMAT parquet)")
    original = snapshots[0].read_bytes()
    os.replace(marked, snapshots[0])
    assert sorted(r["name"] for r in runs_json(store)) == ["BUGGY", "FIXED"]
    snapshots[0].write_bytes(original)

    ok("label", "buggy", "job=a", "--store", store)
    ok("rename", "fixed", "after", "--store", store)
    listed = {r["name"]: r["labels"] for r in runs_json(store)}
    assert listed == {"buggy": {"job": "a"}, "after": {}}
    # one per state a query read (as ingested; labelled and renamed: `label` and `rename` select runs from the
    # runs' own files, without a database); unused ones go after an hour
    assert len(list(store.glob("cache/*/runs-*.parquet"))) == 2

    for snap in store.glob("cache/*/runs-*.parquet"):
        snap.write_bytes(b"not parquet")
    assert {r["name"]: r["labels"] for r in runs_json(store)} == listed
    ok("rm", "after", "--store", store)
    assert [r["name"] for r in runs_json(store)] == ["buggy"]


def test_a_new_state_of_the_store_reads_only_the_runs_changed_since_a_snapshot(tmp_path, monkeypatch):
    """Ingest names its runs, and a new connection fills `runs`, from the largest runs snapshot (the
    newest of equal size) and the runs.parquet of the runs added or changed since: at thousands of
    runs one new rank reads one file, not thousands; a run removed since is left out."""
    import duckdb

    from traceduck import runs_table

    store = tmp_path / "store"
    tiny = [write_trace(tmp_path / f"t{i}.json", [{"ph": "X", "cat": "cpu_op", "name": f"op{i}", "ts": 1, "dur": 5,
                                                   "pid": 1, "tid": 1}]) for i in range(4)]
    traceduck.ingest([BUGGY, FIXED], store=store, jobs=1)
    read = []
    real = runs_table.read_open_row_file
    monkeypatch.setattr(runs_table, "read_open_row_file", lambda f, columns=None: read.append(f.name) or real(f, columns))

    def own_rows() -> list[tuple]:  # the runs' own files, read by DuckDB here
        return duckdb.sql("SELECT run_id, name FROM read_parquet(?) ORDER BY run_id",
                          params=[str(store / "runs" / "*" / "runs.parquet")]).fetchall()

    def listed() -> list[tuple]:
        with traceduck.open(store) as db:
            return sorted((r["run_id"], r["name"]) for r in db.runs())

    def own_file(run_id: str) -> str:
        return str(store / "runs" / run_id / "runs.parquet")

    assert listed() == own_rows() and read == []  # the snapshot the ingest left of the store
    traceduck.ingest(tiny[0], store=store, jobs=1)  # named from it; its own row added to a new one
    assert read == [own_file(run_id_of(tiny[0]))]
    assert listed() == own_rows() and len(own_rows()) == 3 and len(read) == 1
    read.clear()
    traceduck.rename("t0", "t1", store=store)  # the next file's default name is taken now
    (third,) = traceduck.ingest(tiny[1], store=store, jobs=1)
    assert third.name != "t1" and third.name.endswith("t1")
    # the renamed run's new row (naming the new run, then for the snapshot after it), and the new run's
    assert sorted(read) == sorted([own_file(run_id_of(tiny[0]))] * 2 + [own_file(third.run_id)])
    traceduck.remove("buggy", store=store)
    read.clear()
    assert listed() == own_rows() and "buggy" not in {name for _, name in listed()}
    assert read == []  # a run removed: the last snapshot's rows less its row
    from traceduck.engine import Engine
    from traceduck.store import Store

    with Engine(Store(store), run_ids=[run_id_of(FIXED)]) as engine:  # a connection over one run: a snapshot of it
        assert [r["name"] for r in engine.runs()] == ["fixed"]
    traceduck.label("fixed", {"k": "v"}, store=store)
    (t9,) = traceduck.ingest(write_trace(tmp_path / "t9.json", [{"ph": "X", "cat": "cpu_op", "name": "op9", "ts": 1,
                                                                "dur": 5, "pid": 1, "tid": 1}]), store=store, jobs=1)
    # from the snapshot of every run, not the newer one of one run: the labelled run's row (to name
    # the new run), then it and the new run's (for the snapshot after)
    assert sorted(read) == sorted([own_file(run_id_of(FIXED))] * 2 + [own_file(t9.run_id)])
    # one snapshot per state read: the most recently used few are kept
    monkeypatch.setattr(runs_table, "SNAPSHOT_KEEP_COUNT", 2)
    assert len(list(store.glob("cache/*/runs-*.parquet"))) == 4
    traceduck.ingest(tiny[2], store=store, jobs=1)
    traceduck.ingest(tiny[3], store=store, jobs=1)
    assert listed() == own_rows() and len(own_rows()) == 6
    kept = list(store.glob("cache/*/runs-*.parquet"))
    assert len(kept) == 2 and duckdb.sql("SELECT count(*) FROM read_parquet(?)", params=[str(max(kept, key=os.path.getmtime))]).fetchall() == [(6,)]


@pytest.mark.slow
def test_label_rename_rm_while_a_reader_queries(tmp_path):
    """Every look of a reader in another process sees each run whole: the same counts in every
    table, a name it was given (never none), and the removed run whole or not at all."""
    store = tmp_path / "store"
    files = {}
    for copies in (2, 3, 4):
        f = tmp_path / f"trace{copies}.json"
        files[f] = grow(f, copies)
    traceduck.ingest(list(files), store=store, jobs=1)
    ids = {f.stem: run_id_of(f) for f in files}
    final = table_counts(store)
    ready = tmp_path / "reader.ready"
    reader, stop = start_reader(store, tmp_path)
    names = {run_id: {stem} for stem, run_id in ids.items()}
    looks, changes = 0, 0
    deadline = time.monotonic() + 120
    while looks < 4 or changes < 12:  # change runs for at least 4 of the reader's looks
        k = changes
        traceduck.rename(ids["trace2"], f"two-{k}", store=store)
        traceduck.label(ids["trace3"], {"k": str(k)}, store=store)
        traceduck.label("trace4", {"a": "b"} if k % 2 else {"k": str(k), "a": "b"}, remove=["k"] if k % 2 else [],
                        store=store)
        names[ids["trace2"]].add(f"two-{k}")
        changes += 1
        if ready.exists():
            ready.unlink()
            looks += 1
        assert time.monotonic() < deadline
    traceduck.remove(ids["trace3"], store=store)
    while not ready.exists():  # one look after the removal
        time.sleep(0.01)
    ready.unlink()
    while not ready.exists():
        time.sleep(0.01)
    seen = stop_reader(reader, stop)
    assert seen["errors"] == []
    assert seen["run_sets"] == [2, 3]  # removing a run is one rename
    for stem, run_id in ids.items():
        whole = [[files[tmp_path / f"{stem}.json"]] + [final[t][run_id] for t in TABLES]]
        assert seen["states"][run_id] == whole, stem  # never a run with a missing table or a partial count
        assert set(seen["names"][run_id]) <= names[run_id]
    assert len(seen["names"][ids["trace2"]]) >= 2  # the reader saw renames happen
    assert os.listdir(store / "tmp") == []
    with traceduck.open(store) as db:
        rows = db.sql("SELECT name, labels FROM runs ORDER BY name").fetchall()
    last = changes - 1
    assert rows == [("trace4", {"a": "b"} if last % 2 else {"k": str(last), "a": "b"}), (f"two-{last}", {})]


@pytest.mark.slow  # 2 s
def test_a_removal_killed_midway_leaves_no_run(store):
    """A removal killed in its grace period leaves run directories without runs.parquet: no
    query lists them, a new ingest of the same bytes publishes over one, cleanup removes the rest."""
    from traceduck.ingester import ingest_file
    from traceduck.store import Store

    traceduck.ingest([BUGGY, FIXED], store=store, jobs=1)
    buggy, fixed = run_id_of(BUGGY), run_id_of(FIXED)
    for run_id in (buggy, fixed):
        (store / "runs" / run_id / "runs.parquet").unlink()
    assert runs_json(store) == [] and table_counts(store)["events"] == {}
    assert not ingest_file(BUGGY, Store(store)).skipped  # no cleanup first: published over what is left
    assert sorted(os.listdir(store / "runs")) == sorted([buggy, fixed])
    Store(store, create=True)  # what every ingest does first
    assert os.listdir(store / "runs") == [buggy] and os.listdir(store / "tmp") == []
    assert [(r["run_id"], r["event_count"]) for r in runs_json(store)] == [(buggy, count_events(BUGGY))]
    assert table_counts(store)["events"] == {buggy: count_events(BUGGY)}


# --- selectors ------------------------------------------------------------------------------


def job(tmp_path: Path, name: str, ranks: range) -> Path:
    """A job's directory: one tiny trace per rank (rank in distributedInfo and the file name)."""
    d = tmp_path / name
    d.mkdir()
    for r in ranks:
        write_trace(d / f"rank{r}.json", [{"ph": "X", "cat": "cpu_op", "name": f"op{r}", "pid": 1, "tid": 1,
                                           "ts": 10.0 + r, "dur": 5.0, "args": {}}],
                    distributedInfo={"rank": r, "world_size": len(ranks)}, job=name)
    return d


@pytest.mark.slow  # 3 s
def test_selectors(tmp_path, store, ok, fails, cli):
    a, b = job(tmp_path, "jobA", range(2)), job(tmp_path, "jobB", range(3))
    ok("ingest", a, "--label", "job=a", "--store", store, "-q")
    ok("ingest", b, "--label", "job=b", "--store", store, "-q")
    ids = {f"{d.name}/{f.stem}": run_id_of(f) for d in (a, b) for f in d.iterdir()}
    # names: jobB's rank0 and rank1 collide with jobA's runs already in the store: their directory
    listing = list(csvlines(ok("runs", "--store", store, "--format", "csv")))
    assert [(r["name"], r["rank"], r["labels"]) for r in listing] == [
        ("jobB/rank0", "0", '{"job": "b"}'), ("jobB/rank1", "1", '{"job": "b"}'), ("rank0", "0", '{"job": "a"}'),
        ("rank1", "1", '{"job": "a"}'), ("rank2", "2", '{"job": "b"}')]  # ordered by name
    with traceduck.open(store) as db:
        def sel(selection: str) -> set[str]:
            return set(db.select_runs(selection))

        assert sel("rank:0") == {ids["jobA/rank0"], ids["jobB/rank0"]}
        assert sel("label:job=b,rank:1") == sel("rank:1,label:job=b") == {ids["jobB/rank1"]}
        assert sel("rank*") == {ids["jobA/rank0"], ids["jobA/rank1"], ids["jobB/rank2"]}
        assert sel("*rank[12]") == {ids["jobA/rank1"], ids["jobB/rank1"], ids["jobB/rank2"]}
        assert sel("jobB/*,rank:1") == {ids["jobB/rank1"]}
        assert sel("label:job=a,rank1") == {ids["jobA/rank1"]}  # a name within a job
        assert sel("rank2") == {ids["jobB/rank2"]}
        assert sel(ids["jobA/rank0"][:8]) == {ids["jobA/rank0"]}
    assert ok("label", "label:job=b,rank:2", "slow=yes", "--store", store) == f"{ids['jobB/rank2'][:12]} 'rank2': job=b, slow=yes\n"
    out = tmp_path / "x.json"
    assert cli("export", "label:job=a,rank:1", "-o", out, "--store", store)[0] == 0
    assert load_json(out)["traceEvents"][0]["name"] == "op1"
    errors = [
        ("rank:7", "no run has rank 7. Ranks in the store: 0, 1, 2."),
        ("rank:x", "'rank:x' is not rank:N. Select a rank like rank:0."),
        ("worker*", "no run name matches 'worker*'. Runs in the store: " + ", ".join(
            f"{ids[k][:12]} ({n})" for k, n in [("jobB/rank0", "jobB/rank0"), ("jobB/rank1", "jobB/rank1"),
                                           ("jobA/rank0", "rank0"), ("jobA/rank1", "rank1"),
                                           ("jobB/rank2", "rank2")]) + "."),
        ("label:job=a,rank:2", "no run matches every term of 'label:job=a,rank:2'. "
                               "label:job=a matches 2 runs; rank:2 matches 1 run."),
        ("label:job=a,,rank:0", "'label:job=a,,rank:0' has an empty term. Join terms with single commas, "
                                "like label:job=run42,rank:0."),
        ("label:job=c", "no run has label job=c. Labels in the store: job=a, job=b, slow=yes."),
    ]
    for selection, message in errors:
        assert fails("rm", selection, "--store", store) == f"Error: {message}\n", selection
    assert fails("export", "rank:0", "-o", out, "--store", store) == \
        f"Error: 'rank:0' matches 2 runs: {ids['jobB/rank0'][:12]}, {ids['jobA/rank0'][:12]}. Select a single run here.\n"
    assert len(runs_json(store)) == 5


@pytest.mark.slow  # 1 s
def test_rank_selector_without_ranks(store, ok, fails):
    ok("ingest", BUGGY, "--store", store, "-q")
    assert fails("rm", "rank:0", "--store", store) == ("Error: no run has rank 0. No run has a rank: it comes from "
                                                       "distributedInfo, else the file name (rank3, worker3).\n")


@pytest.mark.slow  # 2 s
def test_names_with_pattern_characters_and_commas_select_themselves(store, ok):
    ok("ingest", BUGGY, "--store", store, "-q", "--name", "a,b [x]*")
    ok("ingest", FIXED, "--store", store, "-q", "--name", "a")
    assert ok("label", "a,b [x]*", "k=v", "--store", store) == f"{run_id_of(BUGGY)[:12]} 'a,b [x]*': k=v\n"
    assert ok("label", "a*", "k=w", "--store", store) == (f"{run_id_of(FIXED)[:12]} 'a': k=w\n"
                                                         f"{run_id_of(BUGGY)[:12]} 'a,b [x]*': k=w\n")


def csvlines(text: str):
    import csv
    import io

    return csv.DictReader(io.StringIO(text))


# --- directory ingest -------------------------------------------------------------------------


def one_event_trace(path: Path, name: str) -> Path:
    return write_trace(path, [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0}])


def test_ingest_summary_of_many_runs_names_the_first_eight(tmp_path, store, cli):
    d = tmp_path / "job"
    d.mkdir()
    for r in range(10):
        one_event_trace(d / f"rank-{r}.json", f"op{r}")
    code, stdout, _ = cli("ingest", d, "--store", store, "--jobs", "1")
    assert code == 0
    named = ", ".join(f"{run_id_of(d / f'rank-{r}.json')[:12]} 'rank-{r}'" for r in [0, 1, *range(2, 8)])
    assert stdout.startswith(f"10 events -> 10 runs ({named} and 2 more) in ")


@pytest.mark.slow  # 3 s
def test_directory_ingest_is_recursive_and_skips_what_is_not_a_trace(tmp_path, store, cli, fails):
    d = tmp_path / "traces"
    (d / "a").mkdir(parents=True)
    (d / "b" / "c").mkdir(parents=True)
    (d / "empty").mkdir()
    one_event_trace(d / "a" / "x.json", "ax")
    gz = one_event_trace(tmp_path / "bx.json", "bx")
    (d / "b" / "x.json.gz").write_bytes(gzip.compress(gz.read_bytes()))
    one_event_trace(d / "b" / "c" / "y.json", "y")
    (d / "notes.json").write_text(json.dumps({"a": [1, 2]}))
    (d / "numbers.json").write_text("[1, 2]")
    (d / "b" / "events.json").write_text('{"traceEvents": {"ph": "X"}}')
    (d / "b" / "c" / "readme.txt").write_text("not json, not looked at")
    # a file that is not a trace past what is peeked at: a big value and no traceEvents key
    (d / "b" / "c" / "et.json").write_text(json.dumps({"schema": "1.0", "nodes": ["n" * 1000] * 9000}))
    # a trace whose traceEvents comes after a big key
    big_header = d / "b" / "late.json"
    big_header.write_text(json.dumps({"blob": ["h" * 1000] * 9000, "traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "late", "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0}]}))
    code, stdout, stderr = cli("ingest", d, "--store", store)
    assert code == 0, stderr
    assert stderr == (f"{d}/b/c/et.json: not a trace (no traceEvents key), skipped\n"
                        f"{d}/b/events.json: not a trace (traceEvents is not a list), skipped\n"
                        f"{d}/notes.json: not a trace (no traceEvents key), skipped\n"
                        f"{d}/numbers.json: not a trace (traceEvents item 0 is a int, not an object), skipped\n")
    names = {r["name"]: (r["run_id"], r["event_count"]) for r in runs_json(store)}
    assert names == {"a/x": (run_id_of(d / "a" / "x.json"), 1), "b/x": (run_id_of(d / "b" / "x.json.gz"), 1),
                     "y": (run_id_of(d / "b" / "c" / "y.json"), 1), "late": (run_id_of(big_header), 1)}
    assert stdout.startswith("4 events -> ")
    # a file that is not a trace, named alone or among others: an error
    msg = f"{d}/notes.json: not a trace (no traceEvents key). A PyTorch profiler trace is a JSON object with a traceEvents list."
    assert fails("ingest", d / "notes.json", "--store", store) == f"Error: {msg}\n"
    # among others: what happened to each file, the summary line, then the error
    code, out, err = cli("ingest", d / "notes.json", d / "a" / "x.json", "--store", store)
    assert (code, out.startswith("0 events -> no new runs in ")) == (1, True), (out, err)
    assert err == (f"{d}/notes.json: failed: not a trace (no traceEvents key). A PyTorch profiler trace is a JSON "
                   "object with a traceEvents list.\n"
                   f"x.json: already in the store as run {run_id_of(d / 'a' / 'x.json')[:12]} (use --force to replace it)\n"
                   f"Error: 1 of 2 files failed ({d}/notes.json); of the others: 1 already in the store. The lines "
                   "above say what happened to each file.\n")
    with pytest.raises(traceduck.errors.InputError) as failed:  # from Python: the first failure, and every outcome
        traceduck.ingest([d / "notes.json", d / "a" / "x.json"], store=store)
    assert failed.value.one_line() == f"1 of 2 files failed (1 ingested); first: {msg}"
    assert [(p, type(r).__name__) for p, r in failed.value.outcomes] == [(d / "notes.json", "NotATrace"),
                                                                        (d / "a" / "x.json", "IngestResult")]
    assert fails("ingest", d / "empty", "--store", store) == \
        f"Error: {d}/empty: no .json or .json.gz files in this directory or below.\n"


@pytest.mark.slow  # 2 s
def test_default_names_collide_with_runs_in_the_store(tmp_path, store, ok):
    one_event_trace(tmp_path / "graph_execution.json", "first")
    (tmp_path / "vllm_decode_full").mkdir()
    one_event_trace(tmp_path / "vllm_decode_full" / "graph_execution.json", "second")
    ok("ingest", tmp_path / "graph_execution.json", "--store", store, "-q")
    ok("ingest", tmp_path / "vllm_decode_full" / "graph_execution.json", "--store", store, "-q")
    # the same bytes again (replaced) keep their name; other bytes at the same path are another run
    ok("ingest", tmp_path / "graph_execution.json", "--store", store, "-q", "--force")
    one_event_trace(tmp_path / "graph_execution.json", "changed")
    ok("ingest", tmp_path / "graph_execution.json", "--store", store, "-q")
    with traceduck.open(store) as db:
        rows = db.sql("SELECT e.name, r.name FROM runs r JOIN events e USING (run_id) ORDER BY e.name").fetchall()
    assert rows == [("changed", f"{tmp_path.name}/graph_execution"), ("first", "graph_execution"),
                    ("second", "vllm_decode_full/graph_execution")]


# --- the shared traces, one directory --------------------------------------------------------


@pytest.mark.slow
def test_every_shared_file_in_one_directory_ingest(shared_ingest):
    """Run count and names against an independent walk of the directory."""
    path, results = shared_ingest
    root = shared_dir()
    files = []
    for dirpath, _dirs, names in os.walk(root):
        files += [Path(dirpath, n).relative_to(root) for n in names if n.endswith((".json", ".json.gz"))]
    files.sort(key=lambda f: f.parts)

    def is_trace(rel: Path) -> bool:
        doc = load_json(root / rel, exact=False)
        if isinstance(doc, list):
            return not doc or isinstance(doc[0], dict)
        return isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list)

    traces = [f for f in files if is_trace(f)]
    assert sorted(str(f) for f in files if f not in traces) == sorted(NOT_TRACES)
    assert {rel for rel, r in results.items() if r.not_a_trace} == NOT_TRACES
    assert {r.not_a_trace for r in results.values() if r.not_a_trace} == {"no traceEvents key"}

    # expected names: the file name without .json/.json.gz, with as many parent directories as
    # make it differ from every other trace's name with as many
    def named(f: Path, k: int) -> str:
        stem = f.name[: -len(".json.gz")] if f.name.endswith(".json.gz") else f.name[: -len(".json")]
        return "/".join((root / f).parent.parts[len((root / f).parent.parts) - k:] + (stem,)) if k else stem

    expected = {}
    for f in traces:
        k = 0
        while any(named(g, k) == named(f, k) for g in traces if g != f):
            k += 1
        expected[f] = named(f, k)
    content = {f: hashlib.sha256((root / f).read_bytes()).hexdigest() for f in traces}
    first_of = {}
    for f in traces:  # files with the same bytes are one run, named after the first one
        first_of.setdefault(content[f], f)
    with traceduck.open(path) as db:
        got = sorted(n for (n,) in db.sql("SELECT name FROM runs").fetchall())
    assert len(got) == len(first_of) == len(traces) - 3
    assert got == sorted(expected[f] for f in first_of.values())
    assert {"trace_compare/test/test", "trace_diff/test/test", "h100/gaunernst_bert-small-uncased__1016001",
            "mixed_files/rank_non_gpu", "data/trace", "rank0"} <= set(got)  # hand-checked
