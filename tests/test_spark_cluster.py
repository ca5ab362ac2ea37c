"""traceduck.spark on a real standalone Spark cluster on the loopback address: a master and two
workers, each its own JVM started from the Spark that pyspark ships, the driver in this process.
Ingest the public two-rank traces through it, register the store and run reports: DuckDB's rows."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import traceduck

from conftest import run_report, shared_dir
from test_spark import RANKS, _missing, assert_same_rows, rows_of, value

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from cluster import free_port, logged  # noqa: E402 - bench/cluster.py starts daemons the same way

pytestmark = pytest.mark.slow

WORKERS = 2


def spark_home() -> Path:
    try:
        import pyspark
    except ImportError:
        _missing("pyspark is not installed (pip install 'traceduck[spark]')")
    home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-class").is_file() or not (home / "jars").is_dir():
        _missing(f"pyspark at {home} ships no bin/spark-class and jars/")
    return home


def wait_for_line(proc: subprocess.Popen, log: Path, text: str, timeout: float) -> None:
    if logged(log, text, proc, timeout):
        return
    out = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    if proc.poll() is not None and ("JAVA_HOME" in out or "java: not found" in out or "No such file" in out):
        _missing(f"cannot start a Spark standalone daemon (no Java): {out[-300:]}")
    pytest.fail(f"no {text!r} from {' '.join(map(str, proc.args[1:3]))} in {timeout:.0f} s:\n{out}")


def stop(procs: list[subprocess.Popen]) -> None:
    """End the daemons this test started, by their pid, last started first, and wait for each."""
    for p in reversed(procs):
        if p.poll() is None:
            p.terminate()
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=30)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """`spark://127.0.0.1:PORT` of a master and two 1-core workers, stopped at the end."""
    home = spark_home()
    tmp = tmp_path_factory.mktemp("cluster")
    conf = tmp / "conf"
    conf.mkdir()  # no spark-defaults.conf or spark-env.sh from elsewhere
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_CONF_DIR": str(conf), "SPARK_DAEMON_MEMORY": "256m",
           "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"}
    spark_class = str(home / "bin" / "spark-class")
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []
    try:
        log = tmp / "master.log"
        with open(log, "wb") as out:
            procs.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                 "--webui-port", str(free_port())], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env))
        wait_for_line(procs[0], log, "I have been elected leader", 120)
        logs = []
        for i in range(WORKERS):
            logs.append(tmp / f"worker-{i}.log")
            (tmp / f"work-{i}").mkdir()
            with open(logs[-1], "wb") as out:
                procs.append(subprocess.Popen(
                    [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                     "--cores", "1", "--memory", "1g", "--webui-port", str(free_port()),
                     "--work-dir", str(tmp / f"work-{i}")],
                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env))
        for p, log in zip(procs[1:], logs):
            wait_for_line(p, log, "Successfully registered with master", 120)
        yield url
    finally:
        stop(procs)


@pytest.fixture(scope="module")
def spark(cluster, tmp_path_factory):
    from pyspark.sql import SparkSession

    old = os.environ.get("PYSPARK_PYTHON")
    if old is None:
        os.environ["PYSPARK_PYTHON"] = sys.executable  # the executors run this Python ...
    # ... with this traceduck importable (an installed one, or the source tree's)
    src = str(Path(traceduck.__file__).resolve().parents[1])
    session = (SparkSession.builder.master(cluster).appName("traceduck-cluster-tests")
               .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.executor.memory", "512m").config("spark.executor.cores", "1")
               .config("spark.cores.max", str(WORKERS))
               .config("spark.executorEnv.PYTHONPATH", os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")])))
               .config("spark.sql.session.timeZone", "UTC").config("spark.sql.shuffle.partitions", "2")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
               .getOrCreate())
    session.sparkContext.setLogLevel("OFF")
    try:
        # both workers' executors up before the work is handed out
        deadline = time.monotonic() + 120
        while session.sparkContext._jsc.sc().getExecutorMemoryStatus().size() < WORKERS + 1:
            if time.monotonic() > deadline:
                pytest.fail("the cluster started no executor on each worker in 120 s")
            time.sleep(0.2)
        yield session
    finally:
        session.stop()
        if old is None:
            os.environ.pop("PYSPARK_PYTHON", None)


def test_ingest_register_and_report_through_a_two_worker_cluster(spark, tmp_path):
    from traceduck import spark as tds

    assert spark.sparkContext.master.startswith("spark://127.0.0.1:")
    store = tmp_path / "store"
    files = [shared_dir() / rel for rel in RANKS]
    results = tds.ingest(spark, files, store)
    assert [r.path for r in results] == [f.absolute() for f in files] and all(r.events > 0 for r in results)
    # each file was ingested by a task on an executor of the cluster, not on the driver
    pids = spark.sparkContext.parallelize(range(4), 4).map(lambda _: os.getpid()).collect()
    assert os.getpid() not in pids
    views = tds.register(spark, store)
    assert {"gpu_kernels", "cpu_ops", "steps"} <= set(views.views)
    with traceduck.open(store) as db:
        assert sorted(r.run_id for r in results) == sorted(r["run_id"] for r in db.runs())
        for name in ("top-kernels", "steps"):
            df = tds.report(spark, name)
            columns, want = run_report(db, name)
            assert df.columns == columns
            got = rows_of(df.collect())
            assert_same_rows(got, [tuple(value(v) for v in r) for r in want])
            run_col = columns.index("run_id") if "run_id" in columns else None
            if run_col is not None:  # DuckDB's order of runs
                assert [r[run_col] for r in got] == [r[run_col] for r in want], name
