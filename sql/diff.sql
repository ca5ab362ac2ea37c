-- title: Compare two runs
-- description: Groups of A and B side by side (ops, kernels, call sites, op shapes, copies, or ops aligned across hardware by their place in the op tree), with the change in time and a status, biggest change first. Counts are whole calls; times are whole ns (per step: rounded to the nearest ns, halves away from zero). op_tree and op_shape compare GPU time across runs whose kernels differ (one model on two GPUs): each kernel counts once, under the deepest op above its launch whose key both runs have (the lowest common op when the two lowerings differ, as TraceLens's TraceDiff); kernels with no such op count under the outermost op above them, a row of one run only.
-- param: a VARCHAR = '' -- run id of A (the baseline)
-- param: b VARCHAR = '' -- run id of B
-- param: by VARCHAR = op {op|kernel|call_site|shape|copy|op_tree|op_shape} -- what to group by
-- param: per_step BOOLEAN = false -- divide times by each run's number of profiler steps (a run without steps: its totals), rounded to the nearest ns
-- param: threshold_pct DOUBLE = 5 -- changes within this percent of A's time are 'same'
-- param: exact_dims BOOLEAN = false -- shape and copy keys with each call's exact dims, instead of dims that grow with the sequence as ranges (lo..hi)
-- column: kind VARCHAR [detail] -- what the key is: op, kernel, call_site, shape, copy, op_tree or op_shape
-- column: key VARCHAR [key] -- the group: the op or kernel name itself, the call site, 'op [dims...]', 'call_site | op [dims] src -> dst', for op_tree 'module path | outer op > ... > op [dims] [dtypes]' (the module path when the trace has Python stacks), for op_shape 'op [dims] [dtypes]'; dims that vary across steps as lo..hi (see op_shapes) unless exact_dims; '(no op)' for kernels launched outside any op
-- column: a_calls BIGINT [detail] -- calls in A (totals, also with --per-step); for a call site, calls of its outermost ops; for copies, the outermost copy ops; for op_tree and op_shape, the ops of the key whose kernels it took
-- column: b_calls BIGINT [detail] -- calls in B
-- column: a_calls_per_step DOUBLE [detail] -- a_calls divided by A's number of profiler steps, 3 decimals (NULL when A has no steps)
-- column: b_calls_per_step DOUBLE [detail] -- the same for B
-- column: a_dur_ns BIGINT [result] -- summed inclusive dur_ns of the events counted in a_calls, ns (per step with --per-step): for a call site or copies, of the outermost ops only, so nested ops are not counted twice; for op_tree and op_shape, the GPU time of the kernels the key took
-- column: b_dur_ns BIGINT [result] -- the same in B, ns
-- column: a_self_dur_ns BIGINT [detail] -- summed self time of the events counted in a_calls where it tells their own work (ops and shapes; NULL for call sites and copies, whose outermost ops' time is in nested ops), ns (per step with --per-step)
-- column: b_self_dur_ns BIGINT [detail] -- the same in B, ns
-- column: delta_ns BIGINT [result] -- b_dur_ns - a_dur_ns
-- column: ratio DOUBLE [result] -- b_dur_ns / a_dur_ns, 4 decimals (NULL when A has none)
-- column: status VARCHAR [result] -- added, removed, faster, slower or same (within threshold_pct of A)
-- column: a_kernels VARCHAR [detail] -- op_tree and op_shape: the kernels the key took in A, by time, 'name xN' (five at most, then '+ M more'); NULL for other groupings
-- column: b_kernels VARCHAR [detail] -- the same in B
WITH chain AS (
  -- op_tree, op_shape: every op above a launch (launch_op_ancestors), with its key
  SELECT a.run_id, a.event_id AS launcher_id, o.event_id AS op_id, o.depth, o.name, o.module_path,
         coalesce(CASE WHEN $exact_dims THEN s.input_dims::VARCHAR ELSE s.dims_text END, '[]')
           || ' ' || coalesce(s.input_dtypes::VARCHAR, '[]') AS shape
  FROM launch_op_ancestors a JOIN cpu_ops o ON o.run_id = a.run_id AND o.event_id = a.anc_id
  LEFT JOIN op_shapes s ON s.run_id = o.run_id AND s.event_id = o.event_id
  WHERE $by IN ('op_tree', 'op_shape') AND a.run_id IN ($a, $b)
), keyed AS MATERIALIZED (
  SELECT c.run_id, c.launcher_id, c.op_id, c.depth,
         CASE WHEN $by = 'op_shape' THEN c.name || ' ' || c.shape
              ELSE coalesce(any_value(c.module_path) || ' | ', '') || string_agg(p.name, ' > ' ORDER BY p.depth) || ' ' || any_value(c.shape) END AS key
  FROM chain c JOIN chain p ON p.run_id = c.run_id AND p.launcher_id = c.launcher_id AND p.depth <= c.depth
  GROUP BY c.run_id, c.launcher_id, c.op_id, c.depth, c.name, c.shape
), in_both AS (
  SELECT key FROM keyed GROUP BY key HAVING count(DISTINCT run_id) = 2
), owner AS (
  -- per launching op: the deepest op above it whose key both runs have, else the outermost
  SELECT run_id, launcher_id,
         arg_max(op_id, depth) FILTER (WHERE key IN (SELECT key FROM in_both)) AS shared_op,
         arg_max(key, depth) FILTER (WHERE key IN (SELECT key FROM in_both)) AS shared_key,
         arg_min(op_id, depth) AS top_op, arg_min(key, depth) AS top_key
  FROM keyed GROUP BY run_id, launcher_id
), aligned_kernels AS (
  SELECT k.run_id, k.name AS kernel, k.dur_ns,
         coalesce(w.shared_key, w.top_key, '(no op)') AS key, coalesce(w.shared_op, w.top_op, -1 - k.event_id) AS op_id
  FROM gpu_kernels k LEFT JOIN owner w ON w.run_id = k.run_id AND w.launcher_id = k.op_event_id
  WHERE $by IN ('op_tree', 'op_shape') AND k.run_id IN ($a, $b)
), aligned_ops AS (
  -- one item per op (its kernels' time), or per kernel launched outside any op
  SELECT run_id, key, sum(dur_ns) AS dur_ns FROM aligned_kernels
  GROUP BY run_id, key, op_id
), kernel_names AS (
  SELECT run_id, key,
         array_to_string(list(kernel || ' x' || n ORDER BY ns DESC, kernel)[1:5], ', ')
           || CASE WHEN count(*) > 5 THEN ', + ' || (count(*) - 5) || ' more' ELSE '' END AS kernels
  FROM (SELECT run_id, key, kernel, count(*) AS n, sum(dur_ns) AS ns FROM aligned_kernels GROUP BY ALL)
  GROUP BY run_id, key
), items AS (
  SELECT run_id, 'op' AS kind, name AS key, dur_ns, self_dur_ns FROM cpu_ops WHERE $by = 'op'
  UNION ALL
  SELECT run_id, 'kernel', name, dur_ns, NULL FROM gpu_kernels WHERE $by = 'kernel'
  UNION ALL
  -- a call site counts its outermost ops only (nested ops share the call site): calls and time of the same events
  SELECT o.run_id, 'call_site', coalesce(o.call_site, '(no Python stack)'), o.dur_ns, NULL
  FROM cpu_ops o LEFT JOIN cpu_ops p ON p.run_id = o.run_id AND p.event_id = o.parent_op_id
  WHERE $by = 'call_site' AND (p.event_id IS NULL OR p.call_site IS DISTINCT FROM o.call_site)
  UNION ALL
  SELECT o.run_id, 'shape', o.name || ' ' || coalesce(CASE WHEN $exact_dims THEN s.input_dims::VARCHAR ELSE s.dims_text END, '[]'),
         o.dur_ns, o.self_dur_ns
  FROM cpu_ops o LEFT JOIN op_shapes s ON s.run_id = o.run_id AND s.event_id = o.event_id WHERE $by = 'shape'
  UNION ALL
  SELECT c.run_id, 'copy', coalesce(c.call_site, '(no Python stack)') || ' | ' || c.op_name || ' '
         || coalesce(CASE WHEN NOT $exact_dims THEN dims_range_text(s.dims_lo[k.source_input + 1], s.dims_hi[k.source_input + 1]) END,
                     c.dims::VARCHAR, '?')
         || ' ' || coalesce(c.src_dtype, '?') || ' -> ' || coalesce(c.dst_dtype, '?'), c.dur_ns, NULL
  FROM tensor_copies c LEFT JOIN copy_ops k ON k.name = c.op_name
  LEFT JOIN op_shapes s ON s.run_id = c.run_id AND s.event_id = c.event_id
  WHERE $by = 'copy' AND c.is_outermost
  UNION ALL
  SELECT run_id, $by, key, dur_ns, NULL FROM aligned_ops
), steps_per_run AS (
  SELECT run_id, count(*) AS steps FROM steps WHERE run_id IN ($a, $b) GROUP BY run_id
), sums AS (
  SELECT i.run_id, i.kind, i.key, count(i.dur_ns) AS calls, sum(i.dur_ns) AS dur_ns, sum(i.self_dur_ns) AS self_dur_ns,
         any_value(s.steps) AS steps, CASE WHEN $per_step THEN coalesce(any_value(s.steps), 1) ELSE 1 END AS n
  FROM items i LEFT JOIN steps_per_run s USING (run_id)
  WHERE i.run_id IN ($a, $b)
  GROUP BY i.run_id, i.kind, i.key
), agg AS (
  -- sums divided by n in integers, rounded half away from zero: exact for any sum
  SELECT run_id, kind, key, calls, round(calls / steps, 3) AS calls_per_step,
         (sign(dur_ns) * ((abs(dur_ns) + n // 2) // n))::BIGINT AS dur_ns,
         (sign(self_dur_ns) * ((abs(self_dur_ns) + n // 2) // n))::BIGINT AS self_dur_ns
  FROM sums
), joined AS (
  SELECT coalesce(a.kind, b.kind) AS kind, coalesce(a.key, b.key) AS key,
         coalesce(a.calls, 0) AS a_calls, coalesce(b.calls, 0) AS b_calls,
         CASE WHEN a.run_id IS NULL THEN (SELECT 0.0 FROM steps_per_run WHERE run_id = $a) ELSE a.calls_per_step END AS a_calls_per_step,
         CASE WHEN b.run_id IS NULL THEN (SELECT 0.0 FROM steps_per_run WHERE run_id = $b) ELSE b.calls_per_step END AS b_calls_per_step,
         coalesce(a.dur_ns, 0) AS a_dur_ns, coalesce(b.dur_ns, 0) AS b_dur_ns,
         a.self_dur_ns AS a_self_dur_ns, b.self_dur_ns AS b_self_dur_ns
  FROM (SELECT * FROM agg WHERE run_id = $a) a
  FULL OUTER JOIN (SELECT * FROM agg WHERE run_id = $b) b ON a.kind = b.kind AND a.key = b.key
)
SELECT kind, key, a_calls, b_calls, a_calls_per_step, b_calls_per_step, a_dur_ns, b_dur_ns, a_self_dur_ns, b_self_dur_ns,
       b_dur_ns - a_dur_ns AS delta_ns,
       round(b_dur_ns / nullif(a_dur_ns, 0), 4) AS ratio,
       CASE WHEN a_calls = 0 THEN 'added'
            WHEN b_calls = 0 THEN 'removed'
            WHEN abs(b_dur_ns - a_dur_ns) <= a_dur_ns * $threshold_pct / 100.0 THEN 'same'
            WHEN b_dur_ns < a_dur_ns THEN 'faster'
            ELSE 'slower' END AS status,
       ka.kernels AS a_kernels, kb.kernels AS b_kernels
FROM joined
LEFT JOIN (SELECT * FROM kernel_names WHERE run_id = $a) ka USING (key)
LEFT JOIN (SELECT * FROM kernel_names WHERE run_id = $b) kb USING (key)
ORDER BY abs(b_dur_ns - a_dur_ns) DESC, key
