"""Every table, view and column is documented, in the SQL files and in DuckDB's catalog."""

from __future__ import annotations

import duckdb
import pytest

import traceduck
from traceduck.catalog import documented_relations, view_files

from conftest import SAMPLES


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    store = tmp_path_factory.mktemp("catalog") / "store"
    traceduck.ingest(SAMPLES / "buggy.json.gz", store=store)
    with traceduck.open(store) as database:
        yield database


def test_every_relation_has_a_description():
    rels = documented_relations()
    assert {"runs", "events", "args", "shapes", "stacks", "cpu_ops", "launches", "gpu_kernels", "gpu_memcpys",
            "gpu_memsets", "steps", "tensor_copies", "dtypes", "call_sites"} <= set(rels)
    missing = [name for name, rel in rels.items() if len(rel.doc) < 20]
    assert missing == []


def test_every_column_is_documented():
    undocumented = [f"{name}.{c.name}" for name, rel in documented_relations().items()
                    for c in rel.columns if len(c.doc) < 5]
    assert undocumented == []


def test_declared_columns_match_what_duckdb_returns(db):
    for name, rel in documented_relations().items():
        actual = db.con.execute(f"DESCRIBE {name}").fetchall()
        assert [(r[0], r[1]) for r in actual] == [(c.name, c.type) for c in rel.columns], name


def test_docs_reach_the_duckdb_catalog(db):
    # `_runs_rows` is plumbing under the documented view `runs` (filled by each connection; a comment
    # there would cost every command its time)
    rows = db.con.execute("SELECT table_name, column_name, comment FROM duckdb_columns() WHERE NOT internal "
                          "AND table_name NOT LIKE '\\_%' ESCAPE '\\'").fetchall()
    assert {t for t, _, _ in rows} >= {"runs", "events", "call_site_rules", "cpu_ops"}
    no_comment = [f"{t}.{c}" for t, c, comment in rows if not comment]
    assert no_comment == []
    views = db.con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal AND comment IS NULL").fetchall()
    assert views == []


def test_view_files_load_in_a_fresh_connection():
    con = duckdb.connect()
    assert len(view_files()) >= 5
    for f in view_files():
        assert f.relations, f"{f.path.name} documents no view"
    con.close()


def test_a_missing_column_doc_is_caught():
    from traceduck.catalog import parse_sql_file

    rel = parse_sql_file("-- A view.\n-- @column a INTEGER\nCREATE VIEW v AS SELECT 1 AS a;\n").relations[0]
    assert rel.columns[0].doc == ""  # the check above would list it


def test_catalog_file_opens_in_a_fresh_duckdb_connection(tmp_path):
    import gzip
    import json

    from traceduck.catalog_file import write_catalog
    from traceduck.store import Store

    store = tmp_path / "store"
    traceduck.ingest(SAMPLES / "buggy.json.gz", store=store)
    path = write_catalog(Store(store))
    expected = sum(1 for e in json.loads(gzip.decompress((SAMPLES / "buggy.json.gz").read_bytes()))["traceEvents"]
                   if e.get("cat") == "cpu_op")
    con = duckdb.connect(str(path), read_only=True)
    assert con.execute("SELECT count(*) FROM cpu_ops").fetchall()[0][0] == expected
    assert con.execute("SELECT comment FROM duckdb_views() WHERE view_name = 'tensor_copies'").fetchall()[0][0]
    con.close()
    traceduck.ingest(SAMPLES / "fixed.json.gz", store=store)  # views read by glob: new runs show up
    con = duckdb.connect(str(path), read_only=True)
    assert con.execute("SELECT count(*) FROM runs").fetchall()[0][0] == 2
    con.close()


def test_catalog_file_uses_duckdb_1_0_storage(tmp_path):
    """A DuckDB CLI refuses a file in a newer storage format than its own; `pip install duckdb-cli` can lag the
    Python package, so the catalog is written in DuckDB 1.0's format (storage version number 64)."""
    import struct

    from traceduck.catalog_file import write_catalog
    from traceduck.store import Store

    store = tmp_path / "store"
    traceduck.ingest(SAMPLES / "buggy.json.gz", store=store)
    header = write_catalog(Store(store)).read_bytes()[:20]
    assert header[8:12] == b"DUCK"
    assert struct.unpack("<Q", header[12:20]) == (64,)
