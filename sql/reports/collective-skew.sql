-- title: Collective skew across the ranks of a job
-- description: For the runs of one job (default: every run, which must then be one job; select one with --run label:job=NAME or several --run): every collective instance, its communication kernels matched across the ranks by their order on the communicator (the `Process Group Name` arg, else the stream; macro collective_skew, as TraceLens's build_df_nccl_implicit_sync_cat), with the start skew (last rank's start minus the first's), the end skew, the rank that started last (the one the others waited for; its run is the row's run), and the bandwidth over the shortest rank's kernel time. Stops with an error when the runs form several jobs (view `run_jobs`) or repeat a rank.
-- requires: one_job
-- empty: no communication kernel ran on two ranks of the selected job
-- param: collective VARCHAR = '' -- only instances of this collective (allreduce, allgather, ...; '' for all)
-- column: run_id VARCHAR [key] -- run of the rank that started the collective last
-- column: run_name VARCHAR [key] -- name of that run
-- column: communicator VARCHAR [key] -- process group (`Process Group Name`), else 'stream N'
-- column: instance BIGINT [key] -- n: the n-th collective of the communicator on each rank
-- column: collective VARCHAR [key] -- collective of the instance ('mixed' when the ranks' kernels differ)
-- column: ranks BIGINT [detail] -- ranks that ran it
-- column: latest_rank BIGINT [result] -- rank that started last: the one the others waited for
-- column: start_ns BIGINT [detail] -- first rank's start, ns (absolute, as events.ts_ns)
-- column: start_skew_ns BIGINT [result] -- last start minus first start across the ranks, ns
-- column: end_skew_ns BIGINT [result] -- last end minus first end across the ranks, ns
-- column: shortest_dur_ns BIGINT [detail] -- shortest rank's kernel time (TraceLens's comm_latency), ns
-- column: longest_dur_ns BIGINT [detail] -- longest rank's kernel time, ns
-- column: msg_bytes BIGINT [detail] -- message size from the kernels' args (out bytes for allgather), NULL when unknown
-- column: algbw_gb_s DOUBLE [result] -- msg_bytes over shortest_dur_ns, GB/s (NULL when the size is unknown)
-- column: busbw_gb_s DOUBLE [result] -- algbw_gb_s times the bus factor of the collective and its ranks, GB/s
SELECT s.latest_run_id AS run_id, r.name AS run_name, s.communicator, s.instance, s.collective, s.ranks, s.latest_rank,
       s.first_start_ns AS start_ns, s.start_skew_ns, s.end_skew_ns, s.shortest_dur_ns, s.longest_dur_ns, s.msg_bytes,
       round(s.algbw_gb_s, 3) AS algbw_gb_s, round(s.busbw_gb_s, 3) AS busbw_gb_s
FROM collective_skew((SELECT list(run_id) FROM report_runs)) s JOIN runs r ON r.run_id = s.latest_run_id
WHERE $collective = '' OR s.collective = $collective
ORDER BY s.first_start_ns, s.communicator, s.instance
