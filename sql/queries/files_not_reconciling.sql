-- Landing files whose counts do not reconcile (rows_in <> accepted + quarantined); empty when ingest kept its promise.
-- params: {}
SELECT day, source_file, rows_in, rows_accepted, rows_quarantined, file_status
FROM ingest_ledger
WHERE rows_in <> rows_accepted + rows_quarantined
ORDER BY day, source_file
