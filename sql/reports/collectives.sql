-- title: Collectives (NCCL, RCCL, gloo)
-- description: Collective communication per run (rank): calls, message sizes, bytes and time, from the `collectives` view: every kernel the communication rule counts (the same kernels as gpu-utilization's communication time), named by its `Collective name` arg where PyTorch wrote one, else by its kernel name (source 'kernel_name', message size unknown), and the CPU-side record_param_comms ops. The rule (macro kernel_collective) counts NCCL/RCCL kernels and kernels named after a collective; HTA counts only names containing `ncclKernel` (not ncclDevKernel_* of NCCL 2.19 on, nor symmetric-memory kernels), TraceLens names containing `nccl`.
-- column: run_id VARCHAR -- the run
-- column: run_name VARCHAR -- name of the run
-- column: rank BIGINT -- rank of the run in its job
-- column: side VARCHAR -- 'gpu' for collective kernels, 'cpu' for the CPU-side record_param_comms ops
-- column: collective VARCHAR -- collective family: allreduce, allgather, reducescatter, alltoall, broadcast, reduce, sendrecv, ...; 'unknown' for a kernel whose name names none (ncclDevKernel_Generic)
-- column: collective_arg VARCHAR -- the `Collective name` arg as written (e.g. `_allgather_base`); NULL when derived from the kernel name
-- column: source VARCHAR -- where collective and dtype come from: 'args' or 'kernel_name'
-- column: dtype VARCHAR -- element type, torch name (float32, bfloat16, ...); NULL when unknown (kernels that only move bytes)
-- column: calls BIGINT -- number of collective events
-- column: avg_in_nelems BIGINT -- average input message size, elements; NULL when unknown
-- column: max_in_nelems BIGINT -- largest input message, elements; NULL when unknown
-- column: total_bytes BIGINT -- input bytes over all calls (elements x element size); NULL when unknown
-- column: total_dur_ns BIGINT -- total time of the events (plain sum), ns
-- column: avg_dur_ns BIGINT -- average time per call, ns
-- column: run_comm_busy_ns BIGINT -- the run's GPU communication time: all its collective kernels by interval union per device, summed over devices (= gpu-utilization's communication_ns summed over the run's devices), ns; the same on every row of the run
WITH c AS (
  SELECT * FROM collectives WHERE run_id IN (SELECT run_id FROM report_runs)
), busy AS (
  SELECT run_id, sum(busy_ns)::BIGINT AS busy_ns FROM busy_time(['communication'], false)
  WHERE lane LIKE 'gpu:%' AND run_id IN (SELECT run_id FROM report_runs) GROUP BY run_id
)
SELECT c.run_id, r.name AS run_name, r.rank, c.side, c.collective, c.collective_arg, c.source, c.dtype, count(*) AS calls,
       avg(c.in_nelems)::BIGINT AS avg_in_nelems, max(c.in_nelems) AS max_in_nelems,
       sum(c.in_bytes)::BIGINT AS total_bytes, sum(c.dur_ns)::BIGINT AS total_dur_ns,
       avg(c.dur_ns)::BIGINT AS avg_dur_ns, coalesce(any_value(b.busy_ns), 0) AS run_comm_busy_ns
FROM c JOIN runs r USING (run_id) LEFT JOIN busy b USING (run_id)
GROUP BY c.run_id, r.name, r.rank, c.side, c.collective, c.collective_arg, c.source, c.dtype
ORDER BY c.run_id, c.side DESC, total_dur_ns DESC, c.collective, c.collective_arg, c.dtype
