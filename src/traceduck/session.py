"""What a connection tells the store's views: which files to read, and which runs' summaries the packs hold.

The views of the view file read their tables' Parquet files from directories given to each
connection in DuckDB session variables, so that one view file serves every set of runs (see
viewfile.py and engine.py). Each variable is declared here once, with the macro the SQL reads it
through: no SQL file and no other module names a variable (`getvariable` appears only here; a test
holds that).
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from .sqltext import literal


@dataclass(frozen=True)
class Variable:
    name: str  # the DuckDB variable
    type: str
    unset: str  # its value (SQL) where the connection has not set it: a catalog file, or Spark


SOURCES = Variable("traceduck_sources", "VARCHAR[]", "[]::VARCHAR[]")
EMPTY_DIR = Variable("traceduck_empty_dir", "VARCHAR", "NULL::VARCHAR")
SUMMARY_SOURCES = Variable("traceduck_summary_sources", "VARCHAR[]", "[]::VARCHAR[]")
SUMMARIZED_RUNS = Variable("traceduck_summarized_runs", "VARCHAR[]", "[]::VARCHAR[]")
ALL_SUMMARIZED = Variable("traceduck_all_summarized", "BOOLEAN", "false")


# up to this many list items in all, a connection's variables are set in one call, as SQL text
# (4,096 paths as text took 53 ms to parse, as parameters a few)
INLINE_ITEMS = 64


def _get(var: Variable) -> str:
    return f"coalesce(getvariable('{var.name}'), {var.unset})"


def _files(var: Variable) -> str:
    return (f"CASE WHEN len({_get(var)}) = 0 THEN [{_get(EMPTY_DIR)} || '/' || name || '.parquet'] "
            f"ELSE list_transform({_get(var)}, lambda d: d || '/' || name || '.parquet') END")


# (macro, documentation, SQL): the one way the SQL reads the session. Loaded before every view.
MACROS = [
    ("source_files(name)",
     "The Parquet files of table `name` in the directories this connection reads (the chosen packs, "
     "then the other runs' own directories); the empty file of that name when there are none.",
     _files(SOURCES)),
    ("summary_files(name)",
     "The files `name`.parquet of the packs whose summaries this connection reads (see "
     "`summarized_runs`); the empty file of that name when there are none.",
     _files(SUMMARY_SOURCES)),
    ("summarized_runs()",
     "The runs whose summaries this connection reads from their packs (computed once by `traceduck "
     "compact`): the views that read summaries leave them out of their own computation.",
     _get(SUMMARIZED_RUNS)),
    ("all_runs_summarized()",
     "True when every run this connection reads is summarized: the views then compute nothing "
     "(their own computation is planned away).",
     _get(ALL_SUMMARIZED)),
]


def macros_sql() -> str:
    """CREATE statements of the session macros, each with its documentation above it."""
    return "\n".join(f"-- {doc}\nCREATE OR REPLACE MACRO {name} AS {sql};" for name, doc, sql in MACROS)


def point(con: duckdb.DuckDBPyConnection, sources: list[str], empty_dir: str, summary_sources: list[str],
          summarized_runs: list[str], all_summarized: bool) -> None:
    """Tell a connection what its views read (see the variables above)."""
    values = [(SOURCES, sources), (EMPTY_DIR, empty_dir), (SUMMARY_SOURCES, summary_sources),
              (SUMMARIZED_RUNS, summarized_runs), (ALL_SUMMARIZED, all_summarized)]
    if sum(len(value) for _, value in values if isinstance(value, list)) <= INLINE_ITEMS:
        # one call for all (a call is a millisecond of a command's 0.1 s of its own on a small store)
        con.execute(";\n".join(f"SET VARIABLE {var.name} = {_value_sql(value)}::{var.type}" for var, value in values))
        return
    for var, value in values:  # thousands of paths: parsed faster as parameters than as SQL text
        con.execute(f"SET VARIABLE {var.name} = ?::{var.type}", [value])


def _value_sql(value: str | list[str] | bool) -> str:
    """A variable's value as SQL: a string literal, a list of them, or a boolean."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return literal(value)
    return "[" + ", ".join(map(literal, value)) + "]"
