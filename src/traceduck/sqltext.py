"""Small helpers for writing SQL text and reading DuckDB's errors: a leaf every layer may use."""

from __future__ import annotations


def literal(text: str) -> str:
    """A SQL string literal: `it's` -> `'it''s'`."""
    return "'" + text.replace("'", "''") + "'"


def quoted(name: str) -> str:
    """A quoted SQL identifier: `my col` -> `"my col"`."""
    return '"' + name.replace('"', '""') + '"'


def first_line(text: str) -> str:
    """An error message on one line: its first two lines, joined (DuckDB puts the detail on the second)."""
    return " ".join(line.strip() for line in str(text).strip().splitlines()[:2]).strip()
