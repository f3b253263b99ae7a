-- Runs per (platform, model, role, server count) for one day, from the registered relation `runs`.
SELECT CAST($day AS DATE) AS day, platform, model_name, role, CAST(n_servers AS INTEGER) AS n_servers, count(*) AS n_runs
FROM (
    UNPIVOT (SELECT platform, model_name, n_trainers AS trainer, n_sparse_ps AS sparse_ps,
                    n_dense_ps AS dense_ps, n_readers AS reader FROM runs)
    ON trainer, sparse_ps, dense_ps, reader
    INTO NAME role VALUE n_servers
)
GROUP BY platform, model_name, role, n_servers
ORDER BY platform, model_name, role, n_servers
