"""Faults at every step (issue 36, items 1 and 2): `ingest`, `compact`, `label`, `rename` and `rm`
on a store holding earlier runs, run once per file-system call that writes, makes, renames,
removes or syncs, with exactly that call made to fail (ENOSPC, then EIO) or the process killed
(SIGKILL) on it, by strace's fault injection.

strace counts a syscall's invocations per syscall and per thread, so a point is (syscall, k): the
k-th call of that syscall, injected with `-e inject=SYSCALL:...:when=k` alone. Where one thread
makes every such call (ingest -j 1, label, rename, rm), the points are exactly the command's
write-class calls, each failed once; compact's DuckDB writes its files from several threads, each
counting apart, so a point there fails the k-th call of that syscall in every thread that makes one.

After a failure: exit code 1 and one `Error: ...` line on stderr (empty when the failed call was the
write of that line), no traceback; or exit 0 when the failed call was one the command may lose (a
cache file, the removal of a tmp file), with the command's whole effect in place. Either way the
store opens, every run reads back as before (or, for the run the command changes, as after it: never
a mix), no partial run or pack is visible, and the command then runs to its end. After a kill: the
same, and the next command leaves nothing in STORE/tmp.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import write_trace

WRITE_CALLS = ("write", "pwrite64", "writev", "mkdir", "mkdirat", "rename", "renameat", "renameat2", "unlink",
               "unlinkat", "rmdir", "fsync", "fdatasync", "ftruncate", "link", "linkat")
TABLES = ("runs", "events", "args", "shapes", "stacks", "step_windows")
VOLATILE = ("ingested_at", "ingest_seconds")  # differ between two ingests of the same bytes
WORKERS = 2  # faulted commands at once (CI has 2 cores)
# compact writes ~60 files through DuckDB (summaries, per-run and job reports), ~5 s a run: a
# syscall it makes more than COMPACT_STRIDE times is failed at its 1st call, every COMPACT_STRIDE-th
# after it and its last; and the rerun (compact again, ~5 s) follows every COMPACT_RERUN-th of those
# points, the others followed by a cheap changing command (which cleans tmp/ as every one does)
COMPACT_STRIDE = 32
COMPACT_RERUN = 6

COMMANDS = {
    "ingest": lambda s, d: ["ingest", str(d / "t2.json"), "--store", str(s), "-j", "1"],
    "label": lambda s, d: ["label", "t0", "team=infra", "--store", str(s)],
    "rename": lambda s, d: ["rename", "t0", "renamed", "--store", str(s)],
    "rm": lambda s, d: ["rm", "t1", "--store", str(s)],
    "compact": lambda s, d: ["compact", "--store", str(s)],
}


def strace() -> str:
    """strace's path; missing, the test fails under CI=true (.ci/run installs it) and skips elsewhere."""
    path = shutil.which("strace")
    if path is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("strace is not installed (required when CI=true: apt-get install strace)")
        pytest.skip("strace is not installed")
    return path


def tiny_trace(path: Path, seed: int) -> Path:
    events = [{"ph": "X", "cat": "cpu_op", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1, "ts": 1000 * s,
               "dur": 900} for s in range(3)]
    events += [{"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 4}", "pid": 1, "tid": 1, "ts": 10 + 60 * i,
                "dur": 20 + seed, "args": {"Input Dims": [[2, 3]], "Input type": ["float"]}} for i in range(15)]
    events.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 50, "dur": 5,
                   "args": {"correlation": 1, "device": 0, "stream": 7}})
    return write_trace(path, events)


def state(store: Path) -> dict:
    """Every published run's tables as rows (read with plain DuckDB over its files), by run id."""
    import duckdb

    out = {}
    con = duckdb.connect()
    try:
        for run in sorted((store / "runs").iterdir()):
            if not (run / "runs.parquet").is_file():
                continue
            tables = {}
            for table in TABLES:
                rel = con.sql(f"SELECT * FROM read_parquet('{run / table}.parquet')")
                cols = [c for c in rel.columns if c not in VOLATILE]
                tables[table] = sorted(map(repr, rel.select(*[f'"{c}"' for c in cols]).fetchall()))
            out[run.name] = tables
    finally:
        con.close()
    return out


