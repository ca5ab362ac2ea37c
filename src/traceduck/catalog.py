"""The SQL shipped with traceduck: where it lives, the statements of each file in load order, and the
documentation in their comments (tables, views, summaries, reports).

Three things are declared in comments and parsed here, the one parser of sql/:

- a table's or view's documentation: the comment block above its CREATE, `-- @column name TYPE doc`
  lines for a view's columns, a `-- doc` line above each column of a table;
- a summary: a table macro `NAME_of(skip_runs := []::VARCHAR[])` whose comment block has a line
  `-- @summary`. Its rows per run are what `traceduck compact` keeps in a pack; the view NAME
  (documented by the macro's comment block) and the macro NAME_packed() are generated from it:
  NAME reads the packed runs' rows from their packs and computes the others' (see Summary.sql);
- a report's header (`-- title:`, `-- param:`, `-- column:` ..., see parse_report).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from .errors import ReportError, with_suggestion

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


@dataclass
class Summary:
    """A summary of sql/views (see the module docstring): the macro that computes its rows and what
    is generated over it. A summary whose macro takes parameters (besides skip_runs) declares the
    values a pack holds rows for, `-- @summary by_step = false|true, ...`: NAME is then a table
    macro with those parameters (the first value the default), and the pack holds the rows of
    every combination, each with its values in columns setting_<parameter>."""

    name: str  # the view (or table macro, with settings) generated
    macro: str  # NAME_of, which computes the rows of runs not in its skip_runs
    view: Relation | None  # the generated view's documentation (None with settings)
    settings: dict[str, list[str]] = field(default_factory=dict)  # parameter -> its values (SQL literals)

    @property
    def packed(self) -> str:
        """The table macro that reads the packed runs' rows (empty in the SQL; see viewfile.py)."""
        return f"{self.name}_packed"

    def _setting_columns(self, values: tuple[str, ...]) -> str:
        return "".join(f"{v} AS setting_{p}, " for p, v in zip(self.settings, values))

    def rows_sql(self) -> str:
        """The query of the rows a pack holds: NAME_of's for every combination of the settings."""
        combos = [()]
        for values in self.settings.values():
            combos = [c + (v,) for c in combos for v in values]
        return "\nUNION ALL\n".join(
            f"SELECT {self._setting_columns(c)}* FROM {self.macro}({', '.join(f'{p} := {v}' for p, v in zip(self.settings, c))})"
            for c in combos)

    def sql(self) -> str:
        """The statements generated: NAME_packed(), with no rows here (a store's view file makes it
        read the packs, see viewfile.py), and NAME: the packed runs' rows, then the others'
        computed by NAME_of (all of it planned away when every run read is summarized)."""
        first = tuple(values[0] for values in self.settings.values())
        packed = (f"CREATE OR REPLACE MACRO {self.packed}() AS TABLE SELECT {self._setting_columns(first)}* "
                  f"FROM {self.macro}() WHERE false;\n")
        if not self.settings:
            return (packed + f"CREATE OR REPLACE VIEW {self.name} AS\nSELECT * FROM {self.packed}()\nUNION ALL\n"
                    f"SELECT * FROM {self.macro}(summarized_runs())\nWHERE NOT all_runs_summarized();")
        params = ", ".join(f"{p} := {values[0]}" for p, values in self.settings.items())
        chosen = " AND ".join(f"setting_{p} = {p}" for p in self.settings)
        passed = ", ".join(f"{p} := {p}" for p in self.settings)
        return (packed + f"CREATE OR REPLACE MACRO {self.name}({params}) AS TABLE\n"
                f"SELECT * EXCLUDE ({', '.join(f'setting_{p}' for p in self.settings)}) FROM {self.packed}() "
                f"WHERE {chosen}\nUNION ALL\n"
                f"SELECT * FROM {self.macro}({passed}, skip_runs := summarized_runs())\nWHERE NOT all_runs_summarized();")


