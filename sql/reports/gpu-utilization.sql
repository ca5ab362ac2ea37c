-- title: GPU utilization
-- description: Per run and device: compute, communication, memcpy and memset time, each by interval union (overlaps counted once), and idle time over two windows: the whole trace (span) and the device's own window from its first to its last GPU event (as HTA's temporal breakdown and TraceLens measure idle).
-- per-run: true
-- empty: no GPU work in the selected runs
-- column: run_id VARCHAR [key] -- the run
-- column: run_name VARCHAR [key] -- name of the run
-- column: device BIGINT [key] -- GPU index
-- column: span_ns BIGINT [detail] -- profiled span of the run (first event start to last event end, CPU and GPU), ns
-- column: gpu_window_ns BIGINT [detail] -- the device's own window: first start to last end of its kernels, memcpys and memsets, ns
-- column: busy_ns BIGINT [result] -- time the device ran anything (kernel, memcpy or memset), ns
-- column: compute_ns BIGINT [result] -- time running compute kernels, ns
-- column: communication_ns BIGINT [result] -- time running collective kernels (NCCL, RCCL, ...), ns
-- column: memcpy_ns BIGINT [detail] -- time copying memory, ns
-- column: memset_ns BIGINT [detail] -- time setting memory, ns
-- column: idle_ns BIGINT [result] -- span_ns minus busy_ns: idle over the whole trace, ns
-- column: gpu_window_idle_ns BIGINT [detail] -- gpu_window_ns minus busy_ns: idle between the device's first and last GPU event, ns
-- column: busy_pct DOUBLE [result] -- busy share of the span, percent
-- column: compute_pct DOUBLE [detail] -- compute share of the span, percent
-- column: communication_pct DOUBLE [detail] -- communication share of the span, percent
-- column: memcpy_pct DOUBLE [detail] -- memcpy share of the span, percent
-- column: memset_pct DOUBLE [detail] -- memset share of the span, percent
-- column: idle_pct DOUBLE [detail] -- idle share of the span, percent
-- column: gpu_window_busy_pct DOUBLE [detail] -- busy share of the device's own window, percent
-- column: gpu_window_idle_pct DOUBLE [result] -- idle share of the device's own window, percent (HTA's idle_time_pctg for a one-GPU trace)
WITH b AS (
  SELECT g.run_id, r.name AS run_name, g.device, r.end_ns - r.start_ns AS span_ns, g.last_ns - g.first_ns AS gpu_window_ns,
         g.busy_ns, g.compute_ns, g.communication_ns, g.memcpy_ns, g.memset_ns
  FROM gpu_time() g JOIN runs r USING (run_id)
  WHERE g.run_id IN (SELECT run_id FROM report_runs)
)
SELECT run_id, run_name, device, span_ns, gpu_window_ns, busy_ns, compute_ns, communication_ns, memcpy_ns, memset_ns,
       span_ns - busy_ns AS idle_ns,
       gpu_window_ns - busy_ns AS gpu_window_idle_ns,
       round(100.0 * busy_ns / nullif(span_ns, 0), 2) AS busy_pct,
       round(100.0 * compute_ns / nullif(span_ns, 0), 2) AS compute_pct,
       round(100.0 * communication_ns / nullif(span_ns, 0), 2) AS communication_pct,
       round(100.0 * memcpy_ns / nullif(span_ns, 0), 2) AS memcpy_pct,
       round(100.0 * memset_ns / nullif(span_ns, 0), 2) AS memset_pct,
       round(100.0 * (span_ns - busy_ns) / nullif(span_ns, 0), 2) AS idle_pct,
       round(100.0 * busy_ns / nullif(gpu_window_ns, 0), 2) AS gpu_window_busy_pct,
       round(100.0 * (gpu_window_ns - busy_ns) / nullif(gpu_window_ns, 0), 2) AS gpu_window_idle_pct
FROM b
ORDER BY run_id, device
