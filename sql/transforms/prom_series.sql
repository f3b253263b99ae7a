-- Prometheus -> runs, step 3: every series of the metrics the mapping reads (the registered relation
-- `metric_kinds`: metric -> kind), with the keys the derivation needs. A series' host is the first of the
-- labels in `node_paths` (in order; a port dropped) whose value is a node name or host IP that kube_pod_info
-- gives: an exporter's instance may be an IP, and dcgm-exporter's Hostname names its own pod under
-- Kubernetes (no node: ignored). A GPU series may instead name its pod (exported_pod, else pod, with
-- its namespace). A GPU is told by UUID, uuid (older dcgm-exporters) or gpu. PCIe and NVLink bytes are a
-- counter where the scrape typed them so, else a gauge of bytes/s (API responses carry no types).
CREATE OR REPLACE TEMP TABLE series AS
WITH s AS (
    SELECT mk.kind, x.metric, x.labels, any_value(x.type) AS type
    FROM m AS x
    JOIN metric_kinds AS mk USING (metric)
    GROUP BY mk.kind, x.metric, x.labels
),
known AS (
    SELECT DISTINCT h AS host
    FROM (
        SELECT unnest([json_extract_string(labels, '$.node'), json_extract_string(labels, '$.host_ip')]) AS h
        FROM m
        WHERE metric = $pod_info_metric
    )
    WHERE h IS NOT NULL
),
candidates AS (
    SELECT s.metric, s.labels, np.i,
           regexp_replace(json_extract_string(s.labels, np.path), ':[0-9]+$', '') AS host
    FROM s
    CROSS JOIN node_paths AS np
),
hosted AS (
    SELECT c.metric, c.labels, min_by(c.host, c.i) AS host
    FROM candidates AS c
    JOIN known AS k USING (host)
    GROUP BY c.metric, c.labels
)
SELECT s.kind, s.metric, s.labels, s.type, h.host,
       CASE WHEN json_extract_string(s.labels, '$.exported_pod') IS NOT NULL
            THEN json_extract_string(s.labels, '$.exported_namespace')
            ELSE json_extract_string(s.labels, '$.namespace') END AS gpu_ns,
       coalesce(json_extract_string(s.labels, '$.exported_pod'), json_extract_string(s.labels, '$.pod')) AS gpu_pod,
       json_extract_string(s.labels, '$.mode') AS mode,
       json_extract_string(s.labels, '$.device') AS device,
       json_extract_string(s.labels, '$.aggregate') AS aggregate,
       coalesce(json_extract_string(s.labels, '$.UUID'), json_extract_string(s.labels, '$.uuid'),
                json_extract_string(s.labels, '$.gpu')) AS gpu_id,
       (s.kind IN ('cpu', 'net_rx', 'net_tx', 'dram_read', 'dram_write')
        OR (s.kind IN ('gpu_pcie_tx', 'gpu_pcie_rx', 'gpu_nvlink_tx', 'gpu_nvlink_rx')
            AND coalesce(s.type = 'counter', false)))
           AS is_counter
FROM s
LEFT JOIN hosted AS h USING (metric, labels)
