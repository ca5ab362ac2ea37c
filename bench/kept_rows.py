"""Every report's first call (computes, keeps its rows beside the run) and later call (reads them)
on a store, in one process and as new processes, against `json.loads` of the trace.

    python3 bench/kept_rows.py STORE TRACE [REPORT...]

In one process: the report computed with writing disabled (as before kept rows), the first call
(computes and writes), the best of three later calls. As new processes (`traceduck report NAME
--format json`): the first after the kept rows are removed, the best of two after it, each with the
CPU time (user + system) of the process, which a busy machine disturbs less than the wall time.
Prints one Markdown table row per report.
"""

import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import traceduck
from traceduck import kept
from traceduck.catalog import all_reports

HERE = Path(__file__).resolve().parent


def run(cmd: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of a command."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime


def best(cmd: list[str], n: int) -> tuple[float, float]:
    got = [run(cmd) for _ in range(n)]
    return min(g[0] for g in got), min(g[1] for g in got)


def main() -> None:
    store, trace = Path(sys.argv[1]), sys.argv[2]
    py = sys.executable

    def clear() -> None:
        for d in store.glob(f"runs/*/{kept.DERIVED_DIR}"):
            shutil.rmtree(d)

    loads, loads_cpu = best([py, str(HERE / "json_loads.py"), trace], 2)
    print(f"json.loads (gc off) of {trace}: {loads:.2f} s wall, {loads_cpu:.2f} s CPU", flush=True)
    clear()
    for name in sys.argv[3:] or list(all_reports()):
        with traceduck.open(store) as db:
            db.sql("SELECT count(*) FROM events").fetchall()  # the store opened (a report here would keep its rows)
            write = kept.write
            kept.write = lambda *a, **k: False
            t = time.perf_counter()
            n = len(db.report_query(name).fetch()[1])
            computed = time.perf_counter() - t
            kept.write = write
            clear()
            t = time.perf_counter()
            db.report_query(name).fetch()
            first = time.perf_counter() - t
            later = []
            for _ in range(3):
                t = time.perf_counter()
                db.report_query(name).fetch()
                later.append(time.perf_counter() - t)
        cmd = [py, "-m", "traceduck", "report", name, "--store", str(store), "--format", "json"]
        clear()
        p_first, c_first = run(cmd)
        p_later, c_later = best(cmd, 2)
        print(f"| `{name}` | {n:,} | {computed:.2f} | {first:.2f} | {min(later):.3f} | {p_first:.2f} / {c_first:.2f} "
              f"({c_first / loads_cpu:.3f}x) | {p_later:.2f} / {c_later:.2f} ({c_later / loads_cpu:.3f}x) |", flush=True)


if __name__ == "__main__":
    main()
