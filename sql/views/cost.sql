-- requires: reference, cpu, gpu, copies, communication
-- The cost of an op: FLOPs and minimum bytes moved, from its input dims, dtypes and `Concrete
-- Inputs`, against its GPU time; and the peak throughput of the device that ran it. Each formula is
-- a macro below with its source. Integer math is done in HUGEINT so that a huge product cannot
-- overflow a query; a division never divides by zero (nullif).

-- Number of elements of a dims list (1 for [], the dims of a 0-dim tensor), as HUGEINT.
-- @arg d BIGINT[] The dims of a tensor.
CREATE OR REPLACE MACRO dims_numel(d) AS list_reduce(list_transform(d, lambda x: x::HUGEINT), lambda a, b: a * b, 1::HUGEINT);

-- Shape of the result of an elementwise op on tensors of dims a and b, by broadcasting: dims are
-- aligned from the right and a dim of 1 stretches to the other's (PyTorch docs, "Broadcasting
-- semantics", https://pytorch.org/docs/stable/notes/broadcasting.html).
-- @arg a BIGINT[] The dims of one tensor.
-- @arg b BIGINT[] The dims of the other.
CREATE OR REPLACE MACRO broadcast_dims(a, b) AS list_transform(range(1, greatest(len(a), len(b)) + 1), lambda i:
  CASE WHEN i + len(a) - greatest(len(a), len(b)) < 1 THEN b[i + len(b) - greatest(len(a), len(b))]
       WHEN i + len(b) - greatest(len(a), len(b)) < 1 THEN a[i + len(a) - greatest(len(a), len(b))]
       WHEN a[i + len(a) - greatest(len(a), len(b))] = 1 THEN b[i + len(b) - greatest(len(a), len(b))]
       ELSE a[i + len(a) - greatest(len(a), len(b))] END);

-- The integers of a `Concrete Inputs` entry: '[1, 1]' -> [1, 1], '2' -> [2]; NULL for anything else.
-- @arg c VARCHAR A `Concrete Inputs` entry (shapes.concrete).
CREATE OR REPLACE MACRO concrete_ints(c) AS coalesce(TRY_CAST(c AS BIGINT[]),
  CASE WHEN TRY_CAST(c AS BIGINT) IS NOT NULL THEN [TRY_CAST(c AS BIGINT)] END);

-- A boolean `Concrete Inputs` entry ('True', 'False', '1', '0'); NULL when not recorded or not a boolean.
-- @arg c VARCHAR A `Concrete Inputs` entry (shapes.concrete).
CREATE OR REPLACE MACRO concrete_bool(c) AS CASE lower(trim(c)) WHEN 'true' THEN true WHEN 'false' THEN false
  WHEN '1' THEN true WHEN '0' THEN false END;

-- The i-th entry of a conv parameter list given for every spatial dim or once for all (stride=[2] or [2, 2]).
-- @arg l BIGINT[] The parameter's list (stride, padding, dilation or output_padding).
-- @arg i BIGINT The spatial dim, 1-based.
CREATE OR REPLACE MACRO conv_param(l, i) AS CASE WHEN len(l) = 1 THEN l[1] ELSE l[i] END;

