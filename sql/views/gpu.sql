-- requires: reference, stacks
-- GPU work and the runtime calls that launch it: launches, kernels, copies and sets, each linked to
-- the CPU op behind it.

-- Runtime and driver calls that start GPU work: kernel launches (cudaLaunchKernel,
-- cuLaunchKernelEx, hipExtModuleLaunchKernel, ...), graph launches (cudaGraphLaunch,
-- hipGraphLaunch), async copies and sets (cudaMemcpyAsync, cudaMemsetAsync), in every runtime
-- category of `event_categories` (`cuda_runtime`, `cuda_driver`, legacy `Runtime`, `xpu_runtime`,
-- `privateuse1_runtime`, `mtia_runtime`, ...; names by is_launch_call_name), with the ids of the
-- CPU ops around them but not their names: the cheap base of `launches` and `gpu_work`.
-- @column run_id VARCHAR Run of the call.
-- @column event_id BIGINT The runtime/driver event.
-- @column name VARCHAR Call name, e.g. cudaLaunchKernel.
-- @columns-as events: pid, tid
-- @column ts_ns BIGINT Start of the call, ns.
-- @column dur_ns BIGINT Duration of the call, ns.
-- @column correlation BIGINT Correlation id shared with the GPU work it started.
-- @column is_graph_launch BOOLEAN True for CUDA/HIP graph launches (one call, many kernels).
-- @column op_event_id BIGINT Innermost CPU op enclosing the call on its thread.
-- @column top_op_event_id BIGINT Outermost CPU op enclosing the call.
-- @column stack_id BIGINT Python stack of the call.
-- @column step BIGINT Profiler step whose window contains the call.
CREATE OR REPLACE VIEW launch_calls AS
SELECT run_id, event_id, name, pid, tid, ts_ns, dur_ns, correlation,
       is_graph_launch_name(name) AS is_graph_launch,
       cpu_op_id AS op_event_id, top_op_id AS top_op_event_id, stack_id, step
FROM events
WHERE phase = 'X' AND category IN (SELECT category FROM event_categories WHERE is_runtime)
  AND is_launch_call_name(name);

-- Every call of `launch_calls` with the names of the CPU ops around it and its Python call site.
-- @columns-as launch_calls: run_id, event_id, name, pid, tid, ts_ns, dur_ns, correlation, is_graph_launch, op_event_id
-- @column op_name VARCHAR Name of that op.
-- @columns-as launch_calls: top_op_event_id
-- @column top_op_name VARCHAR Name of the outermost op.
-- @columns-as launch_calls: stack_id
-- @column call_site VARCHAR Innermost user frame of the call's Python stack.
-- @columns-as launch_calls: step
CREATE OR REPLACE VIEW launches AS
SELECT l.run_id, l.event_id, l.name, l.pid, l.tid, l.ts_ns, l.dur_ns, l.correlation, l.is_graph_launch,
       l.op_event_id, o.name AS op_name, l.top_op_event_id, t.name AS top_op_name,
       l.stack_id, cs.call_site, l.step
FROM launch_calls l
LEFT JOIN (SELECT run_id, event_id, name FROM events WHERE is_cpu_op) o
  ON o.run_id = l.run_id AND o.event_id = l.op_event_id
LEFT JOIN (SELECT run_id, event_id, name FROM events WHERE is_top_level_op) t
  ON t.run_id = l.run_id AND t.event_id = l.top_op_event_id
LEFT JOIN call_sites cs ON cs.run_id = l.run_id AND cs.stack_id = l.stack_id;

-- The device of a device event: its `device` arg, else its pid as a number (Kineto writes a GPU's
-- work under pid = device index).
-- @arg device BIGINT The event's `device` arg (events.device), NULL when absent.
-- @arg pid VARCHAR The event's pid (events.pid, text).
CREATE OR REPLACE MACRO device_of(device, pid) AS coalesce(device, TRY_CAST(pid AS BIGINT));

