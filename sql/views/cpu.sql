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

-- `op_inputs` of the ops with these names only (NULL: every op): a report about a few ops reads
-- their shapes, not every op's.
-- @arg names VARCHAR[] Names of the ops to read (NULL: every op).
-- @columns-as cpu_ops: run_id, event_id
-- @column input_dims BIGINT[][] The dims of every input, in order (NULL for an input without dims).
-- @column input_dims_text VARCHAR input_dims as text, e.g. '[[8, 16], [16, 4]]' (the input_dims of top-ops and op_cost).
-- @column input_dtypes VARCHAR[] The dtype of every input, in order (NULL for non-tensor inputs).
CREATE OR REPLACE MACRO op_inputs_named(names) AS TABLE
SELECT run_id, event_id, input_dims, input_dims::VARCHAR AS input_dims_text, input_dtypes
FROM (
  SELECT run_id, event_id,
         list_select(list(dims), list_grade_up(list(input_index))) AS input_dims,
         list_select(list(dtype), list_grade_up(list(input_index))) AS input_dtypes
  FROM shapes
  WHERE member_index IS NULL
    AND (names IS NULL OR (run_id, event_id) IN (SELECT (run_id, event_id) FROM cpu_ops WHERE list_contains(names, name)))
  GROUP BY run_id, event_id
);

-- The inputs of each op that recorded shapes (profiled with record_shapes=True), in order: one row
-- per op, the dims and dtypes of its `shapes` rows as lists. TensorList inputs are not in the lists
-- (`shapes` holds them as one row per member, with member_index). Built as lists in any order put
-- in input order by list_grade_up of the inputs' positions: over a run's ops, about twice as fast
-- as an ordered aggregate or a sorted list of structs; a column not selected is not computed. `op_inputs_named` reads the ops of some names only.
-- @columns-as op_inputs_named: run_id, event_id, input_dims, input_dims_text, input_dtypes
CREATE OR REPLACE VIEW op_inputs AS
SELECT * FROM op_inputs_named(NULL::VARCHAR[]);

-- The text of a dim that may be a range: '8', or '1005..1007' when lo and hi differ.
-- @arg lo BIGINT The dim, or the smallest value of a range.
-- @arg hi BIGINT The largest value of a range (lo itself when the dim is not one).
CREATE OR REPLACE MACRO dim_range_text(lo, hi) AS
CASE WHEN lo IS NOT DISTINCT FROM hi THEN coalesce(lo::VARCHAR, 'NULL') ELSE lo::VARCHAR || '..' || hi::VARCHAR END;

-- The text of a tensor's dims that may hold ranges (lists lo and hi of one length): '[8, 1005..1007, 64]';
-- the text DuckDB gives the list lo where lo and hi are equal.
-- @arg lo BIGINT[] A tensor's dims, each at its smallest value.
-- @arg hi BIGINT[] The same dims at their largest values.
CREATE OR REPLACE MACRO dims_range_text(lo, hi) AS
CASE WHEN lo IS NULL THEN NULL
     ELSE '[' || array_to_string(list_transform(range(1, array_length(lo) + 1),
                                                lambda d_at: dim_range_text(list_extract(lo, d_at), list_extract(hi, d_at))), ', ') || ']' END;

-- The text of every input's dims that may hold ranges (lists of lists lo and hi):
-- '[[8, 1005..1007, 64], []]'; input_dims::VARCHAR where lo and hi are equal.
-- @arg lo BIGINT[][] Every input's dims, each at its smallest value (`op_shapes.dims_lo`).
-- @arg hi BIGINT[][] The same at their largest values (`op_shapes.dims_hi`).
CREATE OR REPLACE MACRO inputs_range_text(lo, hi) AS
CASE WHEN lo IS NULL THEN NULL
     ELSE '[' || array_to_string(list_transform(range(1, array_length(lo) + 1),
                                                lambda in_at: coalesce(dims_range_text(list_extract(lo, in_at), list_extract(hi, in_at)), 'NULL')),
                                 ', ') || ']' END;

