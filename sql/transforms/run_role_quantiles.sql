-- p50, p90 and p95 of the run x role x resource groups in the registered relation `spanning` (groups whose
-- samples lie in more than one part of the day), over every sample of the day in `samples`: exact, as one
-- pass gives them. Only the spanning runs' rows are unpivoted and held.
WITH long AS (
    UNPIVOT (SELECT run_id, role, <<resources: {col}>> FROM samples
             WHERE run_id IN (SELECT DISTINCT run_id FROM spanning))
    ON <<resources: {col}>>
    INTO NAME resource VALUE util
)
SELECT run_id, role, resource, quantile_cont(util, [0.5, 0.9, 0.95]) AS q
FROM long SEMI JOIN spanning USING (run_id, role, resource)
GROUP BY run_id, role, resource
