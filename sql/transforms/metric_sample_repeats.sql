-- Prometheus samples the day holds twice: the same series (metric, labels) at the same ts again, in the
-- staged file $path. Candidates by one 64-bit hash per sample (out of core), then compared exactly; the
-- first delivery (files in delivery order, from the registered relation `file_order`, then rows) is kept
-- and every other copy returned with the file that kept it.
WITH candidates AS (
    SELECT hash(metric, labels, ts) AS h
    FROM read_parquet($path)
    GROUP BY h
    HAVING count(*) > 1
),
copies AS (
    SELECT x.metric, x.labels, x.ts, x.value, x.type, x.source_file, x.row_number, o.ord
    FROM read_parquet($path) AS x
    JOIN file_order AS o USING (source_file)
    SEMI JOIN candidates AS c ON c.h = hash(x.metric, x.labels, x.ts)
)
SELECT metric, labels, ts, value, type, source_file, row_number,
       first_value(source_file) OVER w AS kept_in
FROM copies
WINDOW w AS (PARTITION BY metric, labels, ts ORDER BY ord, row_number)
QUALIFY row_number() OVER w > 1
