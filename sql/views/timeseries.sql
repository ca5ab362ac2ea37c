-- requires: gpu
-- Quantities over time, for plots and for the counter tracks of `traceduck export --counters`:
-- the launch queue of each stream, the memory copy bandwidth, the allocated memory.

-- The launch queue of every stream as a step function: one row per time at which its length
-- changes, with the length from then on. The queue is the one of the idle report: a launch call
-- (kernel launch, async copy or set) enters it at the call's start and leaves when its first
-- piece of work starts on the GPU; a CUDA/HIP graph launch counts once (until its first kernel on
-- the stream starts); work whose launch is not in the trace is left out. Changes at one time are
-- netted (a start and a launch at the same ns make no row). HTA's get_queue_length_time_series
-- differs: it counts only non-graph launch names (cudaLaunchKernel, cudaMemcpyAsync, ...) and
-- leaves graph launches and their kernels out.
-- @column run_id VARCHAR Run of the stream.
-- @columns-as device_events: device, stream
-- @column ts_ns BIGINT Time of the change, ns (absolute, as events.ts_ns).
-- @column queue_length BIGINT Launches not yet started on the stream from ts_ns on.
-- @column until_ns BIGINT Time of the stream's next change, ns; NULL for the last (the queue is then empty).
CREATE OR REPLACE VIEW launch_queue AS
WITH launched AS (
  SELECT run_id, device, stream, min(ts_ns - queue_delay_ns) AS launch_ts_ns, min(ts_ns) AS start_ns
  FROM device_work() WHERE launch_event_id IS NOT NULL AND dur_ns >= 0
  GROUP BY run_id, device, stream, launch_event_id
), changes AS (
  SELECT run_id, device, stream, ts_ns, sum(d)::BIGINT AS delta
  FROM (SELECT run_id, device, stream, launch_ts_ns AS ts_ns, 1 AS d FROM launched
        UNION ALL
        SELECT run_id, device, stream, start_ns, -1 FROM launched)
  GROUP BY ALL HAVING sum(d) <> 0
)
SELECT run_id, device, stream, ts_ns,
       (sum(delta) OVER (PARTITION BY run_id, device, stream ORDER BY ts_ns ROWS UNBOUNDED PRECEDING))::BIGINT AS queue_length,
       lead(ts_ns) OVER (PARTITION BY run_id, device, stream ORDER BY ts_ns) AS until_ns
FROM changes;

