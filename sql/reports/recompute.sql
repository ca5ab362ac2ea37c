-- title: Activation-checkpointing recomputation: forward ops run again in backward
-- description: Per run, profiler step, op, input dims and module path: the CPU ops that activation checkpointing (torch.utils.checkpoint) runs a second time during the backward pass (view recomputed_ops: inside a CheckpointFunctionBackward node, or under torch/utils/checkpoint.py's recompute frames), with the forward calls of the same step they repeat, their CPU self time and the GPU time of the kernels they launched: what checkpointing costs per step, against the memory it saves. Like TraceLens's recompute detection, an op counts when it matches a forward op of the same step by name, input dims and module path; --param matched_only=false lists the unmatched recomputed ops too.
-- per-run: true
-- empty: no activation-checkpointing recomputation in the selected runs (no CheckpointFunctionBackward node or torch/utils/checkpoint.py recompute frame)
-- param: matched_only BOOLEAN = true -- only ops that match a forward op of the same step (name, input dims, module path)
-- column: run_id VARCHAR [key] -- the run
-- column: run_name VARCHAR [key] -- name of the run
-- column: step BIGINT [key] -- profiler step of the recomputation (NULL outside steps)
-- column: name VARCHAR [key] -- op name
-- column: input_dims VARCHAR [key] -- input dims of the op (NULL without record_shapes)
-- column: module_path VARCHAR [key] -- nn.Module path of the op (NULL without with_modules)
-- column: calls BIGINT [result] -- recomputed calls
-- column: forward_calls BIGINT [detail] -- forward calls of the same step with the same name, dims and module path
-- column: self_ns BIGINT [result] -- CPU self time of the recomputed calls, ns
-- column: gpu_ns BIGINT [result] -- GPU time of the kernels the recomputed calls launched, ns
-- column: step_gpu_pct DOUBLE [detail] -- gpu_ns over the GPU time of all kernels launched in the step, percent
WITH r AS (
  SELECT * FROM recomputed_ops
  WHERE run_id IN (SELECT run_id FROM report_runs) AND (NOT $matched_only OR forward_calls > 0)
), k AS (
  SELECT run_id, op_event_id, step, dur_ns FROM gpu_kernels WHERE run_id IN (SELECT run_id FROM r)
), gpu AS (
  SELECT run_id, op_event_id AS event_id, sum(dur_ns) AS gpu_ns FROM k GROUP BY ALL
), step_gpu AS (
  SELECT run_id, step, sum(dur_ns) AS step_ns FROM k GROUP BY ALL
), agg AS (
  SELECT r.run_id, r.step, r.name, r.input_dims_text AS input_dims, r.module_path, count(*) AS calls,
         max(r.forward_calls) AS forward_calls, sum(r.self_dur_ns)::BIGINT AS self_ns, coalesce(sum(g.gpu_ns), 0)::BIGINT AS gpu_ns
  FROM r LEFT JOIN gpu g USING (run_id, event_id)
  GROUP BY ALL
)
SELECT a.run_id, x.name AS run_name, a.step, a.name, a.input_dims, a.module_path, a.calls, a.forward_calls, a.self_ns, a.gpu_ns,
       round(100.0 * a.gpu_ns / nullif(s.step_ns, 0), 2) AS step_gpu_pct
FROM agg a JOIN runs x USING (run_id)
LEFT JOIN step_gpu s ON s.run_id = a.run_id AND s.step IS NOT DISTINCT FROM a.step
ORDER BY a.run_id, a.step NULLS LAST, a.gpu_ns DESC, a.self_ns DESC, a.name, a.input_dims, a.module_path
