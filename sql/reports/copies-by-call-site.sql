-- title: Largest tensor copies and casts by call site
-- description: Outermost copies and casts (a `.to()` or `.contiguous()` that returns its input moves nothing and is left out) grouped by call site, op, source dims and dtypes, biggest total bytes moved first: finds a whole buffer cast on every step.
-- per-run: true
-- empty: no tensor copies or casts that move data in the selected runs
-- column: run_id VARCHAR [key] -- run of the copies
-- column: run_name VARCHAR [key] -- name of the run
-- column: call_site VARCHAR [key] -- innermost user frame of the copy's Python stack
-- column: op_name VARCHAR [key] -- copy/cast op (outermost of a nested to -> _to_copy -> copy_ chain)
-- column: dims BIGINT[] [key] -- dims of the source tensor
-- column: src_dtype VARCHAR [key] -- source dtype (torch name, e.g. float8_e4m3fn)
-- column: dst_dtype VARCHAR [key] -- destination dtype (torch name)
-- column: calls BIGINT [result] -- number of calls
-- column: calls_per_step DOUBLE [detail] -- calls inside ProfilerStep windows divided by the run's number of steps (NULL without steps)
-- column: bytes_per_call BIGINT [detail] -- bytes moved per call (read + written; the largest call of the group)
-- column: total_bytes BIGINT [result] -- bytes moved by all calls
-- column: total_dur_ns BIGINT [result] -- total CPU time of the calls, ns
-- column: total_gpu_dur_ns BIGINT [result] -- total GPU time of the work the calls launched, ns (NULL when none is linked)
-- column: time_basis VARCHAR [detail] -- 'gpu' when every call has GPU work linked and gb_per_s divides by total_gpu_dur_ns, else 'cpu' (divides by total_dur_ns)
-- column: gb_per_s DOUBLE [detail] -- total_bytes / the time of time_basis, GB/s
WITH runs_steps AS (
  SELECT run_id, count(*) AS n_steps FROM steps WHERE run_id IN (SELECT run_id FROM report_runs) GROUP BY run_id
), c AS (
  -- the groups per run, from the packs where they hold them (view copy_groups)
  SELECT *, CASE WHEN calls_with_gpu = calls THEN 'gpu' ELSE 'cpu' END AS time_basis
  FROM copy_groups WHERE run_id IN (SELECT run_id FROM report_runs)
)
SELECT c.run_id, r.name AS run_name, c.call_site, c.op_name, c.dims, c.src_dtype, c.dst_dtype, c.calls,
       round(c.calls_in_steps / s.n_steps, 3) AS calls_per_step, c.bytes_per_call, c.total_bytes, c.total_dur_ns,
       c.total_gpu_dur_ns, c.time_basis,
       round(c.total_bytes / nullif(CASE c.time_basis WHEN 'gpu' THEN c.total_gpu_dur_ns ELSE c.total_dur_ns END, 0), 3) AS gb_per_s
FROM c JOIN runs r USING (run_id) LEFT JOIN runs_steps s USING (run_id)
ORDER BY c.run_id, c.total_bytes DESC NULLS LAST, c.total_dur_ns DESC, c.call_site, c.op_name, c.dims, c.src_dtype, c.dst_dtype