-- The launch queue of every stream (`launch_queue`) in buckets of bucket_ns from the run's
-- start: per bucket the time-weighted mean length and the largest, over every bucket from the
-- stream's first launch to its last start (time outside the queue's span counts as empty).
-- HTA's get_queue_length_time_series gives the change points instead (as `launch_queue` does).
-- @arg bucket_ns BIGINT Bucket width, ns (e.g. 1000000 for 1 ms).
-- @columns-as launch_queue: run_id, device, stream
-- @column bucket BIGINT Bucket number: the bucket covers [start_ns + bucket x bucket_ns, + bucket_ns) of the run's start_ns.
-- @column bucket_start_ns BIGINT Start of the bucket, ns after the run's start (runs.start_ns).
-- @column mean_queue_length DOUBLE Queue length averaged over the bucket's time.
-- @column max_queue_length BIGINT Largest queue length in the bucket.
CREATE OR REPLACE MACRO queue_length_series(bucket_ns) AS TABLE
WITH seg AS (
  SELECT q.run_id, q.device, q.stream, q.ts_ns - r.start_ns AS lo, q.until_ns - r.start_ns AS hi, q.queue_length
  FROM launch_queue q JOIN runs r USING (run_id) WHERE q.until_ns IS NOT NULL
), cut AS (
  SELECT run_id, device, stream, queue_length, lo, hi, unnest(range(lo // bucket_ns, (hi - 1) // bucket_ns + 1)) AS bucket
  FROM seg
)
SELECT run_id, device, stream, bucket, bucket * bucket_ns AS bucket_start_ns,
       sum(queue_length * (least(hi, (bucket + 1) * bucket_ns) - greatest(lo, bucket * bucket_ns)))::DOUBLE / bucket_ns AS mean_queue_length,
       max(queue_length) AS max_queue_length
FROM cut GROUP BY ALL;

-- Time each stream's launch queue (`launch_queue`) held at least max_queue_length launches:
-- HTA's get_time_spent_blocked_on_full_queue, whose rule this is (the time between a change
-- point with queue_length >= max_queue_length and the next change, summed per stream; relative
-- to the trace's duration). Past about 1024 pending launches (HTA's
-- CUDA_MAX_LAUNCH_QUEUE_PER_STREAM) the CUDA runtime blocks the launching CPU thread until
-- work starts, so this is the time the CPU can have been blocked on a full queue. One row per
-- stream that reached the threshold (HTA keeps one stream per rank).
-- @arg max_queue_length BIGINT Queue length that counts as full (HTA's default: 1024).
-- @columns-as launch_queue: run_id, device, stream
-- @column full_ns BIGINT Time the queue held max_queue_length launches or more, ns.
-- @column full_pct DOUBLE full_ns over the run's duration (runs.end_ns - runs.start_ns), percent.
-- @column peak_queue_length BIGINT Longest queue of the stream.
CREATE OR REPLACE MACRO queue_full_time(max_queue_length := 1024) AS TABLE
SELECT * FROM (
  SELECT q.run_id, q.device, q.stream,
         coalesce(sum(q.until_ns - q.ts_ns) FILTER (WHERE q.queue_length >= max_queue_length), 0)::BIGINT AS full_ns,
         round(100.0 * coalesce(sum(q.until_ns - q.ts_ns) FILTER (WHERE q.queue_length >= max_queue_length), 0)
               / nullif(any_value(r.end_ns - r.start_ns), 0), 3) AS full_pct,
         max(q.queue_length) AS peak_queue_length
  FROM launch_queue q JOIN runs r USING (run_id)
  GROUP BY q.run_id, q.device, q.stream)
WHERE peak_queue_length >= max_queue_length;

-- Every memory copy and set on the GPU with its size and rate: what the memory bandwidth series
-- are made of. HTA's get_memory_bw_time_series reads the `memory bandwidth (GB/s)` arg Kineto
-- writes; here the rate is bytes over duration (the same number to Kineto's rounding), and a
-- copy of 0 ns has no rate (HTA makes it 1 us long).
-- @columns-as device_events: run_id, event_id, device, stream, ts_ns, dur_ns
-- @column kind VARCHAR HtoD, DtoH, DtoD, PtoP, ... for a copy (from its name), 'Memset' for a set.
-- @column bytes BIGINT Bytes copied or set (the `bytes` arg).
-- @column gb_s DOUBLE bytes / dur_ns: GB/s (1e9 bytes per second); NULL for a copy of 0 ns.
CREATE OR REPLACE VIEW memory_transfers AS
SELECT w.run_id, w.event_id, w.device, w.stream, w.ts_ns, w.dur_ns,
       CASE WHEN w.work_kind = 'memset' THEN 'Memset'
            ELSE coalesce(nullif(regexp_extract(w.name, 'Memcpy (\w+)', 1), ''), 'Memcpy') END AS kind,
       b.bytes, b.bytes / nullif(w.dur_ns, 0) AS gb_s
FROM device_events(['memcpy', 'memset']) w
JOIN (SELECT run_id, event_id,
             coalesce(int_value, TRY_CAST(real_value AS BIGINT), TRY_CAST(regexp_extract(string_value, '(\d+)', 1) AS BIGINT)) AS bytes
      FROM args WHERE key = 'bytes') b USING (run_id, event_id)
WHERE w.dur_ns >= 0;

-- Memory copy bandwidth per device and kind of copy (`memory_transfers`) in buckets of bucket_ns
-- from the run's start: the bytes each copy moved inside the bucket (at its own constant rate;
-- a copy of 0 ns moves all of its bytes at its start) over the bucket's width. This is the mean
-- over the bucket of HTA's get_memory_bw_time_series (the summed rate of the copies running at
-- each time, per kind). Buckets without copies have no row (0 GB/s).
-- @arg bucket_ns BIGINT Bucket width, ns (e.g. 1000000 for 1 ms).
-- @columns-as memory_transfers: run_id, device, kind
-- @columns-as queue_length_series: bucket, bucket_start_ns
-- @column bytes DOUBLE Bytes moved in the bucket.
-- @column gb_s DOUBLE bytes / bucket_ns: mean bandwidth over the bucket, GB/s.
CREATE OR REPLACE MACRO memory_bw_series(bucket_ns) AS TABLE
WITH seg AS (
  SELECT t.run_id, t.device, t.kind, t.bytes, t.ts_ns - r.start_ns AS lo, t.ts_ns - r.start_ns + t.dur_ns AS hi
  FROM memory_transfers t JOIN runs r USING (run_id)
), cut AS (
  SELECT *, unnest(range(lo // bucket_ns, greatest(hi - 1, lo) // bucket_ns + 1)) AS bucket FROM seg
)
SELECT run_id, device, kind, bucket, bucket * bucket_ns AS bucket_start_ns,
       sum(CASE WHEN hi = lo THEN bytes
                ELSE bytes * (least(hi, (bucket + 1) * bucket_ns) - greatest(lo, bucket * bucket_ns))::DOUBLE / (hi - lo) END) AS bytes,
       sum(CASE WHEN hi = lo THEN bytes
                ELSE bytes * (least(hi, (bucket + 1) * bucket_ns) - greatest(lo, bucket * bucket_ns))::DOUBLE / (hi - lo) END) / bucket_ns AS gb_s
FROM cut GROUP BY ALL;

-- Allocated memory over time, from the profiler's `[memory]` instant events (profile_memory=True):
-- each event's `Total Allocated` (and `Total Reserved`), the allocator's total on its device right
-- after the allocation or free the event records.
-- @column run_id VARCHAR Run of the event.
-- @column event_id BIGINT The [memory] event.
-- @columns-as events: pid
-- @column ts_ns BIGINT Time of the allocation or free, ns.
-- @column device VARCHAR 'cpu' or 'device type T:id' (cuda is type 1), as in the memory report.
-- @column bytes BIGINT Size of the allocation (negative for a free), the `Bytes` arg.
-- @column total_allocated BIGINT Bytes allocated on the device after it (`Total Allocated`).
-- @column total_reserved BIGINT Bytes reserved by the allocator on the device after it (`Total Reserved`), NULL when absent.
CREATE OR REPLACE VIEW memory_allocated AS
SELECT e.run_id, e.event_id, any_value(e.pid) AS pid, any_value(e.ts_ns) AS ts_ns,
       CASE WHEN max(a.int_value) FILTER (WHERE a.key = 'Device Type') = 0 THEN 'cpu'
            ELSE printf('device type %d:%d', max(a.int_value) FILTER (WHERE a.key = 'Device Type'),
                        max(a.int_value) FILTER (WHERE a.key = 'Device Id')) END AS device,
       max(a.int_value) FILTER (WHERE a.key = 'Bytes') AS bytes,
       max(a.int_value) FILTER (WHERE a.key = 'Total Allocated') AS total_allocated,
       max(a.int_value) FILTER (WHERE a.key = 'Total Reserved') AS total_reserved
FROM events e JOIN args a ON a.run_id = e.run_id AND a.event_id = e.event_id
WHERE e.name = '[memory]' AND e.ts_ns IS NOT NULL
GROUP BY e.run_id, e.event_id
HAVING max(a.int_value) FILTER (WHERE a.key = 'Total Allocated') IS NOT NULL;
