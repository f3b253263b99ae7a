-- Staged samples whose key hash occurs more than once in the day; first delivery is decided after, exactly.
-- $hashes: the staged key-hash file (h, row), in the staged samples' order (pos = position in both files).
-- $dead: [start, end) position ranges of row groups that were dropped (a file's fault or fallback).
WITH live AS (
    SELECT file_row_number AS pos, h, row
    FROM read_parquet($hashes, file_row_number = true)
    WHERE NOT list_bool_or(list_transform($dead, lambda r: file_row_number >= r[1] AND file_row_number < r[2]))
),
clash AS (
    SELECT h FROM live GROUP BY h HAVING count(*) > 1
)
SELECT live.pos, live.h, live.row FROM live SEMI JOIN clash USING (h)
