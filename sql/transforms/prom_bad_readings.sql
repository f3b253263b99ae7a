-- Prometheus -> runs: the readings of the pods' intervals that no sample could use (prom_obs.sql's faults),
-- each once, at the landing file and line of its metric sample, with what it is and where it would have
-- gone, for the quarantine. A reading of a node shared by several pods names them all.
WITH bad AS (
    SELECT kind, labels, ts, any_value(v) AS value, any_value(fault) AS fault, any_value(host) AS host,
           any_value(device) AS device, any_value(gpu_id) AS gpu_id,
           string_agg(DISTINCT namespace || '/' || pod, ', ' ORDER BY namespace || '/' || pod) AS pods
    FROM obs_all
    WHERE fault IS NOT NULL
    GROUP BY kind, labels, ts
),
described AS (
    SELECT b.*, mk.metric,
           CASE WHEN b.kind = 'cpu' THEN 'cpu_util'
                WHEN b.kind IN ('mem_available', 'mem_total') THEN 'mem_cap_util'
                WHEN b.kind IN ('net_rx', 'net_tx') THEN 'net_bw_util'
                WHEN b.kind IN ('dram_read', 'dram_write') THEN 'mem_bw_util'
                WHEN b.kind IN ('gpu_active', 'gpu_util') THEN 'gpu_util'
                WHEN b.kind LIKE 'gpu_fb_%' THEN 'gpu_mem_util'
                WHEN b.kind = 'gpu_tensor' THEN 'gpu_tensor_util'
                WHEN b.kind LIKE 'gpu_pcie_%' THEN 'gpu_pcie_util'
                WHEN b.kind LIKE 'gpu_nvlink_%' THEN 'gpu_nvlink_util' END AS column_name,
           CASE WHEN b.fault = 'not_finite' THEN 'is not a finite number'
                WHEN b.kind = 'gpu_util' THEN 'is outside [0, 100]'
                WHEN b.kind IN ('gpu_active', 'gpu_tensor') THEN 'is outside [0, 1]'
                ELSE 'is negative' END AS what,
           coalesce('GPU ' || b.gpu_id, 'device ' || b.device || ' of node ' || b.host, 'node ' || b.host) AS series
    FROM bad AS b
    JOIN metric_kinds AS mk USING (kind)
)
SELECT x.source_file, x.row_number, d.fault AS reason_code, 'value' AS field,
       format('{} reading {} at {} ({}, pod {}) {}: left out of {}', d.metric, CAST(x.value AS VARCHAR),
              strftime(x.ts, '%Y-%m-%dT%H:%M:%S.%fZ'), d.series, d.pods, d.what, d.column_name) AS message,
       CAST(json_object('metric', x.metric, 'labels', json(x.labels),
                        'ts', strftime(x.ts, '%Y-%m-%dT%H:%M:%S.%fZ'), 'value', CAST(x.value AS VARCHAR))
            AS VARCHAR) AS raw_record
FROM described AS d
JOIN m AS x ON x.metric = d.metric AND x.labels = d.labels AND x.ts = d.ts
ORDER BY x.source_file, x.row_number
