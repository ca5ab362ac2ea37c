-- title: Critical path per profiler step
-- description: Per run and ProfilerStep: the chain of dependent events that set the step's end-to-end time (CPU -> launch -> kernel -> next kernel on the stream or on a stream waiting for it, kernel -> synchronizing call or blocking copy -> CPU), found by a backward walk from the step's last-finishing event, as in HTA's critical-path analysis, and what it is made of. The breakdown columns add up to dur_ns. A run without profiler steps gives one row (step NULL) for the whole run. The view critical_path lists each step's path element by element; sql/views/critical_path.sql says which edges are inferred.
-- per-run: true
-- empty: the selected runs have no CPU ops, runtime calls or GPU work
-- column: run_id VARCHAR [key] -- the run
-- column: run_name VARCHAR [key] -- name of the run
-- column: step BIGINT [key] -- N of ProfilerStep#N; NULL for a run without steps
-- column: ts_ns BIGINT [detail] -- start of the step (its CPU window), ns
-- column: dur_ns BIGINT [result] -- end-to-end time of the step (to the later of its CPU window's end and the end of the last GPU work it launched) = length of the critical path, ns
-- column: cpu_ns BIGINT [result] -- CPU-bound time on the path: a CPU thread running ops, Python or idle up to a launch, ns
-- column: gpu_compute_ns BIGINT [result] -- compute kernels on the path, ns
-- column: communication_ns BIGINT [result] -- communication kernels (NCCL, RCCL, ...) on the path, ns
-- column: gpu_copy_ns BIGINT [detail] -- GPU memory copies and sets on the path, ns
-- column: launch_ns BIGINT [detail] -- launch latency on the path: from a launch call's start to its work's start, ns
-- column: kernel_gap_ns BIGINT [detail] -- kernel-to-kernel overhead on the path: a stream idle while its next work was already launched, or waiting for work on another stream (cudaStreamWaitEvent), ns
-- column: sync_ns BIGINT [detail] -- synchronizing calls on the path, from the end of the work they waited for to their return (the whole call when the work was already done), ns
-- column: unattributed_ns BIGINT [detail] -- time before GPU work with neither a launch in the trace nor earlier work on its stream, ns
-- column: bound VARCHAR [result] -- the largest part: cpu, gpu_compute, communication, gpu_copy, launch, kernel_gap, sync or unattributed
-- column: elements BIGINT [detail] -- elements on the path (rows of the critical_path view)
-- column: kernels_on_path BIGINT [detail] -- GPU kernels, copies and sets on the path (those the path's gpu chains cover)
-- column: longest_event VARCHAR [detail] -- name of the event of the path's longest element that has one: an outermost CPU op on a run without GPU work, else the last kernel of a gpu chain, a synchronizing call, ...
-- column: longest_event_ns BIGINT [detail] -- length of that element, ns
-- column: inferred_waits BIGINT [detail] -- stream waits on the path inferred from a wait call without Kineto's record (edge inferred_wait in the critical_path view)
WITH p AS (
  SELECT * FROM critical_path_of((SELECT list(run_id) FROM report_runs))
), s AS (
  SELECT run_id, step, min(window_start_ns) AS ts_ns, max(window_end_ns) - min(window_start_ns) AS dur_ns,
         sum(cpu_ns)::BIGINT AS cpu_ns, sum(gpu_compute_ns)::BIGINT AS gpu_compute_ns,
         sum(communication_ns)::BIGINT AS communication_ns, sum(gpu_copy_ns)::BIGINT AS gpu_copy_ns,
         sum(launch_ns)::BIGINT AS launch_ns, sum(kernel_gap_ns)::BIGINT AS kernel_gap_ns,
         sum(sync_ns)::BIGINT AS sync_ns, sum(unattributed_ns)::BIGINT AS unattributed_ns, count(*) AS elements,
         sum(works)::BIGINT AS kernels_on_path, arg_max(event_id, dur_ns) FILTER (WHERE event_id IS NOT NULL) AS longest_id,
         max(dur_ns) FILTER (WHERE event_id IS NOT NULL) AS longest_event_ns, count(*) FILTER (WHERE edge = 'inferred_wait') AS inferred_waits
  FROM p GROUP BY run_id, step
)
SELECT s.run_id, r.name AS run_name, s.step, s.ts_ns, s.dur_ns, s.cpu_ns, s.gpu_compute_ns, s.communication_ns,
       s.gpu_copy_ns, s.launch_ns, s.kernel_gap_ns, s.sync_ns, s.unattributed_ns,
       (SELECT arg_max(k, v) FROM (SELECT unnest(['cpu', 'gpu_compute', 'communication', 'gpu_copy', 'launch', 'kernel_gap', 'sync', 'unattributed']) AS k,
                                          unnest([s.cpu_ns, s.gpu_compute_ns, s.communication_ns, s.gpu_copy_ns, s.launch_ns, s.kernel_gap_ns, s.sync_ns, s.unattributed_ns]) AS v)) AS bound,
       s.elements, s.kernels_on_path, e.name AS longest_event, s.longest_event_ns, s.inferred_waits
FROM s JOIN runs r USING (run_id) LEFT JOIN events e ON e.run_id = s.run_id AND e.event_id = s.longest_id
ORDER BY s.run_id, s.step
