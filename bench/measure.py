"""Measure a command's wall time and the peak RSS of its whole process tree (Linux /proc)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path


def _children(pid: int) -> list[int]:
    """The children of a process (every thread's `children` list: Linux 3.5 and later)."""
    out: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for t in tasks:
        try:
            out.extend(int(c) for c in (t / "children").read_text().split())
        except OSError:
            continue
    return out


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _tree_rss_kb(root: int) -> int:
    """Sum of VmRSS over `root` and all its descendants. Reads only that tree's /proc entries: a
    sampler that read every process's status every 50 ms took half a core of the two it measured on."""
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += _rss_kb(pid)
        stack.extend(_children(pid))
    return total


def measure(cmd: list[str], env: dict | None = None, stderr_to: Path | None = None) -> tuple[float, float, int]:
    """(wall seconds, peak tree RSS in MB, exit code) of a command. The wall time ends when the
    command ends (a thread waits for it), not at the next 50 ms sample of the RSS. (Not ru_maxrss:
    a child started by vfork counts the parent's peak as its own at exec.)"""
    start = time.perf_counter()
    err = open(stderr_to, "w") if stderr_to else None
    proc = subprocess.Popen(cmd, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL, stderr=err)
    ended: dict = {}

    def wait() -> None:
        _, status = os.waitpid(proc.pid, 0)
        ended.update(at=time.perf_counter(), code=os.waitstatus_to_exitcode(status))

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    peak = 0
    while waiter.is_alive():
        peak = max(peak, _tree_rss_kb(proc.pid))
        waiter.join(0.05)
    proc.returncode = ended["code"]  # reaped here, not by Popen
    if err:
        err.close()
    return ended["at"] - start, peak / 1024, ended["code"]


if __name__ == "__main__":
    wall, peak, rc = measure(sys.argv[1:])
    print(f"{wall:.2f} s, peak RSS {peak:.0f} MB, exit {rc}")
