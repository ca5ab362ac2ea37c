-- title: Communication and memcpy overlap with compute
-- description: Per run (rank): how much of its GPU communication and memory copies ran while compute kernels ran, and how much was exposed (nothing to hide it behind). One row for the whole run (step NULL) and one per profiler step (GPU work belongs to the step of its launch, so work without a launch in the trace counts only in the whole-run row). All times by interval union per device (overlapping work counted once), summed over the run's devices; overlap only counts within one device. Compute is every kernel the communication rule (macro kernel_collective) does not count; memsets are neither. overlap_pct is HTA's get_comm_comp_overlap (communication time while compute runs over communication time); exposed_comm_ns is TraceLens's exposed_comm_time (GPUEventAnalyser.compute_metrics_dict: communication minus the union of computation) except that TraceLens counts memsets (gpu_memset) as computation, so a memset running under a collective hides communication there and not here and exposed_memcpy_ns its exposed_memcpy_time. HTA merges the kernels of all devices of a rank into one timeline, traceduck keeps devices apart; for a one-GPU rank both agree.
-- per-run: true
-- empty: the selected runs have no GPU kernels
-- param: linked_only BOOLEAN = false -- count only GPU work whose launching runtime call is in the trace (linked by correlation)
-- column: run_id VARCHAR [key] -- the run
-- column: run_name VARCHAR [key] -- name of the run
-- column: rank BIGINT [key] -- rank of the run in its job (NULL when unknown)
-- column: step BIGINT [key] -- profiler step; NULL on the row for the whole run
-- column: devices BIGINT [detail] -- GPUs with work in the row
-- column: compute_ns BIGINT [result] -- time compute kernels ran (union), ns
-- column: comm_ns BIGINT [result] -- time communication kernels ran (union), ns
-- column: overlap_ns BIGINT [detail] -- time communication and compute kernels both ran, ns
-- column: overlap_pct DOUBLE [result] -- overlap_ns over comm_ns, percent (HTA's comp_comm_overlap_pctg); NULL without communication
-- column: exposed_comm_ns BIGINT [result] -- communication with no compute kernel running (comm_ns minus overlap_ns), ns
-- column: memcpy_ns BIGINT [detail] -- time memory copies ran (union), ns
-- column: memcpy_overlap_ns BIGINT [detail] -- time memory copies ran while compute kernels ran, ns
-- column: memcpy_overlap_pct DOUBLE [detail] -- memcpy_overlap_ns over memcpy_ns, percent; NULL without copies
-- column: exposed_memcpy_ns BIGINT [detail] -- memory copies with neither compute nor communication running, ns
-- column: busy_ns BIGINT [detail] -- time the GPU ran anything (kernel, memcpy or memset), ns
WITH sel AS (SELECT run_id FROM report_runs),
t AS (
  SELECT * FROM gpu_time(by_step := false, linked_only := $linked_only) WHERE run_id IN (SELECT run_id FROM sel)
  UNION ALL
  SELECT * FROM gpu_time(by_step := true, linked_only := $linked_only) WHERE run_id IN (SELECT run_id FROM sel)
), per_run AS (
  SELECT run_id, step, count(*) AS devices, sum(compute_ns)::BIGINT AS compute_ns, sum(communication_ns)::BIGINT AS comm_ns,
         sum(communication_overlap_ns)::BIGINT AS overlap_ns, sum(exposed_communication_ns)::BIGINT AS exposed_comm_ns,
         sum(memcpy_ns)::BIGINT AS memcpy_ns, sum(memcpy_overlap_ns)::BIGINT AS memcpy_overlap_ns,
         sum(exposed_memcpy_ns)::BIGINT AS exposed_memcpy_ns, sum(busy_ns)::BIGINT AS busy_ns
  FROM t GROUP BY run_id, step
)
SELECT p.run_id, r.name AS run_name, r.rank, p.step, p.devices, p.compute_ns, p.comm_ns, p.overlap_ns,
       round(100.0 * p.overlap_ns / nullif(p.comm_ns, 0), 2) AS overlap_pct, p.exposed_comm_ns,
       p.memcpy_ns, p.memcpy_overlap_ns, round(100.0 * p.memcpy_overlap_ns / nullif(p.memcpy_ns, 0), 2) AS memcpy_overlap_pct,
       p.exposed_memcpy_ns, p.busy_ns
FROM per_run p JOIN runs r USING (run_id)
ORDER BY p.run_id, p.step NULLS FIRST
