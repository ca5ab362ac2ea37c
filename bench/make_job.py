"""Write an N-rank distributed job from real rank traces, for measuring how the store grows with ranks.

    python3 bench/make_job.py OUT_DIR --ranks 1024 [--templates a.json.gz b.json.gz ...]

Rank r is a copy of template r % len(templates) (default: HTA's public `trace_filter/sampled_rank-0`
and `-1`, two ranks of one 128-rank NCCL job) with `distributedInfo.rank` = r and `world_size` = N
(and `pg_config` ranks, when present, rewritten to 0..N-1), written as OUT_DIR/rank-<r>.json.gz. Every
timestamp is shifted by the same small offset per rank, (r * 7) % 23 us, so the ranks differ (a
straggler is visible) while each collective stays in step with the others: the i-th collective of
every rank still overlaps the i-th of every other. The templates' bytes differ per rank (rank and
world size), so each file is its own run.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
HTA = HERE.parent.parent / "shared/traces/public/facebookresearch__HolisticTraceAnalysis/tests/data"
TEMPLATES = [HTA / "trace_filter/sampled_rank-0.json.gz", HTA / "trace_filter/sampled_rank-1.json.gz"]


def offset_us(rank: int) -> int:
    return (rank * 7) % 23


def _dumps(obj: dict) -> bytes:
    import msgspec

    return msgspec.json.encode(obj)


def load(path: Path) -> dict:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f)


def rank_trace(template: dict, rank: int, world_size: int) -> dict:
    """A copy of `template` as rank `rank` of `world_size`, its times shifted by offset_us(rank)."""
    shift = offset_us(rank)
    events = []
    for e in template["traceEvents"]:
        if isinstance(e, dict) and isinstance(e.get("ts"), (int, float)) and e.get("ph") != "M":
            e = dict(e, ts=e["ts"] + shift)
        events.append(e)
    info = dict(template.get("distributedInfo") or {}, rank=rank, world_size=world_size)
    if isinstance(info.get("pg_config"), list):
        info["pg_config"] = [dict(pg, pg_size=world_size, ranks=list(range(world_size))) for pg in info["pg_config"]]
    out = {k: v for k, v in template.items() if k != "traceEvents"}
    out["distributedInfo"] = info
    out["traceEvents"] = events
    return out


def write_job(out_dir: Path, ranks: int, templates: list[Path]) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    loaded = [load(t) for t in templates]
    paths = []
    for r in range(ranks):
        path = out_dir / f"rank-{r}.json.gz"
        if not path.exists():
            tmp = path.with_suffix(".part")
            with gzip.open(tmp, "wb", compresslevel=1) as f:
                f.write(_dumps(rank_trace(loaded[r % len(loaded)], r, ranks)))
            tmp.rename(path)
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--templates", type=Path, nargs="+", default=TEMPLATES)
    args = ap.parse_args(argv)
    paths = write_job(args.out_dir, args.ranks, args.templates)
    print(f"{len(paths)} rank traces in {args.out_dir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
