"""Run selection: which runs a user's words pick, as pure functions over run rows.

A run row is a dict with at least `run_id`, `name`, `labels` (a dict, or the (key, value) pairs a
Parquet map reads as) and `rank`: a row of the `runs` view, or of `Store.run_rows`. Nothing here
reads files or needs DuckDB, so `label`, `rename` and `rm` select runs without opening a database.

A selection is a run id, a unique run id prefix, a run name, a shell-style pattern on names
(`worker*`, `rank[0-3]`), `label:KEY=VALUE` or `rank:N`; or several of these joined by commas,
selecting the runs that match every one (`label:job=run42,rank:0`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable

from .errors import RunSelectionError, with_suggestion
from .store import short_id

LISTED = 10  # runs or labels named in an error before "and N more"
COLUMNS = ("run_id", "name", "labels", "rank")  # what a selection reads of a run row
_PATTERN_CHARS = ("*", "?", "[")


def labels_of(run: dict) -> dict[str, str]:
    """A run row's labels as a dict, whether read as a map (a dict) or as (key, value) pairs."""
    labels = run.get("labels") or {}
    return labels if isinstance(labels, dict) else dict(labels)


def select(runs: list[dict], selection: str) -> list[str]:
    """Run ids of `runs` that a selection picks (see the module docstring), in the order of `runs`.
    A run whose whole name or id is the selection is that run, even with commas or pattern
    characters in its name."""
    whole = [r["run_id"] for r in runs if r["run_id"] == selection] or \
            [r["run_id"] for r in runs if r["name"] == selection]
    if len(whole) == 1:
        return whole
    terms = selection.split(",")
    if len(terms) > 1 and not all(terms):
        raise RunSelectionError(f"{selection!r} has an empty term",
                                "Join terms with single commas, like label:job=run42,rank:0")
    found = runs
    for term in terms:
        if _is_filter(term):
            matched = {r["run_id"] for r in _filter(runs, term)}
            found = [r for r in found if r["run_id"] in matched]
    for term in terms:
        if not _is_filter(term):
            found = _plain(runs, found, term)
    if not found:  # every term matches some run, but no run matches them all
        counts = [(t, len(_filter(runs, t)) if _is_filter(t) else
                   sum(r["run_id"].startswith(t) or r["name"] == t for r in runs)) for t in terms]
        raise RunSelectionError(f"no run matches every term of {selection!r}",
                                "; ".join(f"{t} matches {n} run{'s' * (n != 1)}" for t, n in counts))
    return [r["run_id"] for r in found]


def resolve(runs: list[dict], selection: str) -> str:
    """Exactly one run id from a selection (see select)."""
    found = select(runs, selection)
    if len(found) != 1:
        raise RunSelectionError(f"{selection!r} matches {len(found)} runs: {', '.join(short_id(f) for f in found[:10])}",
                                "Select a single run here")
    return found[0]


def by_name(runs: list[dict]) -> list[dict]:
    """The runs by name, then run id: how they are listed, and the order of a report over all of them.
    Run ids are hashes: ordering by them alone would shuffle runs."""
    return sorted(runs, key=lambda r: (r["name"] or "", r["run_id"]))


def in_order(runs: list[dict], selections: Iterable[str] | None = None) -> list[str]:
    """The run ids the selections pick, each once, in the order of the selections given (a selection
    matching several runs, such as a label, lists them by name, then id); every run by name, then
    id, when there is no selection. This is the order of a report's rows."""
    listed = by_name(runs)
    if not selections:
        return [r["run_id"] for r in listed]
    ids = [run_id for sel in selections for run_id in select(listed, sel)]
    return list(dict.fromkeys(ids))


def picked(runs: list[dict], selections: str | Iterable[str]) -> list[dict]:
    """The run rows any of the selections picks, each once, by name."""
    if isinstance(selections, str):
        selections = [selections]
    wanted = {run_id for sel in selections for run_id in select(runs, sel)}
    return [r for r in by_name(runs) if r["run_id"] in wanted]


def _is_filter(term: str) -> bool:
    """A term that may select several runs (as opposed to a run id, prefix or name)."""
    return term.startswith(("label:", "rank:")) or any(c in term for c in _PATTERN_CHARS)


def _listed(runs: list[dict]) -> str:
    shown = ", ".join(f"{short_id(r['run_id'])} ({r['name']})" for r in runs[:LISTED]) or "none"
    more = len(runs) - LISTED
    return shown + (f" and {more:,} more (`traceduck runs` lists them)" if more > 0 else "")


def _filter(runs: list[dict], term: str) -> list[dict]:
    """The runs a `label:`, `rank:` or name-pattern term selects; never empty."""
    if term.startswith("label:"):
        key, sep, value = term[len("label:"):].partition("=")
        if not sep or not key:
            raise RunSelectionError(f"{term!r} is not label:KEY=VALUE", "Select runs like label:job=run42")
        found = [r for r in runs if labels_of(r).get(key) == value]
        if not found:
            labels = sorted({f"{k}={v}" for r in runs for k, v in labels_of(r).items()})
            listed = ", ".join(labels[:LISTED]) or "none"
            if len(labels) > LISTED:
                listed += f" and {len(labels) - LISTED:,} more"
            raise RunSelectionError(f"no run has label {key}={value}", f"Labels in the store: {listed}")
        return found
    if term.startswith("rank:"):
        text = term[len("rank:"):]
        if not text.isdigit():
            raise RunSelectionError(f"{term!r} is not rank:N", "Select a rank like rank:0")
        found = [r for r in runs if r["rank"] == int(text)]
        if not found:
            ranks = sorted({r["rank"] for r in runs if r["rank"] is not None})
            raise RunSelectionError(f"no run has rank {int(text)}",
                                    f"Ranks in the store: {', '.join(map(str, ranks))}" if ranks else
                                    "No run has a rank: it comes from distributedInfo, else the file name (rank3, worker3)")
        return found
    found = [r for r in runs if fnmatch.fnmatchcase(r["name"], term)]
    if not found:
        raise RunSelectionError(f"no run name matches {term!r}", f"Runs in the store: {_listed(runs)}")
    return found


def _plain(runs: list[dict], among: list[dict], term: str) -> list[dict]:
    """The one run of `among` a run id, unique run id prefix or name selects (checked against every
    run first, so that a term matching no run at all says so)."""
    if not any(r["run_id"].startswith(term) or r["name"] == term for r in runs):
        raise RunSelectionError(f"no run matches {term!r}",
                                with_suggestion(f"Runs in the store: {_listed(runs)}", term, (r["name"] for r in runs)))
    exact = [r for r in among if r["run_id"] == term]
    if exact:
        return exact
    by_name_ = [r for r in among if r["name"] == term]
    matches = by_name_ or [r for r in among if r["run_id"].startswith(term)]
    if len(matches) > 1:
        listed = ", ".join(f"{r['run_id']} ({r['name']})" for r in matches[:LISTED])
        raise RunSelectionError(f"{term!r} matches {len(matches)} runs: {listed}",
                                "Use a run id or a longer run id prefix")
    return matches
