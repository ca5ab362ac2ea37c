"""traceduck.spark: ingest public multi-rank traces with one Spark task per file, register the store
in a local Spark session, and hold Spark's answers equal to DuckDB's: each portable view's rows
and aggregates, and the top-kernels and ranks reports row for row."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

import traceduck

from conftest import load_json, shared_dir, trace_events, union_length

# Tests with a Spark session take minutes (`slow`); the translation of sql/ to Spark SQL needs only
# sqlglot and runs with the fast ones.
HTA = "public/facebookresearch__HolisticTraceAnalysis/tests/data/"
RANKS = [HTA + "trace_filter/sampled_rank-0.json.gz", HTA + "trace_filter/sampled_rank-1.json.gz"]
# the views the issue asks to be portable, with the column each one's rows are counted by
REQUIRED = {"cpu_ops": "name", "gpu_kernels": "name", "launches": "name", "tensor_copies": "op_name", "steps": "step"}


def from_json(ingested) -> dict[str, dict]:
    """Per run id, counted with plain json from its trace: events, CPU ops, kernels and launch calls
    per name, kernel time per name (ns), profiler steps, and the rank."""
    _, files, results = ingested
    out = {}
    for f, r in zip(files, results):
        doc = load_json(f)
        evs = [e for e in trace_events(doc) if isinstance(e, dict)]
        ops, kernels, kernel_ns, launches = Counter(), Counter(), Counter(), Counter()
        for e in evs:
            if e.get("ph") == "X" and e.get("cat") == "cpu_op":
                ops[e["name"]] += 1
            elif e.get("ph") == "X" and e.get("cat") == "cuda_runtime" and re.search("Launch|Memcpy|Memset", e["name"]):
                launches[e["name"]] += 1
            elif e.get("ph") == "X" and e.get("cat") == "kernel":
                kernels[e["name"]] += 1
                kernel_ns[e["name"]] += int(e["dur"] * 1000)
        steps = sum(1 for e in evs if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
        out[r.run_id] = {"events": len(evs), "cpu_ops": ops, "gpu_kernels": kernels, "kernel_ns": kernel_ns, "launches": launches,
                         "steps": steps, "rank": doc["distributedInfo"]["rank"]}
    return out


def _missing(what: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{what} (required when CI=true)")
    pytest.skip(what)


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        _missing("pyspark is not installed (pip install 'traceduck[spark]')")
    old = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = sys.executable  # executors import traceduck from this environment
    try:
        session = (SparkSession.builder.master("local[2]").appName("traceduck-tests")
                   .config("spark.sql.session.timeZone", "UTC").config("spark.sql.shuffle.partitions", "2")
                   .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                   .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
                   # a few thousand rows through plans of hundreds of operators: compiling each stage's
                   # code and re-planning between stages cost more than running them (the module's
                   # slowest test: 303 s with both, 244 s without code generation, about 15% less again
                   # without adaptive execution); neither changes what a query answers
                   .config("spark.sql.codegen.wholeStage", "false").config("spark.sql.adaptive.enabled", "false")
                   .getOrCreate())
    except Exception as e:  # noqa: BLE001 - no Java, or Spark cannot start here
        _missing(f"cannot start a local Spark session ({str(e).splitlines()[0] if str(e) else type(e).__name__})")
    session.sparkContext.setLogLevel("OFF")
    yield session
    session.stop()
    if old is None:
        os.environ.pop("PYSPARK_PYTHON", None)
    else:
        os.environ["PYSPARK_PYTHON"] = old


@pytest.fixture(scope="module")
def ingested(spark, tmp_path_factory):
    from traceduck import spark as tds

    path = tmp_path_factory.mktemp("spark") / "store"
    files = [shared_dir() / rel for rel in RANKS]
    results = tds.ingest(spark, files, path)
    return path, files, results


@pytest.fixture(scope="module")
def views(spark, ingested):
    from traceduck import spark as tds

    return tds.register(spark, ingested[0], compute=True)


@pytest.fixture(scope="module")
def db(ingested):
    with traceduck.open(ingested[0]) as d:
        yield d


def value(v):
    """A value of either engine in one form: Decimals as floats, lists as tuples."""
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, list):
        return tuple(value(x) for x in v)
    return v


def same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)
    return a == b


def rows_of(spark_rows) -> list[tuple]:
    return [tuple(value(v) for v in r) for r in spark_rows]


def key(row: tuple) -> tuple:
    return tuple((v is None, str(v)) for v in row)


def assert_same_rows(got: list[tuple], want: list[tuple]) -> None:
    assert len(got) == len(want)
    for g, w in zip(sorted(got, key=key), sorted(want, key=key)):
        assert len(g) == len(w) and all(same(a, b) for a, b in zip(g, w)), (g, w)


@pytest.mark.slow
def test_ingest_returns_the_runs_duckdb_lists(ingested, db, spark):
    from traceduck import spark as tds

    path, files, results = ingested
    assert [r.path for r in results] == [f.absolute() for f in files]
    assert not any(r.skipped for r in results) and all(r.events > 0 for r in results)
    listed = {r["run_id"]: r for r in db.runs()}
    assert {r.run_id: r.name for r in results} == {rid: r["name"] for rid, r in listed.items()}
    assert {r.run_id: r.events for r in results} == {rid: r["event_count"] for rid, r in listed.items()}
    again = tds.ingest(spark, files, path)  # the same bytes: nothing to do
    assert [r.run_id for r in again] == [r.run_id for r in results] and all(r.skipped for r in again)


@pytest.mark.slow
def test_register_makes_the_required_views_and_says_why_others_are_not(views):
    from traceduck.catalog import documented_relations
    from traceduck.errors import NotPortableError

    assert set(REQUIRED) <= set(views.views)
    assert {"runs", "events", "args", "shapes", "stacks", "step_windows", "event_categories", "dtypes"} <= set(views.tables)
    documented = {n for n, r in documented_relations().items() if r.kind == "view"}
    assert set(views.views) | set(views.not_portable) == documented  # every view: registered or skipped, with why
    for name, err in views.not_portable.items():
        assert isinstance(err, NotPortableError) and name in err.message and len(err.message) > len(name) + 10


@pytest.mark.slow
def test_base_tables_hold_the_same_rows(spark, db, views, ingested):
    for table in ("runs", "events", "args", "shapes", "step_windows", "stacks"):
        got = spark.sql(f"SELECT run_id, count(*) FROM {table} GROUP BY run_id").collect()
        want = db.sql(f"SELECT run_id, count(*) FROM {table} GROUP BY run_id").fetchall()
        assert_same_rows(rows_of(got), want)
    # independent of both engines: every event of each trace, by plain json
    events = dict(rows_of(spark.sql("SELECT run_id, count(*) FROM events GROUP BY run_id").collect()))
    assert events == {run: counted["events"] for run, counted in from_json(ingested).items()}


@pytest.mark.slow
@pytest.mark.parametrize("view", sorted(REQUIRED))
def test_required_views_agree(spark, db, views, view, ingested):
    """Rows per run and name (or step), and their summed durations: counts, sums per run and per name at once."""
    col = REQUIRED[view]
    query = f"SELECT run_id, {col}, count(*) AS n, sum(dur_ns) AS dur FROM {view} GROUP BY run_id, {col}"
    got = rows_of(spark.sql(query).collect())
    want = [tuple(value(v) for v in r) for r in db.sql(query).fetchall()]
    assert want  # the traces have rows in every required view
    assert_same_rows(got, want)
    # independent of both engines, by plain json: rows per name (per step: the steps) of each run
    for run, counted in from_json(ingested).items():
        mine = {r[1]: r[2] for r in got if r[0] == run}
        if view == "steps":
            assert len(mine) == counted[view] == 2
        elif view == "tensor_copies":  # the copy ops of these traces: each call a row
            copies = {"aten::copy_", "aten::to", "aten::_to_copy"}
            assert {k: v for k, v in mine.items() if k in copies} == {k: counted["cpu_ops"][k] for k in copies}
        else:
            assert mine == dict(counted[view]), (view, run)


@pytest.mark.slow
def test_every_portable_view_has_duckdbs_row_count(spark, db, views, ingested):
    slow = {"tensor_copies"}  # counted in test_required_views_agree
    for view in (v for v in views.views if v not in slow):
        got = spark.sql(f"SELECT count(*) FROM {view}").collect()[0][0]
        want = db.sql(f"SELECT count(*) FROM {view}").fetchall()[0][0]
        assert got == want, view
    # independent of both engines: the kernels of both traces, by plain json
    assert spark.sql("SELECT count(*) FROM gpu_kernels").collect()[0][0] == sum(
        sum(c["gpu_kernels"].values()) for c in from_json(ingested).values())


@pytest.mark.slow
@pytest.mark.parametrize("name", ["top-kernels", "ranks", "top-ops"])
def test_reports_agree_row_for_row(spark, db, views, name, ingested):
    from traceduck import spark as tds
    from conftest import run_report

    df = tds.report(spark, name)
    columns, want = run_report(db, name)
    assert df.columns == columns
    got = rows_of(df.collect())
    assert want
    assert_same_rows(got, [tuple(value(v) for v in r) for r in want])
    # independent of both engines, by plain json: per run, kernels' instances and time, ops' calls, the rank
    rows = [dict(zip(columns, r)) for r in got]
    for run, counted in from_json(ingested).items():
        mine = [r for r in rows if r["run_id"] == run]
        if name == "top-kernels":
            assert {r["name"]: (r["instances"], r["total_dur_ns"]) for r in mine} == {
                k: (n, counted["kernel_ns"][k]) for k, n in counted["gpu_kernels"].items()}
        elif name == "top-ops":
            assert all(r["calls"] == counted["cpu_ops"][r["name"]] for r in mine) and mine
        else:
            assert [(r["rank"], r["steps"]) for r in mine if r["section"] == "rank"] == [(counted["rank"], counted["steps"])]


@pytest.mark.slow
def test_report_rows_come_in_duckdbs_order(spark, db, views, ingested):
    from traceduck import spark as tds
    from conftest import run_report

    got = [(r["run_id"], r["name"]) for r in tds.report(spark, "top-kernels").select("run_id", "name").collect()]
    columns, want = run_report(db, "top-kernels")
    assert got == [(r[columns.index("run_id")], r[columns.index("name")]) for r in want]
    # independent of both engines: each run's kernels by total time, longest first, by plain json
    for run, counted in from_json(ingested).items():
        times = [counted["kernel_ns"][name] for r, name in got if r == run]
        assert times == sorted(counted["kernel_ns"].values(), reverse=True)


@pytest.mark.slow
def test_report_of_one_run_with_parameters(spark, db, views, ingested):
    from traceduck import spark as tds
    from conftest import run_report

    run = ingested[2][0].name
    df = tds.report(spark, "idle", runs=[run], params=["kernel_wait_threshold_ns=1000"])
    columns, want = run_report(db, "idle", runs=[run], params=["kernel_wait_threshold_ns=1000"])
    assert df.columns == columns and "run_id" not in columns
    got = rows_of(df.collect())
    assert_same_rows(got, [tuple(value(v) for v in r) for r in want])
    # independent of both engines: per stream, its work items, window and busy time, by plain json
    work = defaultdict(list)
    for e in trace_events(load_json(ingested[1][0])):
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            start = int(e["ts"] * 1000)
            work[(e["args"]["device"], e["args"]["stream"])].append((start, start + int(e["dur"] * 1000)))
    assert {(r["device"], r["stream"]): (r["work_items"], r["window_ns"], r["busy_ns"])
            for r in (dict(zip(columns, row)) for row in got)} == {
        k: (len(v), max(e for _, e in v) - min(s for s, _ in v), union_length(v)) for k, v in work.items()}


def test_macros_expand_from_the_sql_files():
    from traceduck.spark import macros, to_spark_sql

    assert {"step_number", "is_launch_call_name", "gpu_work", "busy_time", "gpu_time", "collective_waits"} <= set(macros())
    sql = to_spark_sql("SELECT step_number(name) AS s FROM gpu_work(['kernel']) w")
    assert "step_number" not in sql and "gpu_work(" not in sql and "ProfilerStep#" in sql


def test_reports_translate_or_say_why_not():
    from traceduck.errors import NotPortableError
    from traceduck.spark import report_sql

    sql = report_sql("top-ops")
    assert ":group_by" in sql and "$" not in sql  # DuckDB's $name parameters as Spark's :name
    # ASOF JOIN as a range-bounded equi-join; the zipped arg_max of its bound column without a subquery
    assert not re.search(r"\bASOF\b", report_sql("critical-path"), re.I)
    with pytest.raises(NotPortableError, match="POSITIONAL JOIN"):
        report_sql_of("SELECT * FROM a POSITIONAL JOIN b")
    # UNION BY NAME: a UNION ALL of the sides' columns aligned by name (learned from DuckDB)
    for name in ("cuda-graphs", "roofline"):
        assert not re.search(r"UNION\s+(ALL\s+)?BY\s+NAME", report_sql(name), re.I)


def test_not_portable_is_narrow():
    from traceduck.errors import NotPortableError, QueryError
    from traceduck.spark import to_spark_sql

    assert issubclass(NotPortableError, QueryError)
    with pytest.raises(NotPortableError, match="ASOF JOIN condition"):
        to_spark_sql("SELECT * FROM a ASOF JOIN b ON a.k = b.k AND a.t >= b.t AND a.u < b.u")


def report_sql_of(sql: str) -> str:
    from traceduck.spark import to_spark_sql

    return to_spark_sql(sql, "report")


def _rewritten_for_duckdb(sql: str) -> str:
    """The query with the Spark rewrites of ASOF JOIN and of struct IN applied, as DuckDB SQL: DuckDB
    checks that they give its own answers."""
    import sqlglot
    from sqlglot import exp

    from traceduck.spark import _asof_join, _tuple_in

    def fix(n):
        if isinstance(n, exp.Join) and str(n.args.get("method") or "").upper() == "ASOF":
            return _asof_join(n, "test")
        if isinstance(n, exp.In) and isinstance(n.this, exp.Tuple) and n.args.get("query") is not None:
            return _tuple_in(n)
        return n

    return sqlglot.parse_one(sql, read="duckdb").transform(fix).sql(dialect="duckdb")


def test_asof_join_rewrite_gives_duckdbs_matches():
    """Every form of ASOF JOIN in sql/ (>=, >, <=, <, either side first, LEFT or not, NULL keys and
    times, ties) as the range-bounded equi-join Spark runs gives DuckDB's own ASOF matches."""
    import random

    import duckdb

    rng = random.Random(7)
    con = duckdb.connect()

    def maybe(v):
        return None if rng.random() < 0.1 else v

    con.execute("CREATE TABLE l (k INTEGER, x INTEGER, id INTEGER)")
    con.executemany("INSERT INTO l VALUES (?, ?, ?)", [(maybe(rng.randint(0, 3)), maybe(rng.randint(0, 200)), i) for i in range(300)])
    con.execute("CREATE TABLE r (k INTEGER, y INTEGER, v INTEGER)")
    # each y once: of rows that tie DuckDB takes the first in its input, which Spark does not keep
    ys = rng.sample(range(200), 80)
    con.executemany("INSERT INTO r VALUES (?, ?, ?)", [(maybe(rng.randint(0, 3)), maybe(y), i) for i, y in enumerate(ys)])
    checked = 0
    for on in ("a.k = b.k AND a.x >= b.y", "a.k = b.k AND a.x > b.y", "b.k = a.k AND b.y >= a.x",
               "a.k = b.k AND a.x < b.y", "a.x <= b.y", "b.y <= a.x AND b.k = a.k"):
        for side in ("", "LEFT "):
            q = f"SELECT a.id, a.x, b.y, b.v FROM l a ASOF {side}JOIN r b ON {on} ORDER BY ALL"
            want = con.execute(q).fetchall()
            rewritten = _rewritten_for_duckdb(q)
            assert "ASOF JOIN" not in rewritten.upper()
            assert con.execute(rewritten).fetchall() == want, q
            checked += len(want)
    assert checked > 1000
    # a probe meets one row: the last at or before it (y = 5 for x = 7 of k = 1, none for x = 1)
    small = ("SELECT l.x, r.v FROM (VALUES (1, 7), (1, 1), (2, 9)) l(k, x) ASOF LEFT JOIN (VALUES (1, 2, 20), (1, 5, 50),"
             " (1, 8, 80), (2, NULL, 0)) r(k, y, v) ON l.k = r.k AND l.x >= r.y ORDER BY ALL")
    assert con.execute(_rewritten_for_duckdb(small)).fetchall() == [(1, None), (7, 50), (9, None)]


