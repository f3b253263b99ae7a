-- Runs per (source, platform, model, role, server count) for one day, from the registered relation `runs`.
-- ps_based: the run has at least one sparse parameter server (filters the paper's PS-based CPU jobs).
SELECT CAST($day AS DATE) AS day, source, platform, model_name, ps_based, role,
       CAST(n_servers AS INTEGER) AS n_servers, count(*) AS n_runs
FROM (
    UNPIVOT (SELECT source, coalesce(platform, '(unknown)') AS platform, coalesce(model_name, '(unknown)') AS model_name, n_sparse_ps > 0 AS ps_based,
                    n_trainers AS trainer, n_sparse_ps AS sparse_ps, n_dense_ps AS dense_ps, n_readers AS reader FROM runs)
    ON trainer, sparse_ps, dense_ps, reader
    INTO NAME role VALUE n_servers
)
GROUP BY source, platform, model_name, ps_based, role, n_servers
ORDER BY source, platform, model_name, ps_based, role, n_servers
