-- Prometheus -> runs, step 1: the training pods of the day's jobs, from kube_pod_labels in the registered
-- relation `m` (the day's metric samples). A pod belongs to the job its job label names (the first of
-- $job_paths present; pods with none are not training pods); its replica type maps to a role through the
-- registered relation `role_map` (null: not mapped). A job's t0, the start of its sample grid, is its first
-- kube_pod_labels sample; the day derives the jobs whose t0 falls in it. A pod's anchor is its first sample.
CREATE OR REPLACE TEMP TABLE pods AS
WITH labelled AS (
    SELECT json_extract_string(labels, '$.namespace') AS namespace,
           json_extract_string(labels, '$.pod') AS pod,
           list_filter(list_transform($job_paths, lambda p: json_extract_string(labels, p)), lambda v: v <> '')[1] AS job,
           lower(list_filter(list_transform($role_paths, lambda p: json_extract_string(labels, p)), lambda v: v <> '')[1]) AS replica,
           list_filter(list_transform($model_paths, lambda p: json_extract_string(labels, p)), lambda v: v <> '')[1] AS model_name,
           ts, source_file, row_number
    FROM m
    WHERE metric = $pod_labels_metric
),
per_pod AS (
    SELECT namespace, job, pod, min(replica) AS replica, min(model_name) AS model_name,
           min(ts) AS first_ts, max(ts) AS last_ts,
           min_by(source_file, (ts, source_file, row_number)) AS anchor_file,
           min_by(row_number, (ts, source_file, row_number)) AS anchor_row
    FROM labelled
    WHERE job IS NOT NULL AND pod IS NOT NULL
    GROUP BY namespace, job, pod
),
jobs AS (
    SELECT namespace, job, min(first_ts) AS t0, max(last_ts) AS job_last_ts
    FROM per_pod
    GROUP BY namespace, job
)
SELECT p.namespace, p.job, p.pod, p.replica, r.role, p.model_name, p.first_ts, p.last_ts,
       p.anchor_file, p.anchor_row, j.t0, j.job_last_ts,
       (j.t0 >= $day_start AND j.t0 < $day_end) AS of_the_day
FROM per_pod AS p
JOIN jobs AS j USING (namespace, job)
LEFT JOIN role_map AS r ON r.replica = p.replica