def test_struct_in_keeps_duckdbs_null_fields_equal():
    import duckdb

    q = ("SELECT k, s FROM (VALUES (1, NULL), (1, 2), (2, 3)) t(k, s) WHERE NOT ((k, s) IN (SELECT (a, b) FROM "
         "(VALUES (1, NULL), (2, 3)) u(a, b))) ORDER BY ALL")
    con = duckdb.connect()
    assert con.execute(q).fetchall() == [(1, 2)]
    rewritten = _rewritten_for_duckdb(q)
    assert "EXISTS" in rewritten.upper() and con.execute(rewritten).fetchall() == [(1, 2)]


@pytest.mark.slow
def test_ordered_lists_come_in_duckdbs_order(spark, db, views):
    """jobs builds list(x ORDER BY ...) FILTER (WHERE ...): Spark's sorted collect_list gives the same lists."""
    query = "SELECT job_id, runs, ranks, run_names FROM jobs"
    got = rows_of(spark.sql(query).collect())
    want = [tuple(value(v) for v in r) for r in db.sql(query).fetchall()]
    assert want and any(len(r[2]) == 2 for r in want)  # the two ranks make one job
    assert_same_rows(got, want)
    from traceduck.spark import to_spark_sql

    rows = spark.sql(to_spark_sql(
        "SELECT list(x ORDER BY k DESC NULLS LAST) AS a, list(x) FILTER (WHERE x > 9) AS b, first(x ORDER BY k) AS c"
        " FROM (VALUES (1, 3), (2, NULL), (3, 5)) t(x, k)")).collect()
    assert [tuple(value(v) for v in r) for r in rows] == [((3, 1, 2), None, 1)]


