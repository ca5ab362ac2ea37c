"""The benchmark: ingest vs the parse floors, side by side, and report latencies; writes BENCHMARKS.md.

    python3 bench/run.py                 # full run: ~480 MB CPU and GPU traces, a ~2 GB CPU trace
    python3 bench/run.py --small --out /tmp/bench.md   # seconds; what CI runs so this cannot rot
    python3 bench/run.py --latency-only  # only the command latency on the samples store; prints it
    python3 bench/run.py --latency-only --before OTHER/src  # each command also from another checkout

Inputs are grown from real traces with ../shared/tools/bigtrace.py and cached in bench/cache/.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(HERE))

from measure import measure  # noqa: E402

SOURCES = {
    "cpu": SHARED / "traces/cpu/full.json",
    "gpu": SHARED / "traces/public/facebookresearch__HolisticTraceAnalysis/tests/data/trace_diff/control/control.json.gz",
}


def grow(kind: str, mb: int, cache: Path) -> Path:
    out = cache / f"{kind}-{mb}mb.json"
    if not out.exists():
        tmp = out.with_suffix(".part")
        subprocess.run([sys.executable, str(SHARED / "tools/bigtrace.py"), str(SOURCES[kind]), str(tmp), "--mb", str(mb)],
                       check=True, capture_output=True)
        tmp.rename(out)
    return out


# Everything after this line in the output file is written by hand (the analysis) and kept.
KEEP = "<!-- written by hand below this line; bench/run.py keeps it -->"


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor() or "unknown CPU")
    mem = next((int(line.split()[1]) // 1024 // 1024 for line in Path("/proc/meminfo").read_text().splitlines()
                if line.startswith("MemTotal")), 0)
    return f"{os.cpu_count()} cores ({cpu}), {mem} GiB memory, Python {platform.python_version()}, {platform.system()}"


def traceduck_cmd() -> list[str]:
    return [sys.executable, "-m", "traceduck"]


def report_latencies(store: Path) -> list[tuple[str, float, int]]:
    """Warm latency of every report (best of three runs after a first one, in one process), in seconds.
    The first one keeps each report's rows beside the run (kept.py): the three after it read them."""
    code = (
        "import json, sys, time, traceduck\n"
        "from traceduck.catalog import all_reports\n"
        "db = traceduck.open(sys.argv[1]); out = []\n"
        "for name in all_reports():\n"
        "    db.report_query(name).fetch(); best = None\n"
        "    for _ in range(3):\n"
        "        t = time.perf_counter(); cols, rows = db.report_query(name).fetch(); s = time.perf_counter() - t\n"
        "        best = s if best is None else min(best, s)\n"
        "    out.append((name, best, len(rows)))\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(store)], check=True, capture_output=True, text=True)
    return [tuple(x) for x in json.loads(done.stdout)]


# The budget of a command on a small store: this many times `python -c "import duckdb"`.
LATENCY_BUDGET = 2.0


def command_latency(cache: Path, repeat: int, small: bool = False,
                    before: str | None = None) -> tuple[str, list[tuple[str, float]]]:
    """Wall time of `traceduck` commands on a store of the two sample traces, side by side with
    `python -c "import duckdb"` (the floor: starting Python and loading DuckDB). Every round runs each
    command once, in turn, so that the machine's drift hits all alike; the best of `repeat` rounds
    counts. Returns the store in words and (command, seconds) rows, the floor first. `small`: one
    report only. `before`: another checkout's `src` directory; each traceduck command also runs
    from it (PYTHONPATH), right after this checkout's, as a row labelled `before:`."""
    store = cache / "store-samples"
    shutil.rmtree(store, ignore_errors=True)  # written by this version, whatever ran before
    subprocess.run(traceduck_cmd() + ["ingest", str(ROOT / "samples"), "--store", str(store), "-q"], check=True)
    sizes = json.loads(subprocess.run(traceduck_cmd() + ["sql", "SELECT count(*) AS runs, sum(event_count) AS events "
                                                         "FROM runs", "--store", str(store), "-f", "json"],
                                      check=True, capture_output=True, text=True).stdout)[0]
    reports = subprocess.run([sys.executable, "-c", "from traceduck.catalog import all_reports; print(*all_reports())"],
                             check=True, capture_output=True, text=True).stdout.split()
    if small:
        reports = ["top-ops"]
    # the floor of any command built on the chosen stack: DuckDB loaded and connected, typer loaded,
    # and one GROUP BY over one run's events file (what a report does at the least)
    events = sorted(store.glob("runs/*/events.parquet"))[0]
    one_query = ("import duckdb, typer; duckdb.connect().sql('SELECT name, count(*), sum(dur_ns) FROM read_parquet(?) "
                 "GROUP BY 1 ORDER BY 3 DESC LIMIT 20', params=[%r]).fetchall()" % str(events))
    commands = [('python -c "import duckdb"', [sys.executable, "-c", "import duckdb"]),
                ("floor: import duckdb; connect; SELECT 1",
                 [sys.executable, "-c", "import duckdb; duckdb.connect().sql('SELECT 1').fetchall()"]),
                ("floor: import duckdb, typer; connect; SELECT 1",
                 [sys.executable, "-c", "import duckdb, typer; duckdb.connect().sql('SELECT 1').fetchall()"]),
                ("floor: the same plus one GROUP BY over a run's events.parquet", [sys.executable, "-c", one_query]),
                ("traceduck --version", traceduck_cmd() + ["--version"]),
                ("traceduck --help", traceduck_cmd() + ["--help"]),
                ("traceduck runs", traceduck_cmd() + ["runs", "--store", str(store)])]
    # one run each (`ranks` refuses runs of several jobs; the sample runs are two jobs of one rank)
    commands += [(f"traceduck report {name} --run buggy",
                  traceduck_cmd() + ["report", name, "--run", "buggy", "--store", str(store)]) for name in reports]
    commands.append(("traceduck diff buggy fixed", traceduck_cmd() + ["diff", "buggy", "fixed", "--store", str(store)]))
    # As installed from a wheel, modules are loaded from compiled bytecode: let the first run write it
    # (into the bench cache, not the source tree), whatever the environment says
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(cache / "pycache")
    runs = [(label, cmd, env) for label, cmd in commands]
    if before:
        # a copy of the store of its own: each version keeps its own runs snapshot in STORE/cache/ and
        # removes another version's
        old_env = env | {"PYTHONPATH": str(Path(before).resolve())}
        old_store = cache / "store-samples-before"
        shutil.rmtree(old_store, ignore_errors=True)
        shutil.copytree(store, old_store)
        runs = [row for label, cmd, e in runs
                for row in ([(label, cmd, e)] + ([(f"before: {label}", [str(old_store) if a == str(store) else a for a in cmd],
                                                   old_env)] if cmd[:3] == traceduck_cmd() else []))]
    for _label, cmd, e in runs:  # a first run writes the store's view file and warms the page cache
        subprocess.run(cmd, check=True, capture_output=True, env=e)
    best = {label: float("inf") for label, _cmd, _e in runs}
    for _ in range(repeat):
        for label, cmd, e in runs:
            started = time.perf_counter()  # not measure(): its 50 ms polling is too coarse here
            done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=e)
            seconds = time.perf_counter() - started
            if done.returncode != 0:
                raise SystemExit(f"{label} failed")
            best[label] = min(best[label], seconds)
    return f"{sizes['runs']} runs, {sizes['events']:,} events", list(best.items())


