-- requires: stacks, cpu, copies

-- The bytes of each op's tensor inputs (elements times element size; TensorList members not
-- counted), for the ops with these names only (NULL: every op); ops without shapes have no row.
-- @arg names VARCHAR[] Names of the ops to read (NULL: every op).
-- @columns-as cpu_ops: run_id, event_id
-- @column input_bytes BIGINT Bytes of its tensor inputs.
CREATE OR REPLACE MACRO op_input_bytes_named(names) AS TABLE
SELECT run_id, event_id, sum(bytes)::BIGINT AS input_bytes FROM shapes
WHERE member_index IS NULL
  AND (names IS NULL OR (run_id, event_id) IN (SELECT (run_id, event_id) FROM cpu_ops WHERE list_contains(names, name)))
GROUP BY ALL;

-- `op_calls` of the ops with these names only (NULL: every op): overview's findings read the
-- calls of the ops they name.
-- @arg names VARCHAR[] Names of the ops to read (NULL: every op).
-- @columns-as cpu_ops: run_id, event_id, name, step, self_dur_ns, dur_ns, stack_id, call_site
-- @column caller VARCHAR First user frame outward from the call site in another file, else the next one (see `call_chains`).
-- @column caller_chain VARCHAR User frames after the call site up to the caller, innermost first, joined by ' < '.
-- @column dims_text VARCHAR Dims of every input, varying dims as ranges ('[[8, 1005..1007, 64]]'); NULL without record_shapes.
-- @column exact_dims_text VARCHAR Dims of every input, exactly as this call had them.
-- @column dtypes_text VARCHAR A copy's or cast's 'source -> destination' dtype (`tensor_copies`), else the distinct dtypes of its tensor inputs in input order, joined by ', '.
-- @column input_bytes BIGINT Bytes of its tensor inputs (elements times element size); NULL without shapes.
CREATE OR REPLACE MACRO op_calls_named(names) AS TABLE
SELECT o.run_id, o.event_id, o.name, o.step, o.self_dur_ns, o.dur_ns, o.stack_id, o.call_site,
       cc.caller, cc.caller_chain, s.dims_text, s.input_dims::VARCHAR AS exact_dims_text,
       coalesce(t.src_dtype || ' -> ' || t.dst_dtype,
                array_to_string(list_filter(s.input_dtypes, lambda d, i: d IS NOT NULL AND list_position(s.input_dtypes, d) = i),
                                ', ')) AS dtypes_text,
       z.input_bytes
FROM cpu_ops o
LEFT JOIN call_chains cc ON cc.run_id = o.run_id AND cc.stack_id = o.stack_id
LEFT JOIN op_shapes_named(names) s ON s.run_id = o.run_id AND s.event_id = o.event_id
LEFT JOIN op_input_bytes_named(names) z ON z.run_id = o.run_id AND z.event_id = o.event_id
LEFT JOIN tensor_copies t ON t.run_id = o.run_id AND t.event_id = o.event_id
WHERE names IS NULL OR list_contains(names, o.name);

-- Every CPU op call with what a finding says of it: its shape (dims with the dims that grow with
-- the sequence as ranges, see `op_shapes`), dtypes, call site and caller (`call_chains`), step, and
-- the bytes of its tensor inputs. The base of report overview's findings and of reports callers and
-- callees. `op_calls_named` reads the ops of some names only.
-- @columns-as op_calls_named: run_id, event_id, name, step, self_dur_ns, dur_ns, stack_id, call_site, caller, caller_chain, dims_text, exact_dims_text, dtypes_text, input_bytes
CREATE OR REPLACE VIEW op_calls AS
SELECT * FROM op_calls_named(NULL::VARCHAR[]);

-- Bytes for a sentence: one decimal in 1000-based units ('545.3 MB', '2.4 GB', '512 bytes').
-- @arg n BIGINT A number of bytes.
CREATE OR REPLACE MACRO readable_bytes(n) AS
CASE WHEN n >= 1e12 THEN printf('%.1f TB', n / 1e12) WHEN n >= 1e9 THEN printf('%.1f GB', n / 1e9)
     WHEN n >= 1e6 THEN printf('%.1f MB', n / 1e6) WHEN n >= 1e3 THEN printf('%.1f kB', n / 1e3)
     ELSE printf('%d bytes', n::BIGINT) END;
