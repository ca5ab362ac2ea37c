"""Spark: ingest trace files one Spark task each, and query a store with Spark SQL.

    pip install 'traceduck[spark]'

    from traceduck import spark as tds
    tds.ingest(spark, ["/shared/traces/rank0.json.gz", ...], store="/shared/store")
    views = tds.register(spark, "/shared/store")
    spark.sql("SELECT name, sum(dur_ns) FROM gpu_kernels GROUP BY name").show()
    tds.report(spark, "top-kernels").show()

The store must lie on a path that the driver and every executor see (a shared file system).
`register` makes the store's tables Spark temporary views over the same Parquet files DuckDB reads
(a run's own files, or the pack holding it after `traceduck compact`), the reference tables Spark
DataFrames, and the views of sql/views Spark temporary views: each view's DuckDB SQL is transpiled
to Spark SQL with sqlglot from the very files DuckDB loads, its macros expanded in place. A view
that Spark cannot run is skipped and recorded with the reason (`SparkViews.not_portable`). A query
with a recursive CTE, or whose plan is too big for Spark's analyzer, runs one CTE at a time
(`staged`), a recursive CTE iterated on the driver.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from . import packs, reference
from .catalog import Relation, get_report, schema_stamp, sql_statements, summaries, tables, view_files
from .errors import NotPortableError, QueryError, StoreError
from .store import Store

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from .ingester import IngestResult

BASE_TABLES = tuple(tables())  # runs, events, args, shapes, step_windows, stacks
_MAX_POSITION = 9223372036854775807


# --- ingest ---------------------------------------------------------------------------------------

def _ingest_task(path: str, store: str, name: str | None, labels: dict[str, str] | None, force: bool,
                 salvage: bool) -> IngestResult:
    """What one Spark task runs: traceduck's own ingest of one file, in one process."""
    from .api import ingest

    (result,) = ingest(path, store=store, name=name, labels=labels, force=force, jobs=1, salvage=salvage)
    return result


def ingest(spark: SparkSession, paths, store: str | os.PathLike, labels: dict[str, str] | None = None,
           force: bool = False, salvage: bool = False) -> list[IngestResult]:
    """Ingest trace files (or directories of them, searched at any depth) into `store`, one Spark
    task per file, each running `traceduck.ingest(file, jobs=1)`; returns one `IngestResult` per
    file, in the order of the files, as `traceduck.ingest` does.

    `store` must be a path every executor sees (a shared file system): each task publishes its run
    there with the store's atomic, concurrency-safe writes. Run names are the file names; files that
    share one get their parent directories prefixed, as `traceduck.ingest` names files ingested
    together. Files found in a directory that are not traces are skipped (`not_a_trace` set)."""
    from .api import expand
    from .ingester.pipeline import default_names, run_name_for
    from .ingester.reader import sniff

    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    listed = expand(paths)
    files = [f.absolute() for f, _ in listed]
    store_path = str(Path(store).absolute())
    Store(store_path, create=True)
    skipped = {}
    for f, from_dir in listed:
        reason = sniff(f) if from_dir else None
        if reason is not None:
            from .api import not_a_trace

            skipped[f.absolute()] = not_a_trace(f.absolute(), reason)
    todo = [f for f in files if f not in skipped]
    if not todo:
        return [skipped[f] for f in files]
    names = default_names(todo)
    # a name is given only where file names collide; else the task's ingest picks it (skipping taken names)
    chosen = {f: (names[f][0] if names[f][0] != run_name_for(f) else None) for f in todo}
    work = [(str(f), chosen[f]) for f in todo]
    _workers_python(spark)
    rdd = spark.sparkContext.parallelize(work, len(work))
    results = rdd.map(lambda item: _ingest_task(item[0], store_path, item[1], labels, force, salvage)).collect()
    by_path = {f: r for f, r in zip(todo, results)}
    return [skipped.get(f) or by_path[f] for f in files]


def _workers_python(spark: SparkSession) -> None:
    """In local mode without PYSPARK_PYTHON, Spark's Python workers run `python3` from the PATH,
    which lacks traceduck when the driver runs from a virtual environment: they run the driver's
    interpreter instead. A cluster's workers run what PYSPARK_PYTHON (or spark.pyspark.python) names."""
    sc = spark.sparkContext
    if "PYSPARK_PYTHON" not in os.environ and sc.master.startswith("local"):
        sc.pythonExec = sys.executable


# --- transpiling ----------------------------------------------------------------------------------

@dataclass
class Macro:
    """A DuckDB macro of sql/views: scalar (an expression) or table (a query)."""

    name: str
    params: list[str]
    defaults: dict[str, str]  # parameter -> default value (SQL text)
    body: str
    is_table: bool


_MACRO = re.compile(r"^CREATE\s+(?:OR\s+REPLACE\s+)?MACRO\s+(\w+)\s*\((.*?)\)\s+AS\s+(TABLE\s+)?(.*)$", re.S | re.I)


@lru_cache(maxsize=1)
def macros() -> dict[str, Macro]:
    """Every macro of sql/views, by name."""
    out = {}
    for f in view_files():
        for _comments, lines in sql_statements(f.text):
            stmt = "\n".join(line for line in lines if not line.strip().startswith("--"))  # comments left out
            m = _MACRO.match(stmt.strip().rstrip(";"))
            if not m:
                continue
            name, params_text, table, body = m.groups()
            params, defaults = [], {}
            for p in (p.strip() for p in params_text.split(",") if p.strip()):
                key, sep, default = p.partition(":=")
                params.append(key.strip())
                if sep:
                    defaults[key.strip()] = default.strip()
            out[name.lower()] = Macro(name, params, defaults, body, bool(table))
    return out


@lru_cache(maxsize=1)
def _duckdb_dialect():
    """DuckDB as sqlglot reads the SQL of sql/, for translation: a list index stays as written,
    counting from 1 (sqlglot moves an index it can type to Spark's 0-based count and leaves one it
    cannot, `l[i]`, as it is: _spark_fixes makes each `TRY_ELEMENT_AT`, which counts from 1 and from
    the end for a negative index, as DuckDB does), and `len(l)` is a list's length (Spark's `SIZE`;
    sql/ takes `length` of a string)."""
    from sqlglot import exp
    from sqlglot.dialects.duckdb import DuckDB

    class SqlDuckDB(DuckDB):
        INDEX_OFFSET = 0

        class Parser(DuckDB.Parser):
            FUNCTIONS = {**DuckDB.Parser.FUNCTIONS, "LEN": lambda args: exp.ArraySize(this=args[0])}

    return SqlDuckDB


def _parse(sql: str):
    import sqlglot

    return sqlglot.parse_one(sql, read=_duckdb_dialect())


def _bind(macro: Macro, call, where: str) -> dict[str, object]:
    """The arguments of a macro call by parameter (positional, then `name := value`, then defaults)."""
    from sqlglot import exp

    args = list(call.expressions)
    named = {a.this.name.lower(): a.expression for a in args if isinstance(a, (exp.PropertyEQ, exp.Kwarg))}
    positional = [a for a in args if not isinstance(a, (exp.PropertyEQ, exp.Kwarg))]
    bound = {}
    for i, p in enumerate(macro.params):
        if i < len(positional):
            bound[p.lower()] = positional[i]
        elif p.lower() in named:
            bound[p.lower()] = named[p.lower()]
        elif p in macro.defaults:
            bound[p.lower()] = _parse(f"SELECT {macro.defaults[p]}").expressions[0]
        else:
            raise NotPortableError(f"{where}: macro {macro.name} called without its parameter {p}")
    return bound


def _substitute(tree, bound: dict[str, object]):
    """The macro body with every unqualified column named like a parameter replaced by its argument."""
    from sqlglot import exp

    def put(node):
        if isinstance(node, exp.Column) and not node.table and node.name.lower() in bound:
            value = bound[node.name.lower()].copy()
            return value if isinstance(value, (exp.Literal, exp.Column, exp.Boolean, exp.Null, exp.Array,
                                               exp.Subquery)) else exp.Paren(this=value)
        return node

    return tree.transform(put)




