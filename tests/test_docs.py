"""The reference docs in docs/reference: current, complete, and what the command line really prints."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from traceduck.refdocs import stale_files

from conftest import ROOT

REFERENCE = ROOT / "docs" / "reference"
GEN_DOCS = ROOT / "scripts" / "gen_docs.py"


def td_help(*args: str) -> str:
    """`traceduck ... --help` as a user sees it on a terminal of 80 columns."""
    env = {**os.environ, "COLUMNS": "80"}
    p = subprocess.run([sys.executable, "-m", "traceduck", *args, "--help"], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    return p.stdout


def help_block(markdown: str, title: str) -> str:
    """The fenced text under the heading `title` of commands.md."""
    m = re.search(r"^#+ `" + re.escape(title) + r"`\n\n```text\n(.*?)\n```$", markdown, re.S | re.M)
    assert m, f"no section {title!r}"
    return m.group(1)


def section(markdown: str, name: str) -> str:
    """The text of the `## name` section, up to the next `## ` heading."""
    m = re.search(r"^## " + re.escape(name) + r"\n(.*?)(?=^## |\Z)", markdown, re.S | re.M)
    assert m, f"no section {name!r}"
    return m.group(1)


def test_reference_docs_are_current():
    assert stale_files(REFERENCE) == [], "docs/reference is stale: run python scripts/gen_docs.py"


def test_every_command_appears_with_its_real_help():
    top = td_help()
    listed = top.split("\nCommands:\n", 1)[1]
    commands = [line.split()[0] for line in listed.splitlines() if line.strip()]
    assert {"ingest", "sql", "report", "catalog", "shell", "export"} <= set(commands)
    text = (REFERENCE / "commands.md").read_text()
    assert help_block(text, "traceduck --help") == top.rstrip()
    for command in commands:
        help_block(text, f"traceduck {command} --help")
    assert help_block(text, "traceduck ingest --help") == td_help("ingest").rstrip()
    assert help_block(text, "traceduck report top-ops --help") == td_help("report", "top-ops").rstrip()


def test_every_report_appears_with_title_params_and_columns():
    reports_md = (REFERENCE / "reports.md").read_text()
    commands_md = (REFERENCE / "commands.md").read_text()
    files = sorted((ROOT / "sql" / "reports").glob("*.sql"))
    assert len(files) >= 10
    for path in files:
        header = [line[2:].strip() for line in path.read_text().splitlines() if line.startswith("--")]
        title = next(h for h in header if h.startswith("title:"))[len("title:"):].strip()
        text = section(reports_md, path.stem)
        assert f"**{title}**" in text, path.stem
        for h in header:
            if h.startswith(("param:", "column:")):
                name = h.split(":", 1)[1].split()[0]
                assert f"| `{name}` |" in text, f"{path.stem}: {name}"
        help_block(commands_md, f"traceduck report {path.stem} --help")


def test_every_table_and_view_appears_with_duckdb_column_types():
    # The SQL files loaded into a fresh DuckDB connection (with the session macros and each summary's
    # generated view, as traceduck loads them): the relations and types any client sees.
    from traceduck import session
    from traceduck.catalog import view_files

    con = duckdb.connect()
    con.execute(session.macros_sql())
    con.execute((ROOT / "sql" / "tables.sql").read_text())
    for f in view_files():
        con.execute(f.text)
    names = [r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE NOT internal AND NOT temporary "
        "UNION ALL SELECT view_name FROM duckdb_views() WHERE NOT internal AND NOT temporary").fetchall()]
    assert {"runs", "events", "args", "shapes", "stacks", "cpu_ops", "gpu_kernels", "tensor_copies"} <= set(names)
    text = (REFERENCE / "views.md").read_text()
    for name in names:
        body = section(text, name)
        for column, type_, *_ in con.execute(f"DESCRIBE {name}").fetchall():
            assert f"| `{column}` | {type_} |" in body, f"{name}.{column}"
    con.close()


def top_level_split(params: str) -> list[str]:
    """'a: dict[str, int], b=1' -> ['a: dict[str, int]', 'b=1']: split at commas outside brackets."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(params):
        depth += ch in "[("
        depth -= ch in "])"
        if ch == "," and depth == 0:
            out.append(params[start:i].strip())
            start = i + 1
    return out + [params[start:].strip()] if params.strip() else out


