"""Every report on a store as a new process, first and second call, against a budget (a fraction of
`json.loads` of the trace the store was ingested from), optionally side by side with another checkout.

    python3 bench/reports.py STORE --json-loads-s 5.16 [--before OLD_CHECKOUT/src] [--repeat 3]

Each command is `python -m traceduck report NAME --store STORE --format json`, a new process, as a
script runs it; wall time and peak RSS of its process tree (bench/measure.py). The first call is the
first after the run's derived data (report rows kept beside a run, see README "Summaries") is
removed; the second is the best of --repeat calls after it. With --before, the same commands run with
PYTHONPATH set to that directory (another checkout's `src`), alternating with this one report by
report, so the machine's drift hits both alike. Prints a markdown table (BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from measure import measure  # noqa: E402

REPORTS = sorted(p.stem.replace("_", "-") for p in (ROOT / "sql" / "reports").glob("*.sql"))


def forget_derived(store: Path) -> None:
    """Remove what reports keep beside each run, so that the next call computes it."""
    for d in store.glob("runs/*/derived"):
        shutil.rmtree(d, ignore_errors=True)


def env_for(src: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = src or str(ROOT / "src")
    return env


def report_cmd(name: str, store: Path, fmt: str) -> list[str]:
    return [sys.executable, "-m", "traceduck", "report", name, "--store", str(store), "--format", fmt]


def run_one(name: str, store: Path, src: str | None, repeat: int, fmt: str) -> tuple[tuple, tuple]:
    forget_derived(store)
    env = env_for(src)
    first = measure(report_cmd(name, store, fmt), env=env)
    if first[2]:
        raise SystemExit(f"report {name} failed on {store} ({src or 'this checkout'})")
    second = min(measure(report_cmd(name, store, fmt), env=env) for _ in range(repeat))
    return first, second


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--json-loads-s", type=float, required=True,
                    help="seconds of json.loads (gc off) of the trace the store holds: the budget's unit")
    ap.add_argument("--before", help="another checkout's src directory, measured side by side")
    ap.add_argument("--repeat", type=int, default=3, help="calls after the first; the best counts")
    ap.add_argument("--format", default="json", choices=["json", "table", "csv"])
    ap.add_argument("--reports", nargs="*", default=REPORTS)
    args = ap.parse_args(argv)
    # the other version reads a copy of the store: a store keeps the view file and runs snapshot of one
    # version at a time, so two versions on one store would each rebuild them on every call after the other's
    before_store = args.store.with_name(args.store.name + "-before")
    if args.before:
        shutil.rmtree(before_store, ignore_errors=True)
        shutil.copytree(args.store, before_store)
    for src, store in [(args.before, before_store), (None, args.store)]:  # views built and pages cached first
        if src or store == args.store:
            subprocess.run([sys.executable, "-m", "traceduck", "runs", "--store", str(store)],
                           env=env_for(src), check=True, capture_output=True)
    unit = args.json_loads_s
    head = "| report | first s | second s | second / json.loads |"
    if args.before:
        head = "| report | before first s | before second s | first s | second s | second / json.loads |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name in args.reports:
        cells = [f"`{name}`"]
        if args.before:
            first, second = run_one(name, before_store, args.before, args.repeat, args.format)
            cells += [f"{first[0]:.2f} ({first[1]:.0f} MB)", f"{second[0]:.2f} ({second[1]:.0f} MB)"]
        first, second = run_one(name, args.store, None, args.repeat, args.format)
        cells += [f"{first[0]:.2f} ({first[1]:.0f} MB)", f"{second[0]:.2f} ({second[1]:.0f} MB)",
                  f"{second[0] / unit:.3f}x (first {first[0] / unit:.3f}x)"]
        lines.append("| " + " | ".join(cells) + " |")
        print(lines[-1], file=sys.stderr, flush=True)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
