-- The copy and cast ops that tensor_copies lists, and which of their inputs is the source.
-- aten::copy_(self, src) lists the destination first; aten::index_copy_(self, dim, index, source)
-- has its source fourth; the others copy their first input.
CREATE TABLE IF NOT EXISTS copy_ops (
  -- Op name, e.g. aten::copy_.
  name VARCHAR,
  -- 0-based input position of the source tensor.
  source_input INTEGER,
  -- 0-based input position of the destination tensor, NULL when the op allocates its result.
  dest_input INTEGER,
  -- True when the op's `Concrete Inputs` carry the target dtype as a ScalarType code (aten::to, aten::_to_copy).
  has_dtype_arg BOOLEAN
);

-- Every tensor copy or cast op (aten::copy_, aten::to, aten::_to_copy, aten::clone,
-- aten::contiguous, aten::index_copy_, ...) with the source tensor's dims, source and destination
-- dtypes and bytes moved (read + written: numel x (source + destination element size); the first
-- seed's 857 MB per layer is this for [495552, 1, 576] fp8 -> bf16). Nested copies
-- (to -> _to_copy -> copy_) are all listed: sum only rows with is_outermost to avoid double counting.
-- @column run_id VARCHAR Run of the op.
-- @column event_id BIGINT The op event.
-- @column op_name VARCHAR Op name.
-- @column dims BIGINT[] Dims of the source tensor.
-- @column src_dtype VARCHAR Source dtype (torch name, e.g. float8_e4m3fn).
-- @column dst_dtype VARCHAR Destination dtype: the destination input's, else the dtype argument's ScalarType code, else the enclosing copy's, else the source's.
-- @column numel BIGINT Elements copied.
-- @column src_bytes BIGINT Bytes read: numel x source element size.
-- @column dst_bytes BIGINT Bytes written: numel x destination element size.
-- @column bytes BIGINT Bytes moved: src_bytes + dst_bytes.
-- @column dur_ns BIGINT Inclusive duration of the op, ns.
-- @column self_dur_ns BIGINT Self time of the op, ns.
-- @column is_outermost BOOLEAN True when no enclosing op is a copy op (sum these to avoid double counting).
-- @column parent_op_id BIGINT Innermost enclosing CPU op.
-- @column call_site VARCHAR Innermost user frame of the op's Python stack.
-- @column module_path VARCHAR nn.Module chain of the op's Python stack.
-- @column step BIGINT Profiler step whose window contains the op.
CREATE OR REPLACE VIEW tensor_copies AS
WITH c AS (
  SELECT o.*, k.source_input, k.dest_input, k.has_dtype_arg
  FROM cpu_ops o JOIN copy_ops k ON k.name = o.name
), typed AS (
  SELECT c.*, src.dims, src.numel, sd.torch_name AS src_dtype, sd.elem_bytes AS src_elem,
         dd.torch_name AS dest_input_dtype, dd.elem_bytes AS dest_input_elem,
         TRY_CAST(arg.concrete AS INTEGER) AS dtype_code
  FROM c
  LEFT JOIN shapes src ON src.run_id = c.run_id AND src.event_id = c.event_id
       AND src.input_index = c.source_input AND src.member_index IS NULL
  LEFT JOIN dtypes sd ON sd.type_name = src.dtype
  LEFT JOIN shapes dst ON dst.run_id = c.run_id AND dst.event_id = c.event_id
       AND dst.input_index = c.dest_input AND dst.member_index IS NULL
  LEFT JOIN dtypes dd ON dd.type_name = dst.dtype
  LEFT JOIN shapes arg ON c.has_dtype_arg AND arg.run_id = c.run_id AND arg.event_id = c.event_id
       AND arg.input_index = 1 AND arg.member_index IS NULL
), resolved AS (
  SELECT t.*, code.torch_name AS code_dtype, code.elem_bytes AS code_elem
  FROM typed t LEFT JOIN (SELECT DISTINCT scalar_type, torch_name, elem_bytes FROM dtypes WHERE scalar_type IS NOT NULL) code
       ON code.scalar_type = t.dtype_code
), with_parent AS (
  SELECT r.*, p.name AS parent_op_name, pc.dest_dtype_guess AS parent_dst_dtype, pc.dest_elem_guess AS parent_dst_elem
  FROM resolved r
  LEFT JOIN (SELECT run_id, event_id, name FROM events WHERE is_cpu_op) p
    ON p.run_id = r.run_id AND p.event_id = r.parent_op_id
  LEFT JOIN (SELECT run_id, event_id, coalesce(dest_input_dtype, code_dtype) AS dest_dtype_guess,
                    CASE WHEN dest_input_dtype IS NOT NULL THEN dest_input_elem ELSE code_elem END AS dest_elem_guess
             FROM resolved) pc ON pc.run_id = r.run_id AND pc.event_id = r.parent_op_id
)
SELECT run_id, event_id, name AS op_name, dims, src_dtype,
       coalesce(dest_input_dtype, code_dtype, parent_dst_dtype, src_dtype) AS dst_dtype,
       numel,
       numel * src_elem AS src_bytes,
       numel * coalesce(CASE WHEN dest_input_dtype IS NOT NULL THEN dest_input_elem END, code_elem, parent_dst_elem, src_elem) AS dst_bytes,
       numel * src_elem + numel * coalesce(CASE WHEN dest_input_dtype IS NOT NULL THEN dest_input_elem END, code_elem, parent_dst_elem, src_elem) AS bytes,
       dur_ns, self_dur_ns,
       parent_op_name IS NULL OR parent_op_name NOT IN (SELECT name FROM copy_ops) AS is_outermost,
       parent_op_id, call_site, module_path, step
FROM with_parent;
