-- title: GPU time per user annotation (record_function)
-- description: Per run, timeline and user annotation name (record_function ranges; ProfilerStep#N left out, report steps covers steps): how many ranges, their own length, and the GPU kernels attributed to the annotation, each kernel to the innermost annotation it is in (view annotation_kernels): on the gpu timeline the gpu_user_annotation that contains it on its stream, on the cpu timeline the user_annotation around its launch call. A row annotation '(none)' holds each timeline's kernels in no annotation. HTA's get_gpu_user_annotation_breakdown sums the annotations' own durations per name (span_ns here), ProfilerStep#N included and nested annotations counted in each; its get_gpu_kernels_with_user_annotations gives each kernel the innermost GPU annotation that overlaps it, as kernel_time_ns does here.
-- per-run: true
-- empty: the selected runs have no user annotations (record_function) or no GPU kernels
-- column: run_id VARCHAR [key] -- the run
-- column: run_name VARCHAR [key] -- name of the run
-- column: timeline VARCHAR [key] -- gpu (gpu_user_annotation ranges on the GPU streams) or cpu (user_annotation ranges on the CPU threads)
-- column: annotation VARCHAR [key] -- annotation name ('(none)': the kernels in no annotation on this timeline)
-- column: instances BIGINT [detail] -- ranges of that name on the timeline
-- column: span_ns BIGINT [result] -- total length of those ranges, ns (nested ranges counted in each: HTA's breakdown)
-- column: kernels BIGINT [result] -- kernels attributed to the annotation (innermost)
-- column: kernel_time_ns BIGINT [result] -- GPU time of those kernels, ns
-- column: busy_ns BIGINT [detail] -- time at least one of those kernels ran (union of their intervals), ns
-- column: kernel_time_pct DOUBLE [result] -- kernel_time_ns over the run's total kernel time, percent
WITH runs_k AS (
  SELECT run_id, count(*) AS kernels, sum(dur_ns) AS total_ns
  FROM gpu_kernels WHERE run_id IN (SELECT run_id FROM report_runs) GROUP BY run_id
), ann AS (
  SELECT run_id, timeline, name AS annotation, count(*) AS instances, sum(dur_ns)::BIGINT AS span_ns
  FROM user_annotations
  WHERE run_id IN (SELECT run_id FROM report_runs) AND NOT is_profiler_step
  GROUP BY ALL
), ak AS (
  SELECT run_id, timeline, annotation, event_id, ts_ns, dur_ns,
         max(ts_ns + dur_ns) OVER (PARTITION BY run_id, timeline, annotation ORDER BY ts_ns, event_id
                                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
  FROM annotation_kernels WHERE run_id IN (SELECT run_id FROM report_runs)
), attributed AS (
  SELECT run_id, timeline, annotation, count(*) AS kernels, sum(dur_ns)::BIGINT AS kernel_time_ns,
         sum(greatest(ts_ns + dur_ns - greatest(ts_ns, coalesce(prev_end, ts_ns)), 0))::BIGINT AS busy_ns
  FROM ak GROUP BY ALL
), per_name AS (
  SELECT run_id, timeline, annotation, coalesce(a.instances, 0) AS instances, coalesce(a.span_ns, 0) AS span_ns,
         coalesce(k.kernels, 0) AS kernels, coalesce(k.kernel_time_ns, 0) AS kernel_time_ns, coalesce(k.busy_ns, 0) AS busy_ns
  FROM ann a FULL JOIN attributed k USING (run_id, timeline, annotation)
), outside AS (
  -- each timeline's kernels in no annotation: the run's kernels less those attributed on it
  SELECT p.run_id, p.timeline, '(none)' AS annotation, 0 AS instances, 0 AS span_ns,
         any_value(r.kernels) - sum(p.kernels) AS kernels, (any_value(r.total_ns) - sum(p.kernel_time_ns))::BIGINT AS kernel_time_ns,
         NULL::BIGINT AS busy_ns
  FROM per_name p JOIN runs_k r USING (run_id)
  GROUP BY p.run_id, p.timeline
), rows AS (
  SELECT * FROM per_name UNION ALL SELECT * FROM outside
)
SELECT x.run_id, r.name AS run_name, x.timeline, x.annotation, x.instances::BIGINT AS instances, x.span_ns::BIGINT AS span_ns,
       x.kernels::BIGINT AS kernels, x.kernel_time_ns, x.busy_ns,
       round(100.0 * x.kernel_time_ns / nullif(k.total_ns, 0), 2) AS kernel_time_pct
FROM rows x JOIN runs r USING (run_id) LEFT JOIN runs_k k USING (run_id)
ORDER BY x.run_id, x.timeline DESC, x.annotation = '(none)', x.kernel_time_ns DESC, x.span_ns DESC, x.annotation
