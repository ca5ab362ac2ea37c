"""Crashes and concurrency: a failed or killed ingest leaves the store valid, concurrent ingests
and readers never see half a run, and nothing from a trace's content becomes a path or SQL."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import xxhash

import traceduck
from traceduck.catalog import schema_stamp
from traceduck.cli import main
from traceduck.errors import InputError, StoreError
from traceduck.store import Store

from conftest import SAMPLES

BUGGY = SAMPLES / "buggy.json.gz"
FIXED = SAMPLES / "fixed.json.gz"
TABLES = ("runs", "events", "args", "shapes", "stacks", "step_windows")
HOSTILE = "'; DROP VIEW events; --"

# A reader process: queries the store in a loop until told to stop, and reports every state it
# saw per run: (runs.event_count, then the run's row count in each table). One SQL statement per
# look, so a run is judged within one query. Half the looks reuse one Database, half open anew.
READER = """
import json, sys, time, pathlib, traceduck
store, ready, stop = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
tables = %r
query = " UNION ALL ".join(
    ["SELECT run_id, 'event_count' AS what, event_count AS n FROM runs",
     "SELECT run_id, 'name:' || name, 0 FROM runs"]
    + [f"SELECT run_id, '{t}', count(*) FROM {t} GROUP BY run_id" for t in tables])
states, names, run_sets, errors, iterations = {}, {}, set(), [], 0
db = traceduck.open(store)
stopping = False
while True:
    stopping = stop.exists()
    try:
        look = traceduck.open(store) if iterations %% 2 else db
        seen = {}
        for run_id, what, n in look.sql(query).fetchall():
            if what.startswith("name:"):
                names.setdefault(run_id, set()).add(what[5:])
            else:
                seen.setdefault(run_id, {})[what] = n
        for run_id, counts in seen.items():
            states.setdefault(run_id, set()).add(tuple(counts.get(k, 0) for k in ("event_count",) + tables))
        run_sets.add(len(seen))
        if look is not db:
            look.close()
    except Exception as e:
        errors.append(repr(e))
    iterations += 1
    ready.touch()
    if stopping:
        break
print(json.dumps({"iterations": iterations, "errors": errors[:5], "run_sets": sorted(run_sets),
                  "states": {k: sorted(v) for k, v in states.items()},
                  "names": {k: sorted(v) for k, v in names.items()}}))
