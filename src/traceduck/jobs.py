"""The one-job check of reports that pair runs as the ranks of one job (`-- requires: one_job`).

Which runs form a job is defined once, in SQL (views `run_jobs` and `jobs`); this only reads it.
"""

from __future__ import annotations

from collections import defaultdict

from .errors import JobSelectionError

HINT = ("Select one job with --run label:job=NAME (label its runs at ingest: --label job=NAME), "
        "or name each of its runs with --run")
SHOWN = 5  # jobs, and runs per job, named in the message


def _listed(items: list[str]) -> str:
    more = f", and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return ", ".join(items[:SHOWN]) + more


def require_one_job(con, run_ids: list[str], report: str) -> None:
    """Raise JobSelectionError unless the runs are one job with no rank twice."""
    rows = con.execute(
        "SELECT job_id, job, rank, run_name FROM run_jobs WHERE run_id IN (SELECT unnest(?::VARCHAR[])) "
        "ORDER BY job, rank NULLS LAST, run_name", [run_ids]).fetchall()
    jobs: dict[str, list[tuple]] = defaultdict(list)
    for job_id, job, rank, run_name in rows:
        jobs[job_id].append((job, rank, run_name))
    if len(jobs) > 1:
        described = [f"{runs[0][0]} ({len(runs)} run{'s' * (len(runs) > 1)}: {_listed([r[2] for r in runs])})"
                     for runs in jobs.values()]
        raise JobSelectionError(f"report {report} needs the runs of one job, "
                                f"the selected runs form {len(jobs)} jobs: {_listed(described)}", HINT)
    by_rank: dict[int, list[str]] = defaultdict(list)
    for job, rank, run_name in next(iter(jobs.values()), []):
        if rank is not None:
            by_rank[rank].append(run_name)
    repeated = [f"rank {rank} ({', '.join(names)})" for rank, names in sorted(by_rank.items()) if len(names) > 1]
    if repeated:
        job = next(iter(jobs.values()))[0][0]
        raise JobSelectionError(f"report {report} needs one run per rank, "
                                f"the selected runs of {job} repeat {_listed(repeated)}", HINT)
