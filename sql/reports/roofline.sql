-- title: Roofline: how close each op runs to the device's limits
-- description: Ops with a cost model (op_cost; the outermost op with a cost, so nested ops count once) grouped by name, input dims and dtype: calls, time (GPU time; in a run without GPU work, the ops' CPU time: time_basis), FLOPs and bytes, achieved TFLOP/s and TB/s against the device's peaks (device_peaks, chosen by the name of the trace's deviceProperties entry for the device its kernels ran on, else identified by that entry's compute capability, SM / CU count and memory when the name is empty or unknown (view run_devices; `note` says so), or named with --param device, or the peak_tflops / peak_tbps parameters), bound, and the GPU time lost against the roofline, biggest loss first. Groups whose run has no known device, or no GPU time, keep NULL peaks and say why in `note`. Kernels inside CUDA/HIP graphs link only to the graph launch: with --param capture=RUN, a run that traced the graphs' capture, each counted op of that run whose subtree issued captured work becomes a row of each replaying run (source 'graph'): calls are the launches of its graph, GPU time the replayed work matched to it (graph_op_time), FLOPs and bytes its cost times the launches, peaks the replaying run's device. Graph work no op takes (all of it without capture) is one row per run with op_name NULL and a note.
-- per-run: true
-- empty: no op with a cost model in the selected runs: ops need recorded shapes (profile with record_shapes=True) and a formula in op_categories
-- param: peak_tflops DOUBLE = -- peak TFLOP/s to use for every dtype instead of the device's (empty: the device's)
-- param: peak_tbps DOUBLE = -- peak memory bandwidth in TB/s to use instead of the device's (empty: the device's)
-- param: device VARCHAR = -- device_peaks device whose peaks to use (e.g. MI300X), for every run, instead of the one the trace's deviceProperties give (empty: theirs)
-- param: capture RUN = -- run that traced the capture of the CUDA graphs the runs replay (run id, unique prefix or name): gives the ops inside graphs their replayed time
-- column: run_id VARCHAR [key] -- the run
-- column: run_name VARCHAR [key] -- name of the run
-- column: op_name VARCHAR [key] -- op name; NULL on the row of graph work attributed to no op
-- column: input_dims VARCHAR [key] -- dims of every input
-- column: calls BIGINT [detail] -- calls in the group (source 'graph': launches of the graphs that ran them)
-- column: dur_ns BIGINT [result] -- the calls' time (time_basis): GPU time of their kernels, device-to-device copies and sets (their whole subtree), or in a run without GPU work their inclusive CPU time, ns; NULL when a GPU run links none to them
-- column: lost_dur_ns BIGINT [result] -- dur_ns minus roofline_dur_ns: the time lost against the roofline, ns
-- column: tflops_per_s DOUBLE [detail] -- achieved TFLOP/s over the calls with time, 6 decimals (a CPU reaches a few GFLOP/s: 0.00x)
-- column: compute_pct DOUBLE [result] -- achieved TFLOP/s as a share of peak_tflops, percent
-- column: tb_per_s DOUBLE [detail] -- achieved TB/s over the calls with time
-- column: memory_pct DOUBLE [result] -- achieved TB/s as a share of peak_tbps, percent
-- column: bound VARCHAR [result] -- 'compute' when the intensity is at or above the ridge point (peak_tflops / peak_tbps FLOPs per byte), else 'memory'; NULL without peaks
-- column: time_basis VARCHAR [detail] -- 'gpu': dur_ns is GPU time; 'cpu': the run has no GPU work and launches none, dur_ns is the ops' CPU time and rates are the CPU's (no peaks: compare with the CPU's own)
-- column: dtype VARCHAR [key] -- dtype the math runs in (see op_cost)
-- column: category VARCHAR [detail] -- op category (op_categories)
-- column: model VARCHAR [detail] -- cost formula used (see op_cost)
-- column: source VARCHAR [key] -- 'eager': calls of the run itself; 'graph': ops of the capture run whose captured work this run replayed in CUDA graphs (calls = graph launches), or, with op_name NULL, graph work attributed to no op
-- column: flops BIGINT [detail] -- FLOPs of all calls; NULL when the formula lacked an input
-- column: bytes BIGINT [detail] -- minimum bytes read and written by all calls; NULL when unknown
-- column: intensity DOUBLE [detail] -- FLOPs per byte
-- column: peak_tflops DOUBLE [detail] -- the device's peak dense TFLOP/s for the dtype (or the parameter); NULL when unknown
-- column: peak_tbps DOUBLE [detail] -- the device's peak memory bandwidth, TB/s (or the parameter); NULL when unknown
-- column: roofline_dur_ns BIGINT [detail] -- the least time the roofline allows: the larger of flops / peak_tflops and bytes / peak_tbps, ns (calls with time)
-- column: device VARCHAR [detail] -- the device whose peaks are used: --param device's, else the one the trace's deviceProperties name or properties give (run_devices); 'parameters' when peak_tflops and peak_tbps are both given; NULL when unknown
-- column: note VARCHAR [detail] -- which device's peaks are used when not by the trace's device name (identified from deviceProperties, or --param device), why peaks or rates are missing, and how to supply them (a capture run for work inside CUDA graphs); NULL when all is known and the trace named its device
WITH gpu_runs AS (
  -- the runs with GPU work or launches (a capture run launches work that runs only in replays):
  -- rates over GPU time; the others over the ops' CPU time
  SELECT DISTINCT run_id FROM device_events() WHERE run_id IN (SELECT run_id FROM report_runs)
  UNION SELECT DISTINCT run_id FROM launch_calls WHERE run_id IN (SELECT run_id FROM report_runs)
), counted AS MATERIALIZED (
  SELECT c.*, CASE WHEN c.run_id IN (SELECT run_id FROM gpu_runs) THEN c.gpu_dur_ns ELSE o.dur_ns END AS time_ns,
         CASE WHEN c.run_id IN (SELECT run_id FROM gpu_runs) THEN 'gpu' ELSE 'cpu' END AS time_basis
  FROM op_cost c JOIN cpu_ops o USING (run_id, event_id)
  WHERE c.is_counted AND (c.run_id IN (SELECT run_id FROM report_runs) OR c.run_id = $capture::VARCHAR)
),
-- work replayed by graph launches, per captured op (graph_op_time), summed over every counted op of
-- the capture run around it: calls are the launches of its graph, cost the op's cost x launches
graph_time AS (
  SELECT t.run_id, t.graph_index, a.anc_id AS event_id, max(t.launches) AS launches, sum(t.gpu_dur_ns) AS gpu_dur_ns
  FROM graph_op_time($capture::VARCHAR) t
  JOIN launch_op_ancestors a ON a.run_id = t.capture_run_id AND a.event_id = t.op_event_id
  WHERE t.run_id IN (SELECT run_id FROM report_runs)
  GROUP BY t.run_id, t.graph_index, a.anc_id
), ops AS (
  SELECT 'eager' AS source, run_id, op_name, input_dims, dtype, category, model, 1 AS calls, time_ns AS gpu_dur_ns, flops,
         bytes, time_basis
  FROM counted WHERE run_id IN (SELECT run_id FROM report_runs)
  UNION ALL
  SELECT 'graph', t.run_id, c.op_name, c.input_dims, c.dtype, c.category, c.model, t.launches, t.gpu_dur_ns,
         c.flops * t.launches, c.bytes * t.launches, 'gpu'
  FROM graph_time t JOIN counted c ON c.run_id = $capture::VARCHAR AND c.event_id = t.event_id
), named_device AS (
  -- the device_peaks row of --param device (any row of that device: they share its peaks)
  SELECT any_value(p) AS p FROM device_peaks p WHERE lower(p.device) = lower(nullif($device::VARCHAR, ''))
), devices AS (
  -- each run's device: the parameter's, else the one its deviceProperties name or properties give
  SELECT d.run_id, d.device_name,
         CASE WHEN nullif($device::VARCHAR, '') IS NOT NULL THEN {'device': n.p.device, 'fp32': n.p.fp32_tflops, 'bf16': n.p.bf16_tflops,
                'fp16': n.p.fp16_tflops, 'fp8': n.p.fp8_tflops, 'tbps': n.p.memory_tbps}
              ELSE {'device': d.device, 'fp32': d.fp32_tflops, 'bf16': d.bf16_tflops, 'fp16': d.fp16_tflops,
                    'fp8': d.fp8_tflops, 'tbps': d.memory_tbps} END AS dev,
         CASE WHEN nullif($device::VARCHAR, '') IS NOT NULL AND n.p IS NOT NULL THEN 'peaks of ' || n.p.device || ' (--param device)'
              WHEN nullif($device::VARCHAR, '') IS NULL AND d.identified_by = 'properties' THEN
                'peaks of ' || d.device || ', identified from deviceProperties (compute capability ' || d.compute_capability
                || ', ' || d.num_sms || ' SMs/CUs, ' || d.memory_gib || ' GiB) as '
                || coalesce('no device_peaks row matches its name ''' || nullif(d.device_name, '') || '''', 'the trace names no device')
                || '; pass --param device=NAME to choose another' END AS device_note
  FROM run_devices d CROSS JOIN named_device n
), rows AS (
  SELECT o.*, d.device_name, d.dev.device AS device, d.device_note,
         nullif(coalesce($peak_tflops::DOUBLE, peak_tflops_for(o.dtype, d.dev.fp32, d.dev.bf16, d.dev.fp16,
                                                               d.dev.fp8)), 0) AS peak_tf,
         nullif(coalesce($peak_tbps::DOUBLE, d.dev.tbps), 0) AS peak_bw
  FROM ops o LEFT JOIN devices d USING (run_id)
), g AS (
  SELECT run_id, source, op_name, input_dims, dtype, category, model, any_value(time_basis) AS time_basis,
         any_value(device_name) AS device_name, any_value(device_note) AS device_note,
         any_value(device) AS device, any_value(peak_tf) AS peak_tf, any_value(peak_bw) AS peak_bw,
         sum(calls)::BIGINT AS calls, sum(gpu_dur_ns) AS gpu_ns,
         CASE WHEN count(flops) = count(*) THEN sum(flops) END AS flops,
         CASE WHEN count(bytes) = count(*) THEN sum(bytes) END AS bytes,
         CASE WHEN count(flops) FILTER (WHERE gpu_dur_ns IS NOT NULL) = count(gpu_dur_ns)
              THEN sum(flops) FILTER (WHERE gpu_dur_ns IS NOT NULL) END AS gpu_flops,
         CASE WHEN count(bytes) FILTER (WHERE gpu_dur_ns IS NOT NULL) = count(gpu_dur_ns)
              THEN sum(bytes) FILTER (WHERE gpu_dur_ns IS NOT NULL) END AS gpu_bytes
  FROM rows GROUP BY run_id, source, op_name, input_dims, dtype, category, model
), r AS (
  SELECT *, gpu_flops / nullif(gpu_ns, 0) / 1e3 AS tf, gpu_bytes / nullif(gpu_ns, 0) / 1e3 AS bw,
         greatest(CASE WHEN gpu_flops = 0 THEN 0 ELSE gpu_flops / (peak_tf * 1e3) END, gpu_bytes / (peak_bw * 1e3)) AS roof_ns,
         CASE WHEN gpu_flops IS NULL OR gpu_bytes IS NULL OR peak_bw IS NULL THEN NULL
              WHEN gpu_flops <> 0 AND peak_tf IS NULL THEN NULL ELSE 1 END AS roof_ok
  FROM g
),
-- graph work no op takes: all of it without a capture run, else what matched no captured call
unattributed AS (
  SELECT run_id, count(DISTINCT launch_event_id) AS calls, sum(dur_ns)::BIGINT AS gpu_dur_ns,
         string_agg(DISTINCT match, ', ' ORDER BY match) AS matches
  FROM graph_kernel_ops($capture::VARCHAR)
  WHERE run_id IN (SELECT run_id FROM report_runs) AND op_event_id IS NULL
  GROUP BY run_id
), out AS (
  SELECT r.run_id, n.name AS run_name, r.source, r.op_name, r.input_dims, r.dtype, r.category, r.model, r.calls,
         r.gpu_ns::BIGINT AS dur_ns, r.time_basis, TRY_CAST(r.flops AS BIGINT) AS flops, TRY_CAST(r.bytes AS BIGINT) AS bytes,
         round(r.tf, 6) AS tflops_per_s, round(r.bw, 6) AS tb_per_s,
         round(r.flops / nullif(r.bytes, 0), 3) AS intensity,
         r.peak_tf AS peak_tflops, r.peak_bw AS peak_tbps,
         round(100 * r.tf / r.peak_tf, 2) AS compute_pct, round(100 * r.bw / r.peak_bw, 2) AS memory_pct,
         CASE WHEN r.flops = 0 AND r.peak_bw IS NOT NULL THEN 'memory'
              WHEN r.flops / nullif(r.bytes, 0) >= r.peak_tf / r.peak_bw THEN 'compute'
              WHEN r.flops / nullif(r.bytes, 0) < r.peak_tf / r.peak_bw THEN 'memory' END AS bound,
         CASE WHEN r.roof_ok = 1 AND r.gpu_ns IS NOT NULL THEN round(r.roof_ns)::BIGINT END AS roofline_dur_ns,
         CASE WHEN r.roof_ok = 1 AND r.gpu_ns IS NOT NULL THEN (r.gpu_ns - round(r.roof_ns))::BIGINT END AS lost_dur_ns,
         CASE WHEN $peak_tflops::DOUBLE IS NOT NULL AND $peak_tbps::DOUBLE IS NOT NULL THEN 'parameters' ELSE r.device END AS device,
         nullif(concat_ws('; ', CASE WHEN r.time_basis = 'gpu' THEN r.device_note END, CASE WHEN r.time_basis = 'cpu' THEN NULL
              WHEN r.gpu_ns IS NULL THEN
                'no GPU time is linked to these calls (launches captured into a CUDA graph: report the run that '
                || 'replays it with --param capture=RUN)'
              WHEN (r.peak_bw IS NULL OR (r.peak_tf IS NULL AND r.device IS NULL)) AND nullif($device::VARCHAR, '') IS NOT NULL THEN
                'no device_peaks row is named ''' || nullif($device::VARCHAR, '') || ''' (--param device): name one of its devices, '
                || 'or pass --param peak_tflops=N --param peak_tbps=N'
              WHEN r.peak_bw IS NULL OR (r.peak_tf IS NULL AND r.device IS NULL) THEN
                'no peaks known for ' || coalesce('device ''' || nullif(r.device_name, '') || '''', 'this run (the trace names no device)')
                || ': pass --param device=NAME (a device of device_peaks), or --param peak_tflops=N --param peak_tbps=N, '
                || 'or add a row to device_peaks'
              WHEN r.peak_tf IS NULL AND coalesce(r.flops, 1) <> 0 THEN
                'no peak TFLOP/s for ' || coalesce(r.dtype, 'this dtype') || ' on ' || r.device || ': pass --param peak_tflops=N'
              WHEN r.flops IS NULL OR r.bytes IS NULL THEN 'the cost formula lacked an input (e.g. Concrete Inputs not recorded)' END), '') AS note
  FROM r JOIN runs n ON n.run_id = r.run_id
  UNION ALL BY NAME
  SELECT u.run_id, n.name AS run_name, 'graph' AS source, u.calls, u.gpu_dur_ns AS dur_ns, 'gpu' AS time_basis,
         CASE WHEN $capture::VARCHAR IS NULL THEN
                'kernels inside CUDA graphs are not attributed to ops: pass --param capture=RUN, a run that traced '
                || 'the graphs'' capture'
              ELSE 'graph work that no captured op issued (match: ' || u.matches
                || '): see the cuda-graphs report with the same --param capture' END AS note
  FROM unattributed u JOIN runs n ON n.run_id = u.run_id
)
-- the figures a reader needs first come first: a 100-column table shows them
SELECT run_id, run_name, op_name, input_dims, calls, dur_ns, lost_dur_ns, tflops_per_s, compute_pct, tb_per_s, memory_pct, bound,
       time_basis, dtype, category, model, source, flops, bytes, intensity, peak_tflops, peak_tbps, roofline_dur_ns, device, note
FROM out
ORDER BY run_id, op_name IS NULL, lost_dur_ns DESC NULLS LAST, dur_ns DESC NULLS LAST, flops DESC NULLS LAST, op_name, input_dims, dtype, category, model, source
