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
-- notes: Speedups are ratios, so they are summarised with the geometric mean, never the
--   arithmetic mean.
SELECT
    candidate,
    candidate_variant,
    baseline,
    baseline_variant,
    gpu,
    COUNT(*) AS workloads,
    EXP(AVG(LN(speedup))) AS geomean_speedup,
    MIN(speedup) AS min_speedup,
    MAX(speedup) AS max_speedup,
    SUM(CASE WHEN speedup > 1 THEN 1 ELSE 0 END) AS wins,
    SUM(CASE WHEN speedup < 1 THEN 1 ELSE 0 END) AS losses
FROM speedups
GROUP BY candidate, candidate_variant, baseline, baseline_variant, gpu
