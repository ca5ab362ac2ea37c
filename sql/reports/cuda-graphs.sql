-- title: CUDA and HIP graph launches
-- description: Each graph a run launched (launches that ran the same kernels, from one op and call site): launches, kernels, GPU time and share. With --param capture=RUN, a run that traced the graphs' capture, one row per op inside each graph: a replay's i-th kernel is the i-th launch call captured (see graph_kernel_ops). Without it, op_name is NULL and match is 'no_capture': which op inside a graph issued a kernel is not in a replay's trace.
-- per-run: true
-- empty: no CUDA or HIP graph launch (cudaGraphLaunch, hipGraphLaunch) in the selected runs
-- param: capture RUN = -- run that traced the capture of the graphs (run id, unique prefix or name): attributes each replayed kernel to the op that launched it during capture
-- column: run_id VARCHAR [key] -- the run
-- column: run_name VARCHAR [key] -- name of the run
-- column: replay_graph BIGINT [key] -- the graph launched, numbered per run from 1 in order of first launch (graph_launch_work); NULL for launches whose work is not in the trace
-- column: graph_id BIGINT [detail] -- the `graph id` arg of its kernels (CUDA 12 traces), else NULL
-- column: launch_op_name VARCHAR [key] -- CPU op around the graph launch calls
-- column: call_site VARCHAR [key] -- innermost user frame of the graph launches' Python stack
-- column: launches BIGINT [result] -- graph launch calls of this graph from this op and call site
-- column: first_ts_ns BIGINT [detail] -- start of the first of those calls, ns (absolute, as in events.ts_ns)
-- column: kernels_per_launch BIGINT [detail] -- kernels, copies and sets each launch ran
-- column: streams_per_launch BIGINT [detail] -- streams they ran on; above 1 the order of a launch's kernels across streams is by start, which can differ from the order of capture: check the ops
-- column: match VARCHAR [detail] -- how the graph was matched to a captured one: kernel_count, kernel_kinds, same_ops, ambiguous, no_match, no_capture (see graph_kernel_ops); no_work for launches whose work is not in the trace
-- column: graph_index BIGINT [detail] -- the captured graph (1 = the first captured in the capture run) when exactly one fits, else NULL
-- column: op_name VARCHAR [key] -- op that issued these kernels during capture (innermost op around the launch call); NULL unless match is kernel_count, kernel_kinds or same_ops
-- column: top_op_name VARCHAR [key] -- outermost op around that launch call during capture; NULL like op_name
-- column: kernels BIGINT [detail] -- kernels, copies and sets of this op over all the launches
-- column: gpu_dur_ns BIGINT [result] -- their total time, ns
-- column: graph_pct DOUBLE [result] -- share of the time of this graph's launches (this op and call site), percent
-- column: gpu_pct DOUBLE [result] -- share of the run's time of kernels, copies and sets, percent
WITH work AS MATERIALIZED (
  SELECT * FROM graph_kernel_ops($capture::VARCHAR) WHERE run_id IN (SELECT run_id FROM report_runs)
), totals AS (
  SELECT run_id, sum(dur_ns) AS total
  FROM device_events() WHERE run_id IN (SELECT run_id FROM report_runs) GROUP BY 1
), per_op AS (
  SELECT run_id, replay_graph, any_value(graph_id) AS graph_id, launch_op_name, launch_call_site AS call_site,
         count(DISTINCT launch_event_id) AS launches, min(launch_ts_ns) AS first_ts_ns,
         any_value(launch_kernels) AS kernels_per_launch, max(launch_streams) AS streams_per_launch, match, graph_index, op_name, top_op_name,
         count(*) AS kernels, sum(dur_ns)::BIGINT AS gpu_dur_ns
  FROM work
  GROUP BY run_id, replay_graph, launch_op_name, launch_call_site, match, graph_index, op_name, top_op_name
), graph_launches AS (
  -- every op of a graph's launches covers all of them: count the launches once per graph
  SELECT run_id, replay_graph, launch_op_name, launch_call_site AS call_site,
         count(DISTINCT launch_event_id) AS launches, sum(dur_ns) AS graph_dur_ns
  FROM work GROUP BY ALL
), idle AS (
  -- graph launches whose kernels are not in the trace (e.g. the profile stopped first)
  SELECT l.run_id, NULL::BIGINT AS replay_graph, NULL::BIGINT AS graph_id, l.op_name AS launch_op_name, l.call_site,
         count(*) AS launches, min(l.ts_ns) AS first_ts_ns, 0::BIGINT AS kernels_per_launch,
         0::BIGINT AS streams_per_launch, 'no_work' AS match,
         NULL::BIGINT AS graph_index, NULL AS op_name, NULL AS top_op_name, 0::BIGINT AS kernels, 0::BIGINT AS gpu_dur_ns
  FROM launches l
  WHERE l.is_graph_launch AND l.run_id IN (SELECT run_id FROM report_runs)
    AND NOT EXISTS (SELECT 1 FROM work w WHERE w.run_id = l.run_id AND w.launch_event_id = l.event_id)
  GROUP BY l.run_id, l.op_name, l.call_site
), rows AS (
  SELECT p.*, round(100.0 * p.gpu_dur_ns / nullif(g.graph_dur_ns, 0), 2) AS graph_pct
  FROM per_op p JOIN graph_launches g ON g.run_id = p.run_id AND g.replay_graph = p.replay_graph
    AND g.launch_op_name IS NOT DISTINCT FROM p.launch_op_name AND g.call_site IS NOT DISTINCT FROM p.call_site
  UNION ALL BY NAME
  SELECT *, NULL::DOUBLE AS graph_pct FROM idle
)
SELECT x.run_id, r.name AS run_name, x.replay_graph, x.graph_id, x.launch_op_name, x.call_site, x.launches,
       x.first_ts_ns, x.kernels_per_launch, x.streams_per_launch, x.match, x.graph_index,
       x.op_name, x.top_op_name, x.kernels, x.gpu_dur_ns, x.graph_pct,
       round(100.0 * x.gpu_dur_ns / nullif(t.total, 0), 2) AS gpu_pct
FROM rows x JOIN runs r USING (run_id) LEFT JOIN totals t USING (run_id)
ORDER BY x.run_id, x.replay_graph NULLS LAST, x.launch_op_name, x.call_site, x.gpu_dur_ns DESC, x.op_name
