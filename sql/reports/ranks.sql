-- title: Ranks of a distributed job
-- description: For the runs of one job (default: every run, which must then be one job; select one with --run label:job=NAME or several --run): per rank step time, GPU busy and communication time, time spent waiting for other ranks in collectives, and how often it was the slowest or fastest rank of a step; per collective (the kernels of the `collectives` view, matched across ranks by collective family and occurrence), the spread of start times across ranks. Stops with an error when the runs form several jobs (view `run_jobs`) or repeat a rank.
-- requires: one_job
-- column: run_id VARCHAR -- the run (one per rank)
-- column: run_name VARCHAR -- name of the run
-- column: section VARCHAR -- 'rank' (one row per run) or 'collective' (one row per collective instance seen on several ranks)
-- column: rank BIGINT -- rank of the run; for a collective, the rank that started it last (the one the others waited for)
-- column: item VARCHAR -- rank: the run name; collective: its name and occurrence, e.g. 'allreduce #3'
-- column: steps BIGINT -- profiler steps of the rank (rank rows)
-- column: step_ns BIGINT -- average step time of the rank, ns (rank rows)
-- column: gpu_busy_ns BIGINT -- GPU busy time by interval union, summed over devices, ns (rank rows)
-- column: communication_ns BIGINT -- time running collective kernels, ns (rank rows)
-- column: collective_wait_ns BIGINT -- rank: total time this rank's collectives started before the last rank's, i.e. waited for others; collective: summed over ranks, ns
-- column: slowest_steps BIGINT -- steps in which this rank had the longest step time (rank rows)
-- column: fastest_steps BIGINT -- steps in which this rank had the shortest step time (rank rows)
-- column: spread_ns BIGINT -- collective: last start minus first start across ranks, ns
WITH sel AS (SELECT run_id FROM report_runs),
coll AS (
  SELECT run_id, event_id, ts_ns, collective FROM collectives WHERE side = 'gpu' AND run_id IN (SELECT run_id FROM sel)
), numbered AS (
  SELECT *, row_number() OVER (PARTITION BY run_id, collective ORDER BY ts_ns, event_id) AS occurrence FROM coll
), matched AS (
  SELECT n.*, max(ts_ns) OVER (PARTITION BY collective, occurrence) AS last_start,
         min(ts_ns) OVER (PARTITION BY collective, occurrence) AS first_start,
         count(*) OVER (PARTITION BY collective, occurrence) AS ranks_seen
  FROM numbered n
), step_times AS (
  SELECT run_id, step, dur_ns,
         dur_ns = max(dur_ns) OVER (PARTITION BY step) AS is_slowest,
         dur_ns = min(dur_ns) OVER (PARTITION BY step) AS is_fastest,
         count(*) OVER (PARTITION BY step) AS ranks_in_step
  FROM steps WHERE run_id IN (SELECT run_id FROM sel)
), gpu_busy AS (
  SELECT run_id, sum(busy_ns)::BIGINT AS busy_ns FROM busy_time(['compute', 'communication', 'memcpy', 'memset'], false)
  WHERE lane LIKE 'gpu:%' AND run_id IN (SELECT run_id FROM sel) GROUP BY run_id
), communication_busy AS (
  SELECT run_id, sum(busy_ns)::BIGINT AS busy_ns FROM busy_time(['communication'], false)
  WHERE lane LIKE 'gpu:%' AND run_id IN (SELECT run_id FROM sel) GROUP BY run_id
), per_rank AS (
  SELECT r.run_id, r.name, r.rank,
         (SELECT count(*) FROM step_times s WHERE s.run_id = r.run_id) AS steps,
         (SELECT avg(dur_ns)::BIGINT FROM step_times s WHERE s.run_id = r.run_id) AS step_ns,
         g.busy_ns AS gpu_busy_ns, c.busy_ns AS communication_ns,
         (SELECT sum(last_start - ts_ns)::BIGINT FROM matched m WHERE m.run_id = r.run_id AND m.ranks_seen > 1) AS collective_wait_ns,
         (SELECT count(*) FROM step_times s WHERE s.run_id = r.run_id AND s.is_slowest AND s.ranks_in_step > 1) AS slowest_steps,
         (SELECT count(*) FROM step_times s WHERE s.run_id = r.run_id AND s.is_fastest AND s.ranks_in_step > 1) AS fastest_steps
  FROM runs r LEFT JOIN gpu_busy g USING (run_id) LEFT JOIN communication_busy c USING (run_id)
  WHERE r.run_id IN (SELECT run_id FROM sel)
), per_collective AS (
  SELECT arg_max(m.run_id, m.ts_ns) AS run_id, 'collective' AS section, arg_max(r.rank, m.ts_ns) AS rank,
         m.collective || ' #' || m.occurrence AS item, sum(m.last_start - m.ts_ns)::BIGINT AS collective_wait_ns,
         any_value(m.last_start - m.first_start) AS spread_ns, min(m.first_start) AS first_start
  FROM matched m JOIN runs r USING (run_id)
  WHERE m.ranks_seen > 1
  GROUP BY m.collective, m.occurrence
)
SELECT x.run_id, r.name AS run_name, x.section, x.rank, x.item, x.steps, x.step_ns, x.gpu_busy_ns, x.communication_ns,
       x.collective_wait_ns, x.slowest_steps, x.fastest_steps, x.spread_ns
FROM (
  SELECT run_id, 'rank' AS section, rank, name AS item, steps, step_ns, gpu_busy_ns, communication_ns,
         coalesce(collective_wait_ns, 0) AS collective_wait_ns, slowest_steps, fastest_steps, NULL::BIGINT AS spread_ns,
         0 AS section_order, NULL::BIGINT AS first_start
  FROM per_rank
  UNION ALL
  SELECT run_id, section, rank, item, NULL, NULL, NULL, NULL, collective_wait_ns, NULL, NULL, spread_ns, 1, first_start
  FROM per_collective
) x JOIN runs r USING (run_id)
ORDER BY x.section_order, x.rank NULLS LAST, x.first_start, x.item
