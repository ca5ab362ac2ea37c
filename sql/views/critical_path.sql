-- requires: reference, gpu, communication, activity
-- The critical path of every profiler step: the chain of dependent work that set the step's
-- end-to-end time, found by a backward walk from the step's last-finishing event (HTA's
-- critical-path analysis builds the same dependency graph and takes its longest path).
--
-- A step's window runs from the start of its CPU `ProfilerStep#N` window to the later of that
-- window's end and the end of the last GPU work launched in the step; a run without profiler
-- steps is one window (step NULL) from its first CPU op or runtime call to its last CPU op,
-- runtime call or GPU work. The walk starts at the window's end, on that last GPU work or on the
-- step's CPU thread, and steps back to the dependency that finished last:
--   * GPU work (kernel, copy, set) -> the work on another stream it waited for (cudaStreamWaitEvent)
--     when that ended last, else the previous work on its stream when that ended at or after the
--     launch call started (the stream was busy: a kernel-to-kernel gap), else its launch call
--     (linked by correlation; the time from the call's start to the work's start is launch
--     latency), on whose CPU thread the walk goes on;
--   * a CPU thread at time t -> the latest synchronizing call (is_sync_call_name) on that thread
--     that returned by t; the time in between is CPU-bound (ops, Python, or the thread idle:
--     waits on other threads are not seen);
--   * a synchronizing call -> the GPU work it waited for, when any ended while it blocked, else
--     the call's start on its thread.
-- Inferred edges (the trace does not record them): which work a synchronizing call waited for is
-- the GPU work that ended last while the call blocked, on the synced stream when the call's
-- `cuda_sync` event names one (Stream Sync), else on any stream of the run; a stream wait
-- (Kineto's `Stream Wait Event`) links the last work launched on the other stream before the
-- named cudaEventRecord call to the first work launched on the waiting stream after the
-- cudaStreamWaitEvent call; the previous work on a stream is the one that started before it.
-- Not modelled: waits of one CPU thread on another (CPU-bound time), and stream waits in traces
-- without `Stream Wait Event` records (they show as launch latency or a kernel-to-kernel gap).
-- Every element is clipped to the window, so the elements of a window tile it: their lengths add
-- up to the window's length.
--
-- The walk follows stream chains in one stride: consecutive work on a stream that each waited
-- for the previous one (kernel-to-kernel gaps) is one `chain`, entered at any member and left at
-- its first member; chains are cut at every step's start so that no window starts inside one.

-- GPU work of the given runs (a list of run ids) with what the walk needs: its kind on the path,
-- the previous work on its stream, its launch call and the latest synchronizing call on the
-- launching thread that returned before the call started, and its chain (consecutive work on the
-- stream where each waited for the one before) with running sums along the stream of the gaps and
-- busy time (per kind) before each work, so that a walk crosses a chain in one step.
-- @arg run_ids VARCHAR[] The runs to read.
-- @columns-as device_events: run_id, event_id, name, ts_ns
-- @column end_ns BIGINT End on the GPU, ns.
-- @columns-as device_events: device, stream, work_kind
-- @columns-as device_work: launch_event_id
-- @column launch_pid VARCHAR Process of the launch call.
-- @column launch_tid VARCHAR Thread of the launch call.
-- @column launch_ts_ns BIGINT Start of the launch call, ns.
-- @columns-as device_work: step
-- @column kind VARCHAR Its time class (`gpu_time_class`): compute, communication, memcpy or memset.
-- @column prev_event_id BIGINT The previous work on its stream (by start).
-- @column prev_end_ns BIGINT End of the previous work, ns.
-- @column prev_ts_ns BIGINT Start of the previous work, ns.
-- @column prev_kind VARCHAR Time class of the previous work.
-- @column wait_event_id BIGINT The work on another stream it waited for (a stream wait), NULL when none.
-- @column wait_end_ns BIGINT End of that work, ns.
-- @column waits_on_other BOOLEAN True when the work on another stream is its predecessor: it ended last.
-- @column waits_on_prev BOOLEAN True when the previous work on its stream is its predecessor: it ended at or after the launch call started.
-- @column is_cut BOOLEAN True when a profiler step starts between the previous work's start and this one's: a chain starts here.
-- @column prev_busy_ns BIGINT The previous work's time up to this one's start, when it is the predecessor, ns; else 0.
-- @column gap_ns BIGINT Idle time between the previous work's end and this one's start, when it is the predecessor, ns; else 0.
-- @column chain HUGEINT The chain on its stream, numbered from 1: work that each waited for the one before.
-- @column stream_index BIGINT 1-based place of the work on its stream, by start.
-- @column cum_compute_ns HUGEINT Running sum of prev_busy_ns along the stream for compute predecessors, ns.
-- @column cum_comm_ns HUGEINT Running sum of prev_busy_ns along the stream for communication predecessors, ns.
-- @column cum_copy_ns HUGEINT Running sum of prev_busy_ns along the stream for memcpy and memset predecessors, ns.
-- @column cum_gap_ns HUGEINT Running sum of gap_ns along the stream, ns.
-- @column head_event_id BIGINT The first work of its chain.
-- @column launch_prior_sync_id BIGINT The latest synchronizing call on the launching thread that returned before the launch call started.
CREATE OR REPLACE MACRO critical_path_work(run_ids) AS TABLE
WITH launched AS (
  -- each GPU work item with the call that launched it (by correlation)
  SELECT g.run_id, g.event_id, g.name, g.ts_ns, g.ts_ns + g.dur_ns AS end_ns, g.device, g.stream, g.work_kind,
         l.event_id AS launch_event_id, l.pid AS launch_pid, l.tid AS launch_tid, l.ts_ns AS launch_ts_ns, l.step
  FROM device_events() g
  LEFT JOIN launch_calls l ON l.run_id = g.run_id AND l.correlation = g.correlation
  WHERE g.run_id IN (SELECT unnest(run_ids)) AND g.dur_ns IS NOT NULL
), kernel_names AS (
  -- whether each kernel name is communication: the rule runs once per name, not once per kernel
  SELECT name, kernel_collective(any_value(name)) IS NOT NULL AS is_comm FROM launched WHERE work_kind = 'kernel' GROUP BY name
), on_stream AS (
  -- each work's time class and the work before it on its stream
  SELECT w.*, gpu_time_class(w.work_kind, n.is_comm) AS kind,
         lag(w.event_id) OVER s AS prev_event_id, lag(w.end_ns) OVER s AS prev_end_ns, lag(w.ts_ns) OVER s AS prev_ts_ns
  FROM launched w LEFT JOIN kernel_names n USING (name)
  WINDOW s AS (PARTITION BY w.run_id, w.device, w.stream ORDER BY w.ts_ns, w.event_id)
), stream_waits AS (
  -- Kineto's GPU-side record of a cudaStreamWaitEvent: its stream waits for the work queued on
  -- wait_on_stream before the cudaEventRecord it names (wait_on_cuda_event_record_corr_id)
  SELECT x.run_id, x.event_id, device_of(x.device, x.pid) AS device, x.stream, x.correlation, x.ts_ns,
         max(a.int_value) FILTER (WHERE a.key = 'wait_on_stream') AS on_stream,
         max(a.int_value) FILTER (WHERE a.key = 'wait_on_cuda_event_record_corr_id') AS record_correlation
  FROM events x JOIN args a ON a.run_id = x.run_id AND a.event_id = x.event_id
  WHERE x.run_id IN (SELECT unnest(run_ids)) AND x.phase = 'X' AND x.name = 'Stream Wait Event'
    AND x.category IN (SELECT category FROM event_categories WHERE kind = 'sync')
    AND a.key IN ('wait_on_stream', 'wait_on_cuda_event_record_corr_id')
  GROUP BY ALL
), event_calls AS (
  -- the runtime calls that record an event or make a stream wait for one, by correlation
  SELECT run_id, correlation, min(ts_ns) AS ts_ns FROM events
  WHERE run_id IN (SELECT unnest(run_ids)) AND phase = 'X' AND correlation IS NOT NULL
    AND category IN (SELECT category FROM event_categories WHERE is_runtime)
    AND is_stream_event_call_name(name)
  GROUP BY ALL
), wait_times AS (
  -- each stream wait with the start of its wait call and of the record call it waits for
  SELECT x.*, coalesce(c.ts_ns, x.ts_ns) AS call_ts_ns, coalesce(r.ts_ns, c.ts_ns, x.ts_ns) AS record_ts_ns
  FROM stream_waits x
  LEFT JOIN event_calls c ON c.run_id = x.run_id AND c.correlation = x.correlation
  LEFT JOIN event_calls r ON r.run_id = x.run_id AND r.correlation = x.record_correlation
  WHERE x.on_stream IS NOT NULL AND x.stream IS NOT NULL AND x.on_stream <> x.stream
), awaited AS (
  -- the waited-for work: the last launched on the other stream before the event was recorded
  SELECT x.run_id, x.device, x.stream, x.call_ts_ns, a.event_id AS wait_event_id, a.end_ns AS wait_end_ns
  FROM wait_times x ASOF JOIN on_stream a
    ON a.run_id = x.run_id AND a.device = x.device AND a.stream = x.on_stream AND x.record_ts_ns >= a.launch_ts_ns
), waiter AS (
  -- the waiting work: the first launched on the waiting stream after the wait call
  SELECT d.event_id, d.run_id, arg_max(x.wait_event_id, x.wait_end_ns) AS wait_event_id, max(x.wait_end_ns) AS wait_end_ns
  FROM awaited x ASOF JOIN on_stream d
    ON d.run_id = x.run_id AND d.device = x.device AND d.stream = x.stream AND d.launch_ts_ns >= x.call_ts_ns
  GROUP BY ALL
), cut AS (
  -- a step starts inside (previous start, start]: a window may begin there, so no chain spans it
  SELECT DISTINCT p.run_id, p.event_id
  FROM on_stream p JOIN step_windows st ON st.run_id = p.run_id AND st.ts_ns > p.prev_ts_ns AND st.ts_ns <= p.ts_ns
), predecessors AS (
  -- what each work waited for: the work on another stream, the previous work on its stream, or its launch
  SELECT p.*, lag(p.kind) OVER s AS prev_kind, v.wait_event_id, v.wait_end_ns,
         -- the predecessor is the one that finished last: the other stream's work, the previous
         -- work on this stream, or the launch call (by its start)
         coalesce(v.wait_end_ns > coalesce(p.prev_end_ns, v.wait_end_ns - 1) AND v.wait_end_ns >= coalesce(p.launch_ts_ns, v.wait_end_ns), false) AS waits_on_other,
         p.prev_event_id IS NOT NULL AND (p.launch_ts_ns IS NULL OR p.prev_end_ns >= p.launch_ts_ns) AND NOT waits_on_other AS waits_on_prev,
         cut.event_id IS NOT NULL AS is_cut
  FROM on_stream p LEFT JOIN cut USING (run_id, event_id) LEFT JOIN waiter v USING (run_id, event_id)
  WINDOW s AS (PARTITION BY p.run_id, p.device, p.stream ORDER BY p.ts_ns, p.event_id)
), gaps AS (
  -- the previous work's time up to this one's start, and the gap between them
  SELECT p.*,
         CASE WHEN waits_on_prev THEN least(prev_end_ns, ts_ns) - least(prev_ts_ns, ts_ns) ELSE 0 END AS prev_busy_ns,
         CASE WHEN waits_on_prev THEN greatest(ts_ns - prev_end_ns, 0) ELSE 0 END AS gap_ns
  FROM predecessors p
), chains AS (
  -- the chains of each stream, and running sums along the stream of the time before each work
  SELECT x.*, sum(CASE WHEN waits_on_prev AND NOT is_cut THEN 0 ELSE 1 END) OVER s AS chain,
         row_number() OVER s AS stream_index,
         sum(CASE WHEN prev_kind = 'compute' THEN prev_busy_ns ELSE 0 END) OVER s AS cum_compute_ns,
         sum(CASE WHEN prev_kind = 'communication' THEN prev_busy_ns ELSE 0 END) OVER s AS cum_comm_ns,
         sum(CASE WHEN prev_kind IN ('memcpy', 'memset') THEN prev_busy_ns ELSE 0 END) OVER s AS cum_copy_ns,
         sum(gap_ns) OVER s AS cum_gap_ns
  FROM gaps x
  WINDOW s AS (PARTITION BY run_id, device, stream ORDER BY ts_ns, event_id ROWS UNBOUNDED PRECEDING)
), heads AS (
  -- each work with the first work of its chain, where a walk that enters the chain leaves it
  SELECT x.*, first_value(event_id) OVER (PARTITION BY run_id, device, stream, chain ORDER BY ts_ns, event_id) AS head_event_id
  FROM chains x
), syncs AS (
  -- the synchronizing calls, by thread and return
  SELECT run_id, pid, tid, end_ns, event_id FROM critical_path_syncs(run_ids)
)
SELECT h.*, s.event_id AS launch_prior_sync_id
FROM heads h ASOF LEFT JOIN syncs s
  ON s.run_id = h.run_id AND s.pid = h.launch_pid AND s.tid = h.launch_tid AND h.launch_ts_ns >= s.end_ns;

-- Synchronizing calls (is_sync_call_name) of the given runs with the previous one on their thread
-- (by return time) and the GPU work each waited for: the work that ended last while the call
-- blocked (after its start, by its return), on the synced stream when the call's `cuda_sync`
-- event (same correlation) names one, else on any stream of the run. NULL when no work ended
-- while it blocked: the call waited for nothing. Of works that ended at the same ns, the first
-- in the trace (the lowest event id).
-- @arg run_ids VARCHAR[] The runs to read.
-- @columns-as launch_calls: run_id
-- @column event_id BIGINT The synchronizing call.
-- @column name VARCHAR Its name, e.g. cudaStreamSynchronize, cudaMemcpy.
-- @columns-as launch_calls: pid, tid, ts_ns
-- @column end_ns BIGINT Its return, ns.
-- @column correlation BIGINT Its correlation id (its `cuda_sync` event has the same).
-- @column prev_sync_id BIGINT The previous synchronizing call on its thread, by return.
-- @column awaited_event_id BIGINT The GPU work it waited for, NULL when none ended while it blocked.
-- @column awaited_end_ns BIGINT End of that work, ns.
CREATE OR REPLACE MACRO critical_path_syncs(run_ids) AS TABLE
WITH sync_calls AS (
  -- the synchronizing calls, each with the one before it on its thread
  SELECT e.run_id, e.event_id, e.name, e.pid, e.tid, e.ts_ns, e.ts_ns + e.dur_ns AS end_ns, e.correlation,
         lag(e.event_id) OVER (PARTITION BY e.run_id, e.pid, e.tid ORDER BY e.ts_ns + e.dur_ns, e.event_id) AS prev_sync_id
  FROM events e
  WHERE e.run_id IN (SELECT unnest(run_ids)) AND e.phase = 'X' AND e.dur_ns IS NOT NULL
    AND e.category IN (SELECT category FROM event_categories WHERE is_runtime) AND is_sync_call_name(e.name)
), target AS (
  -- Kineto's GPU-side record of a stream sync names the stream it waited on
  SELECT e.run_id, e.correlation, any_value(e.device) AS device, any_value(e.stream) AS stream
  FROM events e
  WHERE e.run_id IN (SELECT unnest(run_ids)) AND e.phase = 'X' AND e.name = 'Stream Sync' AND e.stream IS NOT NULL
    AND e.category IN (SELECT category FROM event_categories WHERE kind = 'sync')
  GROUP BY ALL
), work_ends AS (
  -- the end of every GPU work item
  SELECT run_id, event_id, coalesce(device, -1) AS device, stream, ts_ns + dur_ns AS end_ns
  FROM device_events() WHERE run_id IN (SELECT unnest(run_ids)) AND dur_ns IS NOT NULL
), keyed AS MATERIALIZED (
  -- each work under the keys a call may look it up by: any work of the run; its stream on its
  -- device; its stream on any device
  SELECT run_id, 'any' AS scope, 0::BIGINT AS k_device, 0::BIGINT AS k_stream, end_ns, event_id FROM work_ends
  UNION ALL
  SELECT run_id, 'device_stream', device, stream, end_ns, event_id FROM work_ends WHERE stream IS NOT NULL
  UNION ALL
  SELECT run_id, 'stream', 0, stream, end_ns, event_id FROM work_ends WHERE stream IS NOT NULL
), lookups AS (
  -- each call with the key of the work it may have waited for
  SELECT s.run_id, s.event_id, s.ts_ns, s.end_ns,
         CASE WHEN t.stream IS NULL THEN 'any' WHEN t.device IS NULL THEN 'stream' ELSE 'device_stream' END AS scope,
         CASE WHEN t.stream IS NOT NULL AND t.device IS NOT NULL THEN t.device ELSE 0 END AS k_device,
         coalesce(t.stream, 0) AS k_stream
  FROM sync_calls s LEFT JOIN target t ON t.run_id = s.run_id AND t.correlation = s.correlation
), last_end AS (
  -- the last end by the call's return among the work it may wait for (an ASOF join: a range join
  -- would compare every call with every work of the run); none when that was before the call began
  SELECT l.run_id, l.event_id, l.scope, l.k_device, l.k_stream, k.end_ns AS awaited_end_ns
  FROM lookups l ASOF JOIN keyed k
    ON k.run_id = l.run_id AND k.scope = l.scope AND k.k_device = l.k_device AND k.k_stream = l.k_stream
   AND l.end_ns >= k.end_ns
  WHERE k.end_ns > l.ts_ns
), waited AS (
  -- of works that ended at that same ns, the first in the trace
  SELECT x.run_id, x.event_id, min(k.event_id) AS awaited_event_id, any_value(x.awaited_end_ns) AS awaited_end_ns
  FROM last_end x JOIN keyed k ON k.run_id = x.run_id AND k.scope = x.scope AND k.k_device = x.k_device
   AND k.k_stream = x.k_stream AND k.end_ns = x.awaited_end_ns
  GROUP BY x.run_id, x.event_id
)
SELECT s.*, waited.awaited_event_id, waited.awaited_end_ns FROM sync_calls s LEFT JOIN waited USING (run_id, event_id);

