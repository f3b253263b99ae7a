-- Prometheus -> runs, step 4b: the points the samples are made of (prom_obs.sql's, less the faulty readings).
CREATE OR REPLACE TEMP VIEW obs AS
SELECT * EXCLUDE (fault)
FROM obs_all
WHERE fault IS NULL