def test_python_reference_documents_every_public_function_and_method():
    import inspect

    import traceduck
    from traceduck.api import Database
    from traceduck.refdocs import python_md

    text = python_md()  # the committed file equals it (test_reference_docs_are_current)
    functions = {f"traceduck.{name}": getattr(traceduck, name) for name in ("open", "ingest", "export")}
    methods = {f"Database.{name}": f for name, f in vars(Database).items() if callable(f) and not name.startswith("_")}
    assert {"Database.sql", "Database.report", "Database.diff", "Database.export", "Database.runs"} <= set(methods)
    for title, func in {**functions, **methods}.items():
        body = section(text, f"`{title}`")
        declared = re.search(r"```python\n(\w+)\((.*)\)(?: -> .*)?\n```", body)
        assert declared and declared.group(1) == func.__name__, title
        names = [p.name for p in inspect.signature(func).parameters.values() if p.name != "self"]
        assert [re.match(r"\**(\w+)", param).group(1) for param in top_level_split(declared.group(2))
                if param != "/"] == names, title
        assert inspect.getdoc(func).splitlines()[0] in body, title
    for error in ("TraceduckError", "InputError", "StoreError", "RunSelectionError", "QueryError", "ReportError"):
        assert f".{error}` |" in text


def run_gen_docs(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(GEN_DOCS), *args], capture_output=True, text=True)


@pytest.mark.slow
def test_gen_docs_check_and_write(tmp_path: Path):
    out = tmp_path / "reference"
    p = run_gen_docs("--check", "--out", str(out))
    assert p.returncode == 1
    assert p.stderr == f"{out} is stale (commands.md, python.md, reports.md, views.md): run python scripts/gen_docs.py\n"
    p = run_gen_docs("--out", str(out))
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"{out}: commands.md, python.md, reports.md, views.md updated\n"
    assert sorted(f.name for f in out.iterdir()) == ["commands.md", "python.md", "reports.md", "views.md"]
    assert run_gen_docs("--check", "--out", str(out)).returncode == 0
    views = out / "views.md"
    views.write_text(views.read_text().replace("| `run_id` |", "| `runid` |", 1))
    (out / "old.md").write_text("# a page no longer generated\n")
    p = run_gen_docs("--check", "--out", str(out))
    assert p.returncode == 1
    assert p.stderr == f"{out} is stale (views.md, old.md): run python scripts/gen_docs.py\n"
    p = run_gen_docs("--out", str(out))
    assert p.stdout == f"{out}: views.md, old.md updated\n"
    assert not (out / "old.md").exists() and "| `run_id` |" in views.read_text()


def test_ci_runs_the_readmes_test_command():
    readme = (ROOT / "README.md").read_text()
    m = re.search(r"^Run the tests .*?^```sh\n(.+?)\n```$", readme, re.S | re.M)
    assert m, "no test command in the README"
    command = m.group(1)
    assert "pip install '.[test-all]'" in command and command.endswith("-m pytest")
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert command in ci and "export CI=true" in ci


def test_test_all_installs_what_every_test_imports():
    """Tests import Spark, the notebook stack, pandas and polars through conftest.require (they skip
    without them, but fail under CI=true): the `test-all` extra CI installs has each; `test` none
    of the heavy ones."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]

    def packages(extra: str) -> set[str]:
        out = set()
        for req in extras[extra]:
            name = re.match(r"[\w.-]+", req).group(0)
            inner = re.fullmatch(r"traceduck\[(.+)\]", req)
            out |= set().union(*(packages(e) for e in inner.group(1).split(","))) if inner else {name.lower()}
        return out

    code = "\n".join(p.read_text() for p in (ROOT / "tests").glob("*.py"))
    required = set(re.findall(r"""\brequire\(["'](\w+)["']""", code)) | {"pyspark"}  # pyspark: test_spark's session
    assert {"nbformat", "nbclient", "pandas", "polars"} <= required
    assert required <= packages("test-all")
    assert not packages("test") & {"pyspark", "pandas", "polars", "matplotlib", "nbclient", "ipykernel"}
