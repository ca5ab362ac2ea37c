-- title: Time per nn.Module, as a tree
-- description: Per run and nn.Module path (traces profiled with with_stack=True and with_modules=True), outermost modules first and each module's children under it: its calls, their CPU time, and the GPU kernels launched by the ops inside it (children included), their GPU time, busy time and share of the run's kernel time; self_gpu_ns is the part of the modules' own ops, outside their child modules. --param depth=N folds deeper modules into their ancestor at depth N; --param merge_instances=true merges a class's instances (Linear_0, Linear_1, ...) into one row per path of classes. Like TraceLens's build_nn_module_latency_tree, which gives each nn.Module call the GPU busy time of the kernels launched under it (GPU Time) and the part outside its child modules (Non-nn.Module GPU Time); its figures are per call, here they are summed over the calls of a path. Backward kernels run outside module frames and count in no module.
-- per-run: true
-- empty: the selected runs have no nn.Module frames (profile with with_stack=True and with_modules=True)
-- param: depth BIGINT = 0 -- fold modules deeper than this into their ancestor at this depth (0: all depths)
-- param: merge_instances BOOLEAN = false -- merge the instances of a module class (Linear_0, Linear_1 -> Linear) in the paths
-- column: run_id VARCHAR [key] -- the run
-- column: run_name VARCHAR [key] -- name of the run
-- column: module_path VARCHAR [key] -- the modules from the outermost to this one, joined by ' > '
-- column: module VARCHAR [detail] -- the last module of the path
-- column: module_depth BIGINT [detail] -- number of modules in the path (1: a top-level module)
-- column: parent_path VARCHAR [detail] -- module_path of the parent module (NULL at the top)
-- column: calls BIGINT [result] -- calls of the module (nn.Module frames with this path)
-- column: cpu_ns BIGINT [result] -- CPU time of those calls (the frames' durations, children included), ns
-- column: kernels BIGINT [detail] -- GPU kernels launched by ops inside the module, its child modules included
-- column: gpu_ns BIGINT [result] -- GPU time of those kernels, ns
-- column: gpu_busy_ns BIGINT [detail] -- time at least one of those kernels ran (union), ns (TraceLens's GPU Time, summed over calls)
-- column: self_gpu_ns BIGINT [detail] -- GPU time of the kernels of ops in the module but in none of its child modules, ns (after folding: the folded modules' too)
-- column: gpu_pct DOUBLE [result] -- gpu_ns over the run's total kernel time, percent
-- column: calls_per_step DOUBLE [detail] -- calls inside profiler steps divided by the run's profiled steps (NULL without steps)
-- column: gpu_per_step_ns BIGINT [detail] -- gpu_ns of kernels launched inside profiler steps divided by the run's profiled steps, ns (NULL without steps)
WITH calls AS (
  SELECT run_id, event_id, dur_ns, step,
         list_transform(string_split(module_path, ' > '),
                        lambda m: CASE WHEN $merge_instances THEN regexp_replace(m, '_\d+$', '') ELSE m END) AS parts
  FROM module_calls
  WHERE run_id IN (SELECT run_id FROM report_runs) AND ($depth <= 0 OR module_depth <= $depth)
), kernels AS (
  SELECT run_id, event_id, ts_ns, dur_ns, step,
         list_transform(string_split(module_path, ' > '),
                        lambda m: CASE WHEN $merge_instances THEN regexp_replace(m, '_\d+$', '') ELSE m END) AS parts
  FROM module_kernels WHERE run_id IN (SELECT run_id FROM report_runs)
), kernel_paths AS (
  -- each kernel under every module on its path, down to the folding depth
  SELECT run_id, event_id, ts_ns, dur_ns, step, array_to_string(list_slice(parts, 1, i), ' > ') AS module_path,
         i = least(array_length(parts), CASE WHEN $depth > 0 THEN $depth ELSE array_length(parts) END) AS is_self
  FROM kernels, unnest(range(1, least(array_length(parts), CASE WHEN $depth > 0 THEN $depth ELSE array_length(parts) END) + 1)) AS t(i)
), kernel_union AS (
  SELECT *, max(ts_ns + dur_ns) OVER (PARTITION BY run_id, module_path ORDER BY ts_ns, event_id
                                      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
  FROM kernel_paths
), gpu AS (
  SELECT run_id, module_path, count(*) AS kernels, sum(dur_ns)::BIGINT AS gpu_ns,
         sum(greatest(ts_ns + dur_ns - greatest(ts_ns, coalesce(prev_end, ts_ns)), 0))::BIGINT AS gpu_busy_ns,
         coalesce(sum(dur_ns) FILTER (WHERE is_self), 0)::BIGINT AS self_gpu_ns,
         sum(dur_ns) FILTER (WHERE step IS NOT NULL) AS gpu_in_steps_ns
  FROM kernel_union GROUP BY ALL
), cpu AS (
  SELECT run_id, array_to_string(parts, ' > ') AS module_path, count(*) AS calls, sum(dur_ns)::BIGINT AS cpu_ns,
         count(step) AS calls_in_steps
  FROM calls GROUP BY ALL
), totals AS (
  SELECT run_id, sum(dur_ns) AS total_ns FROM gpu_kernels WHERE run_id IN (SELECT run_id FROM report_runs) GROUP BY run_id
), step_counts AS (
  SELECT run_id, count(*) AS n_steps FROM steps WHERE run_id IN (SELECT run_id FROM report_runs) GROUP BY run_id
), nodes AS (
  SELECT run_id, module_path, c.calls, c.cpu_ns, c.calls_in_steps, g.kernels, g.gpu_ns, g.gpu_busy_ns, g.self_gpu_ns, g.gpu_in_steps_ns,
         string_split(module_path, ' > ') AS parts
  FROM cpu c FULL JOIN gpu g USING (run_id, module_path)
)
SELECT n.run_id, r.name AS run_name, n.module_path, list_extract(n.parts, -1) AS module, array_length(n.parts)::BIGINT AS module_depth,
       CASE WHEN array_length(n.parts) > 1 THEN array_to_string(list_slice(n.parts, 1, -2), ' > ') END AS parent_path,
       coalesce(n.calls, 0) AS calls, coalesce(n.cpu_ns, 0) AS cpu_ns,
       coalesce(n.kernels, 0) AS kernels, coalesce(n.gpu_ns, 0) AS gpu_ns, coalesce(n.gpu_busy_ns, 0) AS gpu_busy_ns,
       coalesce(n.self_gpu_ns, 0) AS self_gpu_ns,
       round(100.0 * coalesce(n.gpu_ns, 0) / nullif(t.total_ns, 0), 2) AS gpu_pct,
       round(coalesce(n.calls_in_steps, 0) / s.n_steps, 3) AS calls_per_step,
       round(coalesce(n.gpu_in_steps_ns, 0) / s.n_steps)::BIGINT AS gpu_per_step_ns
FROM nodes n JOIN runs r USING (run_id) LEFT JOIN totals t USING (run_id) LEFT JOIN step_counts s USING (run_id)
ORDER BY n.run_id, n.module_path
