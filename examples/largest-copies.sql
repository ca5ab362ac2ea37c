WITH copies AS (
  -- The largest tensor copies/casts, grouped by run, shape, source dtype and Python call site.
  -- The call site is the innermost frame of the op's Python stack outside torch itself.
  SELECT e.run_id, e.dur_ns, s.dims, s.dtype,
         (SELECT arg_min(f.frame, f.frame_index) FROM stacks f
           WHERE f.run_id = e.run_id AND f.stack_id = e.stack_id AND f.file NOT LIKE 'torch/%') AS call_site
  FROM events e
  JOIN shapes s ON s.run_id = e.run_id AND s.event_id = e.event_id AND s.input_index = 1
  WHERE e.name = 'aten::copy_'
)
SELECT r.name AS run, dims, dtype AS src_dtype, call_site, count(*) AS calls,
       round(sum(dur_ns) / 1e6, 2) AS total_ms
FROM copies JOIN runs r USING (run_id)
GROUP BY ALL
ORDER BY total_ms DESC
LIMIT 5
