"""How the store grows with the ranks of a job: ingest, size, and command latency at N ranks,
before and after `traceduck compact`. Prints a markdown table (BENCHMARKS.md, "Many ranks").

    python3 bench/jobs.py --ranks 8 128 1024 [--cache bench/cache/jobs] [--jobs 2] [--every-report]
                          [--format json table] [--packed-only]

Jobs are written by bench/make_job.py (HTA's two public ranks, copied to N ranks). Each command is
a new process with `--format json` (and with each other --format given: `table` as people read
it), as a script would run it; wall time and peak RSS of the process tree: once over the runs' own
files, best of --repeat after `compact`. --packed-only leaves out the pass over the runs' own files
(minutes per report at thousands of ranks) and keeps a pack already there (`compact` then has
nothing to do). Stores are kept in the cache and reused (the ingest time of the first run is kept
with them). --every-report adds a table of every report on the packed stores, against the first
store given (best of --repeat).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from make_job import write_job, TEMPLATES  # noqa: E402
from measure import measure  # noqa: E402

REPORTS = sorted(p.stem for p in (HERE.parent / "sql" / "reports").glob("*.sql"))

COMMANDS = [["runs"], ["report", "overview"], ["report", "ranks"], ["report", "comm-overlap"],
            ["report", "top-kernels"], ["report", "gpu-utilization"]]


def traceduck(*args: str) -> list[str]:
    return [sys.executable, "-m", "traceduck", *args]


def prepare(n: int, cache: Path, jobs: int) -> tuple[Path, dict]:
    traces, store, facts = cache / f"job-{n}", cache / f"store-{n}", cache / f"store-{n}.json"
    if not facts.exists():
        write_job(traces, n, TEMPLATES)
        shutil.rmtree(store, ignore_errors=True)
        ingest_s, ingest_rss, code = measure(traceduck("ingest", str(traces), "--store", str(store), "--jobs", str(jobs), "-q"))
        if code:
            raise SystemExit(f"ingest of {traces} failed")
        size = sum(f.stat().st_size for f in (store / "runs").rglob("*") if f.is_file())
        events = sum(1 for _ in traces.iterdir())
        facts.write_text(json.dumps({"ingest_s": ingest_s, "ingest_rss_mb": ingest_rss, "store_bytes": size,
                                     "files": events}))
    return store, json.loads(facts.read_text())


def latencies(store: Path, repeat: int, commands: list[list[str]] = COMMANDS,
              formats: tuple[str, ...] = ("json",)) -> dict[str, tuple[float, float]]:
    """Best of `repeat` (wall s, peak RSS MB) of each command in each format, by 'COMMAND' (json) or
    'COMMAND --format FORMAT'."""
    out = {}
    for cmd in commands:
        for fmt in formats:
            runs = [measure(traceduck(*cmd, "--store", str(store), "--format", fmt)) for _ in range(repeat)]
            wall, rss, code = min(runs)
            if code:
                raise SystemExit(f"{' '.join(cmd)} --format {fmt} failed on {store}")
            out[" ".join(cmd) + ("" if fmt == "json" else f" --format {fmt}")] = (wall, rss)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[8, 128, 1024])
    ap.add_argument("--cache", type=Path, default=HERE / "cache" / "jobs")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs of each command on the packed store")
    ap.add_argument("--every-report", action="store_true", help="also every report on each packed store")
    ap.add_argument("--format", nargs="+", choices=["json", "table", "csv"], default=["json"], dest="formats",
                    help="measure each command with each of these output formats (json first when given)")
    ap.add_argument("--packed-only", action="store_true",
                    help="only the packed store: no pass over the runs' own files, a pack already there kept")
    args = ap.parse_args(argv)
    formats = tuple(sorted(set(args.formats), key=lambda f: (f != "json", f)))
    args.cache.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in args.ranks:
        store, facts = prepare(n, args.cache, args.jobs)
        if not args.packed_only:
            shutil.rmtree(store / "packs", ignore_errors=True)
        per_run = {} if args.packed_only else latencies(store, 1, formats=formats)  # the slow case, once
        compact_s, compact_rss, code = measure(traceduck("compact", "--store", str(store)))
        if code:
            raise SystemExit(f"compact of {store} failed")
        pack_bytes = sum(f.stat().st_size for f in (store / "packs").rglob("*") if f.is_file())
        print(f"{n} ranks: ingest {facts['ingest_s']:.1f} s ({facts.get('ingest_rss_mb', 0):.0f} MB), compact "
              f"{compact_s:.1f} s ({compact_rss:.0f} MB), pack {pack_bytes / 1e6:.1f} MB", file=sys.stderr, flush=True)
        packed = latencies(store, args.repeat, formats=formats)
        every = latencies(store, args.repeat, [["report", r] for r in REPORTS], formats) if args.every_report else {}
        rows.append((n, facts, compact_s, per_run, packed, every))
        print(f"{n} ranks done", file=sys.stderr, flush=True)
    heads = [f"`{c}` packed" if args.packed_only else f"`{c}` per-run files / packed" for c in packed]
    print("| ranks | ingest (`--jobs %d`) | store | compact | " % args.jobs + " | ".join(heads) + " |")
    print("|---" * (4 + len(heads)) + "|")
    for n, facts, compact_s, per_run, packed, _every in rows:
        cells = [(f"{per_run[c][0]:.2f} s ({per_run[c][1]:.0f} MB) / " if c in per_run else "")
                 + f"{packed[c][0]:.2f} s ({packed[c][1]:.0f} MB)" for c in packed]
        print(f"| {n:,} | {facts['ingest_s']:.1f} s | {facts['store_bytes'] / 1e6:.1f} MB | {compact_s:.1f} s | "
              + " | ".join(cells) + " |")
    if args.every_report:
        first = rows[0][5]
        print()
        print("| report | " + " | ".join(f"{n:,} ranks (/ {rows[0][0]:,})" for n, *_ in rows) + " |")
        print("|---" * (1 + len(rows)) + "|")
        for cmd in first:
            print(f"| `{' '.join(cmd.split()[1:])}` | " + " | ".join(
                f"{every[cmd][0]:.2f} s ({every[cmd][1]:.0f} MB, {every[cmd][0] / first[cmd][0]:.1f}x)"
                for *_, every in rows) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
