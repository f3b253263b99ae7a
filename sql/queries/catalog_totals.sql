-- Totals of the analyst catalog in one row: runs, utilisation samples, quarantined rows and landing files (what `fleet run` prints last).
-- params: {}
SELECT
    (SELECT count(*) FROM runs) AS runs,
    (SELECT count(*) FROM utilisation_samples) AS samples,
    (SELECT CAST(coalesce(sum(rows_quarantined), 0) AS BIGINT) FROM ingest_ledger) AS rows_quarantined,
    (SELECT count(*) FROM ingest_ledger) AS landing_files
