-- title: Step time statistics over the steady state
-- description: Per run and step phase (prefill, decode, mixed; one group when the markers tell no phase): how many steps, how many of them warm-up steps (left out of the statistics unless include_warmup=true; see the steps view), and the median, 90th percentile, mean, shortest and longest step duration and its coefficient of variation over the steps counted. Per step: the steps report.
-- per-run: true
-- empty: no steps in the selected runs (or none of that phase): profile with a schedule and call prof.step() every iteration, or name the annotations that mark the steps (traceduck step-marker RUN --marker REGEX)
-- param: phase VARCHAR = '' -- only steps of this phase: prefill, decode or mixed ('' for every phase)
-- param: include_warmup BOOLEAN = false -- count the warm-up steps too
-- column: run_id VARCHAR [key] -- the run
-- column: run_name VARCHAR [key] -- name of the run
-- column: phase VARCHAR [key] -- the steps' phase (empty when their markers tell none)
-- column: steps BIGINT [result] -- steps counted in the statistics
-- column: warmup_steps BIGINT [detail] -- warm-up steps of the phase (counted only with include_warmup=true)
-- column: median_ns BIGINT [result] -- median step duration (interpolated between the two middle steps), ns
-- column: p90_ns BIGINT [result] -- 90th percentile of step duration (linear interpolation between closest ranks), ns
-- column: mean_ns BIGINT [detail] -- mean step duration, ns
-- column: min_ns BIGINT [detail] -- shortest step, ns
-- column: max_ns BIGINT [result] -- longest step, ns
-- column: cv DOUBLE [result] -- coefficient of variation of step duration: population standard deviation over mean
WITH s AS (
  SELECT * FROM steps
  WHERE run_id IN (SELECT run_id FROM report_runs) AND ($phase = '' OR phase = $phase)
), counted AS (
  SELECT run_id, phase, count(*) FILTER (WHERE is_warmup) AS warmup_steps,
         count(*) FILTER (WHERE $include_warmup OR NOT is_warmup) AS steps,
         round(quantile_cont(dur_ns, 0.5) FILTER (WHERE $include_warmup OR NOT is_warmup))::BIGINT AS median_ns,
         round(quantile_cont(dur_ns, 0.9) FILTER (WHERE $include_warmup OR NOT is_warmup))::BIGINT AS p90_ns,
         round(avg(dur_ns) FILTER (WHERE $include_warmup OR NOT is_warmup))::BIGINT AS mean_ns,
         min(dur_ns) FILTER (WHERE $include_warmup OR NOT is_warmup) AS min_ns,
         max(dur_ns) FILTER (WHERE $include_warmup OR NOT is_warmup) AS max_ns,
         stddev_pop(dur_ns) FILTER (WHERE $include_warmup OR NOT is_warmup)
           / nullif(avg(dur_ns) FILTER (WHERE $include_warmup OR NOT is_warmup), 0) AS cv
  FROM s GROUP BY run_id, phase
)
SELECT c.run_id, r.name AS run_name, c.phase, c.steps, c.warmup_steps, c.median_ns, c.p90_ns, c.mean_ns, c.min_ns,
       c.max_ns, c.cv
FROM counted c JOIN runs r USING (run_id)
ORDER BY c.run_id, CASE c.phase WHEN 'prefill' THEN 0 WHEN 'mixed' THEN 1 WHEN 'decode' THEN 2 ELSE 3 END
