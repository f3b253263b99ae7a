-- Prometheus -> runs, step 2: where each pod of the day's jobs ran, per interval of its job's grid
-- ($step_us long, from t0): interval k holds the times (t0 + k step, t0 + (k + 1) step]. A pod is on a node
-- in an interval where kube_pod_info places it there and, if the pod reports phases at all
-- (kube_pod_status_phase), one of its phase samples in that interval says Running (a finished pod that is
-- kept shows no more samples). A run's samples start at t0: the scrape at t0 opens interval 0. An interval in which a pod is placed on two nodes (it was restarted on
-- another) has no sample. The anchor of a pod's interval is its first kube_pod_info sample in it.
CREATE OR REPLACE TEMP TABLE pod_nodes AS
WITH info AS (
    SELECT json_extract_string(labels, '$.namespace') AS namespace,
           json_extract_string(labels, '$.pod') AS pod,
           json_extract_string(labels, '$.node') AS node,
           json_extract_string(labels, '$.host_ip') AS host_ip,
           ts, source_file, row_number
    FROM m
    WHERE metric = $pod_info_metric
),
placed AS (
    SELECT p.namespace, p.job, p.pod, p.role, p.t0, i.node, i.host_ip, i.source_file, i.row_number, i.ts,
           CAST(ceil((epoch_us(i.ts) - epoch_us(p.t0)) / $step_us) AS BIGINT) - 1 AS k
    FROM info AS i
    JOIN pods AS p USING (namespace, pod)
    WHERE p.of_the_day AND p.role IS NOT NULL AND i.node IS NOT NULL AND i.ts > p.t0
),
phased AS (
    SELECT p.namespace, p.pod,
           CAST(ceil((epoch_us(h.ts) - epoch_us(p.t0)) / $step_us) AS BIGINT) - 1 AS k,
           bool_or(h.phase = 'Running') AS running
    FROM phases AS h
    JOIN pods AS p USING (namespace, pod)
    WHERE p.of_the_day
    GROUP BY ALL
),
reports AS (SELECT DISTINCT namespace, pod FROM phased)
SELECT pl.namespace, pl.job, pl.pod, pl.role, pl.t0, pl.k,
       min(pl.node) AS node, min(pl.host_ip) AS host_ip, count(DISTINCT pl.node) AS n_nodes,
       min_by(pl.source_file, (pl.ts, pl.source_file, pl.row_number)) AS anchor_file,
       min_by(pl.row_number, (pl.ts, pl.source_file, pl.row_number)) AS anchor_row
FROM placed AS pl
LEFT JOIN phased AS ph USING (namespace, pod, k)
LEFT JOIN reports AS rp ON rp.namespace = pl.namespace AND rp.pod = pl.pod
WHERE rp.pod IS NULL OR coalesce(ph.running, false)
GROUP BY pl.namespace, pl.job, pl.pod, pl.role, pl.t0, pl.k
