-- title: Collectives (NCCL, RCCL, gloo)
-- description: Collective communication per run (rank) and message size: calls, bytes, time and bandwidth, from the `collectives` view: every kernel the communication rule counts (the same kernels as gpu-utilization's communication time), named by its `Collective name` arg where PyTorch wrote one (source 'args'), else through its launch by the args of the record_param_comms op around the launch call (source 'launch_op') or by the `nccl:*` annotation around it (source 'annotation', e.g. `nccl:all_to_all`, with its input size and dtype; the kernel name can be wrong: on HTA's sampled ranks the all-to-all, all-reduce and all-gather kernels are all `ncclKernel_SendRecv_*`), else by its kernel name (source 'kernel_name', message size unknown), and the CPU-side record_param_comms ops. The rule (macro kernel_collective) counts NCCL/RCCL kernels and kernels named after a collective; HTA 0.5.0's is_comm_kernel counts names matching `^nccl.*Kernel` (ncclKernel_* and NCCL 2.19's ncclDevKernel_*, not RCCL's or symmetric-memory kernels; HTA before 0.5 counted names containing `ncclKernel`), TraceLens's GPUEventAnalyser names its is_communication_string matches (NCCL/RCCL patterns; older versions: names containing `nccl`). Bandwidth follows nccl-tests: the message is the output buffer for allgather and the input buffer otherwise (TraceLens's 'Full msg size'), algorithm bandwidth is message bytes over kernel time, bus bandwidth scales it by NCCL's factor for the collective and the number of ranks (macro busbw_factor). A collective kernel's time includes waiting for the other ranks to arrive, so the slowest rank of a collective is usually the one that arrived first; the rank the others waited for is in the ranks report.
-- empty: no communication kernel (NCCL, RCCL, gloo) in the selected runs
-- column: run_id VARCHAR [key] -- the run
-- column: run_name VARCHAR [key] -- name of the run
-- column: rank BIGINT [key] -- rank of the run in its job
-- column: side VARCHAR [key] -- 'gpu' for collective kernels, 'cpu' for the CPU-side record_param_comms ops
-- column: collective VARCHAR [key] -- collective family: allreduce, allgather, reducescatter, alltoall, broadcast, reduce, sendrecv, ...; 'unknown' for a kernel whose name names none (ncclDevKernel_Generic)
-- column: collective_arg VARCHAR [key] -- the collective's name as written: the `Collective name` arg (e.g. `_allgather_base`), or the annotation's name after `nccl:` (e.g. `all_to_all`); NULL when derived from the kernel name
-- column: source VARCHAR [detail] -- where collective, dtype and size come from (collectives.source): 'args' (the event's own), 'launch_op' (the record_param_comms op around the kernel's launch), 'annotation' (the `nccl:*` annotation around the launch; input size only, so no message size for allgather) or 'kernel_name' (no size)
-- column: dtype VARCHAR [key] -- element type, torch name (float32, bfloat16, ...); NULL when unknown (kernels that only move bytes)
-- column: msg_bytes BIGINT [key] -- message size of each call, bytes (collectives.msg_bytes): output bytes for allgather, input bytes otherwise (nccl-tests' size); NULL when unknown
-- column: group_size BIGINT [detail] -- ranks taking part, the n of busbw_factor (collectives.n_ranks): the `Group size` arg PyTorch writes, else the run's world size (distributedInfo); NULL when unknown
-- column: calls BIGINT [result] -- number of collective events
-- column: avg_in_nelems BIGINT [detail] -- average input message size, elements; NULL when unknown
-- column: max_in_nelems BIGINT [detail] -- largest input message, elements; NULL when unknown
-- column: total_bytes BIGINT [detail] -- input bytes over all calls (elements x element size); NULL when unknown
-- column: total_dur_ns BIGINT [result] -- total time of the events (plain sum), ns
-- column: avg_dur_ns BIGINT [detail] -- average time per call, ns
-- column: algbw_gb_s DOUBLE [detail] -- algorithm bandwidth: msg_bytes x calls over total_dur_ns, GB/s (1e9 bytes per second); GPU rows only, NULL when the size is unknown
-- column: busbw_gb_s DOUBLE [result] -- bus bandwidth: algbw_gb_s x busbw_factor(collective, group_size) (allreduce 2(n-1)/n; allgather, reducescatter, alltoall (n-1)/n; broadcast, reduce, sendrecv 1), GB/s; NULL when group size, message size or factor is unknown
-- column: slowest_rank BIGINT [detail] -- GPU rows: of the selected runs of this run's job (view run_jobs) that have the same collective, arg, dtype and message size, the rank with the longest average time per call (lowest bandwidth; lowest rank on a tie); NULL when the job has no other such run
-- column: run_comm_busy_ns BIGINT [detail] -- the run's GPU communication time: all its collective kernels by interval union per device, summed over devices (= gpu-utilization's communication_ns summed over the run's devices), ns; the same on every row of the run
WITH busy AS (
  -- the union of the run's communication kernels per device (gpu_time's sweep, from the packs
  -- where they hold it), summed over its devices
  SELECT run_id, sum(communication_ns)::BIGINT AS busy_ns FROM gpu_time()
  WHERE run_id IN (SELECT run_id FROM report_runs) GROUP BY run_id
), g AS (
  SELECT c.*, r.name AS run_name, r.rank, j.job_id, coalesce(b.busy_ns, 0) AS run_comm_busy_ns
  FROM collective_bandwidth((SELECT list(run_id) FROM report_runs)) c
  JOIN runs r USING (run_id) JOIN run_jobs j USING (run_id) LEFT JOIN busy b USING (run_id)
), bw AS (
  SELECT *, CASE WHEN side = 'gpu' THEN count(*) OVER same > 1 END AS has_peers,
         CASE WHEN side = 'gpu' THEN first_value(rank) OVER (same ORDER BY avg_dur_ns DESC, rank NULLS LAST) END AS slowest
  FROM g
  WINDOW same AS (PARTITION BY job_id, side, collective, collective_arg, source, dtype, msg_bytes)
)
SELECT run_id, run_name, rank, side, collective, collective_arg, source, dtype, msg_bytes, n_ranks AS group_size, calls,
       avg_in_nelems, max_in_nelems, total_bytes, total_dur_ns, avg_dur_ns,
       round(algbw_gb_s, 3) AS algbw_gb_s, round(busbw_gb_s, 3) AS busbw_gb_s,
       CASE WHEN has_peers THEN slowest END AS slowest_rank, run_comm_busy_ns
FROM bw
ORDER BY run_id, side DESC, total_dur_ns DESC, collective, collective_arg, dtype, msg_bytes
