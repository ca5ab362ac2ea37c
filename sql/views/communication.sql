-- requires: reference, gpu
-- Communication: which kernels and ops run collectives, their message sizes and bandwidths.

-- The family of a collective as PyTorch's `Collective name` arg spells it, without the variant
-- markers that arg adds: lower case, leading `_` and the suffixes `_base`, `_oop`, `_coalesced`,
-- `_into_tensor_coalesced`, `_tensor_coalesced` and all_to_all's `v` removed, then every `_`
-- removed, so that one collective has one name whatever wrote it: `allreduce`,
-- `allreduce_coalesced` -> allreduce; `all_gather`, `_allgather_base`,
-- `all_gather_into_tensor_coalesced` -> allgather; `reduce_scatter`, `_reduce_scatter_base` ->
-- reducescatter; `all_to_all`, `all_to_allv` -> alltoall; `_broadcast_oop` -> broadcast; send,
-- recv, gather, scatter, barrier, wait unchanged. Kernel names go through it too (AllReduce ->
-- allreduce, SendRecv -> sendrecv).
-- @arg collective_name VARCHAR A collective's name: a `Collective name` arg, or a kernel name.
CREATE OR REPLACE MACRO collective_family(collective_name) AS
  replace(regexp_replace(regexp_replace(regexp_replace(lower(collective_name), '^_+', ''),
                                        '(_into_tensor|_tensor)?(_coalesced|_base|_oop)$', ''),
                         '^(all_?to_?all)v$', '\1'), '_', '');

-- True when a name is named after one of the collectives that move every rank's data (all_reduce,
-- all_gather, reduce_scatter, all_to_all; any case, `_` optional) as a word of its own, not inside
-- a longer one: PyTorch's c10d::allreduce_, vLLM's vllm::all_reduce, symmetric memory's
-- multimem_all_reduce_kernel, NCCL's AllReduce. The one encoding of collective names, for kernels
-- (`kernel_collective`) and CPU ops (`op_name_categories`) alike.
-- @arg name VARCHAR A kernel or CPU op name.
CREATE OR REPLACE MACRO is_collective_name(name) AS
  regexp_matches(name, '(?i)(^|[^a-z])(all_?reduce|all_?gather|reduce_?scatter|all_?to_?all)');

-- The collective family (`collective_family`) of the first collective word of a name (all_reduce,
-- all_gather, reduce_scatter, all_to_all, send_recv, broadcast, reduce; any case, `_` optional, not
-- inside a longer word), NULL when it has none.
-- @arg name VARCHAR A kernel or CPU op name.
CREATE OR REPLACE MACRO name_collective(name) AS
  nullif(collective_family(regexp_extract(name,
    '(?i)(?:^|[^a-z])(all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|send_?recv|broadcast|reduce)', 1)), '');

-- The communication rule, the one definition behind `activity`, `collectives`, the collectives,
-- ranks and gpu-utilization reports: the collective a GPU kernel runs, read from its name, or
-- NULL when the kernel is not communication. Communication kernels are those of the collective
-- libraries (name contains `nccl`, `rccl` or `msccl`, any case: NCCL's and RCCL's ncclKernel_* and
-- ncclDevKernel_*) and kernels named after a collective (`is_collective_name`: PyTorch's
-- symmetric-memory multimem_all_reduce_kernel). The collective is the name's (`name_collective`:
-- allreduce, allgather, reducescatter, alltoall, broadcast, reduce, sendrecv), 'unknown' for a
-- library kernel that names none (ncclDevKernel_Generic runs whatever NCCL queued). Other tools
-- differ: HTA 0.5.0's is_comm_kernel counts names matching `^nccl.*Kernel` (ncclDevKernel_* included,
-- not rccl* nor symmetric-memory kernels; HTA before 0.5: names containing `ncclKernel`); TraceLens's
-- GPUEventAnalyser the names its is_communication_string matches (older versions: containing `nccl`).
-- @arg kernel_name VARCHAR Name of a GPU kernel.
CREATE OR REPLACE MACRO kernel_collective(kernel_name) AS
  CASE WHEN regexp_matches(kernel_name, '(?i)(nccl|rccl|msccl)') OR is_collective_name(kernel_name)
       THEN coalesce(name_collective(kernel_name), 'unknown')
  END;

