"""The fuzzer: mutations of real traces (tests/fuzz.py) through `ingest`, with and without
`--salvage`, then every report over what was ingested. Each input either ingests, and then every
report answers, or fails with traceduck's own one-line error (an `InputError`), leaving the store as
it was; never a traceback or an internal error, and each in time linear in its size.

`test_fuzz` tries a fixed, seeded count of inputs (slow; README, "Bad input", says how many); every
input that once failed is kept under tests/data/fuzz/ and replayed by `test_fuzz_regression`.
Run more by hand: `python tests/test_fuzz.py COUNT [SEED] [START]` prints each failure and saves
its input under tests/data/fuzz/ (then commit it with the fix).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest

import traceduck
from traceduck.catalog import all_reports
from traceduck.errors import InputError, TraceduckError
from traceduck.viewfile import view_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import SAMPLES, SHARED_TRACES, run_report  # noqa: E402
from fuzz import inputs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REGRESSIONS = ROOT / "tests" / "data" / "fuzz"
# The project's own traces, and small shared ones of other shapes (distributed, AMD, MTIA, SGLang,
# integers beyond int64) where the shared directory is present (as in CI).
SHARED_SEEDS = ["public/AMD-AGI__TraceLens/tests/traces/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz",
                "public/facebookresearch__HolisticTraceAnalysis/tests/data/large_integer_trace/"
                "rank-70.Mar_25_20_48_12.2861.pt.trace.json.gz",
                "public/facebookresearch__HolisticTraceAnalysis/tests/data/trace_filter/sampled_rank-1.json.gz",
                "public/facebookresearch__HolisticTraceAnalysis/tests/data/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
                "public/facebookresearch__HolisticTraceAnalysis/tests/data/mtia_inference_trace/mtia_inference_rank_0.json.gz"]
SEEDS = (sorted(SAMPLES.glob("*.json.gz")) + sorted((ROOT / "tests" / "data" / "seeds").glob("*.json.gz"))
         + [SHARED_TRACES / f for f in SHARED_SEEDS if (SHARED_TRACES / f).is_file()])
COUNT = int(os.environ.get("TRACEDUCK_FUZZ_COUNT", "160"))  # inputs test_fuzz tries (CI)
SEED = int(os.environ.get("TRACEDUCK_FUZZ_SEED", "36"))
JOB = {"job": "fuzz"}  # every run is labelled one job, so that the reports pairing a job's ranks cover them all at once
BATCH = 50  # inputs ingested into one store, whose reports then run over all of their runs at once
FIXED_S, S_PER_MB = 3.0, 10.0  # each input's ingest: at most FIXED_S + S_PER_MB per MB of CPU time (generous: linear, not fast)


@dataclass
class Outcome:
    path: Path
    run_id: str = ""  # the run it published ("": none)
    salvaged: bool = False  # published by the ingest with --salvage (the one without failed)
    refused: int = 0  # ingests that failed with a one-line InputError (0, 1 or 2)
    problem: str = ""  # what broke a rule, with the traceback: "" when all is well


def _store_files(store: Path) -> set[str]:
    return {str(p.relative_to(store)) for p in (store / "runs").rglob("*")} if (store / "runs").exists() else set()


def ingest_one(path: Path, store: Path) -> Outcome:
    """Ingest `path` without and, when that fails, with --salvage: each ingest publishes a run or
    fails with one line leaving the store as it was, in time linear in the file's size."""
    out = Outcome(path)
    size_mb = path.stat().st_size / (1 << 20)
    for salvage in (False, True):
        before = _store_files(store)
        started = time.process_time()  # CPU time: other work on the machine does not count
        try:
            out.run_id = traceduck.ingest(path, store=store, jobs=1, salvage=salvage, force=True, labels=JOB)[0].run_id
            out.salvaged = salvage
        except InputError as e:
            line = e.one_line()
            out.refused += 1
            if "\n" in line or not line.strip():
                out.problem = f"ingest (salvage={salvage}): the error is not one line: {line!r}"
            elif _store_files(store) != before:
                out.problem = f"ingest (salvage={salvage}) failed with {line!r} but changed the store"
        except Exception:  # noqa: BLE001 - what the fuzzer looks for
            out.problem = f"ingest (salvage={salvage}) raised:\n{traceback.format_exc()}"
        seconds = time.process_time() - started
        if not out.problem and seconds > FIXED_S + S_PER_MB * size_mb:
            out.problem = f"ingest (salvage={salvage}) took {seconds:.1f} s for {size_mb:.2f} MB"
        if out.problem or out.run_id:
            break
    return out


