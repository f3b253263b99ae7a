-- JSON Lines, the DuckDB tier (pipelines/lib/ingest/readers/jsonl.py): DuckDB's parallel reader with the columns
-- detected from the file's first $sample_records records. Because the schema is detected and every column
-- is selected, a key outside the sample, a duplicate key, a value that cannot be cast to its column, a line
-- that is not one JSON object or an object over $max_object_bytes raises an error instead of passing
-- silently. Timestamp detection is off (the impossible formats): timestamps stay text, parsed by the contract.
SELECT *
FROM read_json(
    $file,
    format = 'newline_delimited',
    records = 'true',
    sample_size = $sample_records,
    maximum_object_size = $max_object_bytes,
    timestampformat = '%%no timestamp%Y',
    dateformat = '%%no date%Y',
    hive_partitioning = false
)