@pytest.mark.slow
def test_duckdb_only_constructs_rewritten_for_spark_give_duckdbs_values(spark):
    """formatReadableDecimalSize as a CASE, UNION BY NAME aligned by name, list_position, the 1-based
    index of a lambda and len() of a list, a list put in another's order, the subquery of a tuple IN:
    the translation run by Spark gives what DuckDB gives."""
    import duckdb

    from traceduck.spark import to_spark_sql

    sizes = [0, 1, -1, 999, 1000, 1499, 1999, 999999, 1000000, 1234567, 99999999999, 10**12, 5 * 10**15, 3 * 10**18, -1500]
    queries = [
        "SELECT n, formatReadableDecimalSize(n) AS s FROM (VALUES " + ", ".join(f"({n}::BIGINT)" for n in sizes)
        + ") t(n) ORDER BY n",
        "SELECT * FROM (SELECT 1 AS a, 'x' AS b UNION ALL BY NAME SELECT 'y' AS b, 2 AS c"
        " UNION ALL BY NAME SELECT 3 AS c) ORDER BY a NULLS LAST, c",
        "SELECT list_filter(l, lambda d, i: d IS NOT NULL AND list_position(l, d) = i) AS firsts,"
        " list_transform(l, lambda d, i: i) AS at, list_position(l, 'z') AS absent,"
        " len(string_split('a < b < c', ' < ')) AS parts"
        " FROM (SELECT ['a', 'b', 'a', NULL, 'c', 'b'] AS l)",
        # round of a double rounds its exact value (619.2715 is 619.27149999...), an exact tie away from zero
        "SELECT x, round(x, 0) AS r0, round(x, 1) AS r1, round(x, 2) AS r2, round(x, 3) AS r3, round(100.0 * x / 7, 1) AS q"
        " FROM (VALUES (619.2715::DOUBLE), (0.125), (-0.125), (2.675), (1.005), (2.5), (-3.5), (0.0), (123456.0625), (NULL))"
        " t(x) ORDER BY x NULLS LAST",
        # list indexes counting from 1 (from the end when negative; NULL out of range and at 0), slices,
        # len, list_reduce over HUGEINT, list_bool_and (NULLs skipped), suffix, TRY_CAST of text to a list
        "SELECT len(l) AS n, l[i] AS at, l[-1] AS last, l[0] AS zero, l[i + 5] AS beyond, l[2:3] AS mid, l[2:] AS tail,"
        " l[1:len(l) - 1] AS head, list_reduce(list_transform(l2, lambda x: x::HUGEINT), lambda a, b: a * b, 1::HUGEINT) AS prod,"
        " list_bool_and(list_transform(l2, lambda v: v > 1)) AS all_big, suffix(s, '_') AS in_place,"
        " TRY_CAST(c AS BIGINT[]) AS ints FROM (VALUES ([10, 20, 30], 2, [2, 3, NULL], 'add_', '[1, 2]'),"
        " ([10], 1, [], 'add', '2'), ([10, 20], -1, [0, 5], 'x_', 'True'), (NULL, NULL, NULL, NULL, NULL))"
        " t(l, i, l2, s, c) ORDER BY n NULLS LAST",
        # string_agg(DISTINCT x ORDER BY x) beside another DISTINCT aggregate; a whole row picked by arg_min
        "SELECT g, string_agg(DISTINCT v, ', ' ORDER BY v) AS vs, count(DISTINCT v) AS n FROM (VALUES (1, 'b'),"
        " (1, 'a'), (1, 'b'), (2, NULL)) t(g, v) GROUP BY g ORDER BY g",
        "SELECT p.e.v AS v, p.e.k AS k FROM (SELECT arg_min(r, r.k) AS e FROM (VALUES (2, 'b'), (1, 'a'), (3, 'c')) r(k, v)) p",
        # a list put in the order of another (op_inputs): a NULL keeps its place (Spark's collect_list drops NULLs)
        "SELECT g, list_select(list(v), list_grade_up(list(k))) AS vs FROM (VALUES (1, 'b', 2), (1, NULL, 1), (1, 'a', 0),"
        " (2, 'z', 5)) t(g, v, k) GROUP BY g ORDER BY g",
        # the subquery of a tuple IN is translated too (its list index counts from 1)
        "SELECT x FROM (VALUES (1, 2), (3, 4), (2, 1)) t(x, y) WHERE (x, y) IN (SELECT (l[1], l[2]) FROM (VALUES ([1, 2]),"
        " ([5, 6])) u(l)) ORDER BY x",
    ]
    con = duckdb.connect()
    for q in queries:
        want = [tuple(value(v) for v in r) for r in con.execute(q).fetchall()]
        got = rows_of(spark.sql(to_spark_sql(q)).collect())
        assert got == want, q


