-- One row per profiler step: the CPU-side `ProfilerStep#N` annotation's window. The GPU-side
-- `gpu_user_annotation` of the same name is not a second step; its span is gpu_ts_ns/gpu_dur_ns.
-- Legacy traces write the step annotation as an `Operator` event; it is a step all the same.
-- @column run_id VARCHAR Run the step belongs to.
-- @column step BIGINT N of ProfilerStep#N (numbering counts the schedule's wait and warmup steps).
-- @column event_id BIGINT The CPU ProfilerStep annotation event.
-- @column ts_ns BIGINT Start of the CPU window, ns.
-- @column dur_ns BIGINT Length of the CPU window, ns.
-- @column end_ns BIGINT End of the CPU window, ns.
-- @column gpu_ts_ns BIGINT Start of the GPU-side annotation of the same step, ns (NULL when absent).
-- @column gpu_dur_ns BIGINT Length of the GPU-side annotation, ns (NULL when absent).
CREATE OR REPLACE VIEW steps AS
WITH cpu AS (
  SELECT run_id, event_id, ts_ns, dur_ns,
         TRY_CAST(regexp_extract(name, '^ProfilerStep#(\d+)$', 1) AS BIGINT) AS step
  FROM events
  WHERE phase = 'X' AND NOT on_device AND name LIKE 'ProfilerStep#%'
    AND category IN ('user_annotation', 'Operator', 'cpu_op')
), gpu AS (
  SELECT run_id, TRY_CAST(regexp_extract(name, '^ProfilerStep#(\d+)$', 1) AS BIGINT) AS step,
         min(ts_ns) AS gpu_ts_ns, max(ts_ns + dur_ns) - min(ts_ns) AS gpu_dur_ns
  FROM events
  WHERE phase = 'X' AND category = 'gpu_user_annotation' AND name LIKE 'ProfilerStep#%'
  GROUP BY ALL
)
SELECT c.run_id, c.step, c.event_id, c.ts_ns, c.dur_ns, c.ts_ns + c.dur_ns AS end_ns, g.gpu_ts_ns, g.gpu_dur_ns
FROM cpu c LEFT JOIN gpu g USING (run_id, step)
WHERE c.step IS NOT NULL;

-- The profiler step of every CPU event whose start lies inside a ProfilerStep window (any thread
-- of the run). GPU events get their step through their launch (see `gpu_kernels`).
-- @column run_id VARCHAR Run of the event.
-- @column event_id BIGINT The CPU event.
-- @column step BIGINT The step whose CPU window contains the event's start.
CREATE OR REPLACE VIEW event_steps AS
SELECT e.run_id, e.event_id, s.step
FROM (SELECT run_id, event_id, ts_ns FROM events WHERE NOT on_device AND ts_ns IS NOT NULL) e
ASOF JOIN steps s ON e.run_id = s.run_id AND e.ts_ns >= s.ts_ns
WHERE e.ts_ns < s.end_ns;