def expand_macros(tree, where: str, depth: int = 0):
    """The query with every call of a sql/views macro replaced by its body: a scalar macro by its
    expression, a table macro (in FROM or JOIN) by a subquery, macros inside macros too."""
    from sqlglot import exp

    known = macros()
    # Spark reads no pack: a summary with settings is its computation there (a view summary is
    # registered as its computation, see register)
    computed = {s.name.lower(): s.macro.lower() for s in summaries() if s.settings}
    if depth > 20:
        raise NotPortableError(f"{where}: macros nest too deep to expand")

    def expand(node):
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Anonymous) and node.this.name.lower() in known:
            macro = known[computed.get(node.this.name.lower(), node.this.name.lower())]
            if not macro.is_table:
                raise NotPortableError(f"{where}: scalar macro {macro.name} used as a table")
            body = expand_macros(_substitute(_parse(macro.body), _bind(macro, node.this, where)), where, depth + 1)
            body = _own_ctes(body, macro.name)
            alias = node.args.get("alias") or exp.TableAlias(this=exp.to_identifier(macro.name))
            return exp.Subquery(this=body, alias=alias.copy())
        if isinstance(node, exp.Anonymous) and node.name.lower() in known and not isinstance(node.parent, exp.Table):
            macro = known[node.name.lower()]
            if macro.is_table:
                raise NotPortableError(f"{where}: table macro {macro.name} used as a value")
            body = _parse(f"SELECT {macro.body}").expressions[0]
            return exp.Paren(this=expand_macros(_substitute(body, _bind(macro, node, where)), where, depth + 1))
        return node

    return tree.transform(expand)


def tables_read(sql: str, where: str = "query") -> set[str]:
    """Names of the tables and views a query of sql/ reads, its macros expanded (CTE names left out)."""
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    try:
        tree = expand_macros(_parse(sql), where)
    except SqlglotError as e:
        raise NotPortableError(f"{where}: sqlglot cannot parse it ({str(e).splitlines()[0]})") from None
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    return {t.name.lower() for t in tree.find_all(exp.Table) if t.name and t.name.lower() not in ctes}


_EXPANSIONS = itertools.count(1)


def _own_ctes(body, prefix: str):
    """The body of an expanded table macro with its CTEs renamed apart (`iv` -> `busy_time_3_iv`): Spark
    lifts the WITH clauses of subqueries to the top, where two macros' `iv` would collide."""
    from sqlglot import exp

    names = {c.alias_or_name.lower() for c in body.find_all(exp.CTE)}
    if not names:
        return body
    tag = f"{prefix}_{next(_EXPANSIONS)}_"

    def rename(node):
        if isinstance(node, exp.CTE) and node.alias_or_name.lower() in names:
            node.args["alias"].set("this", exp.to_identifier(tag + node.alias_or_name))
        elif isinstance(node, exp.Table) and not node.db and node.name.lower() in names:
            alias = node.args.get("alias") or exp.TableAlias(this=exp.to_identifier(node.name))
            return exp.Table(this=exp.to_identifier(tag + node.name), alias=alias.copy())
        return node

    return body.transform(rename)


_INT_TYPES = {"BIGINT", "INT", "INTEGER", "SMALLINT", "TINYINT", "HUGEINT"}