""" % (TABLES,)


def td(*args):
    env = {k: v for k, v in os.environ.items() if k != "TRACEDUCK_STORE"}
    return subprocess.run([sys.executable, "-m", "traceduck", *map(str, args)], capture_output=True, text=True,
                          env=env)


def cli(capsys, *args) -> tuple[int, str, str]:
    """Run the command line in this process: (exit code, stdout, stderr)."""
    capsys.readouterr()
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as e:
        code = e.code or 0
    out, err = capsys.readouterr()
    return code, out, err


def grow(out: Path, copies: int) -> int:
    """A bigger trace: the buggy sample's events repeated `copies` times, each copy 100 ms later.
    Returns the number of events (plain json's count)."""
    doc = json.loads(gzip.decompress(BUGGY.read_bytes()))
    events = []
    for k in range(copies):
        for e in doc["traceEvents"]:
            e = dict(e)
            if "ts" in e:
                e["ts"] = round(e["ts"] + k * 100_000, 3)
            events.append(e)
    doc["traceEvents"] = events
    out.write_text(json.dumps(doc))
    return len(events)


def count_events(path: Path) -> int:
    return len(json.loads(gzip.decompress(path.read_bytes()))["traceEvents"])


def run_id_of(path: Path) -> str:
    return xxhash.xxh3_128(path.read_bytes()).hexdigest()


def tree(root: Path) -> dict[str, tuple[int, int] | None]:
    """Every file (relative path -> size, mtime ns) and directory (-> None) under root."""
    out = {}
    for p in sorted(root.rglob("*")):
        out[str(p.relative_to(root))] = (p.stat().st_size, p.stat().st_mtime_ns) if p.is_file() else None
    return out


def events_by_run(store: Path) -> dict[str, int]:
    with traceduck.open(store) as db:
        return dict(db.sql("SELECT run_id, count(*) FROM events GROUP BY run_id").fetchall())


def start_reader(store: Path, tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    ready, stop = tmp_path / "reader.ready", tmp_path / "reader.stop"
    reader = subprocess.Popen([sys.executable, "-c", READER, str(store), str(ready), str(stop)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert reader.poll() is None, reader.stderr.read()
        assert time.monotonic() < deadline, "the reader never finished its first query"
        time.sleep(0.02)
    return reader, stop


def stop_reader(reader: subprocess.Popen, stop: Path) -> dict:
    stop.touch()
    out, err = reader.communicate(timeout=60)
    assert reader.returncode == 0, err
    return json.loads(out)


# --- failures and kills ---------------------------------------------------------------------


def test_failed_ingest_leaves_the_store_exactly_as_it_was(tmp_path):
    store = tmp_path / "store"
    traceduck.ingest(BUGGY, store=store)
    before = tree(store)
    text = gzip.decompress(BUGGY.read_bytes()).decode()
    cut = text.index('"ph"', len(text) // 2)
    broken = tmp_path / "broken.json"  # invalid JSON in the middle of traceEvents
    broken.write_text(text[:cut] + "]]] not json {{{" + text[cut:])
    not_a_trace = tmp_path / "numbers.json"
    not_a_trace.write_text(json.dumps({"traceEvents": [7, "a"]}))  # items, but none is an event
    for bad in (broken, not_a_trace):
        with pytest.raises(InputError):
            traceduck.ingest(bad, store=store)
        assert tree(store) == before
    assert events_by_run(store) == {run_id_of(BUGGY): count_events(BUGGY)}


def test_leftovers_of_dead_writers_are_removed_and_live_ones_kept(tmp_path):
    store = tmp_path / "store"
    st = Store(store, create=True)
    tmp = store / "tmp"
    hold = ("import sys, time; from traceduck.store import Store; d = Store(sys.argv[1]).new_tmp_dir('ab12'); "
            "(d / 'part').write_text('x'); print(d.name, flush=True); {}")
    live = subprocess.Popen([sys.executable, "-c", hold.format("time.sleep(120)"), str(store)],
                            stdout=subprocess.PIPE, text=True)
    dead = subprocess.run([sys.executable, "-c", hold.format(""), str(store)], capture_output=True, text=True)
    live_name, dead_name = live.stdout.readline().strip(), dead.stdout.strip()
    try:
        (tmp / "cd34.replaced.0a1b2c3d").mkdir()  # a directory with no lock file: no writer
        (tmp / "ef56.0a1b2c3d.lock").write_text("")  # a lock file whose directory is gone
        (tmp / "catalog.0a1b2c3d.duckdb").write_text("")  # not an ingest's: left alone
        own = st.new_tmp_dir("ab12")  # held by this process: kept, even for another spelling of the path
        (tmp_path / "link").symlink_to(store)
        other = Store(tmp_path / "link", create=True)
        assert sorted(os.listdir(tmp)) == sorted(["catalog.0a1b2c3d.duckdb", live_name, live_name + ".lock",
                                                  own.name, own.name + ".lock"])
        assert (tmp / live_name / "part").read_text() == "x"
        assert other.remove_leftovers() == 0
        st.discard(own)
        assert sorted(os.listdir(tmp)) == sorted(["catalog.0a1b2c3d.duckdb", live_name, live_name + ".lock"])
    finally:
        live.kill()
        live.wait()
    assert st.remove_leftovers() == 1
    assert os.listdir(tmp) == ["catalog.0a1b2c3d.duckdb"]
    assert dead_name not in os.listdir(tmp)


def _tmp_run_dirs(store: Path, old: set[str] = frozenset()) -> list[Path]:
    """The tmp directories of runs being written, but those in `old`."""
    try:
        return [p for p in (store / "tmp").iterdir() if p.name not in old and p.is_dir()]
    except FileNotFoundError:
        return []


def _has_parts(store: Path, old: set[str]) -> bool:
    return any(len(list((d / "parts").glob("*.parquet"))) >= 2 for d in _tmp_run_dirs(store, old))


def _merging(store: Path, old: set[str]) -> bool:
    return any((d / "args.parquet").exists() for d in _tmp_run_dirs(store, old))


@pytest.mark.slow
def test_sigkill_at_any_stage_leaves_no_partial_run(tmp_path):
    big = tmp_path / "big.json"
    big_events = grow(big, 80)  # about 32 MB: converted by worker processes, a few seconds to ingest
    big_id = run_id_of(big)
    store = tmp_path / "store"
    traceduck.ingest(BUGGY, store=store)
    base = {run_id_of(BUGGY): count_events(BUGGY)}
    env = {k: v for k, v in os.environ.items() if k != "TRACEDUCK_STORE"}
    # (what, kill when, kill only the main process: its forked workers live on as orphans)
    points = [("after 0.2 s", lambda s, old, t: t >= 0.2, False),
              ("after 0.6 s", lambda s, old, t: t >= 0.6, False),
              ("once its tmp directory exists", lambda s, old, t: bool(_tmp_run_dirs(s, old)), False),
              ("while chunks are converted", lambda s, old, t: _has_parts(s, old), True),
              ("while the final tables are written", lambda s, old, t: _merging(s, old), False)]
    for what, when, main_only in points:
        old = set(os.listdir(store / "tmp"))  # leftovers of the previous kill
        # --force: even a kill that comes too late (after the publish) must leave a valid store
        p = subprocess.Popen([sys.executable, "-m", "traceduck", "ingest", str(big), "--store", str(store), "--force",
                              "-q"], env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        started = time.monotonic()
        try:
            while not when(store, old, time.monotonic() - started):
                assert p.poll() is None, f"ingest ended before the kill point {what!r}: {p.stderr.read()}"
                time.sleep(0.002)
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
            if main_only:
                # The killed ingest's leftovers go even while its orphaned workers still run:
                # its lock died with it.
                leftovers = [d.name for d in _tmp_run_dirs(store, old)]
                Store(store, create=True)
                assert not any((store / "tmp" / (name + ".lock")).exists() for name in leftovers)
        finally:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.communicate()
        visible = events_by_run(store)
        assert visible in (base, {**base, big_id: big_events}), what  # never a partial run
        assert Store(store).run_ids() == sorted(visible)
    left = os.listdir(store / "tmp")
    assert any(not name.endswith(".lock") for name in left)  # the last kill left its tmp directory
    again = td("ingest", big, "--store", store, "--force", "-q")
    assert again.returncode == 0, again.stderr
    assert os.listdir(store / "tmp") == []  # leftovers cleaned
    assert events_by_run(store) == {**base, big_id: big_events}
    runs = td("runs", "--store", store, "--format", "json")
    assert runs.returncode == 0, runs.stderr
    listed = {r["run_id"]: r["event_count"] for r in json.loads(runs.stdout)}
    assert listed == {**base, big_id: big_events}


# --- concurrency ----------------------------------------------------------------------------


@pytest.mark.slow
def test_four_concurrent_ingests_while_a_reader_queries(tmp_path):
    store = tmp_path / "store"
    Store(store, create=True)
    files = {}
    for copies in (3, 4, 5, 6):
        f = tmp_path / f"trace{copies}.json"
        files[f] = grow(f, copies)
    reader, stop = start_reader(store, tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "TRACEDUCK_STORE"}
    procs = [subprocess.Popen([sys.executable, "-m", "traceduck", "ingest", str(f), "--store", str(store), "-q"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for f in files]
    for p in procs:
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
    seen = stop_reader(reader, stop)
    expected = {run_id_of(f): n for f, n in files.items()}
    assert events_by_run(store) == expected  # every run landed complete
    assert os.listdir(store / "tmp") == []
    with traceduck.open(store) as db:
        final = {}
        for t in TABLES:
            for run_id, n in db.sql(f"SELECT run_id, count(*) FROM {t} GROUP BY run_id").fetchall():
                final.setdefault(run_id, {})[t] = n
        for run_id, event_count in db.sql("SELECT run_id, event_count FROM runs").fetchall():
            final[run_id]["event_count"] = event_count
    assert seen["errors"] == []
    assert seen["iterations"] >= 2
    assert seen["run_sets"][0] == 0 and seen["run_sets"][-1] == 4
    for run_id, n in expected.items():
        want = [final[run_id][k] for k in ("event_count",) + TABLES]
        assert want[:3] == [n, 1, n] and all(want[3:])
        assert seen["states"][run_id] == [want]  # never a run with a missing table or a partial count


@pytest.mark.slow
def test_force_replace_while_a_reader_queries(tmp_path):
    store = tmp_path / "store"
    trace = tmp_path / "trace.json"
    n = grow(trace, 8)
    traceduck.ingest(trace, store=store, name="r0")
    traceduck.ingest(BUGGY, store=store)
    run_id = run_id_of(trace)
    reader, stop = start_reader(store, tmp_path)
    for k in range(1, 4):
        traceduck.ingest(trace, store=store, name=f"r{k}", force=True)
    seen = stop_reader(reader, stop)
    assert seen["errors"] == []
    assert seen["iterations"] >= 2
    assert set(seen["names"][run_id]) <= {"r0", "r1", "r2", "r3"}
    states = seen["states"][run_id]
    assert len(states) == 1 and states[0][:3] == [n, 1, n]
    if sys.platform.startswith("linux"):  # an atomic exchange: the run is there at every moment
        assert seen["run_sets"] == [2]
    assert os.listdir(store / "tmp") == []
    with traceduck.open(store) as db:
        assert db.sql("SELECT name FROM runs WHERE run_id = ?", [run_id]).fetchall() == [("r3",)]


def test_replace_without_an_atomic_exchange(tmp_path, monkeypatch):
    import traceduck.store as store_module

    store = tmp_path / "store"
    traceduck.ingest(BUGGY, store=store, name="first")
    monkeypatch.setattr(store_module, "_exchange", lambda a, b: False)
    traceduck.ingest(BUGGY, store=store, name="second", force=True)
    assert os.listdir(store / "tmp") == []
    with traceduck.open(store) as db:
        n = count_events(BUGGY)
        assert db.sql("SELECT name, event_count FROM runs").fetchall() == [("second", n)]
        assert db.sql("SELECT count(*) FROM events").fetchall() == [(n,)]


def test_queries_survive_a_run_vanishing_for_a_moment(tmp_path):
    store = tmp_path / "store"
    traceduck.ingest([BUGGY, FIXED], store=store, jobs=1)
    buggy, fixed = run_id_of(BUGGY), run_id_of(FIXED)
    both = count_events(BUGGY) + count_events(FIXED)
    runs, away = store / "runs" / buggy, tmp_path / "away"
    with traceduck.open(store) as db:
        assert db.sql("SELECT count(*) FROM events").fetchall() == [(both,)]
        # Gone while the tables still list it (a replace without an atomic exchange): the query
        # lists the runs again instead of failing on the missing file.
        os.rename(runs, away)
        assert db.sql("SELECT run_id, count(*) FROM events GROUP BY ALL").fetchall() == [(fixed, count_events(FIXED))]
        os.rename(away, runs)
        scoped = db.scoped([buggy, fixed])
        os.rename(runs, away)  # now gone from a connection that reads named runs only
        timer = threading.Timer(0.015, os.rename, (away, runs))  # back a moment later
        timer.start()
        try:
            assert scoped.sql("SELECT count(*) FROM events").fetchall() == [(both,)]
        finally:
            timer.join()
            scoped.close()
        assert db.sql("SELECT count(*) FROM events").fetchall() == [(both,)]


# --- trace content and parameters are data, never paths or SQL ----------------------------------


def test_hostile_trace_content_stays_data(tmp_path, capsys, monkeypatch):
    events = [
        {"ph": "M", "name": "process_name", "pid": "../../x", "args": {"name": "'; DROP VIEW cpu_ops; --"}},
        {"ph": "X", "cat": "cpu_op", "name": HOSTILE, "pid": "../../x", "tid": "/etc/passwd", "ts": 10.0, "dur": 5.0,
         "args": {"../../y": "'; DROP TABLE runs; --", "Input Dims": [[2, 3]], "Input type": ["float"]}},
        {"ph": "X", "cat": "user_annotation", "name": "/etc/passwd", "pid": "../../x", "tid": "/etc/passwd",
         "ts": 11.0, "dur": 1.0, "args": {}},
        {"ph": "X", "cat": "python_function", "name": "../../evil.py(1): <module>", "pid": "../../x",
         "tid": "/etc/passwd", "ts": 9.0, "dur": 8.0, "args": {}},
    ]
    doc = {"schemaVersion": 1, "traceName": "../../x", "../../meta": "'); DROP VIEW steps; --",
           "distributedInfo": {"backend": HOSTILE, "rank": 0, "world_size": 1},
           "deviceProperties": [{"name": "/etc/passwd"}], "traceEvents": events}
    trace = tmp_path / f"{HOSTILE}.json"
    trace.write_text(json.dumps(doc))
    store = tmp_path / "st'ore \"q\""  # quotes in the store path too
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    assert cli(capsys, "ingest", trace, "--store", store, "--name", "../../escaped", "-q") == (0, "", "")
    run_id = run_id_of(trace)
    tables = sorted(f"{store.name}/runs/{run_id}/{t}.parquet" for t in TABLES)
    from traceduck.runs_table import stamps_key
    from traceduck.store import Store
    from traceduck.viewfile import cache_key

    cache = f"{store.name}/cache/{cache_key()}"  # the runs snapshot the ingest leaves
    expected = sorted([trace.name, "cwd", store.name, f"{store.name}/runs", f"{store.name}/tmp",
                       f"{store.name}/runs/{run_id}", f"{store.name}/runs/{run_id}/{schema_stamp()}", f"{store.name}/runs/{run_id}/checksums.json", *tables,
                       f"{store.name}/cache", cache, f"{cache}/runs-{stamps_key(Store(store).run_stamps())}.parquet"])
    assert sorted(str(q.relative_to(tmp_path)) for q in tmp_path.rglob("*")) == expected
    with traceduck.open(store) as db:
        assert db.sql("SELECT name, trace_name, rank FROM runs").fetchall() == [("../../escaped", "../../x", 0)]
        meta = json.loads(db.sql("SELECT metadata_json FROM runs").fetchall()[0][0])
        assert meta["../../meta"] == "'); DROP VIEW steps; --"
        assert db.sql("SELECT count(*) FROM events").fetchall() == [(len(events),)]
        names = [r[0] for r in db.sql("SELECT name FROM events ORDER BY event_id").fetchall()]
        assert names == [e["name"] for e in events]
        assert db.sql("SELECT string_value FROM args WHERE key = '../../y'").fetchall() == [("'; DROP TABLE runs; --",)]
        assert db.sql("SELECT name FROM cpu_ops").fetchall() == [(HOSTILE,)]
    code, out, err = cli(capsys, "report", "top-ops", "--store", store, "--run", "../../escaped", "--format", "json")
    assert code == 0, err
    assert [r["name"] for r in json.loads(out)] == [HOSTILE]
    out = tmp_path / "cwd" / "back.json"
    code, _, err = cli(capsys, "export", "../../escaped", "-o", out, "--store", store)
    assert code == 0, err
    assert [e["name"] for e in json.loads(out.read_text())["traceEvents"]] == [e["name"] for e in events]


def test_hostile_parameters_and_run_selectors_are_clean_errors(tmp_path, capsys):
    store = tmp_path / "store"
    traceduck.ingest(BUGGY, store=store)
    buggy = run_id_of(BUGGY)
    no_run = f"Runs in the store: {buggy[:12]} (buggy)."
    cases = [
        (("report", "top-ops", "--param", "group_by=name; DROP VIEW events"),
         "Error: --param group_by='name; DROP VIEW events' is not one of name, shape, call_site, category.\n"),
        (("report", "top-ops", "--run", HOSTILE), f"Error: no run matches \"{HOSTILE}\". {no_run}\n"),
        (("report", "top-ops", "--run", f"label:{HOSTILE}=1"),
         f"Error: no run has label {HOSTILE}=1. Labels in the store: none.\n"),
        (("diff", "buggy", "' OR 1=1 --"), f"Error: no run matches \"' OR 1=1 --\". {no_run}\n"),
        (("export", "../../etc/passwd", "-o", tmp_path / "out.json"),
         f"Error: no run matches '../../etc/passwd'. {no_run}\n"),
    ]
    for args, message in cases:
        assert cli(capsys, *args, "--store", store) == (1, "", message), args
    assert not (tmp_path / "out.json").exists()
    # a string parameter is bound: it matches no op, and runs nothing
    code, out, _ = cli(capsys, "report", "ops-by-shape", "--store", store, "--param", f"op=x{HOSTILE}",
                       "--format", "json")
    assert code == 0 and json.loads(out) == []
    count = cli(capsys, "sql", "SELECT count(*) AS n FROM events", "--store", store, "--format", "csv")
    assert count == (0, f"n\n{count_events(BUGGY)}\n", "")
    with traceduck.open(store) as db:
        assert db.sql("SELECT count(*) FROM events WHERE name = ?", [HOSTILE]).fetchall() == [(0,)]
        with pytest.raises(StoreError) as e:
            db.store.run_dir("../x")
    assert str(e.value) == "'../x' is not a run id. Run ids are hex digits; `traceduck runs` lists them."
