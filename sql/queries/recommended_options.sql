-- The recommended platform x placement per model and objective, with the band, the bottleneck and the explanation.
-- params: {}
SELECT model_name, objective, platform, placement, p10_throughput_eps, p50_throughput_eps, p90_throughput_eps,
       eps_per_w, bottleneck, n_trainers, n_sparse_ps, n_dense_ps, n_readers, count_flags, basis, cv_mdape, explanation
FROM recommendations
WHERE recommended
ORDER BY model_name, objective
