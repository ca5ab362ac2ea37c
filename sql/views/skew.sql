-- requires: jobs, communication
-- Collectives matched across the ranks of a job: how far apart the ranks started and ended each one.

-- Every communication kernel of the given runs matched with the same collective instance on the
-- other given runs of its job (`run_jobs`), as TraceLens's build_df_nccl_implicit_sync_cat
-- matches them: the n-th kernel of a communicator on one rank is the n-th of that communicator on
-- every rank (collectives run in the same order on all ranks of a process group). The
-- communicator is the kernel's `Process Group Name` arg where PyTorch wrote it on the kernel,
-- else its stream (NCCL runs each communicator on a stream of its own; TraceLens puts every kernel
-- without the arg in one group). One row per instance seen on two runs or more: the start skew
-- (last start minus first) and end skew (last end minus first) across the ranks, the rank that
-- started last (the one the others waited for), and the bandwidth over the shortest rank's
-- kernel time (TraceLens's comm_latency: the rank that arrived last waited least, so its time is
-- closest to the transfer's).
-- @arg run_ids VARCHAR[] The runs to match (the ranks of one job, or of several).
-- @columns-as run_jobs: job_id
-- @column communicator VARCHAR The process group (`Process Group Name`), else 'stream N'.
-- @column instance BIGINT n: the instance is the n-th collective of its communicator on each rank, by start.
-- @column collective VARCHAR Collective of the instance (`collectives.collective`) on the rank that started last; 'mixed' when the ranks' kernels run different collectives (the order does not match).
-- @column ranks BIGINT Runs of the job that ran this instance.
-- @column first_start_ns BIGINT Start of the first rank's kernel, ns.
-- @column start_skew_ns BIGINT Last start minus first start across the ranks, ns.
-- @column end_skew_ns BIGINT Last end minus first end across the ranks, ns.
-- @column latest_run_id VARCHAR Run of the rank that started last (the lowest rank among equal starts).
-- @column latest_rank BIGINT Rank that started last: the one the others waited for.
-- @column shortest_dur_ns BIGINT Shortest kernel duration across the ranks, ns.
-- @column longest_dur_ns BIGINT Longest kernel duration across the ranks, ns.
-- @columns-as collectives_of: msg_bytes, n_ranks
-- @column algbw_gb_s DOUBLE msg_bytes / shortest_dur_ns: algorithm bandwidth, GB/s; NULL when the size is unknown.
-- @column busbw_gb_s DOUBLE algbw_gb_s x busbw_factor(collective, n_ranks), GB/s; NULL when unknown.
CREATE OR REPLACE MACRO collective_skew(run_ids) AS TABLE
WITH k AS (
  SELECT c.run_id, j.job_id, j.rank, c.event_id, c.ts_ns, c.ts_ns + c.dur_ns AS end_ns, c.dur_ns, c.collective,
         coalesce(c.process_group, 'stream ' || c.stream) AS communicator, c.msg_bytes, c.n_ranks
  FROM collectives_of(run_ids) c JOIN run_jobs j USING (run_id)
  WHERE c.side = 'gpu' AND c.dur_ns IS NOT NULL
), numbered AS (
  SELECT *, row_number() OVER (PARTITION BY run_id, communicator ORDER BY ts_ns, event_id) AS instance FROM k
), inst AS (
  SELECT job_id, communicator, instance,
         CASE WHEN count(DISTINCT collective) > 1 THEN 'mixed'
              ELSE arg_max(collective, (ts_ns, -coalesce(rank, 0))) END AS collective,
         count(*) AS ranks, min(ts_ns) AS first_start_ns,
         max(ts_ns) - min(ts_ns) AS start_skew_ns, max(end_ns) - min(end_ns) AS end_skew_ns,
         arg_max(run_id, (ts_ns, -coalesce(rank, 0))) AS latest_run_id,
         arg_max(rank, (ts_ns, -coalesce(rank, 0))) AS latest_rank,
         min(dur_ns) AS shortest_dur_ns, max(dur_ns) AS longest_dur_ns,
         max(msg_bytes) AS msg_bytes, max(n_ranks) AS n_ranks
  FROM numbered GROUP BY job_id, communicator, instance HAVING count(*) > 1
)
SELECT job_id, communicator, instance, collective, ranks, first_start_ns, start_skew_ns, end_skew_ns,
       latest_run_id, latest_rank, shortest_dur_ns, longest_dur_ns, msg_bytes, n_ranks,
       msg_bytes / nullif(shortest_dur_ns, 0) AS algbw_gb_s,
       msg_bytes / nullif(shortest_dur_ns, 0) * busbw_factor(collective, n_ranks) AS busbw_gb_s
FROM inst;

-- The collective instances of every job of the store (`collective_skew` over every run): one row
-- per instance seen on two ranks or more. A report over some runs reads collective_skew(run_ids).
-- @columns-as collective_skew: job_id, communicator, instance, collective, ranks, first_start_ns, start_skew_ns
-- @columns-as collective_skew: end_skew_ns, latest_run_id, latest_rank, shortest_dur_ns, longest_dur_ns
-- @columns-as collective_skew: msg_bytes, n_ranks, algbw_gb_s, busbw_gb_s
CREATE OR REPLACE VIEW collective_skews AS
SELECT * FROM collective_skew((SELECT list(run_id) FROM runs));