@pytest.mark.slow
def test_views_and_reports_made_portable_agree_with_duckdb(spark, db, views):
    """op_calls (its dtypes each in their first place: an index lambda and list_position) row for row,
    and the report cuda-graphs (UNION BY NAME) in DuckDB's order."""
    from traceduck import spark as tds
    from conftest import run_report

    assert "op_calls" in views.views and "op_calls" not in views.not_portable
    query = "SELECT run_id, event_id, name, dims_text, exact_dims_text, dtypes_text, input_bytes FROM op_calls"
    got = rows_of(spark.sql(query).collect())
    want = [tuple(value(v) for v in r) for r in db.sql(query).fetchall()]
    assert any(r[5] and ", " in r[5] for r in want)  # ops of several input dtypes
    assert_same_rows(got, want)
    for name in ("cuda-graphs",):  # callers and callees: op_calls again, and no Python stacks in these traces
        df = tds.report(spark, name)
        columns, want = run_report(db, name)
        assert df.columns == columns
        assert rows_of(df.collect()) == [tuple(value(v) for v in r) for r in want], name


def _reports() -> list[str]:
    return sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "sql" / "reports").glob("*.sql"))



@pytest.mark.slow
@pytest.mark.parametrize("name", _reports())
def test_every_report_gives_duckdbs_rows_in_duckdbs_order(spark, db, views, name):
    """Each report (default parameters) over the two ranks: Spark gives DuckDB's columns and rows in
    DuckDB's order (critical-path: ASOF JOIN rewritten, its walk iterated on the driver; overview: run
    one CTE at a time; roofline: over op_cost, computed one CTE at a time, and run_devices)."""
    from traceduck import spark as tds
    from conftest import run_report

    df = tds.report(spark, name)
    columns, want = run_report(db, name)
    assert df.columns == columns
    got = rows_of(df.collect())
    want = [tuple(value(v) for v in r) for r in want]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert len(g) == len(w) and all(same(a, b) for a, b in zip(g, w)), (name, g, w)
    if name in ("critical-path", "overview", "top-kernels", "ranks", "steps", "roofline"):
        assert want  # the reports the issue names have rows on these traces (cuda-graphs: see below)


