-- requires: stacks
-- CPU operators: every op with its place in the op tree, its call site and step, and its inputs' shapes.

-- Every CPU operator (2023+ `cpu_op`, legacy `Operator` except record_function annotations such
-- as `ProfilerStep#N`) with its self time, its place in the op tree, its call site and step.
-- self_dur_ns = dur_ns minus the time of its direct children on the same thread (ops,
-- annotations and Python frames), never below 0 (computed at ingest, as events.self_dur_ns).
-- @column run_id VARCHAR Run of the op.
-- @column event_id BIGINT The op event.
-- @column name VARCHAR Op name, e.g. aten::copy_.
-- @columns-as events: pid, tid, ts_ns
-- @column dur_ns BIGINT Inclusive duration, ns.
-- @column self_dur_ns BIGINT Duration minus direct children on the same thread, ns.
-- @column parent_id BIGINT Enclosing event (any kind) on the thread.
-- @column parent_op_id BIGINT Innermost enclosing CPU op, NULL for top-level ops.
-- @column depth INTEGER Nesting depth on the thread.
-- @column is_top_level BOOLEAN True when no other CPU op encloses this one.
-- @column top_op_id BIGINT The outermost enclosing CPU op (itself when top level).
-- @column top_op_name VARCHAR Name of the outermost enclosing CPU op.
-- @column external_id BIGINT The op's External id (runtime calls and kernels point back to it).
-- @column seq_num BIGINT Sequence number (links forward ops to their backward nodes).
-- @column stack_id BIGINT Python stack of the op (see `stacks`).
-- @column call_site VARCHAR Innermost user frame of the op's Python stack (see `call_sites`).
-- @column module_path VARCHAR nn.Module chain of the op's Python stack, outermost first.
-- @column step BIGINT Profiler step whose window contains the op's start.
CREATE OR REPLACE VIEW cpu_ops AS
SELECT o.run_id, o.event_id, o.name, o.pid, o.tid, o.ts_ns, o.dur_ns, o.self_dur_ns,
       o.parent_id, o.parent_op_id, o.depth,
       o.is_top_level_op AS is_top_level,
       o.top_op_id, t.name AS top_op_name,
       o.external_id, o.seq_num, o.stack_id, cs.call_site, cs.module_path, o.step
FROM events o
LEFT JOIN (SELECT run_id, event_id, name FROM events WHERE is_top_level_op) t
  ON t.run_id = o.run_id AND t.event_id = o.top_op_id
LEFT JOIN call_sites cs ON cs.run_id = o.run_id AND cs.stack_id = o.stack_id
WHERE o.is_cpu_op;

-- The inputs of each op that recorded shapes (profiled with record_shapes=True), in order: one row
-- per op, the dims and dtypes of its `shapes` rows as lists. TensorList inputs are not in the lists
-- (`shapes` holds them as one row per member, with member_index). Built with list_sort on the
-- input's position rather than an ordered aggregate (3x faster over a run's ops); a column not
-- selected is not computed.
-- @columns-as cpu_ops: run_id, event_id
-- @column input_dims BIGINT[][] The dims of every input, in order (NULL for an input without dims).
-- @column input_dims_text VARCHAR input_dims as text, e.g. '[[8, 16], [16, 4]]' (the input_dims of top-ops and op_cost).
-- @column input_dtypes VARCHAR[] The dtype of every input, in order (NULL for non-tensor inputs).
CREATE OR REPLACE VIEW op_inputs AS
SELECT run_id, event_id, input_dims, input_dims::VARCHAR AS input_dims_text, input_dtypes
FROM (
  SELECT run_id, event_id,
         list_transform(list_sort(list({'i': input_index, 'd': dims}), 'ASC', 'NULLS LAST'), lambda x: x.d) AS input_dims,
         list_transform(list_sort(list({'i': input_index, 't': dtype}), 'ASC', 'NULLS LAST'), lambda x: x.t) AS input_dtypes
  FROM shapes WHERE member_index IS NULL
  GROUP BY run_id, event_id
);

-- Per run and CPU op name: calls and summed self time (report overview's top ops).
-- @summary
-- @column run_id VARCHAR Run of the ops.
-- @columns-as cpu_ops: name
-- @column calls BIGINT Calls of the op.
-- @column self_ns BIGINT Summed self time, ns.
-- @column rank BIGINT Position of the op in its run by self time (1: the most), ties by name.
CREATE OR REPLACE MACRO op_self_times_of(skip_runs := []::VARCHAR[]) AS TABLE
SELECT *, row_number() OVER (PARTITION BY run_id ORDER BY self_ns DESC, name) AS rank
FROM (
  SELECT run_id, name, count(*) AS calls, sum(self_dur_ns)::BIGINT AS self_ns
  FROM events WHERE is_cpu_op AND run_id NOT IN (SELECT unnest(skip_runs))  -- the rows of cpu_ops
  GROUP BY run_id, name
);
