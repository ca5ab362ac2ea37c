-- requires: reference, cpu, gpu
-- Tensor copies and casts: what each call moves, from the shapes of the copy ops.

-- The copy and cast ops that tensor_copies considers, and which of their inputs is the source.
-- aten::copy_(self, src) lists the destination first; aten::index_copy_(self, dim, index, source)
-- has its source fourth; the others copy their first input. aten::to, aten::type_as and
-- aten::contiguous return their input unchanged when it already has the dtype, device and layout
-- asked for, so they are not copies by themselves: only when a copy op runs inside them. The rows
-- come from sql/reference/copy_ops.csv.
CREATE TABLE IF NOT EXISTS copy_ops (
  -- Op name, e.g. aten::copy_.
  name VARCHAR,
  -- 0-based input position of the source tensor.
  source_input INTEGER,
  -- 0-based input position of the destination tensor, NULL when the op allocates its result.
  dest_input INTEGER,
  -- 0-based input position of a tensor whose dtype the result takes (aten::type_as), else NULL.
  dtype_input INTEGER,
  -- True when the op's `Concrete Inputs` carry the target dtype as a ScalarType code (aten::to, aten::_to_copy).
  has_dtype_arg BOOLEAN,
  -- True when every call moves data; false for ops that may return their input (to, type_as, contiguous).
  always_copies BOOLEAN,
  -- True when the op writes every element of the destination (copy_ broadcasts its source over it); false when it writes as many elements as the source has (index_copy_), NULL without a destination input.
  writes_whole_dest BOOLEAN
);

