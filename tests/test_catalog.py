"""Every table, view and column is documented, in the SQL files and in DuckDB's catalog."""

from __future__ import annotations

import dataclasses
import re

import duckdb
import pytest

import traceduck
from traceduck import session
from traceduck.catalog import Relation, documented_relations, statements, tables, view_files

from conftest import SAMPLES, write_trace


@pytest.fixture(scope="module")
def db(samples_template):
    with traceduck.open(samples_template) as database:  # read only
        yield database


def undescribed(rels: dict[str, Relation]) -> list[str]:
    """The relations without a description (a sentence, at least 20 characters)."""
    return [name for name, rel in rels.items() if len(rel.doc) < 20]


def undocumented_columns(rels: dict[str, Relation]) -> list[str]:
    """`relation.column` for each column without a description."""
    return [f"{name}.{c.name}" for name, rel in rels.items() for c in rel.columns if len(c.doc) < 5]


def test_every_relation_has_a_description():
    rels = documented_relations()
    assert {"runs", "events", "args", "shapes", "stacks", "cpu_ops", "launches", "gpu_kernels", "gpu_memcpys",
            "gpu_memsets", "steps", "tensor_copies", "dtypes", "call_sites"} <= set(rels)
    assert undescribed(rels) == []


def test_every_column_is_documented():
    assert undocumented_columns(documented_relations()) == []


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
    """Each view file runs, in load order, over nothing but the store's tables (empty) and the files
    before it, and creates exactly the relations it documents, each of which can be queried."""
    con = duckdb.connect()
    con.execute(session.macros_sql())
    for rel in tables().values():
        con.execute(rel.body)
    files = view_files()
    assert len(files) >= 5

    def relations() -> set[str]:
        return {n for (n,) in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal UNION ALL "
                                          "SELECT table_name FROM duckdb_tables()").fetchall()}

    for f in files:
        assert f.relations, f"{f.path.name} documents no view"
        before = relations()
        con.execute(f.text)
        assert relations() - before == {r.name for r in f.relations}, f.path.name
        for rel in f.relations:
            con.execute(f"SELECT * FROM {rel.name} LIMIT 0")
    con.close()


def test_a_missing_column_doc_is_caught():
    """The checks above on SQL with a doc missing: a view column, a table column, a description."""
    from traceduck.catalog import parse_sql_file

    view = parse_sql_file("-- A view of one column, with a description.\n-- @column a INTEGER\n"
                          "-- @column b INTEGER the second column\nCREATE VIEW v AS SELECT 1 AS a, 2 AS b;\n").relations
    table = parse_sql_file("-- A table without a description\nCREATE TABLE t (\n  -- the first column\n  a INTEGER,\n"
                           "  b VARCHAR\n);\n").relations
    rels = {r.name: r for r in view + table}
    assert undocumented_columns(rels) == ["v.a", "t.b"]
    assert undescribed({"t": rels["t"], "short": Relation("short", "Too short.", "view")}) == ["short"]
    # a real view file with the doc of its first declared column taken out
    text = next(f.path.read_text() for f in view_files() if f.path.name.endswith("cpu.sql"))
    line = next(ln for ln in text.splitlines() if ln.startswith("-- @column"))  # cpu_ops' first column
    assert undocumented_columns({r.name: r for r in parse_sql_file(text).relations}) == []
    dropped = parse_sql_file(text.replace(line, " ".join(line.split()[:4]), 1)).relations
    assert undocumented_columns({r.name: r for r in dropped}) == [f"cpu_ops.{line.split()[2]}"]


def test_catalog_file_opens_in_a_fresh_duckdb_connection(samples_store, tmp_path, capsys):
    """`traceduck catalog` writes STORE/catalog.duckdb in DuckDB 1.0's storage format: any DuckDB
    client reads the views from it, including over runs ingested after it was written."""
    import gzip
    import json
    import struct

    from traceduck.cli import main

    path = samples_store / "catalog.duckdb"
    with pytest.raises(SystemExit) as done:
        main(["catalog", "--store", str(samples_store)])
    assert done.value.code == 0
    assert capsys.readouterr() == (f"{path} (open it with any DuckDB client, e.g. `duckdb {path}`)\n", "")
    # A DuckDB CLI refuses a file in a newer storage format than its own; `pip install duckdb-cli` can lag the
    # Python package, so the catalog is written in DuckDB 1.0's format (storage version number 64).
    header = path.read_bytes()[:20]
    assert header[8:12] == b"DUCK" and struct.unpack("<Q", header[12:20]) == (64,)
    expected = sum(1 for sample in ("buggy", "fixed")
                   for e in json.loads(gzip.decompress((SAMPLES / f"{sample}.json.gz").read_bytes()))["traceEvents"]
                   if e.get("cat") == "cpu_op")
    con = duckdb.connect(str(path), read_only=True)
    assert con.execute("SELECT count(*) FROM cpu_ops").fetchall()[0][0] == expected
    assert con.execute("SELECT comment FROM duckdb_views() WHERE view_name = 'tensor_copies'").fetchall()[0][0]
    con.close()
    # views read by glob: new runs show up
    traceduck.ingest(write_trace(tmp_path / "new.json", [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1,
                                                          "tid": 1, "ts": 1, "dur": 2}]), store=samples_store)
    con = duckdb.connect(str(path), read_only=True)
    assert con.execute("SELECT count(*) FROM runs").fetchall()[0][0] == 3
    assert con.execute("SELECT count(*) FROM cpu_ops").fetchall()[0][0] == expected + 1
    con.close()
    # a store without runs: nothing for the views to read
    empty = tmp_path / "empty"
    (empty / "runs").mkdir(parents=True)
    with pytest.raises(SystemExit) as exit_code:
        main(["catalog", "--store", str(empty)])
    assert exit_code.value.code == 1
    assert capsys.readouterr() == ("", f"Error: no runs in {empty}. Ingest a trace first: the catalog's views need "
                                      "Parquet files to read.\n")


