-- view: sample_medians
-- purpose: Each run's median from its raw samples, with a distribution-free interval: the noise basis a comparison prefers when both sides kept their samples.
-- grain: one row per run and metric that has raw samples (samples, joined to its run by run_id and content_hash).
-- sources: samples, runs
-- columns:
--   run_id: the run.
--   metric: what the samples measure (e.g. 'latency').
--   unit: their unit (ns for latency), as samples.unit.
--   samples: how many samples the run kept.
--   median: the median of the samples (the middle one, or the mean of the two middle ones).
--   interval_rank: k, the order statistic each end of the interval is: FLOOR((n + 1 - 2.2414 *
--     SQRT(n)) / 2) for n samples (2.2414 is the 0.9875 quantile of the normal distribution);
--     below 1 (fewer than 7 samples) there is no interval.
--   low: the k-th smallest sample: with high, an interval that holds the run's true median
--     with probability 97.5% or more, whatever the distribution of its timings (the sign
--     test's interval, as asv's quantile_ci); null with fewer than 7 samples.
--   high: the k-th largest sample (the (n - k + 1)-th smallest); null with fewer than 7.
-- notes: Two runs' intervals at 97.5% each hold both medians together with probability 95% or
--   more, so the ratio of the two medians lies between low / high and high / low of the
--   other side at 95% or more: the interval the comparing views use for the basis 'samples'
--   (docs/statistics.md). k is the normal approximation with continuity correction to the
--   exact binomial rank: never narrower than the exact interval, and one rank wider for some
--   n (44 of n = 1..3000, the first 10 and 13). Samples are kept only by sources that give
--   them (PyTorch v3 benchmark_values, google-benchmark repetitions, bundles with
--   sourceNative.samples); a run with one sample has no interval.
WITH kept AS (
    SELECT s.run_id, s.metric, s.unit, s.value
    FROM samples s
    JOIN runs r ON r.run_id = s.run_id AND r.content_hash = s.content_hash
),
ranked AS (
    SELECT
        run_id,
        metric,
        unit,
        value,
        ROW_NUMBER() OVER (PARTITION BY run_id, metric ORDER BY value) AS place,
        COUNT(*) OVER (PARTITION BY run_id, metric) AS n
    FROM kept
),
ranks AS (
    SELECT
        *,
        CAST(FLOOR((n + 1 - 2.2414027276 * SQRT(n)) / 2) AS BIGINT) AS k
    FROM ranked
)
SELECT
    run_id,
    metric,
    MAX(unit) AS unit,
    MAX(n) AS samples,
    AVG(CASE WHEN place * 2 IN (n, n + 1, n + 2) THEN value END) AS median,
    MAX(k) AS interval_rank,
    MAX(CASE WHEN k >= 1 AND place = k THEN value END) AS low,
    MAX(CASE WHEN k >= 1 AND place = n - k + 1 THEN value END) AS high
FROM ranks
GROUP BY run_id, metric
