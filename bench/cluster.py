"""Ingest of a job's rank traces through a Spark standalone cluster on this machine against
`traceduck ingest --jobs 2`: a master and two 1-core workers (each its own JVM, from the Spark that
pyspark ships) on the loopback address, `spark-submit` of examples/spark_ingest_report.py (ingest
only), then the local ingest of the same directory into another store. Prints a markdown table.

    python bench/make_job.py bench/cache/jobs/job-1024 --ranks 1024   # or bench/jobs.py's cache
    python bench/cluster.py bench/cache/jobs/job-1024

The daemons are stopped by their pid at the end, the stores removed (--keep keeps them)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKERS = 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def logged(log: Path, text: str, proc: subprocess.Popen, timeout: float = 120) -> bool:
    """Whether a daemon wrote `text` to its log within `timeout` s (False: it exited or timed out).
    tests/test_spark_cluster.py waits with it too."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text(errors="replace"):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.2)
    return False


def wait_for(log: Path, text: str, proc: subprocess.Popen, timeout: float = 120) -> None:
    if not logged(log, text, proc, timeout):
        sys.exit(f"no {text!r} in {log} after {timeout:.0f} s:\n{log.read_text(errors='replace')[-2000:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("job", type=Path, help="a directory of rank traces (bench/make_job.py)")
    ap.add_argument("--keep", action="store_true", help="keep the two stores and the daemons' logs")
    args = ap.parse_args()
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    tmp = Path(tempfile.mkdtemp(prefix="traceduck-cluster-"))
    (tmp / "conf").mkdir()
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_CONF_DIR": str(tmp / "conf"), "SPARK_DAEMON_MEMORY": "256m",
           "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    spark_class = str(home / "bin" / "spark-class")
    url = f"spark://127.0.0.1:{free_port()}"
    procs: list[subprocess.Popen] = []

    def daemon(name: str, argv: list[str], ready: str) -> None:
        log = tmp / f"{name}.log"
        with open(log, "wb") as out:
            procs.append(subprocess.Popen([spark_class, *argv], stdout=out, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, env=env))
        wait_for(log, ready, procs[-1])

    rows = []
    try:
        daemon("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                          "--port", url.rsplit(":", 1)[1], "--webui-port", str(free_port())], "I have been elected leader")
        for i in range(WORKERS):
            (tmp / f"work-{i}").mkdir()
            daemon(f"worker-{i}", ["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", "1",
                                   "--memory", "1g", "--webui-port", str(free_port()), "--work-dir", str(tmp / f"work-{i}")],
                   "Successfully registered with master")
        started = time.perf_counter()
        p = subprocess.run([str(home / "bin" / "spark-submit"), "--master", url, "--conf", f"spark.pyspark.python={sys.executable}",
                            "--conf", "spark.executor.memory=512m", "--conf", "spark.driver.host=127.0.0.1",
                            "--conf", f"spark.executorEnv.PYTHONPATH={env['PYTHONPATH']}",
                            str(ROOT / "examples" / "spark_ingest_report.py"), str(args.job), str(tmp / "store-spark")],
                           capture_output=True, text=True, env=env)
        whole = time.perf_counter() - started
        if p.returncode:
            sys.exit(f"spark-submit failed:\n{p.stderr[-3000:]}")
        got = json.loads(p.stdout.strip().splitlines()[-1])
        rows.append(("`traceduck.spark.ingest` on the two-worker cluster (one task per file, `jobs=1` each)",
                     got["ingest_s"], whole, got["runs"]))
    finally:
        for proc in reversed(procs):  # the daemons started here, by pid
            if proc.poll() is None:
                proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    started = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "traceduck", "ingest", str(args.job), "--store", str(tmp / "store-local"),
                        "--jobs", "2"], capture_output=True, text=True, env=env)
    whole = time.perf_counter() - started
    if p.returncode:
        sys.exit(f"traceduck ingest failed:\n{p.stderr[-3000:]}")
    runs = len(list((tmp / "store-local" / "runs").iterdir()))
    rows.append(("`traceduck ingest --jobs 2`", None, whole, runs))
    print(f"| ingest of {args.job.name} | ingest s | whole command s | runs |\n|---|---|---|---|")
    for what, ingest_s, whole_s, runs in rows:
        print(f"| {what} | {'' if ingest_s is None else f'{ingest_s:.1f}'} | {whole_s:.1f} | {runs:,} |")
    if args.keep:
        print(f"stores and logs kept in {tmp}", file=sys.stderr)
    else:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
