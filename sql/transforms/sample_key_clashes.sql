-- Staged samples whose key hash occurs more than once in the day; first delivery is decided after, exactly.
-- $hashes: the staged key-hash file (h, row), in the staged samples' order (pos = position in both files).
-- $dead: [start, end) position ranges of row groups that were dropped (a file's fault or fallback); usually
-- none, and then no row pays for the range test.
WITH live AS NOT MATERIALIZED (
    SELECT file_row_number AS pos, h, row
    FROM read_parquet($hashes, file_row_number = true)
    WHERE len($dead) = 0
       OR NOT list_bool_or(list_transform($dead, lambda r: file_row_number >= r[1] AND file_row_number < r[2]))
)
SELECT pos, h, row FROM live
WHERE h IN (SELECT h FROM live GROUP BY h HAVING count(*) > 1)
