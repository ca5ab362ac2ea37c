"""Every table, view and column is documented, in the SQL files and in DuckDB's catalog."""

from __future__ import annotations

import dataclasses
import re
import shutil

import duckdb
import pytest

import traceduck
from traceduck import session
from traceduck.catalog import Column, Macro, Relation, documented_relations, macros, statements, tables, view_files
from traceduck.engine import Engine
from traceduck.store import Store
from traceduck.viewfile import ALIAS

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
    # every macro of sql/views, those generated for summaries included (NAME_packed is made again
    # in the view file, to read the packs)
    commented = dict(db.con.execute("SELECT function_name, comment FROM duckdb_functions() WHERE database_name = ? "
                                    "AND function_type IN ('macro', 'table_macro')", [ALIAS]).fetchall())
    assert {m.name: commented.get(m.name) for m in macros().values()} == {m.name: m.doc for m in macros().values()}
    assert "gpu_time_packed" in commented


def undocumented_macros(macros: list[Macro]) -> list[str]:
    """What the macros lack of their documentation: a description (20 characters at least), an @arg line
    per parameter (by name, in order) with a type and a doc, and a table macro's @column lines."""
    out = []
    for m in macros:
        if len(m.doc) < 20:
            out.append(f"{m.name}: no description")
        if [a.name for a in m.args] != m.params:
            out.append(f"{m.name}: @arg {', '.join(a.name for a in m.args) or '-'} for ({', '.join(m.params)})")
        out += [f"{m.name}({a.name}): no type or doc" for a in m.args if not a.type or len(a.doc) < 5]
        if m.is_table and not m.columns:
            out.append(f"{m.name}: no @column")
        if not m.is_table and m.columns:
            out.append(f"{m.name}: @column lines on a scalar macro")
        out += [f"{m.name}.{c.name}: undocumented" for c in m.columns if len(c.doc) < 5]
    return out


def macro_call(m: Macro) -> str:
    """A call of the macro with a NULL of each argument's declared type (those with a default by name)."""
    args = [f"{a.name} := NULL::{a.type}" if a.name in m.defaults else f"NULL::{a.type}" for a in m.args]
    return f"{m.name}({', '.join(args)})"


def test_every_macro_is_documented():
    found = list(macros().values())
    assert {"step_number", "device_work", "busy_time", "collective_waits", "gpu_time_of", "gpu_time",
            "gpu_time_packed", "kernel_stats_packed"} <= {m.name for m in found}
    assert undocumented_macros(found) == []


def test_declared_macro_arguments_and_columns_match_what_duckdb_returns(tmp_path):
    """Every macro takes arguments of the types its @arg lines declare, and a table macro returns
    the columns its @column lines declare, as DuckDB binds it where the views are loaded."""
    with Engine(Store(tmp_path)) as engine:
        for m in macros().values():
            if not m.is_table:
                engine.con.execute(f"SELECT {macro_call(m)}").fetchall()
                continue
            actual = engine.con.execute(f"DESCRIBE SELECT * FROM {macro_call(m)}").fetchall()
            assert [(r[0], r[1]) for r in actual] == [(c.name, c.type) for c in m.columns], m.name
            engine.con.execute(f"SELECT * FROM {macro_call(m)}").fetchall()  # runs, over no runs


def test_a_missing_macro_doc_is_caught():
    """The checks above on macros with a doc missing: an argument, a column, a description."""
    from traceduck.catalog import parse_sql_file

    text = ("-- Twice x, documented.\n-- @arg x BIGINT a number\nCREATE MACRO twice(x) AS 2 * x;\n\n"
            "-- Rows from 1 to n, with their squares.\n-- @arg n BIGINT how many rows\n"
            "-- @column i BIGINT the row\n-- @column sq BIGINT its square\n"
            "CREATE MACRO squares(n, start := 1) AS TABLE SELECT i, i * i AS sq FROM range(start, n + 1) r(i);\n\n"
            "-- Short.\nCREATE MACRO three() AS 3;\n")
    found = parse_sql_file(text).macros
    assert [m.signature for m in found] == ["twice(x)", "squares(n, start := 1)", "three()"]
    assert undocumented_macros(found) == ["squares: @arg n for (n, start)", "three: no description"]
    con = duckdb.connect()
    con.execute(text)
    squares = found[1]
    squares.args.append(Column("start", "BIGINT", "the first row"))
    assert macro_call(squares) == "squares(NULL::BIGINT, start := NULL::BIGINT)"
    described = con.execute(f"DESCRIBE SELECT * FROM {macro_call(squares)}").fetchall()
    assert [(r[0], r[1]) for r in described] == [(c.name, c.type) for c in squares.columns]
    squares.columns[1].type = "INTEGER"  # a wrong type
    assert [(r[0], r[1]) for r in described] != [(c.name, c.type) for c in squares.columns]