def injected_points(log: Path) -> tuple[dict[str, int], list[str]]:
    """From an strace -f log: per syscall, the most calls one thread made; and the injected lines."""
    counts: dict[tuple[str, str], int] = {}
    injected = []
    for line in log.read_text(errors="replace").splitlines():
        m = re.match(r"(\d+) +([a-z0-9_]+)\(", line)
        if m:
            counts[m[1], m[2]] = counts.get((m[1], m[2]), 0) + 1
        if "(INJECTED" in line:
            injected.append(line)
    per_call: dict[str, int] = {}
    for (_, call), n in counts.items():
        per_call[call] = max(per_call.get(call, 0), n)
    return per_call, injected


def traced(log: Path, calls: str, inject: str | None, argv: list[str]) -> subprocess.CompletedProcess:
    cmd = [strace(), "-f", "-o", str(log), "-e", f"trace={calls}"]
    if inject:
        cmd += ["-e", f"inject={inject}"]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "COLUMNS": "200"}
    return subprocess.run(cmd + [sys.executable, "-m", "traceduck", *argv], capture_output=True, text=True,
                          env=env, timeout=300)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A store of two runs (t0, t1) with its view cache and runs snapshot built, and a third trace."""
    import traceduck

    root = tmp_path_factory.mktemp("faults")
    for i in range(3):
        tiny_trace(root / f"t{i}.json", i)
    template = root / "template"
    traceduck.ingest([root / "t0.json", root / "t1.json"], store=template, jobs=1)
    traceduck.open(template).close()
    return root, template


class Case:
    """One command: its points (syscall -> calls) and the store's state before and after it."""

    def __init__(self, world, command: str) -> None:
        self.root, self.template = world
        self.command = command
        self.before = state(self.template)
        store = self.fresh("baseline")
        log = self.root / f"{command}.baseline.strace"
        done = traced(log, ",".join("?" + c for c in WRITE_CALLS), None, COMMANDS[command](store, self.root))
        assert done.returncode == 0, done.stderr
        self.points, _ = injected_points(log)
        self.after = state(store)

    def fresh(self, name: str) -> Path:
        store = self.root / f"{self.command}.{name}"
        shutil.rmtree(store, ignore_errors=True)
        shutil.copytree(self.template, store)
        return store

    def all_points(self) -> list[tuple[str, int]]:
        return [(call, k) for call, n in sorted(self.points.items()) for k in range(1, n + 1)]

    def tested_points(self) -> list[tuple[str, int]]:
        if self.command != "compact":
            return self.all_points()
        out = []
        for call, n in sorted(self.points.items()):
            ks = range(1, n + 1) if n <= COMPACT_STRIDE else sorted({*range(1, n + 1, COMPACT_STRIDE), n})
            out += [(call, k) for k in ks]
        return out

    def check_store(self, store: Path, what: str) -> bool:
        """The store opens and is wholly as before or wholly as after the command; True: after."""
        import traceduck
        from traceduck import packs
        from traceduck.store import Store, verify_checksums

        with traceduck.open(store) as db:
            listed = sorted(r["run_id"] for r in db.runs())
            counts = db.sql("SELECT count(*) FROM events").fetchall()[0][0]
        now = state(store)
        assert sorted(now) == listed, what
        if self.command == "compact":
            assert now == self.before, what
            found = packs.list_packs(Store(store))  # a pack is listed once whole (its manifest is in)
            for pack in found:
                assert verify_checksums(pack.path) == [], what
                assert sorted(pack.members) == sorted(self.before), what
            assert len(found) <= 1, f"{what}: packs {[p.pack_id for p in found]}"
            assert counts == sum(len(t["events"]) for t in self.before.values()), what
            return len(found) == 1
        assert now in (self.before, self.after), f"{what}: runs {sorted(now)}, a mix of before and after"
        return now == self.after

    def run_point(self, call: str, k: int, mode: str) -> dict:
        what = f"{self.command}: {mode} at {call} #{k}"
        store = self.fresh(f"{call}.{k}.{mode}")
        log = store.with_suffix(".strace")
        action = "signal=KILL" if mode == "KILL" else f"error={mode}"
        done = traced(log, call, f"{call}:{action}:when={k}", COMMANDS[self.command](store, self.root))
        _, injected = injected_points(log)
        killed = "killed by SIGKILL" in log.read_text(errors="replace")
        out = {"injected": bool(injected) or killed, "rc": done.returncode}
        assert "Traceback" not in done.stderr, f"{what}: {done.stderr}"
        if mode == "KILL":
            assert done.returncode in (0, -9, 137) or (done.returncode != 0 and injected), f"{what}: {done.stderr}"
        elif done.returncode != 0:
            assert done.returncode == 1, f"{what}: exit {done.returncode}: {done.stderr}"
            lines = done.stderr.splitlines()
            to_stderr = any(re.match(r"\d+ +write\(2,", line) for line in injected)
            assert (lines == [] and to_stderr) or (len(lines) == 1 and lines[0].startswith("Error: ")), \
                f"{what}: stderr {done.stderr!r}"
        else:
            assert not done.stderr.startswith("Error"), f"{what}: {done.stderr}"
        applied = self.check_store(store, what)
        if done.returncode == 0 and mode != "KILL":
            assert applied, f"{what}: exit 0 but the command's change is not all there"
        out["applied"] = applied
        # the next command (the same one, without a fault) succeeds and leaves nothing in tmp/
        full = self.command != "compact" or self.tested_points().index((call, k)) % COMPACT_RERUN == 0
        try:
            if full:
                self.rerun(store)
            else:
                import traceduck
                traceduck.rename("t0", "t0", store=store)
        except Exception as e:  # noqa: BLE001
            raise AssertionError(f"{what}: the rerun failed: {e}") from e
        assert self.check_store(store, f"{what}, rerun") or not full, f"{what}: the rerun did not apply"
        left = sorted(p.name for p in (store / "tmp").iterdir())
        assert left == [], f"{what}: left in tmp/ after the next command: {left}"
        shutil.rmtree(store, ignore_errors=True)
        log.unlink(missing_ok=True)
        return out

    def rerun(self, store: Path) -> None:
        import traceduck

        if self.command == "ingest":
            traceduck.ingest(self.root / "t2.json", store=store, jobs=1)
        elif self.command == "label":
            traceduck.label("t0", {"team": "infra"}, store=store)
        elif self.command == "rename":  # once renamed, to its own name: a write that changes nothing
            traceduck.rename("t0" if _has(store, "t0") else "renamed", "renamed", store=store)
        elif self.command == "rm":
            if _has(store, "t1"):
                traceduck.remove("t1", store=store)
            else:
                traceduck.rename("t0", "t0", store=store)
        else:
            traceduck.compact(store=store)