@pytest.mark.slow
def test_critical_path_view_is_duckdbs(spark, db, views):
    """The view critical_path (its walk computed when registered): DuckDB's elements, step by step."""
    assert "critical_path" in views.views
    query = "SELECT * FROM critical_path ORDER BY run_id, step, position"
    got = rows_of(spark.sql(query).collect())
    want = [tuple(value(v) for v in r) for r in db.sql(query).fetchall()]
    assert want and got == want


# a public trace with CUDA graphs (cudaGraphLaunch): the cuda-graphs report has rows there
GRAPHS = HTA + "negative_queue_length_values_check/rank0.json.gz"
# with_stack and with_modules: modules, callers and overview's caller text have rows there, and
# kernel-sequences ties in mode()
BERT = "public/AMD-AGI__TraceLens/tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz"
# (report, parameters, fewest rows DuckDB gives): parameters that change the translated SQL
# (a window frame bound, list slices by depth, percentiles over warm-up steps too)
ON_GRAPHS_AND_BERT = [("cuda-graphs", [], 10), ("overview", [], 20), ("callers", [], 100), ("modules", [], 80),
                      ("modules", ["depth=2", "merge_instances=true"], 3), ("kernel-sequences", ["length=1"], 8),
                      ("kernel-sequences", ["length=4", "min_count=1"], 20), ("step-stats", ["include_warmup=true"], 1)]


