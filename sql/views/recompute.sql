-- requires: cpu
-- Activation checkpointing: the forward ops that run again during the backward pass.

-- Every CPU op run by activation-checkpointing recomputation (torch.utils.checkpoint): an op inside
-- a `CheckpointFunctionBackward` autograd node (use_reentrant=True: the node reruns the forward), or
-- one whose Python stack holds torch/utils/checkpoint.py's `backward`, `recompute_fn` or
-- `unpack_hook` frame (use_reentrant=False reruns it when backward unpacks a saved tensor); the
-- node itself is not a row. forward_calls counts the ops of the same step with the same name, input
-- dims and module path that are not recomputation: the forward calls it repeats (0: none found).
-- @columns-as cpu_ops: run_id, event_id, name, tid, ts_ns, self_dur_ns, module_path, step
-- @column input_dims_text VARCHAR The op's input dims as text (NULL without record_shapes).
-- @column marker VARCHAR What marks it as recomputation: the CheckpointFunctionBackward node's name, or the checkpoint.py frame.
-- @column forward_calls BIGINT Ops of the same step, name, input dims and module path outside recomputation.
CREATE OR REPLACE VIEW recomputed_ops AS
WITH nodes AS (
  SELECT run_id, event_id, name, pid, tid, ts_ns, dur_ns FROM cpu_ops WHERE name LIKE '%CheckpointFunctionBackward%'
), frames AS (
  SELECT run_id, stack_id, min(frame) AS frame
  FROM stacks
  WHERE file LIKE '%torch/utils/checkpoint.py' AND function IN ('backward', 'recompute_fn', 'unpack_hook')
  GROUP BY ALL
), in_node AS (
  SELECT o.run_id, o.event_id, min(n.name) AS marker
  FROM cpu_ops o JOIN nodes n
    ON n.run_id = o.run_id AND n.pid = o.pid AND n.tid = o.tid AND n.ts_ns <= o.ts_ns AND o.ts_ns < n.ts_ns + n.dur_ns
   AND n.event_id <> o.event_id
  GROUP BY ALL
), marked AS (
  SELECT run_id, event_id, min(marker) AS marker FROM (
    SELECT * FROM in_node
    UNION ALL
    SELECT o.run_id, o.event_id, f.frame FROM cpu_ops o JOIN frames f USING (run_id, stack_id)
    WHERE o.name NOT LIKE '%CheckpointFunctionBackward%'
  ) GROUP BY ALL
), ops AS (
  SELECT o.run_id, o.event_id, o.name, o.tid, o.ts_ns, o.self_dur_ns, o.module_path, o.step, i.input_dims_text,
         m.marker
  FROM cpu_ops o
  LEFT JOIN op_inputs i USING (run_id, event_id)
  LEFT JOIN marked m USING (run_id, event_id)
  WHERE o.run_id IN (SELECT run_id FROM marked)
), forward AS (
  SELECT run_id, step, name, input_dims_text, module_path, count(*) AS n
  FROM ops WHERE marker IS NULL GROUP BY ALL
)
SELECT r.run_id, r.event_id, r.name, r.tid, r.ts_ns, r.self_dur_ns, r.module_path, r.step, r.input_dims_text, r.marker,
       coalesce(f.n, 0) AS forward_calls
FROM ops r
LEFT JOIN forward f
  ON f.run_id = r.run_id AND f.step IS NOT DISTINCT FROM r.step AND f.name = r.name
 AND f.input_dims_text IS NOT DISTINCT FROM r.input_dims_text AND f.module_path IS NOT DISTINCT FROM r.module_path
WHERE r.marker IS NOT NULL;
