-- Analyst view over one lake table. {view} and {files} are filled at publish time with the table name and
-- the list of the current snapshot's Parquet files as quoted literals (DuckDB views cannot take bound parameters).
CREATE OR REPLACE VIEW {view} AS
SELECT * FROM read_parquet({files}, hive_partitioning = false, union_by_name = true)
