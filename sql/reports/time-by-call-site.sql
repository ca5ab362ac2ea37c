-- title: CPU and GPU time by Python call site
-- description: CPU op self time and GPU kernel time attributed to the Python call site (and nn.Module path) that caused them, biggest first.
-- per-run: true
-- empty: no CPU ops in the selected runs
-- column: run_id VARCHAR [key] -- the run
-- column: run_name VARCHAR [key] -- name of the run
-- column: call_site VARCHAR [key] -- innermost user frame ('(no Python stack)' when the trace has none)
-- column: module_path VARCHAR [detail] -- nn.Module chain, outermost first (when several reach the call site: that of its op with the most self time)
-- column: cpu_self_dur_ns BIGINT [result] -- self time of the CPU ops called from here, ns
-- column: cpu_pct DOUBLE [result] -- share of the run's CPU op self time, percent
-- column: gpu_dur_ns BIGINT [result] -- time of the GPU kernels launched from here, ns
-- column: gpu_pct DOUBLE [result] -- share of the run's GPU kernel time, percent
-- column: kernels BIGINT [detail] -- number of kernels launched from here
WITH cpu AS (
  SELECT run_id, coalesce(call_site, '(no Python stack)') AS call_site, arg_max(module_path, (self_dur_ns, module_path)) AS module_path,
         sum(self_dur_ns) AS cpu_ns
  FROM cpu_ops WHERE run_id IN (SELECT run_id FROM report_runs) GROUP BY 1, 2
), gpu AS (
  SELECT run_id, coalesce(call_site, '(no Python stack)') AS call_site, sum(dur_ns) AS gpu_ns, count(*) AS kernels
  FROM gpu_kernels WHERE run_id IN (SELECT run_id FROM report_runs) GROUP BY 1, 2
), j AS (
  SELECT coalesce(c.run_id, g.run_id) AS run_id, coalesce(c.call_site, g.call_site) AS call_site, c.module_path,
         coalesce(c.cpu_ns, 0)::BIGINT AS cpu_self_dur_ns, coalesce(g.gpu_ns, 0)::BIGINT AS gpu_dur_ns,
         coalesce(g.kernels, 0) AS kernels
  FROM cpu c FULL OUTER JOIN gpu g ON c.run_id = g.run_id AND c.call_site = g.call_site
)
SELECT j.run_id, r.name AS run_name, j.call_site, j.module_path, j.cpu_self_dur_ns,
       round(100.0 * j.cpu_self_dur_ns / nullif(sum(j.cpu_self_dur_ns) OVER (PARTITION BY j.run_id), 0), 2) AS cpu_pct,
       j.gpu_dur_ns,
       round(100.0 * j.gpu_dur_ns / nullif(sum(j.gpu_dur_ns) OVER (PARTITION BY j.run_id), 0), 2) AS gpu_pct,
       j.kernels
FROM j JOIN runs r USING (run_id)
ORDER BY j.run_id, greatest(cpu_pct, coalesce(gpu_pct, 0)) DESC NULLS LAST, j.call_site
