-- Distinct workloads of one day's runs (registered relation `runs`), with a stable id and a run count.
-- A fit check needs the table size: runs whose source does not give embedding_gb are left out.
SELECT
    substr(md5(concat_ws('|', model_name, n_dense_features, n_sparse_features, n_tables, embedding_dim,
                         embedding_gb, mean_lookups_per_table, bottom_mlp, top_mlp, interaction, batch_size)), 1, 16)
                                       AS workload_id,
    coalesce(model_name, '(unknown)') AS model_name, n_dense_features, n_sparse_features, n_tables, embedding_dim, embedding_gb,
    mean_lookups_per_table, bottom_mlp, top_mlp, interaction, batch_size,
    count(*)                           AS n_runs
FROM runs
WHERE embedding_gb IS NOT NULL
GROUP BY ALL
ORDER BY workload_id
