-- title: GPU idle gaps: how many, how long, per stream
-- description: The distribution of the idle gaps between consecutive GPU work (kernels, memcpys, memsets) on each stream, as HTA's get_idle_time_breakdown(show_idle_interval_stats=True) gives it: per run, device, stream and gap category (all, host_wait, kernel_wait, other, as report idle splits them; view gpu_idle_gaps lists every gap), the number of gaps, their total, and their min, median, p90, p99, max and mean. Many short gaps (a low p90, most idle time in gaps under small_gap_ns) mean the GPU waits on kernel launches (launch bound: fuse kernels, CUDA graphs); few long ones mean host waits (data loading, synchronization, Python). Gaps are measured as in report idle (from the latest end so far on the stream; only gaps longer than 0), so idle_ns of category all equals idle's idle_ns. Percentiles are nearest-rank: the smallest gap with at least that share of the gaps at or below it.
-- per-run: true
-- empty: no gaps between GPU work on any stream of the selected runs (no kernels, memcpys or memsets, or work back to back)
-- param: kernel_wait_threshold_ns BIGINT = 30000 -- gaps shorter than this (and not host waits) are kernel_wait, ns (30 us, HTA's default, as report idle)
-- param: small_gap_ns BIGINT = 10000 -- gaps shorter than this count as small (launch-bound) gaps, ns
-- column: run_id VARCHAR [key] -- the run
-- column: run_name VARCHAR [key] -- name of the run
-- column: device BIGINT [key] -- GPU index
-- column: stream BIGINT [key] -- stream
-- column: category VARCHAR [key] -- all (every gap of the stream), host_wait, kernel_wait or other
-- column: gaps BIGINT [result] -- number of gaps
-- column: idle_ns BIGINT [result] -- total length of the gaps, ns
-- column: idle_pct DOUBLE [detail] -- idle_ns over the stream's idle time (all its gaps), percent
-- column: min_ns BIGINT [detail] -- shortest gap, ns
-- column: p50_ns BIGINT [result] -- median gap (nearest rank), ns
-- column: p90_ns BIGINT [result] -- 90th percentile gap (nearest rank), ns
-- column: p99_ns BIGINT [detail] -- 99th percentile gap (nearest rank), ns
-- column: max_ns BIGINT [result] -- longest gap, ns
-- column: mean_ns BIGINT [detail] -- average gap, ns (rounded)
-- column: small_gaps BIGINT [detail] -- gaps shorter than small_gap_ns
-- column: small_idle_pct DOUBLE [result] -- share of idle_ns in gaps shorter than small_gap_ns, percent
WITH g AS (
  SELECT run_id, device, stream, gap_ns,
         CASE WHEN is_host_wait THEN 'host_wait' WHEN gap_ns < $kernel_wait_threshold_ns THEN 'kernel_wait' ELSE 'other' END AS category
  FROM gpu_idle_gaps WHERE run_id IN (SELECT run_id FROM report_runs)
), stats AS (
  SELECT run_id, device, stream, coalesce(category, 'all') AS category,
         count(*) AS gaps, sum(gap_ns)::BIGINT AS idle_ns,
         min(gap_ns) AS min_ns, quantile_disc(gap_ns, 0.5) AS p50_ns, quantile_disc(gap_ns, 0.9) AS p90_ns,
         quantile_disc(gap_ns, 0.99) AS p99_ns, max(gap_ns) AS max_ns, round(avg(gap_ns))::BIGINT AS mean_ns,
         count(*) FILTER (WHERE gap_ns < $small_gap_ns) AS small_gaps,
         coalesce(sum(gap_ns) FILTER (WHERE gap_ns < $small_gap_ns), 0)::BIGINT AS small_idle_ns
  FROM g
  GROUP BY GROUPING SETS ((run_id, device, stream), (run_id, device, stream, category))
)
SELECT s.run_id, r.name AS run_name, s.device, s.stream, s.category, s.gaps, s.idle_ns,
       round(100.0 * s.idle_ns / nullif(sum(s.idle_ns) FILTER (WHERE s.category = 'all') OVER (PARTITION BY s.run_id, s.device, s.stream), 0), 2) AS idle_pct,
       s.min_ns, s.p50_ns, s.p90_ns, s.p99_ns, s.max_ns, s.mean_ns, s.small_gaps,
       round(100.0 * s.small_idle_ns / nullif(s.idle_ns, 0), 2) AS small_idle_pct
FROM stats s JOIN runs r USING (run_id)
ORDER BY s.run_id, s.device, s.stream, CASE s.category WHEN 'all' THEN 0 WHEN 'host_wait' THEN 1 WHEN 'kernel_wait' THEN 2 ELSE 3 END