def _spark_fixes(tree, where: str):
    """Rewrite what sqlglot's DuckDB-to-Spark translation leaves with another meaning in Spark."""
    from sqlglot import exp

    windows = {}
    for sel in tree.find_all(exp.Select):
        for w in sel.args.get("windows") or []:
            windows[w.this.name.lower()] = w

    _whole_rows(tree)
    # HUGEINT: Spark's widest integer is a DECIMAL(38, 0) (gpu_time's packed counts fit in it); in a
    # pass of its own, as a rule below that rebuilds a node keeps its children as they are
    for dt in list(tree.find_all(exp.DataType)):
        if dt.this == exp.DataType.Type.INT128:
            dt.replace(exp.DataType.build("DECIMAL(38, 0)"))

    def fix(node):
        # DuckDB rounds a number cast to an integer (half to even); Spark truncates: round first
        if isinstance(node, exp.Cast) and not isinstance(node, exp.TryCast) \
                and node.to.this.name in _INT_TYPES and not isinstance(node.this, (exp.Literal, exp.Null)):
            inner = node.this.this if isinstance(node.this, exp.Paren) else node.this
            numeric = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.AggFunc, exp.Window)
            if isinstance(inner, numeric) and not isinstance(inner, exp.Count):
                return exp.Cast(this=exp.Anonymous(this="BROUND", expressions=[node.this.copy()]), to=node.to.copy())
        # round(x, n) of a double: DuckDB rounds the double's exact value (619.2715 is stored as
        # 619.27149999..., so 619.271; an exact tie, 0.125, away from zero: 0.13), Spark's ROUND the
        # shortest decimal text half up (619.272). format_number(x, n) rounds the exact value (half to
        # even, which differs only at an exact tie); an exact tie at n digits is x * 2^(n+1) integral,
        # where the shortest text is the exact value and Spark's ROUND is DuckDB's
        if isinstance(node, exp.Round) and isinstance(node.args.get("decimals"), exp.Literal) \
                and not node.args["decimals"].is_string and int(node.args["decimals"].this) >= 0:
            x = node.this.copy().transform(fix)
            n = int(node.args["decimals"].this)
            scaled = exp.Mul(this=exp.Paren(this=x.copy()), expression=exp.Literal.number(2 ** (n + 1)))
            tie_or_odd = exp.Or(
                this=exp.EQ(this=exp.Mod(this=scaled, expression=exp.Literal.number(1)), expression=exp.Literal.number(0)),
                expression=exp.Not(this=exp.LT(this=exp.Abs(this=x.copy()), expression=exp.Literal.number("1e15"))))
            text = exp.Anonymous(this="FORMAT_NUMBER", expressions=[
                exp.Cast(this=x.copy(), to=exp.DataType.build("DOUBLE")), exp.Literal.number(n)])
            exact = exp.Cast(this=exp.Anonymous(this="REPLACE", expressions=[
                text, exp.Literal.string(","), exp.Literal.string("")]), to=exp.DataType.build("DOUBLE"))
            return exp.Case(ifs=[exp.If(this=tie_or_odd, true=exp.Round(this=x, decimals=exp.Literal.number(n)))],
                            default=exact)
        # any_value ignores NULLs in DuckDB
        if isinstance(node, exp.IgnoreNulls) and isinstance(node.this, exp.AnyValue):
            node = node.this
        if isinstance(node, exp.AnyValue):
            return exp.Anonymous(this="ANY_VALUE", expressions=[node.this.copy(), exp.true()])
        # quantile_disc(x, q) -> percentile_disc(q) WITHIN GROUP (ORDER BY x), of x's type
        if isinstance(node, exp.Anonymous) and node.name.lower() == "quantile_disc" or \
                type(node).__name__ in ("PercentileDisc", "QuantileDisc") and node.args.get("expression") is not None:
            if isinstance(node, exp.Anonymous):
                value, q = node.expressions
            else:
                value, q = node.this, node.args["expression"]
            return exp.WithinGroup(this=exp.Anonymous(this="PERCENTILE_DISC", expressions=[q.copy()]),
                                   expression=exp.Order(expressions=[exp.Ordered(this=value.copy(), nulls_first=False)]))
        # quantile_cont(x, q): Spark's percentile(x, q) interpolates between the closest ranks as
        # DuckDB does (its percentile_cont takes only `(q) WITHIN GROUP (ORDER BY x)`)
        if type(node).__name__ in ("PercentileCont", "QuantileCont") and node.args.get("expression") is not None:
            return exp.Anonymous(this="PERCENTILE", expressions=[node.this.copy(), node.args["expression"].copy()])
        # count(DISTINCT (a, b)): DuckDB counts distinct structs (a NULL field counts); Spark reads
        # `(a, b)` there as a syntax error, and count(DISTINCT a, b) would skip rows with a NULL
        if isinstance(node, exp.Tuple) and isinstance(node.parent, exp.Distinct) and node.arg_key == "expressions" \
                and isinstance(node.parent.parent, exp.Count):
            return exp.Anonymous(this="STRUCT", expressions=[e.copy() for e in node.expressions])
        # mode(x ORDER BY x): the most common x, ties to the least (DuckDB keeps the first seen)
        if isinstance(node, exp.Mode) and isinstance(node.this, exp.Order) and len(node.this.expressions) == 1 \
                and node.this.expressions[0].this == node.this.this and not node.this.expressions[0].args.get("desc"):
            return exp.Anonymous(this="MODE", expressions=[node.this.this.copy(), exp.true()])
        # arg_max/arg_min over a tuple: a struct in Spark
        if isinstance(node, (exp.ArgMax, exp.ArgMin)) and isinstance(node.expression, exp.Tuple):
            node.set("expression", exp.Anonymous(this="STRUCT", expressions=[e.copy() for e in node.expression.expressions]))
            return node
        # list_select(list(x), list_grade_up(list(k))): the x in the order of their k, as list(x ORDER BY k)
        # (Spark's COLLECT_LIST drops NULLs, so the two lists could not be zipped)
        if isinstance(node, exp.Anonymous) and node.name.lower() == "list_select" and len(node.expressions) == 2:
            values, order = node.expressions
            if isinstance(values, exp.ArrayAgg) and not isinstance(values.this, exp.Order) \
                    and isinstance(order, exp.Anonymous) and order.name.lower() == "list_grade_up" \
                    and len(order.expressions) == 1 and isinstance(order.expressions[0], exp.ArrayAgg) \
                    and not isinstance(order.expressions[0].this, exp.Order):
                key = exp.Ordered(this=order.expressions[0].this.transform(fix), nulls_first=False)
                return _ordered_list(exp.ArrayAgg(this=exp.Order(this=values.this.transform(fix), expressions=[key])), None)
        # list_extract(l, i): the i-th element counting from 1, NULL out of range (l[i] in Spark counts from 0)
        if isinstance(node, exp.Anonymous) and node.name.lower() == "list_extract":
            def element_at(n):
                if isinstance(n, exp.Anonymous) and n.name.lower() == "list_extract":
                    return exp.Anonymous(this="TRY_ELEMENT_AT", expressions=[e.copy().transform(element_at) for e in n.expressions])
                return n
            return element_at(node)
        # list_slice(l, a, b): elements a to b counting from 1, both included, a negative bound
        # counting from the end (-1 the last); Spark's slice takes a start and a length
        if isinstance(node, exp.Anonymous) and node.name.lower() in ("list_slice", "array_slice") \
                and len(node.expressions) == 3 or isinstance(node, exp.ArraySlice):
            if isinstance(node, exp.ArraySlice):
                items, begin, end = node.this, node.args.get("start"), node.args.get("end")
            else:
                items, begin, end = node.expressions
            return _list_slice(items.transform(fix), begin.transform(fix), end.transform(fix))
        # map_extract(m, k)[1]: the value of key k, NULL when absent
        if isinstance(node, exp.Bracket) and isinstance(node.this, exp.Anonymous) and node.this.name.lower() == "map_extract":
            return exp.Anonymous(this="TRY_ELEMENT_AT", expressions=[e.copy() for e in node.this.expressions])
        # l[a:b]: list_slice(l, a, b), an open end the last element
        if isinstance(node, exp.Bracket) and len(node.expressions) == 1 and isinstance(node.expressions[0], exp.Slice):
            bounds = node.expressions[0]
            begin = bounds.this if bounds.this is not None else exp.Literal.number(1)
            end = bounds.args.get("expression") if bounds.args.get("expression") is not None else exp.Literal.number(-1)
            return _list_slice(node.this.transform(fix), begin.transform(fix), end.transform(fix))
        # l[i]: the i-th element counting from 1 (from the end when negative), NULL out of range
        # (Spark's l[i] counts from 0 and fails out of range under ANSI), NULL for 0 (DuckDB's l[0]);
        # a struct's field by name (s['f']) stays
        if isinstance(node, exp.Bracket) and len(node.expressions) == 1 and not node.args.get("json_access") \
                and not (isinstance(node.expressions[0], exp.Literal) and node.expressions[0].is_string):
            index = node.expressions[0].transform(fix)
            if not (isinstance(index, exp.Literal) and int(index.this) > 0):  # (an INT: Spark takes no BIGINT there)
                index = exp.Cast(this=exp.Nullif(this=index, expression=exp.Literal.number(0)), to=exp.DataType.build("INT"))
            return exp.Anonymous(this="TRY_ELEMENT_AT", expressions=[node.this.transform(fix), index])
        # list_reduce(l, lambda, initial): Spark's aggregate(l, initial, lambda)
        if isinstance(node, exp.Anonymous) and node.name.lower() in ("list_reduce", "array_reduce", "reduce") \
                and len(node.expressions) == 3:
            items, step, initial = (e.transform(fix) for e in node.expressions)
            return exp.Anonymous(this="AGGREGATE", expressions=[items, initial, step])
        # list_bool_and(l): DuckDB's bool_and over the elements, NULLs skipped, NULL for no element
        if isinstance(node, exp.Anonymous) and node.name.lower() == "list_bool_and" and len(node.expressions) == 1:
            known = _parse_spark("FILTER(__l, __x -> __x IS NOT NULL)")
            known = known.transform(lambda n: exp.Paren(this=node.expressions[0].transform(fix))
                                    if isinstance(n, exp.Column) and n.name == "__l" else n)
            return exp.Case(ifs=[exp.If(this=exp.EQ(this=exp.Anonymous(this="SIZE", expressions=[known.copy()]),
                                                    expression=exp.Literal.number(0)), true=exp.Null())],
                            default=exp.Not(this=exp.Anonymous(this="ARRAY_CONTAINS", expressions=[known, exp.false()])))
        # string_agg(DISTINCT x, sep ORDER BY x): the sorted set joined (Spark's LISTAGG with DISTINCT,
        # beside another DISTINCT aggregate, fails in its optimizer: a ClassCastException in
        # RewriteDistinctAggregates); NULL for no value, as DuckDB's
        if isinstance(node, exp.GroupConcat) and isinstance(node.this, exp.Order) \
                and isinstance(node.this.this, exp.Distinct) and len(node.this.this.expressions) == 1 \
                and len(node.this.expressions) == 1 and not node.this.expressions[0].args.get("desc") \
                and node.this.expressions[0].this == node.this.this.expressions[0]:
            value = node.this.this.expressions[0].transform(fix)
            values = exp.Anonymous(this="ARRAY_SORT", expressions=[exp.Anonymous(this="COLLECT_SET", expressions=[value])])
            separator = node.args.get("separator") or exp.Literal.string(",")
            return exp.Case(ifs=[exp.If(this=exp.EQ(this=exp.Anonymous(this="SIZE", expressions=[values.copy()]),
                                                    expression=exp.Literal.number(0)), true=exp.Null())],
                            default=exp.Anonymous(this="ARRAY_JOIN", expressions=[values, separator.copy()]))
        # suffix(s, x): Spark's endswith
        if isinstance(node, exp.Anonymous) and node.name.lower() == "suffix" and len(node.expressions) == 2:
            return exp.Anonymous(this="ENDSWITH", expressions=[e.transform(fix) for e in node.expressions])
        # TRY_CAST(text AS T[]): Spark casts no string to an array; the text read as a JSON array
        # ('[1, 2]'; NULL for anything else, as DuckDB's TRY_CAST of such text)
        if isinstance(node, exp.TryCast) and node.to.this == exp.DataType.Type.ARRAY:
            return exp.Anonymous(this="FROM_JSON", expressions=[
                exp.Cast(this=node.this.transform(fix), to=exp.DataType.build("STRING")),
                exp.Literal.string(node.to.sql(dialect="spark"))])
        if isinstance(node, exp.RegexpReplace):
            pattern = node.expression
            if node.args.get("single_replace") and not (isinstance(pattern, exp.Literal)
                                                        and (pattern.this.startswith("^") or pattern.this.endswith("$"))):
                raise NotPortableError(f"{where}: regexp_replace of the first match only has no Spark equivalent")
            node.set("single_replace", None)
            repl = node.args.get("replacement")
            if isinstance(repl, exp.Literal):  # back-references: \1 in RE2, $1 in Java
                node.set("replacement", exp.Literal.string(re.sub(r"\\(\d)", r"$\1", repl.this)))
            return node
        if isinstance(node, exp.CTE) and node.args.get("materialized") is not None:
            node.set("materialized", None)
            return node
        # OVER (name ORDER BY ...): a named window extended, spelled out
        if isinstance(node, exp.Window) and isinstance(node.args.get("alias"), exp.Identifier) \
                and node.args["alias"].name.lower() in windows:
            base = windows[node.args["alias"].name.lower()]
            node.set("alias", None)
            for key in ("partition_by", "order", "spec"):
                if not node.args.get(key) and base.args.get(key):
                    node.set(key, base.args[key].copy() if not isinstance(base.args[key], list)
                             else [e.copy() for e in base.args[key]])
        # DuckDB ignores a frame given to a ranking or offset function; Spark refuses it
        if isinstance(node, exp.Window) and node.args.get("spec") is not None and isinstance(
                node.this, (exp.Lead, exp.Lag, exp.RowNumber, exp.Rank, exp.DenseRank, exp.Ntile, exp.PercentRank,
                            exp.CumeDist)):
            node.set("spec", None)
            return node
        if isinstance(node, exp.Window) and node.args.get("alias") is None and node.args.get("partition_by") is not None:
            return node
        if isinstance(node, exp.Window) and isinstance(node.this, exp.Identifier):  # a reference by name alone
            return node
        # printf: Java's formatter takes no DECIMAL (a sum of integers in Spark) for %f or %d; DuckDB's
        # converts. And Java's %.3f rounds the shortest decimal text of a double half up (619.2715 ->
        # 619.272), C's the double's exact value (619.27149999... -> 619.271): a plain %.Nf becomes %s
        # of format_number(x, N), whose DecimalFormat rounds the exact value as C does, less its commas
        if isinstance(node, exp.Anonymous) and node.name.lower() in ("printf", "format_string") \
                and node.expressions and isinstance(node.expressions[0], exp.Literal) and node.expressions[0].is_string \
                and not node.args.get("__cast"):
            args = [e.copy().transform(fix) for e in node.expressions]  # the arguments translated too
            text, pieces, i = node.expressions[0].this, [], 0
            last = 0
            for m in re.finditer(r"%(?:%|([-+ 0#,(]*\d*)(\.\d+)?([a-zA-Z]))", text):
                pieces.append(text[last:m.start()])
                last = m.end()
                if not m.group(3):  # %%
                    pieces.append(m.group(0))
                    continue
                i += 1
                flags, precision, c = m.group(1), m.group(2), m.group(3)
                if i < len(args) and c == "f" and not flags:
                    digits = int(precision[1:]) if precision else 6
                    number = exp.Anonymous(this="FORMAT_NUMBER", expressions=[
                        exp.Cast(this=args[i], to=exp.DataType.build("DOUBLE")), exp.Literal.number(digits)])
                    args[i] = exp.Anonymous(this="REPLACE", expressions=[number, exp.Literal.string(","), exp.Literal.string("")])
                    pieces.append("%s")
                    continue
                if i < len(args) and c.lower() in "feg":
                    args[i] = exp.Cast(this=args[i], to=exp.DataType.build("DOUBLE"))
                elif i < len(args) and c == "d":
                    args[i] = exp.Cast(this=args[i], to=exp.DataType.build("BIGINT"))
                pieces.append(m.group(0))
            pieces.append(text[last:])
            args[0] = exp.Literal.string("".join(pieces))
            out = exp.Anonymous(this="FORMAT_STRING", expressions=args)
            out.args["__cast"] = True
            return out
        # (SELECT arg_max(k, v) FROM (SELECT unnest(K) AS k, unnest(V) AS v)): a correlated subquery
        # Spark refuses outside WHERE; the k of the first largest v, NULL when every v is NULL
        if isinstance(node, exp.Subquery) and _zipped_arg_max(node) is not None:
            keys, values = _zipped_arg_max(node)
            position = exp.Anonymous(this="ARRAY_POSITION", expressions=[
                values.copy(), exp.Anonymous(this="ARRAY_MAX", expressions=[values.copy()])])
            return exp.Anonymous(this="TRY_ELEMENT_AT", expressions=[keys.copy(), exp.Cast(this=exp.Nullif(
                this=position, expression=exp.Literal.number(0)), to=exp.DataType.build("INT"))])
        # (a, b) IN (SELECT (x, y) ...): DuckDB compares structs, a NULL field equal to a NULL one
        if isinstance(node, exp.In) and isinstance(node.this, exp.Tuple) and isinstance(node.args.get("query"), exp.Subquery) \
                and isinstance(node.args["query"].this, exp.Select) and len(node.args["query"].this.expressions) == 1 \
                and isinstance(node.args["query"].this.expressions[0], exp.Tuple):
            return _tuple_in(node).transform(fix)  # a new node: its subquery is translated too
        if isinstance(node, exp.Join) and str(node.args.get("method") or "").upper() == "ASOF":
            return _asof_join(node, where)
        if isinstance(node, exp.Join) and str(node.args.get("method") or "").upper() == "POSITIONAL":
            raise NotPortableError(f"{where}: Spark SQL has no POSITIONAL JOIN")
        if isinstance(node, exp.Filter) and isinstance(node.this, exp.ArrayAgg) and isinstance(node.this.this, exp.Order):
            return _ordered_list(node.this, node.expression)
        if isinstance(node, exp.ArrayAgg) and isinstance(node.this, exp.Order):
            return _ordered_list(node, None)
        if isinstance(node, exp.Filter) and isinstance(node.this, exp.ArrayAgg):
            return _null_when_empty(exp.Filter(this=exp.Anonymous(this="COLLECT_LIST", expressions=[node.this.this.copy()]),
                                               expression=node.expression.copy()))
        # list(x) OVER (... ROWS ...): a frame of rows is never empty (it holds the current row)
        if isinstance(node, exp.ArrayAgg) and isinstance(node.parent, exp.Window):
            return exp.Anonymous(this="COLLECT_LIST", expressions=[node.this.copy()])
        if isinstance(node, exp.ArrayAgg) and not isinstance(node.parent, exp.Filter):
            return _null_when_empty(exp.Anonymous(this="COLLECT_LIST", expressions=[node.this.copy()]))
        # first(x ORDER BY ...) / last(...): the first / last of the ordered list
        if isinstance(node, exp.Filter) and isinstance(node.this, (exp.First, exp.Last)) \
                and isinstance(node.this.this, exp.Order):
            return _first_of(node.this, node.expression)
        if isinstance(node, (exp.First, exp.Last)) and isinstance(node.this, exp.Order):
            return _first_of(node, None)
        # len(list) counts elements in DuckDB; Spark's length() is a string's: size() for a list made here
        if isinstance(node, exp.Length) and isinstance(node.this, (exp.Split, exp.RegexpSplit, exp.Array)):
            return exp.Anonymous(this="SIZE", expressions=[node.this.copy()])
        if isinstance(node, exp.Anonymous) and node.name.lower() == "formatreadabledecimalsize":
            return _format_readable_decimal_size(node.expressions[0])
        # list_position: NULL when absent in DuckDB, 0 in Spark
        if isinstance(node, exp.Anonymous) and node.name.lower() in ("list_position", "list_indexof", "array_position"):
            return exp.Nullif(this=exp.Anonymous(this="ARRAY_POSITION", expressions=[e.copy() for e in node.expressions]),
                              expression=exp.Literal.number(0))
        if isinstance(node, (exp.ArrayFilter, exp.Transform)):
            return _shift_index_lambda(node)
        return node

    return tree.transform(fix)


