-- requires: gpu
-- Idle gaps on the GPU: every stretch of time a stream runs nothing between two pieces of its work.

-- Every idle gap on a GPU stream: the time between the end of the stream's work so far (the latest
-- end of the kernels, memcpys and memsets that started before) and the start of the next work, when
-- that start is later (gaps of 0 and overlaps are no gaps). The gaps of a stream sum to its window
-- (first start to last end) minus its busy time (report idle). is_host_wait says whether the
-- runtime call that launched the work after the gap started after the stream's previous work had
-- ended (the GPU waited for the CPU): HTA's get_idle_time_breakdown calls such a gap host_wait, a
-- shorter gap than its consecutive_kernel_delay (30, compared with microsecond timestamps: 30 us) that is no host wait kernel_wait, and the
-- rest other (reports idle and idle-gaps take the threshold as a parameter). Unlike HTA, the
-- previous work is the one that ended last so far (HTA takes the previous row's end, which gives
-- negative gaps when work overlaps).
-- @columns-as device_events: run_id, device, stream
-- @column event_id BIGINT The work that ends the gap (starts right after it).
-- @column start_ns BIGINT Start of the gap: the latest end of the stream's earlier work, ns.
-- @column end_ns BIGINT End of the gap: the start of the work after it, ns.
-- @column gap_ns BIGINT Length of the gap, ns.
-- @column launch_ts_ns BIGINT Start of the runtime call that launched the work after the gap, ns (NULL when not in the trace).
-- @column is_host_wait BOOLEAN True when that launch call started after the gap had begun (the GPU waited for the CPU).
-- @column step BIGINT Profiler step of the launch of the work after the gap (NULL when none).
CREATE OR REPLACE VIEW gpu_idle_gaps AS
WITH ordered AS (
  SELECT run_id, device, stream, event_id, ts_ns, step,
         CASE WHEN launch_event_id IS NOT NULL THEN ts_ns - queue_delay_ns END AS launch_ts_ns,
         max(ts_ns + dur_ns) OVER (PARTITION BY run_id, device, stream ORDER BY ts_ns, ts_ns + dur_ns, event_id
                                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
  FROM device_work()
  WHERE dur_ns >= 0
)
SELECT run_id, device, stream, event_id, prev_end AS start_ns, ts_ns AS end_ns, ts_ns - prev_end AS gap_ns, launch_ts_ns,
       coalesce(launch_ts_ns > prev_end, false) AS is_host_wait, step
FROM ordered
WHERE ts_ns > prev_end;
