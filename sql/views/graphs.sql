-- requires: reference, stacks, gpu
-- Ops inside CUDA/HIP graphs. A graph replay's kernels link only to its cudaGraphLaunch /
-- hipGraphLaunch (`gpu_kernels.is_graph_launched`): which op issued each one is known only from a
-- trace of the graph's capture (vLLM and SGLang can write one), where the ops make their launch
-- calls between cudaStreamBeginCapture and cudaStreamEndCapture but no kernel runs. The i-th
-- kernel of a replay is the i-th launch call captured, so a replay is matched to a captured graph
-- by its number of kernels, copies and sets and their kinds, and its work then takes the ops of
-- the captured calls position by position. Kineto writes `graph id` / `graph node id` (CUDA 12 on)
-- on device events only: captured calls run nothing and carry neither, so the ids cannot name the
-- captured graph of a replay; they tell replays of different graphs apart (`replay_graph`).

-- The launch calls captured into graphs in one run (`capture_run_id`), one row per call, in
-- capture order. A capture window is a cudaStreamBeginCapture / hipStreamBeginCapture call and the
-- next StreamEndCapture call on the same thread (torch.cuda.graph captures from one thread, and its
-- default mode forbids other threads to launch meanwhile); a begin without an end (a trace cut
-- short) is no graph. Graphs are numbered 1, 2, ... in order of capture (`graph_index`); the calls
-- of a window in order of start (`position`). Left out: host function launches
-- (cudaLaunchHostFunc: a host node, no device work) and graph launches (child graphs: their nodes
-- are not in the trace).
-- @arg capture_run_id VARCHAR The run whose trace holds the captures.
-- @column run_id VARCHAR The capture run (capture_run_id).
-- @column graph_index BIGINT The captured graph, numbered 1, 2, ... in order of capture.
-- @column begin_event_id BIGINT The call that began the capture (cudaStreamBeginCapture, hipStreamBeginCapture).
-- @column end_event_id BIGINT The call that ended it (cudaStreamEndCapture, hipStreamEndCapture).
-- @column launches BIGINT Launch calls captured into the graph.
-- @column position BIGINT 1-based place of the call in its graph, by start.
-- @column launch_event_id BIGINT The captured launch call.
-- @column launch_name VARCHAR Its name, e.g. cudaLaunchKernel, cudaMemcpyAsync.
-- @column work_kind VARCHAR What it starts (`launch_call_kind`): kernel, memcpy or memset.
-- @columns-as launches: op_event_id, op_name, top_op_event_id, top_op_name, call_site
CREATE OR REPLACE MACRO graph_captures(capture_run_id) AS TABLE
WITH marks AS (
  SELECT event_id, pid, tid, ts_ns, graph_capture_call(name) = 'begin' AS is_begin
  FROM events
  WHERE run_id = capture_run_id AND phase = 'X' AND graph_capture_call(name) IS NOT NULL
    AND category IN (SELECT category FROM event_categories WHERE is_runtime)
), paired AS (
  SELECT * FROM (
    SELECT pid, tid, is_begin, event_id AS begin_event_id, ts_ns AS begin_ns,
           lead(is_begin) OVER w AS next_is_begin, lead(event_id) OVER w AS end_event_id,
           lead(ts_ns) OVER w AS end_ns
    FROM marks WINDOW w AS (PARTITION BY pid, tid ORDER BY ts_ns, event_id))
  WHERE is_begin AND NOT next_is_begin
), windows AS (
  SELECT *, row_number() OVER (ORDER BY begin_ns, begin_event_id) AS graph_index FROM paired
), calls AS (
  SELECT w.graph_index, w.begin_event_id, w.end_event_id, l.event_id AS launch_event_id, l.name AS launch_name,
         l.ts_ns, l.op_event_id, l.top_op_event_id, l.stack_id
  FROM windows w
  JOIN launch_calls l ON l.pid = w.pid AND l.tid = w.tid AND l.ts_ns > w.begin_ns AND l.ts_ns < w.end_ns
  WHERE l.run_id = capture_run_id AND launch_call_kind(l.name) NOT IN ('graph', 'host_func')
), ops AS (
  SELECT event_id, name FROM events WHERE run_id = capture_run_id AND is_cpu_op
)
SELECT capture_run_id::VARCHAR AS run_id, c.graph_index, c.begin_event_id, c.end_event_id,
       count(*) OVER (PARTITION BY c.graph_index) AS launches,
       row_number() OVER (PARTITION BY c.graph_index ORDER BY c.ts_ns, c.launch_event_id) AS position,
       c.launch_event_id, c.launch_name, launch_call_kind(c.launch_name) AS work_kind,
       c.op_event_id, o.name AS op_name, c.top_op_event_id, t.name AS top_op_name, cs.call_site
