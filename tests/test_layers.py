"""The package's layers, read from its own imports: each module imports only modules of lower layers
(no cycle, no import deferred into a function to reach up), the engine stays small, and the
session's variables are named in one place."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "traceduck"

# Lowest first. A module may import any module of a lower layer, none of its own layer or above.
LAYERS = [
    ["_version", "errors", "units", "dtypes", "sqltext", "ingester.frames", "ingester.repair"],
    ["store", "catalog", "session", "ingester.reader"],
    ["reference", "selection", "render", "packs", "jobs", "results", "ingester.streaming", "ingester.convert",
     "ingester.nesting"],
    ["ingester.steps"],
    ["viewfile", "ingester.pipeline", "integrity"],
    ["runs_table", "kept", "ingester"],
    ["engine"],
    ["reports", "diff", "folded", "catalog_file"],
    ["export", "compaction", "shell"],
    ["api"],
    ["spark", "cli"],
    ["__main__", "__init__"],
    ["refdocs"],  # documents the package's public names: reads the package itself
]
LAYER = {module: i for i, modules in enumerate(LAYERS) for module in modules}
ENGINE_MAX_LINES = 400


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        out[name.removesuffix(".__init__") if name != "__init__" else name] = path
    return out


def imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that `module` imports, anywhere in its file (also inside functions)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".") if package and package != "__init__" else []
            base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
            target = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                full = f"{target}.{alias.name}".lstrip(".")
                out.add(full if full in known else (target or "__init__"))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("traceduck"):
            target = node.module.removeprefix("traceduck").lstrip(".") or "__init__"
            out.add(target)
        elif isinstance(node, ast.Import):
            out |= {a.name.removeprefix("traceduck").lstrip(".") or "__init__" for a in node.names
                    if a.name.split(".")[0] == "traceduck"}
    return out - {module}


def test_every_module_has_a_layer():
    assert set(modules()) == set(LAYER), "place each new module in LAYERS (and only existing ones)"


def test_imports_run_from_a_higher_layer_to_a_lower_one():
    found = modules()
    upward = [f"{m} (layer {LAYER[m]}) imports {t} (layer {LAYER[t]})"
              for m, path in sorted(found.items()) for t in sorted(imports(m, path, set(found)))
              if t in LAYER and LAYER[t] >= LAYER[m] and not (m == "ingester" and t.startswith("ingester."))]
    assert upward == []


def test_the_check_sees_an_import_inside_a_function(tmp_path):
    """The check above reads deferred imports too: a module reaching up from inside a function."""
    path = tmp_path / "engine.py"
    path.write_text("def f():\n    from .reports import query\n    from . import api\n")
    assert imports("engine", path, set(modules())) == {"reports", "api"}


def test_nothing_imports_the_package_init():
    found = modules()
    assert [m for m, path in found.items() if LAYER[m] < LAYER["__init__"] and "__init__" in imports(m, path, set(found))] == []


def test_the_engine_is_small():
    lines = len((PACKAGE / "engine.py").read_text().splitlines())
    assert lines < ENGINE_MAX_LINES


@pytest.mark.parametrize("where", ["src", "sql"])
def test_session_variables_are_named_only_in_session_py(where):
    files = [p for p in (ROOT / where).rglob("*") if p.suffix in (".py", ".sql")]
    named = sorted(str(p.relative_to(ROOT)) for p in files if re.search(r"getvariable|SET VARIABLE", p.read_text()))
    assert named == (["src/traceduck/session.py"] if where == "src" else [])
