-- title: Frequent kernel sequences: fusion candidates
-- description: The most common runs of --param length consecutive kernels on a stream (each position of a stream starts one run, so runs overlap): per run and sequence of kernel names, how often it occurs, the GPU time of its kernels, the span from the first kernel's start to the last one's end, and the op and call site that launched its first kernel (the most common when several). A sequence that occurs often with short kernels and a span much longer than its kernel time is a candidate for fusion (torch.compile, a fused kernel) or CUDA graphs. HTA's get_frequent_cuda_kernel_sequences differs: it takes every call of one named operator and counts, per call, the operator's name followed by all the kernels its leaf ops launched (one pattern per call, of any length).
-- per-run: true
-- empty: no stream of the selected runs has length kernels in a row, or no sequence occurs min_count times
-- param: length BIGINT = 3 -- number of consecutive kernels in a sequence
-- param: min_count BIGINT = 2 -- leave out sequences that occur fewer times than this
-- param: top BIGINT = 50 -- the most frequent sequences kept per run
-- column: run_id VARCHAR [key] -- the run
-- column: run_name VARCHAR [key] -- name of the run
-- column: sequence VARCHAR [key] -- the kernel names in order, joined by ' | '
-- column: occurrences BIGINT [result] -- times the sequence runs back to back on a stream
-- column: kernel_time_ns BIGINT [result] -- GPU time of the sequence's kernels over all occurrences, ns
-- column: time_pct DOUBLE [result] -- kernel_time_ns over the run's total kernel time, percent (occurrences overlap, so shares can add up to more than 100)
-- column: avg_span_ns BIGINT [detail] -- average time from the first kernel's start to the last kernel's end, ns
-- column: avg_kernel_ns BIGINT [detail] -- average GPU time of one occurrence's kernels, ns
-- column: streams BIGINT [detail] -- streams the sequence occurs on
-- column: first_op VARCHAR [result] -- CPU op that launched the first kernel (the most common one; of equally common ones, the first by name)
-- column: first_call_site VARCHAR [detail] -- Python call site of that launch (the most common one; of equally common ones, the first by text)
WITH k AS (
  SELECT run_id, device, stream, event_id, name, ts_ns, dur_ns, op_name, call_site
  FROM gpu_kernels WHERE run_id IN (SELECT run_id FROM report_runs) AND dur_ns >= 0
), w AS (
  SELECT run_id, device, stream, op_name, call_site,
         list(name) OVER seq AS names,
         sum(dur_ns) OVER seq AS kernel_ns,
         max(ts_ns + dur_ns) OVER seq - ts_ns AS span_ns
  FROM k
  WINDOW seq AS (PARTITION BY run_id, device, stream ORDER BY ts_ns, event_id
                 ROWS BETWEEN CURRENT ROW AND greatest($length, 1) - 1 FOLLOWING)
), runs_total AS (
  SELECT run_id, sum(dur_ns) AS total_ns FROM k GROUP BY run_id
), seqs AS (
  SELECT run_id, array_to_string(names, ' | ') AS sequence, count(*) AS occurrences,
         sum(kernel_ns)::BIGINT AS kernel_time_ns, round(avg(span_ns))::BIGINT AS avg_span_ns,
         round(avg(kernel_ns))::BIGINT AS avg_kernel_ns, count(DISTINCT (device, stream)) AS streams,
         mode(op_name ORDER BY op_name) AS first_op,
         mode(call_site ORDER BY call_site) AS first_call_site
  FROM w
  WHERE array_length(names) = greatest($length, 1)
  GROUP BY run_id, names
  HAVING count(*) >= $min_count
), ranked AS (
  SELECT *, row_number() OVER (PARTITION BY run_id ORDER BY occurrences DESC, kernel_time_ns DESC, sequence) AS position
  FROM seqs
)
SELECT s.run_id, r.name AS run_name, s.sequence, s.occurrences, s.kernel_time_ns,
       round(100.0 * s.kernel_time_ns / nullif(t.total_ns, 0), 2) AS time_pct,
       s.avg_span_ns, s.avg_kernel_ns, s.streams, s.first_op, s.first_call_site
FROM ranked s JOIN runs r USING (run_id) JOIN runs_total t USING (run_id)
WHERE s.position <= $top
ORDER BY s.run_id, s.position