-- GPU events of device work (the kinds of `event_categories` with is_device_work: kernels, copies,
-- sets), or of the given kinds of it only (a list such as ['kernel']), with their device and
-- stream, not linked to their launch: the cheapest base, for what needs no launch
-- (`collectives`); work_kind says which kind a row is.
-- @arg kinds VARCHAR[] The device work kinds to keep (`event_categories.kind`: kernel, memcpy, memset); [] for all.
-- @column run_id VARCHAR Run of the work.
-- @column event_id BIGINT The kernel, copy or set event.
-- @column name VARCHAR Its name: the kernel's, or e.g. 'Memcpy HtoD (Pageable -> Device)'.
-- @column ts_ns BIGINT Start on the GPU, ns.
-- @column dur_ns BIGINT Duration on the GPU, ns.
-- @column device BIGINT GPU index (the `device` arg, else pid).
-- @column stream BIGINT Stream (the `stream` arg, else the number in tid).
-- @column correlation BIGINT Correlation id shared with the launching call.
-- @column category VARCHAR Category (`cat`) of the event, e.g. kernel, gpu_memcpy, Memset.
-- @column work_kind VARCHAR Its device work kind (`event_categories.kind`): kernel, memcpy or memset.
CREATE OR REPLACE MACRO device_events(kinds := []::VARCHAR[]) AS TABLE
SELECT g.run_id, g.event_id, g.name, g.ts_ns, g.dur_ns,
       device_of(g.device, g.pid) AS device,
       coalesce(g.stream, TRY_CAST(regexp_extract(g.tid, '(\d+)$', 1) AS BIGINT)) AS stream,
       g.correlation, g.category, c.kind AS work_kind
FROM events g
JOIN event_categories c ON c.category = g.category AND c.is_device_work AND (array_length(kinds) = 0 OR list_contains(kinds, c.kind))
WHERE g.phase = 'X';

-- GPU work (kernels, copies, sets) linked by correlation to the runtime call that launched it,
-- with the ids of that call's CPU ops, its stack, its duration and its profiler step, but no
-- names: the cheap base for utilization (`activity`). `gpu_work` adds the names. All device work,
-- or of the given kinds only (see device_events); work_kind says which kind a row is.
-- @arg kinds VARCHAR[] The device work kinds to keep, as for device_events; [] for all.
-- @columns-as device_events: run_id, event_id, name, ts_ns, dur_ns, device, stream, correlation
-- @column launch_event_id BIGINT The runtime/driver call that launched it (NULL when not in the trace).
-- @column launch_name VARCHAR Name of that call, e.g. cudaLaunchKernel, cudaGraphLaunch, cudaMemcpyAsync.
-- @column queue_delay_ns BIGINT Start on the GPU minus the launch call's start, ns.
-- @column launch_dur_ns BIGINT Duration of the launch call, ns.
-- @column op_event_id BIGINT CPU op that made the launch call (the innermost around it).
-- @column top_op_event_id BIGINT Outermost CPU op around the launch call.
-- @column stack_id BIGINT Python stack of the launch call.
-- @column is_graph_launched BOOLEAN True when launched by a CUDA/HIP graph launch.
-- @column step BIGINT Profiler step of the launching call.
-- @columns-as device_events: category, work_kind
CREATE OR REPLACE MACRO device_work(kinds := []::VARCHAR[]) AS TABLE
SELECT g.run_id, g.event_id, g.name, g.ts_ns, g.dur_ns, g.device, g.stream,
       g.correlation, l.event_id AS launch_event_id, l.name AS launch_name,
       g.ts_ns - l.ts_ns AS queue_delay_ns, l.dur_ns AS launch_dur_ns,
       l.op_event_id, l.top_op_event_id, l.stack_id, coalesce(l.is_graph_launch, false) AS is_graph_launched,
       l.step, g.category, g.work_kind
FROM device_events(kinds) g
LEFT JOIN launch_calls l ON l.run_id = g.run_id AND l.correlation = g.correlation;

