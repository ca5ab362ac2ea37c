-- title: Overview: the first report to run
-- description: Per run: step time, CPU and GPU totals, findings in plain words ranked by the time at stake (distributed ones too: exposed communication, the straggler of a job, the lowest collective bus bandwidth), top 5 ops by self time, top 5 kernels, the largest copy/cast group, and warnings about the data (ingest oddities, overlapping annotations, CUDA graphs).
-- column: run_id VARCHAR [key] -- the run
-- column: run_name VARCHAR [key] -- name of the run
-- column: section VARCHAR [key] -- run, finding, top op, top kernel, top copy, or warning (in that order)
-- column: position BIGINT [key] -- position within the section; findings are ranked by time_ns, largest first (a finding without a time last)
-- column: item VARCHAR [key] -- what the row is about (a measure, a finding, an op, a kernel, a call site, a warning)
-- column: value DOUBLE [result] -- the measure, in `unit`
-- column: unit VARCHAR [result] -- unit of value: ms, count, MB, %, ...
-- column: pct DOUBLE [result] -- share of the run's CPU self time (ops), kernel time (kernels) or copy bytes (copies), percent; for findings, the share behind the finding
-- column: time_ns BIGINT [result] -- the time the row is about, ns: the average step, a run total, an op's self time, a kernel's or copy group's time; for a finding, the time at stake over the run: the op's self time, the copy group's time, GPU idle in the device's window, communication not overlapped by compute, the time other ranks waited for the straggler, the lowest-bandwidth collective's time, or the launch calls' time beyond their short kernels (the GPU's wait on launches)
-- column: detail VARCHAR [result] -- more about the row, in words. Findings: an op with 25% or more of CPU self time; a copy/cast group present in every step with 10% or more of CPU self time; GPU idle 20% or more of a device's own window; communication 10% or more of a device's busy time, with its exposed share; the straggler of a job when two or more of its ranks are selected (the rank that started last in the most collective time the others waited for); the collective (per message size) with the lowest bus bandwidth where sizes are known; launch-bound steps (10 kernels or more, more than half of them shorter than the call that launched them; a graph's kernels are never short; a run without steps counts as one step); ops that partially overlap other events
WITH sel AS (SELECT run_id FROM report_runs),
step_stats AS (
  SELECT run_id, count(*) AS n_steps, avg(dur_ns) AS avg_step_ns
  FROM steps WHERE run_id IN (SELECT run_id FROM sel) GROUP BY 1
), ops AS (
  -- per run and op name, from the packs where they hold them (as every per-run total below)
  SELECT run_id, name, calls, self_ns, rank FROM op_self_times WHERE run_id IN (SELECT run_id FROM sel)
), cpu_tot AS (
  SELECT run_id, sum(self_ns) AS self_ns FROM ops GROUP BY 1
), kw AS MATERIALIZED (
  -- the kernels per profiler step of their launch, against the calls that launched them (used twice)
  SELECT * FROM kernel_launch_windows WHERE run_id IN (SELECT run_id FROM sel)
), kernels AS (
  SELECT run_id, name, instances AS calls, total_dur_ns AS dur_ns, rank
  FROM kernel_stats WHERE run_id IN (SELECT run_id FROM sel) AND rank <= 5
), gpu_tot AS (
  SELECT run_id, sum(dur_ns) AS kernel_ns, sum(kernels) AS kernels, sum(graph_dur_ns) AS graph_ns,
         sum(graph_kernels) AS graph_kernels
  FROM kw GROUP BY 1
), copies AS (
  SELECT run_id, call_site, op_name, dims, src_dtype, dst_dtype, calls, calls_in_steps, steps_with, bytes_per_call,
         total_bytes, total_dur_ns AS dur_ns, sum(total_bytes) OVER (PARTITION BY run_id) AS run_bytes,
         row_number() OVER (PARTITION BY run_id ORDER BY total_bytes DESC NULLS LAST, total_dur_ns DESC, call_site, op_name, dims,
                                            src_dtype, dst_dtype) AS rank
  FROM copy_groups WHERE run_id IN (SELECT run_id FROM sel)
), gpu_busy AS MATERIALIZED (
  -- per device, as in gpu-utilization
  SELECT run_id, lane, busy_ns, last_ns - first_ns AS window_ns, communication_ns AS comm_ns,
         exposed_communication_ns AS exposed_comm_ns
  FROM gpu_time() WHERE run_id IN (SELECT run_id FROM sel)
), comm_runs AS MATERIALIZED (
  -- only runs with communication kernels read the collectives' args
  SELECT list(DISTINCT run_id) AS ids FROM gpu_busy WHERE comm_ns > 0
), lowest_bandwidth AS (
  SELECT run_id, collective, msg_bytes, n_ranks, calls, total_dur_ns, algbw_gb_s, busbw_gb_s,
         row_number() OVER (PARTITION BY run_id ORDER BY busbw_gb_s, total_dur_ns DESC, collective) AS rank
  FROM collective_bandwidth((SELECT ids FROM comm_runs)) WHERE side = 'gpu' AND busbw_gb_s IS NOT NULL
), stragglers AS (
  -- the straggler of each job among the selected runs (macro job_stragglers)
  SELECT * FROM job_stragglers((SELECT list(run_id) FROM sel))
), launch_windows AS (
  -- kernels against the call that launched them, per profiler step (the whole run when it has
  -- no steps); one graph launch starts many kernels, so a graph's kernels are never short
  SELECT k.run_id, k.step, k.launched_kernels AS kernels, k.short_kernels, k.short_gap_ns
  FROM kw k LEFT JOIN step_stats s ON s.run_id = k.run_id
  WHERE k.launched_kernels > 0 AND (s.n_steps IS NULL OR k.step IS NOT NULL)
), launch_bound AS (
  SELECT run_id, count(*) AS windows, count(*) FILTER (WHERE is_bound) AS bound,
         sum(kernels) FILTER (WHERE is_bound) AS kernels, sum(short_kernels) FILTER (WHERE is_bound) AS short_kernels,
         sum(short_gap_ns) FILTER (WHERE is_bound) AS short_gap_ns, bool_or(step IS NULL) AS whole_run
  FROM (SELECT *, kernels >= 10 AND 2 * short_kernels > kernels AS is_bound FROM launch_windows) GROUP BY run_id
), timed AS (
  -- the time a finding about ops is about: CPU self time of each op, and GPU time of each kernel on
  -- the op that launched it
  SELECT run_id, 'CPU self time' AS basis, name, call_site, self_dur_ns AS ns, event_id AS op_event_id
  FROM cpu_ops WHERE run_id IN (SELECT run_id FROM sel)
  UNION ALL
  SELECT run_id, 'GPU time', op_name, call_site, dur_ns, op_event_id
  FROM gpu_kernels WHERE run_id IN (SELECT run_id FROM sel) AND op_event_id IS NOT NULL
), basis_tot AS (
  SELECT run_id, 'CPU self time' AS basis, self_ns AS ns FROM cpu_tot
  UNION ALL
  SELECT run_id, 'GPU time', kernel_ns FROM gpu_tot
), site_ops AS (
  SELECT run_id, basis, call_site, name, sum(ns) AS ns, sum(sum(ns)) OVER (PARTITION BY run_id, basis, call_site) AS site_ns
  FROM timed WHERE call_site IS NOT NULL GROUP BY run_id, basis, call_site, name
), hot AS MATERIALIZED (
  -- what findings describe: an op with 25% or more of its run's CPU self time or GPU time, and a
  -- function (call site) with 25% or more where two or more of its ops each carry 10% of its time
  SELECT t.run_id, t.basis, 'op' AS kind, t.name AS subject, sum(t.ns) AS ns, any_value(b.ns) AS basis_ns
  FROM timed t JOIN basis_tot b USING (run_id, basis) GROUP BY ALL
  HAVING sum(t.ns) > 0 AND sum(t.ns) >= 0.25 * any_value(b.ns)
  UNION ALL
  SELECT s.run_id, s.basis, 'function', s.call_site, sum(s.ns), any_value(b.ns)
  FROM site_ops s JOIN basis_tot b USING (run_id, basis) GROUP BY s.run_id, s.basis, s.call_site
  HAVING sum(s.ns) >= 0.25 * any_value(b.ns) AND count(*) FILTER (WHERE s.ns >= 0.1 * s.site_ns) >= 2
), hot_timed AS MATERIALIZED (
  SELECT h.run_id, h.basis, h.kind, h.subject, t.ns, t.op_event_id
  FROM hot h
  JOIN timed t ON t.run_id = h.run_id AND t.basis = h.basis
              AND ((h.kind = 'op' AND t.name = h.subject) OR (h.kind = 'function' AND t.call_site = h.subject))
), hot_op_names AS MATERIALIZED (
  -- the names of the ops behind the findings: their calls' shapes are read, not every op's
  SELECT coalesce(list(DISTINCT o.name), []::VARCHAR[]) AS names
  FROM cpu_ops o SEMI JOIN hot_timed t ON t.run_id = o.run_id AND t.op_event_id = o.event_id
), hot_calls AS MATERIALIZED (
  -- every call behind a finding, with its shape, call site and caller (`op_calls`); a kernel's
  -- shape and call site are those of the op that launched it
  SELECT t.run_id, t.basis, t.kind, t.subject, t.ns, c.name, c.step, c.call_site, c.caller_chain, c.dims_text,
         c.dtypes_text, c.input_bytes
  FROM hot_timed t
  JOIN op_calls_named((SELECT names FROM hot_op_names)) c ON c.run_id = t.run_id AND c.event_id = t.op_event_id
), hot_steps AS (
  SELECT run_id, basis, kind, subject, step, sum(ns) AS ns FROM hot_calls WHERE step IS NOT NULL GROUP BY ALL
), hot_shapes AS (
  SELECT run_id, basis, kind, subject, name, dims_text, dtypes_text, sum(ns) AS ns, count(*) AS shape_calls,
         count(*) FILTER (WHERE step IS NOT NULL) AS shape_calls_in_steps,
         row_number() OVER (PARTITION BY run_id, basis, kind, subject ORDER BY sum(ns) DESC, name, dims_text, dtypes_text) AS pos
  FROM hot_calls GROUP BY run_id, basis, kind, subject, name, dims_text, dtypes_text
), hot_sites AS (
  SELECT run_id, basis, kind, subject, call_site, sum(ns) AS site_total_ns, arg_max(caller_chain, ns) AS caller_chain,
         row_number() OVER (PARTITION BY run_id, basis, kind, subject ORDER BY sum(ns) DESC, call_site) AS pos
  FROM hot_calls GROUP BY run_id, basis, kind, subject, call_site
), recorded AS (
  -- what the trace records: input shapes (record_shapes=True), Python stacks (with_stack=True)
  SELECT r.run_id, EXISTS (SELECT 1 FROM shapes s WHERE s.run_id = r.run_id) AS has_shapes,
         EXISTS (SELECT 1 FROM stacks s WHERE s.run_id = r.run_id) AS has_stacks
  FROM runs r WHERE r.run_id IN (SELECT run_id FROM hot)
), hot_summary AS (
  SELECT h.*, coalesce(s.n_steps, 0) AS n_steps, coalesce(hs.steps_present, 0) AS steps_present, hs.max_step_ns,
         c.in_steps_ns, c.calls, c.calls_in_steps, c.bytes_in_steps, c.bytes,
         sh.name AS top_name, sh.dims_text, sh.dtypes_text, sh.ns AS shape_ns, sh.shape_calls, sh.shape_calls_in_steps,
         st.call_site AS top_site, st.site_total_ns AS site_ns, st.caller_chain,
         rec.has_shapes, rec.has_stacks
  FROM hot h
  LEFT JOIN step_stats s USING (run_id)
  JOIN (SELECT run_id, basis, kind, subject, sum(ns) FILTER (WHERE step IS NOT NULL) AS in_steps_ns, count(*) AS calls,
               count(*) FILTER (WHERE step IS NOT NULL) AS calls_in_steps,
               sum(input_bytes) FILTER (WHERE step IS NOT NULL) AS bytes_in_steps, sum(input_bytes) AS bytes
        FROM hot_calls GROUP BY ALL) c USING (run_id, basis, kind, subject)
  LEFT JOIN hot_shapes sh ON (sh.run_id, sh.basis, sh.kind, sh.subject, sh.pos) = (h.run_id, h.basis, h.kind, h.subject, 1)
  LEFT JOIN hot_sites st ON (st.run_id, st.basis, st.kind, st.subject, st.pos) = (h.run_id, h.basis, h.kind, h.subject, 1)
  JOIN recorded rec USING (run_id)
  LEFT JOIN (SELECT run_id, basis, kind, subject, count(*) AS steps_present, max(ns) AS max_step_ns FROM hot_steps GROUP BY ALL) hs
    USING (run_id, basis, kind, subject)
), hot_text AS (
  -- the parts of each finding's sentence
  SELECT *,
         CASE WHEN dims_text IS NOT NULL THEN printf(' over %s %s', dims_text, dtypes_text)
              WHEN has_shapes THEN ' (no input shapes recorded for it)'
              ELSE ' (input shapes not recorded: profile with record_shapes=True)' END AS shape_part,
         CASE WHEN top_site IS NOT NULL THEN printf(' at %s', top_site)
              WHEN has_stacks THEN ' (no Python call site: only torch or library frames)'
              ELSE ' (no Python stack: profile with with_stack=True)' END AS site_part,
         CASE WHEN caller_chain IS NULL THEN ''
              WHEN len(string_split(caller_chain, ' < ')) <= 3 THEN printf(' (called from %s)', caller_chain)
              ELSE printf(' (called from %s < ... < %s)', string_split(caller_chain, ' < ')[1],
                          list_extract(string_split(caller_chain, ' < '), -1)) END AS caller_part,
         CASE WHEN n_steps > 0 THEN
                printf('%.3f ms per step (%.3f ms over the %s%s), %s calls per step%s%s',
                       in_steps_ns / n_steps / 1e6, in_steps_ns / 1e6,
                       CASE WHEN n_steps = 1 THEN 'one profiled step' ELSE printf('%d profiled steps', n_steps) END,
                       CASE WHEN steps_present < n_steps THEN printf('; present in %d of %d steps, at most %.3f ms in one',
                                                                     steps_present, n_steps, max_step_ns / 1e6) ELSE '' END,
                       round(calls_in_steps / n_steps, 2)::VARCHAR,
                       CASE WHEN kind = 'op' AND dims_text IS NOT NULL AND shape_calls_in_steps < calls_in_steps
                            THEN printf(' (%s of that shape)', round(shape_calls_in_steps / n_steps, 2)::VARCHAR) ELSE '' END,
                       CASE WHEN bytes_in_steps > 0 THEN printf(', reads %s of inputs per step',
                                                               readable_bytes(bytes_in_steps / n_steps)) ELSE '' END)
              ELSE printf('%.3f ms in the run (no profiler steps), %d calls%s%s', ns / 1e6, calls,
                          CASE WHEN kind = 'op' AND dims_text IS NOT NULL AND shape_calls < calls
                               THEN printf(' (%d of that shape)', shape_calls) ELSE '' END,
                          CASE WHEN bytes > 0 THEN printf(', reads %s of inputs', readable_bytes(bytes)) ELSE '' END)
         END AS time_part
  FROM hot_summary
), top_ops_text AS (
  SELECT x.run_id, x.basis, x.kind, x.subject,
         string_agg(printf('%s%s (%.0f%%)', x.name,
                           CASE WHEN x.dims_text IS NOT NULL THEN printf(' over %s %s', x.dims_text, x.dtypes_text) ELSE '' END,
                           100.0 * x.ns / h.ns), '; ' ORDER BY x.pos) AS ops
  FROM hot_shapes x JOIN hot h USING (run_id, basis, kind, subject)
  WHERE x.kind = 'function' AND x.pos <= 4 GROUP BY x.run_id, x.basis, x.kind, x.subject
), findings AS (
  SELECT t.run_id, CASE WHEN t.kind = 'op' THEN 'dominant op' ELSE 'dominant function' END
                      || CASE WHEN t.basis = 'GPU time' THEN ' (GPU)' ELSE '' END AS item,
         round(100.0 * t.ns / t.basis_ns, 1) AS value, '%' AS unit, round(100.0 * t.ns / t.basis_ns, 1) AS pct,
         t.ns::BIGINT AS time_ns,
         CASE WHEN t.kind = 'op' THEN
                printf('%s%s%s%s%s: %s; %.1f%% of %s', t.subject,
                       t.shape_part || CASE WHEN t.dims_text IS NOT NULL AND t.shape_ns < t.ns
                                            THEN printf(' (%.0f%% of its time)', 100.0 * t.shape_ns / t.ns) ELSE '' END,
                       t.site_part, CASE WHEN t.top_site IS NOT NULL AND t.site_ns < t.ns
                                         THEN printf(' (%.0f%% of its time)', 100.0 * t.site_ns / t.ns) ELSE '' END,
                       t.caller_part, t.time_part, 100.0 * t.ns / t.basis_ns, t.basis)
              ELSE printf('%s%s is %.1f%% of %s: %s; its top ops: %s', t.subject, t.caller_part,
                          100.0 * t.ns / t.basis_ns, t.basis, t.time_part, o.ops) END AS detail
  FROM hot_text t LEFT JOIN top_ops_text o USING (run_id, basis, kind, subject)
  UNION ALL
  SELECT c.run_id, 'largest copy group', round(c.bytes_per_call * c.calls_in_steps / s.n_steps / 1e6, 3), 'MB per step',
         round(100.0 * c.total_bytes / nullif(c.run_bytes, 0), 1), c.dur_ns::BIGINT,
         printf('one copy/cast group moves %.1f MB per step (%s %s -> %s, %.1f calls per step, in every step) from %s: a whole preallocated buffer each call? It takes %.3f ms per step (%.3f ms over the %s)',
                c.bytes_per_call * c.calls_in_steps / s.n_steps / 1e6, c.dims::VARCHAR, c.src_dtype, c.dst_dtype,
                c.calls_in_steps / s.n_steps, coalesce(c.call_site, '(no Python stack)'), c.dur_ns / s.n_steps / 1e6,
                c.dur_ns / 1e6, CASE WHEN s.n_steps = 1 THEN 'one profiled step' ELSE printf('%d profiled steps', s.n_steps) END)
  FROM copies c JOIN step_stats s USING (run_id) JOIN cpu_tot t USING (run_id)
  WHERE c.rank = 1 AND c.steps_with = s.n_steps AND c.total_bytes > 0 AND c.dur_ns >= 0.1 * t.self_ns
  UNION ALL
  SELECT run_id, 'GPU idle', round(100.0 * (window_ns - busy_ns) / window_ns, 1), '%',
         round(100.0 * (window_ns - busy_ns) / window_ns, 1), window_ns - busy_ns,
         printf('%s was idle %.1f%% of its own window (first to last GPU event, %.3f ms): %.3f ms with no kernel, memcpy or memset running; the GPU waits on the CPU, on data or on synchronization',
                lane, 100.0 * (window_ns - busy_ns) / window_ns, window_ns / 1e6, (window_ns - busy_ns) / 1e6)
  FROM gpu_busy WHERE window_ns > 0 AND window_ns - busy_ns >= 0.2 * window_ns
  UNION ALL
  SELECT run_id, 'GPU communication', round(100.0 * comm_ns / busy_ns, 1), '%', round(100.0 * comm_ns / busy_ns, 1),
         exposed_comm_ns,
         printf('%s spent %.1f%% of its busy time in communication kernels (%.3f ms), %.3f ms of it not overlapped by compute (%.1f%% of communication exposed; report comm-overlap has it per step)',
                lane, 100.0 * comm_ns / busy_ns, comm_ns / 1e6, exposed_comm_ns / 1e6, 100.0 * exposed_comm_ns / comm_ns)
  FROM gpu_busy WHERE busy_ns > 0 AND comm_ns >= 0.1 * busy_ns
  UNION ALL
  SELECT run_id, 'straggler', round(100.0 * last_count / instances, 1), '%', round(100.0 * last_count / instances, 1), caused_ns::BIGINT,
         printf('rank %s started last in %d of %d collectives matched across %d selected ranks of its job: the other ranks waited %.3f ms for it in all (report ranks names the straggler of each step)',
                coalesce(rank::VARCHAR, '?'), last_count, instances, ranks, caused_ns / 1e6)
  FROM stragglers WHERE run_id IN (SELECT run_id FROM sel)
  UNION ALL
  SELECT run_id, 'lowest bus bandwidth', round(busbw_gb_s, 3), 'GB/s', NULL, total_dur_ns,
         printf('%s of %s messages over %d ranks reached %.3f GB/s bus bandwidth (%.3f GB/s algorithm bandwidth, %d calls, %.3f ms), the lowest of the run''s collectives of known size; compare with the link''s peak',
                collective, formatReadableDecimalSize(msg_bytes), n_ranks, busbw_gb_s, algbw_gb_s, calls, total_dur_ns / 1e6)
  FROM lowest_bandwidth WHERE rank = 1
  UNION ALL
  SELECT b.run_id, 'launch-bound steps', bound, CASE WHEN whole_run THEN 'run' ELSE 'steps' END,
         round(100.0 * short_kernels / kernels, 1), short_gap_ns,
         CASE WHEN whole_run
              THEN printf('the run (no profiler steps) is launch-bound: %d of %d kernels ran shorter than the call that launched them, %.3f ms less than their launch calls in all; the GPU waits on the CPU: CUDA graphs or fused ops (torch.compile) launch less',
                          short_kernels, kernels, short_gap_ns / 1e6)
              ELSE printf('%d of %d profiler steps are launch-bound: in them %d of %d kernels ran shorter than the call that launched them, %.3f ms less than their launch calls in all; the GPU waits on the CPU: CUDA graphs or fused ops (torch.compile) launch less',
                          bound, windows, short_kernels, kernels, short_gap_ns / 1e6) END
  FROM launch_bound b WHERE bound > 0
  UNION ALL
  SELECT r.run_id, 'overlapping ops', r.op_overlap_count, 'count', NULL, NULL,
         printf('%d pairs of events on one thread partially overlap where one of them is a CPU op: nesting, self time and call sites of these ops may be off',
                r.op_overlap_count)
  FROM runs r WHERE r.run_id IN (SELECT run_id FROM sel) AND r.op_overlap_count > 0
), warnings AS (
  SELECT run_id, 'CUDA graphs' AS item, round(100.0 * graph_ns / nullif(kernel_ns, 0), 1) AS value, '%' AS unit,
         round(100.0 * graph_ns / nullif(kernel_ns, 0), 1) AS pct, graph_ns::BIGINT AS time_ns,
         printf('%d of %d kernels (%.0f%% of kernel time) were launched by CUDA/HIP graphs: their CPU ops are not in the trace, so per-op attribution stops at the graph launch; profile once without CUDA graphs to attribute them',
                graph_kernels, kernels, 100.0 * graph_ns / nullif(kernel_ns, 0)) AS detail, 1 AS ord
  FROM gpu_tot WHERE graph_kernels > 0
  UNION ALL
  SELECT r.run_id, 'overlapping events', r.overlap_count, 'count', NULL, NULL,
         printf('%d pairs of events partially overlapped on their thread, %d of them with a CPU op; the rest are record_function annotations and Python frames, whose enter/exit interleave (expected). All were kept and nested by time',
                r.overlap_count, r.op_overlap_count), 2
  FROM runs r WHERE r.run_id IN (SELECT run_id FROM sel) AND r.overlap_count > 0
  UNION ALL
  SELECT x.run_id, 'ingest warning: ' || x.w.key, x.w.value, 'count', NULL, NULL, printf('%d events: %s', x.w.value, x.w.key), 3
  FROM (SELECT run_id, unnest(map_entries(warnings)) AS w FROM runs WHERE run_id IN (SELECT run_id FROM sel)) x
  WHERE x.w.key <> 'partially overlapping event pairs'
), rows AS (
  SELECT r.run_id, 'run' AS section, 1 AS position, 'events' AS item, r.event_count::DOUBLE AS value, 'count' AS unit, NULL::DOUBLE AS pct,
         NULL::BIGINT AS time_ns, printf('%s, %d events', r.source_path, r.event_count) AS detail
  FROM runs r WHERE r.run_id IN (SELECT run_id FROM sel)
  UNION ALL
  SELECT run_id, 'run', 2, 'step time', round(avg_step_ns / 1e6, 3), 'ms', NULL, round(avg_step_ns)::BIGINT,
         printf('average over %d ProfilerStep windows', n_steps)
  FROM step_stats
  UNION ALL
  SELECT run_id, 'run', 3, 'CPU op self time', round(self_ns / 1e6, 3), 'ms', NULL, self_ns::BIGINT, 'sum of self time of all CPU ops'
  FROM cpu_tot
  UNION ALL
  SELECT run_id, 'run', 4, 'GPU kernel time', round(kernel_ns / 1e6, 3), 'ms', NULL, kernel_ns::BIGINT, printf('%d kernels', kernels)
  FROM gpu_tot
  UNION ALL
  SELECT run_id, 'finding', row_number() OVER (PARTITION BY run_id ORDER BY time_ns DESC NULLS LAST, item, detail),
         item, value, unit, pct, time_ns, detail
  FROM findings
  UNION ALL
  SELECT o.run_id, 'top op', o.rank, o.name, round(o.self_ns / 1e6, 3), 'ms', round(100.0 * o.self_ns / nullif(t.self_ns, 0), 1),
         o.self_ns::BIGINT, printf('%d calls, self time', o.calls)
  FROM ops o JOIN cpu_tot t USING (run_id) WHERE o.rank <= 5
  UNION ALL
  SELECT k.run_id, 'top kernel', k.rank, k.name, round(k.dur_ns / 1e6, 3), 'ms', round(100.0 * k.dur_ns / nullif(t.kernel_ns, 0), 1),
         k.dur_ns::BIGINT, printf('%d instances', k.calls)
  FROM kernels k JOIN gpu_tot t USING (run_id) WHERE k.rank <= 5
  UNION ALL
  SELECT c.run_id, 'top copy', 1, coalesce(c.call_site, '(no Python stack)'), round(c.bytes_per_call / 1e6, 3), 'MB per call',
         round(100.0 * c.total_bytes / nullif(c.run_bytes, 0), 1), c.dur_ns::BIGINT,
         printf('%s %s %s -> %s, %d calls%s', c.op_name, c.dims::VARCHAR, c.src_dtype, c.dst_dtype, c.calls,
                CASE WHEN s.n_steps > 0 THEN printf(' (%.1f per step)', c.calls_in_steps / s.n_steps) ELSE '' END)
  FROM copies c LEFT JOIN step_stats s USING (run_id) WHERE c.rank = 1 AND c.total_bytes > 0
  UNION ALL
  SELECT run_id, 'warning', row_number() OVER (PARTITION BY run_id ORDER BY ord, item), item, value, unit, pct, time_ns, detail
  FROM warnings
)
SELECT x.run_id, r.name AS run_name, x.section, x.position, x.item, x.value, x.unit, x.pct, x.time_ns::BIGINT AS time_ns, x.detail
FROM rows x JOIN runs r USING (run_id)
ORDER BY x.run_id, CASE x.section WHEN 'run' THEN 0 WHEN 'finding' THEN 1 WHEN 'top op' THEN 2 WHEN 'top kernel' THEN 3
                                  WHEN 'top copy' THEN 4 ELSE 5 END, x.position
