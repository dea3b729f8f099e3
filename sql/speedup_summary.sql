-- view: speedup_summary
-- purpose: How a candidate fares against a baseline (an implementation, or a role such as the reference) on one GPU and pass: each kernel weighted equally, with a 95% interval and the counts behind it.
-- grain: one row per candidate, candidate_variant, baseline, baseline_variant, GPU and pass; baseline is an implementation, or 'role:<role>' (e.g. 'role:reference') for whichever implementation plays that role in each key.
-- sources: speedups
-- columns:
--   candidate: candidate implementation.
--   candidate_variant: candidate's variant, null for none.
--   baseline: baseline implementation, or 'role:<role>' (speedups.baseline_role) for the rows
--     comparing with whichever implementation plays that role per kernel.
--   baseline_variant: baseline's variant, null for none and for role rows.
--   gpu: canonical GPU key.
--   workloads: number of (kernel, workload) comparisons summarised (speedups rows).
--   geomean_speedup: the kernel-weighted geometric mean: per kernel, the geometric mean of
--     its workloads' speedups, g_k = EXP(AVG(LN(speedup))); then EXP(AVG over kernels of
--     LN(g_k)), every kernel weighing the same however many workloads it sweeps.
--   min_speedup: smallest speedup of a single comparison.
--   max_speedup: largest speedup of a single comparison.
--   wins: comparisons with speedup > 1 (candidate faster).
--   losses: comparisons with speedup < 1 (candidate slower); speedup = 1 counts as neither.
--   faster: comparisons whose verdict is 'faster' (noise ranges apart, candidate below).
--   slower: comparisons whose verdict is 'slower'.
--   within_noise: comparisons whose noise ranges overlap.
--   pass: timed pass; passes are never pooled ('full' times forward and backward again).
--   gpu_family: the GPU's family (gpus.family).
--   kernels: number of kernels summarised (k).
--   interval_low: lower end of the 95% t-interval of the kernel-weighted geometric mean:
--     EXP(m - t x s / SQRT(k)), m and s the mean and sample standard deviation of the k
--     values LN(g_k), t the 0.975 quantile of Student's t with k - 1 degrees of freedom
--     (tabulated, see notes); null when k < 2.
--   interval_high: EXP(m + t x s / SQRT(k)); null when k < 2.
--   min_kernel_speedup: the smallest per-kernel geometric mean g_k.
--   max_kernel_speedup: the largest per-kernel geometric mean g_k.
--   no_verdict: comparisons with no firm verdict because a side lacks a measured spread
--     ('single sample', 'no spread', 'zero width', 'below resolution', 'different spreads')
--     or because a mean is set against a median ('different centers');
--     faster + slower + within_noise + no_verdict = workloads.
--   pooled_geomean_speedup: the per-row pooled geometric mean EXP(AVG(LN(speedup))) over all
--     comparisons, each workload weighing the same: a kernel that sweeps many workloads
--     dominates it. Kept for comparison with older reports; quote geomean_speedup.
--   mixed_centers: comparisons whose ratio sets a mean against a median
--     (speedups.center_statistic 'mixed'); they are in the geometric means, biased by the
--     mean's pull towards slow samples: 0 means every ratio compares like with like.
-- notes: Speedups are ratios, so they are summarised on the log scale. The interval treats
--   kernels as the sample (kernel-level variation), not workloads, and says nothing about
--   measurement noise within a kernel; with few kernels it is wide, as it should be. Each row
--   is one direction of a pair (candidate vs baseline); the reverse row's geomean is the
--   inverse. The t quantiles: df 1-30 as tabulated, 31-39 use df 30, 40-59 df 40, 60-119
--   df 60, 120 and above df 120 (1.980): a slightly wider interval than exact.
WITH compared AS (
    -- Each speedups row once per baseline it counts for: its implementation, and its role.
    SELECT s.candidate, s.candidate_variant,
        CASE WHEN k.kind = 'role' THEN CONCAT('role:', s.baseline_role) ELSE s.baseline END
            AS baseline,
        CASE WHEN k.kind = 'role' THEN CAST(NULL AS STRING) ELSE s.baseline_variant END
            AS baseline_variant,
        s.gpu, s.gpu_family, s.pass, s.kernel, s.speedup, s.verdict, s.center_statistic
    FROM speedups s
    CROSS JOIN (VALUES ('implementation'), ('role')) AS k(kind)
    WHERE k.kind = 'implementation' OR s.baseline_role IS NOT NULL
),
per_kernel AS (
    SELECT candidate, candidate_variant, baseline, baseline_variant, gpu, gpu_family, pass,
        kernel,
        AVG(LN(speedup)) AS log_geomean,
        SUM(LN(speedup)) AS log_sum,
        COUNT(*) AS n,
        MIN(speedup) AS min_speedup,
        MAX(speedup) AS max_speedup,
        SUM(CASE WHEN speedup > 1 THEN 1 ELSE 0 END) AS wins,
        SUM(CASE WHEN speedup < 1 THEN 1 ELSE 0 END) AS losses,
        SUM(CASE WHEN verdict = 'faster' THEN 1 ELSE 0 END) AS faster,
        SUM(CASE WHEN verdict = 'slower' THEN 1 ELSE 0 END) AS slower,
        SUM(CASE WHEN verdict = 'within noise' THEN 1 ELSE 0 END) AS within_noise,
        SUM(CASE WHEN center_statistic = 'mixed' THEN 1 ELSE 0 END) AS mixed_centers
    FROM compared
    GROUP BY candidate, candidate_variant, baseline, baseline_variant, gpu, gpu_family, pass,
        kernel
),
across AS (
    SELECT candidate, candidate_variant, baseline, baseline_variant, gpu, gpu_family, pass,
        CAST(COUNT(*) AS BIGINT) AS kernels,
        CAST(SUM(n) AS BIGINT) AS workloads,
        AVG(log_geomean) AS mean_log,
        STDDEV_SAMP(log_geomean) AS sd_log,
        MIN(log_geomean) AS min_log,
        MAX(log_geomean) AS max_log,
        EXP(SUM(log_sum) / SUM(n)) AS pooled_geomean_speedup,
        MIN(min_speedup) AS min_speedup,
        MAX(max_speedup) AS max_speedup,
        CAST(SUM(wins) AS BIGINT) AS wins,
        CAST(SUM(losses) AS BIGINT) AS losses,
        CAST(SUM(faster) AS BIGINT) AS faster,
        CAST(SUM(slower) AS BIGINT) AS slower,
        CAST(SUM(within_noise) AS BIGINT) AS within_noise,
        CAST(SUM(mixed_centers) AS BIGINT) AS mixed_centers
    FROM per_kernel
    GROUP BY candidate, candidate_variant, baseline, baseline_variant, gpu, gpu_family, pass
),
t_quantiles AS (
    -- Student's t, 0.975 quantile, for df_from <= df <= df_to.
    SELECT * FROM (VALUES
        (1, 1, 12.706), (2, 2, 4.303), (3, 3, 3.182), (4, 4, 2.776), (5, 5, 2.571),
        (6, 6, 2.447), (7, 7, 2.365), (8, 8, 2.306), (9, 9, 2.262), (10, 10, 2.228),
        (11, 11, 2.201), (12, 12, 2.179), (13, 13, 2.160), (14, 14, 2.145), (15, 15, 2.131),
        (16, 16, 2.120), (17, 17, 2.110), (18, 18, 2.101), (19, 19, 2.093), (20, 20, 2.086),
        (21, 21, 2.080), (22, 22, 2.074), (23, 23, 2.069), (24, 24, 2.064), (25, 25, 2.060),
        (26, 26, 2.056), (27, 27, 2.052), (28, 28, 2.048), (29, 29, 2.045), (30, 39, 2.042),
        (40, 59, 2.021), (60, 119, 2.000), (120, 2147483647, 1.980)
    ) AS t(df_from, df_to, t)
)
SELECT
    a.candidate,
    a.candidate_variant,
    a.baseline,
    a.baseline_variant,
    a.gpu,
    a.workloads,
    EXP(a.mean_log) AS geomean_speedup,
    a.min_speedup,
    a.max_speedup,
    a.wins,
    a.losses,
    a.faster,
    a.slower,
    a.within_noise,
    a.pass,
    a.gpu_family,
    a.kernels,
    EXP(a.mean_log - q.t * a.sd_log / SQRT(a.kernels)) AS interval_low,
    EXP(a.mean_log + q.t * a.sd_log / SQRT(a.kernels)) AS interval_high,
    EXP(a.min_log) AS min_kernel_speedup,
    EXP(a.max_log) AS max_kernel_speedup,
    a.workloads - a.faster - a.slower - a.within_noise AS no_verdict,
    a.pooled_geomean_speedup,
    a.mixed_centers
FROM across a
LEFT JOIN t_quantiles q
    ON a.kernels - 1 BETWEEN q.df_from AND q.df_to
