-- The $top runs holding the most recoverable servers over a day range, per role: held -> right-sized, the binding resource's p95 now and after, the basis and why not fewer.
-- params: {"first_day": "2000-01-01", "last_day": "2100-01-01", "top": 20}
WITH per_run AS (
    SELECT run_id, sum(servers_recoverable) AS run_recoverable
    FROM run_efficiency
    WHERE day BETWEEN CAST($first_day AS DATE) AND CAST($last_day AS DATE)
    GROUP BY run_id
    HAVING sum(servers_recoverable) > 0
    ORDER BY run_recoverable DESC, run_id
    LIMIT $top
)
SELECT e.day, e.run_id, e.model_name, e.platform, e.role, e.n_servers, e.right_sized_servers, e.servers_recoverable,
       e.provisioned_w_recoverable / 1000 AS provisioned_kw_recoverable,
       e.binding_resource, e.binding_p95_util, e.p95_after_util, e.limited_by, e.throughput_risk, e.basis
FROM run_efficiency AS e
JOIN per_run USING (run_id)
ORDER BY per_run.run_recoverable DESC, e.run_id, e.servers_recoverable DESC, e.role
