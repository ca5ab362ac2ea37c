-- title: Profiler steps
-- description: Per ProfilerStep window: wall time, CPU busy time (top-level ops, any thread), GPU busy and idle time of the work the step launched, and its kernel count.
-- per-run: true
-- empty: no ProfilerStep#N annotation in the selected runs: profile with a schedule and call prof.step() every iteration
-- column: run_id VARCHAR [key] -- the run
-- column: run_name VARCHAR [key] -- name of the run
-- column: step BIGINT [key] -- N of ProfilerStep#N
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
SELECT s.run_id, r.name AS run_name, s.step, s.dur_ns, coalesce(c.busy_ns, 0) AS cpu_busy_ns,
       coalesce(g.busy_ns, 0) AS gpu_busy_ns, coalesce(g.idle_ns, 0) AS gpu_idle_ns, coalesce(k.kernels, 0) AS kernels
FROM steps s JOIN runs r USING (run_id)
LEFT JOIN cpu c USING (run_id, step) LEFT JOIN gpu g USING (run_id, step) LEFT JOIN k USING (run_id, step)
WHERE s.run_id IN (SELECT run_id FROM report_runs)
ORDER BY s.run_id, s.step
