"""Narrow error types. Each carries a one-line message and a hint; the CLI prints them."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class TraceduckError(Exception):
    """Base class: a user-facing error with a one-line message and an optional hint."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message, hint)  # both in args, so the error survives pickling between processes
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.one_line()

    def one_line(self) -> str:
        text = _sentence(self.message)
        if self.hint:
            text += " " + _sentence(self.hint)
        return " ".join(text.split("\n"))


def _sentence(text: str) -> str:
    text = text.rstrip(".")
    return text if text.endswith(("?", "!")) else text + "."


def did_you_mean(word: str, choices: Iterable[str], quote: str = "'") -> str:
    """`Did you mean 'x'?` (up to three close matches), or "" when nothing is close."""
    close = difflib.get_close_matches(word, list(dict.fromkeys(choices)), n=3, cutoff=0.6)
    if not close:
        return ""
    return "Did you mean " + " or ".join(f"{quote}{c}{quote}" for c in close) + "?"


def with_suggestion(hint: str, word: str, choices: Iterable[str]) -> str:
    """A hint led by `Did you mean ...?` when a choice is close to the word."""
    return " ".join(p for p in (did_you_mean(word, choices), hint) if p)


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


NO_SPACE_HINT = ("Free space on that file system, then run the command again: what failed left the store as it "
                 "was, and the next command removes what it wrote")
IO_HINT = ("Check the disk (the system log says more), then run the command again: what failed left the store "
           "as it was; `traceduck check` verifies its files")


def os_error_hint(e: OSError) -> str:
    """What to do about an error of the file system (no space, an I/O error)."""
    import errno

    return NO_SPACE_HINT if e.errno in (errno.ENOSPC, errno.EDQUOT) else IO_HINT


def os_error_text(e: OSError) -> str:
    """`No space left on device: PATH` (the first path of the call, where it has one)."""
    what = e.strerror or str(e) or type(e).__name__
    return f"{what}: {e.filename}" if e.filename else what


class RunSelectionError(TraceduckError):
    """A run selection matches no run, or is ambiguous."""


class QueryError(TraceduckError):
    """A SQL query failed."""


class ExportError(TraceduckError):
    """Export options conflict, or the window (step, time range) or stacks asked for select nothing."""


class JobSelectionError(RunSelectionError):
    """A report that covers one job got runs of several jobs, or two runs of one rank."""


class NotPortableError(QueryError):
    """A view or report of sql/ that cannot be written in another engine's SQL (Spark), with why."""


class ReportError(TraceduckError):
    """A report name or parameter is wrong."""
