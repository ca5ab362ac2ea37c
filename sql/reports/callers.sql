-- title: Who calls an op: the Python frames above it, bottom-up
-- description: The Python frames above the ops that match --param op, call_site and dims (bottom-up, as pprof's -peek and speedscope's sandwich view show callers): per frame, the matching calls under it, their time, input bytes and share, innermost frames first and the outermost last. --param metric=gpu counts the GPU time of the kernels the ops launched.
-- per-run: true
-- empty: no op matches the parameters (report ops-by-shape lists ops, their dims and call sites), or the trace has no Python stacks (profile with with_stack=True)
-- param: op VARCHAR = '' -- op name, e.g. aten::mul ('' for any op)
-- param: call_site VARCHAR = '' -- call site as reports show it, e.g. 'attn/indexer.py(16): score' ('' for any)
-- param: dims VARCHAR = '' -- input dims as reports show them, ranges included, e.g. '[[8, 1005..1007, 64], []]' ('' for any)
-- param: metric VARCHAR = cpu {cpu|gpu} -- cpu: self time of the ops; gpu: time of the kernels they launched
-- column: run_id VARCHAR [key] -- the run
-- column: run_name VARCHAR [key] -- name of the run
-- column: frame VARCHAR [key] -- a Python frame above the matching ops, `file(line): function` (built-in and nn.Module frames as written)
-- column: level BIGINT [detail] -- how far above the ops the frame sits (0: their innermost frame), the least over their stacks
-- column: calls BIGINT [result] -- matching calls with the frame on their stack
-- column: time_ns BIGINT [result] -- their time: self time (metric cpu) or time of the kernels they launched (metric gpu), ns
-- column: time_pct DOUBLE [result] -- share of all matching calls' time, percent
-- column: input_bytes BIGINT [detail] -- bytes of their tensor inputs
-- column: calls_per_step DOUBLE [detail] -- calls inside profiler steps divided by the run's profiled steps (NULL without steps)
-- column: time_per_step_ns BIGINT [result] -- time inside profiler steps divided by the run's profiled steps, ns (NULL without steps)
WITH calls AS (
  -- the matching calls (their dims read only when the dims are asked for, and then only of the op asked for)
  SELECT c.run_id, c.event_id, c.stack_id, c.step, z.input_bytes,
         CASE WHEN $metric = 'cpu' THEN c.self_dur_ns ELSE g.gpu_ns END AS ns
  FROM cpu_ops c
  LEFT JOIN op_input_bytes_named(CASE WHEN $op = '' THEN NULL ELSE [$op] END) z ON z.run_id = c.run_id AND z.event_id = c.event_id
  LEFT JOIN (SELECT run_id, op_event_id, sum(dur_ns) AS gpu_ns FROM gpu_kernels
             WHERE $metric = 'gpu' AND run_id IN (SELECT run_id FROM report_runs) GROUP BY ALL) g
    ON g.run_id = c.run_id AND g.op_event_id = c.event_id
  WHERE c.run_id IN (SELECT run_id FROM report_runs) AND c.stack_id IS NOT NULL
    AND ($op = '' OR c.name = $op) AND ($call_site = '' OR c.call_site = $call_site)
    AND ($dims = '' OR (c.run_id, c.event_id) IN (
          SELECT (run_id, event_id)
          FROM op_shapes_named(CASE WHEN $dims = '' THEN []::VARCHAR[] WHEN $op = '' THEN NULL ELSE [$op] END)
          WHERE dims_text = $dims OR input_dims::VARCHAR = $dims))
    AND ($metric = 'cpu' OR g.gpu_ns IS NOT NULL)
), per_stack AS (
  -- the calls summed per stack first: every call of a stack has the same frames above it
  SELECT run_id, stack_id, count(*) AS calls, sum(ns) AS ns, sum(input_bytes) AS input_bytes,
         count(step) AS calls_in_steps, sum(ns) FILTER (WHERE step IS NOT NULL) AS ns_in_steps
  FROM calls GROUP BY run_id, stack_id
), frames AS (
  -- each of those stacks' frames (a recursive frame counts once, at its innermost level)
  SELECT s.run_id, s.stack_id, s.frame, min(s.frame_index) AS level
  FROM stacks s SEMI JOIN per_stack p ON p.run_id = s.run_id AND p.stack_id = s.stack_id
  GROUP BY s.run_id, s.stack_id, s.frame
), totals AS (
  SELECT run_id, sum(ns) AS ns FROM calls GROUP BY run_id
), step_counts AS (
  SELECT run_id, count(*) AS n_steps FROM steps WHERE run_id IN (SELECT run_id FROM report_runs) GROUP BY run_id
)
SELECT f.run_id, r.name AS run_name, f.frame, min(f.level)::BIGINT AS level, sum(p.calls)::BIGINT AS calls,
       sum(p.ns)::BIGINT AS time_ns, round(100.0 * sum(p.ns) / nullif(any_value(t.ns), 0), 2) AS time_pct,
       sum(p.input_bytes)::BIGINT AS input_bytes, round(sum(p.calls_in_steps) / any_value(n.n_steps), 3) AS calls_per_step,
       round(sum(p.ns_in_steps) / any_value(n.n_steps))::BIGINT AS time_per_step_ns
FROM frames f JOIN per_stack p USING (run_id, stack_id) JOIN runs r USING (run_id) JOIN totals t USING (run_id)
LEFT JOIN step_counts n USING (run_id)
GROUP BY f.run_id, r.name, f.frame
ORDER BY f.run_id, level, time_ns DESC, f.frame
