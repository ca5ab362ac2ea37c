-- The store's tables. Each run (one ingested trace file) writes one Parquet file per table under
-- STORE/runs/<run_id>/<table>.parquet; the views of the same names read all runs at once.
-- A comment block above each table and a comment above each column documents it; traceduck
-- pushes these into DuckDB's catalog (COMMENT ON), so `traceduck schema` and any client see them.

-- One row per ingested trace file: where it came from, its top-level metadata, and what ingest saw.
CREATE TABLE runs (
  -- Id of the run: a hash of the trace file's bytes (re-ingesting the same bytes is a no-op).
  run_id VARCHAR,
  -- Human name of the run (default: the file name without .json/.json.gz).
  name VARCHAR,
  -- Free key=value labels given at ingest (`--label job=run42`); query as labels['job'].
  labels MAP(VARCHAR, VARCHAR),
  -- Absolute path of the ingested file.
  source_path VARCHAR,
  -- Size of the ingested file in bytes, as stored on disk (compressed size for .json.gz).
  source_bytes BIGINT,
  -- Number of events in the trace's traceEvents array (= rows in `events` for this run; items that are not objects are skipped, see warnings).
  event_count BIGINT,
  -- Rank of this trace in a distributed job (distributedInfo.rank, else from the file name), or NULL.
  rank BIGINT,
  -- World size of the job (distributedInfo.world_size), or NULL.
  world_size BIGINT,
  -- baseTimeNanoseconds of the trace (0 when absent); ts_ns = base_time_ns + ts * 1000.
  base_time_ns BIGINT,
  -- Earliest event start in the run, ns (metadata events excluded).
  start_ns BIGINT,
  -- Latest event end in the run, ns (metadata events excluded).
  end_ns BIGINT,
  -- Layout of the file: 'object' (Kineto: {..., "traceEvents": [...]}) or 'array' (legacy top-level array).
  trace_format VARCHAR,
  -- schemaVersion of the trace, or NULL.
  schema_version BIGINT,
  -- traceName of the trace, or NULL.
  trace_name VARCHAR,
  -- distributedInfo of the trace as JSON text, or NULL.
  distributed_info VARCHAR,
  -- deviceProperties of the trace as JSON text, or NULL.
  device_properties VARCHAR,
  -- Every top-level key except traceEvents, in file order, as a JSON object text (for export).
  metadata_json VARCHAR,
  -- Position of traceEvents among the top-level keys (0-based; for export).
  events_key_index BIGINT,
  -- Number of pairs of events on one track that partially overlap (A.ts < B.ts < A.end < B.end).
  overlap_count BIGINT,
  -- How many of those pairs include a CPU op (the rest are record_function annotations and Python frames, whose enter/exit calls interleave by design); an op that partially overlaps another event has a suspect nesting and self time.
  op_overlap_count BIGINT,
  -- Counts of recoverable oddities seen while ingesting, by kind: repaired strings, trailing commas, odd field types, unknown phases or categories, missing ts/dur, integers beyond int64, overlaps, a salvage cut, an empty traceEvents, items of traceEvents that are not objects (skipped; the key lists their 0-based positions among the items, the first 20).
  warnings MAP(VARCHAR, BIGINT),
  -- True when the trace was truncated or damaged and `ingest --salvage` kept only the complete events before the cut.
  salvaged BOOLEAN,
  -- When the run was ingested (UTC).
  ingested_at TIMESTAMP,
  -- traceduck version that wrote the run.
  tool_version VARCHAR,
  -- Version of the stored tables' layout the run was written in (what columns mean, not only which exist); a traceduck that reads another layout refuses the run, to be re-ingested.
  layout_version INTEGER,
  -- Wall seconds the ingest took.
  ingest_seconds DOUBLE
);

