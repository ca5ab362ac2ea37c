-- title: Top CPU ops by self time
-- description: Ops grouped by name (or input shapes, or call site, or op category), like torch's key_averages().table(): calls, self and total time, the GPU kernel time they launched, and the input dims and call site that account for most of the group's self time.
-- per-run: true
-- param: group_by VARCHAR = name {name|shape|call_site|category} -- group ops by name, by name and input shapes, by name and Python call site, or by category (op_categories: GEMM, convolution, attention, elementwise, normalisation, reduction, communication, copy, other)
-- column: run_id VARCHAR [key] -- run of the ops
-- column: run_name VARCHAR [key] -- name of the run
-- column: name VARCHAR [key] -- op name; with group_by=category, the category
-- column: input_dims VARCHAR [key] -- dims of every input: the group's own with group_by=shape, else those of the group's calls with the most self time (NULL when they record no shapes)
-- column: call_site VARCHAR [key] -- innermost user frame: the group's own with group_by=call_site, else that of the group's calls with the most self time (NULL when they have no Python stack)
-- column: calls BIGINT [result] -- number of op calls
-- column: self_dur_ns BIGINT [result] -- total self time (duration minus direct children), ns
-- column: self_pct DOUBLE [result] -- share of the run's total op self time, percent
-- column: total_dur_ns BIGINT [detail] -- total inclusive time, ns
-- column: avg_dur_ns BIGINT [detail] -- average inclusive time per call, ns
-- column: gpu_dur_ns BIGINT [detail] -- GPU kernel time launched directly by these ops, ns
WITH ops AS (
  SELECT o.run_id, o.event_id,
         CASE WHEN $group_by = 'category' THEN coalesce(c.category, 'other') ELSE o.name END AS name,
         o.call_site, o.self_dur_ns, o.dur_ns, i.input_dims_text AS dims_text
  FROM cpu_ops o LEFT JOIN op_name_categories c ON $group_by = 'category' AND c.name = o.name
  LEFT JOIN op_inputs i ON i.run_id = o.run_id AND i.event_id = o.event_id
  WHERE o.run_id IN (SELECT run_id FROM report_runs)
), gpu AS (
  SELECT run_id, op_event_id, sum(dur_ns) AS gpu_dur_ns FROM gpu_kernels
  WHERE run_id IN (SELECT run_id FROM report_runs) AND op_event_id IS NOT NULL GROUP BY ALL
), keyed AS (
  -- the group within a name: '' when grouped by name; a NULL dims or call site is its own group
  SELECT o.*, g.gpu_dur_ns,
         CASE $group_by WHEN 'shape' THEN coalesce(o.dims_text, '(none)')
                        WHEN 'call_site' THEN coalesce(o.call_site, '(none)') ELSE '' END AS gkey
  FROM ops o LEFT JOIN gpu g ON g.run_id = o.run_id AND g.op_event_id = o.event_id
), top_dims AS (
  SELECT run_id, name, gkey, first(dims_text ORDER BY self_ns DESC, dims_text NULLS LAST) AS input_dims
  FROM (SELECT run_id, name, gkey, dims_text, sum(self_dur_ns) AS self_ns FROM keyed GROUP BY ALL) GROUP BY ALL
), top_site AS (
  SELECT run_id, name, gkey, first(call_site ORDER BY self_ns DESC, call_site NULLS LAST) AS call_site
  FROM (SELECT run_id, name, gkey, call_site, sum(self_dur_ns) AS self_ns FROM keyed GROUP BY ALL) GROUP BY ALL
), grouped AS (
  SELECT run_id, name, gkey, count(*) AS calls, sum(self_dur_ns)::BIGINT AS self_dur_ns, sum(dur_ns)::BIGINT AS total_dur_ns,
         avg(dur_ns)::BIGINT AS avg_dur_ns, sum(gpu_dur_ns)::BIGINT AS gpu_dur_ns
  FROM keyed GROUP BY ALL
)
SELECT g.run_id, r.name AS run_name, g.name, d.input_dims, c.call_site, g.calls, g.self_dur_ns,
       round(100.0 * g.self_dur_ns / nullif(sum(g.self_dur_ns) OVER (PARTITION BY g.run_id), 0), 2) AS self_pct,
       g.total_dur_ns, g.avg_dur_ns, g.gpu_dur_ns
FROM grouped g JOIN runs r ON r.run_id = g.run_id
JOIN top_dims d ON d.run_id = g.run_id AND d.name = g.name AND d.gkey = g.gkey
JOIN top_site c ON c.run_id = g.run_id AND c.name = g.name AND c.gkey = g.gkey
ORDER BY g.run_id, g.self_dur_ns DESC, g.name, d.input_dims, c.call_site
