-- Busy intervals of every lane of a run, for utilization: top-level CPU ops (lane 'cpu', any
-- thread) and GPU work per device (lane 'gpu:N'), classified as compute, communication (the
-- kernels of `communication_kernel_names`: NCCL, RCCL and other collective kernels), memcpy or
-- memset, each with the step of its launch.
-- @column run_id VARCHAR Run of the interval.
-- @column lane VARCHAR 'cpu' for CPU ops, 'gpu:N' for device N.
-- @column device BIGINT GPU index (NULL on the CPU lane).
-- @column kind VARCHAR cpu_op, compute, communication, memcpy or memset.
-- @column step BIGINT Profiler step of the op, or of the GPU work's launch.
-- @column event_id BIGINT The event.
-- @column ts_ns BIGINT Start, ns.
-- @column end_ns BIGINT End, ns.
CREATE OR REPLACE VIEW activity AS
SELECT run_id, 'cpu' AS lane, NULL::BIGINT AS device, 'cpu_op' AS kind, step, event_id, ts_ns, ts_ns + dur_ns AS end_ns
FROM events WHERE cpu_op_id = event_id AND top_op_id = event_id  -- the rows of cpu_ops WHERE is_top_level
UNION ALL
SELECT run_id, 'gpu:' || coalesce(device::VARCHAR, '?'), device,
       CASE WHEN lower(category) IN ('gpu_memcpy', 'memcpy') THEN 'memcpy'
            WHEN lower(category) IN ('gpu_memset', 'memset') THEN 'memset'
            WHEN name IN (SELECT name FROM communication_kernel_names) THEN 'communication' ELSE 'compute' END,
       step, event_id, ts_ns, ts_ns + dur_ns
FROM device_work(['kernel', 'gpu_memcpy', 'memcpy', 'gpu_memset', 'memset']);

-- Busy time by interval union (overlapping intervals counted once) of the `activity` rows whose
-- kind is in `kinds`, per run and lane; per step too when by_step is true (else step is NULL),
-- and per kind when by_kind is true (else kind is NULL).
CREATE OR REPLACE MACRO busy_time(kinds, by_step, by_kind := false) AS TABLE
WITH iv AS (
  SELECT run_id, lane, CASE WHEN by_step THEN step END AS step, CASE WHEN by_kind THEN kind END AS kind, ts_ns, end_ns
  FROM activity WHERE list_contains(kinds, kind) AND end_ns >= ts_ns AND (NOT by_step OR step IS NOT NULL)
), ordered AS (
  SELECT *, max(end_ns) OVER (PARTITION BY run_id, lane, step, kind ORDER BY ts_ns, end_ns
                              ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
  FROM iv
), grouped AS (
  SELECT *, sum(CASE WHEN prev_end IS NULL OR ts_ns > prev_end THEN 1 ELSE 0 END)
              OVER (PARTITION BY run_id, lane, step, kind ORDER BY ts_ns, end_ns ROWS UNBOUNDED PRECEDING) AS island
  FROM ordered
), merged AS (
  SELECT run_id, lane, step, kind, island, min(ts_ns) AS s, max(end_ns) AS e FROM grouped GROUP BY ALL
)
SELECT run_id, lane, step, kind, sum(e - s)::BIGINT AS busy_ns, min(s) AS first_ns, max(e) AS last_ns
FROM merged GROUP BY run_id, lane, step, kind;