-- `op_shapes` of the ops with these names only (NULL: every op): a group holds ops of one name, so
-- an op's ranges are the same either way.
-- @arg names VARCHAR[] Names of the ops to read (NULL: every op).
-- @columns-as op_inputs: run_id, event_id, input_dims, input_dtypes
-- @column dims_lo BIGINT[][] input_dims with each dim that varies across steps at its smallest value.
-- @column dims_hi BIGINT[][] input_dims with each dim that varies across steps at its largest value.
-- @column dims_text VARCHAR dims_lo and dims_hi as text, a varying dim as lo..hi: '[[1005..1007, 8, 128]]'.
-- @column has_range BOOLEAN True when some dim varies across steps.
CREATE OR REPLACE MACRO op_shapes_named(names) AS TABLE
WITH ops AS (
  SELECT o.run_id, o.event_id, o.step, i.input_dims, i.input_dtypes,
         concat_ws(chr(1), o.name, coalesce(o.call_site, ''), i.input_dtypes::VARCHAR,
                   list_transform(i.input_dims, lambda d: array_length(d))::VARCHAR) AS shape_group
  FROM cpu_ops o JOIN op_inputs_named(names) i USING (run_id, event_id)
  WHERE names IS NULL OR list_contains(names, o.name)
), step_shapes AS (
  -- each group's distinct shapes per step, numbered in the order of their dims
  SELECT *, row_number() OVER (PARTITION BY run_id, shape_group, step ORDER BY input_dims) AS lineage,
         count(*) OVER (PARTITION BY run_id, shape_group, step) AS shapes_in_step
  FROM (SELECT DISTINCT run_id, shape_group, step, input_dims FROM ops)
), steady AS (
  -- the groups with as many shapes in every step (and more than one step)
  SELECT run_id, shape_group FROM step_shapes GROUP BY ALL
  HAVING min(shapes_in_step) = max(shapes_in_step) AND count(DISTINCT coalesce(step, -1)) > 1
), positions AS (
  -- one row per dim of each shape of those groups
  SELECT run_id, shape_group, lineage, in_at, d_at, list_extract(list_extract(input_dims, in_at), d_at) AS value
  FROM (SELECT *, unnest(range(1, coalesce(array_length(list_extract(input_dims, in_at)), 0) + 1)) AS d_at
        FROM (SELECT *, unnest(range(1, array_length(input_dims) + 1)) AS in_at
              FROM step_shapes SEMI JOIN steady USING (run_id, shape_group)))
), varying AS (
  -- per shape that changes from step to step, the dims whose values differ
  SELECT run_id, shape_group, lineage,
         map_from_entries(list({'k': in_at * 1000000 + d_at, 'v': {'lo': lo, 'hi': hi}})) AS ranges
  FROM (SELECT run_id, shape_group, lineage, in_at, d_at, min(value) AS lo, max(value) AS hi
        FROM positions GROUP BY ALL HAVING min(value) < max(value))
  GROUP BY ALL
), widened AS (
  -- each shape that changes from step to step, its varying dims widened to their ranges (the
  -- other shapes, most of them, keep their dims): computed once per shape of a step, not per op
  SELECT *, inputs_range_text(lo, hi) AS text
  FROM (
    SELECT s.run_id, s.shape_group, s.step, s.input_dims,
           list_transform(range(1, array_length(s.input_dims) + 1), lambda in_at:
             CASE WHEN list_extract(s.input_dims, in_at) IS NOT NULL THEN list_transform(range(1, array_length(list_extract(s.input_dims, in_at)) + 1), lambda d_at:
               coalesce(v.ranges[in_at * 1000000 + d_at].lo, list_extract(list_extract(s.input_dims, in_at), d_at))) END) AS lo,
           list_transform(range(1, array_length(s.input_dims) + 1), lambda in_at:
             CASE WHEN list_extract(s.input_dims, in_at) IS NOT NULL THEN list_transform(range(1, array_length(list_extract(s.input_dims, in_at)) + 1), lambda d_at:
               coalesce(v.ranges[in_at * 1000000 + d_at].hi, list_extract(list_extract(s.input_dims, in_at), d_at))) END) AS hi
    FROM step_shapes s JOIN varying v USING (run_id, shape_group, lineage)
  )
)
SELECT o.run_id, o.event_id, o.input_dims, o.input_dtypes,
       coalesce(w.lo, o.input_dims) AS dims_lo,
       coalesce(w.hi, o.input_dims) AS dims_hi,
       coalesce(w.text, o.input_dims::VARCHAR) AS dims_text,
       w.lo IS NOT NULL AS has_range
FROM ops o
LEFT JOIN widened w ON w.run_id = o.run_id AND w.shape_group = o.shape_group AND w.step IS NOT DISTINCT FROM o.step
                   AND w.input_dims = o.input_dims;

-- Each op's input dims with the dims that grow with the sequence as ranges. In a decode loop a dim
-- of an op's inputs often grows by one each step ([1005, 8, 128], [1006, 8, 128], ...). Ops of one
-- run with the same name, call site, input dtypes and input ranks form a group; when every
-- profiler step (and the ops outside every step, as one more) holds the same number of distinct
-- shapes of the group, the k-th shape of each step (in the order of their dims) are one shape that
-- changes from step to step, and a dim position where their values differ varies. dims_lo/dims_hi
-- are the op's input dims with each varying position widened to the smallest and largest value it
-- takes; other dims are the op's own, so two shapes of one step never merge. Reports group ops by
-- (dims_lo, dims_hi) and show dims_text ('[[1005..1007, 8, 128]]'), or the exact dims when asked.
-- `op_shapes_named` reads the ops of some names only.
-- @columns-as op_shapes_named: run_id, event_id, input_dims, input_dtypes, dims_lo, dims_hi, dims_text, has_range
CREATE OR REPLACE VIEW op_shapes AS
SELECT * FROM op_shapes_named(NULL::VARCHAR[]);

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
