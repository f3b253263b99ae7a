-- Prometheus -> runs, step 5: one utilisation sample per pod and interval that has CPU, memory and network
-- (gpu, memory bandwidth, NVLink and PCIe where measured, else null), at ts = t0 + k * step.
-- CPU: 1 - the mean idle share of the node's CPUs (each CPU's idle seconds / seconds). Memory: 1 -
-- MemAvailable / MemTotal, averaged over the interval's scrapes. Network: max(receive, transmit) bytes/s
-- over the counted devices / their summed node_network_speed_bytes when every one is known (> 0), else
-- $nic_bps, else the platform's NIC. Memory bandwidth: read + write bytes/s / $dram_bps, else the
-- platform's DRAM bandwidth. Per GPU: the graphics-engine active ratio (else GPU_UTIL / 100), tensor-pipe
-- active ratio, FB_USED / (USED + FREE + RESERVED), max(tx, rx) bytes/s of PCIe and NVLink / the platform's
-- per-GPU link (a counter's rate, a gauge's mean, as the scrape typed it); a pod's value is the mean over
-- its GPUs. Values within $tol of [0, 1] are clipped into it (counter timing jitter); others are kept for
-- the contract to reject. A node's platform: its kube_node_labels value of the platform label through
-- `platform_map`, else $default_platform; capacities from the registered relation `capacity`.
WITH node_platform AS (
    SELECT nl.node, pm.platform
    FROM (
        SELECT json_extract_string(labels, '$.node') AS node,
               max_by(json_extract_string(labels, $platform_path), ts) AS value
        FROM m
        WHERE metric = $node_labels_metric
        GROUP BY 1
    ) AS nl
    JOIN platform_map AS pm ON pm.value = nl.value
),
slots AS (
    SELECT n.namespace, n.job, n.pod, n.role, n.t0, n.k, n.anchor_file, n.anchor_row,
           coalesce(np.platform, $default_platform) AS platform
    FROM pod_nodes AS n
    LEFT JOIN node_platform AS np USING (node)
    WHERE n.n_nodes = 1
),
rates AS (
    SELECT namespace, pod, k, kind, labels, any_value(device) AS device, any_value(gpu_id) AS gpu_id,
           sum(v) / sum(dt) AS x
    FROM obs
    WHERE is_counter
    GROUP BY namespace, pod, k, kind, labels
),
means AS (
    SELECT namespace, pod, k, kind, labels, any_value(device) AS device, any_value(gpu_id) AS gpu_id,
           avg(v) AS x
    FROM obs
    WHERE NOT is_counter
    GROUP BY namespace, pod, k, kind, labels
),
vals AS (SELECT * FROM rates UNION ALL SELECT * FROM means),
cpu AS (
    SELECT namespace, pod, k, 1 - avg(x) AS cpu FROM vals WHERE kind = 'cpu' GROUP BY namespace, pod, k
),
mem AS (
    SELECT namespace, pod, k, avg(1 - avail / total) AS mem
    FROM (
        SELECT namespace, pod, k, ts,
               max(v) FILTER (WHERE kind = 'mem_available') AS avail,
               max(v) FILTER (WHERE kind = 'mem_total') AS total
        FROM obs
        WHERE kind IN ('mem_available', 'mem_total')
        GROUP BY namespace, pod, k, ts
    )
    WHERE total > 0 AND avail IS NOT NULL
    GROUP BY namespace, pod, k
),
net_dev AS (
    SELECT namespace, pod, k, device,
           coalesce(sum(x) FILTER (WHERE kind = 'net_rx'), 0) AS rx,
           coalesce(sum(x) FILTER (WHERE kind = 'net_tx'), 0) AS tx
    FROM vals
    WHERE kind IN ('net_rx', 'net_tx')
    GROUP BY namespace, pod, k, device
),
speed AS (
    SELECT namespace, pod, k, device, max(x) AS speed
    FROM vals
    WHERE kind = 'nic_speed'
    GROUP BY namespace, pod, k, device
),
net AS (
    SELECT d.namespace, d.pod, d.k, sum(d.rx) AS rx, sum(d.tx) AS tx,
           CASE WHEN bool_and(coalesce(s.speed, 0) > 0) THEN sum(s.speed) END AS known_speed
    FROM net_dev AS d
    LEFT JOIN speed AS s USING (namespace, pod, k, device)
    GROUP BY d.namespace, d.pod, d.k
),
dram AS (
    SELECT namespace, pod, k, sum(x) AS dram
    FROM vals
    WHERE kind IN ('dram_read', 'dram_write')
    GROUP BY namespace, pod, k
),
per_gpu AS (
    SELECT namespace, pod, k, gpu_id,
           coalesce(avg(x) FILTER (WHERE kind = 'gpu_active'), avg(x) FILTER (WHERE kind = 'gpu_util') / 100) AS gpu,
           avg(x) FILTER (WHERE kind = 'gpu_tensor') AS tensor,
           greatest(sum(x) FILTER (WHERE kind = 'gpu_pcie_tx'), sum(x) FILTER (WHERE kind = 'gpu_pcie_rx')) AS pcie,
           greatest(sum(x) FILTER (WHERE kind = 'gpu_nvlink_tx'), sum(x) FILTER (WHERE kind = 'gpu_nvlink_rx')) AS nvlink
    FROM vals
    WHERE kind LIKE 'gpu%' AND gpu_id IS NOT NULL
    GROUP BY namespace, pod, k, gpu_id
),
fb AS (
    SELECT namespace, pod, k, gpu_id, avg(used / (used + free + coalesce(reserved, 0))) AS gpu_mem
    FROM (
        SELECT namespace, pod, k, gpu_id, ts,
               max(v) FILTER (WHERE kind = 'gpu_fb_used') AS used,
               max(v) FILTER (WHERE kind = 'gpu_fb_free') AS free,
               max(v) FILTER (WHERE kind = 'gpu_fb_reserved') AS reserved
        FROM obs
        WHERE kind IN ('gpu_fb_used', 'gpu_fb_free', 'gpu_fb_reserved') AND gpu_id IS NOT NULL
        GROUP BY namespace, pod, k, gpu_id, ts
    )
    WHERE used IS NOT NULL AND free IS NOT NULL AND used + free + coalesce(reserved, 0) > 0
    GROUP BY namespace, pod, k, gpu_id
),
gpus AS (
    SELECT namespace, pod, k, avg(g.gpu) AS gpu, avg(f.gpu_mem) AS gpu_mem, avg(g.tensor) AS tensor,
           avg(g.pcie) AS pcie, avg(g.nvlink) AS nvlink
    FROM per_gpu AS g
    FULL JOIN fb AS f USING (namespace, pod, k, gpu_id)
    GROUP BY namespace, pod, k
)
SELECT
    replace(replace($run_id, '{namespace}', s.namespace), '{job}', s.job) AS run_id,
    s.pod AS server_id,
    s.role,
    s.t0 + to_microseconds(s.k * $step_us) AS ts,
    clip01(c.cpu, $tol) AS cpu_util,
    clip01(mm.mem, $tol) AS mem_cap_util,
    clip01(d.dram / coalesce($dram_bps, cap.dram_bps), $tol) AS mem_bw_util,
    clip01(greatest(n.rx, n.tx) / coalesce(n.known_speed, $nic_bps, cap.nic_bps), $tol) AS net_bw_util,
    clip01(g.gpu, $tol) AS gpu_util,
    clip01(g.gpu_mem, $tol) AS gpu_mem_util,
    clip01(g.tensor, $tol) AS gpu_tensor_util,
    clip01(g.nvlink / nullif(cap.nvlink_bps, 0), $tol) AS gpu_nvlink_util,
    clip01(g.pcie / nullif(cap.pcie_bps, 0), $tol) AS gpu_pcie_util,
    CAST(NULL AS DOUBLE) AS power_w,
    s.namespace, s.job, s.platform, (n.known_speed IS NULL) AS nic_speed_unknown,
    s.anchor_file, s.anchor_row
FROM slots AS s
JOIN cpu AS c USING (namespace, pod, k)
JOIN mem AS mm USING (namespace, pod, k)
JOIN net AS n USING (namespace, pod, k)
LEFT JOIN dram AS d USING (namespace, pod, k)
LEFT JOIN gpus AS g USING (namespace, pod, k)
LEFT JOIN capacity AS cap USING (platform)
ORDER BY run_id, server_id, ts
