-- Split JSON Lines (table `lines`: row_number, line) into one string per requested field.
-- $paths: JSON paths of the contract's fields, in order. Invalid lines are kept and flagged, never dropped.
SELECT
    row_number,
    json_valid(line)                   AS is_valid_json,
    json_type(j)                       AS json_kind,
    json_extract_string(j, $paths)     AS field_values,
    json_keys(j)                       AS keys
FROM (
    SELECT row_number, line, CASE WHEN json_valid(line) THEN line ELSE 'null' END AS j
    FROM lines
)
ORDER BY row_number
