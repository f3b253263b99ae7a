-- Stragglers and hot shards of one day, from the registered relations `server_windows` and `runs`. In every hour
-- window each server is compared with the median of its role's servers in the run (itself included): a trainer's
-- GPU (its CPU where it has no GPU) at or below $straggler_ratio of the median, a sparse parameter server's memory
-- bandwidth or network at or above $hot_shard_ratio of it. A server is reported when its flagged windows hold at
-- least $sustained_share of its samples; a hot shard on its more imbalanced resource. How long = the flagged
-- windows' samples times the server's sampling interval.
WITH candidates AS (
    SELECT *, CASE role WHEN 'trainer' THEN 'straggler' ELSE 'hot_shard' END AS kind
    FROM (
        UNPIVOT (
            SELECT run_id, server_id, role, window_start, n_samples, first_ts, last_ts,
                   CASE WHEN role = 'trainer' AND gpu_util IS NULL THEN cpu_util END AS cpu,
                   CASE WHEN role = 'trainer' THEN gpu_util END AS gpu,
                   CASE WHEN role = 'sparse_ps' THEN mem_bw_util END AS mem_bw,
                   CASE WHEN role = 'sparse_ps' THEN net_bw_util END AS net_bw
            FROM server_windows
            WHERE role IN ('trainer', 'sparse_ps')
        ) ON cpu, gpu, mem_bw, net_bw INTO NAME resource VALUE util
    )
),
peer_medians AS (
    SELECT run_id, resource, window_start, median(util) AS peer_median, count(*) AS peers
    FROM candidates
    GROUP BY run_id, resource, window_start
),
compared AS (
    SELECT c.*, m.peer_median, m.peers
    FROM candidates AS c
    JOIN peer_medians AS m USING (run_id, resource, window_start)
),
flagged AS (
    SELECT *,
           peers >= 2 AND peer_median > 0
           AND CASE kind WHEN 'straggler' THEN util <= $straggler_ratio * peer_median
                         ELSE util >= $hot_shard_ratio * peer_median END AS flag
    FROM compared
),
per_server AS (
    SELECT run_id, server_id, role, kind, resource,
           sum(n_samples) AS n_samples,
           epoch(max(last_ts) - min(first_ts)) AS span_s,
           sum(n_samples) FILTER (WHERE flag) AS flagged_samples,
           sum(util * n_samples) FILTER (WHERE flag) AS util_x_n,
           sum(peer_median * n_samples) FILTER (WHERE flag) AS peer_x_n,
           max(peers) FILTER (WHERE flag) AS peers,
           min(first_ts) FILTER (WHERE flag) AS first_ts,
           max(last_ts) FILTER (WHERE flag) AS last_ts
    FROM flagged
    GROUP BY run_id, server_id, role, kind, resource
)
SELECT
    CAST($day AS DATE) AS day,
    p.run_id,
    r.source,
    coalesce(r.model_name, '(unknown)') AS model_name,
    coalesce(r.platform, '(unknown)') AS platform,
    p.role, p.server_id, p.kind, p.resource,
    p.util_x_n / p.peer_x_n AS ratio,
    p.util_x_n / p.flagged_samples AS server_util,
    p.peer_x_n / p.flagged_samples AS peer_median_util,
    CAST(p.peers AS INTEGER) AS peers,
    CASE WHEN p.n_samples > 1 THEN p.flagged_samples * p.span_s / (p.n_samples - 1) ELSE 0 END AS flagged_s,
    p.flagged_samples / p.n_samples AS share_of_samples,
    p.first_ts, p.last_ts
FROM per_server AS p
JOIN runs AS r USING (run_id)
WHERE p.flagged_samples >= $sustained_share * p.n_samples
QUALIFY row_number() OVER (
    PARTITION BY p.run_id, p.server_id, p.kind
    ORDER BY CASE p.kind WHEN 'hot_shard' THEN -ratio ELSE ratio END, p.resource
) = 1
ORDER BY p.run_id, p.kind, p.server_id
