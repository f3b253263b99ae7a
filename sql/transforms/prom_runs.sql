-- Prometheus -> runs, step 6: one run per job of the day with pods of a mapped role, from the registered
-- relation `derived` (its utilisation samples). Its window is its first sample's start to its last sample's
-- end (from kube_pod_labels where it has no sample). Status: failed if a pod reported the Failed phase,
-- succeeded if one reported Succeeded, running if its last kube_pod_labels sample is within $stale_s of the
-- end of the data (no end then), else $status_without_phase. Platform: the most common platform of its
-- trainers' intervals (ties: alphabetical). Server counts: its pods per role. What telemetry cannot know
-- (model shape, placement, batch, throughput, power) is null. The anchor is the job's first sample.
WITH jobs AS (
    SELECT namespace, job, min(t0) AS t0, max(job_last_ts) AS job_last_ts, min(model_name) AS model_name,
           CAST(count(DISTINCT pod) FILTER (WHERE role = 'trainer') AS INTEGER) AS n_trainers,
           CAST(count(DISTINCT pod) FILTER (WHERE role = 'sparse_ps') AS INTEGER) AS n_sparse_ps,
           CAST(count(DISTINCT pod) FILTER (WHERE role = 'dense_ps') AS INTEGER) AS n_dense_ps,
           CAST(count(DISTINCT pod) FILTER (WHERE role = 'reader') AS INTEGER) AS n_readers,
           min_by(anchor_file, (first_ts, anchor_file, anchor_row)) AS anchor_file,
           min_by(anchor_row, (first_ts, anchor_file, anchor_row)) AS anchor_row
    FROM pods
    WHERE of_the_day AND role IS NOT NULL
    GROUP BY namespace, job
),
window_of AS (
    SELECT namespace, job, min(ts) AS first_ts, max(ts) AS last_ts FROM derived GROUP BY namespace, job
),
phase AS (
    SELECT p.namespace, p.job, bool_or(h.phase = 'Failed') AS failed, bool_or(h.phase = 'Succeeded') AS succeeded
    FROM phases AS h
    JOIN pods AS p USING (namespace, pod)
    WHERE p.of_the_day AND p.role IS NOT NULL
    GROUP BY p.namespace, p.job
),
platform_counts AS (
    SELECT namespace, job, platform, count(*) AS n
    FROM derived
    WHERE role = 'trainer' AND platform IS NOT NULL
    GROUP BY namespace, job, platform
),
platform AS (
    SELECT namespace, job, platform
    FROM (SELECT *, row_number() OVER (PARTITION BY namespace, job ORDER BY n DESC, platform) AS r FROM platform_counts)
    WHERE r = 1
),
data_end AS (SELECT max(ts) AS t FROM m WHERE metric = $pod_labels_metric),
judged AS (
    SELECT j.*, w.first_ts, w.last_ts, pf.platform,
           CASE WHEN coalesce(ph.failed, false) THEN 'failed'
                WHEN coalesce(ph.succeeded, false) THEN 'succeeded'
                WHEN j.job_last_ts >= (SELECT t FROM data_end) - to_microseconds(CAST($stale_s * 1e6 AS BIGINT)) THEN 'running'
                ELSE $status_without_phase END AS status
    FROM jobs AS j
    LEFT JOIN window_of AS w USING (namespace, job)
    LEFT JOIN phase AS ph USING (namespace, job)
    LEFT JOIN platform AS pf USING (namespace, job)
)
SELECT
    replace(replace($run_id, '{namespace}', namespace), '{job}', job) AS run_id,
    coalesce(first_ts, t0) AS start_ts,
    CASE WHEN status = 'running' THEN NULL
         ELSE coalesce(last_ts + to_microseconds($step_us), job_last_ts) END AS end_ts,
    status, model_name, platform, n_trainers, n_sparse_ps, n_dense_ps, n_readers,
    anchor_file, anchor_row
FROM judged
ORDER BY run_id
