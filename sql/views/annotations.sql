-- requires: gpu, reference
-- User annotations (record_function ranges) and the GPU kernels that run inside them.

-- Every user annotation: the record_function ranges on the CPU (`user_annotation`, and legacy
-- `Operator` events named with '#') and the GPU-side copies Kineto writes on the GPU timeline
-- (`gpu_user_annotation`), with whether it is a profiler step (`ProfilerStep#N`).
-- @column run_id VARCHAR Run of the annotation.
-- @column event_id BIGINT The annotation event.
-- @column timeline VARCHAR cpu (a range on a CPU thread) or gpu (its copy on a GPU stream).
-- @column name VARCHAR Annotation name, as given to record_function.
-- @columns-as events: pid, tid, ts_ns, dur_ns, depth
-- @column is_profiler_step BOOLEAN True for ProfilerStep#N ranges (the profiler's own, not the user's).
CREATE OR REPLACE VIEW user_annotations AS
SELECT e.run_id, e.event_id, CASE WHEN c.kind = 'device_annotation' THEN 'gpu' ELSE 'cpu' END AS timeline,
       e.name, e.pid, e.tid, e.ts_ns, e.dur_ns, e.depth, step_number(e.name) IS NOT NULL AS is_profiler_step
FROM events e
JOIN event_categories c ON c.category = e.category
WHERE e.phase = 'X' AND e.dur_ns IS NOT NULL
  AND (c.kind IN ('annotation', 'device_annotation') OR (c.annotation_name_like IS NOT NULL AND e.name LIKE c.annotation_name_like));

-- Every GPU kernel inside a user annotation, with the innermost one it is in, on each timeline
-- where the run has annotations (ProfilerStep#N left out: a kernel in a step and no annotation of
-- the user's has no row). On the GPU timeline, the innermost `gpu_user_annotation` that contains the
-- kernel on its stream (HTA's get_gpu_kernels_with_user_annotations picks the innermost that
-- overlaps it); on the CPU, the innermost user annotation around the runtime call that launched the
-- kernel, on the launching thread (kernels without a launch in the trace have no CPU row). A kernel
-- has at most one row per timeline.
-- @columns-as gpu_kernels: run_id, event_id
-- @columns-as user_annotations: timeline
-- @column annotation_id BIGINT The innermost annotation the kernel is in (its event_id).
-- @column annotation VARCHAR Name of that annotation.
-- @columns-as gpu_kernels: ts_ns, dur_ns, step
CREATE OR REPLACE VIEW annotation_kernels AS
WITH k AS (
  SELECT g.run_id, g.event_id, g.ts_ns, g.dur_ns, g.step, g.launch_event_id, e.parent_id
  FROM gpu_kernels g JOIN events e ON e.run_id = g.run_id AND e.event_id = g.event_id
), gpu_side AS (
  SELECT k.run_id, k.event_id, 'gpu' AS timeline, a.event_id AS annotation_id, a.name AS annotation,
         k.ts_ns, k.dur_ns, k.step
  FROM k JOIN user_annotations a
    ON a.run_id = k.run_id AND a.event_id = k.parent_id AND a.timeline = 'gpu' AND NOT a.is_profiler_step
), launched AS (
  SELECT k.run_id, k.event_id, k.ts_ns, k.dur_ns, k.step, l.pid, l.tid, l.ts_ns AS launch_ts_ns
  FROM k JOIN launch_calls l ON l.run_id = k.run_id AND l.event_id = k.launch_event_id
), cpu_side AS (
  SELECT l.run_id, l.event_id, 'cpu' AS timeline,
         arg_max(a.event_id, a.depth) AS annotation_id, arg_max(a.name, a.depth) AS annotation,
         any_value(l.ts_ns) AS ts_ns, any_value(l.dur_ns) AS dur_ns, any_value(l.step) AS step
  FROM launched l JOIN user_annotations a
    ON a.run_id = l.run_id AND a.pid = l.pid AND a.tid = l.tid AND a.timeline = 'cpu' AND NOT a.is_profiler_step
   AND a.ts_ns <= l.launch_ts_ns AND l.launch_ts_ns < a.ts_ns + a.dur_ns
  GROUP BY l.run_id, l.event_id
)
SELECT * FROM gpu_side
UNION ALL
SELECT * FROM cpu_side;
