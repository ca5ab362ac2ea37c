-- requires: reference
-- Steps: the window of each step, and the step of every CPU event.

-- One row per step: the window of the CPU annotation that marks it (`step_windows`, found at
-- ingest): `ProfilerStep#N` (legacy traces write it as an `Operator` event); in a trace without
-- it, an inference engine's step markers, SGLang's `step[DECODE bs=32]` / `step[EXTEND bs=4 toks=512]`,
-- else vLLM's `execute_<tokens>_context_<n>(...)_generation_<m>(...)`; or the annotations of a
-- pattern given at ingest (`--step-marker`) or later (`traceduck step-marker`). The GPU-side
-- `gpu_user_annotation` of a ProfilerStep is not a second step; its span is gpu_ts_ns/gpu_dur_ns.
-- Warm-up: a step is a warm-up step when it and every step of its run and phase before it lasted
-- more than 3 times the median duration of the run's steps of that phase (steps of each phase
-- compared with each other, those without a phase as one group): the slow first steps of a run
-- (allocator growth, compilation, graph capture), not a slow step amid steady ones. The step-stats
-- report leaves warm-up steps out unless asked.
-- @column run_id VARCHAR Run the step belongs to.
-- @column step BIGINT N of ProfilerStep#N (numbering counts the schedule's wait and warmup steps), the number a --step-marker pattern's first group captures, else 0, 1, ... by start.
-- @column event_id BIGINT The CPU annotation event that marks the step.
-- @column ts_ns BIGINT Start of the CPU window, ns.
-- @column dur_ns BIGINT Length of the CPU window, ns.
-- @column end_ns BIGINT End of the CPU window, ns.
-- @column gpu_ts_ns BIGINT Start of the GPU-side annotation of the same ProfilerStep, ns (NULL when absent, and for other markers).
-- @column gpu_dur_ns BIGINT Length of the GPU-side annotation, ns (NULL when absent, and for other markers).
-- @column marker VARCHAR Name of the annotation that marks the step, e.g. ProfilerStep#3 or step[DECODE bs=32].
-- @column phase VARCHAR Inference phase from the marker: prefill, decode or mixed (macro step_marker_phase); NULL when the marker tells none.
-- @column batch_size BIGINT Requests in the step, where the marker carries them (macro step_marker_batch_size).
-- @column tokens BIGINT Tokens of the step, where the marker carries them (macro step_marker_tokens).
-- @column is_warmup BOOLEAN True for a warm-up step (see above).
CREATE OR REPLACE VIEW steps AS
WITH gpu AS (
  SELECT run_id, step_number(name) AS step,
         min(ts_ns) AS gpu_ts_ns, max(ts_ns + dur_ns) - min(ts_ns) AS gpu_dur_ns
  FROM events
  WHERE phase = 'X' AND category IN (SELECT category FROM event_categories WHERE kind = 'device_annotation')
    AND step_number(name) IS NOT NULL
  GROUP BY ALL
), marked AS (
  SELECT w.run_id, w.step, w.event_id, w.ts_ns, w.dur_ns, e.name AS marker, step_marker_phase(e.name) AS phase
  FROM step_windows w LEFT JOIN (SELECT run_id, event_id, name FROM events WHERE phase = 'X') e
    ON e.run_id = w.run_id AND e.event_id = w.event_id
), slow AS (
  SELECT *, CASE WHEN dur_ns > 3 * median(dur_ns) OVER (PARTITION BY run_id, phase) THEN 1 ELSE 0 END AS is_slow
  FROM marked
), warm AS (
  SELECT *, min(is_slow) OVER (PARTITION BY run_id, phase ORDER BY ts_ns, step
                               ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) = 1 AS is_warmup
  FROM slow
)
SELECT w.run_id, w.step, w.event_id, w.ts_ns, w.dur_ns, w.ts_ns + w.dur_ns AS end_ns, g.gpu_ts_ns, g.gpu_dur_ns,
       w.marker, w.phase, step_marker_batch_size(w.marker) AS batch_size, step_marker_tokens(w.marker) AS tokens,
       w.is_warmup
FROM warm w LEFT JOIN gpu g ON g.run_id = w.run_id AND g.step = w.step AND step_number(w.marker) = w.step;

-- The step of every CPU event whose start lies inside a step's window (any thread of the run;
-- `events.step`, set at ingest; the latest-starting window when windows nest). GPU events get
-- their step through their launch (see `gpu_kernels`): a graph launch's kernels too.
-- @columns-as events: run_id
-- @column event_id BIGINT The CPU event.
-- @column step BIGINT The step whose CPU window contains the event's start.
CREATE OR REPLACE VIEW event_steps AS
SELECT run_id, event_id, step FROM events WHERE step IS NOT NULL;
