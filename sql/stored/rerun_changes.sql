-- view: rerun_changes
-- purpose: rerun_changes read from series_context's stored latency steps: what a session defines instead of sql/rerun_changes.sql when every committed load stored its steps (kidata/store/contexts.py), the same rows without a window over every latency.
-- grain: one row per pair of successive passed latency results of one series (kernel, pass, implementation, variant, workload, GPU, protocol family) that re-ran the same code: the same version, or, without versions, the same session.
-- sources: series_context
-- columns: those of sql/rerun_changes.sql, in its order (the same view).
-- notes: Only successive results are paired (a series measured three times in one release gives
--   two changes). Results without a time are not in any series. A source's versions must name
--   the code measured for 'same version' to mean the same code: Liger's CSV gives every
--   provider the Liger release, so a torch pair within one Liger release is counted as a
--   re-run although torch may have changed; docs/statistics.md says what that does. Each
--   latency step of series_context is a result with the one before it in its series, as
--   sql/rerun_changes.sql pairs them (latencies are > 0: a load rejects any other), and the
--   arithmetic is the same, in µs.
SELECT
    source,
    gpu,
    gpu_family,
    kernel,
    pass,
    implementation,
    variant,
    workload,
    family,
    run_id,
    previous_run_id,
    observed_at,
    previous_observed_at,
    version,
    previous_version,
    CASE WHEN version = previous_version THEN 'same version' ELSE 'same session' END AS rerun,
    center / 1000.0 AS center_us,
    previous_center / 1000.0 AS previous_center_us,
    center_statistic,
    (center / 1000.0) / (previous_center / 1000.0) - 1 AS change,
    LN((center / 1000.0) / (previous_center / 1000.0)) AS log_change,
    CAST(LEAST(GREATEST(FLOOR(LOG10(previous_center / 1000.0)), -1), 5) AS BIGINT)
        AS size_decade
FROM series_context
WHERE metric = 'latency'
    AND previous_run_id IS NOT NULL
    AND center > 0
    AND previous_center > 0
    AND center_statistic = previous_center_statistic
    AND source = previous_source
    AND (version = previous_version
         OR (version IS NULL AND previous_version IS NULL
             AND observed_at <= previous_observed_at + INTERVAL '1' HOUR))