-- FLOPs of `batch` matrix products [m, k] x [k, n]: 2*m*k*n each (a multiply and an add per term),
-- plus m*n for a bias added to each result when has_bias. torch counts no bias: torch.utils.flop_counter
-- (mm_flop, bmm_flop; addmm_flop and baddbmm_flop return the product's count alone) and the
-- profiler's computeFlops (aten::addmm, aten::baddbmm: 2*m*k*n), so op_cost's flops passes false;
-- TraceLens PerfModel GEMM.flops_func adds m*n for addmm, baddbmm and a linear with a bias
-- (op_cost's flops_with_bias passes has_bias).
-- @arg batch HUGEINT Matrix products (1 for mm, addmm, linear).
-- @arg m BIGINT Rows of A and of the result.
-- @arg k BIGINT Columns of A, rows of B.
-- @arg n BIGINT Columns of B and of the result.
-- @arg has_bias BOOLEAN True when a bias is added to each result (addmm, baddbmm, linear with bias).
CREATE OR REPLACE MACRO gemm_flops(batch, m, k, n, has_bias) AS
  2 * batch * m * k * n + CASE WHEN has_bias THEN batch * m * n ELSE 0 END;

-- Output length of a convolution along one spatial dim: floor((x + 2p - d(k-1) - 1) / s) + 1
-- (PyTorch docs, torch.nn.Conv1d/2d/3d, "Shape").
-- @arg x BIGINT Input length along the dim.
-- @arg k BIGINT Kernel length along the dim.
-- @arg s BIGINT Stride.
-- @arg p BIGINT Padding.
-- @arg d BIGINT Dilation.
CREATE OR REPLACE MACRO conv_out_len(x, k, s, p, d) AS (x + 2 * p - d * (k - 1) - 1) // nullif(s, 0) + 1;

-- Output length of a transposed convolution along one spatial dim: (x-1)s - 2p + d(k-1) + output_padding + 1
-- (PyTorch docs, torch.nn.ConvTranspose1d/2d/3d, "Shape").
-- @arg x BIGINT Input length along the dim.
-- @arg k BIGINT Kernel length along the dim.
-- @arg s BIGINT Stride.
-- @arg p BIGINT Padding.
-- @arg d BIGINT Dilation.
-- @arg op BIGINT Output padding.
CREATE OR REPLACE MACRO conv_transpose_out_len(x, k, s, p, d, op) AS (x - 1) * s - 2 * p + d * (k - 1) + op + 1;

-- FLOPs of a convolution: 2 * batch * prod(weight dims) * prod(spatial dims of the output), for a
-- transposed one of the input (torch.utils.flop_counter.conv_flop_count: "Computation for bias are
-- ignored", so op_cost's flops passes has_bias false); plus one add per output element for a bias
-- when has_bias (TraceLens PerfModel CONV.flops_func; op_cost's flops_with_bias).
-- @arg n BIGINT Batch size (1 for an unbatched input).
-- @arg weight_numel HUGEINT Elements of the weight.
-- @arg spatial_numel HUGEINT Elements of one channel of the output (of the input, for a transposed convolution).
-- @arg out_numel HUGEINT Elements of the output.
-- @arg has_bias BOOLEAN True when a bias is added.
CREATE OR REPLACE MACRO conv_flops(n, weight_numel, spatial_numel, out_numel, has_bias) AS
  2 * n * weight_numel * spatial_numel + CASE WHEN has_bias THEN out_numel ELSE 0 END;

-- FLOPs of attention softmax(Q K^T) V over bh (batch x query heads) rows: 2*Sq*Sk*Dqk for Q K^T
-- and 2*Sq*Sk*Dv for P V, i.e. 4*B*H*Sq*Sk*D when Dqk = Dv; a causal mask halves it (FlashAttention's
-- benchmark_flash_attention.py flops(), TraceLens SDPA.flops_func, torch.utils.flop_counter
-- sdpa_flop_count; softmax left out, as in all three). NULL when causal is unknown, and for a causal
-- mask with Sq <> Sk, whose share of the square depends on the alignment: no guess.
-- @arg bh HUGEINT Batch x query heads.
-- @arg sq BIGINT Query length.
-- @arg sk BIGINT Key length.
-- @arg dqk BIGINT Head dim of queries and keys.
-- @arg dv BIGINT Head dim of values.
-- @arg causal BOOLEAN True with a causal mask, NULL when unknown.
CREATE OR REPLACE MACRO attention_flops(bh, sq, sk, dqk, dv, causal) AS
  CASE WHEN causal IS NULL OR (causal AND sq <> sk) THEN NULL
       ELSE 2 * bh * sq * sk * (dqk + dv) // CASE WHEN causal THEN 2 ELSE 1 END END;

-- FLOPs per element of the normalisations: statistics (layer, group and training batch norm:
-- sum and sum of squares, 3; RMS norm: sum of squares, 2), normalising ((x - mean) * rstd, 2; RMS:
-- x * rstd, 1), and one each for a weight and a bias; vLLM's fused_add_rms_norm adds the residual
-- first (1). Eval-mode batch norm only normalises. Counted here, per element, from the definitions
-- in the PyTorch docs (torch.nn.LayerNorm, RMSNorm, BatchNorm2d, GroupNorm).
-- @arg numel HUGEINT Elements of the input.
-- @arg stats INTEGER FLOPs per element of the statistics (0 to 3).
-- @arg normalise INTEGER FLOPs per element of normalising (1 or 2).
-- @arg has_weight BOOLEAN True when a weight scales the result.
-- @arg has_bias BOOLEAN True when a bias is added.
CREATE OR REPLACE MACRO norm_flops(numel, stats, normalise, has_weight, has_bias) AS
  numel * (stats + normalise + CASE WHEN has_weight THEN 1 ELSE 0 END + CASE WHEN has_bias THEN 1 ELSE 0 END);

-- FLOPs of softmax and log_softmax: 5 per element (max, subtract, exp, sum, divide or log).
-- @arg numel HUGEINT Elements of the input.
CREATE OR REPLACE MACRO softmax_flops(numel) AS 5 * numel;

-- Rank of a dtype's kind in type promotion (bool < integer < floating < complex: PyTorch docs,
-- "Type promotion" in torch.result_type), for the result dtype of a binary elementwise op.
-- @arg dtype VARCHAR A torch dtype name, e.g. bfloat16, int64, bool.
CREATE OR REPLACE MACRO dtype_kind_rank(dtype) AS CASE WHEN dtype = 'bool' THEN 0
  WHEN dtype LIKE 'complex%' THEN 3 WHEN dtype LIKE '%float%' OR dtype = 'half' THEN 2 ELSE 1 END;

-- Which formula applies to an op, and its category. Exact names (rows without '%') pick the
-- formula (`model`) and the category; LIKE patterns (rows with '%') give a category only, the most
-- specific (longest) matching pattern winning; ops matching none that are named after a collective
-- (`is_collective_name`) are 'communication', the others 'other'. The rows come from
-- sql/reference/op_categories.csv; a session can add its own (`INSERT INTO op_categories VALUES
-- ('mylib::gelu', 'elementwise', 'unary', 'my op')`): an exact name with a model gets that formula,
-- reading its inputs where `op_signatures` says the model's ops have them (see `op_cost`).
CREATE TABLE IF NOT EXISTS op_categories (
  -- Op name (exact) or a LIKE pattern with '%' (e.g. 'c10d::%').
  pattern VARCHAR,
  -- GEMM, convolution, attention, elementwise, normalisation, reduction, communication, copy or other.
  category VARCHAR,
  -- Formula of `op_cost` for this exact name: gemm, conv, attention, layer_norm, rms_norm, batch_norm, group_norm, softmax, unary, binary, reduction, embedding, gather, copy; NULL for none (and for patterns).
  model VARCHAR,
  -- What the row is about.
  note VARCHAR
);

-- Where the inputs of the ops with a cost formula are, and what their signatures fix: the one
-- definition of op signatures that `op_cost` reads its formulas' arguments by. A row gives one
-- argument of one op (`op`), or of every op of a formula (`model`, `op` NULL) that has no row of
-- its own for that argument: its input position (as shapes.input_index), or a value the signature
-- fixes (conv2d is not transposed; a comparison's result is bool). Arguments by model: gemm a, b
-- (or weight, [n, k]), bias, out_dtype and rank (of both matrices); conv input, weight, bias,
-- stride, padding, dilation, transposed, output_padding, groups; attention query, key, value,
-- layout (bhsd: [.., S, D]; bshd: [B, S, H, D]), attn_mask, is_causal or custom_mask_type,
-- cu_seqlens_q (varlen), window_size_left and _right; the norms input, weight, bias, training,
-- out (written in place of a result), residual (added first, in place); softmax input, dtype or
-- half_to_float; unary input; binary input, other, result_dtype; reduction input, dim, dtype (an
-- overload with the dtype there reduces every dim), other (an overload with it is elementwise),
-- result_dtype; embedding weight, indices; gather input, dim, index. The rows come from
-- sql/reference/op_signatures.csv; a session can add its own.
CREATE TABLE IF NOT EXISTS op_signatures (
  -- Formula (op_categories.model) whose ops the row is for when op is NULL, else NULL.
  model VARCHAR,
  -- Op name (exact), or NULL for the default of every op of model.
  op VARCHAR,
  -- What the input or value is, e.g. 'bias', 'is_causal', 'transposed'.
  argument VARCHAR,
  -- 0-based position of the input (shapes.input_index), NULL when the signature fixes a value instead.
  input INTEGER,
  -- The value the signature fixes (text, as `Concrete Inputs` writes it), NULL for an input.
  value VARCHAR,
  -- The signature, or what the row is about.
  note VARCHAR
);

-- Peak dense throughput of GPUs by name as the trace's deviceProperties spell it (the figures
-- without 2:4 sparsity), from the vendors' public spec pages (`source`). One row per spelling; a row
-- with num_sms matches only devices with that many SMs / CUs (AMD's driver names some parts
-- 'AMD Radeon Graphics', told apart by their CUs). Rows without a name_pattern identify a device the
-- trace does not name (an empty name, as vLLM's traces on MI300X write it) by its properties:
-- compute capability, SM / CU count and memory (MI300X and MI325X differ only in memory); parts that
-- these properties do not tell apart (A100 80GB SXM and PCIe, V100 SXM2 and PCIe) have no such row.
-- AMD's MI250X and MI250 show each of their two dies as one device: their rows hold one die's half
-- of the card's figures. The rows come from sql/reference/device_peaks.csv; a session can add its own.
CREATE TABLE IF NOT EXISTS device_peaks (
  -- The device, e.g. 'H100 SXM'.
  device VARCHAR,
  -- Case-insensitive LIKE pattern on deviceProperties' name, e.g. '%H100%HBM3%'; NULL for a row that identifies the device by its properties.
  name_pattern VARCHAR,
  -- Match only devices with this many SMs (NVIDIA) or CUs (AMD), NULL for any.
  num_sms INTEGER,
  -- Rows without name_pattern: the compute capability (deviceProperties' computeMajor.computeMinor, e.g. '9.4' for AMD's gfx942) a device must have.
  compute_capability VARCHAR,
  -- Rows without name_pattern: the least total memory (deviceProperties' totalGlobalMem) of the device, GiB.
  min_memory_gib DOUBLE,
  -- Rows without name_pattern: the memory the device stays below, GiB.
  max_memory_gib DOUBLE,
  -- Peak dense FP32 TFLOP/s (matrix units where they run FP32, else vector).
  fp32_tflops DOUBLE,
  -- Peak dense TF32 TFLOP/s, NULL where the device has none.
  tf32_tflops DOUBLE,
  -- Peak dense BF16 TFLOP/s.
  bf16_tflops DOUBLE,
  -- Peak dense FP16 TFLOP/s.
  fp16_tflops DOUBLE,
  -- Peak dense FP8 TFLOP/s, NULL where the device has none.
  fp8_tflops DOUBLE,
  -- Peak memory bandwidth, TB/s.
  memory_tbps DOUBLE,
  -- Public page the figures come from.
  source VARCHAR
);

-- The device of each run and its peaks. The run's GPU is the deviceProperties entry whose id is
-- the device its kernels ran on (the one with the most kernel time), else the only entry, else the
-- first when all entries describe the same GPU (a CPU-only run, or a trace that lists one id for
-- another device: SGLang's MI300X trace runs on device 9 and lists id 0 only). Its name is matched
-- against `device_peaks` (a row with num_sms before one without, then the longest pattern); a GPU
-- no name row matches (an empty name) is identified by its properties when exactly one device of
-- the property rows has its compute capability, SM / CU count and memory. Runs without
-- deviceProperties, or with a GPU neither way finds, have NULL peaks.
-- @columns-as runs: run_id
-- @column device_id BIGINT The `id` of the deviceProperties entry used, NULL when none.
-- @column device_name VARCHAR Its name ('' when the trace leaves it empty), NULL when the trace has no entry.
-- @column num_sms INTEGER Its SM (NVIDIA) or CU (AMD) count.
-- @column compute_capability VARCHAR Its computeMajor.computeMinor, e.g. '9.0'.
-- @column memory_gib DOUBLE Its totalGlobalMem, GiB.
-- @column device VARCHAR The matched `device_peaks` device, NULL when none matches.
-- @column identified_by VARCHAR How: 'name' (deviceProperties' name), 'properties' (compute capability, SMs / CUs and memory); NULL when no device matches.
-- @column fp32_tflops DOUBLE Peak dense FP32 TFLOP/s.
-- @column tf32_tflops DOUBLE Peak dense TF32 TFLOP/s.
-- @column bf16_tflops DOUBLE Peak dense BF16 TFLOP/s.
-- @column fp16_tflops DOUBLE Peak dense FP16 TFLOP/s.
-- @column fp8_tflops DOUBLE Peak dense FP8 TFLOP/s.
-- @column memory_tbps DOUBLE Peak memory bandwidth, TB/s.
-- @column source VARCHAR Where the peaks come from.
CREATE OR REPLACE VIEW run_devices AS
WITH entries AS (
  SELECT run_id, pos, TRY_CAST(json_extract(e, '$.id') AS BIGINT) AS id, json_extract_string(e, '$.name') AS name,
         TRY_CAST(json_extract(e, '$.numSms') AS INTEGER) AS num_sms,
         json_extract_string(e, '$.computeMajor') || '.' || json_extract_string(e, '$.computeMinor') AS cc,
         TRY_CAST(json_extract(e, '$.totalGlobalMem') AS DOUBLE) / 2^30 AS memory_gib
  FROM (SELECT run_id, i + 1 AS pos, json_extract(device_properties, '$[' || CAST(i AS VARCHAR) || ']') AS e
        FROM runs, unnest(range(CAST(json_array_length(device_properties) AS BIGINT))) AS t(i) WHERE json_array_length(device_properties) > 0)
), kernel_device AS (
  SELECT run_id, arg_max(device, t) AS device FROM (
    SELECT run_id, device, sum(dur_ns) AS t FROM device_events(['kernel']) GROUP BY run_id, device
  ) GROUP BY run_id
), picked AS (
  SELECT e.run_id, arg_min(e, [CASE WHEN e.id = k.device THEN 0 ELSE 1 END, e.pos]) AS e,
         bool_or(e.id = k.device) AS by_id,
         count(DISTINCT (e.name, e.num_sms, e.cc, e.memory_gib)) AS kinds
  FROM entries e LEFT JOIN kernel_device k USING (run_id)
  GROUP BY e.run_id
), d AS (
  SELECT p.run_id, p.e.id AS device_id, p.e.name AS device_name, p.e.num_sms, p.e.cc AS compute_capability,
         p.e.memory_gib
  FROM picked p WHERE p.by_id OR p.kinds = 1
), by_name AS (
  SELECT d.run_id, arg_max(p, [(p.num_sms IS NOT NULL)::INTEGER, length(p.name_pattern)]) AS p
  FROM d JOIN device_peaks p ON d.device_name ILIKE p.name_pattern AND (p.num_sms IS NULL OR p.num_sms = d.num_sms)
  GROUP BY d.run_id
), by_properties AS (
  SELECT d.run_id, any_value(p) AS p
  FROM d JOIN device_peaks p ON p.name_pattern IS NULL AND p.compute_capability = d.compute_capability
   AND p.num_sms = d.num_sms AND d.memory_gib >= p.min_memory_gib AND d.memory_gib < p.max_memory_gib
  GROUP BY d.run_id HAVING count(DISTINCT p.device) = 1
)
SELECT r.run_id, d.device_id, d.device_name, d.num_sms, d.compute_capability, round(d.memory_gib, 2) AS memory_gib,
       coalesce(n.p.device, pr.p.device) AS device,
       CASE WHEN n.p IS NOT NULL THEN 'name' WHEN pr.p IS NOT NULL THEN 'properties' END AS identified_by,
       coalesce(n.p, pr.p).fp32_tflops AS fp32_tflops, coalesce(n.p, pr.p).tf32_tflops AS tf32_tflops,
       coalesce(n.p, pr.p).bf16_tflops AS bf16_tflops, coalesce(n.p, pr.p).fp16_tflops AS fp16_tflops,
       coalesce(n.p, pr.p).fp8_tflops AS fp8_tflops, coalesce(n.p, pr.p).memory_tbps AS memory_tbps,
       coalesce(n.p, pr.p).source AS source
FROM runs r LEFT JOIN d USING (run_id) LEFT JOIN by_name n USING (run_id) LEFT JOIN by_properties pr USING (run_id);

-- The peak TFLOP/s of a `run_devices` row for an op's dtype: float32 -> FP32 (an fp32 GEMM may run
-- on TF32 units when torch allows it; the trace does not say), bfloat16 -> BF16, float16 -> FP16,
-- float8 types -> FP8; NULL for other dtypes.
-- @arg dtype VARCHAR The op's dtype (torch name).
-- @arg fp32_tflops DOUBLE The device's peak FP32 TFLOP/s.
-- @arg bf16_tflops DOUBLE Its peak BF16 TFLOP/s.
-- @arg fp16_tflops DOUBLE Its peak FP16 TFLOP/s.
-- @arg fp8_tflops DOUBLE Its peak FP8 TFLOP/s.
CREATE OR REPLACE MACRO peak_tflops_for(dtype, fp32_tflops, bf16_tflops, fp16_tflops, fp8_tflops) AS CASE
  WHEN dtype = 'float32' THEN fp32_tflops WHEN dtype = 'bfloat16' THEN bf16_tflops
  WHEN dtype = 'float16' THEN fp16_tflops WHEN dtype LIKE 'float8%' THEN fp8_tflops END;

-- The category and cost formula of every CPU op name in the runs, from `op_categories`: the row
-- of the exact name, else the longest LIKE pattern that matches (category only), else
-- 'communication' for a name named after a collective (`is_collective_name`), else 'other'.
-- @columns-as cpu_ops: name
-- @column category VARCHAR GEMM, convolution, attention, elementwise, normalisation, reduction, communication, copy or other.
-- @column model VARCHAR Cost formula of op_cost for the name, NULL when none.
CREATE OR REPLACE VIEW op_name_categories AS
WITH names AS (
  SELECT DISTINCT name FROM events WHERE is_cpu_op
), by_pattern AS (
  SELECT n.name, arg_max(c.category, length(c.pattern)) AS category
  FROM names n JOIN op_categories c ON contains(c.pattern, '%') AND n.name LIKE c.pattern
  GROUP BY n.name
)
SELECT n.name, coalesce(e.category, p.category, CASE WHEN is_collective_name(n.name) THEN 'communication' END, 'other') AS category,
       e.model
FROM names n
LEFT JOIN (SELECT * FROM op_categories WHERE NOT contains(pattern, '%')) e ON e.pattern = n.name
LEFT JOIN by_pattern p ON p.name = n.name;

-- Each CPU op that made launch calls (the innermost op around a kernel launch, copy, set or graph
-- launch) paired with itself and every op enclosing it: the walk up the op tree that gives an op
-- the GPU time of its whole subtree. op_cost sums eager work over it; the roofline report sums
-- the replayed work of ops captured into CUDA graphs over it (graph_op_time), so that
-- `aten::linear` gets the time of the GEMM its `aten::addmm` launched in both.
-- @columns-as cpu_ops: run_id
-- @column event_id BIGINT The op that made launch calls (`launch_calls.op_event_id`).
-- @column anc_id BIGINT That op itself or an op enclosing it.
CREATE OR REPLACE VIEW launch_op_ancestors AS
WITH RECURSIVE tree AS MATERIALIZED (
  SELECT run_id, event_id, parent_op_id FROM events WHERE is_cpu_op
), up(run_id, event_id, anc_id) AS (
  SELECT DISTINCT run_id, op_event_id, op_event_id FROM launch_calls WHERE op_event_id IS NOT NULL
  UNION ALL
  SELECT u.run_id, u.event_id, t.parent_op_id FROM up u JOIN tree t ON t.run_id = u.run_id AND t.event_id = u.anc_id
  WHERE t.parent_op_id IS NOT NULL
)
SELECT run_id, event_id, anc_id FROM up;

-- One row per CPU op that recorded shapes, with its FLOPs and the minimum bytes its math reads and
-- writes (each tensor input read once, each output written once), from its dims, dtypes and
-- `Concrete Inputs`, and its GPU time. The formula (`model`) is chosen by the op's exact name in
-- `op_categories`; flops is NULL when no formula applies or an input it needs is missing (never a
-- guess); bytes-only formulas (copies, embedding, index_select) have flops 0. Formulas by model:
-- gemm (mm, addmm, bmm, baddbmm, matmul with broadcast batch dims, linear, _scaled_mm: gemm_flops;
-- bytes A + B + bias + output), conv (conv1d/2d/3d, conv_transpose1d/2d/3d, convolution,
-- _convolution, with stride/padding/dilation/groups/output_padding from Concrete Inputs:
-- conv_flops), conv_backward (convolution_backward: grad_input and grad_weight as torch's
-- conv_backward_flop, by output_mask), attention (scaled_dot_product_attention, the flash/efficient/cuDNN SDPA ops,
-- _flash_attention_forward, _efficient_attention_forward, flash_attn::_flash_attn_forward:
-- attention_flops; varlen and sliding-window calls are not modelled; bytes Q + K + V + mask + output),
-- layer_norm / rms_norm / batch_norm / group_norm (norm_flops; bytes inputs + output), softmax
-- (softmax_flops), unary (1 FLOP per element; bytes in + out), binary (1 FLOP per element of the
-- broadcast result; comparisons write bool; in-place ops write their first input), reduction (1 FLOP
-- per input element; output from the dims reduced), embedding and gather (index_select: indices +
-- rows read + rows written), copy (bytes of `tensor_copies`). gpu_dur_ns sums the kernels,
-- device-to-device copies and sets launched from inside the op's subtree (the op and every op nested
-- in it), so `aten::linear` gets the time of the GEMM its `aten::addmm` launched; copies to or from
-- the host or another device are left out (the link bounds them, not the GPU's memory). Nested ops are all listed: sum rows with
-- is_counted (the outermost op with a cost on its thread; its formula covers the ops inside it) to
-- count each GEMM once.
-- @columns-as cpu_ops: run_id, event_id
-- @column op_name VARCHAR Op name, e.g. aten::addmm.
-- @columns-as op_name_categories: category
-- @column model VARCHAR Formula used (gemm, conv, conv_backward, attention, layer_norm, rms_norm, batch_norm, group_norm, softmax, unary, binary, reduction, embedding, gather, copy), NULL when none applies.
-- @column input_dims VARCHAR Dims of every input, as in top-ops.
-- @column dtype VARCHAR Dtype the math runs in: the first matrix's (GEMM), the input's (others), the source's (copies).
-- @column flops BIGINT Floating-point operations of one call, as torch counts them (torch.utils.flop_counter, the profiler's computeFlops: no bias term for addmm, baddbmm, linear or convolutions, no grad_bias); NULL when no formula applies or an input it needs is missing; 0 for bytes-only formulas.
-- @column flops_with_bias BIGINT flops plus one add per output element for a bias (GEMMs and convolutions with a bias, a convolution backward's grad_bias), as TraceLens's PerfModel counts; equal to flops for the other formulas.
-- @column bytes BIGINT Minimum bytes read and written by the op's math; NULL when unknown.
-- @column gpu_dur_ns BIGINT GPU time of the kernels, device-to-device memcpys and memsets launched from inside the op's subtree, ns; NULL when none.
-- @column tflops_per_s DOUBLE Achieved TFLOP/s: flops / gpu_dur_ns / 1000.
-- @column tb_per_s DOUBLE Achieved TB/s: bytes / gpu_dur_ns / 1000.
-- @column intensity DOUBLE Arithmetic intensity, FLOPs per byte.
-- @column is_counted BOOLEAN True for the outermost op with a cost (flops or bytes) on its thread: sum these to count nested ops once.
-- @columns-as cpu_ops: parent_op_id, call_site, step
CREATE OR REPLACE VIEW op_cost AS
WITH RECURSIVE op_formulas AS MATERIALIZED (
  -- every CPU op with its formula
  SELECT o.run_id, o.event_id, o.name, o.parent_op_id, o.call_site, o.step, coalesce(n.category, 'other') AS category,
         n.model
  FROM cpu_ops o LEFT JOIN op_name_categories n ON n.name = o.name
), dtype_codes AS (
  -- the element size of each ScalarType code (how `Concrete Inputs` writes a dtype argument)
  SELECT DISTINCT scalar_type, torch_name, elem_bytes FROM dtypes WHERE scalar_type IS NOT NULL
), signatures AS (
  -- each op's arguments (`op_signatures`): its own rows, else its model's; input positions 1-based,
  -- as in `ins`; the element size of a result dtype the signature fixes
  SELECT s.*, TRY_CAST(s.rank_value AS INTEGER) AS rank,
         (SELECT c.elem_bytes FROM dtype_codes c WHERE c.torch_name = s.result_dtype) AS result_eb
  FROM (
    SELECT name,
           max(arg_pos) FILTER (WHERE arg_name = 'a') AS a, max(arg_pos) FILTER (WHERE arg_name = 'b') AS b,
           max(arg_pos) FILTER (WHERE arg_name = 'weight') AS weight,
           max(arg_pos) FILTER (WHERE arg_name = 'bias') AS bias,
           max(arg_pos) FILTER (WHERE arg_name = 'out_dtype') AS out_dtype,
           max(arg_pos) FILTER (WHERE arg_name = 'input') AS input,
           max(arg_pos) FILTER (WHERE arg_name = 'stride') AS stride,
           max(arg_pos) FILTER (WHERE arg_name = 'padding') AS padding,
           max(arg_pos) FILTER (WHERE arg_name = 'dilation') AS dilation,
           max(arg_pos) FILTER (WHERE arg_name = 'groups') AS groups,
           max(arg_pos) FILTER (WHERE arg_name = 'transposed') AS transposed,
           max(arg_pos) FILTER (WHERE arg_name = 'output_padding') AS output_padding,
           max(arg_pos) FILTER (WHERE arg_name = 'query') AS query,
           max(arg_pos) FILTER (WHERE arg_name = 'key') AS key,
           max(arg_pos) FILTER (WHERE arg_name = 'value') AS value,
           max(arg_pos) FILTER (WHERE arg_name = 'attn_mask') AS attn_mask,
           max(arg_pos) FILTER (WHERE arg_name = 'is_causal') AS is_causal,
           max(arg_pos) FILTER (WHERE arg_name = 'custom_mask_type') AS custom_mask_type,
           max(arg_pos) FILTER (WHERE arg_name = 'cu_seqlens_q') AS cu_seqlens_q,
           max(arg_pos) FILTER (WHERE arg_name = 'window_size_left') AS window_size_left,
           max(arg_pos) FILTER (WHERE arg_name = 'window_size_right') AS window_size_right,
           max(arg_pos) FILTER (WHERE arg_name = 'training') AS training,
           max(arg_pos) FILTER (WHERE arg_name = 'out') AS out,
           max(arg_pos) FILTER (WHERE arg_name = 'grad_output') AS grad_output,
           max(arg_pos) FILTER (WHERE arg_name = 'output_mask') AS output_mask,
           max(arg_pos) FILTER (WHERE arg_name = 'residual') AS residual,
           max(arg_pos) FILTER (WHERE arg_name = 'dtype') AS dtype,
           max(arg_pos) FILTER (WHERE arg_name = 'half_to_float') AS half_to_float,
           max(arg_pos) FILTER (WHERE arg_name = 'other') AS other,
           max(arg_pos) FILTER (WHERE arg_name = 'dim') AS dim,
           max(arg_pos) FILTER (WHERE arg_name = 'indices') AS indices,
           max(arg_pos) FILTER (WHERE arg_name = 'index') AS index,
           max(arg_fixed) FILTER (WHERE arg_name = 'rank') AS rank_value,
           max(arg_fixed) FILTER (WHERE arg_name = 'transposed') AS transposed_value,
           max(arg_fixed) FILTER (WHERE arg_name = 'output_padding') AS output_padding_value,
           max(arg_fixed) FILTER (WHERE arg_name = 'layout') AS layout,
           max(arg_fixed) FILTER (WHERE arg_name = 'result_dtype') AS result_dtype
    FROM (
      SELECT n.name, g.argument AS arg_name, g.input + 1 AS arg_pos, g.value AS arg_fixed
      FROM (SELECT DISTINCT name, model FROM op_formulas WHERE model IS NOT NULL) n
      JOIN op_signatures g ON g.op = n.name OR (g.op IS NULL AND g.model = n.model)
      QUALIFY rank() OVER (PARTITION BY n.name, g.argument ORDER BY g.op IS NULL) = 1
    )
    GROUP BY name
  ) s
), shaped_ops AS MATERIALIZED (
  -- the ops with a formula that recorded shapes, and their inputs in order (put in the order of their
  -- positions by list_grade_up, as op_inputs); the other ops' inputs are read only where asked for (the last SELECT)
  SELECT o.run_id, o.event_id, any_value(o.name) AS name, any_value(o.parent_op_id) AS parent_op_id,
         any_value(o.call_site) AS call_site, any_value(o.step) AS step, any_value(o.category) AS category,
         any_value(o.model) AS model,
         list_select(list({'i': s.input_index, 'dims': s.dims, 'dtype': s.dtype, 'numel': s.numel::HUGEINT,
                           'eb': s.elem_bytes, 'bytes': s.bytes::HUGEINT, 'c': s.concrete}),
                     list_grade_up(list(s.input_index))) AS ins,
         ins[1].dtype AS first_dtype,  -- the op's dtype where its formula gives none
         sum(s.bytes)::HUGEINT AS in_bytes
  FROM op_formulas o JOIN shapes s ON s.run_id = o.run_id AND s.event_id = o.event_id AND s.member_index IS NULL
  WHERE o.model IS NOT NULL
  GROUP BY o.run_id, o.event_id
),
-- GEMM family: the matrices A [.., m, k] and B [k, n] (or a weight [n, k], as linear's), a bias
gemm_inputs AS (
  -- the matrices, the bias and the element size of an out_dtype argument, where the signature has them
  SELECT run_id, event_id, name, ins, sig.rank, sig.weight IS NOT NULL AS is_nk,
         ins[sig.a] AS a, ins[coalesce(sig.weight, sig.b)] AS b, ins[sig.bias] AS bias,
         (SELECT c.elem_bytes FROM dtype_codes c WHERE c.scalar_type = TRY_CAST(ins[sig.out_dtype].c AS INTEGER)) AS out_dtype_eb
  FROM shaped_ops LEFT JOIN signatures sig USING (name) WHERE model = 'gemm'
), gemm_dims AS (
  -- m, k and n (k of A, kb of B: equal when the shapes fit), the batch, and the result's element size
  SELECT g.*,
         CASE WHEN is_nk THEN a.dims[len(a.dims)] WHEN len(a.dims) = 0 THEN NULL
              ELSE a.dims[len(a.dims)] END AS k,
         CASE WHEN is_nk THEN (CASE WHEN len(b.dims) = 2 THEN b.dims[2] END)
              WHEN len(b.dims) = 1 THEN b.dims[1] WHEN len(b.dims) >= 2 THEN b.dims[len(b.dims) - 1] END AS kb,
         CASE WHEN is_nk THEN a.numel // nullif(a.dims[len(a.dims)], 0)
              WHEN len(a.dims) = 1 THEN 1 ELSE a.dims[len(a.dims) - 1] END AS m,
         CASE WHEN is_nk THEN (CASE WHEN len(b.dims) = 2 THEN b.dims[1] END)
              WHEN len(b.dims) = 1 THEN 1 ELSE b.dims[len(b.dims)] END AS n,
         CASE WHEN is_nk THEN 1::HUGEINT
              ELSE dims_numel(broadcast_dims(CASE WHEN len(a.dims) > 2 THEN a.dims[1:len(a.dims) - 2] ELSE [] END,
                                             CASE WHEN len(b.dims) > 2 THEN b.dims[1:len(b.dims) - 2] ELSE [] END)) END AS batch,
         CASE WHEN rank = 2 THEN len(a.dims) = 2 AND len(b.dims) = 2
              WHEN rank = 3 THEN len(a.dims) = 3 AND len(b.dims) = 3 AND a.dims[1] = b.dims[1]
              WHEN is_nk THEN len(a.dims) >= 1 AND len(b.dims) = 2
              ELSE len(a.dims) >= 1 AND len(b.dims) >= 1 END AS fits,
         bias.dtype IS NOT NULL AS has_bias,
         coalesce(out_dtype_eb, a.eb) AS out_eb
  FROM gemm_inputs g
), gemm_costs AS (
  -- FLOPs and bytes of the GEMMs whose shapes fit
  SELECT run_id, event_id, 'gemm' AS model, a.dtype,
         CASE WHEN fits AND k = kb AND a.dtype IS NOT NULL THEN gemm_flops(batch, m, k, n, false) END AS flops,
         CASE WHEN fits AND k = kb AND a.dtype IS NOT NULL THEN gemm_flops(batch, m, k, n, has_bias) END AS flops_with_bias,
         CASE WHEN fits AND k = kb THEN a.bytes + b.bytes + CASE WHEN has_bias THEN bias.bytes ELSE 0 END + batch * m * n * out_eb END AS bytes
  FROM gemm_dims
),
-- convolutions: input [n, c, spatial..] (or unbatched [c, spatial..]), weight [c_out, c_in/groups, k..]
-- (transposed: [c_in, c_out/groups, k..]), bias, and the parameters where each signature has them
conv_inputs AS (
  -- the tensors and the parameters as written
  SELECT run_id, event_id, name, ins[sig.input] AS x, ins[sig.weight] AS w, ins[sig.bias] AS bias,
         ins[sig.stride].c AS stride_c, ins[sig.padding].c AS pad_c, ins[sig.dilation].c AS dil_c,
         CASE WHEN sig.transposed IS NOT NULL THEN concrete_bool(ins[sig.transposed].c)
              ELSE concrete_bool(sig.transposed_value) END AS transposed,
         CASE WHEN sig.output_padding IS NOT NULL THEN ins[sig.output_padding].c ELSE sig.output_padding_value END AS outpad_c,
         ins[sig.groups].c AS groups_c
  FROM shaped_ops LEFT JOIN signatures sig USING (name) WHERE model = 'conv'
), conv_params AS (
  -- the parameters as numbers, and the number of spatial dims (nd)
  SELECT *, len(w.dims) - 2 AS nd, len(x.dims) = len(w.dims) AS batched,
         concrete_ints(stride_c) AS s, concrete_ints(dil_c) AS d, concrete_ints(outpad_c) AS op,
         CASE WHEN pad_c ILIKE '%valid%' THEN [0] ELSE concrete_ints(pad_c) END AS p,
         pad_c ILIKE '%same%' AS is_same, TRY_CAST(groups_c AS BIGINT) AS groups
  FROM conv_inputs
), conv_outputs AS (
  -- the batch size, the spatial dims of the input (xs) and of the output (os), and the output channels
  SELECT *, CASE WHEN batched THEN x.dims[1] ELSE 1 END AS n,
         x.dims[len(x.dims) - nd + 1:len(x.dims)] AS xs,
         list_transform(range(1, nd + 1), lambda i: CASE
           WHEN transposed THEN conv_transpose_out_len(x.dims[len(x.dims) - nd + i], w.dims[2 + i], conv_param(s, i),
                                                       conv_param(p, i), conv_param(d, i), conv_param(op, i))
           WHEN is_same THEN x.dims[len(x.dims) - nd + i]
           ELSE conv_out_len(x.dims[len(x.dims) - nd + i], w.dims[2 + i], conv_param(s, i), conv_param(p, i), conv_param(d, i)) END) AS os,
         CASE WHEN transposed THEN w.dims[2] * TRY_CAST(groups_c AS BIGINT) ELSE w.dims[1] END AS c_out
  FROM conv_params
  WHERE nd >= 1 AND (batched OR len(x.dims) = nd + 1)
), conv_costs AS (
  -- FLOPs and bytes of the convolutions whose parameters are all known
  SELECT run_id, event_id, 'conv' AS model, x.dtype,
         conv_flops(n, w.numel, dims_numel(CASE WHEN transposed THEN xs ELSE os END), n * c_out * dims_numel(os),
                    false)::HUGEINT AS flops,
         conv_flops(n, w.numel, dims_numel(CASE WHEN transposed THEN xs ELSE os END), n * c_out * dims_numel(os),
                    bias.dtype IS NOT NULL)::HUGEINT AS flops_with_bias,
         x.bytes + w.bytes + coalesce(bias.bytes, 0) + n * c_out * dims_numel(os) * x.eb AS bytes
  FROM conv_outputs
  WHERE transposed IS NOT NULL AND groups IS NOT NULL AND s IS NOT NULL AND d IS NOT NULL
    AND (p IS NOT NULL OR is_same) AND (op IS NOT NULL OR NOT transposed)
    AND list_bool_and(list_transform(os, lambda v: v > 0))
),
-- convolution backward (torch.utils.flop_counter.conv_backward_flop): grad_input (output_mask[0]) costs
-- what the forward convolution costs; grad_weight (output_mask[1]) is counted as torch counts it, a
-- convolution over the full input channels: the forward's cost times groups; grad_bias (output_mask[2])
-- is not counted (TraceLens's CONV.flops_bwd_func adds one FLOP per grad_output element for it:
-- flops_with_bias). An output_mask not recorded counts all three. The forward's output spatial dims
-- are grad_output's (its input's for a transposed convolution)
conv_backward_inputs AS (
  -- grad_output, input, weight, transposed, groups and output_mask as written
  SELECT run_id, event_id, ins[sig.grad_output] AS g, ins[sig.input] AS x, ins[sig.weight] AS w,
         concrete_bool(ins[sig.transposed].c) AS transposed, TRY_CAST(ins[sig.groups].c AS BIGINT) AS groups,
         list_transform(string_split(trim(coalesce(ins[sig.output_mask].c, ''), '[] '), ','), lambda v: concrete_bool(v)) AS mask
  FROM shaped_ops LEFT JOIN signatures sig USING (name) WHERE model = 'conv_backward'
), conv_backward_costs AS (
  -- FLOPs and bytes: grad_output, input and weight read; the gradients asked for written
  SELECT run_id, event_id, 'conv_backward' AS model, x.dtype,
         (CASE WHEN coalesce(mask[1], true) THEN 1 ELSE 0 END + CASE WHEN coalesce(mask[2], true) THEN groups ELSE 0 END)
           * conv_flops(g.dims[1], w.numel, dims_numel((CASE WHEN transposed THEN x.dims ELSE g.dims END)[3:]), 0, false)
           AS flops,
         (CASE WHEN coalesce(mask[1], true) THEN 1 ELSE 0 END + CASE WHEN coalesce(mask[2], true) THEN groups ELSE 0 END)
           * conv_flops(g.dims[1], w.numel, dims_numel((CASE WHEN transposed THEN x.dims ELSE g.dims END)[3:]), 0, false)
           + CASE WHEN coalesce(mask[3], true) THEN g.numel ELSE 0 END AS flops_with_bias,
         g.bytes + x.bytes + w.bytes + CASE WHEN coalesce(mask[1], true) THEN x.bytes ELSE 0 END
           + CASE WHEN coalesce(mask[2], true) THEN w.bytes ELSE 0 END
           + CASE WHEN coalesce(mask[3], true) THEN g.dims[2] * g.eb ELSE 0 END AS bytes
  FROM conv_backward_inputs
  WHERE transposed IS NOT NULL AND groups IS NOT NULL AND len(g.dims) >= 3 AND len(g.dims) = len(x.dims)
    AND len(w.dims) = len(x.dims)
),
-- attention: q, k, v in [.., S, D] (SDPA) or [B, S, H, D] (flash / efficient forward, flash_attn);
-- the causal flag, a mask or bias, a varlen marker (cu_seqlens given) and flash_attn's window, where
-- each signature has them
attention_inputs AS (
  -- q, k, v, the layout, the causal flag, the mask, and whether the call is varlen or windowed
  SELECT run_id, event_id, name, ins[sig.query] AS q, ins[sig.key] AS k, ins[sig.value] AS v,
         coalesce(sig.layout = 'bshd', false) AS is_bshd,
         CASE WHEN sig.is_causal IS NOT NULL THEN concrete_bool(ins[sig.is_causal].c)
              WHEN sig.custom_mask_type IS NOT NULL THEN TRY_CAST(ins[sig.custom_mask_type].c AS INTEGER) <> 0 END AS causal,
         ins[sig.attn_mask] AS mask,
         CASE WHEN sig.cu_seqlens_q IS NOT NULL THEN ins[sig.cu_seqlens_q].dtype IS NOT NULL ELSE false END AS is_varlen,
         CASE WHEN sig.window_size_left IS NOT NULL OR sig.window_size_right IS NOT NULL THEN
                coalesce(TRY_CAST(ins[sig.window_size_left].c AS BIGINT), -1) <> -1
                OR coalesce(TRY_CAST(ins[sig.window_size_right].c AS BIGINT), -1) <> -1
              ELSE false END AS is_windowed
  FROM shaped_ops LEFT JOIN signatures sig USING (name) WHERE model = 'attention'
), attention_lengths AS (
  -- sequence lengths and head dims, of the calls that are modelled (neither varlen nor windowed)
  SELECT *,
         CASE WHEN is_bshd THEN q.dims[2] ELSE q.dims[len(q.dims) - 1] END AS sq,
         CASE WHEN is_bshd THEN k.dims[2] ELSE k.dims[len(k.dims) - 1] END AS sk,
         q.dims[len(q.dims)] AS dqk, v.dims[len(v.dims)] AS dv
  FROM attention_inputs
  WHERE NOT is_varlen AND NOT is_windowed AND (CASE WHEN is_bshd THEN len(q.dims) = 4 AND len(k.dims) = 4 AND len(v.dims) = 4
                                                    ELSE len(q.dims) >= 2 AND len(k.dims) >= 2 AND len(v.dims) >= 2 END)
), attention_costs AS (
  -- FLOPs and bytes of attention
  SELECT run_id, event_id, 'attention' AS model, q.dtype,
         attention_flops(q.numel // nullif(sq * dqk, 0), sq, sk, dqk, dv, causal) AS flops,
         q.bytes + k.bytes + v.bytes + CASE WHEN mask.dtype IS NOT NULL THEN mask.bytes ELSE 0 END
           + q.numel // nullif(dqk, 0) * dv * q.eb AS bytes
  FROM attention_lengths
),
-- normalisations: the input x, weight and bias where each signature has them, and what the op
-- writes: a result of x's size, nothing more when it writes into an output it takes (out, counted
-- in its inputs), x and the residual when it adds the residual in place
norm_inputs AS (
  -- x, weight, bias, the training flag and the bytes written
  SELECT run_id, event_id, name, model, in_bytes, sig.residual IS NOT NULL AS adds_residual,
         ins[sig.input] AS x, ins[sig.weight] AS w, ins[sig.bias] AS b,
         concrete_bool(ins[sig.training].c) AS training,
         CASE WHEN sig.out IS NOT NULL THEN 0::HUGEINT WHEN sig.residual IS NOT NULL THEN ins[sig.input].bytes + ins[sig.residual].bytes
              ELSE ins[sig.input].bytes END AS written
  FROM shaped_ops LEFT JOIN signatures sig USING (name) WHERE model IN ('layer_norm', 'rms_norm', 'batch_norm', 'group_norm')
), norm_costs AS (
  -- FLOPs and bytes of the normalisations
  SELECT run_id, event_id, model, x.dtype,
         CASE WHEN x.dtype IS NULL THEN NULL
              WHEN model IN ('layer_norm', 'group_norm') THEN norm_flops(x.numel, 3, 2, w.dtype IS NOT NULL, b.dtype IS NOT NULL)
              WHEN model = 'rms_norm' THEN norm_flops(x.numel, 2 + CASE WHEN adds_residual THEN 1 ELSE 0 END, 1,
                                                      w.dtype IS NOT NULL, false)
              WHEN training THEN norm_flops(x.numel, 3, 2, w.dtype IS NOT NULL, b.dtype IS NOT NULL)
              WHEN NOT training THEN norm_flops(x.numel, 0, 2, w.dtype IS NOT NULL, b.dtype IS NOT NULL) END AS flops,
         in_bytes + written AS bytes
  FROM norm_inputs
),
-- softmax and log_softmax: the result takes float32 when half_to_float is set, or the dtype argument
softmax_inputs AS (
  -- the input, and half_to_float or the dtype argument where the signature has them
  SELECT run_id, event_id, model, ins[sig.input] AS x, ins[sig.half_to_float].c AS half_to_float_c, ins[sig.dtype].c AS dtype_c,
         sig.half_to_float IS NOT NULL AS has_half_to_float
  FROM shaped_ops LEFT JOIN signatures sig USING (name) WHERE model = 'softmax'
), softmax_costs AS (
  -- FLOPs and bytes of softmax: the result's element size from half_to_float, the dtype argument or the input
  SELECT run_id, event_id, model, x.dtype,
         CASE WHEN x.dtype IS NOT NULL THEN softmax_flops(x.numel) END AS flops,
         x.bytes + x.numel * CASE
           WHEN has_half_to_float THEN
             CASE WHEN concrete_bool(half_to_float_c) THEN 4 WHEN NOT concrete_bool(half_to_float_c) OR x.eb = 4 THEN x.eb END
           ELSE coalesce((SELECT c.elem_bytes FROM dtype_codes c WHERE c.scalar_type = TRY_CAST(dtype_c AS INTEGER)),
                         CASE WHEN dtype_c = '' OR x.eb = 4 THEN x.eb END) END AS bytes
  FROM softmax_inputs
),
-- elementwise: unary ops read and write x once; binary ops broadcast their two inputs (a scalar
-- argument reads nothing), comparisons and logical ops write bool, in-place ops write their first input
unary_costs AS (
  -- FLOPs and bytes of unary ops: one FLOP per element
  SELECT run_id, event_id, model, ins[sig.input].dtype AS dtype,
         CASE WHEN ins[sig.input].dtype IS NOT NULL THEN ins[sig.input].numel END AS flops, 2 * ins[sig.input].bytes AS bytes
  FROM shaped_ops LEFT JOIN signatures sig USING (name) WHERE model = 'unary'
), binary_inputs AS (
  -- the two inputs and the dims of the result
  SELECT run_id, event_id, name, ins[sig.input] AS a, ins[sig.other] AS b, sig.result_eb,
         suffix(name, '_') AS is_inplace,
         CASE WHEN suffix(name, '_') THEN ins[sig.input].dims
              ELSE broadcast_dims(ins[sig.input].dims, coalesce(ins[sig.other].dims, [])) END AS out_dims
  FROM shaped_ops LEFT JOIN signatures sig USING (name) WHERE model = 'binary'
), binary_costs AS (
  -- FLOPs and bytes of binary ops: the result's element size by type promotion
  SELECT run_id, event_id, 'binary' AS model, a.dtype,
         CASE WHEN a.dtype IS NOT NULL THEN dims_numel(out_dims) END AS flops,
         a.bytes + coalesce(b.bytes, 0) + dims_numel(out_dims) * CASE
           WHEN result_eb IS NOT NULL THEN result_eb WHEN is_inplace OR b.dtype IS NULL THEN a.eb
           WHEN len(b.dims) = 0 AND len(a.dims) > 0 AND dtype_kind_rank(b.dtype) <= dtype_kind_rank(a.dtype) THEN a.eb
           WHEN len(a.dims) = 0 AND len(b.dims) > 0 AND dtype_kind_rank(a.dtype) <= dtype_kind_rank(b.dtype) THEN b.eb
           WHEN dtype_kind_rank(a.dtype) <> dtype_kind_rank(b.dtype) THEN
             CASE WHEN dtype_kind_rank(a.dtype) > dtype_kind_rank(b.dtype) THEN a.eb ELSE b.eb END
           ELSE greatest(a.eb, b.eb) END AS bytes
  FROM binary_inputs WHERE a.dtype IS NOT NULL
),
-- reductions: the dims reduced come from the dim argument ('' or [] = every dim; overloads without
-- one reduce everything: the input alone, or the input and a dtype); max/min with a second tensor
-- are elementwise, not reductions
reduction_inputs AS (
  -- the input, the dim argument ('' for every dim) and the result's element size
  SELECT run_id, event_id, name, ins[sig.input] AS x,
         len(ins) = 1 OR len(ins) = sig.dtype AS reduces_every_dim,  -- an overload without a dim argument
         CASE WHEN reduces_every_dim THEN '' ELSE ins[sig.dim].c END AS dim_c,
         coalesce(sig.result_eb, ins[sig.input].eb) AS out_eb
  FROM shaped_ops LEFT JOIN signatures sig USING (name) WHERE model = 'reduction' AND NOT coalesce(ins[sig.other].dtype IS NOT NULL, false)
), reduced_dims AS (
  -- the dims reduced
  SELECT *, CASE WHEN trim(dim_c) IN ('', '[]') OR len(x.dims) = 0 THEN x.dims
                 ELSE list_transform(concrete_ints(dim_c), lambda i: x.dims[CASE WHEN i < 0 THEN i + len(x.dims) + 1 ELSE i + 1 END]) END AS reduced
  FROM reduction_inputs
), reduction_costs AS (
  -- FLOPs and bytes of reductions: one FLOP per input element
  SELECT run_id, event_id, 'reduction' AS model, x.dtype,
         CASE WHEN x.dtype IS NOT NULL THEN x.numel END AS flops,
         x.bytes + x.numel // nullif(dims_numel(reduced), 0) * out_eb AS bytes
  FROM reduced_dims
),
-- gathers, bytes only: the indices, and the rows read and written
gather_inputs AS (
  -- the tensor gathered from, the indices and the dim
  SELECT run_id, event_id, model, ins[coalesce(sig.weight, sig.input)] AS x, ins[coalesce(sig.indices, sig.index)] AS i,
         TRY_CAST(ins[sig.dim].c AS BIGINT) AS dim
  FROM shaped_ops LEFT JOIN signatures sig USING (name) WHERE model IN ('embedding', 'gather')
), gather_costs AS (
  -- bytes of the gathers
  SELECT run_id, event_id, model, x.dtype, 0::HUGEINT AS flops,
         CASE WHEN model = 'embedding' AND len(x.dims) = 2 THEN i.bytes + 2 * i.numel * x.dims[2] * x.eb
              WHEN model = 'gather' AND dim IS NOT NULL THEN
                i.bytes + 2 * (x.numel // nullif(x.dims[(dim + len(x.dims)) % greatest(len(x.dims), 1) + 1], 0)) * i.numel * x.eb END AS bytes
  FROM gather_inputs
),
-- copies: what `tensor_copies` says each moves
copy_costs AS (
  -- bytes of the copy ops
  SELECT t.run_id, t.event_id, 'copy' AS model, t.src_dtype AS dtype, 0::HUGEINT AS flops, t.bytes::HUGEINT AS bytes
  FROM tensor_copies t
  WHERE EXISTS (SELECT 1 FROM shaped_ops s WHERE s.run_id = t.run_id AND s.event_id = t.event_id AND s.model = 'copy')
), costs AS MATERIALIZED (
  -- every formula's FLOPs and bytes, one row per op with a formula
  SELECT run_id, event_id, model, dtype, flops::HUGEINT AS flops, flops_with_bias::HUGEINT AS flops_with_bias,
         bytes::HUGEINT AS bytes FROM gemm_costs
  UNION ALL BY NAME SELECT * FROM conv_costs UNION ALL BY NAME SELECT * FROM conv_backward_costs
  UNION ALL BY NAME SELECT * FROM attention_costs UNION ALL BY NAME SELECT * FROM norm_costs
  UNION ALL BY NAME SELECT * FROM softmax_costs UNION ALL BY NAME SELECT * FROM unary_costs UNION ALL BY NAME SELECT * FROM binary_costs
  UNION ALL BY NAME SELECT * FROM reduction_costs UNION ALL BY NAME SELECT * FROM gather_costs UNION ALL BY NAME SELECT * FROM copy_costs
),
-- GPU time of each op's subtree: work launched by an op counts for it and every op around it.
-- Copies between host and device or between devices are left out: the link bounds them, not the
-- GPU's memory, so they have no place on its roofline
direct_gpu AS (
  -- the GPU time of the work each op launched itself
  SELECT run_id, op_event_id AS event_id, sum(dur_ns) AS dur_ns
  FROM device_work()
  WHERE op_event_id IS NOT NULL AND (work_kind <> 'memcpy' OR name LIKE 'Memcpy DtoD%')
  GROUP BY ALL
), subtree_gpu AS (
  -- the GPU time of the work launched from inside each op's subtree
  SELECT u.run_id, u.anc_id AS event_id, sum(d.dur_ns) AS gpu_dur_ns
  FROM launch_op_ancestors u JOIN direct_gpu d USING (run_id, event_id) GROUP BY ALL
),
-- ops with a cost that another op with a cost encloses (not counted)
op_tree AS MATERIALIZED (
  -- the parent of every CPU op
  SELECT run_id, event_id, parent_op_id FROM events WHERE is_cpu_op
), costed_ops AS MATERIALIZED (
  -- the ops with a cost (flops or bytes)
  SELECT c.run_id, c.event_id, o.parent_op_id FROM costs c JOIN shaped_ops o USING (run_id, event_id)
  WHERE c.flops IS NOT NULL OR c.bytes IS NOT NULL
), costed_ancestors(run_id, event_id, anc_id) AS (
  -- every op around each op with a cost
  SELECT run_id, event_id, parent_op_id FROM costed_ops WHERE parent_op_id IS NOT NULL
  UNION ALL
  SELECT a.run_id, a.event_id, t.parent_op_id FROM costed_ancestors a JOIN op_tree t ON t.run_id = a.run_id AND t.event_id = a.anc_id
  WHERE t.parent_op_id IS NOT NULL
), enclosed AS (
  -- the ops with a cost that one of those encloses
  SELECT DISTINCT a.run_id, a.event_id FROM costed_ancestors a JOIN costed_ops c ON c.run_id = a.run_id AND c.event_id = a.anc_id
)
-- the ops with a formula
SELECT o.run_id, o.event_id, o.name AS op_name, o.category, c.model,
       list_transform(o.ins, lambda x: x.dims)::VARCHAR AS input_dims,
       coalesce(c.dtype, o.first_dtype) AS dtype,
       TRY_CAST(c.flops AS BIGINT) AS flops, TRY_CAST(coalesce(c.flops_with_bias, c.flops) AS BIGINT) AS flops_with_bias,
       TRY_CAST(c.bytes AS BIGINT) AS bytes,
       g.gpu_dur_ns::BIGINT AS gpu_dur_ns,
       c.flops / nullif(g.gpu_dur_ns, 0) / 1e3 AS tflops_per_s,
       c.bytes / nullif(g.gpu_dur_ns, 0) / 1e3 AS tb_per_s,
       c.flops / nullif(c.bytes, 0) AS intensity,
       (c.flops IS NOT NULL OR c.bytes IS NOT NULL) AND e.event_id IS NULL AS is_counted,
       o.parent_op_id, o.call_site, o.step
FROM shaped_ops o
LEFT JOIN costs c USING (run_id, event_id)
LEFT JOIN subtree_gpu g USING (run_id, event_id)
LEFT JOIN enclosed e USING (run_id, event_id)
UNION ALL
-- the ops without one: no cost, never counted (a filter on is_counted skips this part)
SELECT o.run_id, o.event_id, o.name, o.category, NULL, i.input_dims_text, i.input_dtypes[1], NULL, NULL, NULL,
       g.gpu_dur_ns::BIGINT, NULL, NULL, NULL, false, o.parent_op_id, o.call_site, o.step
FROM op_formulas o JOIN op_inputs i ON i.run_id = o.run_id AND i.event_id = o.event_id
LEFT JOIN subtree_gpu g ON g.run_id = o.run_id AND g.event_id = o.event_id
WHERE o.model IS NULL;
