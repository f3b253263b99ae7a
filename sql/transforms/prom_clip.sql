-- Prometheus -> runs: a derived utilisation within tol of [0, 1] clipped into it (counter timing jitter).
CREATE OR REPLACE TEMP MACRO clip01(x, tol) AS
    CASE WHEN x < 0 AND x >= -tol THEN 0.0 WHEN x > 1 AND x <= 1 + tol THEN 1.0 ELSE x END
