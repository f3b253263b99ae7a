-- Quarantine entries per landing day, source and reason code, with one example message each.
-- params: {}
SELECT day, source, reason_code, count(*) AS entries, any_value(message) AS example_message
FROM quarantine
GROUP BY day, source, reason_code
ORDER BY day, source, entries DESC