def _has(store: Path, name: str) -> bool:
    import pyarrow.parquet as pq

    return any(pq.read_table(p, columns=["name"]).column(0)[0].as_py() == name
               for p in (store / "runs").glob("*/runs.parquet"))


_cases: dict[str, Case] = {}


def case(world, command: str) -> Case:
    if command not in _cases:
        _cases[command] = Case(world, command)
    return _cases[command]


def sweep(world, command: str, mode: str) -> None:
    from traceduck import packs, store as store_module

    c = case(world, command)
    points = c.tested_points()
    started = time.perf_counter()
    grace = store_module.REMOVE_GRACE_S, packs.REMOVE_GRACE_S
    store_module.REMOVE_GRACE_S = packs.REMOVE_GRACE_S = 0.0  # the reruns in this process need no grace
    try:
        with ThreadPoolExecutor(WORKERS) as pool:
            results = list(pool.map(lambda p: c.run_point(*p, mode), points))
    finally:
        store_module.REMOVE_GRACE_S, packs.REMOVE_GRACE_S = grace
    failed = sum(r["rc"] != 0 for r in results)
    total = len(c.all_points())
    tested = f"{len(points)} of {total}" if len(points) != total else f"{total}"
    print(f"{command}: {tested} failure points x {mode}, all passed ({failed} exited non-zero, "
          f"{sum(r['applied'] for r in results)} applied; {time.perf_counter() - started:.0f} s)")
    assert any(r["injected"] for r in results)


# EIO only where a run is cheap (CI's time): label, rename, rm
FAULTS = [(c, e) for c in COMMANDS for e in ("ENOSPC", "EIO") if e == "ENOSPC" or c in ("label", "rename", "rm")]


@pytest.mark.slow
@pytest.mark.parametrize("command,errno_name", FAULTS, ids=[f"{c}-{e}" for c, e in FAULTS])
def test_every_write_fails_in_turn(world, command, errno_name):
    sweep(world, command, errno_name)


@pytest.mark.slow
@pytest.mark.parametrize("command", list(COMMANDS))
def test_killed_at_every_write(world, command):
    sweep(world, command, "KILL")
