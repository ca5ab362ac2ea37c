-- Macros over event names, built from traceduck's Python vocabulary (the same patterns ingest
-- uses) and defined in every connection before these files run:
--   step_number(name): N of a 'ProfilerStep#N' name (regex ^ProfilerStep#(\d+)$), else NULL;
--     step_windows (at ingest) and `steps` find the profiler steps with it.
--   is_launch_call_name(name): a runtime/driver call that starts device work: kernel and graph
--     launches, async copies and sets (XPU's USM fills too), MTIA's runFunction
--     (regex (?i)(launch|memcpy|memset|usm(enqueue)?fill)|^runFunction\b).
--   is_graph_launch_name(name): a CUDA/HIP graph launch (regex GraphLaunch).

-- Event categories: every spelling of `cat` that PyTorch's profiler (Kineto) writes, 2021 on
-- (legacy Operator, Runtime, Kernel, Memcpy, Memset included), and a few of other tracers, with
-- what their events are. Ingest reads the same rows: events of is_device categories get
-- events.on_device and nest apart from CPU threads; is_op events are the CPU ops
-- (events.is_cpu_op). The views select runtime calls (is_runtime) and device work (kernel,
-- memcpy, memset) by these rows, for every backend: CUDA, ROCm, XPU, PrivateUse1 and MTIA write
-- their device work under the same categories. Categories not listed are kept and counted in
-- runs.warnings.
CREATE TABLE IF NOT EXISTS event_categories (
  -- The category exactly as written in `cat` (matching is case-sensitive: legacy 'Kernel' is its own row).
  category VARCHAR,
  -- What its events are: op, annotation, python, instant, runtime, sync, kernel, memcpy, memset, device_annotation, flow, counter, profiler, metadata or other.
  kind VARCHAR,
  -- True when its events run on a device (kind kernel, memcpy, memset or device_annotation): events.on_device.
  is_device BOOLEAN,
  -- True for device work (kind kernel, memcpy or memset): what gpu_kernels, gpu_memcpys, gpu_memsets and activity count.
  is_device_work BOOLEAN,
  -- True for host runtime and driver calls (kind runtime); those named like a launch are `launch_calls`.
  is_runtime BOOLEAN,
  -- True for CPU operators (kind op): events.is_cpu_op, except names matching annotation_name_like.
  is_op BOOLEAN,
  -- Names of this category LIKE this pattern are record_function annotations, not ops ('%#%' for legacy Operator), else NULL.
  annotation_name_like VARCHAR,
  -- True when a ProfilerStep#N event of this category opens a profiler step's window (kind annotation or op).
  is_step_marker BOOLEAN,
  -- Who writes the category, e.g. 'Kineto 2021 (old name of cpu_op)'.
  origin VARCHAR
);

-- Element types: every Kineto `Input type` name seen in real traces and every c10::ScalarType
-- code (as written in `Concrete Inputs`, e.g. the dtype argument of aten::to), with element sizes.
-- Non-tensor entries (Scalar, ScalarList, TensorList, GenericList, Int, Bool, Double, '') are
-- marked is_tensor = false. The rows come from traceduck's Python dtype table (one source).
CREATE TABLE IF NOT EXISTS dtypes (
  -- Kineto type name (`Input type`), e.g. 'c10::BFloat16', 'float', 'long int'; NULL for a code with no Kineto name.
  type_name VARCHAR,
  -- c10::ScalarType code (15 = bfloat16, 24 = float8_e4m3fn, ...), NULL when the name has none.
  scalar_type INTEGER,
  -- The torch dtype name: bfloat16, float8_e4m3fn, float32, int64, ... (NULL for non-tensor entries).
  torch_name VARCHAR,
  -- Bytes per element; NULL for non-tensor entries.
  elem_bytes INTEGER,
  -- True for tensor element types, false for Scalar, TensorList, '' and other non-tensor markers.
  is_tensor BOOLEAN,
  -- c10::ScalarType name as printed in args such as a collective's `dtype`: Float, BFloat16, Long, ...
  scalar_type_name VARCHAR
);
