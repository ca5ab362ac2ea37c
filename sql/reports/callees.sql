-- title: What a Python frame spends its time on: the ops and shapes under it, top-down
-- description: The ops called with the frame given by --param frame on their Python stack (top-down, as speedscope's sandwich view shows callees): per op name, input dims (dims that grow with the sequence as ranges), dtypes and call site, the calls, their time, input bytes and share of the frame's time. --param metric=gpu counts the GPU time of the kernels the ops launched.
-- per-run: true
-- empty: no op has the frame on its Python stack: give --param frame as reports show call sites ('attn/indexer.py(16): score'), as FILE:LINE ('attn/indexer.py:16') or as a function name ('score'); the trace needs Python stacks (with_stack=True)
-- param: frame VARCHAR = '' -- the frame: 'file(line): function' as reports show it, 'file:line', or a function name
-- param: metric VARCHAR = cpu {cpu|gpu} -- cpu: self time of the ops; gpu: time of the kernels they launched
-- param: exact_dims BOOLEAN = false -- group by each call's exact dims instead of showing dims that grow with the sequence as ranges
-- column: run_id VARCHAR [key] -- the run
-- column: run_name VARCHAR [key] -- name of the run
-- column: name VARCHAR [key] -- op name
-- column: dims VARCHAR [key] -- input dims of the calls, dims that vary across steps as lo..hi unless exact_dims
-- column: dtypes VARCHAR [key] -- a copy's 'source -> destination' dtype, else the dtypes of its tensor inputs
-- column: call_site VARCHAR [key] -- innermost user frame of the calls' Python stack
-- column: calls BIGINT [result] -- number of calls
-- column: time_ns BIGINT [result] -- their time: self time (metric cpu) or time of the kernels they launched (metric gpu), ns
-- column: time_pct DOUBLE [result] -- share of the time of every op under the frame, percent
-- column: input_bytes BIGINT [detail] -- bytes of their tensor inputs
-- column: calls_per_step DOUBLE [detail] -- calls inside profiler steps divided by the run's profiled steps (NULL without steps)
-- column: time_per_step_ns BIGINT [result] -- time inside profiler steps divided by the run's profiled steps, ns (NULL without steps)
WITH under AS (
  -- the stacks with the frame
  SELECT DISTINCT run_id, stack_id FROM stacks
  WHERE run_id IN (SELECT run_id FROM report_runs) AND $frame <> ''
    AND (frame = $frame OR function = $frame OR file || ':' || line = $frame OR file || '(' || line || ')' = $frame)
), calls AS (
  SELECT c.run_id, c.name, CASE WHEN $exact_dims THEN c.exact_dims_text ELSE c.dims_text END AS dims, c.dtypes_text,
         c.call_site, c.step, c.input_bytes, CASE WHEN $metric = 'cpu' THEN c.self_dur_ns ELSE g.gpu_ns END AS ns
  FROM op_calls c
  JOIN under u ON u.run_id = c.run_id AND u.stack_id = c.stack_id
  LEFT JOIN (SELECT run_id, op_event_id, sum(dur_ns) AS gpu_ns FROM gpu_kernels
             WHERE $metric = 'gpu' AND run_id IN (SELECT run_id FROM report_runs) GROUP BY ALL) g
    ON g.run_id = c.run_id AND g.op_event_id = c.event_id
  WHERE $metric = 'cpu' OR g.gpu_ns IS NOT NULL
), totals AS (
  SELECT run_id, sum(ns) AS ns FROM calls GROUP BY run_id
), step_counts AS (
  SELECT run_id, count(*) AS n_steps FROM steps WHERE run_id IN (SELECT run_id FROM report_runs) GROUP BY run_id
)
SELECT c.run_id, r.name AS run_name, c.name, c.dims, c.dtypes_text AS dtypes, c.call_site, count(*) AS calls,
       sum(c.ns)::BIGINT AS time_ns, round(100.0 * sum(c.ns) / nullif(any_value(t.ns), 0), 2) AS time_pct,
       sum(c.input_bytes)::BIGINT AS input_bytes, round(count(c.step) / any_value(n.n_steps), 3) AS calls_per_step,
       round(sum(c.ns) FILTER (WHERE c.step IS NOT NULL) / any_value(n.n_steps))::BIGINT AS time_per_step_ns
FROM calls c JOIN runs r USING (run_id) JOIN totals t USING (run_id) LEFT JOIN step_counts n USING (run_id)
GROUP BY c.run_id, r.name, c.name, c.dims, c.dtypes_text, c.call_site
ORDER BY c.run_id, time_ns DESC, c.name, c.dims, c.dtypes_text, c.call_site
