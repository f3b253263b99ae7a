-- Prometheus -> runs: the phase samples of every pod (kube_pod_status_phase with value 1: the phase it is in).
CREATE OR REPLACE TEMP TABLE phases AS
SELECT json_extract_string(labels, '$.namespace') AS namespace,
       json_extract_string(labels, '$.pod') AS pod,
       json_extract_string(labels, '$.phase') AS phase,
       ts
FROM m
WHERE metric = $pod_phase_metric AND value = 1
