-- Rows of the registered relation `samples` (answered from Parquet metadata where it can be).
SELECT count(*) AS n FROM samples