-- The torch dtype name of the NCCL/RCCL type at the start of `tail` (what follows the reduction in
-- a kernel name, e.g. 'f32_RING_LL' or 'float'), NULL when not a type; see kernel_collective_dtype.
-- @arg tail VARCHAR What follows the reduction in a kernel name.
CREATE OR REPLACE MACRO nccl_type_name(tail) AS
  CASE WHEN regexp_matches(tail, '^(bf16|_*(nv_|hip_|rccl_)?bfloat16)(_|$)') THEN 'bfloat16'
       WHEN regexp_matches(tail, '^(f8e4m3|_*(nv_)?fp8_e4m3)(_|$)') THEN 'float8_e4m3fn'
       WHEN regexp_matches(tail, '^(f8e5m2|_*(nv_)?fp8_e5m2)(_|$)') THEN 'float8_e5m2'
       WHEN regexp_matches(tail, '^(f16|half)(_|$)') THEN 'float16'
       WHEN regexp_matches(tail, '^(f32|float)(_|$)') THEN 'float32'
       WHEN regexp_matches(tail, '^(f64|double)(_|$)') THEN 'float64'
       WHEN regexp_matches(tail, '^(i8|int8_t)(_|$)') THEN 'int8'
       WHEN regexp_matches(tail, '^(u8|uint8_t)(_|$)') THEN 'uint8'
       WHEN regexp_matches(tail, '^(i32|int32_t)(_|$)') THEN 'int32'
       WHEN regexp_matches(tail, '^(u32|uint32_t)(_|$)') THEN 'uint32'
       WHEN regexp_matches(tail, '^(i64|int64_t)(_|$)') THEN 'int64'
       WHEN regexp_matches(tail, '^(u64|uint64_t)(_|$)') THEN 'uint64'
  END;

-- The element type of a reducing NCCL/RCCL kernel (allreduce, reducescatter, reduce) from its
-- name, as a torch dtype name: the type after the reduction (`_Sum_f32_` in NCCL 2.19's
-- ncclDevKernel_AllReduce_Sum_f32_RING_LL, `_Sum_float` in ncclKernel_AllReduce_RING_LL_Sum_float;
-- f32/float -> float32, bf16/__nv_bfloat16 -> bfloat16, f16/half -> float16, i8/int8_t -> int8,
-- f8e4m3 -> float8_e4m3fn, ...). NULL for the other collectives: NCCL builds the kernels that only
-- move data (AllGather, Broadcast, SendRecv) for bytes, so the `int8_t` in their names says nothing
-- about the tensor's type.
-- @arg kernel_name VARCHAR Name of a GPU kernel.
CREATE OR REPLACE MACRO kernel_collective_dtype(kernel_name) AS
  CASE WHEN kernel_collective(kernel_name) IN ('allreduce', 'reducescatter', 'reduce')
       THEN nccl_type_name(regexp_extract(kernel_name, '_(?:PreMulSum|SumPostDiv|Sum|Prod|MinMax|Max|Min|Avg)_(\w+)', 1))
  END;

-- NCCL's bus bandwidth factor (nccl-tests' PERFORMANCE.md): the share of a collective's message
-- that crosses the slowest link per rank, so that bus bandwidth (algorithm bandwidth x factor)
-- compares with the hardware's peak whatever the collective and the number of ranks `n`:
-- allreduce 2(n-1)/n; allgather, reducescatter, alltoall (n-1)/n; broadcast, reduce, sendrecv,
-- send, recv 1. NULL for other collectives (barrier, wait, gather, scatter, unknown) and when n is
-- unknown or below 1.
-- @arg collective VARCHAR A collective family (`collective_family`): allreduce, allgather, ...
-- @arg n BIGINT Ranks taking part in the collective.
CREATE OR REPLACE MACRO busbw_factor(collective, n) AS
  CASE WHEN n IS NULL OR n < 1 THEN NULL
       WHEN collective = 'allreduce' THEN 2.0 * (n - 1) / n
       WHEN collective IN ('allgather', 'reducescatter', 'alltoall') THEN (n - 1)::DOUBLE / n
       WHEN collective IN ('broadcast', 'reduce', 'sendrecv', 'send', 'recv') THEN 1.0
  END;

