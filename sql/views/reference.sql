-- Macros over event names: the one definition of each pattern, used by the views and by ingest
-- (which finds step_windows with step_number and step_marker_family). The vocabularies that are lists rather than
-- patterns are reference tables: their rows are the CSV files of sql/reference (one per table),
-- loaded into every connection and read by ingest too.

-- N of a `ProfilerStep#N` name, the annotation `prof.step()` writes around each profiler step;
-- NULL for any other name (and for N beyond BIGINT).
-- @arg name VARCHAR An event name.
CREATE OR REPLACE MACRO step_number(name) AS TRY_CAST(regexp_extract(name, '^ProfilerStep#(\d+)$', 1) AS BIGINT);

-- The family of a step marker: 'profiler_step' for `ProfilerStep#N`; 'sglang' for SGLang's
-- `step[MODE bs=N ...]` (`step[DECODE bs=32]`, `step[EXTEND bs=4 toks=2048]`, `step[PREFILL ...]`);
-- 'vllm' for vLLM's `execute_<tokens>_context_<n>(...)_generation_<m>(...)`; NULL for any other
-- name. Ingest takes a run's steps from the first family present in this order (unless given a
-- pattern of its own, `ingest --step-marker`).
-- @arg name VARCHAR An event name.
CREATE OR REPLACE MACRO step_marker_family(name) AS CASE
  WHEN step_number(name) IS NOT NULL THEN 'profiler_step'
  WHEN regexp_matches(name, '^step\[[A-Z_]+( [^\]]*)?\]$') THEN 'sglang'
  WHEN regexp_matches(name, '^execute_\d+_context_\d+.*_generation_\d+') THEN 'vllm' END;

