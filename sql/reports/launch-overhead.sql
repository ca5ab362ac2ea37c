-- title: Launch overhead by op
-- description: Per CPU op: kernel launches, time spent in launch calls, queue delay measured two ways (kernel start minus launch call start, as traceduck's views do; kernel start minus launch call end, as HTA's launch delay), and kernels shorter than the call that launched them.
-- per-run: true
-- empty: no kernel launches linked to a CPU op in the selected runs
-- column: run_id VARCHAR [key] -- the run
-- column: run_name VARCHAR [key] -- name of the run
-- column: op_name VARCHAR [key] -- CPU op that made the launch calls ('(no op)' for calls outside any op)
-- column: kernels BIGINT [result] -- kernels launched
-- column: launch_dur_ns BIGINT [result] -- total time of the launch calls, ns (a graph launch counted once)
-- column: avg_launch_ns BIGINT [detail] -- average launch call duration, ns
-- column: avg_queue_delay_ns BIGINT [result] -- average kernel start minus launch call start, ns (includes the launch call itself)
-- column: max_queue_delay_ns BIGINT [detail] -- longest queue delay from the launch call's start, ns
-- column: avg_queue_delay_after_launch_ns BIGINT [result] -- average kernel start minus launch call end, ns (HTA's launch delay: time queued after the call returned; negative when the kernel started before the call returned)
-- column: max_queue_delay_after_launch_ns BIGINT [detail] -- longest queue delay from the launch call's end, ns
-- column: short_kernels BIGINT [detail] -- kernels that ran shorter than their launch call
-- column: short_kernel_pct DOUBLE [result] -- share of kernels shorter than their launch call, percent
-- column: kernel_dur_ns BIGINT [detail] -- total kernel time, ns
WITH k AS (
  SELECT k.run_id, coalesce(k.op_name, '(no op)') AS op_name, k.launch_event_id, k.dur_ns, k.queue_delay_ns,
         k.ts_ns - (l.ts_ns + l.dur_ns) AS queue_delay_after_launch_ns, l.dur_ns AS launch_dur
  FROM gpu_kernels k JOIN launches l ON l.run_id = k.run_id AND l.event_id = k.launch_event_id
  WHERE k.run_id IN (SELECT run_id FROM report_runs)
), per_launch AS (
  SELECT run_id, op_name, launch_event_id, any_value(launch_dur) AS launch_dur FROM k GROUP BY ALL
), launches_by_op AS (
  SELECT run_id, op_name, sum(launch_dur)::BIGINT AS launch_dur_ns, avg(launch_dur)::BIGINT AS avg_launch_ns
  FROM per_launch GROUP BY ALL
)
SELECT k.run_id, r.name AS run_name, k.op_name, count(*) AS kernels, any_value(l.launch_dur_ns) AS launch_dur_ns,
       any_value(l.avg_launch_ns) AS avg_launch_ns, avg(k.queue_delay_ns)::BIGINT AS avg_queue_delay_ns,
       max(k.queue_delay_ns) AS max_queue_delay_ns,
       avg(k.queue_delay_after_launch_ns)::BIGINT AS avg_queue_delay_after_launch_ns,
       max(k.queue_delay_after_launch_ns) AS max_queue_delay_after_launch_ns,
       count(*) FILTER (WHERE k.dur_ns < k.launch_dur) AS short_kernels,
       round(100.0 * count(*) FILTER (WHERE k.dur_ns < k.launch_dur) / count(*), 2) AS short_kernel_pct,
       sum(k.dur_ns)::BIGINT AS kernel_dur_ns
FROM k JOIN runs r USING (run_id) JOIN launches_by_op l USING (run_id, op_name)
GROUP BY k.run_id, r.name, k.op_name
ORDER BY k.run_id, launch_dur_ns DESC, k.op_name
