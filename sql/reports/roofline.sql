-- title: Roofline: how close each op runs to the device's limits
-- description: Ops with a cost model (op_cost; the outermost op with a cost, so nested ops count once) grouped by name, input dims and dtype: calls, GPU time, FLOPs and bytes, achieved TFLOP/s and TB/s against the device's peaks (device_peaks, chosen by the trace's deviceProperties name, or the peak_tflops / peak_tbps parameters), bound, and the GPU time lost against the roofline, biggest loss first. Groups whose run has no known device, or no GPU time, keep NULL peaks and say why in `note`.
-- empty: no op with a cost model in the selected runs: ops need recorded shapes (profile with record_shapes=True) and a formula in op_categories
-- param: peak_tflops DOUBLE = -- peak TFLOP/s to use for every dtype instead of the device's (empty: the device's)
-- param: peak_tbps DOUBLE = -- peak memory bandwidth in TB/s to use instead of the device's (empty: the device's)
-- column: run_id VARCHAR -- the run
-- column: run_name VARCHAR -- name of the run
-- column: op_name VARCHAR -- op name
-- column: input_dims VARCHAR -- dims of every input
-- column: dtype VARCHAR -- dtype the math runs in (see op_cost)
-- column: category VARCHAR -- op category (op_categories)
-- column: model VARCHAR -- cost formula used (see op_cost)
-- column: calls BIGINT -- calls in the group
-- column: gpu_dur_ns BIGINT -- GPU time of the calls' kernels, device-to-device copies and sets (their whole subtree), ns; NULL when none is linked
-- column: flops BIGINT -- FLOPs of all calls; NULL when the formula lacked an input
-- column: bytes BIGINT -- minimum bytes read and written by all calls; NULL when unknown
-- column: tflops_per_s DOUBLE -- achieved TFLOP/s over the calls with GPU time
-- column: tb_per_s DOUBLE -- achieved TB/s over the calls with GPU time
-- column: intensity DOUBLE -- FLOPs per byte
-- column: peak_tflops DOUBLE -- the device's peak dense TFLOP/s for the dtype (or the parameter); NULL when unknown
-- column: peak_tbps DOUBLE -- the device's peak memory bandwidth, TB/s (or the parameter); NULL when unknown
-- column: compute_pct DOUBLE -- achieved TFLOP/s as a share of peak_tflops, percent
-- column: memory_pct DOUBLE -- achieved TB/s as a share of peak_tbps, percent
-- column: bound VARCHAR -- 'compute' when the intensity is at or above the ridge point (peak_tflops / peak_tbps FLOPs per byte), else 'memory'; NULL without peaks
-- column: roofline_dur_ns BIGINT -- the least time the roofline allows: the larger of flops / peak_tflops and bytes / peak_tbps, ns (calls with GPU time)
-- column: lost_dur_ns BIGINT -- gpu_dur_ns minus roofline_dur_ns: the time lost against the roofline, ns
-- column: device VARCHAR -- the device whose peaks are used ('parameters' when both are given), NULL when unknown
-- column: note VARCHAR -- why peaks or rates are missing, and how to supply them; NULL when all is known
WITH rows AS (
  SELECT c.*, d.device_name, d.device,
         nullif(coalesce($peak_tflops::DOUBLE, peak_tflops_for(c.dtype, d.fp32_tflops, d.bf16_tflops, d.fp16_tflops,
                                                               d.fp8_tflops)), 0) AS peak_tf,
         nullif(coalesce($peak_tbps::DOUBLE, d.memory_tbps), 0) AS peak_bw
  FROM op_cost c LEFT JOIN run_devices d USING (run_id)
  WHERE c.is_counted AND c.run_id IN (SELECT run_id FROM report_runs)
), g AS (
  SELECT run_id, op_name, input_dims, dtype, category, model, any_value(device_name) AS device_name,
         any_value(device) AS device, any_value(peak_tf) AS peak_tf, any_value(peak_bw) AS peak_bw,
         count(*) AS calls, sum(gpu_dur_ns) AS gpu_ns,
         CASE WHEN count(flops) = count(*) THEN sum(flops) END AS flops,
         CASE WHEN count(bytes) = count(*) THEN sum(bytes) END AS bytes,
         CASE WHEN count(flops) FILTER (WHERE gpu_dur_ns IS NOT NULL) = count(gpu_dur_ns)
              THEN sum(flops) FILTER (WHERE gpu_dur_ns IS NOT NULL) END AS gpu_flops,
         CASE WHEN count(bytes) FILTER (WHERE gpu_dur_ns IS NOT NULL) = count(gpu_dur_ns)
              THEN sum(bytes) FILTER (WHERE gpu_dur_ns IS NOT NULL) END AS gpu_bytes
  FROM rows GROUP BY run_id, op_name, input_dims, dtype, category, model
), r AS (
  SELECT *, gpu_flops / nullif(gpu_ns, 0) / 1e3 AS tf, gpu_bytes / nullif(gpu_ns, 0) / 1e3 AS bw,
         greatest(CASE WHEN gpu_flops = 0 THEN 0 ELSE gpu_flops / (peak_tf * 1e3) END, gpu_bytes / (peak_bw * 1e3)) AS roof_ns,
         CASE WHEN gpu_flops IS NULL OR gpu_bytes IS NULL OR peak_bw IS NULL THEN NULL
              WHEN gpu_flops <> 0 AND peak_tf IS NULL THEN NULL ELSE 1 END AS roof_ok
  FROM g
)
SELECT r.run_id, n.name AS run_name, r.op_name, r.input_dims, r.dtype, r.category, r.model, r.calls,
       r.gpu_ns::BIGINT AS gpu_dur_ns, TRY_CAST(r.flops AS BIGINT) AS flops, TRY_CAST(r.bytes AS BIGINT) AS bytes,
       round(r.tf, 3) AS tflops_per_s, round(r.bw, 3) AS tb_per_s,
       round(r.flops / nullif(r.bytes, 0), 3) AS intensity,
       r.peak_tf AS peak_tflops, r.peak_bw AS peak_tbps,
       round(100 * r.tf / r.peak_tf, 2) AS compute_pct, round(100 * r.bw / r.peak_bw, 2) AS memory_pct,
       CASE WHEN r.flops = 0 AND r.peak_bw IS NOT NULL THEN 'memory'
            WHEN r.flops / nullif(r.bytes, 0) >= r.peak_tf / r.peak_bw THEN 'compute'
            WHEN r.flops / nullif(r.bytes, 0) < r.peak_tf / r.peak_bw THEN 'memory' END AS bound,
       CASE WHEN r.roof_ok = 1 AND r.gpu_ns IS NOT NULL THEN round(r.roof_ns)::BIGINT END AS roofline_dur_ns,
       CASE WHEN r.roof_ok = 1 AND r.gpu_ns IS NOT NULL THEN (r.gpu_ns - round(r.roof_ns))::BIGINT END AS lost_dur_ns,
       CASE WHEN $peak_tflops::DOUBLE IS NOT NULL AND $peak_tbps::DOUBLE IS NOT NULL THEN 'parameters' ELSE r.device END AS device,
       CASE WHEN r.gpu_ns IS NULL THEN 'no GPU time is linked to these calls (a CPU trace, or kernels inside a CUDA graph)'
            WHEN r.peak_bw IS NULL OR (r.peak_tf IS NULL AND r.device IS NULL) THEN
              'no peaks known for ' || coalesce('device ''' || r.device_name || '''', 'this run (the trace names no device)')
              || ': pass --param peak_tflops=N --param peak_tbps=N, or add a row to device_peaks'
            WHEN r.peak_tf IS NULL AND coalesce(r.flops, 1) <> 0 THEN
              'no peak TFLOP/s for ' || coalesce(r.dtype, 'this dtype') || ' on ' || r.device || ': pass --param peak_tflops=N'
            WHEN r.flops IS NULL OR r.bytes IS NULL THEN 'the cost formula lacked an input (e.g. Concrete Inputs not recorded)' END AS note
FROM r JOIN runs n ON n.run_id = r.run_id
ORDER BY r.run_id, lost_dur_ns DESC NULLS LAST, r.gpu_ns DESC NULLS LAST, r.flops DESC NULLS LAST, r.op_name, r.input_dims
