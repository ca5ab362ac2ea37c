"""Measure a command's wall time and the peak RSS of its whole process tree (Linux /proc)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path


def _tree_rss_kb(root: int) -> int:
    """Sum of VmRSS over `root` and all its descendants."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            status = (d / "status").read_text()
        except OSError:
            continue
        pid = int(d.name)
        ppid = value = 0
        for line in status.splitlines():
            if line.startswith("PPid:"):
                ppid = int(line.split()[1])
            elif line.startswith("VmRSS:"):
                value = int(line.split()[1])
        children.setdefault(ppid, []).append(pid)
        rss[pid] = value
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total


def measure(cmd: list[str], env: dict | None = None, stderr_to: Path | None = None) -> tuple[float, float, int]:
    """(wall seconds, peak tree RSS in MB, exit code) of a command."""
    start = time.perf_counter()
    err = open(stderr_to, "w") if stderr_to else None
    proc = subprocess.Popen(cmd, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL, stderr=err)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _tree_rss_kb(proc.pid))
        time.sleep(0.05)
    if err:
        err.close()
    return time.perf_counter() - start, peak / 1024, proc.returncode


if __name__ == "__main__":
    wall, peak, rc = measure(sys.argv[1:])
    print(f"{wall:.2f} s, peak RSS {peak:.0f} MB, exit {rc}")
