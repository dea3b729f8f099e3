-- view: noise_envelopes
-- purpose: Run-to-run noise, calibrated: how far a result of the same code moves from one run to the next, per source, GPU and latency size class, from every re-run the warehouse holds (rerun_changes).
-- grain: one row per source, GPU and size class (size_decade) with at least one re-run change.
-- sources: rerun_changes
-- columns:
--   source: the source (runs.source).
--   gpu: canonical GPU key.
--   size_decade: the latency size class: FLOOR(LOG10(latency in µs)), -1 (under 1 µs) .. 5
--     (100 ms and more).
--   size_class: size_decade in words, e.g. '10-100 µs'.
--   changes: how many re-run changes the envelope rests on.
--   median_change: the median |change| of a re-run, as a fraction (EXP of the median
--     |log_change|, minus 1).
--   envelope: the 95th percentile of |change| (EXP of the 95th percentile of |log_change|,
--     minus 1): a re-run of the same code moves less than this 19 times in 20.
--   log_envelope: LN(1 + envelope), what the comparing views add and subtract around a log
--     ratio.
--   calibrated: true when changes >= 10, the fewest the comparing views use an envelope from;
--     below that the row is shown but no verdict rests on it.
-- notes: A percentile of |log change| is robust: one outlier moves it little, and it does not
--   grow with the number of re-runs (the maximum, used before 0.3.0, does both). Noise is
--   pooled over kernels, implementations and workloads of one source on one GPU within a
--   decade of latency, because re-runs are few per series; a kernel noisier than its pool gets
--   an envelope too narrow for it. The envelope bounds the change of one result; comparing two
--   results that are each that noisy, the views use the larger of the two sides' envelopes.
SELECT
    source,
    gpu,
    size_decade,
    CASE
        WHEN size_decade < 0 THEN 'under 1 µs'
        WHEN size_decade = 0 THEN '1-10 µs'
        WHEN size_decade = 1 THEN '10-100 µs'
        WHEN size_decade = 2 THEN '100 µs-1 ms'
        WHEN size_decade = 3 THEN '1-10 ms'
        WHEN size_decade = 4 THEN '10-100 ms'
        ELSE '100 ms and more'
    END AS size_class,
    CAST(COUNT(*) AS BIGINT) AS changes,
    EXP(PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY ABS(log_change))) - 1 AS median_change,
    EXP(PERCENTILE_CONT(0.95) WITHIN GROUP (ORDER BY ABS(log_change))) - 1 AS envelope,
    PERCENTILE_CONT(0.95) WITHIN GROUP (ORDER BY ABS(log_change)) AS log_envelope,
    COUNT(*) >= 10 AS calibrated
FROM rerun_changes
GROUP BY source, gpu, size_decade
