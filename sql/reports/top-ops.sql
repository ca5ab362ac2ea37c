-- title: Top CPU ops by self time
-- description: Ops grouped by name (or input shapes, or call site), like torch's key_averages().table(): calls, self and total time, and the GPU kernel time they launched.
-- param: group_by VARCHAR = name {name|shape|call_site} -- group ops by name, by name and input shapes, or by name and Python call site
-- column: run_id VARCHAR -- run of the ops
-- column: run_name VARCHAR -- name of the run
-- column: name VARCHAR -- op name
-- column: input_dims VARCHAR -- dims of every input, when grouped by shape
-- column: call_site VARCHAR -- innermost user frame, when grouped by call site
-- column: calls BIGINT -- number of op calls
-- column: self_dur_ns BIGINT -- total self time (duration minus direct children), ns
-- column: self_pct DOUBLE -- share of the run's total op self time, percent
-- column: total_dur_ns BIGINT -- total inclusive time, ns
-- column: avg_dur_ns BIGINT -- average inclusive time per call, ns
-- column: gpu_dur_ns BIGINT -- GPU kernel time launched directly by these ops, ns
-- column: self_ms DOUBLE -- self time in milliseconds
WITH ops AS (
  SELECT o.*,
         CASE WHEN $group_by = 'shape' THEN (SELECT list(s.dims ORDER BY s.input_index)::VARCHAR FROM shapes s
                                             WHERE s.run_id = o.run_id AND s.event_id = o.event_id AND s.member_index IS NULL) END AS dims_text
  FROM cpu_ops o WHERE o.run_id IN (SELECT run_id FROM report_runs)
), gpu AS (
  SELECT run_id, op_event_id, sum(dur_ns) AS gpu_dur_ns FROM gpu_kernels
  WHERE run_id IN (SELECT run_id FROM report_runs) AND op_event_id IS NOT NULL GROUP BY ALL
), grouped AS (
  SELECT o.run_id, o.name,
         CASE WHEN $group_by = 'shape' THEN o.dims_text END AS input_dims,
         CASE WHEN $group_by = 'call_site' THEN o.call_site END AS call_site,
         count(*) AS calls, sum(o.self_dur_ns)::BIGINT AS self_dur_ns, sum(o.dur_ns)::BIGINT AS total_dur_ns,
         avg(o.dur_ns)::BIGINT AS avg_dur_ns, sum(g.gpu_dur_ns)::BIGINT AS gpu_dur_ns
  FROM ops o LEFT JOIN gpu g ON g.run_id = o.run_id AND g.op_event_id = o.event_id
  GROUP BY ALL
)
SELECT g.run_id, r.name AS run_name, g.name, g.input_dims, g.call_site, g.calls, g.self_dur_ns,
       round(100.0 * g.self_dur_ns / nullif(sum(g.self_dur_ns) OVER (PARTITION BY g.run_id), 0), 2) AS self_pct,
       g.total_dur_ns, g.avg_dur_ns, g.gpu_dur_ns, round(g.self_dur_ns / 1e6, 3) AS self_ms
FROM grouped g JOIN runs r USING (run_id)
ORDER BY g.run_id, g.self_dur_ns DESC, g.name
