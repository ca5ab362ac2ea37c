"""The SQL shipped with traceduck: where it lives and the documentation in its comments."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

if TYPE_CHECKING:  # only the ingester needs Arrow: queries start without importing it
    import pyarrow as pa


def sql_dir() -> Path:
    """The `sql/` directory: inside the installed package, else the source checkout's top level."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "sql", here.parents[1] / "sql"):
        if (candidate / "tables.sql").is_file():
            return candidate
    raise FileNotFoundError("traceduck's sql/ directory is missing from the installation")


@dataclass
class Column:
    name: str
    type: str
    doc: str


@dataclass
class Relation:
    """A table or view defined in sql/, with its documentation."""

    name: str
    doc: str
    kind: str  # "table" or "view"
    columns: list[Column] = field(default_factory=list)
    body: str = ""  # the CREATE statement


_CREATE = re.compile(r"^CREATE\s+(?:OR\s+REPLACE\s+)?(TABLE|VIEW)\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.I)
_COLUMN_DEF = re.compile(r"^\s*(\w+)\s+([A-Z][A-Z0-9_(), \[\]]*?)\s*,?\s*$")


def sql_statements(text: str) -> list[tuple[list[str], list[str]]]:
    """Each CREATE statement of a SQL file (table, view or macro), from its CREATE line to the line
    ending in `;`, with the comment lines of the block right above it (`--` stripped)."""
    out: list[tuple[list[str], list[str]]] = []
    comments: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if stripped.startswith("--"):
            comments.append(stripped[2:].strip())
            i += 1
            continue
        if not stripped.upper().startswith("CREATE"):
            if not stripped:
                comments = []
            i += 1
            continue
        body = [lines[i]]
        i += 1
        while i < len(lines) and not body[-1].rstrip().endswith(";"):
            body.append(lines[i])
            i += 1
        out.append((comments, body))
        comments = []
    return out


def parse_sql_file(text: str) -> list[Relation]:
    """The tables and views of a SQL file with the comment block above each one.

    Table columns are read from the column list (each preceded by `-- doc` lines); view
    columns are declared in the comment block as `-- @column name TYPE doc`.
    """
    relations: list[Relation] = []
    for comments, body_lines in sql_statements(text):
        m = _CREATE.match(body_lines[0].strip())
        if not m:  # a macro
            continue
        kind, name = m.group(1).lower(), m.group(2)
        doc_lines = [c for c in comments if not c.startswith("@column")]
        rel = Relation(name=name, doc=" ".join(doc_lines).strip(), kind=kind, body="\n".join(body_lines))
        if kind == "table":
            rel.columns = _table_columns(body_lines[1:])
        else:
            for c in comments:
                if c.startswith("@column"):
                    parts = c.split(None, 3)
                    rel.columns.append(Column(parts[1], parts[2], parts[3] if len(parts) > 3 else ""))
        relations.append(rel)
    return relations


def _table_columns(body: list[str]) -> list[Column]:
    columns: list[Column] = []
    doc: list[str] = []
    for line in body:
        s = line.strip()
        if s.startswith("--"):
            doc.append(s[2:].strip())
            continue
        if s.startswith(")"):
            break
        m = _COLUMN_DEF.match(s)
        if m:
            columns.append(Column(m.group(1), m.group(2).strip(), " ".join(doc)))
            doc = []
    return columns


@lru_cache(maxsize=1)
def tables() -> dict[str, Relation]:
    """The store's tables, by name, as documented in sql/tables.sql."""
    text = (sql_dir() / "tables.sql").read_text()
    return {r.name: r for r in parse_sql_file(text) if r.kind == "table"}


@lru_cache(maxsize=1)
def view_files() -> list[tuple[Path, str, list[Relation]]]:
    """The view files of sql/views in load order: (path, SQL text, documented relations)."""
    out = []
    for path in sorted((sql_dir() / "views").glob("*.sql")):
        text = path.read_text()
        out.append((path, text, parse_sql_file(text)))
    return out


def reference_sql() -> str:
    """sql/views/00_reference.sql: the reference tables (empty) and the macros over event names."""
    return next(text for path, text, _ in view_files() if path.name == "00_reference.sql")


def documented_relations() -> dict[str, Relation]:
    """Every documented table and view: the store's tables, then the views in load order."""
    rels = dict(tables())
    for _path, _text, relations in view_files():
        rels.update({r.name: r for r in relations})
    return rels


@lru_cache(maxsize=1)
def arrow_schemas() -> dict[str, pa.Schema]:
    """Arrow schemas of the store's tables, derived from the DuckDB definitions."""
    con = duckdb.connect()
    out = {}
    for name, rel in tables().items():
        con.execute(rel.body)
        out[name] = con.sql(f"SELECT * FROM {name}").to_arrow_table().schema
    con.close()
    return out


@lru_cache(maxsize=1)
def schema_stamp() -> str:
    """Name of the empty file ingest leaves in each run it writes: a hash of the tables' columns
    and their declared types, so that a reader knows a run has this version's columns with one
    stat, without reading the footers of its Parquet files (nor loading Arrow to name the types)."""
    text = "\n".join(f"{table}: " + ", ".join(f"{c.name} {' '.join(c.type.split())}" for c in rel.columns)
                     for table, rel in tables().items())
    return "schema-" + hashlib.sha256(text.encode()).hexdigest()[:16]