FROM calls c
LEFT JOIN ops o ON o.event_id = c.op_event_id
LEFT JOIN ops t ON t.event_id = c.top_op_event_id
LEFT JOIN call_sites cs ON cs.run_id = capture_run_id AND cs.stack_id = c.stack_id;

-- Every kernel, copy and set that a CUDA/HIP graph launch ran, numbered in the order it ran within
-- its launch (start, then stream, then event id), with the launch's size and the `graph id` /
-- `graph node id` args (CUDA 12 traces). Launches that ran the same work (the same graph id and
-- the same sequence of names) are one replayed graph, numbered per run in order of first launch.
-- The replay side of `graph_kernel_ops`.
-- @column run_id VARCHAR Run of the replay.
-- @columns-as device_events: event_id, name, ts_ns, dur_ns, device, stream, work_kind
-- @column launch_event_id BIGINT The graph launch call (cudaGraphLaunch, hipGraphLaunch).
-- @column launch_op_name VARCHAR CPU op around the graph launch call.
-- @column launch_call_site VARCHAR Innermost user frame of the graph launch's Python stack.
-- @column launch_ts_ns BIGINT Start of the graph launch call, ns.
-- @column position BIGINT 1-based place of this work in its launch: by start, then stream, then event id.
-- @column launch_kernels BIGINT Kernels, copies and sets the launch ran.
-- @column launch_streams BIGINT Streams they ran on. Above 1, `position` follows start times across streams, which can differ from the order of capture: check the ops of such a launch.
-- @column replay_graph BIGINT The graph launched, numbered per run from 1 in order of first launch: launches with the same graph id (or none) and the same sequence of work names.
-- @column graph_id BIGINT The `graph id` arg (CUPTI's id of the graph that ran the work; CUDA 12 on), NULL when absent.
-- @column graph_node_id BIGINT The `graph node id` arg, NULL when absent.
CREATE OR REPLACE VIEW graph_launch_work AS
WITH w AS (
  SELECT d.run_id, d.event_id, d.name, d.ts_ns, d.dur_ns, d.device, d.stream, d.work_kind,
         d.launch_event_id, d.op_event_id AS launch_op_event_id, d.stack_id AS launch_stack_id,
         row_number() OVER (PARTITION BY d.run_id, d.launch_event_id ORDER BY d.ts_ns, d.stream, d.event_id) AS position,
         count(*) OVER (PARTITION BY d.run_id, d.launch_event_id) AS launch_kernels
  FROM device_work() d
  WHERE d.is_graph_launched
), ids AS (
  SELECT a.run_id, a.event_id,
         max(a.int_value) FILTER (WHERE a.key = 'graph id') AS graph_id,
         max(a.int_value) FILTER (WHERE a.key = 'graph node id') AS graph_node_id
  FROM args a SEMI JOIN w ON w.run_id = a.run_id AND w.event_id = a.event_id
  WHERE a.key IN ('graph id', 'graph node id')
  GROUP BY a.run_id, a.event_id
), per_launch AS (
  SELECT w.run_id, w.launch_event_id, min(i.graph_id) AS graph_id, count(DISTINCT w.stream) AS launch_streams,
         md5(string_agg(w.name, chr(31) ORDER BY w.position)) AS names_hash
  FROM w LEFT JOIN ids i USING (run_id, event_id)
  GROUP BY w.run_id, w.launch_event_id
), first_launch AS (
  SELECT p.run_id, p.graph_id, p.names_hash, min(l.ts_ns) AS first_ns, min(l.event_id) AS first_event_id
  FROM per_launch p JOIN launch_calls l ON l.run_id = p.run_id AND l.event_id = p.launch_event_id
  GROUP BY ALL
), graphs AS (
  SELECT run_id, graph_id, names_hash,
         row_number() OVER (PARTITION BY run_id ORDER BY first_ns, first_event_id) AS replay_graph
  FROM first_launch
)
SELECT w.run_id, w.event_id, w.name, w.ts_ns, w.dur_ns, w.device, w.stream, w.work_kind, w.launch_event_id,
       o.name AS launch_op_name, cs.call_site AS launch_call_site, l.ts_ns AS launch_ts_ns,
       w.position, w.launch_kernels, p.launch_streams, g.replay_graph, i.graph_id, i.graph_node_id
FROM w
JOIN per_launch p ON p.run_id = w.run_id AND p.launch_event_id = w.launch_event_id
JOIN graphs g ON g.run_id = p.run_id AND g.graph_id IS NOT DISTINCT FROM p.graph_id AND g.names_hash = p.names_hash
JOIN launch_calls l ON l.run_id = w.run_id AND l.event_id = w.launch_event_id
LEFT JOIN ids i ON i.run_id = w.run_id AND i.event_id = w.event_id
LEFT JOIN (SELECT run_id, event_id, name FROM events WHERE is_cpu_op) o
  ON o.run_id = w.run_id AND o.event_id = w.launch_op_event_id
LEFT JOIN call_sites cs ON cs.run_id = w.run_id AND cs.stack_id = w.launch_stack_id;

-- Each kernel, copy and set run by a graph launch (`graph_launch_work`, every run) with the op that
-- issued it while the graph was captured in run `capture_run_id` (`graph_captures`): a replayed
-- graph takes the captured graph that has as many launch calls, of the same kinds in the same
-- order (kernel, memcpy, memset: the names of kernels are not in a capture, where nothing runs);
-- its i-th work item takes the op of the i-th captured call. `match` says how, and the op columns
-- are NULL unless it is certain:
--   'kernel_count'  one captured graph has that many calls (and their kinds agree);
--   'kernel_kinds'  several have that many calls, one has the same kinds in the same order;
--   'same_ops'      several fit and all have the same op names at every position: op_name and
--                   top_op_name are given, the ids (which graph) are not;
--   'ambiguous'     several fit with different ops: no op;
--   'no_match'      none fits (a graph captured outside the capture run, or lost events): no op;
--   'no_capture'    the capture run has no capture window (or capture_run_id is NULL): no op.
-- Work of a graph that ran on several streams is ordered by start across them, which can differ
-- from the capture order (`launch_streams` above 1 says so). Use: `SELECT op_name, sum(dur_ns)
-- FROM graph_kernel_ops('<capture run id>') WHERE run_id = '<replay run id>' GROUP BY ALL`; the
-- cuda-graphs report and graph_op_time read it.
-- @arg capture_run_id VARCHAR The run whose trace holds the captures (see graph_captures).
-- @columns-as graph_launch_work: run_id, event_id, name, ts_ns, dur_ns, device, stream, work_kind, launch_event_id
-- @columns-as graph_launch_work: launch_op_name, launch_call_site, launch_ts_ns, position, launch_kernels
-- @columns-as graph_launch_work: launch_streams, replay_graph, graph_id, graph_node_id
-- @column capture_run_id VARCHAR The capture run (the argument).
-- @column match VARCHAR How the replayed graph matched a captured one: kernel_count, kernel_kinds, same_ops, ambiguous, no_match or no_capture (see above).
-- @column candidates BIGINT Captured graphs of the same size and kinds.
-- @column graph_index BIGINT The captured graph (`graph_captures.graph_index`) when exactly one fits, else NULL.
-- @column capture_launch_event_id BIGINT The captured launch call of this work, when one graph fits.
-- @columns-as graph_captures: op_event_id, op_name, top_op_event_id, top_op_name, call_site
CREATE OR REPLACE MACRO graph_kernel_ops(capture_run_id) AS TABLE
WITH captured AS MATERIALIZED (
  SELECT * FROM graph_captures(capture_run_id)
), work AS MATERIALIZED (
  SELECT * FROM graph_launch_work
), caps AS (
  SELECT graph_index, any_value(launches) AS launches, list(work_kind ORDER BY position) AS kinds,
         list(coalesce(op_name, '') ORDER BY position) AS ops, list(coalesce(top_op_name, '') ORDER BY position) AS top_ops
  FROM captured
  GROUP BY graph_index
), replays AS (
  SELECT run_id, replay_graph, any_value(launch_kernels) AS launch_kernels,
         list(work_kind ORDER BY position) AS kinds
  FROM (SELECT DISTINCT ON (run_id, replay_graph, position) run_id, replay_graph, position, launch_kernels, work_kind
        FROM work)
  GROUP BY run_id, replay_graph
), fits AS (
  SELECT r.run_id, r.replay_graph,
         count(c.graph_index) AS same_size,
         count(c.graph_index) FILTER (WHERE c.kinds = r.kinds) AS candidates,
         min(c.graph_index) FILTER (WHERE c.kinds = r.kinds) AS first_fit,
         count(DISTINCT [c.ops, c.top_ops]) FILTER (WHERE c.kinds = r.kinds) AS op_variants,
         any_value([c.ops, c.top_ops]) FILTER (WHERE c.kinds = r.kinds) AS some_ops
  FROM replays r LEFT JOIN caps c ON c.launches = r.launch_kernels
  GROUP BY r.run_id, r.replay_graph
), matched AS (
  SELECT run_id, replay_graph, candidates,
         CASE WHEN (SELECT count(*) FROM caps) = 0 THEN 'no_capture'
              WHEN candidates = 0 THEN 'no_match'
              WHEN candidates = 1 AND same_size = 1 THEN 'kernel_count'
              WHEN candidates = 1 THEN 'kernel_kinds'
              WHEN op_variants = 1 THEN 'same_ops'
              ELSE 'ambiguous' END AS match,
         CASE WHEN candidates = 1 THEN first_fit END AS graph_index,
         CASE WHEN candidates > 1 AND op_variants = 1 THEN some_ops END AS common_ops
  FROM fits
)
SELECT w.*, capture_run_id::VARCHAR AS capture_run_id, m.match, m.candidates, m.graph_index,
       c.launch_event_id AS capture_launch_event_id, c.op_event_id,
       coalesce(c.op_name, nullif(m.common_ops[1][w.position], '')) AS op_name,
       c.top_op_event_id,
       coalesce(c.top_op_name, nullif(m.common_ops[2][w.position], '')) AS top_op_name,
       c.call_site
FROM work w
JOIN matched m ON m.run_id = w.run_id AND m.replay_graph = w.replay_graph
LEFT JOIN captured c ON c.graph_index = m.graph_index AND c.position = w.position;

-- GPU time of each captured op over the replays of its graph, per replay run: the rows of
-- graph_kernel_ops(capture_run_id) that name one captured call (match kernel_count or
-- kernel_kinds), summed per op. For per-op cost models: the op's shapes are those of the capture
-- run (`shapes` of run capture_run_id, event op_event_id), and it ran `launches` times, so its work
-- is launches x its FLOPs and bytes. Ops of `same_ops` matches have a name but no id: not here.
-- @arg capture_run_id VARCHAR The run whose trace holds the captures (see graph_captures).
-- @columns-as graph_launch_work: run_id
-- @columns-as graph_kernel_ops: capture_run_id, graph_index, op_event_id, op_name, top_op_event_id, top_op_name
-- @column launches BIGINT Graph launches that ran the op's kernels.
-- @column kernels BIGINT Kernels, copies and sets of the op over those launches.
-- @column gpu_dur_ns BIGINT Their total time, ns.
CREATE OR REPLACE MACRO graph_op_time(capture_run_id) AS TABLE
SELECT run_id, any_value(capture_run_id) AS capture_run_id, graph_index, op_event_id, any_value(op_name) AS op_name,
       any_value(top_op_event_id) AS top_op_event_id, any_value(top_op_name) AS top_op_name,
       count(DISTINCT launch_event_id) AS launches, count(*) AS kernels, sum(dur_ns)::BIGINT AS gpu_dur_ns
FROM graph_kernel_ops(capture_run_id)
WHERE op_event_id IS NOT NULL
GROUP BY run_id, graph_index, op_event_id;
