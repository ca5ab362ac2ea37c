"""`traceduck shell`: the DuckDB CLI opened on the store's catalog file."""

from __future__ import annotations

import shutil

from .catalog_file import write_catalog
from .errors import TraceduckError
from .store import Store

DUCKDB_CLI = "duckdb"


class ShellError(TraceduckError):
    """The DuckDB CLI is not installed."""


def shell_command(store: Store, extra_args: list[str] | None = None) -> list[str]:
    """Write the store's catalog and return the argv that opens the DuckDB CLI on it."""
    path = write_catalog(store)
    exe = shutil.which(DUCKDB_CLI)
    if exe is None:
        raise ShellError(
            f"the DuckDB CLI ({DUCKDB_CLI}) is not on PATH; the catalog is written at {path}",
            "Install the CLI from https://duckdb.org/docs/installation or with `pip install duckdb-cli`, "
            "or query the catalog from Python: "
            f"python -c \"import duckdb; print(duckdb.connect('{path}').sql('FROM runs'))\"")
    return [exe, str(path), *(extra_args or [])]
