-- One row per sample and resource (nulls dropped: no GPU rows for CPU servers), joined to the run's system.
-- Reads the registered relations `samples` and `runs` (one day).
CREATE OR REPLACE TEMP VIEW samples_long AS
SELECT
    l.run_id, l.server_id, l.role,
    regexp_replace(l.resource, '_util$', '') AS resource,
    l.util,
    coalesce(r.model_name, '(unknown)') AS model_name, coalesce(r.platform, '(unknown)') AS platform, coalesce(r.placement, '(unknown)') AS placement
FROM (
    UNPIVOT (SELECT run_id, server_id, role, cpu_util, mem_cap_util, mem_bw_util, net_bw_util, gpu_util, gpu_mem_util FROM samples)
    ON cpu_util, mem_cap_util, mem_bw_util, net_bw_util, gpu_util, gpu_mem_util
    INTO NAME resource VALUE util
) AS l
JOIN runs AS r USING (run_id)
