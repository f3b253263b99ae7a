-- Analyst view of a table that has no data yet: the contract's columns, typed, and no rows.
CREATE OR REPLACE VIEW {view} AS
SELECT {typed_nulls} LIMIT 0
