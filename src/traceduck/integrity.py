"""`traceduck check`: every published run's and pack's files against the checksums written when
they were published (store.write_checksums), and each run's row read back. A damaged file (a
flipped bit, a cut) is named with its run, so the user knows what to re-ingest or remove."""

from __future__ import annotations

from dataclasses import dataclass, field

from . import packs
from .store import CHECKSUMS, Store, read_row_file, short_id, verify_checksums


@dataclass
class Damage:
    """One damaged file: of a run (run_id, its name where readable) or of a pack (pack_id)."""

    kind: str  # 'run' or 'pack'
    ident: str
    name: str | None
    file: str
    problem: str


@dataclass
class CheckResult:
    runs: int = 0
    packs: int = 0
    without_checksums: list[str] = field(default_factory=list)  # runs published before checksums
    damaged: list[Damage] = field(default_factory=list)


def check(store: Store) -> CheckResult:
    """Verify every run and pack of the store; see the module's docstring."""
    result = CheckResult()
    for run_id in store.run_ids():
        directory = store.run_dir(run_id)
        name = None
        try:
            name = read_row_file(directory / "runs.parquet").to_pylist()[0].get("name")
        except FileNotFoundError:
            continue  # removed meanwhile
        except Exception as e:  # noqa: BLE001 - any way the file fails to read is damage
            result.damaged.append(Damage("run", run_id, None, "runs.parquet", f"unreadable ({_first_line(e)})"))
        problems = verify_checksums(directory)
        if problems is None:
            if not (directory / "runs.parquet").is_file():
                continue
            result.without_checksums.append(run_id)
        else:
            result.damaged += [Damage("run", run_id, name, f, p) for f, p in problems]
        result.runs += 1
    for pack in packs.list_packs(store):
        problems = verify_checksums(pack.path)
        result.packs += 1
        for f, p in problems or []:
            result.damaged.append(Damage("pack", pack.pack_id, None, f, p))
    return result


def describe(d: Damage) -> str:
    """One line per damaged file, naming its run (or pack)."""
    if d.kind == "run":
        who = f"run {short_id(d.ident)}" + (f" ({d.name})" if d.name else "")
    else:
        who = f"pack {d.ident}"
    return f"{who}: {d.file}: {d.problem}"


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def damaged_file_error(store: Store, e: BaseException):
    """The StoreError for a query that failed on a damaged file of a run or pack (a cut or
    overwritten Parquet file), naming the run; None when the error names no such file."""
    import re

    from .errors import StoreError

    text = str(e)
    for base, kind in ((str(store.runs_dir), "run"), (str(packs.packs_dir(store)), "pack")):
        m = re.search(re.escape(base + "/") + r"([0-9a-f]+)/([^'\"\s]+)", text)
        if not m:
            continue
        ident, file = m.group(1), m.group(2)
        name = None
        if kind == "run":
            try:
                name = read_row_file(store.run_dir(ident) / "runs.parquet").to_pylist()[0].get("name")
            except Exception:  # noqa: BLE001 - the name is a courtesy
                pass
        problem = re.sub(r"\s*'?" + re.escape(m.group(0)) + r"'?", "", _first_line(e)).rstrip(" :")
        who = describe(Damage(kind, ident, name, file, f"damaged ({problem})"))
        if kind == "run":
            return StoreError(who, f"`traceduck check` lists every damaged file; re-ingest the run from its trace "
                                   f"with `traceduck ingest TRACE --force`, or remove it with `traceduck rm {short_id(ident)}`")
        return StoreError(who, "Run `traceduck compact` again to rewrite the pack")
    return None


def other_version_error(con, store: Store, stale: list[tuple[str, str]]):
    """The StoreError for runs whose files lack columns this version reads, `stale` as (run_id,
    what is missing): names the first and the command that re-ingests it from its trace."""
    import shlex

    import duckdb

    from .errors import StoreError

    run, missing = stale[0]
    try:
        source = con.execute("SELECT source_path FROM read_parquet(?)",
                             [str(store.run_dir(run) / "runs.parquet")]).fetchall()[0][0]
    except (duckdb.Error, IndexError):
        source = "TRACE"
    command = f"traceduck ingest {shlex.quote(source)} --store {shlex.quote(str(store.path))} --force"
    if len(stale) == 1:
        return StoreError(f"run {short_id(run)} in {store.path} comes from another traceduck version ({missing})",
                          f"Re-ingest its trace: {command}")
    return StoreError(f"run {short_id(run)} and {len(stale) - 1} more in {store.path} come from another traceduck "
                      f"version ({missing})", f"Re-ingest their traces with --force, e.g. {command}")
