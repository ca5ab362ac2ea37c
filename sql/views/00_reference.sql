-- Element types: every Kineto `Input type` name seen in real traces and every c10::ScalarType
-- code (as written in `Concrete Inputs`, e.g. the dtype argument of aten::to), with element sizes.
-- Non-tensor entries (Scalar, ScalarList, TensorList, GenericList, Int, Bool, Double, '') are
-- marked is_tensor = false. torch_name is the one spelling of a dtype in traceduck: shapes.dtype
-- and every view and report use it. The rows come from traceduck's Python dtype table (one source).
CREATE TABLE IF NOT EXISTS dtypes (
  -- Kineto type name (`Input type`), e.g. 'c10::BFloat16', 'float', 'long int'; NULL for a code with no Kineto name.
  type_name VARCHAR,
  -- c10::ScalarType code (15 = bfloat16, 24 = float8_e4m3fn, ...), NULL when the name has none.
  scalar_type INTEGER,
  -- The torch dtype name without `torch.`: bfloat16, float8_e4m3fn, float32, int64, ... (NULL for non-tensor entries).
  torch_name VARCHAR,
  -- Bytes per element; NULL for non-tensor entries.
  elem_bytes INTEGER,
  -- True for tensor element types, false for Scalar, TensorList, '' and other non-tensor markers.
  is_tensor BOOLEAN,
  -- c10::ScalarType name as printed in args such as a collective's `dtype`: Float, BFloat16, Long, ...
  scalar_type_name VARCHAR
);