-- One row per event of traceEvents, in file order. Times are exact integer nanoseconds.
CREATE TABLE events (
  -- Run the event belongs to.
  run_id VARCHAR,
  -- 0-based position of the event in traceEvents, counting objects only (items that are not objects are skipped and take no id).
  event_id BIGINT,
  -- Chrome phase (ph): X complete, i/I instant, s/f flow start/end, M metadata, C counter, B/E begin/end.
  phase VARCHAR,
  -- Category (cat): cpu_op, python_function, kernel, cuda_runtime, ... (NULL when absent).
  category VARCHAR,
  -- Event name.
  name VARCHAR,
  -- Process id as text (GPU events: the device). Numeric strings and numbers give the same text.
  pid VARCHAR,
  -- Thread id as text (GPU events: the stream).
  tid VARCHAR,
  -- True when pid was a JSON string, false when a number, NULL when absent or of another type.
  pid_is_text BOOLEAN,
  -- True when tid was a JSON string, false when a number, NULL when absent or of another type.
  tid_is_text BOOLEAN,
  -- Absolute start time, ns: base_time_ns + ts(us) * 1000, exact.
  ts_ns BIGINT,
  -- Duration, ns (NULL when the event has no dur).
  dur_ns BIGINT,
  -- Innermost event on the same track (pid, tid; device tracks apart) whose span contains this one.
  parent_id BIGINT,
  -- dur_ns minus the durations of the direct children (events with this parent_id), never below 0; NULL without dur.
  self_dur_ns BIGINT,
  -- Nesting depth on the track (0 = top level; NULL for events not on a timeline: M, flows, counters).
  depth INTEGER,
  -- True for events that run on a device: kernels, memcpy, memset, device annotations (category with is_device in `event_categories`).
  on_device BOOLEAN,
  -- The innermost CPU op (cpu_op, or legacy Operator without '#') that is this event or contains it on its thread.
  cpu_op_id BIGINT,
  -- The innermost CPU op that contains this event on its thread, the event itself excluded (NULL when none).
  parent_op_id BIGINT,
  -- The outermost CPU op that is this event or contains it on its thread (the top-level op).
  top_op_id BIGINT,
  -- True when the event is a CPU op (is_op category in `event_categories`, not a legacy annotation such as Operator ProfilerStep#3, on a timeline): cpu_op_id = event_id.
  is_cpu_op BOOLEAN,
  -- True when the event is a CPU op that no other CPU op on its thread contains: top_op_id = event_id.
  is_top_level_op BOOLEAN,
  -- Step whose CPU window (see `step_windows`) contains the start of this CPU event; NULL on devices.
  step BIGINT,
  -- The `External id` arg (links CPU ops, runtime calls and kernels), or NULL.
  external_id BIGINT,
  -- The `correlation` arg (links a runtime launch to its GPU work), or NULL.
  correlation BIGINT,
  -- Python call stack of the event (see `stacks`): from `Call stack`, else the enclosing python_function chain.
  stack_id BIGINT,
  -- The `Python id` arg of python_function events, or NULL.
  python_id BIGINT,
  -- The `Python parent id` arg of python_function events, or NULL.
  python_parent_id BIGINT,
  -- The `Sequence number` arg (links forward ops to backward nodes), or NULL.
  seq_num BIGINT,
  -- The `device` arg of GPU events, or NULL.
  device BIGINT,
  -- The `stream` arg of GPU events when numeric, or NULL.
  stream BIGINT,
  -- The `id` of flow events (s/f) when numeric, or NULL.
  flow_id BIGINT,
  -- Other top-level keys of the event (s, id, bp, ...) and values of unexpected type, as JSON text.
  extra VARCHAR
);

-- One row per argument of every event, in the order the trace wrote them. Nothing is dropped:
-- promoted columns of `events` (external_id, correlation, ...) are also here under their original key.
CREATE TABLE args (
  -- Run the event belongs to.
  run_id VARCHAR,
  -- Event the argument belongs to.
  event_id BIGINT,
  -- 0-based position of the argument within the event's args.
  arg_index INTEGER,
  -- Argument name as written, e.g. 'Input Dims', 'External id'.
  key VARCHAR,
  -- One of int, big_int (outside int64; text in string_value), real, string, bool, null, json.
  value_type VARCHAR,
  -- Value for int and bool (0/1) arguments.
  int_value BIGINT,
  -- Value for real arguments.
  real_value DOUBLE,
  -- Value for string arguments; JSON text for json (lists, objects); decimal text for big_int.
  string_value VARCHAR
);

-- One row per input of every op that recorded shapes (Input Dims / Input type / Input Strides /
-- Concrete Inputs); TensorList inputs give one row per member.
CREATE TABLE shapes (
  -- Run the event belongs to.
  run_id VARCHAR,
  -- The op event.
  event_id BIGINT,
  -- 0-based position of the input.
  input_index INTEGER,
  -- Position within a TensorList input, NULL for other inputs.
  member_index INTEGER,
  -- Tensor dimensions ([] for scalars and 0-dim tensors).
  dims BIGINT[],
  -- Element type of a tensor input in torch's spelling (float32, bfloat16, float8_e4m3fn, int64, ...); NULL for non-tensor inputs (Scalar, TensorList and its members, '' for None) and unknown type names.
  dtype VARCHAR,
  -- `Input type` as the exporter wrote it: c10::BFloat16, float, long int, Scalar, TensorList, ... ('' for None).
  dtype_raw VARCHAR,
  -- Tensor strides, when recorded.
  strides BIGINT[],
  -- The `Concrete Inputs` entry as text (scalar values, ScalarType codes), when recorded.
  concrete VARCHAR,
  -- Number of elements (product of dims) for tensor inputs, NULL otherwise.
  numel BIGINT,
  -- Bytes per element of dtype, NULL when not a tensor or unknown.
  elem_bytes INTEGER,
  -- Size of the tensor in bytes: numel * elem_bytes.
  bytes BIGINT
);

-- One row per step: the CPU annotation (category user_annotation, or legacy Operator/cpu_op) that
-- defines the step's window: `ProfilerStep#N`; without it, SGLang's `step[...]`, else vLLM's
-- `execute_..._context_..._generation_...` (macro step_marker_family); or the annotations of a
-- pattern (`ingest --step-marker`, `traceduck step-marker`). The `steps` view adds the marker's
-- name, phase, batch size and tokens, warm-up, and a ProfilerStep's GPU-side span.
CREATE TABLE step_windows (
  -- Run the step belongs to.
  run_id VARCHAR,
  -- N of ProfilerStep#N (numbering counts the schedule's wait and warmup steps), the number a pattern's first group captures, else 0, 1, ... by start.
  step BIGINT,
  -- The annotation event that marks the step.
  event_id BIGINT,
  -- Start of the window, ns.
  ts_ns BIGINT,
  -- Length of the window, ns.
  dur_ns BIGINT
);

-- Interned Python call stacks: one row per frame of each distinct stack of a run.
CREATE TABLE stacks (
  -- Run the stack belongs to.
  run_id VARCHAR,
  -- Id of the stack (a hash of its frames; the same stack has the same id in every run).
  stack_id BIGINT,
  -- Position in the stack, 0 = innermost frame.
  frame_index INTEGER,
  -- The frame as written, with ` at 0x...` addresses removed.
  frame VARCHAR,
  -- Source file of the frame (NULL for built-ins and nn.Module frames).
  file VARCHAR,
  -- Line number written in the frame (the function's def line for most frames), or NULL.
  line BIGINT,
  -- Function name of the frame (the whole frame for built-ins and nn.Module frames).
  function VARCHAR
);
