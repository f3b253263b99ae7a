-- Prometheus -> runs, step 4: the samples the derivation uses, one point each, with the pod interval they
-- belong to. A counter's point is its increase since the series' previous finite sample (after a reset,
-- the counter counted up from 0: the increase is its value) over the seconds between them; a pair more than
-- $max_gap_s apart is a gap and gives no point. A gauge's point is its value. CPU counts the idle mode only;
-- network devices matching $nic_exclude are not counted; pcm-sensor-server's system aggregate only. A point
-- goes to the pod its series names (GPU series of a training pod), else to the pods placed on its host in
-- the interval that holds it (the later scrape of a pair): interval k = ceil((ts - t0) / step) - 1.
-- A reading no sample can use (`fault`: not a finite number; negative; a GPU ratio outside [0, 1], or
-- GPU_UTIL outside [0, 100], by more than $tol) takes no part in a point; it is kept with its fault and
-- value in v, placed like the others, so that the readings of the pods' intervals left out are quarantined
-- (prom_bad_readings.sql). A negative NIC speed is node_exporter's "unknown", not a fault.
CREATE OR REPLACE TEMP TABLE obs_all AS
WITH picked AS (
    SELECT *
    FROM series
    WHERE (kind <> 'cpu' OR mode = 'idle')
      AND (kind NOT IN ('net_rx', 'net_tx', 'nic_speed') OR NOT regexp_full_match(coalesce(device, ''), $nic_exclude))
      AND (kind NOT IN ('dram_read', 'dram_write') OR coalesce(aggregate, 'system') = 'system')
),
pod_hosts AS (
    SELECT DISTINCT namespace, job, pod, t0, k, unnest([node, host_ip]) AS host
    FROM pod_nodes
    WHERE n_nodes = 1
),
gpu_owned AS (
    SELECT s.metric, s.labels, p.namespace, p.job, p.pod, p.t0, true AS own
    FROM picked AS s
    JOIN pods AS p ON p.namespace = s.gpu_ns AND p.pod = s.gpu_pod
    WHERE s.kind LIKE 'gpu%' AND p.of_the_day AND p.role IS NOT NULL
),
host_owned AS (
    SELECT DISTINCT s.metric, s.labels, h.namespace, h.job, h.pod, h.t0, false AS own
    FROM picked AS s
    JOIN pod_hosts AS h ON h.host = s.host
    ANTI JOIN gpu_owned AS g ON g.metric = s.metric AND g.labels = s.labels
),
owners AS (
    SELECT * FROM gpu_owned
    UNION ALL
    SELECT * FROM host_owned
),
raw AS (
    SELECT s.kind, s.metric, s.labels, s.host, s.device, s.gpu_id, s.is_counter, x.ts, x.value,
           CASE WHEN NOT isfinite(x.value) THEN 'not_finite'
                WHEN s.kind IN ('gpu_active', 'gpu_tensor', 'gpu_util') THEN
                    CASE WHEN x.value / (CASE s.kind WHEN 'gpu_util' THEN 100 ELSE 1 END)
                              NOT BETWEEN -$tol AND 1 + $tol THEN 'out_of_bounds' END
                WHEN s.kind <> 'nic_speed' AND x.value < 0 THEN 'out_of_bounds' END AS fault
    FROM m AS x
    JOIN picked AS s USING (metric, labels)
    SEMI JOIN owners AS o ON o.metric = s.metric AND o.labels = s.labels
),
pairs AS (
    SELECT *,
           lag(value) OVER w AS prev_value,
           epoch(ts) - epoch(lag(ts) OVER w) AS dt
    FROM raw
    WHERE fault IS NULL
    WINDOW w AS (PARTITION BY metric, labels ORDER BY ts)
),
points AS (
    SELECT kind, metric, labels, host, device, gpu_id, is_counter, ts,
           CASE WHEN NOT is_counter THEN value
                WHEN value >= prev_value THEN value - prev_value
                ELSE value END AS v,
           CASE WHEN is_counter THEN dt END AS dt,
           CAST(NULL AS VARCHAR) AS fault
    FROM pairs
    WHERE NOT is_counter OR (dt > 0 AND dt <= $max_gap_s)
    UNION ALL
    SELECT kind, metric, labels, host, device, gpu_id, is_counter, ts, value AS v, NULL AS dt, fault
    FROM raw
    WHERE fault IS NOT NULL
),
placed AS (
    SELECT o.namespace, o.job, o.pod, o.own, p.*,
           CAST(ceil((epoch_us(p.ts) - epoch_us(o.t0)) / $step_us) AS BIGINT) - 1 AS k
    FROM points AS p
    JOIN owners AS o USING (metric, labels)
)
SELECT pl.namespace, pl.job, pl.pod, pl.k, pl.kind, pl.labels, pl.host, pl.device, pl.gpu_id, pl.is_counter,
       pl.ts, pl.v, pl.dt, pl.fault
FROM placed AS pl
SEMI JOIN pod_hosts AS h
    ON h.namespace = pl.namespace AND h.pod = pl.pod AND h.k = pl.k AND (pl.own OR h.host = pl.host)