def _whole_rows(tree) -> None:
    """`arg_min(e, k)`, `arg_max(p, k)`, `any_value(p)` of a table's alias: DuckDB takes the whole row
    as a struct; Spark reads a bare name as a column: `STRUCT(e.*)`, in place."""
    from sqlglot import exp

    for sel in tree.find_all(exp.Select):
        sources = [sel.args.get("from_") or sel.args.get("from")] + list(sel.args.get("joins") or [])
        aliases = {src.this.alias_or_name.lower() for src in sources if src is not None and src.this.alias_or_name}
        if not aliases:
            continue
        for agg in sel.find_all(exp.ArgMax, exp.ArgMin, exp.AnyValue):
            if agg.find_ancestor(exp.Select) is not sel:
                continue
            arg = agg.this
            if isinstance(arg, exp.Column) and not arg.table and arg.name.lower() in aliases:
                arg.replace(exp.Anonymous(this="STRUCT", expressions=[
                    exp.Column(this=exp.Star(), table=exp.to_identifier(arg.name))]))


def _zipped_arg_max(node):
    """(K, V) of `(SELECT arg_max(k, v) FROM (SELECT unnest(K) AS k, unnest(V) AS v))`, else None."""
    from sqlglot import exp

    sel = node.this
    if not isinstance(sel, exp.Select) or len(sel.expressions) != 1 or not isinstance(sel.expressions[0], exp.ArgMax) \
            or sel.args.get("where") or sel.args.get("group") or not sel.args.get("from_" if "from_" in exp.Select.arg_types else "from"):
        return None
    agg = sel.expressions[0]
    src = sel.args.get("from_" if "from_" in exp.Select.arg_types else "from").this
    if not (isinstance(src, exp.Subquery) and isinstance(src.this, exp.Select)) or src.this.args.get("from_" if "from_" in exp.Select.arg_types else "from"):
        return None
    lists = {}
    for e in src.this.expressions:
        if isinstance(e, exp.Alias) and isinstance(e.this, (exp.Explode, exp.Unnest)) and isinstance(e.this.this, exp.Array):
            lists[e.alias.lower()] = e.this.this
    if not (isinstance(agg.this, exp.Column) and isinstance(agg.expression, exp.Column)):
        return None
    k, v = agg.this.name.lower(), agg.expression.name.lower()
    if set(lists) != {k, v} or len(lists[k].expressions) != len(lists[v].expressions):
        return None
    return lists[k], lists[v]


