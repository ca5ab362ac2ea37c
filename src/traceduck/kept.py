"""Report rows kept beside a run: what a report computed for one run with its default parameters,
read instead of computed again by later calls (reports.py decides when; this is where and how), and
the rows of a comparison of two runs, kept beside run B (diff.py: report `diff`, its variant naming
run A, A's files and the parameters).

    STORE/runs/<run_id>/derived/<summaries key>-<stamp>/report-<name>[.<variant>].<digest>.parquet

Derived, re-creatable data, written on a report's first use (ingest does not pay for it):

- <summaries key>: viewfile.summaries_key (traceduck's version, the SQL of the views and reports,
  the reference data): another version, or changed SQL, never reads them;
- <stamp>: the identity (inode, mtime, size) of the run's events.parquet when they were found
  missing: a run replaced (`ingest --force`, `step-marker`) has a new directory without them, and
  rows computed meanwhile from the old files land under the old stamp, never read;
- <variant>: only for a report that compares a job's ranks (kept for a selection of that one run):
  a hash of the run's row in `runs` (its name, labels): a rename or label computes them again.
  A per-run report's rows are kept without run_name, which comes from `runs` when read (as from a
  pack), so a rename shows;
- <digest>: xxh3-128 of the file's bytes, checked before every read: a damaged file (cut, a bit
  flipped) is removed and computed again, never read.

A file is written under a temporary name in the same directory and renamed into place, so a reader
never sees half of one. Writing is best effort: a store that cannot be written (read-only, full, an
I/O error) leaves the report computed as before. `rm` and `ingest --force` move the run's directory
away whole, these files with it; `traceduck check` verifies only the files of checksums.json, so it
neither names these files nor misses them.
"""

from __future__ import annotations

import hashlib
import os
import uuid

import duckdb

from .packs import data_stamp
from .sqltext import literal
from .store import Store, file_digest
from .viewfile import summaries_key

DERIVED_DIR = "derived"
_SUFFIX = ".parquet"
_TMP = ".tmp-"


def directory(store: Store, run_id: str) -> str | None:
    """The directory of the run's kept rows for this version and the run's current files; None when
    the run is gone."""
    stamp = data_stamp(store, run_id)
    if stamp is None:
        return None
    return store.run_file(run_id, f"{DERIVED_DIR}{os.sep}{summaries_key()}-{stamp[0]}-{stamp[1]}-{stamp[2]}")


def variant(run_row: dict) -> str:
    """The variant of a job report's rows kept for this run alone: a hash of its row in `runs`."""
    text = repr(sorted((k, repr(v)) for k, v in run_row.items()))
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _prefix(name: str, variant_: str) -> str:
    return f"report-{name}." + (f"{variant_}." if variant_ else "")


def find(where: str | None, name: str, variant_: str = "") -> str | None:
    """The sound file of report `name`'s rows in directory `where` (see directory()), or None. A file
    whose bytes differ from its digest is removed (where the store can be written)."""
    if where is None:
        return None
    try:
        names = os.listdir(where)
    except OSError:
        return None
    prefix = _prefix(name, variant_)
    for entry in names:
        if not (entry.startswith(prefix) and entry.endswith(_SUFFIX)):
            continue
        digest = entry[len(prefix):-len(_SUFFIX)]
        if "." in digest:  # another variant's
            continue
        path = os.path.join(where, entry)
        try:
            if file_digest(path) == digest:
                return path
        except OSError:
            continue
        _unlink(path)
    return None


def write(cur: duckdb.DuckDBPyConnection, where: str | None, name: str, rows_sql: str, variant_: str = "") -> bool:
    """Write the rows of `rows_sql` (run on `cur`) as report `name`'s kept rows in `where`; False when
    they could not be written (the store read-only or full, an I/O error): nothing is left then."""
    if where is None:
        return False
    for d in (os.path.dirname(where), where):  # never the run's directory: a removed run stays removed
        try:
            os.mkdir(d)
        except FileExistsError:
            pass
        except OSError:
            return False
    tmp = os.path.join(where, f"{_TMP}{uuid.uuid4().hex}{_SUFFIX}")
    try:
        cur.execute(f"COPY ({rows_sql}) TO {literal(tmp)} (FORMAT parquet, COMPRESSION zstd)")
        os.rename(tmp, os.path.join(where, f"{_prefix(name, variant_)}{file_digest(tmp)}{_SUFFIX}"))
        return True
    except (duckdb.Error, OSError):
        _unlink(tmp)
        return False


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
