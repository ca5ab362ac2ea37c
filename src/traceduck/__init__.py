"""traceduck: an embedded SQL database for PyTorch profiler (Kineto) Chrome traces.

    import traceduck
    traceduck.ingest("trace.json", store="traceduck.store")
    db = traceduck.open("traceduck.store")
    db.report("top-ops").df()
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING

from ._version import __version__  # noqa: E402
from .errors import InputError, QueryError, RunSelectionError, StoreError, TraceduckError  # noqa: E402

if TYPE_CHECKING:
    from .api import Database, check, compact, export, ingest, label, open, remove, rename, set_step_marker

# Loaded on first use, so that `import traceduck` (and `traceduck --version`) costs no DuckDB import.
_LAZY = {name: "api" for name in ("Database", "ingest", "open", "label", "rename", "remove", "compact", "check", "set_step_marker")}


class _Package(types.ModuleType):
    """`traceduck.export` is the function, although a submodule has the same name: importing the
    submodule (`from traceduck.export import Window`) would otherwise rebind the package's attribute
    to it. The submodule stays importable by its full name."""

    @property
    def export(self):  # noqa: ANN201
        from .api import export

        return export

    @export.setter
    def export(self, module: types.ModuleType) -> None:
        pass  # the import system binding the submodule; sys.modules keeps it


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> object:
    if name in _LAZY:
        from importlib import import_module

        value = getattr(import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'traceduck' has no attribute {name!r}")


__all__ = ["Database", "ingest", "open", "export", "label", "rename", "remove", "compact", "check", "set_step_marker", "TraceduckError", "InputError",
           "StoreError", "RunSelectionError", "QueryError", "__version__"]