def copied_column_lines(texts: dict[str, str]) -> list[str]:
    """`@column` lines that two relations or macros carry alike (same name, type and doc): a column
    documented twice, which one of them should take from the other with `@columns-as`."""
    seen: dict[str, str] = {}
    out = []
    for where, text in texts.items():
        for st in statements(text):
            owner = re.match(r"CREATE\s+(?:OR\s+REPLACE\s+)?(?:TABLE|VIEW|MACRO)\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)",
                             st.sql, re.I).group(1)
            for c in st.comments:
                if c.split(None, 1)[:1] != ["@column"]:
                    continue
                line = " ".join(c.split())
                if line in seen:
                    out.append(f"{owner} ({where}) repeats {seen[line]}: {line}")
                else:
                    seen[line] = f"{owner} ({where})"
    return out


def test_no_column_doc_is_a_copy():
    texts = {f.path.name: f.path.read_text() for f in view_files()}
    assert copied_column_lines(texts) == []
    # a copy of a column of cpu_ops in another view is caught
    line = next(ln for ln in texts["cpu.sql"].splitlines() if ln.startswith("-- @column self_dur_ns"))
    texts["copies.sql"] = texts["copies.sql"].replace("-- @columns-as cpu_ops: dur_ns, self_dur_ns",
                                                      f"-- @columns-as cpu_ops: dur_ns\n{line}", 1)
    assert copied_column_lines(texts) == [f"tensor_copies (copies.sql) repeats cpu_ops (cpu.sql): {line[3:]}"]


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


def test_a_missing_column_doc_is_caught(tmp_path):
    """The checks above on SQL with a doc missing: a view column, a table column, a description."""
    from traceduck.catalog import parse_sql_file

    view = parse_sql_file("-- A view of one column, with a description.\n-- @column a INTEGER\n"
                          "-- @column b INTEGER the second column\nCREATE VIEW v AS SELECT 1 AS a, 2 AS b;\n").relations
    table = parse_sql_file("-- A table without a description\nCREATE TABLE t (\n  -- the first column\n  a INTEGER,\n"
                           "  b VARCHAR\n);\n").relations
    rels = {r.name: r for r in view + table}
    assert undocumented_columns(rels) == ["v.a", "t.b"]
    assert undescribed({"t": rels["t"], "short": Relation("short", "Too short.", "view")}) == ["short"]
    # the real view files with the doc of cpu_ops' first column taken out: gone from every relation
    # that takes it with @columns-as too
    from traceduck.catalog import load_views, sql_dir

    views = tmp_path / "views"
    shutil.copytree(sql_dir() / "views", views)
    text = (views / "cpu.sql").read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("-- @column"))
    assert line == "-- @column run_id VARCHAR Run of the op."
    assert undocumented_columns({r.name: r for f in load_views(views) for r in f.relations}) == []
    (views / "cpu.sql").write_text(text.replace(line, " ".join(line.split()[:4]), 1))
    dropped = undocumented_columns({r.name: r for f in load_views(views) for r in f.relations})
    assert {"cpu_ops.run_id", "op_inputs.run_id", "tensor_copies.run_id", "op_cost.run_id"} <= set(dropped)
    assert all(c.endswith(".run_id") for c in dropped)


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


@pytest.mark.slow  # several seconds: new processes or a store built for it
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