_CREATE = re.compile(r"^CREATE\s+(?:OR\s+REPLACE\s+)?(TABLE|VIEW)\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.I)
_MACRO = re.compile(r"^CREATE\s+(?:OR\s+REPLACE\s+)?MACRO\s+(\w+)\s*\(", re.I)
_COLUMN_DEF = re.compile(r"^\s*(\w+)\s+([A-Z][A-Z0-9_(), \[\]]*?)\s*,?\s*$")
SUMMARY_TAG = "@summary"


def sql_statements(text: str) -> list[tuple[list[str], list[str]]]:
    """Each CREATE statement of a SQL file (table, view or macro), from its CREATE line to the line
    ending in `;`, with the comment lines of the block right above it (`--` stripped)."""
    return [(comments, body) for comments, body, _end in _statements(text)]


def _statements(text: str) -> list[tuple[list[str], list[str], int]]:
    """sql_statements, with the index of each statement's last line."""
    out: list[tuple[list[str], list[str], int]] = []
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
        out.append((comments, body, i - 1))
        comments = []
    return out


def _view_columns(comments: list[str]) -> list[Column]:
    out = []
    for c in comments:
        if c.startswith("@column"):
            parts = c.split(None, 3)
            out.append(Column(parts[1], parts[2], parts[3] if len(parts) > 3 else ""))
    return out


def _doc(comments: list[str]) -> str:
    return " ".join(c for c in comments if not c.startswith("@")).strip()


def _summary(comments: list[str], body: list[str], where: str) -> Summary:
    m = _MACRO.match(body[0].strip())
    macro = m.group(1) if m else ""
    tag = next(c for c in comments if c.split(None, 1)[0] == SUMMARY_TAG)
    settings = {}
    for item in filter(None, (i.strip() for i in tag[len(SUMMARY_TAG):].split(","))):
        param, sep, values = item.partition("=")
        settings[param.strip()] = [v.strip() for v in values.split("|")]
        if not sep or not param.strip().isidentifier() or not all(settings[param.strip()]):
            raise ValueError(f"{where}: {SUMMARY_TAG} settings read `name = value|value, ...`, not: {tag}")
    signature = body[0].replace(" (", "(")
    if not macro.endswith("_of") or "skip_runs := []::VARCHAR[]) AS TABLE" not in signature or \
            any(f"{p} :=" not in signature for p in settings):
        raise ValueError(f"{where}: {SUMMARY_TAG} marks a table macro NAME_of(<its settings> := ..., "
                         f"skip_runs := []::VARCHAR[]), not: {body[0].strip()}")
    name = macro.removesuffix("_of")
    summary = Summary(name, macro, None, settings)
    if not settings:
        doc = (f"{_doc(comments)} Kept in packs: read from the packs for the runs a current pack holds (computed "
               f"once, by `traceduck compact`), computed by `{macro}` for the others.")
        summary.view = Relation(name, doc, "view", _view_columns(comments), summary.sql().split(";\n", 1)[1])
    return summary


@dataclass
class SqlFile:
    """A file of sql/views: its SQL with each summary's generated statements right after its macro,
    and what it documents."""

    path: Path
    text: str
    relations: list[Relation]
    summaries: list[Summary]


def parse_sql_file(text: str, where: str = "sql") -> SqlFile:
    """The tables, views and summaries of a SQL file with the comment block above each one.

    Table columns are read from the column list (each preceded by `-- doc` lines); view
    columns are declared in the comment block as `-- @column name TYPE doc`.
    """
    relations: list[Relation] = []
    summaries: list[Summary] = []
    lines = text.splitlines()
    generated: dict[int, str] = {}  # after line i (0-based): the statements of a summary
    for comments, body_lines, at in _statements(text):
        m = _CREATE.match(body_lines[0].strip())
        if not m:  # a macro
            if any(c.split(None, 1)[0] == SUMMARY_TAG for c in comments if c):
                summary = _summary(comments, body_lines, where)
                summaries.append(summary)
                if summary.view is not None:
                    relations.append(summary.view)
                generated[at] = summary.sql()
            continue
        kind, name = m.group(1).lower(), m.group(2)
        rel = Relation(name=name, doc=_doc(comments), kind=kind, body="\n".join(body_lines))
        rel.columns = _table_columns(body_lines[1:]) if kind == "table" else _view_columns(comments)
        relations.append(rel)
    out = []
    for i, line in enumerate(lines):
        out.append(line)
        if i in generated:
            out.append(generated[i])
    return SqlFile(Path(where), "\n".join(out) + "\n", relations, summaries)


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
    return {r.name: r for r in parse_sql_file(text, "tables.sql").relations if r.kind == "table"}


@lru_cache(maxsize=1)
def view_files() -> list[SqlFile]:
    """The view files of sql/views in load order."""
    out = []
    for path in sorted((sql_dir() / "views").glob("*.sql")):
        parsed = parse_sql_file(path.read_text(), path.name)
        parsed.path = path
        out.append(parsed)
    return out


def summaries() -> list[Summary]:
    """Every summary of sql/views, in load order."""
    return [s for f in view_files() for s in f.summaries]


def reference_tables() -> list[Relation]:
    """The reference tables defined in sql/views (event categories, dtypes, call-site rules, ...)."""
    return [rel for f in view_files() for rel in f.relations if rel.kind == "table"]


def reference_sql() -> str:
    """sql/views/00_reference.sql: the reference tables (empty) and the macros over event names."""
    return next(f.text for f in view_files() if f.path.name == "00_reference.sql")


def documented_relations() -> dict[str, Relation]:
    """Every documented table and view: the store's tables, then the views in load order."""
    rels = dict(tables())
    for f in view_files():
        rels.update({r.name: r for r in f.relations})
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


# --- reports -------------------------------------------------------------------------------------
# A report is one SQL file of sql/reports with a header of `-- key: value` lines:
#
#     -- title: Largest tensor copies by call site
#     -- description: One line on what it answers.
#     -- empty: what an answer without rows means
#     -- param: group_by VARCHAR = name {name|shape|call_site} -- what the parameter does
#     -- param: capture RUN = -- a run selection, bound as the one run id it selects (NULL when not given)
#     -- column: call_site VARCHAR -- what the column holds
#     -- requires: one_job
#     -- per-run: true
#     SELECT ...
#
# Parameters are bound ($name), never pasted into the SQL. Reports read the runs to cover from the
# table `report_runs`. `requires: one_job` makes the runner refuse runs of several jobs, or two runs
# of one rank (see jobs.py). `per-run: true` says that each run's rows depend on that run alone (no
# other run's data, as the reports of a job do): `traceduck compact` then keeps each member run's
# rows with the default parameters in the pack.

_PARAM = re.compile(r"^(\w+)\s+(\w+)\s*=\s*(.*?)\s*(?:\{([^}]*)\})?\s*--\s*(.+)$")
_REPORT_COLUMN = re.compile(r"^(\w+)\s+(.+?)\s*--\s*(.+)$")
_TYPES = {"INTEGER": int, "BIGINT": int, "DOUBLE": float, "VARCHAR": str, "BOOLEAN": bool, "RUN": str}
REQUIREMENTS = {"one_job"}


@dataclass
class Param:
    name: str
    type: str
    default: object
    doc: str
    choices: list[str] = field(default_factory=list)

    def convert(self, text: str) -> object:
        if self.choices and text not in self.choices:
            raise ReportError(f"--param {self.name}={text!r} is not one of {', '.join(self.choices)}")
        try:
            if self.type == "BOOLEAN":
                if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError(text)
                return text.lower() in ("true", "1", "yes")
            return _TYPES[self.type](text)
        except ValueError:
            raise ReportError(f"--param {self.name}={text!r} is not a valid {self.type}") from None


@dataclass
class Report:
    """A report's SQL and its parsed header."""

    name: str
    title: str
    description: str
    params: list[Param]
    columns: list[Column]
    sql: str
    path: Path
    requires: list[str] = field(default_factory=list)  # checks before running: one_job
    empty: str = ""  # what an empty answer means (the header's `-- empty:` line), shown instead of a bare table
    per_run: bool = False  # each run's rows depend on that run alone (the header's `-- per-run: true`)

    @property
    def query(self) -> str:
        """The SQL without its trailing semicolon, to wrap in another query."""
        return self.sql.rstrip().rstrip(";")


def parse_report(path: Path) -> Report:
    """A report from its SQL file; the header is the leading `-- key: value` comment lines."""
    text = path.read_text()
    report = Report(path.stem, "", "", [], [], text, path)
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        key, _, value = line[2:].strip().partition(":")
        value = value.strip()
        if key in ("title", "description", "empty"):
            setattr(report, key, value)
        elif key == "param":
            m = _PARAM.match(value)
            if not m:
                raise ValueError(f"{path.name}: bad param line: {value}")
            name, typ, default, choices, doc = m.groups()
            default = default.strip("'\"") if typ == "VARCHAR" else default
            p = Param(name, typ, None, doc, choices.split("|") if choices else [])
            p.default = p.convert(default) if default != "" or typ == "VARCHAR" else None
            report.params.append(p)
        elif key == "column":
            m = _REPORT_COLUMN.match(value)
            if not m:
                raise ValueError(f"{path.name}: bad column line: {value}")
            report.columns.append(Column(*m.groups()))
        elif key == "per-run":
            if value not in ("true", "false"):
                raise ValueError(f"{path.name}: per-run is true or false: {value}")
            report.per_run = value == "true"
        elif key == "requires":
            report.requires += value.replace(",", " ").split()
            if not set(report.requires) <= REQUIREMENTS:
                raise ValueError(f"{path.name}: unknown requirement: {value}")
    return report


@lru_cache(maxsize=1)
def all_reports() -> dict[str, Report]:
    """Every report shipped in sql/reports, by name."""
    return {p.stem: parse_report(p) for p in sorted((sql_dir() / "reports").glob("*.sql"))}


def get_report(name: str) -> Report:
    """The report of that name; a misspelled one gets "Did you mean"."""
    reports = all_reports()
    if name not in reports:
        raise ReportError(f"no report named {name!r}", with_suggestion(f"Reports: {', '.join(reports)}", name, reports))
    return reports[name]


@lru_cache(maxsize=1)
def diff_spec() -> Report:
    """sql/diff.sql, the query of `traceduck diff`, with a report's header."""
    return parse_report(sql_dir() / "diff.sql")


def parse_params(report: Report, pairs: list[str]) -> dict[str, object]:
    """`KEY=VALUE` strings -> typed values for the report's parameters (defaults filled in)."""
    values = {p.name: p.default for p in report.params}
    known = {p.name: p for p in report.params}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep:
            raise ReportError(f"--param {pair!r} is not KEY=VALUE")
        if key not in known:
            accepted = ", ".join(known) or "none"
            raise ReportError(f"report {report.name} has no parameter {key!r}",
                              with_suggestion(f"Parameters: {accepted}", key, known))
        values[key] = known[key].convert(text)
    return values


def split_pairs(pairs: list[str], option: str = "--param") -> dict[str, str]:
    """`KEY=VALUE` strings -> {KEY: VALUE} (the last of a repeated key wins)."""
    out = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep:
            raise ReportError(f"{option} {pair!r} is not KEY=VALUE")
        out[key] = text
    return out
