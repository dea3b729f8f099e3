-- view: trends
-- purpose: How did each series' latency move from one result to the next, and was each step beyond noise?
-- grain: one row per passed latency run with a timestamp; a series is one kernel, pass, implementation, variant, workload, GPU, protocol family and metric, in time order.
-- sources: latencies
-- columns:
--   kernel: kernel benchmarked.
--   pass: timed pass.
--   implementation: implementation key.
--   variant: implementation variant, null for none.
--   workload: workload name.
--   gpu: canonical GPU key.
--   family: protocol comparability family.
--   metric: always 'latency' (memory series are not included yet).
--   step: position in the series, 1 for the earliest result.
--   points: number of results in the series.
--   run_id: this result's run.
--   previous_run_id: the run just before it in the series; null at step 1.
--   observed_at: when this result was measured (UTC).
--   previous_observed_at: when the previous result was measured.
--   version: release of the implementation or harness for this run (runs.version).
--   previous_version: release for the previous run.
--   median_us: median latency (µs).
--   previous_median_us: the previous result's median latency (µs).
--   p20_us: 20th-percentile latency (µs), null when not measured.
--   p80_us: 80th-percentile latency (µs), null when not measured.
--   previous_p20_us: the previous result's p20 (µs).
--   previous_p80_us: the previous result's p80 (µs).
--   change: median_us / previous_median_us - 1; above 0 means slower; null at step 1.
--   beyond_noise: true when the p20-p80 ranges of this and the previous result do not overlap
--     (p20_us > previous_p80_us or p80_us < previous_p20_us); null when either lacks p20 or p80,
--     and at step 1.
--   verdict: 'slower' when p20_us > previous_p80_us; 'faster' when p80_us < previous_p20_us;
--     'within noise' when the ranges overlap (touching ends included); 'no spread' when either
--     result lacks p20 or p80; null at step 1.
-- notes: Time order is observed_at, then run_id for results with the same timestamp (a tie is
--   ordered, never merged). Runs without a timestamp cannot be placed in time and are left out,
--   as are runs whose status is not 'passed'. Series never cross GPUs, passes, variants or protocol
--   families. The regressions view keeps the slower steps beyond a threshold.
WITH ordered AS (
    SELECT
        l.*,
        ROW_NUMBER() OVER series_in_time AS step,
        COUNT(*) OVER series AS points,
        LAG(run_id) OVER series_in_time AS previous_run_id,
        LAG(observed_at) OVER series_in_time AS previous_observed_at,
        LAG(version) OVER series_in_time AS previous_version,
        LAG(median_us) OVER series_in_time AS previous_median_us,
        LAG(p20_us) OVER series_in_time AS previous_p20_us,
        LAG(p80_us) OVER series_in_time AS previous_p80_us
    FROM latencies l
    WHERE l.status = 'passed' AND l.observed_at IS NOT NULL
    WINDOW
        series AS (PARTITION BY kernel, pass, implementation, variant, workload, gpu, family),
        series_in_time AS (
            PARTITION BY kernel, pass, implementation, variant, workload, gpu, family
            ORDER BY observed_at, run_id
        )
)
SELECT
    kernel,
    pass,
    implementation,
    variant,
    workload,
    gpu,
    family,
    'latency' AS metric,
    CAST(step AS BIGINT) AS step,  -- ROW_NUMBER is INT in Spark: one type
    CAST(points AS BIGINT) AS points,
    run_id,
    previous_run_id,
    observed_at,
    previous_observed_at,
    version,
    previous_version,
    median_us,
    previous_median_us,
    p20_us,
    p80_us,
    previous_p20_us,
    previous_p80_us,
    median_us / previous_median_us - 1 AS change,
    CASE
        WHEN previous_run_id IS NULL OR p20_us IS NULL OR p80_us IS NULL
            OR previous_p20_us IS NULL OR previous_p80_us IS NULL THEN NULL
        ELSE p20_us > previous_p80_us OR p80_us < previous_p20_us
    END AS beyond_noise,
    CASE
        WHEN previous_run_id IS NULL THEN NULL
        WHEN p20_us IS NULL OR p80_us IS NULL
            OR previous_p20_us IS NULL OR previous_p80_us IS NULL THEN 'no spread'
        WHEN p20_us > previous_p80_us THEN 'slower'
        WHEN p80_us < previous_p20_us THEN 'faster'
        ELSE 'within noise'
    END AS verdict
FROM ordered
