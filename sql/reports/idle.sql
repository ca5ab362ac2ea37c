-- title: Why the GPU idles: idle time breakdown and launch queue per stream
-- description: Per run, device and stream: the gaps between consecutive GPU work (kernels, memcpys, memsets) on the stream, split as HTA's get_idle_time_breakdown does: host_wait when the runtime call that launched the work after the gap started after the stream's previous work had ended (the GPU waited for the CPU to launch), kernel_wait when the gap is shorter than kernel_wait_threshold_ns (default 30 us, HTA's: its consecutive_kernel_delay=30 is documented as 30 ns but compared with HTA's microsecond timestamps, so a gap under 30 us is kernel_wait; the overhead of launching back-to-back kernels), other for the rest (waits on other streams, events, synchronization, or work with no launch in the trace). Plus the launch queue (HTA's queue length): each launch call counts +1 on the stream from its start until its work starts on the GPU, a CUDA/HIP graph launch once (one item in the queue, until its first piece of work on the stream starts; HTA leaves graph launches and their kernels out altogether); max_queued_work and mean_queued_work count the pieces of work instead (each kernel of a graph); work whose launch is not in the trace is left out. Unlike HTA, the previous work is the one that ended last so far on the stream (not the previous row) and only gaps longer than 0 count, so host_wait_ns + kernel_wait_ns + other_ns = idle_ns = window_ns - busy_ns; the mean queue length is weighted by time (HTA's summary averages the change points).
-- per-run: true
-- empty: no kernels, memcpys or memsets in the selected runs
-- param: kernel_wait_threshold_ns BIGINT = 30000 -- gaps shorter than this (and not host waits) are kernel_wait, ns (30 us, HTA's default)
-- column: run_id VARCHAR [key] -- the run
-- column: run_name VARCHAR [key] -- name of the run
-- column: device BIGINT [key] -- GPU index
-- column: stream BIGINT [key] -- stream
-- column: work_items BIGINT [detail] -- kernels, memcpys and memsets on the stream
-- column: window_ns BIGINT [detail] -- first start to last end of the stream's work, ns
-- column: busy_ns BIGINT [detail] -- time the stream ran work (union), ns
-- column: idle_ns BIGINT [result] -- window_ns minus busy_ns: the sum of the gaps, ns
-- column: host_wait_ns BIGINT [result] -- gaps that end with work launched after the stream's previous work ended: the GPU waited for the CPU, ns
-- column: kernel_wait_ns BIGINT [result] -- other gaps shorter than kernel_wait_threshold_ns: back-to-back launch overhead, ns
-- column: other_ns BIGINT [result] -- the remaining gaps, ns
-- column: host_wait_pct DOUBLE [result] -- host_wait_ns over idle_ns, percent
-- column: max_queue_length BIGINT [detail] -- most launches (a graph launch once) not yet started on the stream at one time
-- column: mean_queue_length DOUBLE [detail] -- launch queue length (launches) averaged over time, from the stream's first launch to its last start
-- column: max_queued_work BIGINT [detail] -- most pieces of work (kernels, memcpys, memsets; each kernel of a graph) launched but not yet started on the stream at one time
-- column: mean_queued_work DOUBLE [detail] -- pieces of work launched but not yet started, averaged over the same time
WITH w AS (
  SELECT run_id, device, stream, event_id, ts_ns, ts_ns + dur_ns AS end_ns, launch_event_id,
         CASE WHEN launch_event_id IS NOT NULL THEN ts_ns - queue_delay_ns END AS launch_ts_ns
  FROM device_work()
  WHERE run_id IN (SELECT run_id FROM report_runs) AND dur_ns >= 0
), ordered AS (
  SELECT *, max(end_ns) OVER (PARTITION BY run_id, device, stream ORDER BY ts_ns, end_ns, event_id
                              ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
  FROM w
), gaps AS (
  SELECT run_id, device, stream, ts_ns - prev_end AS gap_ns,
         CASE WHEN launch_ts_ns > prev_end THEN 'host_wait'
              WHEN ts_ns - prev_end < $kernel_wait_threshold_ns THEN 'kernel_wait' ELSE 'other' END AS category
  FROM ordered WHERE ts_ns > prev_end
), streams AS (
  SELECT run_id, device, stream, count(*) AS work_items, max(end_ns) - min(ts_ns) AS window_ns FROM w GROUP BY ALL
), idle AS (
  SELECT run_id, device, stream, sum(gap_ns)::BIGINT AS idle_ns,
         coalesce(sum(gap_ns) FILTER (WHERE category = 'host_wait'), 0)::BIGINT AS host_wait_ns,
         coalesce(sum(gap_ns) FILTER (WHERE category = 'kernel_wait'), 0)::BIGINT AS kernel_wait_ns,
         coalesce(sum(gap_ns) FILTER (WHERE category = 'other'), 0)::BIGINT AS other_ns
  FROM gaps GROUP BY ALL
), launches AS (
  -- one queue item per launch call and stream: a graph launch's work leaves it when its first piece starts
  SELECT run_id, device, stream, min(launch_ts_ns) AS launch_ts_ns, min(ts_ns) AS ts_ns
  FROM w WHERE launch_ts_ns IS NOT NULL GROUP BY run_id, device, stream, launch_event_id
), queue_edges AS (
  SELECT 'launch' AS unit, run_id, device, stream, launch_ts_ns AS t, 1 AS d FROM launches
  UNION ALL
  SELECT 'launch', run_id, device, stream, ts_ns, -1 FROM launches
  UNION ALL
  SELECT 'work', run_id, device, stream, launch_ts_ns, 1 FROM w WHERE launch_ts_ns IS NOT NULL
  UNION ALL
  SELECT 'work', run_id, device, stream, ts_ns, -1 FROM w WHERE launch_ts_ns IS NOT NULL
), queue AS (
  -- at equal times starts leave the queue before launches join it
  SELECT unit, run_id, device, stream, t, sum(d) OVER q AS queued, lead(t) OVER q - t AS len
  FROM queue_edges WINDOW q AS (PARTITION BY unit, run_id, device, stream ORDER BY t, d ROWS UNBOUNDED PRECEDING)
), queue_stats AS (
  SELECT run_id, device, stream,
         (max(queued) FILTER (WHERE unit = 'launch'))::BIGINT AS max_queue_length,
         round(sum(queued * len) FILTER (WHERE unit = 'launch')
               / nullif(max(t) FILTER (WHERE unit = 'launch') - min(t) FILTER (WHERE unit = 'launch'), 0), 3) AS mean_queue_length,
         (max(queued) FILTER (WHERE unit = 'work'))::BIGINT AS max_queued_work,
         round(sum(queued * len) FILTER (WHERE unit = 'work')
               / nullif(max(t) FILTER (WHERE unit = 'work') - min(t) FILTER (WHERE unit = 'work'), 0), 3) AS mean_queued_work
  FROM queue GROUP BY ALL
)
SELECT s.run_id, r.name AS run_name, s.device, s.stream, s.work_items, s.window_ns, s.window_ns - coalesce(i.idle_ns, 0) AS busy_ns,
       coalesce(i.idle_ns, 0) AS idle_ns, coalesce(i.host_wait_ns, 0) AS host_wait_ns,
       coalesce(i.kernel_wait_ns, 0) AS kernel_wait_ns, coalesce(i.other_ns, 0) AS other_ns,
       round(100.0 * i.host_wait_ns / nullif(i.idle_ns, 0), 2) AS host_wait_pct,
       q.max_queue_length, q.mean_queue_length, q.max_queued_work, q.mean_queued_work
FROM streams s JOIN runs r USING (run_id)
LEFT JOIN idle i USING (run_id, device, stream) LEFT JOIN queue_stats q USING (run_id, device, stream)
ORDER BY s.run_id, s.device, s.stream
