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
), job_runs AS MATERIALIZED (
  -- selected runs with communication whose job has another such run selected: they can be matched
  SELECT list(run_id) AS ids FROM (
    SELECT run_id, count(*) OVER (PARTITION BY job_id) AS n FROM run_jobs
    WHERE run_id IN (SELECT unnest(ids) FROM comm_runs)) WHERE n > 1
), waits AS (
  SELECT *, sum(wait_ns) OVER (PARTITION BY job_id, collective, occurrence) AS instance_wait_ns
  FROM collective_waits((SELECT ids FROM job_runs)) WHERE ranks_seen > 1
), blame AS (
  SELECT job_id, run_id, rank, count(*) FILTER (WHERE is_last) AS last_count,
         coalesce(sum(instance_wait_ns) FILTER (WHERE is_last), 0) AS caused_ns, count(*) AS instances,
         count(*) OVER (PARTITION BY job_id) AS ranks
  FROM waits GROUP BY job_id, run_id, rank
), stragglers AS (
  SELECT *, row_number() OVER (PARTITION BY job_id ORDER BY caused_ns DESC, rank NULLS LAST, run_id) AS pos
  FROM blame WHERE caused_ns > 0
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
), findings AS (
  SELECT o.run_id, 'dominant op' AS item, round(100.0 * o.self_ns / t.self_ns, 1) AS value, '%' AS unit,
         round(100.0 * o.self_ns / t.self_ns, 1) AS pct, o.self_ns::BIGINT AS time_ns,
         printf('%s is %.0f%% of CPU self time (%.3f ms)', o.name, 100.0 * o.self_ns / t.self_ns, o.self_ns / 1e6) AS detail
  FROM ops o JOIN cpu_tot t USING (run_id) WHERE o.rank = 1 AND o.self_ns >= 0.25 * t.self_ns
  UNION ALL
  SELECT c.run_id, 'largest copy group', round(c.bytes_per_call * c.calls_in_steps / s.n_steps / 1e6, 3), 'MB per step',
         round(100.0 * c.total_bytes / nullif(c.run_bytes, 0), 1), c.dur_ns::BIGINT,
         printf('one copy/cast group moves %.1f MB per step (%s %s -> %s, %.1f calls per step, in every step) from %s: a whole preallocated buffer each call? It takes %.3f ms',
                c.bytes_per_call * c.calls_in_steps / s.n_steps / 1e6, c.dims::VARCHAR, c.src_dtype, c.dst_dtype,
                c.calls_in_steps / s.n_steps, coalesce(c.call_site, '(no Python stack)'), c.dur_ns / 1e6)
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
  FROM stragglers WHERE pos = 1
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
