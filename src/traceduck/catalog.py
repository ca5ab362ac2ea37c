"""The SQL shipped with traceduck: where it lives, the statements of each file in load order, and the
documentation in their comments (tables, views, macros, summaries, reports). The one parser of sql/.

A file of sql/views is one domain. Its first comment block may say what other files it needs,
`-- requires: stacks, steps` (file names without .sql), and files load in that order (view_files).
DuckDB splits the statements (`duckdb.extract_statements`); the comment block right above each
CREATE documents it:

- a table: its description, then a `-- doc` line above each column of its column list;
- a view: its description and a `-- @column name TYPE doc` line per column;
- a macro: its description, an `-- @arg name TYPE doc` line per parameter, and for a table macro an
  `-- @column` line per column of its result;
- columns that mean the same as another relation's (or table macro's) take their type and doc from
  there: `-- @columns-as launch_calls: run_id, event_id, name` instead of a copy of each line;
- a summary: a table macro `NAME_of(..., skip_runs := []::VARCHAR[])` whose comment block has a line
  `-- @summary`. Its rows per run are what `traceduck compact` keeps in a pack; the view NAME
  (documented by the macro's comment block) and the macro NAME_packed() are generated from it:
  NAME reads the packed runs' rows from their packs and computes the others' (see Summary.sql).
  The generator documents what it generates, and `skip_runs` (Summary.document).

The documentation reaches DuckDB's catalog (COMMENT ON, see viewfile.define), `traceduck schema` and
docs/reference/views.md; the tests hold that every view, macro, column and argument has it, and that
no `@column` line is a copy of another (tests/test_catalog.py).

Reports (sql/reports) have a header of `-- key: value` lines instead, see parse_report.
"""

from __future__ import annotations

import errno
import hashlib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from .errors import ReportError, with_suggestion
from .sqltext import first_line

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
    role: str | None = None  # a report's column: key, result or detail (see parse_report); None elsewhere


@dataclass
class Relation:
    """A table or view defined in sql/, with its documentation."""

    name: str
    doc: str
    kind: str  # "table" or "view"
    columns: list[Column] = field(default_factory=list)
    body: str = ""  # the CREATE statement


@dataclass
class Macro:
    """A macro of sql/views: scalar (an expression) or table (a query), with its documentation."""

    name: str
    params: list[str]
    defaults: dict[str, str]  # parameter -> default value (SQL text)
    body: str  # the expression or query after AS [TABLE]
    is_table: bool
    doc: str = ""
    args: list[Column] = field(default_factory=list)  # the @arg lines, in order
    columns: list[Column] = field(default_factory=list)  # a table macro's @column lines

    @property
    def kind(self) -> str:
        return "table macro" if self.is_table else "macro"

    @property
    def signature(self) -> str:
        """How it is called: `name(param, param := default, ...)`."""
        params = (f"{p} := {self.defaults[p]}" if p in self.defaults else p for p in self.params)
        return f"{self.name}({', '.join(params)})"


