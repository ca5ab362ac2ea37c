"""Narrow error types. Each carries a one-line message and a hint; the CLI prints them."""

from __future__ import annotations


class TraceduckError(Exception):
    """Base class: a user-facing error with a one-line message and an optional hint."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message, hint)  # both in args, so the error survives pickling between processes
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.one_line()

    def one_line(self) -> str:
        text = self.message.rstrip(".") + "."
        if self.hint:
            text += " " + self.hint.rstrip(".") + "."
        return " ".join(text.split("\n"))


class InputError(TraceduckError):
    """The file given to ingest is missing, unreadable, not JSON, or not a trace."""


class NotATrace(InputError):
    """The file is JSON but not a trace: no traceEvents list, or a top-level array whose first
    item is not an event. Ingesting a directory skips such files; a file named alone is an error."""

    HINT = "A PyTorch profiler trace is a JSON object with a traceEvents list"

    def __init__(self, path: object, reason: str, hint: str = HINT) -> None:
        super().__init__(f"{path}: not a trace ({reason})", hint)
        self.args = (path, reason, hint)  # what pickling between processes rebuilds it from
        self.reason = reason


class StoreError(TraceduckError):
    """The store directory cannot be used."""


class RunSelectionError(TraceduckError):
    """A run selection matches no run, or is ambiguous."""


class QueryError(TraceduckError):
    """A SQL query failed."""


class ExportError(TraceduckError):
    """Export options conflict, or the window (step, time range) or stacks asked for select nothing."""