def _tuple_in(node):
    """`(a, b) IN (SELECT (x, y) FROM ...)` as `EXISTS (SELECT 1 FROM (SELECT x, y FROM ...) WHERE x <=> a AND
    y <=> b)`: DuckDB compares the structs with NULL fields equal; Spark takes a row constructor on the
    left of IN as several columns, compared with NULLs unequal."""
    from sqlglot import exp

    left = node.this.expressions
    inner = node.args["query"].this.copy()
    right = inner.expressions[0].expressions
    if len(left) != len(right):
        return node
    inner.set("expressions", [exp.alias_(r.copy(), f"__in{i}") for i, r in enumerate(right)])
    cond = exp.and_(*[exp.NullSafeEQ(this=exp.column(f"__in{i}", table="__in"), expression=l.copy())
                      for i, l in enumerate(left)])
    probe = exp.select(exp.Literal.number(1)).from_(
        exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier("__in")))).where(cond)
    return exp.Exists(this=probe)


def _asof_join(join, where: str):
    """`L ASOF [LEFT] JOIN R ON <equalities> AND <one inequality>` (which Spark SQL lacks) as an equi-join
    [LEFT JOIN] of R's rows each with the range of probes it is the match of: for `l.x >= r.y` (the
    last r.y at or before l.x), each R row carries the next y of its partition (by the equalities'
    R sides, y ascending; rows whose y is NULL never match), and matches a probe with
    y <= x < next y; for `l.x <= r.y` (the first r.y at or after l.x) the previous y, and so on for
    the strict forms. A probe thus meets one R row, as in DuckDB (of R rows with equal y, one of them:
    DuckDB takes the first in its input, which Spark does not keep; the SQL of sql/ does not depend
    on which)."""
    from sqlglot import exp

    right = join.this
    alias = right.alias_or_name
    if not alias:
        raise NotPortableError(f"{where}: an ASOF JOIN's right side without a name")

    def on_right(e) -> bool:
        cols = list(e.find_all(exp.Column))
        return bool(cols) and all(c.table == alias for c in cols)

    def on_left(e) -> bool:
        return not any(c.table == alias for c in e.find_all(exp.Column))

    conds = list(join.args["on"].flatten()) if isinstance(join.args.get("on"), exp.And) else [join.args.get("on")]
    keys, probe, y, op = [], None, None, None
    flip = {exp.GTE: exp.LTE, exp.GT: exp.LT, exp.LTE: exp.GTE, exp.LT: exp.GT}
    for c in conds:
        c = c.this if isinstance(c, exp.Paren) else c
        if isinstance(c, exp.EQ) and on_right(c.expression) and on_left(c.this):
            keys.append(c.expression)
        elif isinstance(c, exp.EQ) and on_right(c.this) and on_left(c.expression):
            keys.append(c.this)
        elif type(c) in flip and op is None and on_left(c.this) and on_right(c.expression):
            probe, y, op = c.this, c.expression, type(c)
        elif type(c) in flip and op is None and on_right(c.this) and on_left(c.expression):
            probe, y, op = c.expression, c.this, flip[type(c)]
        else:
            raise NotPortableError(f"{where}: an ASOF JOIN condition Spark cannot take ({c.sql(dialect=_duckdb_dialect())})")
    if op is None:
        raise NotPortableError(f"{where}: an ASOF JOIN without an inequality")
    backward = op in (exp.GTE, exp.GT)  # the last r.y at or before the probe: bounded by the next y
    window = exp.Window(this=exp.Anonymous(this="LEAD" if backward else "LAG", expressions=[y.copy()]),
                        partition_by=[k.copy() for k in keys] or None,
                        order=exp.Order(expressions=[exp.Ordered(this=y.copy(), nulls_first=False)]))
    source = right.copy()
    source.set("alias", right.args["alias"].copy() if right.args.get("alias") else exp.TableAlias(this=exp.to_identifier(alias)))
    inner = (exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier(alias)),
                        exp.alias_(window, "__asof_bound"))
             .from_(source).where(exp.Not(this=exp.Is(this=y.copy(), expression=exp.Null()))))
    bound = exp.column("__asof_bound", table=alias)
    # l.x >= r.y: x < next y; l.x > r.y: x <= next y; l.x <= r.y: x > previous y; l.x < r.y: x >= previous y
    beyond = {exp.GTE: exp.LT, exp.GT: exp.LTE, exp.LTE: exp.GT, exp.LT: exp.GTE}[op](this=probe.copy(), expression=bound)
    cond = exp.and_(join.args["on"].copy(), exp.Paren(this=exp.or_(exp.Is(this=bound.copy(), expression=exp.Null()), beyond)))
    out = exp.Join(this=exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(alias))), on=cond)
    if join.args.get("side"):
        out.set("side", join.args["side"])
    return out


def _ordered_list(agg, where_clause):
    """list(x ORDER BY k1, k2 DESC, ...) [FILTER (WHERE ...)] in Spark: collect (k1, k2, ..., x) structs,
    sort them with a comparator that keeps DuckDB's order (ASC NULLS LAST by default), keep x."""
    from sqlglot import exp

    order = agg.this
    keys = list(order.expressions)
    fields = []
    for i, k in enumerate(keys):
        fields += [exp.Literal.string(f"k{i}"), k.this.copy()]
    fields += [exp.Literal.string("v"), order.this.copy()]
    collected = exp.Anonymous(this="COLLECT_LIST", expressions=[exp.Anonymous(this="NAMED_STRUCT", expressions=fields)])
    if where_clause is not None:
        collected = exp.Filter(this=collected, expression=where_clause.copy())
    cases = []
    for i, k in enumerate(keys):
        left, right = exp.column(f"k{i}", table="__l"), exp.column(f"k{i}", table="__r")
        nulls_first = bool(k.args.get("nulls_first"))
        before_null = exp.and_(exp.Is(this=left.copy(), expression=exp.Null()) if nulls_first else
                               exp.Not(this=exp.Is(this=left.copy(), expression=exp.Null())),
                               exp.Is(this=right.copy(), expression=exp.Null()) if not nulls_first else
                               exp.Not(this=exp.Is(this=right.copy(), expression=exp.Null())))
        after_null = exp.and_(exp.Is(this=right.copy(), expression=exp.Null()) if nulls_first else
                              exp.Not(this=exp.Is(this=right.copy(), expression=exp.Null())),
                              exp.Is(this=left.copy(), expression=exp.Null()) if not nulls_first else
                              exp.Not(this=exp.Is(this=left.copy(), expression=exp.Null())))
        less = exp.GT if k.args.get("desc") else exp.LT
        more = exp.LT if k.args.get("desc") else exp.GT
        cases += [(exp.or_(before_null, less(this=left.copy(), expression=right.copy())), -1),
                  (exp.or_(after_null, more(this=left.copy(), expression=right.copy())), 1)]
    case = exp.Case(ifs=[exp.If(this=c, true=exp.Literal.number(v)) for c, v in cases], default=exp.Literal.number(0))
    comparator = exp.Lambda(this=case, expressions=[exp.to_identifier("__l"), exp.to_identifier("__r")])
    sort = exp.Anonymous(this="ARRAY_SORT", expressions=[collected, comparator])
    keep = exp.Lambda(this=exp.column("v", table="__s"), expressions=[exp.to_identifier("__s")])
    return _null_when_empty(exp.Anonymous(this="TRANSFORM", expressions=[sort, keep]))


def _list_slice(items, begin, end):
    """Spark's SLICE(l, start, length) for DuckDB's list_slice(l, begin, end) (see _spark_fixes)."""
    from sqlglot import exp

    size = exp.Anonymous(this="SIZE", expressions=[items.copy()])

    def position(bound):
        if isinstance(bound, exp.Literal) and not bound.is_string and int(bound.this) >= 0:
            return bound.copy()
        negative = exp.LT(this=bound.copy(), expression=exp.Literal.number(0))
        from_end = exp.Add(this=exp.Add(this=size.copy(), expression=bound.copy()), expression=exp.Literal.number(1))
        return exp.Case(ifs=[exp.If(this=negative, true=from_end)], default=bound.copy())

    start = exp.Greatest(this=position(begin), expressions=[exp.Literal.number(1)])
    length = exp.Sub(this=exp.Add(this=position(end), expression=exp.Literal.number(1)), expression=start.copy())
    return exp.Anonymous(this="SLICE", expressions=[
        items.copy(), start, exp.Greatest(this=exp.Paren(this=length), expressions=[exp.Literal.number(0)])])


def _null_when_empty(array):
    """DuckDB's list() of no rows is NULL, Spark's collect_list an empty array."""
    from sqlglot import exp

    empty = exp.EQ(this=exp.Anonymous(this="SIZE", expressions=[array.copy()]), expression=exp.Literal.number(0))
    return exp.Case(ifs=[exp.If(this=empty, true=exp.Null())], default=array)


def _first_of(agg, where_clause):
    """first(x ORDER BY ...) (last: -1) as an element of the ordered list; NULL when no row."""
    from sqlglot import exp

    listed = _ordered_list(exp.ArrayAgg(this=agg.this.copy()), where_clause)
    index = exp.Literal.number(1) if isinstance(agg, exp.First) else exp.Neg(this=exp.Literal.number(1))
    return exp.Anonymous(this="TRY_ELEMENT_AT", expressions=[listed, index])