def render_latency(measured: tuple[str, list[tuple[str, float]]], repeat: int) -> str:
    store, rows = measured
    (floor_label, floor), rest = rows[0], rows[1:]
    lines = [f"Command latency on the samples store ({store}; best of {repeat} rounds, each command once "
             f"per round in turn; budget {LATENCY_BUDGET} x `{floor_label}` = {LATENCY_BUDGET * floor:.2f} s):", "",
             "| command | seconds | / import duckdb | within budget |", "|---|---|---|---|",
             f"| `{floor_label}` | {floor:.3f} | 1.00 | - |"]
    for label, seconds in rest:
        ok = "yes" if seconds <= LATENCY_BUDGET * floor else "no"
        lines.append(f"| `{label}` | {seconds:.3f} | {seconds / floor:.2f} | {ok} |")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> str:
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    inputs = [("cpu", args.mb), ("gpu", args.mb)] + ([("cpu", args.big_mb)] if args.big_mb else [])
    rows = []
    latencies = {}
    for kind, mb in inputs:
        path = grow(kind, mb, cache)
        size = path.stat().st_size
        store = cache / f"store-{kind}-{mb}"
        big = mb == args.big_mb and args.big_mb
        timings = cache / f"timings-{kind}-{mb}.txt"
        ingest_cmd = traceduck_cmd() + ["ingest", str(path), "--store", str(store), "-q", "--timings"]
        # json.loads and ingest alternate, `repeat` times each, and the best of each counts: this
        # machine's speed drifts between runs, and the floor is what the file allows at best.
        floors, ingests = [], []
        for _ in range(1 if big else args.repeat):
            if not big:
                floors.append(measure([sys.executable, str(HERE / "json_loads.py"), str(path)]))
            shutil.rmtree(store, ignore_errors=True)
            ingests.append(measure(ingest_cmd, stderr_to=timings))
            if ingests[-1][2] != 0:
                raise SystemExit(f"ingest of {path} failed")
        floor = _best(floors)
        ingest = _best(ingests)
        spread = {"json.loads": [m[0] for m in floors], "ingest": [m[0] for m in ingests]}
        stream = None if big else measure([sys.executable, str(HERE / "ijson_floor.py"), str(path)])
        store_bytes = sum(f.stat().st_size for f in (store / "runs").rglob("*") if f.is_file())
        events = json.loads(subprocess.run(traceduck_cmd() + ["sql", "SELECT sum(event_count) AS n FROM runs", "--store",
                                                              str(store), "-f", "json"],
                                           check=True, capture_output=True, text=True).stdout)[0]["n"]
        rows.append((kind, path.name, size, events, floor, stream, ingest, store_bytes, timings.read_text().strip(),
                     spread))
        if not big:
            latencies[f"{kind} {size / 1e6:.0f} MB"] = (report_latencies(store), floor[0] if floor else None)
    return render(rows, latencies) + "\n" + render_latency(command_latency(cache, args.repeat_latency, args.small),
                                                           args.repeat_latency)


