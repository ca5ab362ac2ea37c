"""Every report's csv on every run of a store, one file each: a before/after check for refactors.

    python scripts/snapshot_reports.py STORE OUT [--diff A:B]... [--jobs N]

Writes OUT/<run name>/<report>.csv (stdout, then `# stderr:` and `# exit:` lines), every report
over all runs together (OUT/_all/<report>.csv), and `diff A B --by X` for each `--diff A:B` (run
names; OUT/_diff/...). Compare two snapshots with `diff -r`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

DIFF_BY = ["op", "kernel", "call_site", "shape", "copy"]


def traceduck(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "traceduck", *args], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200"})
    return f"{done.stdout}# stderr:\n{done.stderr}# exit: {done.returncode}\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store")
    parser.add_argument("out", type=Path)
    parser.add_argument("--diff", action="append", default=[], help="A:B, two run names to diff")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    runs = json.loads(subprocess.run([sys.executable, "-m", "traceduck", "runs", "--store", args.store, "--format", "json"],
                                     capture_output=True, text=True, check=True).stdout)
    names = {r["name"]: r["run_id"] for r in runs}
    reports = [r["report"] for r in json.loads(subprocess.run(
        [sys.executable, "-m", "traceduck", "reports", "--format", "json"], capture_output=True, text=True, check=True).stdout)]
    work = [(args.out / name / f"{report}.csv", ["report", report, "--store", args.store, "--run", run_id, "--format", "csv"])
            for name, run_id in sorted(names.items()) for report in reports]
    work += [(args.out / "_all" / f"{report}.csv", ["report", report, "--store", args.store, "--format", "csv"])
             for report in reports]
    for pair in args.diff:
        a, b = pair.split(":")
        work += [(args.out / "_diff" / f"{a}-{b}".replace("/", "_") / f"{by}.csv",
                  ["diff", names[a], names[b], "--by", by, "--store", args.store, "--format", "csv"])
                 for by in DIFF_BY]

    def one(item: tuple[Path, list[str]]) -> None:
        path, argv = item
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(traceduck(*argv))

    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(one, work))
    print(f"{len(work)} outputs in {args.out}")


if __name__ == "__main__":
    main()
