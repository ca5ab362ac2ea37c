-- requires: reference
-- Profiler steps: the window of each step, and the step of every CPU event.

-- One row per profiler step: the CPU-side `ProfilerStep#N` annotation's window (`step_windows`,
-- found at ingest; legacy traces write the annotation as an `Operator` event). The GPU-side
-- `gpu_user_annotation` of the same name is not a second step; its span is gpu_ts_ns/gpu_dur_ns.
-- @column run_id VARCHAR Run the step belongs to.
-- @column step BIGINT N of ProfilerStep#N (numbering counts the schedule's wait and warmup steps).
-- @column event_id BIGINT The CPU ProfilerStep annotation event.
-- @column ts_ns BIGINT Start of the CPU window, ns.
-- @column dur_ns BIGINT Length of the CPU window, ns.
-- @column end_ns BIGINT End of the CPU window, ns.
-- @column gpu_ts_ns BIGINT Start of the GPU-side annotation of the same step, ns (NULL when absent).
-- @column gpu_dur_ns BIGINT Length of the GPU-side annotation, ns (NULL when absent).
CREATE OR REPLACE VIEW steps AS
WITH gpu AS (
  SELECT run_id, step_number(name) AS step,
         min(ts_ns) AS gpu_ts_ns, max(ts_ns + dur_ns) - min(ts_ns) AS gpu_dur_ns
  FROM events
  WHERE phase = 'X' AND category IN (SELECT category FROM event_categories WHERE kind = 'device_annotation')
    AND step_number(name) IS NOT NULL
  GROUP BY ALL
)
SELECT w.run_id, w.step, w.event_id, w.ts_ns, w.dur_ns, w.ts_ns + w.dur_ns AS end_ns, g.gpu_ts_ns, g.gpu_dur_ns
FROM step_windows w LEFT JOIN gpu g USING (run_id, step);

-- The profiler step of every CPU event whose start lies inside a ProfilerStep window (any thread
-- of the run; `events.step`, set at ingest). GPU events get their step through their launch (see `gpu_kernels`).
-- @columns-as events: run_id
-- @column event_id BIGINT The CPU event.
-- @column step BIGINT The step whose CPU window contains the event's start.
CREATE OR REPLACE VIEW event_steps AS
SELECT run_id, event_id, step FROM events WHERE step IS NOT NULL;
