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
-- @column collective_arg VARCHAR The `Collective name` arg as written (e.g. `_allgather_base`), NULL when absent.
-- @column source VARCHAR Where collective and dtype come from: 'args' (the event's args) or 'kernel_name'.
-- @column dtype VARCHAR Element type as a torch dtype name (float32, bfloat16, ...): the `dtype` arg, else from a reducing kernel's name; NULL when unknown.
-- @column in_nelems BIGINT Input message size, elements (`In msg nelems`); NULL when unknown.
-- @column out_nelems BIGINT Output message size, elements (`Out msg nelems`); NULL when unknown.
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
), ev AS (
  SELECT w.run_id, w.event_id, 'gpu' AS side, w.name, w.device, w.stream, w.ts_ns, w.dur_ns,
         c.collective AS kernel_collective, c.dtype AS kernel_dtype
  FROM device_events(['kernel']) w JOIN communication_kernel_names c USING (name)
  WHERE w.run_id IN (SELECT unnest(run_ids))
  UNION ALL
  SELECT e.run_id, e.event_id, 'cpu', e.name, NULL, NULL, e.ts_ns, e.dur_ns, NULL, NULL
  FROM events e JOIN a USING (run_id, event_id)
  WHERE e.phase = 'X' AND NOT e.on_device AND a.collective_arg IS NOT NULL AND e.run_id IN (SELECT unnest(run_ids))
), d AS (
  SELECT scalar_type_name, any_value(torch_name) AS torch_name, any_value(elem_bytes) AS elem_bytes
  FROM dtypes WHERE scalar_type_name IS NOT NULL GROUP BY scalar_type_name
)
SELECT ev.run_id, ev.event_id, ev.side, ev.name, ev.device, ev.stream, ev.ts_ns, ev.dur_ns,
       CASE WHEN a.collective_arg IS NOT NULL THEN collective_family(a.collective_arg) ELSE ev.kernel_collective END AS collective,
       a.collective_arg,
       CASE WHEN a.collective_arg IS NOT NULL THEN 'args' ELSE 'kernel_name' END AS source,
       CASE WHEN a.collective_arg IS NOT NULL THEN coalesce(d.torch_name, a.dtype_arg) ELSE ev.kernel_dtype END AS dtype,
       a.in_nelems, a.out_nelems, (a.in_nelems * d.elem_bytes)::BIGINT AS in_bytes,
       (a.out_nelems * d.elem_bytes)::BIGINT AS out_bytes, a.group_size, a.process_group,
       (CASE WHEN collective_family(a.collective_arg) = 'allgather' THEN a.out_nelems ELSE a.in_nelems END * d.elem_bytes)::BIGINT AS msg_bytes,
       coalesce(a.group_size, r.world_size) AS n_ranks
FROM ev
JOIN runs r ON r.run_id = ev.run_id
LEFT JOIN a ON a.run_id = ev.run_id AND a.event_id = ev.event_id
LEFT JOIN d ON d.scalar_type_name = a.dtype_arg AND a.collective_arg IS NOT NULL;

-- One row per collective event: every GPU kernel the communication rule counts (exactly the
-- `activity` rows of kind communication, whether or not the kernel carries a `Collective name`
-- arg), and every CPU event that carries a `Collective name` arg (PyTorch's record_param_comms
-- ops, including `wait`). Collective, dtype and message size come from the event's args where
-- PyTorch wrote them (source 'args'; many PyTorch versions do not write them on kernels), else
-- collective and dtype from the kernel name (source 'kernel_name') and no message size.
-- @columns-as collectives_of: run_id, event_id, side, name, device, stream, ts_ns, dur_ns, collective, collective_arg
-- @columns-as collectives_of: source, dtype, in_nelems, out_nelems, in_bytes, out_bytes, group_size, process_group, msg_bytes, n_ranks
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
