-- view: run_statistics
-- purpose: Every statistic of a run's metric on one row, in the metric's unit, with the spread the other views compare and what that spread rests on (the measurement model, docs/statistics.md).
-- grain: one row per run and metric that has a median or a mean (measurements statistic
--   'median' or 'mean').
-- sources: measurements
-- columns:
--   run_id: the run.
--   metric: 'latency' or 'memory'.
--   unit: the metric's unit ('ns' for latency, 'MB' for memory; measurements.unit).
--   median: the median, in unit; null when the source gives only a mean.
--   p20: 20th percentile, null when the source gives none.
--   p80: 80th percentile, null when not given.
--   p25: 25th percentile (first quartile), null when not given.
--   p75: 75th percentile (third quartile), null when not given.
--   mean: arithmetic mean of the samples, null when not given.
--   stddev: standard deviation of the samples, null when not given.
--   min: smallest sample, null when not given.
--   max: largest sample, null when not given.
--   samples: number of samples behind the statistics (statistic 'samples', unit 'count'),
--     null when the source does not say.
--   resolution: rounding step or timer resolution of the center (measurements.resolution of
--     the median, else of the mean), null when unknown.
--   spread: which pair of statistics bounds the noise, the first present of 'p20-p80',
--     'p25-p75', 'mean-stddev' (mean - stddev to mean + stddev), 'median-stddev' (median -
--     stddev to median + stddev, for sources such as FlashInfer that give a median and a
--     standard deviation but no mean), 'min-max'; null when none.
--   low: lower end of the spread (p20, p25, mean - stddev, median - stddev or min), null
--     without a spread.
--   high: upper end of the spread (p80, p75, mean + stddev, median + stddev or max), null
--     without a spread.
--   evidence: what the spread can support, the first that applies of: 'single sample'
--     (samples = 1: the statistics are one measurement), 'no spread' (spread is null), 'zero
--     width' (high <= low on a latency: every quantile equal, one sample or one timer step),
--     'below resolution' (high - low < resolution: the spread is under the timer or rounding
--     step), 'measured' (a spread a verdict may rest on). A zero-width memory range is
--     'measured': peak memory of a deterministic allocation repeats exactly (Liger's memory
--     benchmark takes quantiles of repeated runs), so equal quantiles are the measurement.
--   center: the run's central value, the one every comparison uses: the median when the
--     source gives one, else the mean (KernelBench, old nvbench and google-benchmark runs
--     publish only a mean, their harness's primary statistic).
--   center_statistic: which statistic center is: 'median' or 'mean'.
-- notes: A mean is pulled by outliers (a slow first launch, a preempted sample) and sits above
--   the median of a right-skewed latency distribution, so a mean and a median of the same code
--   differ: the comparing views flag a pair whose centers are different statistics (verdict
--   'different centers') instead of setting one against the other. No other statistic (min,
--   p25, ...) stands in for a center: a run with neither a median nor a mean is left out. Only
--   'measured' sides may give a firm faster/slower verdict from within-run spreads (see
--   verdict_rule). Statistics that are missing stay null: nothing is estimated from
--   others (a p20-p80 range is not widened from a stddev, nor a stddev from quantiles).
WITH pivoted AS (
    SELECT
        run_id,
        metric,
        COALESCE(MAX(CASE WHEN statistic = 'median' THEN unit END),
                 MAX(CASE WHEN statistic = 'mean' THEN unit END)) AS unit,
        MAX(CASE WHEN statistic = 'median' THEN value END) AS median,
        MAX(CASE WHEN statistic = 'p20' THEN value END) AS p20,
        MAX(CASE WHEN statistic = 'p80' THEN value END) AS p80,
        MAX(CASE WHEN statistic = 'p25' THEN value END) AS p25,
        MAX(CASE WHEN statistic = 'p75' THEN value END) AS p75,
        MAX(CASE WHEN statistic = 'mean' THEN value END) AS mean,
        MAX(CASE WHEN statistic = 'stddev' THEN value END) AS stddev,
        MAX(CASE WHEN statistic = 'min' THEN value END) AS min,
        MAX(CASE WHEN statistic = 'max' THEN value END) AS max,
        CAST(MAX(CASE WHEN statistic = 'samples' THEN value END) AS BIGINT) AS samples,
        COALESCE(MAX(CASE WHEN statistic = 'median' THEN resolution END),
                 MAX(CASE WHEN statistic = 'mean' THEN resolution END)) AS resolution
    FROM measurements
    GROUP BY run_id, metric
),
spread AS (
    SELECT
        pivoted.*,
        CASE
            WHEN p20 IS NOT NULL AND p80 IS NOT NULL THEN 'p20-p80'
            WHEN p25 IS NOT NULL AND p75 IS NOT NULL THEN 'p25-p75'
            WHEN mean IS NOT NULL AND stddev IS NOT NULL THEN 'mean-stddev'
            WHEN median IS NOT NULL AND stddev IS NOT NULL THEN 'median-stddev'
            WHEN min IS NOT NULL AND max IS NOT NULL THEN 'min-max'
        END AS spread,
        CASE
            WHEN p20 IS NOT NULL AND p80 IS NOT NULL THEN p20
            WHEN p25 IS NOT NULL AND p75 IS NOT NULL THEN p25
            WHEN mean IS NOT NULL AND stddev IS NOT NULL THEN mean - stddev
            WHEN median IS NOT NULL AND stddev IS NOT NULL THEN median - stddev
            WHEN min IS NOT NULL AND max IS NOT NULL THEN min
        END AS low,
        CASE
            WHEN p20 IS NOT NULL AND p80 IS NOT NULL THEN p80
            WHEN p25 IS NOT NULL AND p75 IS NOT NULL THEN p75
            WHEN mean IS NOT NULL AND stddev IS NOT NULL THEN mean + stddev
            WHEN median IS NOT NULL AND stddev IS NOT NULL THEN median + stddev
            WHEN min IS NOT NULL AND max IS NOT NULL THEN max
        END AS high
    FROM pivoted
    WHERE median IS NOT NULL OR mean IS NOT NULL
)
SELECT
    run_id,
    metric,
    unit,
    median,
    p20,
    p80,
    p25,
    p75,
    mean,
    stddev,
    min,
    max,
    samples,
    resolution,
    spread,
    low,
    high,
    CASE
        WHEN samples = 1 THEN 'single sample'
        WHEN spread IS NULL THEN 'no spread'
        WHEN high <= low AND metric <> 'memory' THEN 'zero width'
        WHEN resolution IS NOT NULL AND high - low < resolution
            THEN 'below resolution'
        ELSE 'measured'
    END AS evidence,
    COALESCE(median, mean) AS center,
    CASE WHEN median IS NOT NULL THEN 'median' ELSE 'mean' END AS center_statistic
FROM spread
