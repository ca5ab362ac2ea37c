-- title: Memory allocations
-- description: From the profiler's [memory] events: peak allocated memory per device, the largest allocations with the op and call site that made them, and allocations by call site.
-- per-run: true
-- empty: no [memory] events: profile with profile_memory=True
-- column: run_id VARCHAR [key] -- the run
-- column: run_name VARCHAR [key] -- name of the run
-- column: section VARCHAR [key] -- 'peak' (per device), 'largest allocation', or 'by call site'
-- column: position BIGINT [key] -- position within the section
-- column: device VARCHAR [key] -- 'cpu' or 'device type T:id' (cuda is type 1)
-- column: bytes BIGINT [result] -- peak: allocated bytes at the peak; largest allocation: its size; by call site: bytes allocated in total
-- column: allocations BIGINT [result] -- number of allocations (1 for a single allocation; NULL for the peak)
-- column: op_name VARCHAR [result] -- CPU op that made the allocation (at the peak: the op of the allocation that reached it)
-- column: call_site VARCHAR [key] -- innermost user frame of the allocation's Python stack
-- column: ts_ns BIGINT [detail] -- when the allocation (or the peak) happened, ns (absolute, as in events.ts_ns; by call site: the first allocation)
WITH mem AS (
  SELECT e.run_id, e.event_id, e.ts_ns, e.cpu_op_id, e.stack_id,
         max(a.int_value) FILTER (WHERE a.key = 'Bytes') AS bytes,
         max(a.int_value) FILTER (WHERE a.key = 'Total Allocated') AS total_allocated,
         max(a.int_value) FILTER (WHERE a.key = 'Device Type') AS device_type,
         max(a.int_value) FILTER (WHERE a.key = 'Device Id') AS device_id
  FROM events e JOIN args a ON a.run_id = e.run_id AND a.event_id = e.event_id
  WHERE e.name = '[memory]' AND e.run_id IN (SELECT run_id FROM report_runs)
  GROUP BY e.run_id, e.event_id, e.ts_ns, e.cpu_op_id, e.stack_id
), m AS (
  SELECT mem.*, CASE WHEN device_type = 0 THEN 'cpu' ELSE printf('device type %d:%d', device_type, device_id) END AS device,
         o.name AS op_name, cs.call_site
  FROM mem
  LEFT JOIN events o ON o.run_id = mem.run_id AND o.event_id = mem.cpu_op_id
  LEFT JOIN call_sites cs ON cs.run_id = mem.run_id AND cs.stack_id = mem.stack_id
), peak AS (
  SELECT run_id, 'peak' AS section, row_number() OVER (PARTITION BY run_id ORDER BY max(total_allocated) DESC, device) AS position,
         device, max(total_allocated) AS bytes, NULL::BIGINT AS allocations,
         -- where the peak was first reached
         arg_max(op_name, (total_allocated, -ts_ns, -event_id)) AS op_name,
         arg_max(call_site, (total_allocated, -ts_ns, -event_id)) AS call_site,
         arg_max(ts_ns, (total_allocated, -ts_ns, -event_id)) AS ts_ns
  FROM m GROUP BY run_id, device
), largest AS (
  SELECT run_id, 'largest allocation' AS section, row_number() OVER (PARTITION BY run_id ORDER BY bytes DESC, ts_ns, event_id) AS position,
         device, bytes, 1::BIGINT AS allocations, op_name, call_site, ts_ns
  FROM m WHERE bytes > 0
  QUALIFY position <= 10
), by_site AS (
  SELECT run_id, 'by call site' AS section, row_number() OVER (PARTITION BY run_id ORDER BY sum(bytes) DESC, coalesce(call_site, '(no Python stack)')) AS position,
         min(device) AS device, sum(bytes)::BIGINT AS bytes, count(*) AS allocations, NULL AS op_name,
         coalesce(call_site, '(no Python stack)') AS call_site, min(ts_ns) AS ts_ns
  FROM m WHERE bytes > 0 GROUP BY run_id, coalesce(call_site, '(no Python stack)')
)
SELECT x.run_id, r.name AS run_name, x.section, x.position, x.device, x.bytes, x.allocations, x.op_name, x.call_site, x.ts_ns
FROM (SELECT * FROM peak UNION ALL SELECT * FROM largest UNION ALL SELECT * FROM by_site) x JOIN runs r USING (run_id)
ORDER BY x.run_id, CASE x.section WHEN 'peak' THEN 0 WHEN 'largest allocation' THEN 1 ELSE 2 END, x.position
