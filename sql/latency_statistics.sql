-- view: latency_statistics
-- purpose: Every latency statistic of a run on one row, with the spread the other views compare and what that spread rests on (the measurement model, docs/statistics.md).
-- grain: one row per run that has a latency median or mean (measurements metric 'latency', statistic 'median' or 'mean').
-- sources: run_statistics
-- columns:
--   run_id: the run.
--   median_us: median latency (µs) = value of statistic 'median' (ns) / 1000; null when the
--     source gives only a mean.
--   p20_us: 20th percentile (µs), null when the source gives none.
--   p80_us: 80th percentile (µs), null when not given.
--   p25_us: 25th percentile, the first quartile (µs), null when not given.
--   p75_us: 75th percentile, the third quartile (µs), null when not given.
--   mean_us: arithmetic mean of the samples (µs), null when not given.
--   stddev_us: standard deviation of the samples (µs), null when not given.
--   min_us: fastest sample (µs), null when not given.
--   max_us: slowest sample (µs), null when not given.
--   samples: number of timed samples behind the statistics (statistic 'samples', unit
--     'count'), null when the source does not say.
--   resolution_us: rounding step or timer resolution of the center (measurements.resolution
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
--   center_us: the run's central latency (µs): the median, else the mean (run_statistics.center).
--   center_statistic: 'median' or 'mean', which statistic center_us is.
-- notes: run_statistics in µs for metric 'latency': every value / 1000 (ns to µs); the
--   spread and evidence rules are run_statistics'.
SELECT
    run_id,
    median / 1000.0 AS median_us,
    p20 / 1000.0 AS p20_us,
    p80 / 1000.0 AS p80_us,
    p25 / 1000.0 AS p25_us,
    p75 / 1000.0 AS p75_us,
    mean / 1000.0 AS mean_us,
    stddev / 1000.0 AS stddev_us,
    min / 1000.0 AS min_us,
    max / 1000.0 AS max_us,
    samples,
    resolution / 1000.0 AS resolution_us,
    spread,
    low / 1000.0 AS low_us,
    high / 1000.0 AS high_us,
    evidence,
    center / 1000.0 AS center_us,
    center_statistic
FROM run_statistics
WHERE metric = 'latency'
