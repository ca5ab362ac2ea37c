-- title: Collectives (NCCL, RCCL, gloo)
-- description: Collective communication per run (rank): calls, message sizes, bytes and time, from events that carry a `Collective name` arg (NCCL/RCCL kernels on the GPU, record_param_comms ops on the CPU).
-- column: run_id VARCHAR -- the run
-- column: run_name VARCHAR -- name of the run
-- column: rank BIGINT -- rank of the run in its job
-- column: side VARCHAR -- 'gpu' for collective kernels, 'cpu' for the CPU-side record_param_comms ops
-- column: collective VARCHAR -- collective name: allreduce, allgather, broadcast, ...
-- column: dtype VARCHAR -- element type in torch's spelling (float32, bfloat16, ...; the trace's c10 name Float, BFloat16, ... mapped through `dtypes`), NULL when unknown
-- column: calls BIGINT -- number of collective events
-- column: avg_in_nelems BIGINT -- average input message size, elements
-- column: max_in_nelems BIGINT -- largest input message, elements
-- column: total_bytes BIGINT -- input bytes over all calls (elements x element size)
-- column: total_dur_ns BIGINT -- total time of the events, ns
-- column: avg_dur_ns BIGINT -- average time per call, ns
WITH c AS (
  SELECT e.run_id, e.event_id, e.dur_ns, CASE WHEN e.on_device THEN 'gpu' ELSE 'cpu' END AS side,
         max(a.string_value) FILTER (WHERE a.key = 'Collective name') AS collective,
         max(a.string_value) FILTER (WHERE a.key = 'dtype') AS dtype,
         max(a.int_value) FILTER (WHERE a.key = 'In msg nelems') AS in_nelems
  FROM events e JOIN args a ON a.run_id = e.run_id AND a.event_id = e.event_id
  WHERE e.run_id IN (SELECT run_id FROM report_runs) AND e.phase = 'X'
    AND EXISTS (SELECT 1 FROM args k WHERE k.run_id = e.run_id AND k.event_id = e.event_id AND k.key = 'Collective name')
  GROUP BY e.run_id, e.event_id, e.dur_ns, e.on_device
)
SELECT c.run_id, r.name AS run_name, r.rank, c.side, c.collective, d.torch_name AS dtype, count(*) AS calls,
       avg(c.in_nelems)::BIGINT AS avg_in_nelems, max(c.in_nelems) AS max_in_nelems,
       sum(c.in_nelems * d.elem_bytes)::BIGINT AS total_bytes, sum(c.dur_ns)::BIGINT AS total_dur_ns,
       avg(c.dur_ns)::BIGINT AS avg_dur_ns
FROM c JOIN runs r USING (run_id)
LEFT JOIN (SELECT DISTINCT scalar_type_name, torch_name, elem_bytes FROM dtypes WHERE scalar_type_name IS NOT NULL) d
       ON d.scalar_type_name = c.dtype
GROUP BY c.run_id, r.name, r.rank, c.side, c.collective, d.torch_name
ORDER BY c.run_id, c.side DESC, total_dur_ns DESC