-- The critical path of every step of the given runs (a list of run ids), one row per element of
-- the path from the window's end back to its start (see the top of this file); the elements
-- tile the window. `critical_path` is this over every run.
-- @arg run_ids VARCHAR[] The runs to read.
-- @column run_id VARCHAR Run of the step.
-- @column step BIGINT N of ProfilerStep#N; NULL for the one window of a run without steps.
-- @column window_start_ns BIGINT Start of the window: the step's CPU window start (else the run's first CPU op, runtime call or GPU work), ns.
-- @column window_end_ns BIGINT End of the window: the later of the CPU window's end and the last end of the GPU work launched in the step, ns.
-- @column position BIGINT 1 for the element at the window's start, counting forward in time.
-- @column kind VARCHAR cpu (time on a CPU thread up to a launch or the window's end), sync (a synchronizing call from the end of the work it waited for to its return, or the whole call when it waited for nothing), launch (launch call start to the work's start), kernel_gap (idle stream between two works where the later was already launched), stream_wait (from the end of work on another stream to the start of the work that waited for it), gpu (a chain of GPU work on one stream) or unattributed (GPU work with neither a launch in the trace nor earlier work on its stream).
-- @column event_id BIGINT The element's event: the last GPU work of a gpu chain, the work after a kernel_gap or stream_wait, the launch call, the synchronizing call; NULL for cpu.
-- @column head_event_id BIGINT gpu: the first GPU work of the chain on the path (the element's start); NULL otherwise.
-- @column pid VARCHAR CPU process of cpu, sync and launch elements.
-- @column tid VARCHAR CPU thread of cpu, sync and launch elements.
-- @column device BIGINT GPU of gpu, kernel_gap, stream_wait and unattributed elements.
-- @column stream BIGINT Stream of gpu, kernel_gap, stream_wait and unattributed elements.
-- @column ts_ns BIGINT Start of the element, ns.
-- @column dur_ns BIGINT Length of the element, ns.
-- @column works BIGINT gpu: the GPU works (kernels, copies, sets) of the chain on the path; 0 otherwise.
-- @column cpu_ns BIGINT CPU-bound time in the element, ns.
-- @column gpu_compute_ns BIGINT Time of compute kernels in the element, ns.
-- @column communication_ns BIGINT Time of communication kernels (`kernel_collective`) in the element, ns.
-- @column gpu_copy_ns BIGINT Time of GPU memory copies and sets in the element, ns.
-- @column launch_ns BIGINT Launch latency in the element (launch call start to work start), ns.
-- @column kernel_gap_ns BIGINT Kernel-to-kernel overhead in the element (stream idle with the next work already launched, or waiting for work on another stream), ns.
-- @column sync_ns BIGINT Time in synchronizing calls that the GPU work does not explain, ns.
-- @column unattributed_ns BIGINT Time before GPU work that has neither a launch in the trace nor earlier work on its stream, ns.
CREATE OR REPLACE MACRO critical_path_of(run_ids) AS TABLE
WITH RECURSIVE work AS MATERIALIZED (
  SELECT * FROM critical_path_work(run_ids)
), syncs AS MATERIALIZED (
  SELECT * FROM critical_path_syncs(run_ids)
), last_gpu AS (
  SELECT run_id, step, arg_max(event_id, end_ns) AS event_id, max(end_ns) AS end_ns FROM work GROUP BY ALL
), cpu_events AS (
  -- CPU ops and runtime calls (a run often ends in cudaFree calls outside any op)
  SELECT run_id, pid, tid, ts_ns, ts_ns + dur_ns AS end_ns, event_id FROM events
  WHERE run_id IN (SELECT unnest(run_ids)) AND phase = 'X' AND dur_ns IS NOT NULL
    AND (is_cpu_op OR category IN (SELECT category FROM event_categories WHERE is_runtime))
), stepless AS (
  -- a run without profiler steps is one window, from its first CPU op, runtime call or GPU work
  SELECT r.run_id, NULL::BIGINT AS step,
         least((SELECT min(ts_ns) FROM cpu_events o WHERE o.run_id = r.run_id), (SELECT min(ts_ns) FROM work w WHERE w.run_id = r.run_id)) AS start_ns,
         (SELECT max(end_ns) FROM cpu_events o WHERE o.run_id = r.run_id) AS cpu_end_ns,
         (SELECT arg_max(pid, end_ns) FROM cpu_events o WHERE o.run_id = r.run_id) AS pid,
         (SELECT arg_max(tid, end_ns) FROM cpu_events o WHERE o.run_id = r.run_id) AS tid
  FROM (SELECT unnest(run_ids) AS run_id) r
  WHERE r.run_id NOT IN (SELECT run_id FROM step_windows)
), windows AS (
  SELECT st.run_id, st.step, st.ts_ns AS start_ns, st.ts_ns + st.dur_ns AS cpu_end_ns, e.pid, e.tid
  FROM step_windows st JOIN events e ON e.run_id = st.run_id AND e.event_id = st.event_id
  WHERE st.run_id IN (SELECT unnest(run_ids))
  UNION ALL
  SELECT * FROM stepless WHERE start_ns IS NOT NULL
), ends AS (
  -- a step ends with the last GPU work it launched; a run without steps with its last GPU work
  SELECT w.*, CASE WHEN w.step IS NULL THEN (SELECT arg_max(event_id, end_ns) FROM work x WHERE x.run_id = w.run_id)
                   ELSE g.event_id END AS last_gpu_event_id
  FROM windows w LEFT JOIN last_gpu g ON g.run_id = w.run_id AND g.step = w.step
), starts AS (
  SELECT e.run_id, e.step, e.start_ns,
         greatest(e.cpu_end_ns, lg.end_ns) AS end_ns,
         CASE WHEN lg.end_ns > coalesce(e.cpu_end_ns, lg.end_ns - 1) THEN 'gpu' ELSE 'cpu' END AS node,
         lg.event_id AS last_gpu_event_id, e.pid, e.tid
  FROM ends e LEFT JOIN work lg ON lg.run_id = e.run_id AND lg.event_id = e.last_gpu_event_id
), first AS (
  SELECT st.*, s.event_id AS prior_sync_id
  FROM starts st ASOF LEFT JOIN syncs s ON s.run_id = st.run_id AND s.pid = st.pid AND s.tid = st.tid AND st.end_ns >= s.end_ns
), path AS (
  SELECT run_id, step, start_ns AS window_start_ns, end_ns AS window_end_ns, 0 AS depth, 'end' AS kind,
         NULL::BIGINT AS event_id, NULL::BIGINT AS head_event_id, NULL::VARCHAR AS pid, NULL::VARCHAR AS tid,
         NULL::BIGINT AS device, NULL::BIGINT AS stream, end_ns AS ts_ns, end_ns AS end_ns,
         0::BIGINT AS cpu_ns, 0::BIGINT AS gpu_compute_ns, 0::BIGINT AS communication_ns, 0::BIGINT AS gpu_copy_ns,
         0::BIGINT AS launch_ns, 0::BIGINT AS kernel_gap_ns, 0::BIGINT AS sync_ns, 0::BIGINT AS unattributed_ns,
         0::BIGINT AS works, node AS next_kind,
         CASE WHEN node = 'gpu' THEN last_gpu_event_id END AS next_event_id,
         CASE WHEN node = 'cpu' THEN prior_sync_id END AS next_sync_id,
         CASE WHEN node = 'cpu' THEN pid END AS next_pid, CASE WHEN node = 'cpu' THEN tid END AS next_tid
  FROM first
  UNION ALL
  SELECT q.run_id, q.step, q.window_start_ns, q.window_end_ns, q.depth + 1, q.kind, q.event_id, q.head_event_id,
         q.pid, q.tid, q.device, q.stream, q.seg_start_ns, q.t_ns,
         CASE WHEN q.kind = 'cpu' THEN q.t_ns - q.seg_start_ns ELSE 0 END,
         CASE WHEN q.kind = 'gpu' THEN q.compute_ns ELSE 0 END,
         CASE WHEN q.kind = 'gpu' THEN q.comm_ns ELSE 0 END,
         CASE WHEN q.kind = 'gpu' THEN q.copy_ns ELSE 0 END,
         CASE WHEN q.kind = 'launch' THEN q.t_ns - q.seg_start_ns ELSE 0 END,
         CASE WHEN q.kind IN ('kernel_gap', 'stream_wait') THEN q.t_ns - q.seg_start_ns WHEN q.kind = 'gpu' THEN q.chain_gap_ns ELSE 0 END,
         CASE WHEN q.kind = 'sync' THEN q.t_ns - q.seg_start_ns ELSE 0 END,
         CASE WHEN q.kind = 'unattributed' THEN q.t_ns - q.seg_start_ns ELSE 0 END,
         CASE WHEN q.kind = 'gpu' THEN CASE WHEN q.enters_chain THEN q.w_stream_index - q.h_stream_index + 1 ELSE 1 END ELSE 0 END,
         q.next_kind, q.next_event_id, q.next_sync_id, q.next_pid, q.next_tid
  FROM (
    SELECT r.*,
           -- the element's start: where the walk goes on
           CASE r.kind
             WHEN 'gpu' THEN CASE WHEN r.enters_chain THEN least(r.h_ts_ns, r.t_ns) ELSE greatest(least(r.w_ts_ns, r.t_ns), r.window_start_ns) END
             WHEN 'kernel_gap' THEN greatest(least(r.w_prev_end_ns, r.t_ns), r.window_start_ns)
             WHEN 'stream_wait' THEN greatest(least(r.w_wait_end_ns, r.t_ns), r.window_start_ns)
             WHEN 'launch' THEN greatest(least(r.w_launch_ts_ns, r.t_ns), r.window_start_ns)
             WHEN 'cpu' THEN greatest(least(coalesce(r.s_end_ns, r.window_start_ns), r.t_ns), r.window_start_ns)
             WHEN 'sync' THEN greatest(least(coalesce(r.s_awaited_end_ns, r.s_ts_ns), r.t_ns), r.window_start_ns)
             ELSE r.window_start_ns
           END AS seg_start_ns,
           CASE WHEN r.kind = 'gpu' THEN r.own_compute_ns + CASE WHEN r.enters_chain THEN r.w_cum_compute_ns - r.h_cum_compute_ns ELSE 0 END END AS compute_ns,
           CASE WHEN r.kind = 'gpu' THEN r.own_comm_ns + CASE WHEN r.enters_chain THEN r.w_cum_comm_ns - r.h_cum_comm_ns ELSE 0 END END AS comm_ns,
           CASE WHEN r.kind = 'gpu' THEN r.own_copy_ns + CASE WHEN r.enters_chain THEN r.w_cum_copy_ns - r.h_cum_copy_ns ELSE 0 END END AS copy_ns,
           CASE WHEN r.kind = 'gpu' AND r.enters_chain THEN r.w_cum_gap_ns - r.h_cum_gap_ns ELSE 0 END AS chain_gap_ns,
           -- what comes before it
           CASE r.kind
             WHEN 'gpu' THEN CASE WHEN r.m_waits_on_prev THEN 'kernel_gap' WHEN r.m_waits_on_other THEN 'stream_wait'
                                  WHEN r.m_launch_ts_ns IS NOT NULL THEN 'launch' ELSE 'unattributed' END
             WHEN 'stream_wait' THEN 'gpu'
             WHEN 'kernel_gap' THEN 'gpu'
             WHEN 'launch' THEN 'cpu'
             WHEN 'cpu' THEN CASE WHEN r.s_event_id IS NOT NULL THEN 'sync' END
             WHEN 'sync' THEN CASE WHEN r.s_awaited_event_id IS NOT NULL THEN 'gpu' ELSE 'cpu' END
           END AS next_kind,
           CASE r.kind
             WHEN 'gpu' THEN r.m_event_id
             WHEN 'kernel_gap' THEN r.w_prev_event_id
             WHEN 'stream_wait' THEN r.w_wait_event_id
             WHEN 'sync' THEN r.s_awaited_event_id
           END AS next_event_id,
           CASE r.kind WHEN 'launch' THEN r.w_launch_prior_sync_id WHEN 'cpu' THEN r.s_event_id WHEN 'sync' THEN r.s_prev_sync_id END AS next_sync_id,
           CASE r.kind WHEN 'launch' THEN r.w_launch_pid WHEN 'sync' THEN r.s_pid END AS next_pid,
           CASE r.kind WHEN 'launch' THEN r.w_launch_tid WHEN 'sync' THEN r.s_tid END AS next_tid
    FROM (
      SELECT p.run_id, p.step, p.window_start_ns, p.window_end_ns, p.depth, p.next_kind AS kind, p.ts_ns AS t_ns,
             CASE p.next_kind WHEN 'launch' THEN w.launch_event_id WHEN 'cpu' THEN NULL WHEN 'sync' THEN s.event_id ELSE w.event_id END AS event_id,
             CASE WHEN p.next_kind = 'gpu' THEN CASE WHEN p.window_start_ns <= h.ts_ns THEN h.event_id ELSE w.event_id END END AS head_event_id,
             CASE p.next_kind WHEN 'cpu' THEN p.next_pid WHEN 'sync' THEN s.pid WHEN 'launch' THEN w.launch_pid END AS pid,
             CASE p.next_kind WHEN 'cpu' THEN p.next_tid WHEN 'sync' THEN s.tid WHEN 'launch' THEN w.launch_tid END AS tid,
             CASE WHEN p.next_kind IN ('gpu', 'kernel_gap', 'stream_wait', 'unattributed') THEN w.device END AS device,
             CASE WHEN p.next_kind IN ('gpu', 'kernel_gap', 'stream_wait', 'unattributed') THEN w.stream END AS stream,
             p.window_start_ns <= h.ts_ns AS enters_chain,
             w.ts_ns AS w_ts_ns, w.prev_end_ns AS w_prev_end_ns, w.prev_event_id AS w_prev_event_id,
             w.wait_end_ns AS w_wait_end_ns, w.wait_event_id AS w_wait_event_id,
             w.launch_ts_ns AS w_launch_ts_ns, w.launch_pid AS w_launch_pid, w.launch_tid AS w_launch_tid,
             w.launch_prior_sync_id AS w_launch_prior_sync_id,
             w.cum_compute_ns AS w_cum_compute_ns, w.cum_comm_ns AS w_cum_comm_ns, w.cum_copy_ns AS w_cum_copy_ns, w.cum_gap_ns AS w_cum_gap_ns,
             w.stream_index AS w_stream_index, h.stream_index AS h_stream_index,
             h.ts_ns AS h_ts_ns, h.cum_compute_ns AS h_cum_compute_ns, h.cum_comm_ns AS h_cum_comm_ns, h.cum_copy_ns AS h_cum_copy_ns, h.cum_gap_ns AS h_cum_gap_ns,
             -- the work's own time up to where the walk came in
             CASE WHEN w.kind = 'compute' THEN greatest(least(w.end_ns, p.ts_ns) - greatest(w.ts_ns, p.window_start_ns), 0) ELSE 0 END AS own_compute_ns,
             CASE WHEN w.kind = 'communication' THEN greatest(least(w.end_ns, p.ts_ns) - greatest(w.ts_ns, p.window_start_ns), 0) ELSE 0 END AS own_comm_ns,
             CASE WHEN w.kind IN ('memcpy', 'memset') THEN greatest(least(w.end_ns, p.ts_ns) - greatest(w.ts_ns, p.window_start_ns), 0) ELSE 0 END AS own_copy_ns,
             -- where the element ends on the stream: the chain's first work, else this one
             CASE WHEN p.window_start_ns <= h.ts_ns THEN h.event_id ELSE w.event_id END AS m_event_id,
             CASE WHEN p.window_start_ns <= h.ts_ns THEN h.waits_on_prev ELSE w.waits_on_prev END AS m_waits_on_prev,
             CASE WHEN p.window_start_ns <= h.ts_ns THEN h.waits_on_other ELSE w.waits_on_other END AS m_waits_on_other,
             CASE WHEN p.window_start_ns <= h.ts_ns THEN h.launch_ts_ns ELSE w.launch_ts_ns END AS m_launch_ts_ns,
             s.event_id AS s_event_id, s.ts_ns AS s_ts_ns, s.end_ns AS s_end_ns, s.pid AS s_pid, s.tid AS s_tid,
             s.prev_sync_id AS s_prev_sync_id, s.awaited_event_id AS s_awaited_event_id, s.awaited_end_ns AS s_awaited_end_ns
      FROM path p
      LEFT JOIN work w ON p.next_kind IN ('gpu', 'kernel_gap', 'stream_wait', 'launch', 'unattributed') AND w.run_id = p.run_id AND w.event_id = p.next_event_id
      LEFT JOIN work h ON p.next_kind = 'gpu' AND h.run_id = w.run_id AND h.event_id = w.head_event_id
      LEFT JOIN syncs s ON p.next_kind IN ('cpu', 'sync') AND s.run_id = p.run_id AND s.event_id = p.next_sync_id
      WHERE p.next_kind IS NOT NULL AND p.ts_ns > p.window_start_ns AND p.depth < 10000000
    ) r
  ) q
)
SELECT run_id, step, window_start_ns, window_end_ns,
       row_number() OVER (PARTITION BY run_id, step ORDER BY depth DESC) AS position,
       kind, event_id, head_event_id, pid, tid, device, stream, ts_ns, end_ns - ts_ns AS dur_ns,
       works, cpu_ns, gpu_compute_ns, communication_ns, gpu_copy_ns, launch_ns, kernel_gap_ns, sync_ns, unattributed_ns
FROM path WHERE kind <> 'end';

-- The critical path of every profiler step of every run (`critical_path_of` over all runs; a run
-- without profiler steps is one window with step NULL), one row per element, in time order by
-- `position`. An element is a stretch of CPU time on one thread, a synchronizing call, a launch
-- (call start to work start), a kernel-to-kernel gap, or a chain of GPU work on one stream (work
-- that each waited for the previous one, with the gaps between them); the elements of a window
-- tile it, and each element's breakdown columns add up to its dur_ns.
-- @columns-as critical_path_of: run_id, step, window_start_ns, window_end_ns, position, kind, event_id, head_event_id, pid, tid, device, stream
-- @columns-as critical_path_of: ts_ns, dur_ns, works, cpu_ns, gpu_compute_ns, communication_ns, gpu_copy_ns, launch_ns, kernel_gap_ns, sync_ns, unattributed_ns
CREATE OR REPLACE VIEW critical_path AS
SELECT * FROM critical_path_of((SELECT list(run_id) FROM runs));
