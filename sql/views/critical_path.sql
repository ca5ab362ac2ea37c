-- requires: reference, gpu, communication, activity
-- The critical path of every profiler step: the chain of dependent work that set the step's
-- end-to-end time, found by a backward walk from the step's last-finishing event (HTA's
-- critical-path analysis builds the same dependency graph and takes its longest path).
--
-- A step's window runs from the start of its CPU `ProfilerStep#N` window to the later of that
-- window's end and the end of the last GPU work launched in the step, but no later than the next
-- step's start (windows do not overlap: GPU work that runs on into the next step is on that step's
-- path); a run without profiler
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
--     the call's start on its thread. Blocking copies count as synchronizing calls: an async
--     device-to-host copy into pageable memory (or one whose copy ended before the call returned)
--     waits for its copy and the work queued before it, so the wait is GPU time on the path and
--     only the call's time after its copy ended is sync;
--   * on a run without GPU work, the CPU time of a step is cut along the outermost CPU ops of its
--     thread: one cpu element per op (event_id the op) and one per stretch between ops.
-- Inferred edges (the trace does not record them): which work a synchronizing call waited for is
-- the GPU work that ended last while the call blocked, on the synced stream when the call's
-- `cuda_sync` event names one (Stream Sync), else on any stream of the run; a stream wait
-- (Kineto's `Stream Wait Event`) links the last work launched on the other stream before the
-- named cudaEventRecord call to the first work launched on the waiting stream after the
-- cudaStreamWaitEvent call; a wait call (cudaStreamWaitEvent, hipStreamWaitEvent) without that
-- record (ROCm traces, older CUDA ones) makes the first work launched on its thread after it wait
-- for the work on another stream of its device that ended last by that work's start, when launched
-- before the wait call (edge `inferred_wait`); the previous work on a stream is the one that
-- started before it. Not modelled: waits of one CPU thread on another (CPU-bound time).
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
-- @column wait_inferred BOOLEAN True when that wait is inferred: a wait call without Kineto's `Stream Wait Event` record.
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
), on_stream AS MATERIALIZED (
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
), recorded_waiter AS (
  -- the waiting work: the first launched on the waiting stream after the wait call
  SELECT d.event_id, d.run_id, arg_max(x.wait_event_id, x.wait_end_ns) AS wait_event_id, max(x.wait_end_ns) AS wait_end_ns
  FROM awaited x ASOF JOIN on_stream d
    ON d.run_id = x.run_id AND d.device = x.device AND d.stream = x.stream AND d.launch_ts_ns >= x.call_ts_ns
  GROUP BY ALL
), unrecorded_waits AS (
  -- wait calls (cudaStreamWaitEvent, hipStreamWaitEvent) without Kineto's record of them: which
  -- stream waits, and on which, is not in the trace
  SELECT e.run_id, e.pid, e.tid, e.ts_ns FROM events e
  WHERE e.run_id IN (SELECT unnest(run_ids)) AND e.phase = 'X' AND is_stream_wait_call_name(e.name)
    AND e.category IN (SELECT category FROM event_categories WHERE is_runtime)
    AND NOT EXISTS (SELECT 1 FROM stream_waits x WHERE x.run_id = e.run_id AND x.correlation = e.correlation)
), inferred_waiter AS (
  -- the waiting work: the first launched on the wait call's thread after it, on the stream it waits on
  SELECT x.run_id, x.ts_ns AS call_ts_ns, d.event_id, d.device, d.stream, d.ts_ns
  FROM unrecorded_waits x ASOF JOIN on_stream d
    ON d.run_id = x.run_id AND d.launch_pid = x.pid AND d.launch_tid = x.tid AND d.launch_ts_ns >= x.ts_ns
), device_streams AS (
  SELECT DISTINCT run_id, device, stream FROM on_stream
), inferred_pairs AS MATERIALIZED (
  -- each waiting work with every other stream of its device
  SELECT w.run_id, w.event_id, w.device, s.stream AS on_stream, w.ts_ns, w.call_ts_ns FROM inferred_waiter w
  JOIN device_streams s ON s.run_id = w.run_id AND s.device = w.device AND s.stream <> w.stream
), inferred_awaited AS (
  -- on each other stream of its device, the work that ended last by the waiting work's start (a
  -- running last value over the stream's ends and the waiting works' starts, ends first on a tie),
  -- with its launch (it counts when launched before the wait call: the event was recorded before it)
  SELECT waiter_id AS event_id, run_id, wait_event_id, wait_end_ns, launch_ts_ns, call_ts_ns FROM (
    SELECT run_id, is_probe, waiter_id, call_ts_ns,
           last_value(work_id IGNORE NULLS) OVER o AS wait_event_id, last_value(work_end_ns IGNORE NULLS) OVER o AS wait_end_ns,
           last_value(work_launch_ts_ns IGNORE NULLS) OVER o AS launch_ts_ns
    FROM (SELECT run_id, device, on_stream AS stream, ts_ns AS t, true AS is_probe, event_id AS waiter_id, call_ts_ns,
                 NULL::BIGINT AS work_id, NULL::BIGINT AS work_end_ns, NULL::BIGINT AS work_launch_ts_ns FROM inferred_pairs
          UNION ALL
          SELECT run_id, device, stream, end_ns, false, NULL, NULL, event_id, end_ns, coalesce(launch_ts_ns, -1) FROM on_stream
          WHERE (run_id, device, stream) IN (SELECT (run_id, device, on_stream) FROM inferred_pairs))
    WINDOW o AS (PARTITION BY run_id, device, stream ORDER BY t, is_probe ROWS UNBOUNDED PRECEDING))
  WHERE is_probe AND wait_event_id IS NOT NULL
), waiter AS (
  -- a recorded wait wins; else the inferred one (the other stream's work that ended last)
  SELECT *, false AS wait_inferred FROM recorded_waiter
  UNION ALL
  SELECT i.event_id, i.run_id, arg_max(i.wait_event_id, i.wait_end_ns), max(i.wait_end_ns), true
  FROM inferred_awaited i ANTI JOIN recorded_waiter r ON r.run_id = i.run_id AND r.event_id = i.event_id
  WHERE i.launch_ts_ns <= i.call_ts_ns
  GROUP BY ALL
), cut AS (
  -- a step starts inside (previous start, start]: a window may begin there, so no chain spans it
  SELECT DISTINCT p.run_id, p.event_id
  FROM on_stream p JOIN step_windows st ON st.run_id = p.run_id AND st.ts_ns > p.prev_ts_ns AND st.ts_ns <= p.ts_ns
), predecessors AS (
  -- what each work waited for: the work on another stream, the previous work on its stream, or its launch
  SELECT p.*, lag(p.kind) OVER s AS prev_kind, v.wait_event_id, v.wait_end_ns, coalesce(v.wait_inferred, false) AS wait_inferred,
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

-- Synchronizing calls of the given runs with the previous one on their thread (by return time)
-- and the GPU work each waited for. A synchronizing call is one named so (is_sync_call_name:
-- cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize, cudaMemcpy, hipMemcpyWithStream,
-- ...) or a blocking copy: an async copy call (cudaMemcpyAsync, hipMemcpyAsync) whose copy is
-- device-to-host into pageable memory (the runtime stages it and returns only when it is done), or
-- into any memory when the copy ended before the call returned. The work it waited for is the work
-- that ended last while the call blocked (after its start, by its return): on the synced stream when
-- the call's `cuda_sync` event (same correlation) names one; else, for a call that made a copy (a
-- blocking copy, cudaMemcpy, hipMemcpyWithStream), on that copy's stream, so the copy itself or work
-- queued behind it; else on any stream of the run. NULL when no work ended while it blocked: the
-- call waited for nothing. Of works that ended at the same ns, the first in the trace (the lowest
-- event id).
-- @arg run_ids VARCHAR[] The runs to read.
-- @columns-as launch_calls: run_id
-- @column event_id BIGINT The synchronizing call.
-- @column name VARCHAR Its name, e.g. cudaStreamSynchronize, cudaMemcpy, cudaMemcpyAsync.
-- @columns-as launch_calls: pid, tid, ts_ns
-- @column end_ns BIGINT Its return, ns.
-- @column correlation BIGINT Its correlation id (its `cuda_sync` event and its copy have the same).
-- @column is_blocking_copy BOOLEAN True for an async copy call that blocked (see above), false for a call named as synchronizing.
-- @column prev_sync_id BIGINT The previous synchronizing call on its thread, by return.
-- @column awaited_event_id BIGINT The GPU work it waited for, NULL when none ended while it blocked.
-- @column awaited_end_ns BIGINT End of that work, ns.
CREATE OR REPLACE MACRO critical_path_syncs(run_ids) AS TABLE
WITH copies AS (
  -- the GPU copy of each copy call (by correlation): its stream, its end, device-to-host or not, into pinned memory or not
  SELECT run_id, correlation, any_value(coalesce(device, -1)) AS device, any_value(stream) AS stream, max(ts_ns + dur_ns) AS end_ns,
         bool_or(regexp_matches(name, '(?i)DtoH|DeviceToHost|D2H')) AS is_dtoh, bool_or(regexp_matches(name, '(?i)pinned')) AS to_pinned
  FROM device_events(['memcpy'])
  WHERE run_id IN (SELECT unnest(run_ids)) AND correlation IS NOT NULL AND dur_ns IS NOT NULL
  GROUP BY ALL
), calls AS (
  -- runtime calls named as synchronizing, and copy calls, with their copy
  SELECT e.run_id, e.event_id, e.name, e.pid, e.tid, e.ts_ns, e.ts_ns + e.dur_ns AS end_ns, e.correlation,
         NOT is_sync_call_name(e.name) AS is_blocking_copy, c.device AS copy_device, c.stream AS copy_stream,
         c.is_dtoh, c.to_pinned, c.end_ns AS copy_end_ns
  FROM events e LEFT JOIN copies c ON c.run_id = e.run_id AND c.correlation = e.correlation
  WHERE e.run_id IN (SELECT unnest(run_ids)) AND e.phase = 'X' AND e.dur_ns IS NOT NULL
    AND e.category IN (SELECT category FROM event_categories WHERE is_runtime)
    AND (is_sync_call_name(e.name) OR launch_call_kind(e.name) = 'memcpy')
), blocking AS (
  -- the synchronizing calls and blocking copies
  SELECT * FROM calls WHERE NOT is_blocking_copy OR (is_dtoh AND (NOT to_pinned OR copy_end_ns <= end_ns))
), sync_calls AS (
  -- each with the one before it on its thread
  SELECT run_id, event_id, name, pid, tid, ts_ns, end_ns, correlation, is_blocking_copy,
         lag(event_id) OVER (PARTITION BY run_id, pid, tid ORDER BY end_ns, event_id) AS prev_sync_id, copy_device, copy_stream
  FROM blocking
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
         CASE WHEN t.stream IS NOT NULL THEN CASE WHEN t.device IS NULL THEN 'stream' ELSE 'device_stream' END
              WHEN s.copy_stream IS NOT NULL THEN 'device_stream' ELSE 'any' END AS scope,
         CASE WHEN t.stream IS NOT NULL THEN coalesce(t.device, 0) WHEN s.copy_stream IS NOT NULL THEN s.copy_device ELSE 0 END AS k_device,
         coalesce(t.stream, s.copy_stream, 0) AS k_stream
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
SELECT s.* EXCLUDE (copy_device, copy_stream), waited.awaited_event_id, waited.awaited_end_ns
FROM sync_calls s LEFT JOIN waited USING (run_id, event_id);

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
-- @column event_id BIGINT The element's event: the last GPU work of a gpu chain, the work after a kernel_gap or stream_wait, the launch call, the synchronizing call; for cpu, the outermost CPU op on a run without GPU work, else NULL.
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
-- @column edge VARCHAR The dependency a stream_wait or sync element stands for: recorded_wait (Kineto's `Stream Wait Event`), inferred_wait (a wait call without that record: the other stream's work that ended last before the waiting work started), sync_call (a call named as synchronizing) or blocking_copy (an async device-to-host copy call that blocked); NULL for other kinds.
CREATE OR REPLACE MACRO critical_path_of(run_ids) AS TABLE
WITH RECURSIVE work AS MATERIALIZED (
  SELECT * FROM critical_path_work(run_ids)
), syncs AS MATERIALIZED (
  SELECT * FROM critical_path_syncs(run_ids)
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
), cpu_windows AS (
  SELECT st.run_id, st.step, st.ts_ns AS start_ns, st.ts_ns + st.dur_ns AS cpu_end_ns, e.pid, e.tid
  FROM step_windows st JOIN events e ON e.run_id = st.run_id AND e.event_id = st.event_id
  WHERE st.run_id IN (SELECT unnest(run_ids))
), windows AS (
  -- each step's window ends at the latest where the next step's begins: windows do not overlap
  SELECT *, lead(start_ns) OVER (PARTITION BY run_id ORDER BY start_ns, step) AS next_start_ns FROM cpu_windows
  UNION ALL
  SELECT *, NULL::BIGINT FROM stepless WHERE start_ns IS NOT NULL
), last_gpu AS (
  -- a step ends with the last-ending GPU work it launched that started before the next step
  SELECT w.run_id, w.step, arg_max(x.event_id, x.end_ns) AS event_id, max(x.end_ns) AS end_ns
  FROM windows w JOIN work x ON x.run_id = w.run_id AND x.step = w.step AND (w.next_start_ns IS NULL OR x.ts_ns < w.next_start_ns)
  WHERE w.step IS NOT NULL
  GROUP BY ALL
), ends AS (
  -- a run without steps ends with its last GPU work
  SELECT w.*, CASE WHEN w.step IS NULL THEN (SELECT arg_max(event_id, end_ns) FROM work x WHERE x.run_id = w.run_id)
                   ELSE g.event_id END AS last_gpu_event_id
  FROM windows w LEFT JOIN last_gpu g ON g.run_id = w.run_id AND g.step = w.step
), starts AS (
  SELECT e.run_id, e.step, e.start_ns,
         least(greatest(e.cpu_end_ns, lg.end_ns), coalesce(e.next_start_ns, greatest(e.cpu_end_ns, lg.end_ns))) AS end_ns,
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
), elements AS (
  -- the path's elements, with the edge each stands for
  SELECT p.* EXCLUDE (next_kind, next_event_id, next_sync_id, next_pid, next_tid),
         CASE WHEN p.kind = 'stream_wait' THEN CASE WHEN w.wait_inferred THEN 'inferred_wait' ELSE 'recorded_wait' END
              WHEN p.kind = 'sync' THEN CASE WHEN s.is_blocking_copy THEN 'blocking_copy' ELSE 'sync_call' END END AS edge,
         0 AS piece
  FROM path p
  LEFT JOIN work w ON p.kind = 'stream_wait' AND w.run_id = p.run_id AND w.event_id = p.event_id
  LEFT JOIN syncs s ON p.kind = 'sync' AND s.run_id = p.run_id AND s.event_id = p.event_id
  WHERE p.kind <> 'end'
), cpu_only AS (
  -- runs without GPU work: their cpu elements are walked op by op
  SELECT unnest(run_ids) AS run_id EXCEPT SELECT run_id FROM work
), top_ops AS (
  -- the outermost CPU ops of those runs
  SELECT o.run_id, o.pid, o.tid, o.event_id, o.ts_ns, o.ts_ns + o.dur_ns AS end_ns FROM events o
  WHERE o.run_id IN (SELECT run_id FROM cpu_only) AND o.phase = 'X' AND o.is_cpu_op AND o.is_top_level_op AND o.dur_ns IS NOT NULL
), op_spans AS (
  -- each outermost op on the element's thread, clipped to the element and to the ops before it
  SELECT x.*, lag(x.end_ns) OVER (PARTITION BY x.run_id, x.step, x.depth ORDER BY x.ts_ns, x.op_id) AS prev_end_ns
  FROM (SELECT c.run_id, c.step, c.depth, c.ts_ns AS el_ts_ns, c.end_ns AS el_end_ns, o.event_id AS op_id,
               greatest(o.ts_ns, c.ts_ns, coalesce(max(o.end_ns) OVER (PARTITION BY c.run_id, c.step, c.depth ORDER BY o.ts_ns, o.event_id
                                                                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), c.ts_ns)) AS ts_ns,
               least(o.end_ns, c.end_ns) AS end_ns
        FROM elements c JOIN top_ops o ON o.run_id = c.run_id AND o.pid = c.pid AND o.tid = c.tid AND o.ts_ns < c.end_ns AND o.end_ns > c.ts_ns
        WHERE c.kind = 'cpu') x
  WHERE x.end_ns > x.ts_ns
), pieces AS (
  -- the ops, and the time between them (and before the first, after the last) as cpu without an op
  SELECT run_id, step, depth, op_id AS event_id, ts_ns, end_ns FROM op_spans
  UNION ALL
  SELECT run_id, step, depth, NULL, coalesce(prev_end_ns, el_ts_ns), ts_ns FROM op_spans WHERE ts_ns > coalesce(prev_end_ns, el_ts_ns)
  UNION ALL
  SELECT run_id, step, depth, NULL, max(end_ns), any_value(el_end_ns) FROM op_spans GROUP BY ALL HAVING max(end_ns) < any_value(el_end_ns)
), split AS (
  -- cpu elements of runs without GPU work, cut along their outermost ops
  SELECT c.* EXCLUDE (event_id, ts_ns, end_ns, cpu_ns, piece), x.event_id, x.ts_ns, x.end_ns, x.end_ns - x.ts_ns AS cpu_ns,
         row_number() OVER (PARTITION BY c.run_id, c.step, c.depth ORDER BY x.ts_ns) AS piece
  FROM elements c JOIN pieces x ON x.run_id = c.run_id AND x.step IS NOT DISTINCT FROM c.step AND x.depth = c.depth
  WHERE c.kind = 'cpu'
), all_elements AS (
  SELECT * FROM elements
  WHERE NOT (kind = 'cpu' AND (run_id, step, depth) IN (SELECT (run_id, step, depth) FROM split))
  UNION ALL BY NAME
  SELECT * FROM split
)
SELECT run_id, step, window_start_ns, window_end_ns,
       row_number() OVER (PARTITION BY run_id, step ORDER BY depth DESC, piece) AS position,
       kind, event_id, head_event_id, pid, tid, device, stream, ts_ns, end_ns - ts_ns AS dur_ns,
       works, cpu_ns, gpu_compute_ns, communication_ns, gpu_copy_ns, launch_ns, kernel_gap_ns, sync_ns, unattributed_ns, edge
FROM all_elements;

-- The critical path of every profiler step of every run (`critical_path_of` over all runs; a run
-- without profiler steps is one window with step NULL), one row per element, in time order by
-- `position`. An element is a stretch of CPU time on one thread, a synchronizing call, a launch
-- (call start to work start), a kernel-to-kernel gap, or a chain of GPU work on one stream (work
-- that each waited for the previous one, with the gaps between them); the elements of a window
-- tile it, and each element's breakdown columns add up to its dur_ns.
-- @columns-as critical_path_of: run_id, step, window_start_ns, window_end_ns, position, kind, event_id, head_event_id, pid, tid, device, stream
-- @columns-as critical_path_of: ts_ns, dur_ns, works, cpu_ns, gpu_compute_ns, communication_ns, gpu_copy_ns, launch_ns, kernel_gap_ns, sync_ns, unattributed_ns, edge
CREATE OR REPLACE VIEW critical_path AS
SELECT * FROM critical_path_of((SELECT list(run_id) FROM runs));
