-- Every top-level key used by any JSON object line of `lines` (finds columns the contract does not know).
SELECT DISTINCT unnest(json_keys(j)) AS k
FROM (SELECT CASE WHEN json_valid(line) THEN line ELSE 'null' END AS j FROM lines)
ORDER BY k
