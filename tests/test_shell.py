"""`traceduck shell`: the catalog is written, then the DuckDB CLI runs on it, or one clear error."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import traceduck

from conftest import SAMPLES

pytestmark = pytest.mark.skipif(os.name != "posix", reason="fakes the duckdb executable with a script")

BUGGY = SAMPLES / "buggy.json.gz"


def td(*args, path: Path):
    env = {k: v for k, v in os.environ.items() if k != "TRACEDUCK_STORE"}
    env["PATH"] = str(path)  # only this directory: whatever duckdb the machine has is not found
    return subprocess.run([sys.executable, "-m", "traceduck", *map(str, args)], capture_output=True, text=True,
                          env=env)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("shell") / "store"
    traceduck.ingest(BUGGY, store=path)
    return path


def fake_duckdb(bin_dir: Path, record: Path) -> Path:
    """An executable named duckdb that writes its argv as JSON to `record` and exits with 3."""
    bin_dir.mkdir()
    exe = bin_dir / "duckdb"
    exe.write_text(f"#!{sys.executable}\nimport json, sys\n"
                   f"open({str(record)!r}, 'w').write(json.dumps(sys.argv))\nsys.exit(3)\n")
    exe.chmod(0o755)
    return exe


def test_shell_runs_the_duckdb_cli_on_the_catalog(store, tmp_path):
    record = tmp_path / "argv.json"
    exe = fake_duckdb(tmp_path / "bin", record)
    catalog = store / "catalog.duckdb"
    p = td("shell", "--store", store, "--", "-c", "SELECT 1", path=tmp_path / "bin")
    assert p.returncode == 3, p.stderr  # the CLI's own exit status: traceduck was replaced by it
    assert json.loads(record.read_text()) == [str(exe), str(catalog), "-c", "SELECT 1"]
    cpu_ops = sum(1 for e in json.loads(gzip.decompress(BUGGY.read_bytes()))["traceEvents"] if e.get("cat") == "cpu_op")
    con = duckdb.connect(str(catalog), read_only=True)
    assert con.execute("SELECT count(*) FROM cpu_ops").fetchall() == [(cpu_ops,)]
    con.close()


@pytest.mark.slow  # several seconds: new processes or a store built for it
def test_shell_without_the_duckdb_cli_says_how_to_get_one(store, tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    catalog = store / "catalog.duckdb"
    p = td("shell", "--store", store, path=empty)
    assert p.returncode == 1
    assert p.stdout == ""
    assert p.stderr == (
        f"Error: the DuckDB CLI (duckdb) is not on PATH; the catalog is written at {catalog}. "
        "Install the CLI from https://duckdb.org/docs/installation or with `pip install duckdb-cli`, "
        f"or query the catalog from Python: python -c \"import duckdb; print(duckdb.connect('{catalog}')"
        ".sql('FROM runs'))\".\n")
    assert catalog.is_file()  # the hint's way in works: the file is there


def test_shell_on_an_empty_store(tmp_path):
    (tmp_path / "store").mkdir()
    p = td("shell", "--store", tmp_path / "store", path=tmp_path)
    assert p.returncode == 1
    assert p.stderr == (f"Error: no runs in {tmp_path / 'store'}. "
                        "Ingest a trace first: the catalog's views need Parquet files to read.\n")
