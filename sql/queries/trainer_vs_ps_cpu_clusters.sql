-- Trainers against sparse parameter servers for each model on CPU clusters (the paper's Fig. 5 setting): means, spreads, tails, KS statistic.
-- params: {}
SELECT model_name, resource, trainer_mean_util, ps_mean_util, trainer_iqr_util, ps_iqr_util,
       trainer_upper_tail_util, ps_upper_tail_util, ks_statistic, paper_pattern
FROM trainer_vs_ps
WHERE ps_role = 'sparse_ps' AND platform = 'cpu' AND placement = 'remote_ps'
ORDER BY model_name, resource