@dataclass
class Statement:
    """A CREATE statement of a SQL file and the comment block right above it (`--` stripped)."""

    comments: list[str]
    sql: str  # from CREATE to the semicolon


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

    def document(self, of: Macro) -> list[Macro]:
        """Document NAME_of's `skip_runs` (unless its comment block does), and the macros generated
        over it from its documentation: NAME_packed(), and NAME itself when the summary has settings
        (without, NAME is the view)."""
        if not any(a.name == "skip_runs" for a in of.args):
            of.args.append(Column("skip_runs", "VARCHAR[]", "Runs to leave out: those whose rows the packs hold "
                                                            "(`summarized_runs()`)."))
        args = {a.name: a for a in of.args}
        settings = [Column(f"setting_{p}", args[p].type if p in args else "",
                           f"The `{p}` these rows were computed with.") for p in self.settings]
        packed_doc = (f"The rows of `{self.name}` for the runs whose packs this connection reads, as `traceduck "
                      f"compact` computed them{' for every combination of the settings' if self.settings else ''}; "
                      f"none where it reads no pack. Read by `{self.name}`.")
        out = [Macro(self.packed, [], {}, "", True, packed_doc, [], settings + of.columns)]
        if self.settings:
            defaults = {p: values[0] for p, values in self.settings.items()}
            out.append(Macro(self.name, list(self.settings), defaults, "", True, _kept_in_packs(of.doc, self.macro),
                             [args.get(p, Column(p, "", "")) for p in self.settings], of.columns))
        return out

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
        """The statements generated: NAME_packed(), with no rows here (the view file makes it
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
_MACRO = re.compile(r"^CREATE\s+(?:OR\s+REPLACE\s+)?MACRO\s+(\w+)\s*\((.*?)\)\s+AS\s+(TABLE\s+)?(.*)$", re.S | re.I)
_COLUMN_DEF = re.compile(r"^\s*(\w+)\s+([A-Z][A-Z0-9_(), \[\]]*?)\s*,?\s*$")
SUMMARY_TAG = "@summary"
_TAGS = ("@column", "@columns-as", "@arg", SUMMARY_TAG)


_PARSER: list[duckdb.DuckDBPyConnection] = []  # a connection to split statements with (parse_with)


def parse_with(con: duckdb.DuckDBPyConnection | None) -> None:
    """Split SQL text with `con` (None: DuckDB's default connection): an engine lends a cursor of its
    own, so that a command never pays for the default connection's database (about as much as
    `duckdb.connect()`) only to split the text of sql/tables.sql."""
    _PARSER[:] = [con] if con is not None else []


def _split(text: str) -> list:
    for con in list(_PARSER):
        try:
            return con.extract_statements(text)
        except duckdb.ConnectionException:  # closed meanwhile
            break
    return duckdb.extract_statements(text)


def statements(text: str) -> list[Statement]:
    """The CREATE statements of a SQL file, as DuckDB splits them, each with its comment block."""
    out = []
    for st in _split(text):
        lines = st.query.splitlines()
        start = next((i for i, line in enumerate(lines) if line.strip() and not line.strip().startswith("--")), None)
        if start is None or not lines[start].strip().upper().startswith("CREATE"):
            continue
        block: list[str] = []
        for line in reversed(lines[:start]):  # the comments right above: a blank line ends the block
            if not line.strip().startswith("--"):
                break
            block.insert(0, line.strip()[2:].strip())
        out.append(Statement(block, "\n".join(lines[start:]).strip()))
    return out


def sql_statements(text: str) -> list[tuple[list[str], list[str]]]:
    """Each CREATE statement of a SQL file with its comment block: (comment lines, statement lines)."""
    return [(st.comments, st.sql.splitlines()) for st in statements(text)]


def _tagged(comments: list[str], tag: str) -> list[str]:
    """The text after `tag` of the comment lines that start with it."""
    return [c[len(tag):].strip() for c in comments if c.split(None, 1)[:1] == [tag]]


def _columns(lines: list[str]) -> list[Column]:
    """`name TYPE doc` lines as columns."""
    out = []
    for line in lines:
        parts = line.split(None, 2)
        out.append(Column(parts[0], parts[1] if len(parts) > 1 else "", parts[2] if len(parts) > 2 else ""))
    return out


def _doc(comments: list[str]) -> str:
    return " ".join(c for c in comments if c.split(None, 1)[:1] not in ([t] for t in _TAGS)).strip()


def _header(text: str) -> list[str]:
    """The file's first comment block (before any statement and the first blank line), `--` stripped."""
    out = []
    for line in text.splitlines():
        if not line.strip().startswith("--"):
            break
        out.append(line.strip()[2:].strip())
    return out


