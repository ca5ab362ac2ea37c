"""Compare two stores table by table, row for row (`EXCEPT ALL` both ways over the Parquet files).

Usage:
    python3 scripts/compare_stores.py OLD_STORE NEW_STORE
    python3 scripts/compare_stores.py --ingest OLD_SRC NEW_SRC OLD_STORE NEW_STORE TRACE_OR_DIR...

With --ingest, each trace file (.json, .json.gz; directories searched) is first ingested into
OLD_STORE by the package under OLD_SRC and into NEW_STORE by the one under NEW_SRC (each file on
its own, `python -m traceduck ingest`, so one that fails is only noted: it must fail the same way
with both). Then every run of either store is compared: the same run ids, and for each run every
table file (`events`, `args`, `shapes`, `stacks`, `step_windows`, `runs`) the same multiset of
rows. Of `runs`, the columns that record the ingest itself (`ingested_at`, `ingest_seconds`,
`tool_version`) are left out. Exit status 1 when anything differs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import duckdb

VARYING = {"runs": ("ingested_at", "ingest_seconds", "tool_version")}


def traces(paths: list[str]) -> list[Path]:
    out = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(f for f in p.rglob("*") if f.is_file() and f.name.endswith((".json", ".json.gz")))
        else:
            out.append(p)
    return out


def ingest(src: str, store: str, files: list[Path]) -> dict[str, str]:
    """Each file ingested on its own; file -> 'ok' or the first line of its error."""
    env = dict(os.environ, PYTHONPATH=str(Path(src).absolute()))
    outcome = {}
    for f in files:
        r = subprocess.run([sys.executable, "-m", "traceduck", "ingest", "-q", "--store", store, str(f)],
                           env=env, capture_output=True, text=True)
        outcome[str(f)] = "ok" if r.returncode == 0 else f"rc {r.returncode}: {(r.stderr.strip().splitlines() or [''])[-1]}"
    return outcome


def compare(old: Path, new: Path) -> list[str]:
    problems = []
    old_runs = {p.name for p in (old / "runs").iterdir() if p.is_dir()}
    new_runs = {p.name for p in (new / "runs").iterdir() if p.is_dir()}
    if old_runs != new_runs:
        problems.append(f"runs only in old: {sorted(old_runs - new_runs)}; only in new: {sorted(new_runs - old_runs)}")
    con = duckdb.connect()
    tables = rows = 0
    for run in sorted(old_runs & new_runs):
        names = {f.name for f in (old / "runs" / run).glob("*.parquet")} | \
                {f.name for f in (new / "runs" / run).glob("*.parquet")}
        for name in sorted(names):
            a, b = old / "runs" / run / name, new / "runs" / run / name
            if not (a.is_file() and b.is_file()):
                problems.append(f"{run}/{name}: in one store only")
                continue
            table = name.removesuffix(".parquet")
            cols_a = [r[0] for r in con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(a)]).fetchall()]
            cols_b = [r[0] for r in con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(b)]).fetchall()]
            if cols_a != cols_b:
                problems.append(f"{run}/{name}: columns differ: {cols_a} / {cols_b}")
                continue
            types_a = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(a)]).fetchall()
            types_b = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(b)]).fetchall()
            if [t[1] for t in types_a] != [t[1] for t in types_b]:
                problems.append(f"{run}/{name}: column types differ")
                continue
            cols = ", ".join(f'"{c}"' for c in cols_a if c not in VARYING.get(table, ()))
            n_a, n_b = (con.execute("SELECT count(*) FROM read_parquet(?)", [str(p)]).fetchone()[0] for p in (a, b))
            only_a = con.execute(f"SELECT count(*) FROM (SELECT {cols} FROM read_parquet(?) EXCEPT ALL "
                                 f"SELECT {cols} FROM read_parquet(?))", [str(a), str(b)]).fetchone()[0]
            only_b = con.execute(f"SELECT count(*) FROM (SELECT {cols} FROM read_parquet(?) EXCEPT ALL "
                                 f"SELECT {cols} FROM read_parquet(?))", [str(b), str(a)]).fetchone()[0]
            tables += 1
            rows += n_a
            if n_a != n_b or only_a or only_b:
                problems.append(f"{run}/{name}: {n_a:,} / {n_b:,} rows; {only_a:,} only in old, {only_b:,} only in new")
    print(f"compared {len(old_runs & new_runs)} runs, {tables} table files, {rows:,} rows")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ingest", nargs=2, metavar=("OLD_SRC", "NEW_SRC"))
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("traces", nargs="*")
    args = ap.parse_args()
    failed = False
    if args.ingest:
        files = traces(args.traces)
        old_out = ingest(args.ingest[0], args.old, files)
        new_out = ingest(args.ingest[1], args.new, files)
        for f in files:
            if old_out[str(f)] != new_out[str(f)]:
                print(f"DIFFERS {f}: old {old_out[str(f)]!r}, new {new_out[str(f)]!r}")
                failed = True
        print(f"ingested {len(files)} files, {sum(v == 'ok' for v in new_out.values())} ok with the new code")
    problems = compare(Path(args.old), Path(args.new))
    for p in problems:
        print("DIFFERS", p)
    print("identical" if not (problems or failed) else "DIFFERENT")
    return 1 if problems or failed else 0


if __name__ == "__main__":
    sys.exit(main())
