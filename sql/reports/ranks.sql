-- title: Ranks of a distributed job
-- description: For the runs of one job (default: every run, which must then be one job; select one with --run label:job=NAME or several --run): per rank step time, GPU busy, communication and exposed communication time, time spent waiting for other ranks in collectives, and how often it was the slowest or fastest rank of a step or the straggler; per profiler step, the straggler: the rank the others waited for in that step's collectives; per collective (communication kernels matched across ranks by the collective their name runs and its occurrence, macro collective_waits), the spread of start times across ranks. Stops with an error when the runs form several jobs (view `run_jobs`) or repeat a rank.
-- requires: one_job
-- column: run_id VARCHAR [key] -- the run (one per rank)
-- column: run_name VARCHAR [key] -- name of the run
-- column: section VARCHAR [key] -- 'rank' (one row per run), 'step' (one row per profiler step with collectives seen on several ranks) or 'collective' (one row per collective instance seen on several ranks)
-- column: rank BIGINT [key] -- rank of the run; for a collective, the rank that started it last (the one the others waited for); for a step, its straggler: the rank the other ranks waited for longest in the step's collectives (lowest rank on a tie)
-- column: item VARCHAR [key] -- rank: the run name; step: 'step N' (the step of the straggler's launch of the collectives); collective: its name and occurrence, e.g. 'allreduce #3'
-- column: steps BIGINT [detail] -- profiler steps of the rank (rank rows)
-- column: step_ns BIGINT [result] -- average step time of the rank, ns (rank rows)
-- column: gpu_busy_ns BIGINT [detail] -- GPU busy time by interval union, summed over devices, ns (rank rows)
-- column: communication_ns BIGINT [detail] -- time running collective kernels, ns (rank rows)
-- column: exposed_comm_ns BIGINT [result] -- communication with no compute kernel running on the device (as in comm-overlap), summed over devices, ns (rank rows)
-- column: collective_wait_ns BIGINT [result] -- rank: total time this rank's collectives started before the last rank's, i.e. waited for others; step: time the other ranks waited for the straggler in the step's collectives; collective: summed over ranks, ns
-- column: slowest_steps BIGINT [detail] -- steps in which this rank had the longest step time (rank rows)
-- column: fastest_steps BIGINT [detail] -- steps in which this rank had the shortest step time (rank rows)
-- column: straggler_steps BIGINT [detail] -- steps in which this rank was the straggler (rank rows)
-- column: spread_ns BIGINT [result] -- collective: last start minus first start across ranks; step: the largest such spread among the step's collectives, ns
WITH sel AS (SELECT run_id FROM report_runs),
matched AS (
  SELECT * FROM collective_waits((SELECT list(run_id) FROM report_runs))
), step_times AS (
  SELECT run_id, step, dur_ns,
         dur_ns = max(dur_ns) OVER (PARTITION BY step) AS is_slowest,
         dur_ns = min(dur_ns) OVER (PARTITION BY step) AS is_fastest,
         count(*) OVER (PARTITION BY step) AS ranks_in_step
  FROM steps WHERE run_id IN (SELECT run_id FROM sel)
), gpu_busy AS (
  -- one sweep gives the union of all GPU work (busy) and of communication, and what of it is exposed
  SELECT run_id, sum(busy_ns)::BIGINT AS busy_ns, sum(communication_ns)::BIGINT AS communication_ns,
         sum(exposed_communication_ns)::BIGINT AS exposed_ns
  FROM gpu_time() WHERE run_id IN (SELECT run_id FROM sel) GROUP BY run_id
), instances AS (
  -- each collective instance seen on several ranks: who started last, in which step, and how long the others waited
  SELECT collective, occurrence, any_value(run_id) FILTER (WHERE is_last) AS run_id, any_value(step) FILTER (WHERE is_last) AS step,
         any_value(rank) FILTER (WHERE is_last) AS rank, sum(wait_ns)::BIGINT AS wait_ns,
         max(last_start) - min(ts_ns) AS spread_ns, min(first_start) AS first_start
  FROM matched WHERE ranks_seen > 1 GROUP BY collective, occurrence
), step_blame AS (
  SELECT step, run_id, rank, sum(wait_ns)::BIGINT AS wait_ns, max(spread_ns) AS spread_ns
  FROM instances WHERE step IS NOT NULL GROUP BY step, run_id, rank
), stragglers AS (
  SELECT step, arg_max(run_id, (wait_ns, -coalesce(rank, 0))) AS run_id, arg_max(rank, (wait_ns, -coalesce(rank, 0))) AS rank,
         max(wait_ns) AS wait_ns, max(spread_ns) AS spread_ns
  FROM step_blame GROUP BY step
), per_rank AS (
  SELECT r.run_id, r.name, r.rank,
         (SELECT count(*) FROM step_times s WHERE s.run_id = r.run_id) AS steps,
         (SELECT avg(dur_ns)::BIGINT FROM step_times s WHERE s.run_id = r.run_id) AS step_ns,
         g.busy_ns AS gpu_busy_ns, g.communication_ns, g.exposed_ns AS exposed_comm_ns,
         (SELECT sum(wait_ns)::BIGINT FROM matched m WHERE m.run_id = r.run_id AND m.ranks_seen > 1) AS collective_wait_ns,
         (SELECT count(*) FROM step_times s WHERE s.run_id = r.run_id AND s.is_slowest AND s.ranks_in_step > 1) AS slowest_steps,
         (SELECT count(*) FROM step_times s WHERE s.run_id = r.run_id AND s.is_fastest AND s.ranks_in_step > 1) AS fastest_steps,
         (SELECT count(*) FROM stragglers s WHERE s.run_id = r.run_id) AS straggler_steps
  FROM runs r LEFT JOIN gpu_busy g USING (run_id)
  WHERE r.run_id IN (SELECT run_id FROM sel)
), per_collective AS (
  SELECT run_id, 'collective' AS section, rank, collective || ' #' || occurrence AS item, wait_ns AS collective_wait_ns,
         spread_ns, first_start
  FROM instances
)
SELECT x.run_id, r.name AS run_name, x.section, x.rank, x.item, x.steps, x.step_ns, x.gpu_busy_ns, x.communication_ns,
       x.exposed_comm_ns, x.collective_wait_ns, x.slowest_steps, x.fastest_steps, x.straggler_steps, x.spread_ns
FROM (
  SELECT run_id, 'rank' AS section, rank, name AS item, steps, step_ns, gpu_busy_ns, communication_ns, exposed_comm_ns,
         coalesce(collective_wait_ns, 0) AS collective_wait_ns, slowest_steps, fastest_steps, straggler_steps,
         NULL::BIGINT AS spread_ns, 0 AS section_order, NULL::BIGINT AS first_start
  FROM per_rank
  UNION ALL
  SELECT run_id, 'step', rank, 'step ' || step, NULL, NULL, NULL, NULL, NULL, wait_ns, NULL, NULL, NULL, spread_ns, 1, step
  FROM stragglers
  UNION ALL
  SELECT run_id, section, rank, item, NULL, NULL, NULL, NULL, NULL, collective_wait_ns, NULL, NULL, NULL, spread_ns, 2, first_start
  FROM per_collective
) x JOIN runs r USING (run_id)
ORDER BY x.section_order, CASE WHEN x.section_order = 0 THEN x.rank END NULLS LAST, x.first_start, x.item