@lru_cache(maxsize=1)
def _duckdb_catalog():
    """An in-memory DuckDB with the store's tables (empty), the reference tables and every view and macro
    of sql/views: to learn the columns of a query of sql/ (DESCRIBE) without a store."""
    import duckdb

    from . import viewfile

    con = duckdb.connect()
    for rel in tables().values():
        con.execute(rel.body.replace(f"CREATE TABLE {rel.name}", f"CREATE TABLE __empty_{rel.name}", 1))
    viewfile.define(con, lambda table: f"SELECT * FROM __empty_{table}")
    con.execute("CREATE TEMP TABLE report_runs (run_id VARCHAR)")
    return con


def _columns(query, where: str) -> list[str]:
    """The output column names of a query of a DuckDB AST, with the CTEs around it in scope, as
    DuckDB's DESCRIBE gives them (parameters bound to NULL)."""
    import duckdb
    from sqlglot import exp

    ctes = []
    node = query
    while node is not None:
        w = node.args.get(_with_key()) if node is not query else None
        if w is not None:
            ctes = [c.copy() for c in w.expressions] + ctes
        node = node.parent
    body = exp.select("*").from_(exp.Subquery(this=query.copy(), alias=exp.TableAlias(this=exp.to_identifier("__d"))))
    if ctes:
        body.set(_with_key(), exp.With(expressions=ctes, recursive=any(
            a.args.get(_with_key()) is not None and a.args[_with_key()].args.get("recursive") for a in _ancestors(query))))
    body = body.transform(lambda n: exp.Null() if isinstance(n, (exp.Placeholder, exp.Parameter)) else n)
    try:
        return [row[0] for row in _duckdb_catalog().execute(f"DESCRIBE {body.sql(dialect=_duckdb_dialect())}").fetchall()]
    except duckdb.Error as e:
        raise NotPortableError(f"{where}: cannot find the columns of a UNION BY NAME side ({_first_line(e)})") from None


def _with_key() -> str:
    """The arg of a query that holds its WITH clause (`with_` in newer sqlglot)."""
    from sqlglot import exp

    return "with_" if "with_" in exp.Select.arg_types else "with"


def _ancestors(node):
    while node is not None:
        yield node
        node = node.parent


def _union_by_name(tree, where: str):
    """UNION [ALL] BY NAME (which Spark SQL lacks) as a UNION [ALL] of the sides' columns aligned by name:
    the first side's columns, then those only later sides have, each side NULL for those it lacks
    (DuckDB's order of columns). The sides' columns come from DuckDB (DESCRIBE)."""
    from sqlglot import exp

    def leaves(u, distinct):
        if isinstance(u, exp.Union) and u.args.get("by_name") and bool(u.args.get("distinct")) == distinct \
                and not any(u.args.get(k) for k in (_with_key(), "order", "limit", "offset")):
            return leaves(u.left, distinct) + leaves(u.right, distinct)
        return [u]

    def fix(node):
        if not (isinstance(node, exp.Union) and node.args.get("by_name")):
            return node
        distinct = bool(node.args.get("distinct"))
        sides = leaves(node.left, distinct) + leaves(node.right, distinct)
        names = [_columns(s, where) for s in sides]
        out: list[str] = []
        for cols in names:
            out += [c for c in cols if c.lower() not in {o.lower() for o in out}]
        aligned = []
        for i, (side, cols) in enumerate(zip(sides, names)):
            have = {c.lower() for c in cols}
            select = exp.select(*[exp.column(c, quoted=True) if c.lower() in have else
                                  exp.alias_(exp.Null(), c, quoted=True) for c in out])
            aligned.append(select.from_(exp.Subquery(this=side.copy(),
                                                     alias=exp.TableAlias(this=exp.to_identifier(f"__by_name_{i}")))))
        result = aligned[0]
        for side in aligned[1:]:
            result = exp.Union(this=result, expression=side, distinct=distinct)
        for k in (_with_key(), "order", "limit", "offset"):
            if node.args.get(k) is not None:
                result.set(k, node.args[k].copy())
        return result

    return tree.transform(fix)


def _format_readable_decimal_size(n):
    """DuckDB's formatReadableDecimalSize(n): '512 bytes', '1 byte' (and '-1 byte'), else one decimal truncated in
    1000-based units ('1.9 kB' for 1999, '-1.5 kB', '3000.0 PB')."""
    from sqlglot import exp

    template = ("CASE WHEN __n IS NULL THEN NULL WHEN ABS(__n) = 1 THEN CAST(__n AS STRING) || ' byte' "
                "WHEN ABS(__n) < 1000 THEN CAST(__n AS STRING) || ' bytes' "
                + " ".join(f"WHEN ABS(__n) < {1000 ** (k + 1)} THEN {{f{k}}}" for k in range(1, 5))
                + " ELSE {f5} END")
    units = {1: "kB", 2: "MB", 3: "GB", 4: "TB", 5: "PB"}
    parts = {f"f{k}": f"CONCAT(CAST(CAST(__n AS BIGINT) DIV {1000 ** k} AS STRING), '.', "
                      f"CAST(ABS(CAST(__n AS BIGINT) % {1000 ** k}) DIV {1000 ** k // 10} AS STRING), ' {u}')"
             for k, u in units.items()}
    case = _parse_spark(template.format(**parts))
    return case.transform(lambda x: exp.Paren(this=n.copy()) if isinstance(x, exp.Column) and x.name == "__n" else x)


def _parse_spark(sql: str):
    import sqlglot

    return sqlglot.parse_one(f"SELECT {sql}", read="spark").expressions[0]


def _shift_index_lambda(node):
    """list_filter(l, lambda x, i: ...) / list_transform: DuckDB counts the index from 1, Spark from 0."""
    from sqlglot import exp

    lam = node.args.get("expression")
    if not isinstance(lam, exp.Lambda) or len(lam.expressions) != 2 or lam.args.get("__shifted"):
        return node
    index = lam.expressions[1].name

    def shift(n):
        if isinstance(n, exp.Identifier) and n.name == index and not isinstance(
                n.parent, (exp.Column, exp.Table, exp.Alias, exp.TableAlias, exp.Dot, exp.Lambda)):
            return exp.Paren(this=exp.Add(this=n.copy(), expression=exp.Literal.number(1)))
        return n

    body = lam.this.transform(shift)
    new = exp.Lambda(this=body, expressions=[e.copy() for e in lam.expressions])
    new.args["__shifted"] = True
    node.set("expression", new)
    return node


def to_spark_sql(sql: str, where: str = "query") -> str:
    """DuckDB SQL of sql/ as Spark SQL: macros expanded, then sqlglot's translation, with fixes
    where the two engines differ in meaning. Raises NotPortableError for what has no equivalent."""
    from sqlglot.errors import SqlglotError

    try:
        tree = expand_macros(_parse(sql), where)
        tree = _union_by_name(tree, where)
        tree = _spark_fixes(tree, where)
        return tree.sql(dialect="spark")  # $name parameters become Spark's named parameters :name
    except SqlglotError as e:
        raise NotPortableError(f"{where}: sqlglot cannot translate it ({str(e).splitlines()[0]})") from None


def _spark_type(duckdb_type: str) -> str:
    from sqlglot import exp

    return exp.DataType.build(duckdb_type, dialect="duckdb").sql(dialect="spark")


def _schema(rel: Relation) -> str:
    return ", ".join(f"`{c.name}` {_spark_type(c.type)}" for c in rel.columns)


# --- registering ----------------------------------------------------------------------------------

@dataclass
class SparkViews:
    """What `register` made: the tables and views registered, and the views skipped with why."""

    store: Path
    run_ids: list[str]
    tables: list[str] = field(default_factory=list)  # base and reference tables
    views: list[str] = field(default_factory=list)  # views of sql/views, in load order
    not_portable: dict[str, NotPortableError] = field(default_factory=dict)  # view -> why it was skipped
    # views whose rows Spark computes when they are registered (a recursive walk over a big plan:
    # critical_path), skipped unless register(..., compute=True): view -> why
    deferred: dict[str, str] = field(default_factory=dict)
    sql: dict[str, str] = field(default_factory=dict)  # view -> the Spark SQL it was created from


_REGISTERED: dict[int, SparkViews] = {}