def _summary(comments: list[str], sql: str, where: str) -> Summary:
    m = _MACRO.match(sql)
    macro = m.group(1) if m else ""
    settings: dict[str, list[str]] = {}
    for item in filter(None, (i.strip() for i in _tagged(comments, SUMMARY_TAG)[0].split(","))):
        param, sep, values = item.partition("=")
        settings[param.strip()] = [v.strip() for v in values.split("|")]
        if not sep or not param.strip().isidentifier() or not all(settings[param.strip()]):
            raise ValueError(f"{where}: {SUMMARY_TAG} settings read `name = value|value, ...`, not: {item}")
    signature = sql.split(" AS ", 1)[0]
    if not macro.endswith("_of") or "skip_runs := []::VARCHAR[])" not in signature or \
            any(f"{p} :=" not in signature for p in settings):
        raise ValueError(f"{where}: {SUMMARY_TAG} marks a table macro NAME_of(<its settings> := ..., "
                         f"skip_runs := []::VARCHAR[]), not: {sql.splitlines()[0]}")
    name = macro.removesuffix("_of")
    summary = Summary(name, macro, None, settings)
    if not settings:
        summary.view = Relation(name, _kept_in_packs(_doc(comments), macro), "view", [], summary.sql().split(";\n", 1)[1])
    return summary


def _kept_in_packs(doc: str, macro: str) -> str:
    """The documentation of what a summary generates over `macro`, from the macro's."""
    return (f"{doc} Kept in packs: read from the packs for the runs a current pack holds (computed once, by "
            f"`traceduck compact`), computed by `{macro}` for the others.")


def _macro(comments: list[str], sql: str) -> Macro:
    m = _MACRO.match(sql.rstrip().rstrip(";"))
    name, params_text, table, body = m.groups()
    params, defaults = [], {}
    for p in (p.strip() for p in params_text.split(",") if p.strip()):
        key, sep, default = p.partition(":=")
        params.append(key.strip())
        if sep:
            defaults[key.strip()] = default.strip()
    return Macro(name, params, defaults, body.strip(), bool(table), _doc(comments), _columns(_tagged(comments, "@arg")))


@dataclass
class SqlFile:
    """A file of sql/views: its SQL with each summary's generated statements right after its macro,
    what it needs and what it defines."""

    path: Path
    text: str
    relations: list[Relation]
    summaries: list[Summary]
    macros: list[Macro] = field(default_factory=list)
    requires: list[str] = field(default_factory=list)  # the files it needs, by name without .sql

    @property
    def name(self) -> str:
        return self.path.stem


def parse_sql_file(text: str, where: str = "sql") -> SqlFile:
    """What a SQL file defines and documents (see the module docstring); `@columns-as` references
    are left to resolve (resolve_columns) once every file is read."""
    out = SqlFile(Path(where), "", [], [], requires=[r.strip() for line in _tagged(_header(text), "requires:")
                                                      for r in line.split(",") if r.strip()])
    pieces = []
    for st in statements(text):
        pieces.append(f"{_block(st.comments)}{st.sql}")
        m = _CREATE.match(st.sql)
        if m:
            kind, name = m.group(1).lower(), m.group(2)
            rel = Relation(name=name, doc=_doc(st.comments), kind=kind, body=st.sql)
            rel.columns = _table_columns(st.sql.splitlines()[1:]) if kind == "table" else _column_refs(st.comments)
            out.relations.append(rel)
            continue
        macro = _macro(st.comments, st.sql)
        macro.columns = _column_refs(st.comments)
        out.macros.append(macro)
        if _tagged(st.comments, SUMMARY_TAG):
            summary = _summary(st.comments, st.sql, where)
            out.summaries.append(summary)
            if summary.view is not None:
                summary.view.columns = macro.columns
                out.relations.append(summary.view)
            out.macros += summary.document(macro)
            pieces.append(summary.sql())
    out.text = "\n\n".join(pieces) + "\n"
    return out


def _block(comments: list[str]) -> str:
    return "".join(f"-- {c}\n" for c in comments)


