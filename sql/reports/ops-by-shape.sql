-- title: Ops by input shapes and call site
-- description: Ops grouped by name, the dims of every input (dims that grow with the sequence as ranges, see op_shapes), and call site, with calls and self time: one big op or many small ones, and where. Filter with --param op=aten::mul.
-- per-run: true
-- empty: no CPU ops (or none matching --param op) in the selected runs
-- param: op VARCHAR = '' -- only ops with this name ('' for all ops)
-- param: exact_dims BOOLEAN = false -- group by each call's exact dims instead of showing dims that grow with the sequence as ranges (lo..hi)
-- column: run_id VARCHAR [key] -- run of the ops
-- column: run_name VARCHAR [key] -- name of the run
-- column: name VARCHAR [key] -- op name
-- column: dims VARCHAR [key] -- dims of every input, in input order ([] for scalars); dims that vary across steps as lo..hi (see op_shapes) unless exact_dims
-- column: call_site VARCHAR [key] -- innermost user frame of the op's Python stack
-- column: calls BIGINT [result] -- number of calls
-- column: self_dur_ns BIGINT [result] -- total self time, ns
-- column: self_pct DOUBLE [result] -- share of the run's total op self time, percent
-- column: total_dur_ns BIGINT [detail] -- total inclusive time, ns
WITH ops AS (
  SELECT o.*, CASE WHEN $exact_dims THEN d.input_dims::VARCHAR ELSE d.dims_text END AS dims
  FROM cpu_ops o LEFT JOIN op_shapes d USING (run_id, event_id)
  WHERE o.run_id IN (SELECT run_id FROM report_runs)
), totals AS (
  SELECT run_id, sum(self_dur_ns) AS run_self FROM ops GROUP BY run_id
)
SELECT o.run_id, r.name AS run_name, o.name, o.dims, o.call_site, count(*) AS calls,
       sum(o.self_dur_ns)::BIGINT AS self_dur_ns,
       round(100.0 * sum(o.self_dur_ns) / nullif(any_value(t.run_self), 0), 2) AS self_pct,
       sum(o.dur_ns)::BIGINT AS total_dur_ns
FROM ops o JOIN runs r USING (run_id) JOIN totals t USING (run_id)
WHERE $op = '' OR o.name = $op
GROUP BY ALL
ORDER BY o.run_id, self_dur_ns DESC, o.name, o.dims, o.call_site
