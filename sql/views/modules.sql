-- requires: cpu, gpu, stacks
-- nn.Module calls (traces profiled with with_stack=True and with_modules=True) and the GPU kernels
-- their ops launched.

-- Every call of an nn.Module: each `nn.Module: Name_N` Python frame event (written by the profiler
-- with with_modules=True; Name_N is the module's class and a per-class instance number), with its
-- module path: the chain of module frames around it, outermost first, itself last (as
-- `cpu_ops.module_path` gives it for ops). Backward passes run outside module frames (autograd's
-- thread) and have no rows.
-- @column run_id VARCHAR Run of the nn.Module call.
-- @column event_id BIGINT The `nn.Module: ...` python_function event.
-- @column module VARCHAR The module, `Name_N` (the frame's name without 'nn.Module: ').
-- @column module_path VARCHAR The modules from the outermost to this one, joined by ' > '.
-- @column module_depth BIGINT Number of modules in module_path (1: a top-level module).
-- @columns-as events: pid, tid, ts_ns
-- @column dur_ns BIGINT Duration of the call on the CPU (the frame, its children included), ns.
-- @column step BIGINT Profiler step whose CPU window contains the call's start.
CREATE OR REPLACE VIEW module_calls AS
SELECT e.run_id, e.event_id, replace(e.name, 'nn.Module: ', '') AS module, cs.module_path,
       array_length(string_split(cs.module_path, ' > '))::BIGINT AS module_depth,
       e.pid, e.tid, e.ts_ns, e.dur_ns, e.step
FROM events e
JOIN call_sites cs ON cs.run_id = e.run_id AND cs.stack_id = e.stack_id
WHERE e.category = 'python_function' AND e.name LIKE 'nn.Module: %' AND e.phase = 'X' AND cs.module_path IS NOT NULL;

-- Every GPU kernel launched by a CPU op that ran inside an nn.Module call, with that op's module
-- path (`cpu_ops.module_path`: the module frames on the op's Python stack).
-- @columns-as gpu_kernels: run_id, event_id, op_event_id
-- @columns-as cpu_ops: module_path
-- @columns-as gpu_kernels: ts_ns, dur_ns, step
CREATE OR REPLACE VIEW module_kernels AS
SELECT k.run_id, k.event_id, k.op_event_id, o.module_path, k.ts_ns, k.dur_ns, k.step
FROM gpu_kernels k
JOIN cpu_ops o ON o.run_id = k.run_id AND o.event_id = k.op_event_id
WHERE o.module_path IS NOT NULL;