def _table_files(store: Store, run_ids: list[str]) -> dict[str, list[str]]:
    """Per table, the Parquet files to read: the packs holding only these runs (as DuckDB prefers
    them), then the other runs' own files; `runs` always from each run's own file."""
    chosen, left = packs.choose(store, run_ids) if packs.state(store) is not None else ([], run_ids)
    out = {}
    for table in tables():
        if table == "runs":
            out[table] = [store.run_file(r, "runs.parquet") for r in run_ids]
        else:
            out[table] = [str(p.path / f"{table}.parquet") for p in chosen] + [store.run_file(r, f"{table}.parquet")
                                                                         for r in left]
    return out


def _reference_frames(spark: SparkSession) -> dict[str, DataFrame]:
    """The reference tables (reference.py's rows) as Spark DataFrames, typed as sql/views declares."""
    rels = {rel.name: rel for f in view_files() for rel in f.relations if rel.kind == "table"}
    out = {}
    for name, columns in reference.tables().items():
        rel = rels[name]
        names = [c.name for c in rel.columns]
        rows = list(zip(*(columns[c] for c in names))) if names else []
        out[name] = spark.createDataFrame(rows, _schema(rel))
    return out


def _spark_error_types() -> tuple[type[BaseException], ...]:
    from pyspark.errors import PySparkException

    return (PySparkException,)


def register(spark: SparkSession, store: str | os.PathLike, compute: bool = False) -> SparkViews:
    """Make the store's tables (`runs`, `events`, `args`, `shapes`, `step_windows`, `stacks`), the
    reference tables and every portable view of sql/views Spark temporary views of this session.
    Views are transpiled from the same SQL files DuckDB loads; one that Spark cannot run (or that
    reads one that cannot) is skipped and recorded in the result's `not_portable` with the reason.
    A view Spark can only hold as computed rows (a recursive walk whose plan is too big for its
    analyzer: critical_path) is computed now with `compute=True`, else skipped and recorded in
    `deferred` (its report computes the walk itself: `report(spark, store, "critical-path")`).
    The store must be on a path the executors see."""
    st = Store(store)
    if not st.runs_dir.is_dir():
        raise StoreError(f"no store at {st.path}", "Run `traceduck ingest TRACE` first, or pass the store's path")
    run_ids = st.run_ids()
    stamp = schema_stamp()
    stale = [r for r in run_ids if not os.path.exists(st.run_file(r, stamp))]
    if stale:
        raise StoreError(f"{len(stale)} run(s) in {st.path} come from another traceduck version",
                         "Re-ingest their traces with `traceduck ingest TRACE --force`")
    out = SparkViews(st.path, run_ids)
    files = _table_files(st, run_ids)
    for name, rel in tables().items():
        schema = _schema(rel)
        df = spark.read.schema(schema).parquet(*files[name]) if files[name] else spark.createDataFrame([], schema)
        df.createOrReplaceTempView(name)
        out.tables.append(name)
    for name, df in _reference_frames(spark).items():
        df.createOrReplaceTempView(name)
        out.tables.append(name)
    errors = _spark_error_types()
    for f in view_files():
        summarized = {s.name: s for s in f.summaries if s.view is not None}
        for rel in f.relations:
            if rel.kind != "view":
                continue
            where = f"view {rel.name} ({f.path.name})"
            if rel.name in summarized:  # Spark reads no pack: the summary is its computation
                body = f"SELECT * FROM {summarized[rel.name].macro}()"
            else:
                body = re.sub(r"^CREATE\s+(OR\s+REPLACE\s+)?VIEW\s+\w+\s+AS\s+", "", rel.body.strip().rstrip(";"),
                              flags=re.I)
            try:
                lost = sorted(tables_read(body, where) & set(out.not_portable))
                if lost:
                    raise NotPortableError(f"{where}: reads {', '.join(lost)}, which Spark cannot run")
                sql = to_spark_sql(body, where)
                out.sql[rel.name] = sql
                with _unlogged_query_errors():
                    if _needs_staging(sql) and (_recursive(_parse_spark_query(sql)) and _inlined_references(
                            _parse_spark_query(sql)) > _STAGED_VIEW_REFERENCES or not _spark_recurses(spark)):
                        # a recursive walk over a big plan, or where Spark SQL has no recursive CTE: its rows
                        # computed now, when asked (it runs the whole walk: minutes on a small store)
                        if not compute:
                            out.deferred[rel.name] = ("its rows are computed when registered (a recursive walk): "
                                                      "register(..., compute=True)")
                            continue
                        staged(spark, sql).createOrReplaceTempView(rel.name)
                    else:
                        spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {rel.name} AS {sql}")
            except NotPortableError as e:
                out.not_portable[rel.name] = e
                continue
            except errors as e:
                out.not_portable[rel.name] = NotPortableError(f"{where}: Spark refuses it ({_first_line(e)})")
                continue
            out.views.append(rel.name)
    _REGISTERED[id(spark)] = out
    return out


# pyspark logs every failed query at ERROR, with the plan and the Java stack trace, before raising it
_QUERY_ERROR_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


@contextmanager
def _unlogged_query_errors() -> Iterator[None]:
    """No such log while `register` tries a view: one that Spark refuses is recorded in
    `not_portable` (with the first line of Spark's error) instead."""
    loggers = [logging.getLogger(name) for name in _QUERY_ERROR_LOGGERS]
    was = [lg.disabled for lg in loggers]
    for lg in loggers:
        lg.disabled = True
    try:
        yield
    finally:
        for lg, disabled in zip(loggers, was):
            lg.disabled = disabled


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else type(e).__name__


# --- reports --------------------------------------------------------------------------------------

def report_sql(name: str) -> str:
    """A report of sql/reports as Spark SQL (its parameters as Spark's named parameters `:name`)."""
    return to_spark_sql(get_report(name).query, f"report {name}")


def _in_run_order(df: DataFrame, run_ids: list[str]) -> DataFrame:
    """The rows grouped by run in the order of `run_ids` (rows of no listed run last), each run's
    rows in the report's own order, as DuckDB gives them (see reports.ReportQuery)."""
    from pyspark.sql import functions as F

    # numbered as they come out of the report's ORDER BY: a nondeterministic column keeps the sort under it
    numbered = df.withColumn("__row", F.monotonically_increasing_id())
    positions = F.map_from_arrays(F.array(*[F.lit(r) for r in run_ids]), F.array(*[F.lit(i) for i in range(len(run_ids))])) \
        if run_ids else None
    position = F.coalesce(F.try_element_at(positions, F.col("run_id")), F.lit(_MAX_POSITION)) if run_ids \
        else F.lit(_MAX_POSITION)
    return numbered.withColumn("__position", position).orderBy("__position", "__row").drop("__position", "__row")


_STAGES = itertools.count(1)
# a query whose views and macros, inlined, reference more relations than this is run in stages: Spark's
# analyzer takes minutes and gigabytes over one plan that size (the overview report's)
_STAGED_REFERENCES = 250
# a view with a recursive CTE whose plan reads more than this is computed when registered (critical_path):
# Spark's analyzer runs out of a 2 GiB driver's memory over it
_STAGED_VIEW_REFERENCES = 100


def _spark_recurses(spark: SparkSession) -> bool:
    """Whether this Spark's SQL has recursive CTEs (4.1 and later)."""
    major, minor = (int(x) for x in spark.version.split(".")[:2])
    return (major, minor) >= (4, 1)


def _needs_staging(sql: str) -> bool:
    """Whether a query of Spark SQL (as translated) runs in stages (`staged`): it has a recursive CTE,
    or its plan, each view it reads inlined, is too big for Spark's analyzer."""
    from sqlglot import exp

    tree = _parse_spark_query(sql)
    return _recursive(tree) or _inlined_references(tree) > _STAGED_REFERENCES


def _recursive(tree) -> bool:
    """Whether a query has a CTE that reads itself."""
    from sqlglot import exp

    w = tree.args.get(_with_key())
    return w is not None and bool(w.args.get("recursive")) and any(
        t.name.lower() == c.alias_or_name.lower() and not t.db for c in w.expressions for t in c.this.find_all(exp.Table))


def _parse_spark_query(sql: str):
    """Spark SQL as sqlglot reads it, to be written again as Spark SQL: `ANY_VALUE(x, TRUE)` stays
    so (sqlglot writes it `ANY_VALUE(x) IGNORE NULLS`, which Spark refuses before a FILTER)."""
    import sqlglot
    from sqlglot import exp

    def keep(node):
        if isinstance(node, exp.IgnoreNulls) and isinstance(node.this, exp.AnyValue):
            return exp.Anonymous(this="ANY_VALUE", expressions=[node.this.this.copy(), exp.true()])
        return node

    return sqlglot.parse_one(sql, read="spark").transform(keep)


def _inlined_references(tree) -> int:
    """The relations a plan reads once each view it reads is inlined (a view read twice counts twice)."""
    from sqlglot import exp

    sizes = _view_sizes()
    return sum(1 + sizes.get(t.name.lower(), 0) for t in tree.find_all(exp.Table) if t.name)


