-- title: GPU utilization
-- description: Per run and device: compute, communication, memcpy and memset time, each by interval union (overlaps counted once), and idle time over two windows, named apart: idle_in_trace_ns over the whole trace (its span, CPU events included, so the time before the device's first and after its last GPU event counts as idle) and idle_in_device_window_ns over the device's own window from its first to its last GPU event (as HTA's get_temporal_breakdown and TraceLens's GPUEventAnalyser measure idle). The *_pct columns without a window in their name are shares of the trace's span.
-- per-run: true
-- empty: no GPU work in the selected runs
-- column: run_id VARCHAR [key] -- the run
-- column: run_name VARCHAR [key] -- name of the run
-- column: device BIGINT [key] -- GPU index
-- column: trace_span_ns BIGINT [detail] -- profiled span of the run (first event start to last event end, CPU and GPU), ns
-- column: device_window_ns BIGINT [detail] -- the device's own window: first start to last end of its kernels, memcpys and memsets, ns
-- column: busy_ns BIGINT [result] -- time the device ran anything (kernel, memcpy or memset), ns
-- column: compute_ns BIGINT [result] -- time running compute kernels, ns
-- column: communication_ns BIGINT [result] -- time running collective kernels (NCCL, RCCL, ...), ns
-- column: memcpy_ns BIGINT [detail] -- time copying memory, ns
-- column: memset_ns BIGINT [detail] -- time setting memory, ns
-- column: idle_in_trace_ns BIGINT [result] -- trace_span_ns minus busy_ns: idle over the whole trace, edges before the first and after the last GPU event included, ns
-- column: idle_in_device_window_ns BIGINT [result] -- device_window_ns minus busy_ns: idle between the device's first and last GPU event, ns
-- column: busy_in_trace_pct DOUBLE [result] -- busy share of the trace's span, percent
-- column: compute_pct DOUBLE [detail] -- compute share of the trace's span, percent
-- column: communication_pct DOUBLE [detail] -- communication share of the trace's span, percent
-- column: memcpy_pct DOUBLE [detail] -- memcpy share of the trace's span, percent
-- column: memset_pct DOUBLE [detail] -- memset share of the trace's span, percent
-- column: idle_in_trace_pct DOUBLE [detail] -- idle_in_trace_ns over trace_span_ns, percent
-- column: busy_in_device_window_pct DOUBLE [detail] -- busy share of the device's own window, percent
-- column: idle_in_device_window_pct DOUBLE [result] -- idle_in_device_window_ns over device_window_ns, percent (HTA's idle_time_pctg for a one-GPU rank)
WITH b AS (
  SELECT g.run_id, r.name AS run_name, g.device, r.end_ns - r.start_ns AS trace_span_ns, g.last_ns - g.first_ns AS device_window_ns,
         g.busy_ns, g.compute_ns, g.communication_ns, g.memcpy_ns, g.memset_ns
  FROM gpu_time() g JOIN runs r USING (run_id)
  WHERE g.run_id IN (SELECT run_id FROM report_runs)
)
SELECT run_id, run_name, device, trace_span_ns, device_window_ns, busy_ns, compute_ns, communication_ns, memcpy_ns, memset_ns,
       trace_span_ns - busy_ns AS idle_in_trace_ns,
       device_window_ns - busy_ns AS idle_in_device_window_ns,
       round(100.0 * busy_ns / nullif(trace_span_ns, 0), 2) AS busy_in_trace_pct,
       round(100.0 * compute_ns / nullif(trace_span_ns, 0), 2) AS compute_pct,
       round(100.0 * communication_ns / nullif(trace_span_ns, 0), 2) AS communication_pct,
       round(100.0 * memcpy_ns / nullif(trace_span_ns, 0), 2) AS memcpy_pct,
       round(100.0 * memset_ns / nullif(trace_span_ns, 0), 2) AS memset_pct,
       round(100.0 * (trace_span_ns - busy_ns) / nullif(trace_span_ns, 0), 2) AS idle_in_trace_pct,
       round(100.0 * busy_ns / nullif(device_window_ns, 0), 2) AS busy_in_device_window_pct,
       round(100.0 * (device_window_ns - busy_ns) / nullif(device_window_ns, 0), 2) AS idle_in_device_window_pct
FROM b
ORDER BY run_id, device
