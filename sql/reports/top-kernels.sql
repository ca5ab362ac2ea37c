-- title: Top GPU kernels by total time
-- description: Kernels grouped by name with count, total, share, average, median, min, max and standard deviation of their durations, like nsys stats cuda_gpu_kern_sum.
-- per-run: true
-- empty: no GPU kernels in the selected runs
-- column: run_id VARCHAR [key] -- run of the kernels
-- column: run_name VARCHAR [key] -- name of the run
-- column: name VARCHAR [key] -- kernel name
-- column: instances BIGINT [result] -- number of launches of the kernel
-- column: total_dur_ns BIGINT [result] -- total GPU time, ns
-- column: time_pct DOUBLE [result] -- share of the run's total kernel time, percent
-- column: avg_ns BIGINT [result] -- average duration, ns
-- column: med_ns BIGINT [detail] -- median duration, ns
-- column: min_ns BIGINT [detail] -- shortest duration, ns
-- column: max_ns BIGINT [detail] -- longest duration, ns
-- column: stddev_ns BIGINT [detail] -- sample standard deviation of the duration, ns (NULL for one instance)
WITH k AS (
  -- the statistics per run and kernel name, from the packs where they hold them (view kernel_stats)
  SELECT * FROM kernel_stats WHERE run_id IN (SELECT run_id FROM report_runs)
)
SELECT k.run_id, r.name AS run_name, k.name, k.instances, k.total_dur_ns,
       round(100.0 * k.total_dur_ns / nullif(sum(k.total_dur_ns) OVER (PARTITION BY k.run_id), 0), 2) AS time_pct,
       k.avg_ns, k.med_ns, k.min_ns, k.max_ns, k.stddev_ns
FROM k JOIN runs r USING (run_id)
ORDER BY k.run_id, k.total_dur_ns DESC, k.name