def _defined_names(f) -> set[str]:
    """What a file of sql/views defines: its relations and macros, and what its summaries generate."""
    return {r.name for r in f.relations} | {m.name for m in f.macros} | \
        {name for s in f.summaries for name in (s.name, s.packed)}


def _used_names(text: str, names: set[str]) -> set[str]:
    """The names that the statements of a SQL file mention as a word (comments left out)."""
    code = "\n".join(re.sub(r"--[^\n]*", "", st.sql) for st in statements(text))
    return {n for n in names if re.search(rf"\b{re.escape(n)}\b", code, re.I)}


def requirement_errors(files) -> list[str]:
    """Where a file of sql/views uses what another defines without requiring that file (directly or
    through the files it requires), or requires a file whose names it does not use."""
    by_name = {f.name: f for f in files}
    defines = {f.name: _defined_names(f) for f in files}

    def closure(name: str) -> set[str]:
        out: set[str] = set()
        todo = list(by_name[name].requires)
        while todo:
            r = todo.pop()
            if r not in out:
                out.add(r)
                todo += by_name[r].requires
        return out

    errors = []
    for f in files:
        text = f.path.read_text()
        reachable = closure(f.name)
        for other, names in defines.items():
            used = _used_names(text, names) if other != f.name else set()
            if used and other not in reachable:
                errors.append(f"{f.name} uses {', '.join(sorted(used))} of {other} without requiring it")
            if other in f.requires and not used:
                errors.append(f"{f.name} requires {other} but uses nothing of it")
    return errors


def test_each_view_file_requires_the_files_it_uses():
    files = view_files()
    assert {f.name for f in files} >= {"reference", "stacks", "cpu", "gpu", "cost", "critical_path"}
    assert requirement_errors(files) == []
    order = [f.name for f in files]
    assert all(order.index(r) < order.index(f.name) for f in files for r in f.requires)


def test_a_missing_use_or_requirement_is_caught(tmp_path):
    """The check above on a file that uses cpu_ops without requiring cpu, and one that requires a
    file it does not use; loading fails on a requirement that is no file, and on files that require
    each other."""
    from traceduck.catalog import load_views

    views = tmp_path / "views"
    views.mkdir()
    (views / "base.sql").write_text("-- A view of one column.\n-- @column a INTEGER the column\n"
                                    "CREATE VIEW base_view AS SELECT 1 AS a;\n")
    (views / "mid.sql").write_text("-- requires: base\n\n-- Over base_view.\n-- @column a INTEGER the column\n"
                                   "CREATE VIEW mid_view AS SELECT a FROM base_view;\n")
    (views / "top.sql").write_text("-- requires: mid\n\n-- Over both.\n-- @column a INTEGER the column\n"
                                   "CREATE VIEW top_view AS SELECT a FROM mid_view JOIN base_view USING (a);\n")
    files = load_views(views)
    assert [f.name for f in files] == ["base", "mid", "top"]
    assert requirement_errors(files) == []  # base through mid
    (views / "top.sql").write_text((views / "top.sql").read_text().replace("-- requires: mid", "-- requires: base"))
    assert requirement_errors(load_views(views)) == ["top uses mid_view of mid without requiring it"]
    (views / "top.sql").write_text((views / "top.sql").read_text().replace("-- requires: base", "-- requires: mid, base")
                                   .replace("JOIN base_view USING (a)", "-- base_view, in a comment: no use"))
    assert requirement_errors(load_views(views)) == ["top requires base but uses nothing of it"]
    (views / "mid.sql").write_text((views / "mid.sql").read_text().replace("-- requires: base", "-- requires: bsae"))
    with pytest.raises(ValueError, match=r"^sql/views/mid.sql requires 'bsae', which is no file of sql/views$"):
        load_views(views)
    (views / "mid.sql").write_text((views / "mid.sql").read_text().replace("-- requires: bsae", "-- requires: base, top"))
    with pytest.raises(ValueError, match=r"^sql/views: files require each other: mid -> top -> mid$"):
        load_views(views)
    # the real files, with a requirement taken out
    cost = next(f for f in view_files() if f.name == "cost")
    broken = [f for f in view_files() if f.name != "cost"] + [
        dataclasses.replace(cost, requires=[r for r in cost.requires if r != "copies"])]
    assert requirement_errors(broken) == ["cost uses tensor_copies of copies without requiring it"]