@lru_cache(maxsize=1)
def _view_sizes() -> dict[str, int]:
    """Per view of sql/views, the relations its plan reads with the views it reads inlined."""
    out: dict[str, int] = {}
    for f in view_files():
        for rel in f.relations:
            if rel.kind != "view":
                continue
            body = re.sub(r"^CREATE\s+(OR\s+REPLACE\s+)?VIEW\s+\w+\s+AS\s+", "", rel.body.strip().rstrip(";"), flags=re.I)
            try:
                tree = expand_macros(_parse(body), rel.name)
            except Exception:  # noqa: BLE001 - a view sqlglot cannot read counts as small
                continue
            from sqlglot import exp

            out[rel.name.lower()] = sum(1 + out.get(t.name.lower(), 0) for t in tree.find_all(exp.Table) if t.name)
    return out


def staged(spark: SparkSession, sql: str, params: dict | None = None) -> DataFrame:
    """A query of Spark SQL run one top-level CTE at a time: each CTE's rows computed once and kept
    (a local checkpoint, so that the next CTE's plan reads them, not their plan) under a temporary
    view, then the query over them. A recursive CTE (`WITH RECURSIVE x AS (anchor UNION ALL step)`,
    which Spark before 4.1 lacks) is iterated on the driver: the step runs over the rows the last
    round added until it adds none, and x is every round's rows, as DuckDB's recursive CTE gives."""
    from sqlglot import exp

    tree = _parse_spark_query(sql)
    w = tree.args.get(_with_key())
    if w is None:
        return spark.sql(sql, args=_args_used(sql, params))
    tag = next(_STAGES)
    names: dict[str, str] = {}
    made: list[str] = []

    def renamed(node, extra=None):
        table = {**names, **(extra or {})}

        def put(n):
            if isinstance(n, exp.Table) and not n.db and n.name.lower() in table:
                alias = n.args.get("alias") or exp.TableAlias(this=exp.to_identifier(n.name))
                return exp.Table(this=exp.to_identifier(table[n.name.lower()]), alias=alias.copy())
            return n

        return node.copy().transform(put)

    def run(node, extra=None):
        text = renamed(node, extra).sql(dialect="spark")
        return spark.sql(text, args=_args_used(text, params))

    def keep(df, view):
        df = df.localCheckpoint(eager=False)
        df.createOrReplaceTempView(view)
        made.append(view)
        return df

    # Spark (4.x) fails to carry the constraints of a union of checkpointed rows into a checkpoint
    propagation = spark.conf.get("spark.sql.constraintPropagation.enabled", "true")
    spark.conf.set("spark.sql.constraintPropagation.enabled", "false")
    try:
        for cte in w.expressions:
            name = cte.alias_or_name
            view = f"__stage{tag}_{name}"
            body = cte.this
            reads_itself = any(t.name.lower() == name.lower() and not t.db for t in body.find_all(exp.Table))
            if w.args.get("recursive") and reads_itself:
                if not (isinstance(body, exp.Union) and not body.args.get("distinct")):
                    raise NotPortableError(f"a recursive CTE ({name}) other than anchor UNION ALL step")
                anchor = run(body.this)
                declared = [c.name for c in (cte.args["alias"].columns or [])]
                if declared:
                    anchor = anchor.toDF(*declared)
                anchor = keep(anchor, f"{view}_0")
                columns, types = anchor.columns, [f.dataType for f in anchor.schema.fields]
                rounds, last = [anchor], f"{view}_0"
                while True:
                    step = run(body.expression, {name.lower(): last})
                    step = step.select(*[step[c].cast(t).alias(n) for c, n, t in zip(step.columns, columns, types)])
                    last = f"{view}_{len(rounds)}"
                    step = keep(step, last)
                    if step.isEmpty():
                        break
                    rounds.append(step)
                whole = rounds[0]
                for r in rounds[1:]:
                    whole = whole.unionAll(r)
                keep(whole, view)
            else:
                keep(run(body), view)
            names[name.lower()] = view
        main = tree.copy()
        main.set(_with_key(), None)
        return run(main).localCheckpoint()
    finally:
        spark.conf.set("spark.sql.constraintPropagation.enabled", propagation)
        for view in made:
            spark.catalog.dropTempView(view)


def _literal_frame_bounds(sql: str, params: dict | None) -> str:
    """Spark takes only a literal as a window frame's bound (`ROWS BETWEEN CURRENT ROW AND 2
    FOLLOWING`); a bound computed from a report's parameters (`greatest($length, 1) - 1`) is
    computed here, with the parameters' values, by DuckDB, and written as that literal."""
    import duckdb
    from sqlglot import exp

    if not params or not re.search(r"\b(ROWS|RANGE)\s+BETWEEN\b", sql, re.IGNORECASE):
        return sql
    tree = _parse_spark_query(sql)
    changed = False
    for spec in tree.find_all(exp.WindowSpec):
        for side in ("start", "end"):
            bound = spec.args.get(side)
            if not isinstance(bound, exp.Expression) or isinstance(bound, exp.Literal) \
                    or not any(bound.find_all(exp.Placeholder)):
                continue
            spark_text = bound.sql(dialect="spark")
            used = {k: v for k, v in params.items() if re.search(rf":{re.escape(k)}\b", spark_text)}
            duckdb_text = re.sub(r":(\w+)", r"$\1", bound.sql(dialect="duckdb"))
            value = duckdb.execute(f"SELECT ({duckdb_text})::BIGINT", used).fetchone()[0]
            spec.set(side, exp.Literal.number(value))
            changed = True
    return tree.sql(dialect="spark") if changed else sql


def _args_used(sql: str, params: dict | None) -> dict | None:
    """The named parameters a piece of a query uses (Spark refuses arguments it does not use)."""
    if not params:
        return None
    used = {k: v for k, v in params.items() if re.search(rf":{re.escape(k)}\b", sql)}
    return used or None


def _compute_deferred(spark: SparkSession, views: SparkViews, view: str) -> None:
    """Compute the rows of a view `register` deferred (a recursive walk over a big plan: op_cost,
    critical_path) the first time a report reads it, and keep them as the view for the session."""
    try:
        with _unlogged_query_errors():
            staged(spark, views.sql[view]).createOrReplaceTempView(view)
    except _spark_error_types() as e:
        raise QueryError(f"view {view} failed in Spark: {_first_line(e)}") from None
    del views.deferred[view]
    views.views.append(view)


def report(spark: SparkSession, name: str, runs: list[str] | None = None, params: list[str] | None = None,
           store: str | os.PathLike | None = None, keep_run_columns: bool | None = None) -> DataFrame:
    """A canned report (`traceduck reports` lists them) run in Spark SQL over the views `register`
    made (of `store`, default: the store last registered in this session), as a Spark DataFrame.
    `runs` (selections as for `traceduck.open(store).select_runs`) and `params` (`KEY=VALUE`
    strings) as for `Database.report`; the run selection, the parameters and a report's one-job check
    are resolved on the driver from the store's `runs` rows. Raises NotPortableError when the
    report, or a view it reads, cannot run in Spark."""
    from .api import open as open_store

    views = _REGISTERED.get(id(spark))
    if store is not None and (views is None or views.store != Store(store).path):
        views = register(spark, store)
    if views is None:
        raise StoreError("no store registered in this Spark session", "Call traceduck.spark.register(spark, STORE) first")
    with open_store(views.store) as db:
        prepared = db.report_query(name, runs, params, keep_run_columns=keep_run_columns)  # checks one_job
        prepared.close()
    skipped = sorted(tables_read(prepared.report.sql, f"report {name}") & set(views.not_portable))
    if skipped:
        reasons = "; ".join(views.not_portable[v].message for v in skipped)
        raise NotPortableError(f"report {name} reads views Spark cannot run: {reasons}")
    run_ids = prepared.run_ids
    for view in sorted(tables_read(prepared.report.sql, f"report {name}") & set(views.deferred)):
        _compute_deferred(spark, views, view)
    spark.createDataFrame([(r,) for r in run_ids], "run_id STRING").createOrReplaceTempView("report_runs")
    sql = _literal_frame_bounds(report_sql(name), prepared.params)
    try:
        with _unlogged_query_errors():
            df = staged(spark, sql, prepared.params) if _needs_staging(sql) else spark.sql(sql, args=prepared.params or None)
        if "run_id" in df.columns:
            df = _in_run_order(df, run_ids)
        return df.drop(*prepared.dropped) if prepared.dropped else df
    except _spark_error_types() as e:
        raise QueryError(f"report {name} failed in Spark: {_first_line(e)}") from None


__all__ = ["SparkViews", "expand_macros", "ingest", "macros", "register", "report", "report_sql", "staged", "to_spark_sql"]
