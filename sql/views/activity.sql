-- requires: gpu, communication
-- Utilization: the busy intervals of every CPU and GPU lane, and GPU time by class.

-- The class of a GPU work item's time, the one classification of GPU time (`activity`, `gpu_time`
-- and the critical path's breakdown): its work kind (`event_categories.kind`) for a memcpy or
-- memset, 'communication' for a kernel the communication rule counts (is_communication:
-- `kernel_collective` names a collective for it), else 'compute'.
-- @arg work_kind VARCHAR The work's device work kind (`event_categories.kind`): kernel, memcpy or memset.
-- @arg is_communication BOOLEAN True for a kernel the communication rule counts.
CREATE OR REPLACE MACRO gpu_time_class(work_kind, is_communication) AS
CASE WHEN work_kind IN ('memcpy', 'memset') THEN work_kind WHEN is_communication THEN 'communication' ELSE 'compute' END;

-- The activity kind of a GPU work item (see `activity`): its `gpu_time_class`, communication for
-- the kernels of `communication_kernel_names`.
-- @arg item_kind VARCHAR The work's device work kind (`event_categories.kind`).
-- @arg item_name VARCHAR The work's name (a kernel's, for communication).
CREATE OR REPLACE MACRO activity_kind(item_kind, item_name) AS
gpu_time_class(item_kind, item_name IN (SELECT name FROM communication_kernel_names));

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
-- @columns-as events: ts_ns
-- @column end_ns BIGINT End, ns.
-- @column has_launch BOOLEAN GPU work: true when the runtime call that launched it is in the trace (linked by correlation); NULL on the CPU lane.
CREATE OR REPLACE VIEW activity AS
SELECT run_id, 'cpu' AS lane, NULL::BIGINT AS device, 'cpu_op' AS kind, step, event_id, ts_ns, ts_ns + dur_ns AS end_ns,
       NULL::BOOLEAN AS has_launch
FROM events WHERE is_top_level_op  -- the rows of cpu_ops WHERE is_top_level
UNION ALL
SELECT run_id, 'gpu:' || coalesce(device::VARCHAR, '?'), device, activity_kind(work_kind, name),
       step, event_id, ts_ns, ts_ns + dur_ns, launch_event_id IS NOT NULL
FROM device_work();

-- Busy time by interval union (overlapping intervals counted once) of the `activity` rows whose
-- kind is in `kinds`, per run and lane; per step too when by_step is true (else step is NULL),
-- and per kind when by_kind is true (else kind is NULL).
-- @arg kinds VARCHAR[] The `activity` kinds to count (cpu_op, compute, communication, memcpy, memset).
-- @arg by_step BOOLEAN True: per profiler step too (intervals outside every step left out).
-- @arg by_kind BOOLEAN True: per kind too.
-- @columns-as activity: run_id, lane
-- @column step BIGINT Profiler step, when by_step; else NULL.
-- @column kind VARCHAR The activity kind, when by_kind; else NULL.
-- @column busy_ns BIGINT Time with at least one interval running (their union), ns.
-- @column first_ns BIGINT Start of the first interval, ns.
-- @column last_ns BIGINT End of the last interval, ns.
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