@dataclass
class _ColumnsAs:
    """Columns to copy from another relation: `-- @columns-as NAME: a, b, c`."""

    source: str
    names: list[str]


def _column_refs(comments: list[str]) -> list:
    """The @column and @columns-as lines of a comment block, in order."""
    out: list = []
    for c in comments:
        tag = c.split(None, 1)[:1]
        if tag == ["@column"]:
            out += _columns([c[len("@column"):].strip()])
        elif tag == ["@columns-as"]:
            source, _, names = c[len("@columns-as"):].partition(":")
            out.append(_ColumnsAs(source.strip(), [n.strip() for n in names.split(",") if n.strip()]))
    return out


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


def missing_columns(con: duckdb.DuckDBPyConnection, run_dir: Path) -> str:
    """What a run's files (in `run_dir`) lack of this version's tables, e.g. 'events lacks
    is_cpu_op', or ''. FileNotFoundError for a file not there; OSError for one DuckDB cannot read."""
    out = []
    for table, rel in tables().items():
        path = run_dir / f"{table}.parquet"
        if not path.is_file():
            raise FileNotFoundError(errno.ENOENT, "no such file", str(path))
        try:
            have = {name for (name,) in con.execute("SELECT name FROM parquet_schema(?)", [str(path)]).fetchall()}
        except duckdb.Error as e:
            raise OSError(f"cannot read {path}: {first_line(str(e))}") from None
        lacking = [c.name for c in rel.columns if c.name not in have]
        if lacking:
            out.append(f"{table} lacks {', '.join(lacking)}")
    return "; ".join(out)


@lru_cache(maxsize=1)
def view_files() -> list[SqlFile]:
    """The files of sql/views in load order (see load_views)."""
    return load_views(sql_dir() / "views")


def load_views(directory: Path) -> list[SqlFile]:
    """The SQL files of a directory in load order: each after the files it requires, else by name.
    ValueError when a file requires one that is not there, or files require each other."""
    files = {}
    for path in sorted(directory.glob("*.sql")):
        parsed = parse_sql_file(path.read_text(), path.name)
        parsed.path = path
        files[parsed.name] = parsed
    ordered: list[SqlFile] = []
    visiting: list[str] = []

    def visit(name: str, needed_by: str) -> None:
        if name not in files:
            raise ValueError(f"sql/views/{needed_by}.sql requires {name!r}, which is no file of sql/views")
        if name in visiting:
            raise ValueError(f"sql/views: files require each other: {' -> '.join(visiting + [name])}")
        if any(f.name == name for f in ordered):
            return
        visiting.append(name)
        for required in files[name].requires:
            visit(required, name)
        visiting.pop()
        ordered.append(files[name])

    for name in files:
        visit(name, name)
    _resolve_columns(ordered)
    return ordered


def _resolve_columns(files: list[SqlFile]) -> None:
    """Replace each `@columns-as` reference by the columns it names (a relation's of sql/, or a
    table macro's), in order."""
    known: dict[str, list] = {name: rel.columns for name, rel in tables().items()}
    for f in files:
        known.update({rel.name: rel.columns for rel in f.relations})
        known.update({m.name: m.columns for m in f.macros if m.is_table})

    def resolve(name: str, seen: tuple[str, ...] = ()) -> list[Column]:
        if name in seen:
            raise ValueError(f"sql/views: @columns-as refers in a circle: {' -> '.join(seen + (name,))}")
        out = []
        for item in known[name]:
            if isinstance(item, Column):
                out.append(item)
                continue
            if item.source not in known:
                raise ValueError(f"{name}: @columns-as {item.source}: no relation or table macro of that name")
            source = {c.name: c for c in resolve(item.source, seen + (name,))}
            missing = [n for n in item.names if n not in source]
            if missing:
                raise ValueError(f"{name}: @columns-as {item.source}: it has no column {', '.join(missing)}")
            out += [source[n] for n in item.names]
        known[name] = out
        return out

    for f in files:
        for rel in f.relations:
            rel.columns = resolve(rel.name)
        for m in f.macros:
            if m.is_table:
                m.columns = resolve(m.name)


