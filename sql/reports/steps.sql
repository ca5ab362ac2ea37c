-- title: Steps, one row each
-- description: Per step (ProfilerStep#N, else an inference engine's step markers: SGLang's step[...], vLLM's execute_...; or a --step-marker pattern): its marker, phase, batch size and tokens, whether it is a warm-up step, wall time, CPU busy time (top-level ops, any thread), GPU busy and idle time of the work the step launched (a graph launch's kernels included), and its kernel count. The step-stats report sums the steady-state steps up (median, p90, max, coefficient of variation).
-- per-run: true
-- empty: no steps in the selected runs (or none of that phase): profile with a schedule and call prof.step() every iteration, or name the annotations that mark the steps (traceduck step-marker RUN --marker REGEX)
-- param: phase VARCHAR = '' -- only steps of this phase: prefill, decode or mixed ('' for every step)
-- column: run_id VARCHAR [key] -- the run
-- column: run_name VARCHAR [key] -- name of the run
-- column: step BIGINT [key] -- N of ProfilerStep#N; for other markers the step's number (0, 1, ... by start unless a pattern captures one)
-- column: marker VARCHAR [detail] -- name of the annotation that marks the step
-- column: phase VARCHAR [detail] -- prefill, decode or mixed, from the marker (empty when it tells none)
-- column: batch_size BIGINT [detail] -- requests in the step, where the marker carries them
-- column: tokens BIGINT [detail] -- tokens of the step, where the marker carries them
-- column: is_warmup BOOLEAN [detail] -- a warm-up step: it and every step of its phase before it took more than 3x the median step of that phase
-- column: dur_ns BIGINT [result] -- CPU window of the step, ns
-- column: cpu_busy_ns BIGINT [result] -- union of the step's top-level CPU op intervals, ns
-- column: gpu_busy_ns BIGINT [result] -- union of the step's GPU work intervals per device, summed over devices, ns
-- column: gpu_idle_ns BIGINT [result] -- GPU span of the step's work (first start to last end, per device) minus GPU busy, ns
-- column: kernels BIGINT [result] -- kernels launched in the step
WITH cpu AS (
  SELECT run_id, step, busy_ns FROM busy_time(['cpu_op'], true) WHERE lane = 'cpu'
), gpu AS (
  SELECT run_id, step, sum(busy_ns)::BIGINT AS busy_ns, sum(last_ns - first_ns - busy_ns)::BIGINT AS idle_ns
  FROM gpu_time(by_step := true) GROUP BY ALL
), k AS (
  SELECT run_id, step, count(*) AS kernels FROM device_work(['kernel']) WHERE step IS NOT NULL GROUP BY ALL
)
SELECT s.run_id, r.name AS run_name, s.step, s.marker, s.phase, s.batch_size, s.tokens, s.is_warmup, s.dur_ns,
       coalesce(c.busy_ns, 0) AS cpu_busy_ns, coalesce(g.busy_ns, 0) AS gpu_busy_ns, coalesce(g.idle_ns, 0) AS gpu_idle_ns,
       coalesce(k.kernels, 0) AS kernels
FROM steps s JOIN runs r USING (run_id)
LEFT JOIN cpu c USING (run_id, step) LEFT JOIN gpu g USING (run_id, step) LEFT JOIN k USING (run_id, step)
WHERE s.run_id IN (SELECT run_id FROM report_runs) AND ($phase = '' OR s.phase = $phase)
ORDER BY s.run_id, s.step