-- Every tensor copy or cast: a call of an op that always copies (aten::copy_, aten::_to_copy,
-- aten::clone, aten::index_copy_, aten::_copy_from, ...), or of aten::to, aten::type_as or
-- aten::contiguous when a copy op runs inside it. A `.to()`, `.float()` or `.contiguous()` that
-- returns its input (same dtype, device and layout: no copy op inside) moves nothing and is not
-- listed. Bytes of an innermost copy: read = source numel x source element size, written =
-- destination numel x destination element size (a broadcast `dst[16384,576].copy_(src[576])`
-- writes 16384*576 elements); an op with copies inside it (to -> _to_copy -> copy_) moves what
-- those innermost copies move. Nested copies are all listed: sum only rows with is_outermost to
-- avoid double counting. gb_per_s divides bytes by the GPU time of the work launched from inside
-- the op when there is any (time_basis 'gpu'), else by the op's CPU time (time_basis 'cpu').
-- @columns-as cpu_ops: run_id, event_id
-- @column op_name VARCHAR Op name.
-- @column dims BIGINT[] Dims of the source tensor.
-- @column dst_dims BIGINT[] Dims of the destination tensor when the op takes one (copy_, index_copy_), else NULL (the result has the source's dims).
-- @column src_dtype VARCHAR Source dtype (torch name, e.g. float8_e4m3fn).
-- @column dst_dtype VARCHAR Destination dtype: the destination input's, else the dtype argument's (ScalarType code or type_as's other tensor), else that of the copies inside, else the source's for ops that keep it.
-- @column src_numel BIGINT Elements read: the source's numel for an innermost copy; for an op with copies inside, the sum over them.
-- @column dst_numel BIGINT Elements written: the destination's numel (copy_, broadcasts included), else the source's; for an op with copies inside, the sum over them.
-- @column src_bytes BIGINT Bytes read: src_numel x source element size (summed like src_numel).
-- @column dst_bytes BIGINT Bytes written: dst_numel x destination element size (summed like dst_numel).
-- @column bytes BIGINT Bytes moved: src_bytes + dst_bytes.
-- @columns-as cpu_ops: dur_ns, self_dur_ns
-- @column gpu_dur_ns BIGINT Summed GPU time of the kernels, memcpys and memsets launched by the op or the copy ops inside it (runtime calls linked by correlation), ns; NULL when none is in the trace.
-- @column time_basis VARCHAR 'gpu' when gb_per_s divides by gpu_dur_ns, 'cpu' when by dur_ns (no GPU work linked).
-- @column gb_per_s DOUBLE bytes / the time of time_basis, GB/s (NULL when that time is 0).
-- @column is_outermost BOOLEAN True when no enclosing op is a copy op (sum these to avoid double counting).
-- @columns-as cpu_ops: parent_op_id, call_site, module_path, step
CREATE OR REPLACE VIEW tensor_copies AS
WITH RECURSIVE calls AS MATERIALIZED (
  SELECT o.run_id, o.event_id, o.name, o.ts_ns, o.dur_ns, o.self_dur_ns, o.parent_op_id, o.top_op_id,
         o.call_site, o.module_path, o.step, k.* EXCLUDE (name)
  FROM cpu_ops o JOIN copy_ops k ON k.name = o.name
), inputs AS (
  -- the inputs each call needs, in one pass over shapes
  SELECT c.run_id, c.event_id,
         any_value(s.dims) FILTER (WHERE s.input_index = c.source_input) AS dims,
         any_value(s.dtype) FILTER (WHERE s.input_index = c.source_input) AS src_dtype,
         any_value(s.numel) FILTER (WHERE s.input_index = c.source_input) AS src_numel,
         any_value(s.elem_bytes) FILTER (WHERE s.input_index = c.source_input) AS src_elem,
         any_value(s.dims) FILTER (WHERE s.input_index = c.dest_input) AS dst_dims,
         any_value(s.dtype) FILTER (WHERE s.input_index = c.dest_input) AS dest_dtype,
         any_value(s.numel) FILTER (WHERE s.input_index = c.dest_input) AS dest_numel,
         any_value(s.elem_bytes) FILTER (WHERE s.input_index = c.dest_input) AS dest_elem,
         any_value(s.dtype) FILTER (WHERE s.input_index = c.dtype_input) AS like_dtype,
         any_value(s.elem_bytes) FILTER (WHERE s.input_index = c.dtype_input) AS like_elem,
         any_value(TRY_CAST(s.concrete AS INTEGER)) FILTER (WHERE c.has_dtype_arg AND s.input_index = 1) AS dtype_code
  FROM calls c JOIN shapes s ON s.run_id = c.run_id AND s.event_id = c.event_id AND s.member_index IS NULL
  GROUP BY c.run_id, c.event_id
), ops AS MATERIALIZED (
  SELECT c.run_id, c.event_id, c.name, c.ts_ns, c.dur_ns, c.self_dur_ns, c.parent_op_id, c.top_op_id,
         c.call_site, c.module_path, c.step, c.always_copies,
         i.dims, i.src_dtype, i.src_numel, i.src_elem, i.dst_dims,
         CASE WHEN c.dest_input IS NULL OR NOT c.writes_whole_dest THEN i.src_numel ELSE i.dest_numel END AS dst_numel,
         coalesce(i.dest_dtype, i.like_dtype, code.torch_name,
                  CASE WHEN NOT c.has_dtype_arg AND c.dtype_input IS NULL THEN i.src_dtype END) AS dst_dtype,
         CASE WHEN i.dest_dtype IS NOT NULL THEN i.dest_elem WHEN i.like_dtype IS NOT NULL THEN i.like_elem
              WHEN code.torch_name IS NOT NULL THEN code.elem_bytes
              WHEN NOT c.has_dtype_arg AND c.dtype_input IS NULL THEN i.src_elem END AS dst_elem
  FROM calls c LEFT JOIN inputs i USING (run_id, event_id)
  LEFT JOIN (SELECT DISTINCT scalar_type, torch_name, elem_bytes FROM dtypes WHERE scalar_type IS NOT NULL) code
       ON code.scalar_type = i.dtype_code
), links AS MATERIALIZED (
  -- (copy op, the copy op it is directly nested in)
  SELECT i.run_id, i.parent_op_id AS outer_id, i.event_id AS inner_id
  FROM ops i JOIN ops p ON p.run_id = i.run_id AND p.event_id = i.parent_op_id
), inside(run_id, outer_id, inner_id) AS (
  -- (op, copy op nested in it) through chains of copy ops: to -> _to_copy -> copy_
  SELECT run_id, outer_id, inner_id FROM links
  UNION ALL
  SELECT x.run_id, l.outer_id, x.inner_id
  FROM inside x JOIN links l ON l.run_id = x.run_id AND l.inner_id = x.outer_id
), real_inside AS (
  -- real copies (always_copies) inside each op, and which of them are innermost
  SELECT x.run_id, x.outer_id, x.inner_id,
         NOT EXISTS (SELECT 1 FROM inside y JOIN ops r ON r.run_id = y.run_id AND r.event_id = y.inner_id
                     WHERE y.run_id = x.run_id AND y.outer_id = x.inner_id AND r.always_copies) AS is_innermost
  FROM inside x JOIN ops i ON i.run_id = x.run_id AND i.event_id = x.inner_id
  WHERE i.always_copies
), inner_sums AS (
  SELECT x.run_id, x.outer_id AS event_id, sum(i.src_numel) AS src_numel, sum(i.dst_numel) AS dst_numel,
         sum(i.src_numel * i.src_elem) AS src_bytes, sum(i.dst_numel * i.dst_elem) AS dst_bytes,
         min(i.dst_dtype) AS dst_dtype
  FROM real_inside x JOIN ops i ON i.run_id = x.run_id AND i.event_id = x.inner_id
  WHERE x.is_innermost
  GROUP BY ALL
), copies AS (
  SELECT o.* EXCLUDE (src_numel, dst_numel, dst_dtype),
         coalesce(o.dst_dtype, s.dst_dtype) AS dst_dtype,
         coalesce(s.src_numel, o.src_numel) AS src_numel,
         coalesce(s.dst_numel, o.dst_numel) AS dst_numel,
         CASE WHEN s.event_id IS NULL THEN o.src_numel * o.src_elem ELSE s.src_bytes END AS src_bytes,
         CASE WHEN s.event_id IS NULL THEN o.dst_numel * o.dst_elem ELSE s.dst_bytes END AS dst_bytes
  FROM ops o LEFT JOIN inner_sums s USING (run_id, event_id)
  WHERE o.always_copies OR s.event_id IS NOT NULL
), gpu AS (
  -- GPU work whose launching runtime call was made by the op itself or by a copy op inside it
  SELECT n.run_id, n.outer_id AS event_id, sum(w.dur_ns) AS gpu_dur_ns
  FROM (SELECT run_id, event_id AS outer_id, event_id AS inner_id FROM copies
        UNION ALL SELECT run_id, outer_id, inner_id FROM inside) n
  JOIN device_work() w
       ON w.run_id = n.run_id AND w.op_event_id = n.inner_id
  GROUP BY ALL
)
SELECT c.run_id, c.event_id, c.name AS op_name, c.dims, c.dst_dims, c.src_dtype, c.dst_dtype,
       c.src_numel::BIGINT AS src_numel, c.dst_numel::BIGINT AS dst_numel, c.src_bytes::BIGINT AS src_bytes,
       c.dst_bytes::BIGINT AS dst_bytes, (c.src_bytes + c.dst_bytes)::BIGINT AS bytes,
       c.dur_ns, c.self_dur_ns, g.gpu_dur_ns::BIGINT AS gpu_dur_ns,
       CASE WHEN g.gpu_dur_ns IS NOT NULL THEN 'gpu' ELSE 'cpu' END AS time_basis,
       round((c.src_bytes + c.dst_bytes) / nullif(coalesce(g.gpu_dur_ns, c.dur_ns), 0), 3) AS gb_per_s,
       p.event_id IS NULL AS is_outermost,
       c.parent_op_id, c.call_site, c.module_path, c.step
FROM copies c
LEFT JOIN gpu g USING (run_id, event_id)
LEFT JOIN copies p ON p.run_id = c.run_id AND p.event_id = c.parent_op_id;

-- Outermost copies and casts (`tensor_copies` WHERE is_outermost) grouped per run by call site,
-- op, source dims and dtypes: calls, bytes and time of each group (reports copies-by-call-site and
-- overview).
-- @summary
-- @columns-as tensor_copies: run_id, call_site, op_name, dims, src_dtype, dst_dtype
-- @column calls BIGINT Calls in the group.
-- @column calls_in_steps BIGINT Calls inside a profiler step.
-- @column steps_with BIGINT Profiler steps with at least one call.
-- @column bytes_per_call BIGINT Largest bytes moved by one call.
-- @column total_bytes BIGINT Bytes moved by all calls.
-- @column total_dur_ns BIGINT Summed inclusive CPU duration, ns.
-- @column total_gpu_dur_ns BIGINT Summed GPU time of the work the calls launched, ns (NULL when none).
-- @column calls_with_gpu BIGINT Calls with GPU work linked.
CREATE OR REPLACE MACRO copy_groups_of(skip_runs := []::VARCHAR[]) AS TABLE
SELECT run_id, call_site, op_name, dims, src_dtype, dst_dtype,
       count(*) AS calls, count(step) AS calls_in_steps, count(DISTINCT step) AS steps_with,
       max(bytes) AS bytes_per_call, sum(bytes)::BIGINT AS total_bytes, sum(dur_ns)::BIGINT AS total_dur_ns,
       sum(gpu_dur_ns)::BIGINT AS total_gpu_dur_ns, count(gpu_dur_ns) AS calls_with_gpu
FROM tensor_copies
WHERE is_outermost AND run_id NOT IN (SELECT unnest(skip_runs))
GROUP BY run_id, call_site, op_name, dims, src_dtype, dst_dtype;