def _best(runs: list[tuple[float, float, int]]) -> tuple[float, float, int] | None:
    """The fastest run, with the highest peak RSS seen over all runs (memory is not a race)."""
    if not runs:
        return None
    fastest = min(runs, key=lambda m: m[0])
    return (fastest[0], max(m[1] for m in runs), fastest[2])


def render(rows, latencies) -> str:
    lines = ["# Benchmarks", "", f"Machine: {machine()}.", "",
             "Made by `python3 bench/run.py` (inputs grown from real traces by `../shared/tools/bigtrace.py`). "
             "Wall time and peak RSS of the whole process tree, side by side on the same file.", "",
             "| trace | MB | events | json.loads gc-off s (RSS MB) | bare ijson s (RSS MB) | traceduck ingest s (RSS MB) "
             "| ingest / json.loads | store / JSON |",
             "|---|---|---|---|---|---|---|---|"]
    for kind, name, size, events, floor, stream, ingest, store_bytes, _, _ in rows:
        def fmt(m):
            return f"{m[0]:.2f} ({m[1]:.0f})" if m else "not run"
        ratio = f"{ingest[0] / floor[0]:.2f}x" if floor else "-"
        lines.append(f"| {kind} `{name}` | {size / 1e6:.0f} | {events:,} | {fmt(floor)} | {fmt(stream)} | {fmt(ingest)} "
                     f"| {ratio} | {100 * store_bytes / size:.1f}% |")
    lines += ["", "Where ingest's time goes (`traceduck ingest --timings`, the last run of each):", ""]
    lines += [f"- {kind} {size / 1e6:.0f} MB: {t.split(': ', 1)[-1]}" for kind, _, size, _, _, _, _, _, t, _ in rows]
    lines += ["", "Every run (seconds; the tables above take the best of each, and the highest RSS):", ""]
    lines += [f"- {kind} {size / 1e6:.0f} MB: " + "; ".join(f"{k} " + ", ".join(f"{x:.2f}" for x in v)
                                                        for k, v in spread.items())
              for kind, _, size, _, _, _, _, _, _, spread in rows]
    for label, (lat, floor_s) in latencies.items():
        budget = 0.1 * floor_s if floor_s else None
        lines += ["", f"Report latency on the {label} store (warm: best of three runs after a first one, in one process; "
                  "budget 0.1 x json.loads"
                  + (f" = {budget:.2f} s" if budget else "") + "):", "", "| report | seconds | rows | within budget |",
                  "|---|---|---|---|"]
        for name, seconds, n in lat:
            ok = "yes" if budget and seconds <= budget else "no"
            lines.append(f"| {name} | {seconds:.3f} | {n} | {ok} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--small", action="store_true", help="tiny inputs (seconds), for CI")
    p.add_argument("--mb", type=int, default=480, help="size of the CPU and GPU traces")
    p.add_argument("--big-mb", type=int, default=2000, help="size of the memory-check CPU trace (0: skip)")
    p.add_argument("--repeat", type=int, default=3, help="runs of json.loads and of ingest on the 480 MB traces")
    p.add_argument("--cache", default=str(HERE / "cache"), help="where grown traces and stores are kept")
    p.add_argument("--out", default=str(ROOT / "BENCHMARKS.md"), help="where to write the table")
    p.add_argument("--repeat-latency", type=int, default=7, help="rounds of the command latency measurement")
    p.add_argument("--latency-only", action="store_true", help="measure only the command latency and print it")
    p.add_argument("--before", help="with --latency-only: another checkout's src directory, each command side by side")
    args = p.parse_args()
    if args.latency_only:
        cache = Path(args.cache)
        cache.mkdir(parents=True, exist_ok=True)
        print(render_latency(command_latency(cache, args.repeat_latency, before=args.before), args.repeat_latency))
        return
    if args.small:
        args.mb, args.big_mb, args.repeat, args.repeat_latency = 4, 0, 1, 1
    if not SHARED.is_dir():
        raise SystemExit(f"the shared traces are needed at {SHARED}")
    text = run(args)
    out = Path(args.out)
    if out.exists() and KEEP in out.read_text():  # the hand-written analysis below the tables stays
        text += "\n" + KEEP + out.read_text().split(KEEP, 1)[1]
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