@pytest.mark.slow  # registers another store: keep it after the tests of the two ranks
def test_reports_with_parameters_on_traces_with_graphs_and_modules(spark, tmp_path_factory):
    from traceduck import spark as tds
    from conftest import run_report

    path = tmp_path_factory.mktemp("graphs") / "store"
    traceduck.ingest([shared_dir() / GRAPHS, shared_dir() / BERT], store=path)
    tds.register(spark, path)
    # after the module's other tests this session's 1 GB driver has too little memory left to
    # broadcast overview's join sides ("Not enough memory to build and broadcast the table"): joins
    # by shuffle, as Spark's error suggests
    threshold = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    try:
        with traceduck.open(path) as d:
            for name, params, fewest in ON_GRAPHS_AND_BERT:
                columns, want = run_report(d, name, params=params)
                df = tds.report(spark, name, params=params)
                assert len(want) >= fewest and df.columns == columns, (name, params, len(want))
                got = rows_of(df.collect())
                want = [tuple(value(v) for v in r) for r in want]
                assert len(got) == len(want), (name, params)
                for g, w in zip(got, want):
                    assert len(g) == len(w) and all(same(a, b) for a, b in zip(g, w)), (name, params, g, w)
    finally:
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", threshold)


# --- from a virtual environment, as a user runs it ----------------------------------------------------

