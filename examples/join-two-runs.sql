WITH ops AS (
  -- every CPU op of every run with the dims of all its inputs
  SELECT r.name AS run, o.name AS op, o.self_dur_ns,
         (SELECT list(s.dims ORDER BY s.input_index) FROM shapes s
           WHERE s.run_id = o.run_id AND s.event_id = o.event_id AND s.member_index IS NULL) AS dims
  FROM cpu_ops o JOIN runs r USING (run_id)
), per_run AS (
  SELECT run, op, dims, count(*) AS calls, sum(self_dur_ns) AS self_ns FROM ops GROUP BY ALL
)
SELECT a.op, a.dims, a.calls AS buggy_calls, b.calls AS fixed_calls,
       round(a.self_ns / 1e6, 3) AS buggy_self_ms, round(b.self_ns / 1e6, 3) AS fixed_self_ms
FROM (SELECT * FROM per_run WHERE run = 'buggy') a
JOIN (SELECT * FROM per_run WHERE run = 'fixed') b USING (op, dims)
ORDER BY a.self_ns - b.self_ns DESC, a.op
LIMIT 5
