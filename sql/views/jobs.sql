-- requires: gpu, communication, activity
-- Jobs: which runs are the ranks of one job, and how long each rank waited in its collectives.

-- The job of every run, so that reports over several ranks never pair unrelated runs. A job is:
-- the runs sharing a `job` label (`ingest --label job=NAME`); else the runs sharing a distributed
-- identity: the same backend and world size in the trace's distributedInfo, profiled at the same
-- time (their spans, start_ns to end_ns, overlap one another in a chain: the ranks of one job are
-- profiled together, unrelated traces of the same shape are not); else the run alone. Ranks are
-- not part of the grouping: a job whose runs repeat a rank is still one job here, and reports
-- that need one run per rank (`ranks`) refuse it.
-- @columns-as runs: run_id
-- @column run_name VARCHAR Name of the run.
-- @column rank BIGINT Rank of the run (runs.rank), or NULL.
-- @column backend VARCHAR distributedInfo.backend, e.g. 'nccl', or NULL.
-- @column world_size BIGINT World size of the run (runs.world_size), or NULL.
-- @column job_source VARCHAR How the job was found: 'label', 'distributed' or 'run' (the run alone).
-- @column job_id VARCHAR Key of the job, unique in the store: 'label:NAME', 'distributed:BACKEND:WORLD_SIZE:START_NS' or 'run:RUN_ID'.
-- @column job VARCHAR Name of the job for people: 'job=NAME', 'BACKEND world_size=N from YYYY-MM-DD HH:MM:SS' (UTC start of its first run) or 'run RUN_NAME' (with the run id's first 8 characters when names repeat).
CREATE OR REPLACE VIEW run_jobs AS
WITH r AS (
  SELECT run_id, name, rank, world_size, map_extract(labels, 'job')[1] AS job_label,
         json_extract_string(distributed_info, '$.backend') AS backend, start_ns, end_ns,
         count(*) OVER (PARTITION BY name) AS same_name
  FROM runs
), ordered AS (
  SELECT run_id, backend, world_size, start_ns,
         max(end_ns) OVER (PARTITION BY backend, world_size ORDER BY start_ns, run_id
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
  FROM r WHERE job_label IS NULL AND backend IS NOT NULL AND world_size IS NOT NULL
), chained AS (
  SELECT *, sum(CASE WHEN prev_end IS NULL OR start_ns > prev_end THEN 1 ELSE 0 END)
              OVER (PARTITION BY backend, world_size ORDER BY start_ns, run_id ROWS UNBOUNDED PRECEDING) AS chain
  FROM ordered
), distributed AS (
  SELECT run_id, min(start_ns) OVER (PARTITION BY backend, world_size, chain) AS job_start_ns FROM chained
)
SELECT r.run_id, r.name AS run_name, r.rank, r.backend, r.world_size,
       CASE WHEN r.job_label IS NOT NULL THEN 'label' WHEN d.run_id IS NOT NULL THEN 'distributed' ELSE 'run' END AS job_source,
       CASE WHEN r.job_label IS NOT NULL THEN 'label:' || r.job_label
            WHEN d.run_id IS NOT NULL THEN 'distributed:' || r.backend || ':' || r.world_size || ':' || d.job_start_ns
            ELSE 'run:' || r.run_id END AS job_id,
       CASE WHEN r.job_label IS NOT NULL THEN 'job=' || r.job_label
            WHEN d.run_id IS NOT NULL THEN r.backend || ' world_size=' || r.world_size || ' from '
                 || strftime(make_timestamp(d.job_start_ns // 1000), '%Y-%m-%d %H:%M:%S')
            WHEN r.same_name > 1 THEN 'run ' || r.name || ' (' || left(r.run_id, 8) || ')'
            ELSE 'run ' || r.name END AS job
FROM r LEFT JOIN distributed d USING (run_id);

-- One row per job of the store (see `run_jobs`), with its runs and ranks.
-- @columns-as run_jobs: job_id, job, job_source
-- @column backend VARCHAR distributedInfo.backend of its runs (the first, for a label job of mixed runs).
-- @column world_size BIGINT World size of its runs (the largest, for a label job of mixed runs).
-- @column runs BIGINT Number of runs.
-- @column ranks BIGINT[] Ranks of its runs, ascending (NULL ranks left out).
-- @column run_names VARCHAR[] Names of its runs, by rank.
-- @column has_repeated_rank BOOLEAN True when two of its runs have the same rank.
CREATE OR REPLACE VIEW jobs AS
SELECT job_id, any_value(job) AS job, any_value(job_source) AS job_source, min(backend) AS backend,
       max(world_size) AS world_size, count(*) AS runs,
       list(rank ORDER BY rank) FILTER (WHERE rank IS NOT NULL) AS ranks,
       list(run_name ORDER BY rank NULLS LAST, run_name) AS run_names,
       count(rank) > count(DISTINCT rank) AS has_repeated_rank
FROM run_jobs GROUP BY job_id;

-- Every communication kernel of the given runs matched with the same collective on the other
-- given runs of its job (`run_jobs`): the n-th kernel of a collective (as its name says,
-- `communication_kernel_names`; the name, unlike the args, is always there) on one rank is the
-- n-th on every rank (collectives run in the same order on all ranks of a process group). A
-- collective completes only when its last rank arrives, so the others wait: wait_ns is how long
-- this rank's kernel started before the last rank's, and the last rank to start (is_last, the
-- lowest rank among equal starts) is the one they waited for. step is the profiler step of the
-- kernel's launch. Used by the ranks and overview reports.
-- @arg run_ids VARCHAR[] The runs to match (the ranks of one job, or of several).
-- @columns-as run_jobs: run_id, job_id, rank
-- @column event_id BIGINT The communication kernel.
-- @columns-as communication_kernel_names: collective
-- @column occurrence BIGINT n: the kernel is the n-th of its collective on its run, by start.
-- @columns-as device_work: step
-- @columns-as device_events: ts_ns
-- @column last_start BIGINT Start of the last kernel of this occurrence on the job's runs, ns.
-- @column first_start BIGINT Start of the first kernel of this occurrence on the job's runs, ns.
-- @column ranks_seen BIGINT Runs of the job that ran this occurrence.
-- @column wait_ns BIGINT last_start minus this kernel's start: how long this rank waited for the last, ns.
-- @column is_last BOOLEAN True for the last rank to start (the lowest rank among equal starts): the one the others waited for.
CREATE OR REPLACE MACRO collective_waits(run_ids) AS TABLE
WITH coll AS (
  SELECT w.run_id, j.job_id, r.rank, w.event_id, w.ts_ns, k.collective, w.step
  FROM device_work(['kernel']) w JOIN communication_kernel_names k USING (name)
  JOIN run_jobs j USING (run_id) JOIN runs r USING (run_id)
  WHERE w.run_id IN (SELECT unnest(run_ids))
), numbered AS (
  SELECT *, row_number() OVER (PARTITION BY run_id, collective ORDER BY ts_ns, event_id) AS occurrence FROM coll
)
SELECT run_id, job_id, rank, event_id, collective, occurrence, step, ts_ns,
       max(ts_ns) OVER inst AS last_start, min(ts_ns) OVER inst AS first_start, count(*) OVER inst AS ranks_seen,
       max(ts_ns) OVER inst - ts_ns AS wait_ns,
       row_number() OVER (inst ORDER BY ts_ns DESC, rank NULLS LAST, run_id) = 1 AS is_last
FROM numbered
WINDOW inst AS (PARTITION BY job_id, collective, occurrence);

-- The straggler of each job among the given runs: of the runs with communication kernels (some
-- communication time in `gpu_time`) whose job has two or more of them, the run whose last starts
-- made the others wait longest in the collectives matched across them (`collective_waits`). One
-- row per job (none when no rank made another wait). Used by the overview report, whose rows over
-- a packed job of many ranks `traceduck compact` computes a slice of runs at a time, with the
-- stragglers of the whole pack computed once.
-- @arg run_ids VARCHAR[] The runs to compare (the ranks of one job, or of several).
-- @columns-as run_jobs: job_id, run_id, rank
-- @column last_count BIGINT Collective instances matched across ranks in which this run started last.
-- @column caused_ns HUGEINT Time the job's other ranks waited in those instances, ns.
-- @column instances BIGINT Collective instances of this run matched across two or more ranks.
-- @column ranks BIGINT Runs of the job compared.
CREATE OR REPLACE MACRO job_stragglers(run_ids) AS TABLE
WITH comm_runs AS MATERIALIZED (
  SELECT list(DISTINCT run_id) AS ids FROM gpu_time()
  WHERE run_id IN (SELECT unnest(run_ids)) AND communication_ns > 0
), job_runs AS MATERIALIZED (
  -- runs with communication whose job has another such run among them: they can be matched
  SELECT list(run_id) AS ids FROM (
    SELECT run_id, count(*) OVER (PARTITION BY job_id) AS n FROM run_jobs
    WHERE run_id IN (SELECT unnest(ids) FROM comm_runs)) WHERE n > 1
), waits AS (
  SELECT *, sum(wait_ns) OVER (PARTITION BY job_id, collective, occurrence) AS instance_wait_ns
  FROM collective_waits((SELECT ids FROM job_runs)) WHERE ranks_seen > 1
), blame AS (
  SELECT job_id, run_id, rank, count(*) FILTER (WHERE is_last) AS last_count,
         coalesce(sum(instance_wait_ns) FILTER (WHERE is_last), 0) AS caused_ns, count(*) AS instances,
         count(*) OVER (PARTITION BY job_id) AS ranks
  FROM waits GROUP BY job_id, run_id, rank
)
SELECT job_id, run_id, rank, last_count, caused_ns, instances, ranks FROM (
  SELECT *, row_number() OVER (PARTITION BY job_id ORDER BY caused_ns DESC, rank NULLS LAST, run_id) AS pos
  FROM blame WHERE caused_ns > 0)
WHERE pos = 1;
