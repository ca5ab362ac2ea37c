-- title: CUDA and HIP graph launches
-- description: Each graph launch with its call site and op, the kernels it ran, their GPU time and share of the run's kernel time. Per-op attribution inside a graph is not in the trace.
-- column: run_id VARCHAR -- the run
-- column: run_name VARCHAR -- name of the run
-- column: launch_event_id BIGINT -- the cudaGraphLaunch / hipGraphLaunch call
-- column: ts_ns BIGINT -- start of the launch call, ns (absolute, as in events.ts_ns)
-- column: rel_ts_ns BIGINT -- the same from the run's start (runs.start_ns), ns
-- column: step BIGINT -- profiler step of the launch
-- column: op_name VARCHAR -- CPU op around the launch call
-- column: call_site VARCHAR -- innermost user frame of the launch's Python stack
-- column: kernels BIGINT -- kernels the launch ran
-- column: gpu_dur_ns BIGINT -- total time of those kernels, ns
-- column: gpu_pct DOUBLE -- share of the run's total kernel time, percent
WITH totals AS (
  SELECT run_id, sum(dur_ns) AS total FROM gpu_kernels WHERE run_id IN (SELECT run_id FROM report_runs) GROUP BY 1
)
SELECT l.run_id, r.name AS run_name, l.event_id AS launch_event_id, l.ts_ns, l.ts_ns - any_value(r.start_ns) AS rel_ts_ns, l.step, l.op_name, l.call_site,
       count(k.event_id) AS kernels, coalesce(sum(k.dur_ns), 0)::BIGINT AS gpu_dur_ns,
       round(100.0 * coalesce(sum(k.dur_ns), 0) / nullif(any_value(t.total), 0), 2) AS gpu_pct
FROM launches l JOIN runs r USING (run_id) LEFT JOIN totals t USING (run_id)
LEFT JOIN gpu_kernels k ON k.run_id = l.run_id AND k.launch_event_id = l.event_id
WHERE l.is_graph_launch AND l.run_id IN (SELECT run_id FROM report_runs)
GROUP BY l.run_id, r.name, l.event_id, l.ts_ns, l.step, l.op_name, l.call_site
ORDER BY l.run_id, l.ts_ns