USER_SCRIPT = """
import json, sys
from pyspark.sql import SparkSession
from traceduck import spark as tds

spark = (SparkSession.builder.master("local[2]").appName("traceduck-venv").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
results = tds.ingest(spark, sys.argv[2:], sys.argv[1])
views = tds.register(spark, sys.argv[1])
print(json.dumps({"events": [r.events for r in results], "not_portable": sorted(views.not_portable),
                  "deferred": sorted(views.deferred)}))
spark.stop()
"""


def readme_says_every_view_registers() -> bool:
    text = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    return "Portable (tested equal to DuckDB on public two-rank traces): every view of sql/views registers" in text


@pytest.mark.slow  # 40 s
def test_spark_from_a_virtual_environment_without_pyspark_python(tmp_path):
    """Workers run the driver's interpreter when PYSPARK_PYTHON is unset (else they run `python3`,
    which lacks traceduck), and `register` logs no error; every view registers or is deferred, as
    README says."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        _missing("pyspark is not installed (pip install 'traceduck[spark]')")
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    files = [str(shared_dir() / rel) for rel in RANKS]
    p = subprocess.run([sys.executable, "-c", USER_SCRIPT, str(tmp_path / "store"), *files], capture_output=True,
                       text=True, env=env, timeout=600)
    if p.returncode and "JAVA_HOME" in p.stderr:
        _missing("cannot start a local Spark session (no Java)")
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.splitlines()[-1])
    assert all(n > 0 for n in got["events"]) and len(got["events"]) == 2
    assert "No module named" not in p.stderr
    assert not [line for line in p.stderr.splitlines() if "ERROR" in line or line.startswith("\tat ")], p.stderr[-3000:]
    # the views whose rows register computes only when asked (compute=True, or a report that reads
    # them) are deferred: critical_path and op_cost; every other view registers (README)
    assert got["deferred"] == ["critical_path", "op_cost"]
    assert got["not_portable"] == [] and readme_says_every_view_registers()