-- GPU work (kernels, copies, sets) linked to the runtime call that launched it (by correlation),
-- the CPU op that made that call, the op's Python call site and the profiler step. One macro
-- for the three kinds (see device_work); the views below select one kind each.
-- @arg kinds VARCHAR[] The device work kinds to keep, as for device_events; [] for all.
-- @columns-as device_work: run_id, event_id, name, ts_ns, dur_ns, device, stream, correlation, launch_event_id
-- @columns-as device_work: launch_name, queue_delay_ns, op_event_id
-- @column op_name VARCHAR Name of the CPU op that made the launch call.
-- @column top_op_name VARCHAR Name of the outermost CPU op around the launch call.
-- @column call_site VARCHAR Innermost user frame of the launch call's Python stack.
-- @columns-as device_work: is_graph_launched, step, category
CREATE OR REPLACE MACRO gpu_work(kinds) AS TABLE
SELECT w.run_id, w.event_id, w.name, w.ts_ns, w.dur_ns, w.device, w.stream, w.correlation,
       w.launch_event_id, w.launch_name, w.queue_delay_ns,
       w.op_event_id, o.name AS op_name, t.name AS top_op_name, cs.call_site, w.is_graph_launched,
       w.step, w.category
FROM device_work(kinds) w
LEFT JOIN (SELECT run_id, event_id, name FROM events WHERE is_cpu_op) o
  ON o.run_id = w.run_id AND o.event_id = w.op_event_id
LEFT JOIN (SELECT run_id, event_id, name FROM events WHERE is_top_level_op) t
  ON t.run_id = w.run_id AND t.event_id = w.top_op_event_id
LEFT JOIN call_sites cs ON cs.run_id = w.run_id AND cs.stack_id = w.stack_id;

