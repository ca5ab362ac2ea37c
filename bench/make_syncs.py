"""Write a synthetic GPU trace heavy in synchronizing calls, for the critical path's scaling:
N rounds of K kernel launches (each kernel 3 us on device 0, stream 7, linked by correlation)
followed by one cudaDeviceSynchronize that waits for them. No profiler steps: the whole run is one
critical-path window.

Usage: python3 bench/make_syncs.py N K OUT.json
  e.g. python3 bench/make_syncs.py 20000 5 /tmp/syncs.json; traceduck ingest /tmp/syncs.json --store /tmp/s
"""

from __future__ import annotations

import json
import sys


def events(rounds: int, per_round: int) -> list[dict]:
    out: list[dict] = []
    t, corr = 1000.0, 1
    for _ in range(rounds):
        for _ in range(per_round):
            out.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t,
                        "dur": 1.0, "args": {"correlation": corr}})
            out.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": t + 2, "dur": 3.0,
                        "args": {"correlation": corr, "device": 0, "stream": 7}})
            corr += 1
            t += 4
        out.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1, "ts": t,
                    "dur": 5.0, "args": {"correlation": corr}})
        corr += 1
        t += 6
    return out


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    rounds, per_round, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    with open(out, "w") as f:
        json.dump({"traceEvents": events(rounds, per_round)}, f)
