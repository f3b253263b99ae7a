-- Stream a JSON Lines file as one string per contract field, in file order (the fast path of ingest).
-- $file: the file; $paths: JSON paths of the contract's fields, in order; $known: the contract's field names.
-- A row's key list is returned only when it differs from the contract's own (the usual case costs nothing);
-- ingest checks those lists for fields the contract does not know.
-- Any malformed line makes DuckDB raise, and ingest then reads the file line by line instead
-- (jsonl_fields.sql), so every line is accounted for.
SELECT
    starts_with(json::VARCHAR, '{')    AS is_object,
    strlen(json::VARCHAR)              AS n_bytes,
    json_extract_string(json, $paths)  AS field_values,
    CASE WHEN hash(json_keys(json)) <> hash($known::VARCHAR[]) THEN json_keys(json) END AS keys
FROM read_ndjson_objects($file)