-- Every GPU kernel (`kernel`, legacy `Kernel`, MTIA's `mtia_ccp_events`: the categories of kind
-- kernel in `event_categories`, for CUDA, ROCm, XPU, PrivateUse1 and MTIA devices) with its
-- launch, the CPU op behind it, the op's Python call site, whether it came from a CUDA/HIP graph,
-- and the profiler step of its launch (GPU work often runs after its step's CPU window has ended).
-- Kernels of one graph launch all link to that launch and its op: which op inside the captured
-- graph issued each kernel cannot be known from the trace; profile without CUDA graphs to see it.
-- @columns-as gpu_work: run_id, event_id, name, ts_ns, dur_ns, device, stream, correlation, launch_event_id
-- @columns-as gpu_work: launch_name, queue_delay_ns, op_event_id, op_name, top_op_name, call_site, is_graph_launched, step
CREATE OR REPLACE VIEW gpu_kernels AS
SELECT * EXCLUDE (category) FROM gpu_work(['kernel']);

-- Every GPU memory copy (`gpu_memcpy`, legacy `Memcpy`: kind memcpy in `event_categories`) with
-- its size, copy kind and launch.
-- @columns-as gpu_work: run_id, event_id, name, ts_ns, dur_ns, device, stream, correlation, launch_event_id
-- @columns-as gpu_work: launch_name, queue_delay_ns, op_event_id, op_name, top_op_name, call_site, is_graph_launched, step
-- @column bytes BIGINT Bytes copied (the `bytes` arg; text in some ROCm traces).
-- @column copy_kind VARCHAR HtoD, DtoH, DtoD, PtoP, ... from the event name.
CREATE OR REPLACE VIEW gpu_memcpys AS
SELECT w.* EXCLUDE (category),
       (SELECT coalesce(a.int_value, TRY_CAST(a.real_value AS BIGINT), TRY_CAST(regexp_extract(a.string_value, '(\d+)', 1) AS BIGINT))
          FROM args a WHERE a.run_id = w.run_id AND a.event_id = w.event_id AND a.key = 'bytes') AS bytes,
       nullif(regexp_extract(w.name, 'Memcpy (\w+)', 1), '') AS copy_kind
FROM gpu_work(['memcpy']) w;

-- Every GPU memory set (`gpu_memset`, legacy `Memset`: kind memset in `event_categories`) with
-- its size and launch.
-- @columns-as gpu_work: run_id, event_id, name, ts_ns, dur_ns, device, stream, correlation, launch_event_id
-- @columns-as gpu_work: launch_name, queue_delay_ns, op_event_id, op_name, top_op_name, call_site, is_graph_launched, step
-- @column bytes BIGINT Bytes set (the `bytes` arg).
CREATE OR REPLACE VIEW gpu_memsets AS
SELECT w.* EXCLUDE (category),
       (SELECT coalesce(a.int_value, TRY_CAST(a.real_value AS BIGINT), TRY_CAST(regexp_extract(a.string_value, '(\d+)', 1) AS BIGINT))
          FROM args a WHERE a.run_id = w.run_id AND a.event_id = w.event_id AND a.key = 'bytes') AS bytes
FROM gpu_work(['memset']) w;

-- Per run and kernel name: count, total, average, median, min, max and standard deviation of the
-- kernel's durations (report top-kernels; what nsys stats cuda_gpu_kern_sum gives per kernel),
-- from `device_events`.
-- @summary
-- @column run_id VARCHAR Run of the kernels.
-- @column name VARCHAR Kernel name.
-- @column instances BIGINT Number of launches of the kernel.
-- @column total_dur_ns BIGINT Total GPU time, ns.
-- @column avg_ns BIGINT Average duration, ns.
-- @column med_ns BIGINT Median duration (the lower middle value), ns.
-- @column min_ns BIGINT Shortest duration, ns.
-- @column max_ns BIGINT Longest duration, ns.
-- @column stddev_ns BIGINT Sample standard deviation of the duration, ns (NULL for one instance).
-- @column rank BIGINT Position of the kernel in its run by total time (1: the most), ties by name.
CREATE OR REPLACE MACRO kernel_stats_of(skip_runs := []::VARCHAR[]) AS TABLE
SELECT *, row_number() OVER (PARTITION BY run_id ORDER BY total_dur_ns DESC, name) AS rank
FROM (
  SELECT run_id, name, count(*) AS instances, sum(dur_ns)::BIGINT AS total_dur_ns, avg(dur_ns)::BIGINT AS avg_ns,
         quantile_disc(dur_ns, 0.5) AS med_ns, min(dur_ns) AS min_ns, max(dur_ns) AS max_ns,
         stddev_samp(dur_ns)::BIGINT AS stddev_ns
  FROM device_events(['kernel']) WHERE run_id NOT IN (SELECT unnest(skip_runs))
  GROUP BY run_id, name
);

-- Per run and profiler step of the launch: kernels, their time, those launched by CUDA/HIP graphs,
-- and those that ran shorter than the call that launched them (`device_work`; for report
-- overview's totals and its launch-bound finding).
-- @summary
-- @columns-as kernel_stats_of: run_id
-- @column step BIGINT Profiler step of the launches (NULL: outside every step, or no launch in the trace).
-- @column kernels BIGINT Kernels.
-- @column dur_ns BIGINT Their summed duration, ns.
-- @column graph_kernels BIGINT Kernels launched by a CUDA/HIP graph.
-- @column graph_dur_ns BIGINT Their summed duration, ns (NULL when none).
-- @column launched_kernels BIGINT Kernels whose launching call is in the trace.
-- @column short_kernels BIGINT Kernels not launched by a graph that ran shorter than their launching call.
-- @column short_gap_ns BIGINT What those kernels ran shorter than their launching calls in all, ns.
CREATE OR REPLACE MACRO kernel_launch_windows_of(skip_runs := []::VARCHAR[]) AS TABLE
SELECT run_id, step, count(*) AS kernels, sum(dur_ns)::BIGINT AS dur_ns,
       count(*) FILTER (WHERE is_graph_launched) AS graph_kernels,
       sum(dur_ns) FILTER (WHERE is_graph_launched)::BIGINT AS graph_dur_ns,
       count(*) FILTER (WHERE launch_dur_ns IS NOT NULL) AS launched_kernels,
       count(*) FILTER (WHERE dur_ns < launch_dur_ns AND NOT is_graph_launched) AS short_kernels,
       coalesce(sum(launch_dur_ns - dur_ns) FILTER (WHERE dur_ns < launch_dur_ns AND NOT is_graph_launched), 0)::BIGINT AS short_gap_ns
FROM device_work(['kernel']) WHERE run_id NOT IN (SELECT unnest(skip_runs))
GROUP BY run_id, step;

