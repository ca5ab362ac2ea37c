"""A soak worker (test_soak.py starts several): one role, in a loop until a deadline, on one store.

    python tests/soak.py ROLE STORE DEADLINE SEED SPEC LOG

ROLE is `ingest` (ingest one of the traces, now and then with --force), `change` (label, rename,
rm or compact), or `read` (reports over every run or one run, and row counts checked against the
reference). SPEC is a JSON file: {"traces": {path: run_id}, "counts": {run_id: {table: rows}}}.
Each operation is one JSON line in LOG: {"op", "run", "t0", "t1", "error", "kind"} (`error` "" when
it succeeded, else the error's one line and `kind` its class; `traceback` for any other exception).

While a `change` process compacts (half of its compacts: its file `compacting-SEED` beside the store), no run is
replaced or removed: `ingest` does not force and `change` labels instead of removing. A compact
that sees a member replaced or removed gives up (ChangedMeanwhile); with a replacement about
every second none would get through on a slow machine. Ingests, reads, labels and renames still
run beside it.
"""

from __future__ import annotations

import json
import random
import sys
import time
import traceback
from pathlib import Path

import traceduck
from traceduck.catalog import all_reports
from traceduck.errors import TraceduckError

TABLES = ("events", "args", "shapes", "stacks", "step_windows")
REPORTS = [name for name, r in all_reports().items() if "one_job" not in r.requires]
HEAVY = {"overview", "roofline"}  # seconds each: read less often


def main(role: str, store: str, deadline: float, seed: int, spec_file: str, log_file: str) -> None:
    spec = json.loads(Path(spec_file).read_text())
    rng = random.Random(seed)
    step = {"ingest": ingest, "change": change, "read": read}[role]
    with open(log_file, "w") as log:
        n = 0
        while time.time() < deadline:
            record = {"op": "", "run": "", "t0": time.time(), "error": "", "kind": ""}
            try:
                step(record, store, spec, rng, f"{seed}-{n}")
            except TraceduckError as e:
                record.update(error=e.one_line(), kind=type(e).__name__)
            except Exception as e:  # noqa: BLE001 - what the soak looks for
                record.update(error=repr(e), kind=type(e).__name__, traceback=traceback.format_exc())
            record["t1"] = time.time()
            log.write(json.dumps(record) + "\n")
            log.flush()
            n += 1


def ingest(record: dict, store: str, spec: dict, rng: random.Random, tag: str) -> None:
    path = rng.choice(sorted(spec["traces"]))
    force = rng.random() < 0.1 and not compacting(store)
    record.update(op="ingest --force" if force else "ingest", run=spec["traces"][path])
    traceduck.ingest(path, store=store, jobs=1, force=force, labels={"soak": tag})


def compacting(store: str) -> bool:
    """Whether a change process is compacting now (see the module docstring)."""
    return any(Path(store).parent.glob("compacting-*"))


def _some_run(store: str, rng: random.Random) -> str | None:
    from traceduck.store import Store

    runs = Store(store).run_ids()
    return rng.choice(runs) if runs else None


def change(record: dict, store: str, spec: dict, rng: random.Random, tag: str) -> None:
    op = rng.choices(["label", "rename", "rm", "compact"], weights=[4, 3, 2, 1])[0]
    record["op"] = op
    if op == "rm" and compacting(store):
        op = record["op"] = "label"
    if op == "compact" and rng.random() < 0.5:  # the others may see runs replaced: ChangedMeanwhile
        traceduck.compact(store=store)
        return
    if op == "compact":
        marker = Path(store).parent / f"compacting-{tag.split('-')[0]}"
        marker.touch()
        try:
            time.sleep(2)  # the replacements and removals already under way end first
            traceduck.compact(store=store)
        finally:
            marker.unlink()
        return
    run = _some_run(store, rng)
    if run is None:
        record["op"] = "none"
        time.sleep(0.1)  # the ingests will publish some
        return
    record["run"] = run
    if op == "label":
        traceduck.label(run, {"k" + tag.split("-")[0]: tag}, store=store)
    elif op == "rename":
        traceduck.rename(run, f"r{tag}", store=store)
    else:
        traceduck.remove(run, store=store)


def read(record: dict, store: str, spec: dict, rng: random.Random, tag: str) -> None:
    with traceduck.open(store) as db:
        what = rng.choice(["report-all", "report-run", "report-run", "counts"])
        record["op"] = what
        if what == "counts":  # every run one query reads has all its rows, in every table
            counts = {}
            query = " UNION ALL ".join(f"SELECT run_id, '{t}', count(*) FROM {t} GROUP BY run_id" for t in TABLES)
            for run_id, table, n in db.sql(query).fetchall():
                counts.setdefault(run_id, {})[table] = n
            for run_id, got in counts.items():
                want = {t: n for t, n in spec["counts"][run_id].items() if n}
                if got != want:
                    raise AssertionError(f"run {run_id}: rows {got}, ingested {want}")
            return
        names = [r for r in REPORTS if r not in HEAVY or rng.random() < 0.2]
        name = rng.choice(names)
        record["op"] += " " + name
        runs = None
        if what == "report-run":
            listed = [r["run_id"] for r in db.runs()]
            if not listed:
                return
            record["run"] = rng.choice(listed)
            runs = [record["run"]]
        db.report_query(name, runs=runs).fetch()


if __name__ == "__main__":
    role, store, deadline, seed, spec, log = sys.argv[1:]
    main(role, store, float(deadline), int(seed), spec, log)
