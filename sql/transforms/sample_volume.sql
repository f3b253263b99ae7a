-- Per run of the day (registered relation `runs`: run_id, source, start_ts, end_ts, declared servers): the
-- samples that arrived in the day's staged samples files ($samples, a list of Parquet files) and the
-- sampling interval, the median over the run's servers of each server's mean spacing
-- ((last - first) / (n - 1)); null for a run with no server sampled twice. One group-by over three
-- columns of the samples.
WITH per_server AS (
    SELECT run_id, server_id, count(*) AS n,
           epoch(max(ts)) - epoch(min(ts)) AS span_s
    FROM read_parquet($samples)
    GROUP BY run_id, server_id
),
per_run AS (
    SELECT run_id, sum(n) AS samples, count(*) AS servers_seen,
           median(span_s / (n - 1)) FILTER (WHERE n > 1) AS interval_s
    FROM per_server
    GROUP BY run_id
)
SELECT r.run_id, r.source, r.declared_servers,
       epoch(r.end_ts) - epoch(r.start_ts) AS window_s,
       coalesce(p.samples, 0) AS samples,
       coalesce(p.servers_seen, 0) AS servers_seen,
       p.interval_s
FROM runs AS r
LEFT JOIN per_run AS p USING (run_id)
ORDER BY r.run_id
