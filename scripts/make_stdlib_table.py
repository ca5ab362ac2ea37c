"""Write src/traceduck/stdlib_functions.txt: the Python standard library's files and the functions
each defines, read from the running interpreter's standard library with `ast`.

The profiler writes a frame's file relative to the `sys.path` entry it was found under, so the
standard library's `/usr/lib/python3.11/copy.py` is written `copy.py`, exactly like a user's own
`copy.py` next to their script. The call-site rule tells them apart by the function: a frame is
the standard library's when its file is one of these files and its function is defined there
(`sql/views/stacks.sql`, table `stdlib_functions`).

One line per file: the path relative to the standard library's directory, a tab, then the
names, space-separated. Generic code names (`<genexpr>`, `<lambda>`, `<listcomp>`, ...) are
listed where the file has them; `<module>` is not (a user's script runs as `<module>` too). Tests
and demos of the standard library itself are left out. Run `python scripts/make_stdlib_table.py`
with the Python whose standard library should be described (the file says which).
"""

from __future__ import annotations

import ast
import os
import sys
import sysconfig
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "src" / "traceduck" / "stdlib_functions.txt"
# Directories of the standard library that are its own tests and demos, not library code.
SKIP_DIRS = {"test", "tests", "idle_test", "turtledemo", "__pycache__", "site-packages", "dist-packages"}
GENERIC = {ast.Lambda: "<lambda>", ast.GeneratorExp: "<genexpr>", ast.ListComp: "<listcomp>",
           ast.DictComp: "<dictcomp>", ast.SetComp: "<setcomp>"}


def functions(source: bytes) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif type(node) in GENERIC:
            names.add(GENERIC[type(node)])
    return names


def table(root: Path) -> dict[str, set[str]]:
    top_level = set(sys.stdlib_module_names)
    out = {}
    for dirpath, dirs, files in os.walk(root):
        rel = Path(dirpath).relative_to(root)
        if rel.parts and (rel.parts[0] not in top_level or SKIP_DIRS & set(rel.parts)):
            dirs[:] = []
            continue
        for name in files:
            if not name.endswith(".py") or (not rel.parts and name[:-3] not in top_level):
                continue
            try:
                found = functions((Path(dirpath) / name).read_bytes())
            except SyntaxError:  # e.g. lib2to3's grammar test data
                continue
            if found:
                out[(rel / name).as_posix()] = found
    return out


def main() -> None:
    root = Path(sysconfig.get_paths()["stdlib"])
    rows = table(root)
    lines = [f"# Python {sys.version_info.major}.{sys.version_info.minor} standard library: file<TAB>functions"
             " (written by scripts/make_stdlib_table.py)"]
    lines += [f"{file}\t{' '.join(sorted(names))}" for file, names in sorted(rows.items())]
    OUT.write_text("\n".join(lines) + "\n")
    print(f"{OUT}: {len(rows)} files, {sum(len(v) for v in rows.values())} functions")


if __name__ == "__main__":
    main()