-- The phase of an inference step from its marker's name: 'prefill', 'decode' or 'mixed'. SGLang:
-- DECODE is decode, EXTEND and PREFILL are prefill, MIXED is mixed (other modes NULL). vLLM: from
-- its request counts, context > 0 and generation > 0 mixed, only context prefill, only generation
-- decode. NULL for other markers (ProfilerStep#N).
-- @arg name VARCHAR A step marker's name (steps.marker).
CREATE OR REPLACE MACRO step_marker_phase(name) AS CASE
  WHEN regexp_matches(name, '^step\[DECODE[ \]]') THEN 'decode'
  WHEN regexp_matches(name, '^step\[(EXTEND|PREFILL)[ \]]') THEN 'prefill'
  WHEN regexp_matches(name, '^step\[MIXED[ \]]') THEN 'mixed'
  WHEN regexp_matches(name, '^execute_\d+_context_[1-9]\d*.*_generation_[1-9]') THEN 'mixed'
  WHEN regexp_matches(name, '^execute_\d+_context_[1-9]\d*.*_generation_0+\b') THEN 'prefill'
  WHEN regexp_matches(name, '^execute_\d+_context_0+\b.*_generation_[1-9]') THEN 'decode' END;

-- The batch size a step marker carries: SGLang's bs=N; vLLM's context plus generation requests.
-- NULL when the name carries none.
-- @arg name VARCHAR A step marker's name (steps.marker).
CREATE OR REPLACE MACRO step_marker_batch_size(name) AS coalesce(
  TRY_CAST(regexp_extract(name, '^step\[[A-Z_]+ [^\]]*\bbs=(\d+)', 1) AS BIGINT),
  TRY_CAST(regexp_extract(name, '^execute_\d+_context_(\d+)', 1) AS BIGINT)
    + TRY_CAST(regexp_extract(name, '^execute_\d+_context_\d+.*_generation_(\d+)', 1) AS BIGINT));

-- The tokens a step marker carries: SGLang's toks=M; vLLM's scheduled tokens (execute_<tokens>_...).
-- NULL when the name carries none (SGLang writes no toks= for DECODE: one token per request).
-- @arg name VARCHAR A step marker's name (steps.marker).
CREATE OR REPLACE MACRO step_marker_tokens(name) AS coalesce(
  TRY_CAST(regexp_extract(name, '^step\[[A-Z_]+ [^\]]*\btoks=(\d+)', 1) AS BIGINT),
  TRY_CAST(regexp_extract(name, '^execute_(\d+)_context_\d+.*_generation_\d+', 1) AS BIGINT));

-- True for a runtime/driver call that starts device work: kernel and graph launches
-- (cudaLaunchKernel, cuLaunchKernelEx, hipExtModuleLaunchKernel, cudaGraphLaunch,
-- urEnqueueKernelLaunch, ...), async copies and sets (cudaMemcpyAsync, cudaMemsetAsync,
-- urEnqueueUSMMemcpy, XPU's urEnqueueUSMFill and piextUSMEnqueueFill, MTIA's enqueueCommand
-- memcpyHtoDAsync) and MTIA's kernel submission (runFunction - job_prep_and_submit_for_execution).
-- A macro, not a table of patterns: DuckDB compiles a constant pattern once, a pattern read from a
-- table once per row.
-- @arg name VARCHAR Name of a runtime or driver call.
CREATE OR REPLACE MACRO is_launch_call_name(name) AS regexp_matches(name, '(?i)(launch|memcpy|memset|usm(enqueue)?fill)|^runFunction\b');

-- True for a runtime/driver call that blocks the calling CPU thread until device work is done:
-- stream, device, event and context synchronization (cudaStreamSynchronize,
-- cudaDeviceSynchronize, cudaEventSynchronize, cuCtxSynchronize, hip* alike, MTIA's synchronize
-- and synchronizeStream) and synchronous copies (cudaMemcpy, cudaMemcpy2D/3D, cudaMemcpyPeer,
-- cudaMemcpyToSymbol/FromSymbol, hipMemcpy, hipMemcpyWithStream; not the *Async ones: those return
-- at once). torch's .item(), .cpu(), .tolist() and non_blocking=False copies end in one of these.
-- @arg name VARCHAR Name of a runtime or driver call.
CREATE OR REPLACE MACRO is_sync_call_name(name) AS regexp_matches(name,
  '^((cuda|hip)(Stream|Device|Event|Ctx|Thread)?Synchronize|cu(Ctx|Stream|Event)Synchronize|(cuda|hip)Memcpy(2D|3D|Peer|WithStream|ToSymbol|FromSymbol)?|synchronize(Stream)?)$');

-- True for the launch of a captured CUDA/HIP graph (one call, many kernels).
-- @arg name VARCHAR Name of a runtime or driver call.
CREATE OR REPLACE MACRO is_graph_launch_name(name) AS regexp_matches(name, 'GraphLaunch');

-- What a runtime/driver call named `name` starts, the one classifier of launch calls: NULL when
-- it is not a launch call (is_launch_call_name), else 'graph' for a graph launch
-- (is_graph_launch_name), 'host_func' for a host function launch (cudaLaunchHostFunc: a host
-- node, no device work), then the device work kind (`event_categories.kind`) it starts: 'memcpy'
-- for async copies (cudaMemcpyAsync, hipMemcpyAsync, urEnqueueUSMMemcpy), 'memset' for sets and
-- fills (cudaMemsetAsync, urEnqueueUSMFill), 'kernel' for every other launch.
-- @arg name VARCHAR Name of a runtime or driver call.
CREATE OR REPLACE MACRO launch_call_kind(name) AS
  CASE WHEN is_launch_call_name(name) THEN
    CASE WHEN is_graph_launch_name(name) THEN 'graph'
         WHEN regexp_matches(name, 'HostFunc') THEN 'host_func'
         WHEN regexp_matches(name, '(?i)memcpy') THEN 'memcpy'
         WHEN regexp_matches(name, '(?i)memset|fill') THEN 'memset'
         ELSE 'kernel' END
  END;

-- True for a runtime call that records an event on a stream or makes a stream wait for one
-- (cudaEventRecord, cudaEventRecordWithFlags, cudaStreamWaitEvent, hip* alike): the calls behind
-- Kineto's `Stream Wait Event` records, which the critical path follows across streams.
-- @arg name VARCHAR Name of a runtime call.
CREATE OR REPLACE MACRO is_stream_event_call_name(name) AS
  name IN ('cudaStreamWaitEvent', 'cudaEventRecord', 'cudaEventRecordWithFlags', 'hipStreamWaitEvent', 'hipEventRecord',
           'hipEventRecordWithFlags');

-- True for a runtime call that makes a stream wait for an event recorded on another
-- (cudaStreamWaitEvent, hipStreamWaitEvent).
-- @arg name VARCHAR Name of a runtime call.
CREATE OR REPLACE MACRO is_stream_wait_call_name(name) AS name IN ('cudaStreamWaitEvent', 'hipStreamWaitEvent');

-- 'begin' for a call that starts capturing a stream into a CUDA/HIP graph
-- (cudaStreamBeginCapture, hipStreamBeginCapture), 'end' for one that ends it
-- (cudaStreamEndCapture, ...), else NULL.
-- @arg name VARCHAR Name of a runtime call.
CREATE OR REPLACE MACRO graph_capture_call(name) AS
  CASE WHEN regexp_matches(name, 'StreamBeginCapture') THEN 'begin' WHEN regexp_matches(name, 'StreamEndCapture') THEN 'end' END;

-- Chrome trace event phases (`ph`, Google's Trace Event Format), each with what ingest and export
-- do with its events; phases not listed are kept and counted in runs.warnings. An event nests
-- (events.parent_id, depth, self_dur_ns, stack_id) when its phase puts it on its thread's stack:
-- complete events (X), duration begins (B), instants (i, I) and samples (P); counters (C)
-- are per-process tracks, async events (b, n, e and the legacy S, T, p, F) have tracks of their own,
-- and a duration end (E) only closes its B. A window export (--step, --start/--end) picks the
-- events of timeline phases by their time: every phase but metadata (M) and flows (s, t, f), which
-- it picks for the events they describe. Ingest reads the same rows (sql/reference/trace_phases.csv).
CREATE TABLE IF NOT EXISTS trace_phases (
  -- The phase letter as written in `ph`.
  phase VARCHAR,
  -- What its events are: duration, complete, instant, counter, async, flow, sample, object, metadata, memory_dump, mark, clock_sync or context.
  kind VARCHAR,
  -- True when its events nest on their thread (parent_id, depth, self time, Python stack).
  nests BOOLEAN,
  -- True when a window export picks its events by their time (all but metadata and flows).
  is_timeline BOOLEAN,
  -- The phase in words, as the Trace Event Format names it.
  name VARCHAR
);

-- Event categories: every spelling of `cat` that PyTorch's profiler (Kineto) writes, 2021 on
-- (legacy Operator, Runtime, Kernel, Memcpy, Memset included), and a few of other tracers, with
-- what their events are. Ingest reads the same rows: events of is_device categories get
-- events.on_device and nest apart from CPU threads; is_op events are the CPU ops
-- (events.is_cpu_op). The views select runtime calls (is_runtime) and device work (kernel,
-- memcpy, memset) by these rows, for every backend: CUDA, ROCm, XPU, PrivateUse1 and MTIA write
-- their device work under the same categories. Categories not listed are kept and counted in
-- runs.warnings. The rows come from sql/reference/event_categories.csv, each with the flags of
-- its kind in sql/reference/event_kinds.csv (one source).
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
-- marked is_tensor = false. torch_name is the one spelling of a dtype in traceduck: shapes.dtype
-- and every view and report use it. The rows come from traceduck's dtype table, dtypes.py (one source).
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