-- Every distinct kernel name of the store that the communication rule (`kernel_collective`)
-- counts as communication, with its collective and element type. The rule runs once per distinct
-- name here (hundreds), not once per kernel (millions): `activity` and `collectives` join this.
-- @columns-as kernel_stats_of: name
-- @column collective VARCHAR Collective the kernel runs (`kernel_collective`): allreduce, allgather, sendrecv, ..., unknown.
-- @column dtype VARCHAR Element type from the name for reducing kernels (`kernel_collective_dtype`), else NULL.
CREATE OR REPLACE VIEW communication_kernel_names AS
SELECT name, kernel_collective(any_value(name)) AS collective, kernel_collective_dtype(any_value(name)) AS dtype
FROM events WHERE phase = 'X' AND category IN (SELECT category FROM event_categories WHERE kind = 'kernel')
GROUP BY name
-- on any_value(name), not name: a condition on the grouping column would be pushed below the
-- grouping and run once per kernel
HAVING kernel_collective(any_value(name)) IS NOT NULL;

-- The rows of `collectives` for the given runs only (a list of run ids): each table is filtered as
-- it is read, so that a report pays nothing for runs without collectives.
-- @arg run_ids VARCHAR[] The runs to read.
-- @columns-as events: run_id
-- @column event_id BIGINT The kernel or CPU event.
-- @column side VARCHAR 'gpu' for a kernel, 'cpu' for a CPU event.
-- @column name VARCHAR Event name (the kernel's full name on the GPU).
-- @column device BIGINT GPU index (NULL on the CPU side).
-- @column stream BIGINT GPU stream (NULL on the CPU side).
-- @columns-as events: ts_ns, dur_ns
-- @column collective VARCHAR Collective family (`collective_family`): allreduce, allgather, reducescatter, alltoall, broadcast, reduce, sendrecv, send, recv, barrier, wait, ...; 'unknown' for a kernel whose name names none.
-- @column collective_arg VARCHAR The collective's name as the trace writes it where it was read: the `Collective name` arg (e.g. `_allgather_base`; sources args and launch_op), the annotation's name after its `nccl:` prefix (e.g. `all_to_all`; source annotation); NULL from the kernel name.
-- @column source VARCHAR Where collective, dtype and sizes come from: 'args' (the event's own args), 'launch_op' (a kernel's: the args of the record_param_comms op around its launch), 'annotation' (a kernel's: the `nccl:*` record_function around its launch, sizes from its Input Dims), 'kernel_name' (no size).
-- @column named_by_event_id BIGINT The CPU event whose args or annotation named the kernel (sources launch_op and annotation); the event itself for source args; NULL for kernel_name.
-- @column dtype VARCHAR Element type as a torch dtype name (float32, bfloat16, ...): the `dtype` arg, the annotation's input type (when all its inputs have one), else from a reducing kernel's name; NULL when unknown.
-- @column in_nelems BIGINT Input message size, elements (`In msg nelems`; an annotation's inputs summed); NULL when unknown.
-- @column out_nelems BIGINT Output message size, elements (`Out msg nelems`); NULL when unknown (always for source annotation: a `nccl:*` annotation records its inputs only).
-- @column in_bytes BIGINT Input message size, bytes (in_nelems x element size); NULL when unknown.
-- @column out_bytes BIGINT Output message size, bytes (out_nelems x element size); NULL when unknown.
-- @column group_size BIGINT Ranks in the process group (`Group size`); NULL when unknown.
-- @column process_group VARCHAR Process group name (`Process Group Name`); NULL when unknown.
-- @column msg_bytes BIGINT The message as nccl-tests and TraceLens size it: out_bytes for allgather (the gathered buffer), in_bytes otherwise; NULL when unknown.
-- @column n_ranks BIGINT Ranks taking part, the n of bus bandwidth (busbw_factor): group_size, else the run's world size (runs.world_size); NULL when unknown.
CREATE OR REPLACE MACRO collectives_of(run_ids) AS TABLE
WITH a AS (
  -- the collective args of the events that have any: few rows, found from the args side
  SELECT run_id, event_id,
         max(string_value) FILTER (WHERE key = 'Collective name') AS collective_arg,
         max(string_value) FILTER (WHERE key = 'dtype') AS dtype_arg,
         max(int_value) FILTER (WHERE key = 'In msg nelems') AS in_nelems,
         max(int_value) FILTER (WHERE key = 'Out msg nelems') AS out_nelems,
         max(int_value) FILTER (WHERE key = 'Group size') AS group_size,
         coalesce(max(string_value) FILTER (WHERE key = 'Process Group Name'),
                  max(int_value::VARCHAR) FILTER (WHERE key = 'Process Group Name')) AS process_group
  FROM args JOIN (SELECT unnest(run_ids) AS run_id) USING (run_id)
  -- two short IN lists: DuckDB turns one of six values into a join that reads every arg
  WHERE (key IN ('Collective name', 'dtype', 'In msg nelems') OR key IN ('Out msg nelems', 'Group size', 'Process Group Name'))
  GROUP BY run_id, event_id
), k AS (
  SELECT w.run_id, w.event_id, w.name, w.device, w.stream, w.ts_ns, w.dur_ns, w.correlation,
         c.collective AS kernel_collective, c.dtype AS kernel_dtype
  FROM device_events(['kernel']) w JOIN communication_kernel_names c USING (name)
  WHERE w.run_id IN (SELECT unnest(run_ids))
), namers AS (
  -- the CPU events that name a collective: ops with a `Collective name` arg (record_param_comms;
  -- rank 1) and ProcessGroupNCCL's `nccl:*` record_function annotations (rank 2)
  SELECT e.run_id, e.event_id, e.pid, e.tid, e.ts_ns, e.dur_ns, e.name,
         CASE WHEN a.collective_arg IS NOT NULL THEN 1 ELSE 2 END AS rank
  FROM events e LEFT JOIN a USING (run_id, event_id)
  WHERE e.phase = 'X' AND NOT e.on_device AND e.run_id IN (SELECT unnest(run_ids))
    AND (a.collective_arg IS NOT NULL OR e.name LIKE 'nccl:_%' OR e.name LIKE 'xccl:_%')
), via AS (
  -- each kernel without collective args of its own, launched by a call (not a graph launch: one
  -- graph holds many kernels) inside namers on the call's thread: the op with args if any, else
  -- the annotation, the innermost of each
  SELECT k.run_id, k.event_id, arg_max(n.event_id, [-n.rank, n.ts_ns, -n.dur_ns]) AS named_by,
         min(n.rank) AS rank
  FROM k
  JOIN launch_calls l ON l.run_id = k.run_id AND l.correlation = k.correlation AND NOT l.is_graph_launch
  JOIN namers n ON n.run_id = l.run_id AND n.pid = l.pid AND n.tid = l.tid
                AND n.ts_ns <= l.ts_ns AND l.ts_ns < n.ts_ns + n.dur_ns
  WHERE NOT EXISTS (SELECT 1 FROM a WHERE a.run_id = k.run_id AND a.event_id = k.event_id AND a.collective_arg IS NOT NULL)
  GROUP BY k.run_id, k.event_id
), ann AS (
  -- the inputs of the annotations that name a kernel: elements and bytes summed, their one dtype
  SELECT s.run_id, s.event_id, sum(s.numel)::BIGINT AS nelems, sum(s.bytes)::BIGINT AS bytes,
         CASE WHEN count(DISTINCT s.dtype) = 1 THEN any_value(s.dtype) END AS dtype
  FROM shapes s JOIN (SELECT DISTINCT run_id, named_by AS event_id FROM via WHERE rank = 2) v USING (run_id, event_id)
  WHERE s.numel IS NOT NULL
  GROUP BY s.run_id, s.event_id
), ev AS (
  SELECT k.run_id, k.event_id, 'gpu' AS side, k.name, k.device, k.stream, k.ts_ns, k.dur_ns,
         k.kernel_collective, k.kernel_dtype, v.named_by, v.rank AS via_rank
  FROM k LEFT JOIN via v USING (run_id, event_id)
  UNION ALL
  SELECT e.run_id, e.event_id, 'cpu', e.name, NULL, NULL, e.ts_ns, e.dur_ns, NULL, NULL, NULL, NULL
  FROM events e JOIN a USING (run_id, event_id)
  WHERE e.phase = 'X' AND NOT e.on_device AND a.collective_arg IS NOT NULL AND e.run_id IN (SELECT unnest(run_ids))
), d AS (
  SELECT scalar_type_name, any_value(torch_name) AS torch_name, any_value(elem_bytes) AS elem_bytes
  FROM dtypes WHERE scalar_type_name IS NOT NULL GROUP BY scalar_type_name
), named AS (
  -- each event with the args that name it (its own, else its launch op's), or its annotation
  SELECT ev.*, coalesce(own.event_id, CASE WHEN ev.via_rank = 1 THEN ev.named_by END) AS args_event_id,
         CASE WHEN own.event_id IS NOT NULL THEN 'args' WHEN ev.via_rank = 1 THEN 'launch_op'
              WHEN ev.via_rank = 2 THEN 'annotation' ELSE 'kernel_name' END AS source,
         CASE WHEN own.event_id IS NOT NULL THEN ev.event_id ELSE ev.named_by END AS named_by_event_id
  FROM ev LEFT JOIN (SELECT run_id, event_id FROM a WHERE collective_arg IS NOT NULL) own USING (run_id, event_id)
), f AS (
  SELECT n.run_id, n.event_id, n.side, n.name, n.device, n.stream, n.ts_ns, n.dur_ns, n.source, n.named_by_event_id,
         CASE n.source WHEN 'annotation' THEN regexp_replace(ne.name, '^\w+:', '') ELSE a.collective_arg END AS collective_arg,
         n.kernel_collective, n.kernel_dtype,
         CASE n.source WHEN 'annotation' THEN ann.dtype ELSE coalesce(d.torch_name, a.dtype_arg) END AS dtype,
         CASE n.source WHEN 'annotation' THEN ann.nelems ELSE a.in_nelems END AS in_nelems,
         a.out_nelems,
         CASE n.source WHEN 'annotation' THEN ann.bytes ELSE (a.in_nelems * d.elem_bytes)::BIGINT END AS in_bytes,
         (a.out_nelems * d.elem_bytes)::BIGINT AS out_bytes, a.group_size, a.process_group
  FROM named n
  LEFT JOIN a ON a.run_id = n.run_id AND a.event_id = n.args_event_id
  LEFT JOIN d ON d.scalar_type_name = a.dtype_arg
  LEFT JOIN ann ON ann.run_id = n.run_id AND ann.event_id = n.named_by_event_id AND n.source = 'annotation'
  LEFT JOIN (SELECT run_id, event_id, name FROM events WHERE run_id IN (SELECT unnest(run_ids))) ne
    ON ne.run_id = n.run_id AND ne.event_id = n.named_by_event_id AND n.source = 'annotation'
)
SELECT f.run_id, f.event_id, f.side, f.name, f.device, f.stream, f.ts_ns, f.dur_ns,
       coalesce(collective_family(f.collective_arg), f.kernel_collective) AS collective,
       f.collective_arg, f.source, f.named_by_event_id,
       coalesce(f.dtype, f.kernel_dtype) AS dtype,
       f.in_nelems, f.out_nelems, f.in_bytes, f.out_bytes, f.group_size, f.process_group,
       CASE WHEN collective_family(f.collective_arg) = 'allgather' THEN f.out_bytes ELSE f.in_bytes END AS msg_bytes,
       coalesce(f.group_size, r.world_size) AS n_ranks
FROM f JOIN runs r ON r.run_id = f.run_id;

-- One row per collective event: every GPU kernel the communication rule counts (exactly the
-- `activity` rows of kind communication, whether or not the kernel carries a `Collective name`
-- arg), and every CPU event that carries a `Collective name` arg (PyTorch's record_param_comms
-- ops, including `wait`). Collective, dtype and message size come from the event's args where
-- PyTorch wrote them (source 'args'; many PyTorch versions do not write them on kernels). A kernel
-- without them is named through its launch (kernel -> correlation -> launch call -> the CPU events
-- around the call on its thread; graph launches excluded, one graph holds many kernels): by the
-- args of the innermost op around it that has a `Collective name` arg (source 'launch_op'), else
-- by the innermost `nccl:*` (or `xccl:*`) record_function annotation around it that ProcessGroupNCCL
-- writes (source 'annotation': `nccl:all_to_all` -> alltoall, the input size and dtype from its
-- Input Dims and Input type, no output size); else collective and dtype from the kernel name
-- (source 'kernel_name') and no message size. The kernel name can be wrong: on HTA's sampled ranks
-- (NCCL of 2023) the all-to-all, all-reduce and all-gather kernels are all `ncclKernel_SendRecv_*`.
-- @columns-as collectives_of: run_id, event_id, side, name, device, stream, ts_ns, dur_ns, collective, collective_arg
-- @columns-as collectives_of: source, named_by_event_id, dtype, in_nelems, out_nelems, in_bytes, out_bytes, group_size, process_group, msg_bytes, n_ranks
CREATE OR REPLACE VIEW collectives AS
SELECT * FROM collectives_of((SELECT list(run_id) FROM runs));

-- Collectives of the given runs grouped per run, side, collective, `Collective name` arg, source,
-- dtype, message size and number of ranks, with nccl-tests' bandwidths on the GPU side:
-- algbw_gb_s = msg_bytes x calls over the kernels' summed time (bytes per ns = GB/s), busbw_gb_s
-- = algbw_gb_s x busbw_factor(collective, n_ranks); NULL where the size, the factor or the number
-- of ranks is unknown, and on the CPU side (a CPU op's time is not the transfer's). The
-- collectives report and the overview's bandwidth finding read this.
-- @arg run_ids VARCHAR[] The runs to read.
-- @columns-as collectives_of: run_id, side, collective, collective_arg, source, dtype, msg_bytes, n_ranks
-- @column calls BIGINT Collectives in the group.
-- @column avg_in_nelems BIGINT Average input message size, elements; NULL when unknown.
-- @column max_in_nelems BIGINT Largest input message size, elements; NULL when unknown.
-- @column total_bytes BIGINT Summed input message size, bytes; NULL when unknown.
-- @column total_dur_ns BIGINT Summed duration, ns.
-- @column avg_dur_ns BIGINT Average duration, ns.
-- @column algbw_gb_s DOUBLE Algorithm bandwidth: msg_bytes x calls / total_dur_ns, GB/s (GPU side only; NULL when unknown).
-- @column busbw_gb_s DOUBLE Bus bandwidth: algbw_gb_s x busbw_factor(collective, n_ranks), GB/s (GPU side only; NULL when unknown).
CREATE OR REPLACE MACRO collective_bandwidth(run_ids) AS TABLE
SELECT run_id, side, collective, collective_arg, source, dtype, msg_bytes, n_ranks, count(*) AS calls,
       avg(in_nelems)::BIGINT AS avg_in_nelems, max(in_nelems) AS max_in_nelems,
       sum(in_bytes)::BIGINT AS total_bytes, sum(dur_ns)::BIGINT AS total_dur_ns, avg(dur_ns)::BIGINT AS avg_dur_ns,
       CASE WHEN side = 'gpu' AND sum(dur_ns) > 0 THEN msg_bytes * count(*) / sum(dur_ns) END AS algbw_gb_s,
       CASE WHEN side = 'gpu' AND sum(dur_ns) > 0 THEN msg_bytes * count(*) / sum(dur_ns) * busbw_factor(collective, n_ranks) END AS busbw_gb_s
FROM collectives_of(run_ids)
GROUP BY run_id, side, collective, collective_arg, source, dtype, msg_bytes, n_ranks;
