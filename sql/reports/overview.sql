-- title: Overview: the first report to run
-- description: Per run: step time, CPU and GPU totals, top 5 ops by self time, top 5 kernels, the largest copy/cast group, and findings in plain words.
-- column: run_id VARCHAR -- the run
-- column: run_name VARCHAR -- name of the run
-- column: section VARCHAR -- run, top op, top kernel, top copy, or finding
-- column: rank BIGINT -- position within the section
-- column: item VARCHAR -- what the row is about (a measure, an op, a kernel, a call site, a finding)
-- column: value DOUBLE -- the measure, in `unit`
-- column: unit VARCHAR -- unit of value: ms, count, MB, ...
-- column: pct DOUBLE -- share of the run's CPU self time (ops), kernel time (kernels) or copy bytes (copies), percent
-- column: detail VARCHAR -- more about the row, in words (findings: a copy group taking 10% or more of CPU op self time, graph-launched kernels, overlaps, ingest warnings)
WITH sel AS (SELECT run_id FROM report_runs),
step_stats AS (
  SELECT run_id, count(*) AS n_steps, avg(dur_ns) AS avg_step_ns FROM steps WHERE run_id IN (SELECT run_id FROM sel) GROUP BY 1
), ops AS (
  SELECT run_id, name, count(*) AS calls, sum(self_dur_ns) AS self_ns,
         row_number() OVER (PARTITION BY run_id ORDER BY sum(self_dur_ns) DESC, name) AS rank
  FROM cpu_ops WHERE run_id IN (SELECT run_id FROM sel) GROUP BY 1, 2
), cpu_tot AS (
  SELECT run_id, sum(self_ns) AS self_ns FROM ops GROUP BY 1
), kernels AS (
  SELECT run_id, name, count(*) AS calls, sum(dur_ns) AS dur_ns,
         sum(dur_ns) FILTER (WHERE is_graph_launched) AS graph_ns, count(*) FILTER (WHERE is_graph_launched) AS graph_kernels,
         row_number() OVER (PARTITION BY run_id ORDER BY sum(dur_ns) DESC, name) AS rank
  FROM device_work(['kernel']) WHERE run_id IN (SELECT run_id FROM sel) GROUP BY 1, 2
), gpu_tot AS (
  SELECT run_id, sum(dur_ns) AS kernel_ns, sum(calls) AS kernels, sum(graph_ns) AS graph_ns,
         sum(graph_kernels) AS graph_kernels
  FROM kernels GROUP BY 1
), copies AS (
  SELECT run_id, call_site, op_name, dims, src_dtype, dst_dtype, count(*) AS calls, count(step) AS calls_in_steps,
         max(bytes) AS bytes_per_call, sum(bytes) AS total_bytes, sum(dur_ns) AS dur_ns,
         sum(sum(bytes)) OVER (PARTITION BY run_id) AS run_bytes,
         row_number() OVER (PARTITION BY run_id ORDER BY sum(bytes) DESC NULLS LAST) AS rank
  FROM tensor_copies WHERE is_outermost AND run_id IN (SELECT run_id FROM sel)
  GROUP BY run_id, call_site, op_name, dims, src_dtype, dst_dtype
), rows AS (
  SELECT r.run_id, 'run' AS section, 1 AS rank, 'events' AS item, r.event_count::DOUBLE AS value, 'count' AS unit, NULL::DOUBLE AS pct,
         printf('%s, %d events', r.source_path, r.event_count) AS detail
  FROM runs r WHERE r.run_id IN (SELECT run_id FROM sel)
  UNION ALL
  SELECT run_id, 'run', 2, 'step time', round(avg_step_ns / 1e6, 3), 'ms', NULL, printf('average over %d ProfilerStep windows', n_steps)
  FROM step_stats
  UNION ALL
  SELECT run_id, 'run', 3, 'CPU op self time', round(self_ns / 1e6, 3), 'ms', NULL, 'sum of self time of all CPU ops' FROM cpu_tot
  UNION ALL
  SELECT run_id, 'run', 4, 'GPU kernel time', round(kernel_ns / 1e6, 3), 'ms', NULL, printf('%d kernels', kernels) FROM gpu_tot
  UNION ALL
  SELECT o.run_id, 'top op', o.rank, o.name, round(o.self_ns / 1e6, 3), 'ms', round(100.0 * o.self_ns / nullif(t.self_ns, 0), 1),
         printf('%d calls, self time', o.calls)
  FROM ops o JOIN cpu_tot t USING (run_id) WHERE o.rank <= 5
  UNION ALL
  SELECT k.run_id, 'top kernel', k.rank, k.name, round(k.dur_ns / 1e6, 3), 'ms', round(100.0 * k.dur_ns / nullif(t.kernel_ns, 0), 1),
         printf('%d instances', k.calls)
  FROM kernels k JOIN gpu_tot t USING (run_id) WHERE k.rank <= 5
  UNION ALL
  SELECT c.run_id, 'top copy', 1, coalesce(c.call_site, '(no Python stack)'), round(c.bytes_per_call / 1e6, 3), 'MB per call',
         round(100.0 * c.total_bytes / nullif(c.run_bytes, 0), 1),
         printf('%s %s %s -> %s, %d calls%s', c.op_name, c.dims::VARCHAR, c.src_dtype, c.dst_dtype, c.calls,
                CASE WHEN s.n_steps > 0 THEN printf(' (%.1f per step)', c.calls_in_steps / s.n_steps) ELSE '' END)
  FROM copies c LEFT JOIN step_stats s USING (run_id) WHERE c.rank = 1 AND c.total_bytes > 0
  UNION ALL
  SELECT o.run_id, 'finding', 1, 'dominant op', round(100.0 * o.self_ns / t.self_ns, 1), '%',
         round(100.0 * o.self_ns / t.self_ns, 1), printf('%s is %.0f%% of CPU self time', o.name, 100.0 * o.self_ns / t.self_ns)
  FROM ops o JOIN cpu_tot t USING (run_id) WHERE o.rank = 1 AND o.self_ns >= 0.25 * t.self_ns
  UNION ALL
  SELECT c.run_id, 'finding', 2, 'largest copy group', round(c.bytes_per_call * c.calls_in_steps / s.n_steps / 1e6, 3), 'MB per step',
         round(100.0 * c.total_bytes / nullif(c.run_bytes, 0), 1),
         printf('one copy/cast group moves %.1f MB per step (%s %s -> %s, %.1f calls per step) from %s: a whole preallocated buffer each call?',
                c.bytes_per_call * c.calls_in_steps / s.n_steps / 1e6, c.dims::VARCHAR, c.src_dtype, c.dst_dtype,
                c.calls_in_steps / s.n_steps, coalesce(c.call_site, '(no Python stack)'))
  FROM copies c JOIN step_stats s USING (run_id) JOIN cpu_tot t USING (run_id)
  WHERE c.rank = 1 AND c.calls_in_steps > 0 AND c.total_bytes > 0 AND c.dur_ns >= 0.1 * t.self_ns
  UNION ALL
  SELECT run_id, 'finding', 3, 'CUDA graphs', round(100.0 * graph_ns / nullif(kernel_ns, 0), 1), '%', round(100.0 * graph_ns / nullif(kernel_ns, 0), 1),
         printf('%d of %d kernels (%.0f%% of kernel time) were launched by CUDA/HIP graphs: their CPU ops are not in the trace, so per-op attribution stops at the graph launch; profile once without CUDA graphs to attribute them',
                graph_kernels, kernels, 100.0 * graph_ns / nullif(kernel_ns, 0))
  FROM gpu_tot WHERE graph_kernels > 0
  UNION ALL
  SELECT r.run_id, 'finding', 4, 'overlapping events', r.overlap_count, 'count', NULL,
         printf('%d pairs of events partially overlapped on their thread; they were kept and nested by time', r.overlap_count)
  FROM runs r WHERE r.run_id IN (SELECT run_id FROM sel) AND r.overlap_count > 0
  UNION ALL
  SELECT x.run_id, 'finding', 5, 'ingest warning: ' || x.w.key, x.w.value, 'count', NULL, printf('%d events: %s', x.w.value, x.w.key)
  FROM (SELECT run_id, unnest(map_entries(warnings)) AS w FROM runs WHERE run_id IN (SELECT run_id FROM sel)) x
  WHERE x.w.key <> 'partially overlapping event pairs'
)
SELECT x.run_id, r.name AS run_name, x.section, x.rank, x.item, x.value, x.unit, x.pct, x.detail
FROM rows x JOIN runs r USING (run_id)
ORDER BY x.run_id, CASE x.section WHEN 'run' THEN 0 WHEN 'finding' THEN 1 WHEN 'top op' THEN 2 WHEN 'top kernel' THEN 3 ELSE 4 END, x.rank
