-- title: CPU time blocked in synchronizing calls
-- description: Per run: the runtime and driver calls that block the CPU thread until the GPU is done (macro is_sync_call_name: cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize, synchronous cudaMemcpy, hipDeviceSynchronize, hipMemcpyWithStream, ...), grouped by call, the CPU op around it and its Python call site, most blocked time first. While the CPU waits here it launches nothing, so the GPU runs dry after the sync: the host_wait gaps of the idle report often follow these calls. torch's .item(), .cpu(), .tolist(), printing a CUDA tensor and non_blocking=False copies end here.
-- per-run: true
-- empty: the selected runs call no synchronizing runtime or driver function (is_sync_call_name), or record no cuda_runtime / cuda_driver events
-- column: run_id VARCHAR [key] -- the run
-- column: run_name VARCHAR [key] -- name of the run
-- column: call VARCHAR [key] -- the synchronizing runtime/driver call, e.g. cudaStreamSynchronize
-- column: op_name VARCHAR [key] -- innermost CPU op around the call (e.g. aten::_local_scalar_dense for .item()); NULL when none
-- column: top_op_name VARCHAR [key] -- outermost CPU op around the call; NULL when none
-- column: call_site VARCHAR [key] -- innermost user frame of the call's Python stack; NULL without Python stacks
-- column: calls BIGINT [result] -- number of calls
-- column: total_dur_ns BIGINT [result] -- CPU time spent in the calls, ns
-- column: avg_dur_ns BIGINT [detail] -- average time per call, ns
-- column: max_dur_ns BIGINT [detail] -- longest call, ns
-- column: run_sync_ns BIGINT [detail] -- CPU time in all synchronizing calls of the run, ns (the same on every row of the run)
WITH s AS (
  SELECT e.run_id, e.name AS call, e.dur_ns, o.name AS op_name, t.name AS top_op_name, cs.call_site
  FROM events e
  LEFT JOIN (SELECT run_id, event_id, name FROM events WHERE is_cpu_op) o ON o.run_id = e.run_id AND o.event_id = e.cpu_op_id
  LEFT JOIN (SELECT run_id, event_id, name FROM events WHERE is_top_level_op) t ON t.run_id = e.run_id AND t.event_id = e.top_op_id
  LEFT JOIN call_sites cs ON cs.run_id = e.run_id AND cs.stack_id = e.stack_id
  WHERE e.phase = 'X' AND e.category IN (SELECT category FROM event_categories WHERE is_runtime)
    AND is_sync_call_name(e.name) AND e.run_id IN (SELECT run_id FROM report_runs)
)
SELECT s.run_id, r.name AS run_name, s.call, s.op_name, s.top_op_name, s.call_site, count(*) AS calls,
       sum(s.dur_ns)::BIGINT AS total_dur_ns, avg(s.dur_ns)::BIGINT AS avg_dur_ns, max(s.dur_ns) AS max_dur_ns,
       (sum(sum(s.dur_ns)) OVER (PARTITION BY s.run_id))::BIGINT AS run_sync_ns
FROM s JOIN runs r USING (run_id)
GROUP BY s.run_id, r.name, s.call, s.op_name, s.top_op_name, s.call_site
ORDER BY s.run_id, total_dur_ns DESC, s.call, s.op_name, s.call_site