def summaries() -> list[Summary]:
    """Every summary of sql/views, in load order."""
    return [s for f in view_files() for s in f.summaries]


@lru_cache(maxsize=1)
def macros() -> dict[str, Macro]:
    """Every macro of sql/views (those summaries generate included), by name (lower case), in load order."""
    return {m.name.lower(): m for f in view_files() for m in f.macros}


def reference_tables() -> list[Relation]:
    """The reference tables defined in sql/views (event categories, dtypes, call-site rules, ...)."""
    return [rel for f in view_files() for rel in f.relations if rel.kind == "table"]


def reference_sql() -> str:
    """The SQL that defines the reference tables (empty) and the macros over event names: what ingest loads."""
    return next(f.text for f in view_files() if f.name == "reference")


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
#     -- column: call_site VARCHAR [key] -- what the column holds
#     -- requires: one_job
#     -- per-run: true
#     SELECT ...
#
# A column's role says what the table format may do with it on a terminal too narrow for every
# column (render.py): `key` tells the rows apart (a call site, a shape, a name) and `result` is the
# answer (a time, a size, a status): both always stay; `detail` is left out first, and named below
# the table. A column without a role is kept while the table fits with long text wrapped, and left
# out from the right when it does not, as every column of `traceduck sql` is (ROLES).
#
# Parameters are bound ($name), never pasted into the SQL. Reports read the runs to cover from the
# table `report_runs`. `requires: one_job` makes the runner refuse runs of several jobs, or two runs
# of one rank (see jobs.py). `per-run: true` says that each run's rows depend on that run alone (no
# other run's data, as the reports of a job do): `traceduck compact` then keeps each member run's
# rows with the default parameters in the pack.

_PARAM = re.compile(r"^(\w+)\s+(\w+)\s*=\s*(.*?)\s*(?:\{([^}]*)\})?\s*--\s*(.+)$")
_REPORT_COLUMN = re.compile(r"^(\w+)\s+(.+?)(?:\s+\[(\w+)\])?\s*--\s*(.+)$")
ROLES = ("key", "result", "detail")
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
            name, typ, role, doc = m.groups()
            if role is not None and role not in ROLES:
                raise ValueError(f"{path.name}: column {name}: role [{role}] is not one of {', '.join(ROLES)}")
            report.columns.append(Column(name, typ, doc, role))
        elif key == "per-run":
            if value not in ("true", "false"):
                raise ValueError(f"{path.name}: per-run is true or false: {value}")
            report.per_run = value == "true"
        elif key == "requires":
            report.requires += value.replace(",", " ").split()
            if not set(report.requires) <= REQUIREMENTS:
                raise ValueError(f"{path.name}: unknown requirement: {value}")
    return report


@lru_cache(maxsize=None)
def _report(name: str) -> Report:
    return parse_report(sql_dir() / "reports" / f"{name}.sql")


@lru_cache(maxsize=1)
def all_reports() -> dict[str, Report]:
    """Every report shipped in sql/reports, by name."""
    return {p.stem: _report(p.stem) for p in sorted((sql_dir() / "reports").glob("*.sql"))}


def get_report(name: str) -> Report:
    """The report of that name; a misspelled one gets "Did you mean". Reads only its own file (a
    command runs one report: parsing all of them is a tenth of its planning on a small store)."""
    if re.fullmatch(r"[a-z0-9][a-z0-9-]*", name) and (sql_dir() / "reports" / f"{name}.sql").is_file():
        return _report(name)
    reports = all_reports()
    raise ReportError(f"no report named {name!r}", with_suggestion(f"Reports: {', '.join(reports)}", name, reports))


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
