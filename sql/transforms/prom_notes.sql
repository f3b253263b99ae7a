-- Prometheus -> runs: what the derivation left out, counted for the ingest's notes.
SELECT
    (SELECT count(DISTINCT (namespace, job)) FROM pods WHERE NOT of_the_day) AS jobs_of_other_days,
    (SELECT list(DISTINCT replica ORDER BY replica) FROM pods
      WHERE of_the_day AND role IS NULL AND coalesce(replica, '') NOT IN (SELECT unnest($ignore_roles))) AS unmapped_replicas,
    (SELECT count(*) FROM pod_nodes WHERE n_nodes > 1) AS intervals_on_two_nodes,
    (SELECT count(*) FROM pod_nodes WHERE n_nodes = 1) AS pod_intervals,
    (SELECT count(*) FROM derived) AS samples,
    (SELECT count(DISTINCT run_id) FILTER (WHERE nic_speed_unknown) FROM derived) AS runs_with_unknown_nic_speed,
    (SELECT count(*) FROM derived WHERE platform IS NULL) AS samples_without_platform
