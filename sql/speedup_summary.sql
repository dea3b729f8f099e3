-- view: speedup_summary
-- purpose: How a candidate fares against a baseline on one GPU across all workloads compared.
-- grain: one row per candidate, candidate_variant, baseline, baseline_variant and GPU.
-- sources: speedups
-- columns:
--   candidate: candidate implementation.
--   candidate_variant: candidate's variant, null for none.
--   baseline: baseline implementation.
--   baseline_variant: baseline's variant, null for none.
--   gpu: canonical GPU key.
--   workloads: number of (kernel, pass, workload) comparisons summarised.
--   geomean_speedup: geometric mean of speedup = EXP(AVG(LN(speedup))).
--   min_speedup: smallest speedup.
--   max_speedup: largest speedup.
--   wins: comparisons with speedup > 1 (candidate faster).
--   losses: comparisons with speedup < 1 (candidate slower); speedup = 1 counts as neither.
--   faster: comparisons whose verdict is 'faster' (p20-p80 ranges apart, candidate below).
--   slower: comparisons whose verdict is 'slower' (ranges apart, candidate above).
--   within_noise: comparisons whose p20-p80 ranges overlap.
--   no_spread: comparisons where either side lacks p20 or p80.
-- notes: Speedups are ratios, so they are summarised with the geometric mean, never the
--   arithmetic mean. wins and losses compare medians only; faster, slower, within_noise and
--   no_spread count the noise-aware verdicts of speedups and always add up to workloads.
--   Every count is cast to BIGINT: a SUM of integers is HUGEINT in DuckDB, which Parquet
--   stores as a double and Polars reads as decimal(38,0).
SELECT
    candidate,
    candidate_variant,
    baseline,
    baseline_variant,
    gpu,
    CAST(COUNT(*) AS BIGINT) AS workloads,
    EXP(AVG(LN(speedup))) AS geomean_speedup,
    MIN(speedup) AS min_speedup,
    MAX(speedup) AS max_speedup,
    CAST(SUM(CASE WHEN speedup > 1 THEN 1 ELSE 0 END) AS BIGINT) AS wins,
    CAST(SUM(CASE WHEN speedup < 1 THEN 1 ELSE 0 END) AS BIGINT) AS losses,
    CAST(SUM(CASE WHEN verdict = 'faster' THEN 1 ELSE 0 END) AS BIGINT) AS faster,
    CAST(SUM(CASE WHEN verdict = 'slower' THEN 1 ELSE 0 END) AS BIGINT) AS slower,
    CAST(SUM(CASE WHEN verdict = 'within noise' THEN 1 ELSE 0 END) AS BIGINT) AS within_noise,
    CAST(SUM(CASE WHEN verdict = 'no spread' THEN 1 ELSE 0 END) AS BIGINT) AS no_spread
FROM speedups
GROUP BY candidate, candidate_variant, baseline, baseline_variant, gpu
