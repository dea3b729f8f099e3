-- view: latency_statistics
-- purpose: Every latency statistic of a run on one row, with the spread the other views compare and what that spread rests on (the measurement model, docs/statistics.md).
-- grain: one row per run that has a latency median (measurements metric 'latency', statistic 'median').
-- sources: measurements
-- columns:
--   run_id: the run.
--   median_us: median latency (µs) = value of statistic 'median' (ns) / 1000.
--   p20_us: 20th percentile (µs), null when the source gives none; p80_us, p25_us, p75_us
--     likewise for statistics 'p80', 'p25' and 'p75'.
--   p80_us: 80th percentile (µs), null when not given.
--   p25_us: 25th percentile, the first quartile (µs), null when not given.
--   p75_us: 75th percentile, the third quartile (µs), null when not given.
--   mean_us: arithmetic mean of the samples (µs), null when not given.
--   stddev_us: standard deviation of the samples (µs), null when not given.
--   min_us: fastest sample (µs), null when not given.
--   max_us: slowest sample (µs), null when not given.
--   samples: number of timed samples behind the statistics (statistic 'samples', unit
--     'count'), null when the source does not say.
--   resolution_us: rounding step or timer resolution of the median (measurements.resolution
--     / 1000), null when unknown.
--   spread: which pair of statistics bounds the run's noise, the first present of 'p20-p80',
--     'p25-p75', 'mean-stddev' (mean - stddev to mean + stddev), 'min-max'; null when the run
--     has none of these pairs.
--   low_us: lower end of the spread (p20, p25, mean - stddev or min), null without a spread.
--   high_us: upper end of the spread (p80, p75, mean + stddev or max), null without a spread.
--   evidence: what the spread can support, the first that applies of: 'single sample'
--     (samples = 1: the statistics are one timing), 'no spread' (spread is null), 'zero width'
--     (high_us <= low_us: every quantile equal, one sample or one timer step), 'below
--     resolution' (high_us - low_us < resolution_us: the spread is under the timer step),
--     'measured' (a spread a verdict may rest on).
-- notes: Only 'measured' runs may give a firm faster/slower verdict from within-run spreads
--   (see verdict_rule). Statistics that are missing stay null: nothing is estimated from
--   others (a p20-p80 range is not widened from a stddev, nor a stddev from quantiles).
WITH pivoted AS (
    SELECT
        run_id,
        MAX(CASE WHEN statistic = 'median' THEN value END) / 1000.0 AS median_us,
        MAX(CASE WHEN statistic = 'p20' THEN value END) / 1000.0 AS p20_us,
        MAX(CASE WHEN statistic = 'p80' THEN value END) / 1000.0 AS p80_us,
        MAX(CASE WHEN statistic = 'p25' THEN value END) / 1000.0 AS p25_us,
        MAX(CASE WHEN statistic = 'p75' THEN value END) / 1000.0 AS p75_us,
        MAX(CASE WHEN statistic = 'mean' THEN value END) / 1000.0 AS mean_us,
        MAX(CASE WHEN statistic = 'stddev' THEN value END) / 1000.0 AS stddev_us,
        MAX(CASE WHEN statistic = 'min' THEN value END) / 1000.0 AS min_us,
        MAX(CASE WHEN statistic = 'max' THEN value END) / 1000.0 AS max_us,
        CAST(MAX(CASE WHEN statistic = 'samples' THEN value END) AS BIGINT) AS samples,
        MAX(CASE WHEN statistic = 'median' THEN resolution END) / 1000.0 AS resolution_us
    FROM measurements
    WHERE metric = 'latency'
    GROUP BY run_id
),
spread AS (
    SELECT
        pivoted.*,
        CASE
            WHEN p20_us IS NOT NULL AND p80_us IS NOT NULL THEN 'p20-p80'
            WHEN p25_us IS NOT NULL AND p75_us IS NOT NULL THEN 'p25-p75'
            WHEN mean_us IS NOT NULL AND stddev_us IS NOT NULL THEN 'mean-stddev'
            WHEN min_us IS NOT NULL AND max_us IS NOT NULL THEN 'min-max'
        END AS spread,
        CASE
            WHEN p20_us IS NOT NULL AND p80_us IS NOT NULL THEN p20_us
            WHEN p25_us IS NOT NULL AND p75_us IS NOT NULL THEN p25_us
            WHEN mean_us IS NOT NULL AND stddev_us IS NOT NULL THEN mean_us - stddev_us
            WHEN min_us IS NOT NULL AND max_us IS NOT NULL THEN min_us
        END AS low_us,
        CASE
            WHEN p20_us IS NOT NULL AND p80_us IS NOT NULL THEN p80_us
            WHEN p25_us IS NOT NULL AND p75_us IS NOT NULL THEN p75_us
            WHEN mean_us IS NOT NULL AND stddev_us IS NOT NULL THEN mean_us + stddev_us
            WHEN min_us IS NOT NULL AND max_us IS NOT NULL THEN max_us
        END AS high_us
    FROM pivoted
    WHERE median_us IS NOT NULL
)
SELECT
    run_id,
    median_us,
    p20_us,
    p80_us,
    p25_us,
    p75_us,
    mean_us,
    stddev_us,
    min_us,
    max_us,
    samples,
    resolution_us,
    spread,
    low_us,
    high_us,
    CASE
        WHEN samples = 1 THEN 'single sample'
        WHEN spread IS NULL THEN 'no spread'
        WHEN high_us <= low_us THEN 'zero width'
        WHEN resolution_us IS NOT NULL AND high_us - low_us < resolution_us
            THEN 'below resolution'
        ELSE 'measured'
    END AS evidence
FROM spread