def _report_problem(db, name: str, run_ids: list[str]) -> str:
    try:
        run_report(db, name, runs=run_ids)
        return ""
    except TraceduckError as e:
        return f"report {name} failed: {e.one_line()}"
    except Exception:  # noqa: BLE001
        return f"report {name} raised:\n{traceback.format_exc()}"


def try_batch(paths: list[Path], store: Path) -> list[Outcome]:
    """Ingest each file (see `ingest_one`) into a store of their own, then run every report once over
    all the runs published (one run at a time for the reports that pair the ranks of one job, and to
    find the run at fault when a report over all of them fails). Returns each file's outcome."""
    view_file()  # built now, not inside the first ingest (which waits for it) and counted in its time
    outcomes = [ingest_one(p, store) for p in paths]
    runs = {o.run_id: o for o in outcomes if o.run_id and not o.problem}
    if runs:
        with traceduck.open(store) as db:
            for name in all_reports():
                if len(runs) > 1 and not _report_problem(db, name, list(runs)):
                    continue  # else each run alone finds the one at fault (or two runs of one rank were paired)
                for run_id, o in runs.items():
                    if not o.problem:
                        o.problem = _report_problem(db, name, [run_id])
    return outcomes


def _file(data: bytes, suffix: str) -> str:
    return f"{hashlib.sha256(data).hexdigest()[:16]}{suffix}"


def _batches(count: int, seed: int, start: int, dir: Path):
    """(inputs, their files) in batches of BATCH, written under `dir`."""
    batch = []
    for item in inputs(SEEDS, count, seed, start):
        path = dir / _file(item.data, item.suffix)
        path.write_bytes(item.data)
        batch.append((item, path))
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


@pytest.mark.slow  # 1.5-2 min (160 inputs)
def test_fuzz(tmp_path):
    problems, published, refused = [], 0, 0
    for k, batch in enumerate(_batches(COUNT, SEED, 0, tmp_path)):
        store = tmp_path / f"store{k}"
        for (item, path), got in zip(batch, try_batch([p for _, p in batch], store)):
            published += bool(got.run_id)
            refused += got.refused
            if got.problem:
                problems.append(f"input {item.index} ({item.base}: {', '.join(item.mutations)}; "
                                f"`python tests/test_fuzz.py {item.index + 1} {SEED} {item.index}` saves it): {got.problem}")
            path.unlink()
        assert os.listdir(store / "tmp") == []
        shutil.rmtree(store)
    print(f"{COUNT} inputs: {published} published a run, {refused} ingests refused")
    assert not problems, "\n".join(problems[:5])
    assert published and refused  # both kinds of outcome were tried


def regression_files() -> list[Path]:
    return sorted(p for p in REGRESSIONS.glob("*") if p.name.endswith((".json", ".json.gz")))


def test_fuzz_regression(tmp_path):
    """Every input that once broke a rule (kept by the fuzzer) ingests or fails with one line, and
    every report answers over what they ingested (all at once, as test_fuzz runs them)."""
    files = regression_files()
    assert files
    copies = []
    for path in files:
        copies.append(tmp_path / path.name)
        copies[-1].write_bytes(path.read_bytes())
    problems = [f"{o.path.name}: {o.problem}" for o in try_batch(copies, tmp_path / "store") if o.problem]
    assert not problems, "\n".join(problems)


def main(argv: list[str]) -> int:
    """`python tests/test_fuzz.py COUNT [SEED] [START]`: try inputs START..COUNT-1, save each that
    breaks a rule under tests/data/fuzz/, print a summary."""
    import tempfile

    count, seed, start = int(argv[0]), int(argv[1]) if len(argv) > 1 else SEED, int(argv[2]) if len(argv) > 2 else 0
    os.environ.setdefault("TRACEDUCK_CACHE_DIR", tempfile.mkdtemp(prefix="traceduck-fuzz-views-"))
    failed = 0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for k, batch in enumerate(_batches(count, seed, start, Path(tmp))):
            t = time.perf_counter()
            for (item, path), got in zip(batch, try_batch([p for _, p in batch], Path(tmp) / f"store{k}")):
                print(f"{item.index} {len(item.data):>9,} B {'salvaged' if got.salvaged else 'ingested' if got.run_id else 'refused '} "
                      f"{','.join(item.mutations)}", flush=True)
                if got.problem:
                    failed += 1
                    REGRESSIONS.mkdir(parents=True, exist_ok=True)
                    (REGRESSIONS / path.name).write_bytes(item.data)
                    print(f"  FAILED -> tests/data/fuzz/{path.name}\n  {got.problem}", flush=True)
            print(f"batch {k}: {time.perf_counter() - t:.1f} s", flush=True)
    print(f"{count - start} inputs in {time.perf_counter() - started:.0f} s, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