-- GPU time per run and device lane (and per profiler step when by_step is true, else step is
-- NULL; GPU work belongs to the step of its launch, so work without a launch in the trace is left
-- out of the steps) in one pass over the lane's `activity` rows: every start counts +1 and every
-- end -1 for its kind; in time order, a running count per kind tells what runs in each stretch
-- between two edges. busy_ns (anything running) equals busy_time's interval union; the per-kind
-- times are each kind's union; communication_overlap_ns is communication while compute runs
-- (HTA's get_comm_comp_overlap numerator), exposed_communication_ns communication with no compute
-- running (TraceLens's exposed_comm_time); memcpy_overlap_ns is memcpy while compute runs,
-- exposed_memcpy_ns memcpy with neither compute nor communication running (TraceLens's
-- exposed_memcpy_time); first_ns/last_ns bound the device's own window (first start to last end of
-- its GPU work), the window HTA and TraceLens measure idle time in. linked_only keeps only GPU work
-- whose launching call is in the trace (`activity.has_launch`).
-- @summary by_step = false|true, linked_only = false|true
-- @arg by_step BOOLEAN True: per profiler step of the launches (GPU work without a launch in the trace left out); false: per run.
-- @arg linked_only BOOLEAN True: only GPU work whose launching call is in the trace (`activity.has_launch`).
-- @columns-as activity: run_id, lane, device
-- @column step BIGINT Profiler step of the launches, when by_step; else NULL.
-- @column busy_ns BIGINT Time with any GPU work running, ns (busy_time's interval union).
-- @column compute_ns BIGINT Time with a compute kernel running, ns.
-- @column communication_ns BIGINT Time with a communication kernel running, ns.
-- @column memcpy_ns BIGINT Time with a memcpy running, ns.
-- @column memset_ns BIGINT Time with a memset running, ns.
-- @column communication_overlap_ns BIGINT Communication while compute runs, ns (HTA's get_comm_comp_overlap numerator).
-- @column exposed_communication_ns BIGINT Communication with no compute running, ns (TraceLens's exposed_comm_time).
-- @column memcpy_overlap_ns BIGINT Memcpy while compute runs, ns.
-- @column exposed_memcpy_ns BIGINT Memcpy with neither compute nor communication running, ns (TraceLens's exposed_memcpy_time).
-- @column first_ns BIGINT First start of the device's GPU work, ns: the start of the window HTA and TraceLens measure idle time in.
-- @column last_ns BIGINT Last end of the device's GPU work, ns.
CREATE OR REPLACE MACRO gpu_time_of(by_step := false, linked_only := false, skip_runs := []::VARCHAR[]) AS TABLE
WITH skipped AS (
  SELECT unnest(skip_runs) AS run_id
), work AS (
  -- steps and linked_only need each item's launch (`activity`); the whole run does not, and reads
  -- the GPU events alone (one branch is empty: the optimizer drops it)
  SELECT run_id, device, CASE WHEN by_step THEN step END AS step, ts_ns, end_ns, kind
  FROM activity
  WHERE (by_step OR linked_only) AND lane <> 'cpu' AND end_ns >= ts_ns AND (NOT by_step OR step IS NOT NULL)
    AND (NOT linked_only OR has_launch) AND run_id NOT IN (SELECT run_id FROM skipped)
  UNION ALL
  SELECT run_id, device, NULL::BIGINT, ts_ns, ts_ns + dur_ns, activity_kind(work_kind, name)
  FROM device_events()
  WHERE NOT (by_step OR linked_only) AND dur_ns >= 0 AND run_id NOT IN (SELECT run_id FROM skipped)
), iv AS (
  -- each kind counts in its own 31-bit digit of one number, so one running sum carries all four
  -- counts (a device never runs 2^31 intervals at once: a run holds far fewer events)
  SELECT run_id, device, step, ts_ns, end_ns,
         CASE kind WHEN 'compute' THEN 1 WHEN 'communication' THEN 2147483648
                   WHEN 'memcpy' THEN 4611686018427387904 WHEN 'memset' THEN 9903520314283042199192993792
                   ELSE 0 END::HUGEINT AS digit
  FROM work
), edges AS (
  SELECT run_id, device, step, ts_ns AS t, 1 AS d, digit FROM iv
  UNION ALL
  SELECT run_id, device, step, end_ns, -1, -digit FROM iv
), swept AS (
  -- one sort, one running sum, per device (a lane is a device); at equal times starts come first,
  -- so no count is ever negative, and only the last edge's stretch is non-empty
  SELECT run_id, device, step, t, lead(t) OVER w - t AS len, sum(digit) OVER w AS counts
  FROM edges WINDOW w AS (PARTITION BY run_id, device, step ORDER BY t, d DESC ROWS UNBOUNDED PRECEDING)
), counted AS (
  -- the four counts back from their digits (counts > 0: anything runs); each quotient fits a
  -- BIGINT, as Spark's DIV needs
  SELECT run_id, device, step, t, len, counts, counts % 2147483648 AS n_compute,
         (counts % 4611686018427387904) // 2147483648 AS n_communication,
         (counts % 9903520314283042199192993792) // 4611686018427387904 AS n_memcpy,
         counts // 9903520314283042199192993792 AS n_memset
  FROM swept
)
SELECT run_id, 'gpu:' || coalesce(device::VARCHAR, '?') AS lane, device, step,
       coalesce(sum(len) FILTER (WHERE counts > 0), 0)::BIGINT AS busy_ns,
       coalesce(sum(len) FILTER (WHERE n_compute > 0), 0)::BIGINT AS compute_ns,
       coalesce(sum(len) FILTER (WHERE n_communication > 0), 0)::BIGINT AS communication_ns,
       coalesce(sum(len) FILTER (WHERE n_memcpy > 0), 0)::BIGINT AS memcpy_ns,
       coalesce(sum(len) FILTER (WHERE n_memset > 0), 0)::BIGINT AS memset_ns,
       coalesce(sum(len) FILTER (WHERE n_communication > 0 AND n_compute > 0), 0)::BIGINT AS communication_overlap_ns,
       coalesce(sum(len) FILTER (WHERE n_communication > 0 AND n_compute = 0), 0)::BIGINT AS exposed_communication_ns,
       coalesce(sum(len) FILTER (WHERE n_memcpy > 0 AND n_compute > 0), 0)::BIGINT AS memcpy_overlap_ns,
       coalesce(sum(len) FILTER (WHERE n_memcpy > 0 AND n_compute = 0 AND n_communication = 0), 0)::BIGINT AS exposed_memcpy_ns,
       min(t) AS first_ns, max(t) AS last_ns
FROM counted GROUP BY run_id, device, step;
