-- view: speedup_summary
-- purpose: How a candidate fares against a baseline (an implementation, or a role such as the reference) on one GPU and pass: each kernel family weighted equally, with a 95% interval and the counts behind it.
-- grain: one row per candidate, candidate_variant, baseline, baseline_variant, GPU and pass; baseline is an implementation, or 'role:<role>' (e.g. 'role:reference') for whichever implementation plays that role in each key.
-- sources: kernel_speedups, student_t
-- columns:
--   candidate: candidate implementation.
--   candidate_variant: candidate's variant, null for none.
--   baseline: baseline implementation, or 'role:<role>' (speedups.baseline_role) for the rows
--     comparing with whichever implementation plays that role per kernel.
--   baseline_variant: baseline's variant, null for none and for role rows.
--   gpu: canonical GPU key.
--   workloads: number of (kernel, workload) comparisons summarised (speedups rows).
--   geomean_speedup: the family-weighted geometric mean: per kernel, the geometric mean of
--     its workloads' speedups, g_k = EXP(AVG(LN(speedup))) (kernel_speedups); per kernel
--     family, the geometric mean of its kernels' g_k, g_f (a kernel in no family is its own);
--     then EXP(AVG over families of LN(g_f)), every family weighing the same however many
--     kernels and workloads it has.
--   min_speedup: smallest speedup of a single comparison.
--   max_speedup: largest speedup of a single comparison.
--   wins: comparisons with speedup > 1 (candidate faster).
--   losses: comparisons with speedup < 1 (candidate slower); speedup = 1 counts as neither.
--   faster: comparisons whose verdict is 'faster' (beyond noise and the minimum effect,
--     candidate below).
--   slower: comparisons whose verdict is 'slower'.
--   within_noise: comparisons whose interval of the ratio holds 1 (speedups.verdict).
--   pass: timed pass; passes are never pooled ('full' times forward and backward again).
--   gpu_family: the GPU's family (gpus.family).
--   kernels: number of kernels summarised.
--   interval_low: lower end of the 95% t-interval of the family-weighted geometric mean:
--     EXP(m - t x s / SQRT(k)), m and s the mean and sample standard deviation of the k
--     values LN(g_f), t the 0.975 quantile of Student's t with k - 1 degrees of freedom
--     (student_t); null when k < 3 families (with 2, t is 12.7 and the interval says
--     nothing; 0.2.8 printed "31.3x, 29.9-32.9" for one kernel's two variants, now one
--     family).
--   interval_high: EXP(m + t x s / SQRT(k)); null when k < 3.
--   min_kernel_speedup: the smallest per-kernel geometric mean g_k.
--   max_kernel_speedup: the largest per-kernel geometric mean g_k.
--   no_verdict: comparisons with no noise estimate ('single sample', 'no spread', 'zero
--     width', 'different spreads') or a mean set against a median ('different centers');
--     faster + slower + within_noise + negligible + no_verdict = workloads.
--   pooled_geomean_speedup: the per-row pooled geometric mean EXP(AVG(LN(speedup))) over all
--     comparisons, each workload weighing the same: a kernel that sweeps many workloads
--     dominates it. Kept for comparison with older reports; quote geomean_speedup.
--   mixed_centers: comparisons whose ratio sets a mean against a median
--     (speedups.center_statistic 'mixed'); they are in the geometric means, biased by the
--     mean's pull towards slow samples: 0 means every ratio compares like with like.
--   negligible: comparisons whose verdict is 'negligible' (beyond noise, under the minimum
--     effect).
--   families: number of kernel families summarised (k): the count the mean and the interval
--     are taken over.
-- notes: Stale pairs (speedups.stale: keys the source stopped measuring: 30 days older than
--   the newest result of their kernel on the GPU) are left out, as in kernel_speedups. Speedups are
--   ratios, so they are summarised on the log scale. The interval treats kernels as the sample (kernel-level variation), not workloads, and says nothing about
--   measurement noise within a kernel; with few kernels it is wide, as it should be. Each row
--   is one direction of a pair (candidate vs baseline); the reverse row's geomean is the
--   inverse. kernel_speedups has the per-kernel rows (g_k, with their own interval over
--   workloads).
WITH per_kernel AS (
    -- Each kernel's geometric mean over its workloads, with its counts: kernel_speedups.
    SELECT candidate, candidate_variant, baseline, baseline_variant, gpu, gpu_family, pass,
        kernel, kernel_family, LN(geomean_speedup) AS log_geomean, workloads AS n,
        min_speedup, max_speedup, wins, losses, faster, slower, within_noise, mixed_centers,
        negligible
    FROM kernel_speedups
),
per_family AS (
    -- Each family's geometric mean over its kernels (a kernel in no family is its own).
    SELECT candidate, candidate_variant, baseline, baseline_variant, gpu, gpu_family, pass,
        kernel_family,
        AVG(log_geomean) AS log_geomean,
        CAST(COUNT(*) AS BIGINT) AS kernels,
        CAST(SUM(n) AS BIGINT) AS n,
        -- n x the mean of a kernel's logs is the sum of its logs.
        SUM(n * log_geomean) AS sum_logs,
        MIN(log_geomean) AS min_kernel_log,
        MAX(log_geomean) AS max_kernel_log,
        MIN(min_speedup) AS min_speedup,
        MAX(max_speedup) AS max_speedup,
        SUM(wins) AS wins, SUM(losses) AS losses, SUM(faster) AS faster,
        SUM(slower) AS slower, SUM(within_noise) AS within_noise,
        SUM(mixed_centers) AS mixed_centers, SUM(negligible) AS negligible
    FROM per_kernel
    GROUP BY candidate, candidate_variant, baseline, baseline_variant, gpu, gpu_family, pass,
        kernel_family
),
across AS (
    SELECT candidate, candidate_variant, baseline, baseline_variant, gpu, gpu_family, pass,
        CAST(COUNT(*) AS BIGINT) AS families,
        CAST(SUM(kernels) AS BIGINT) AS kernels,
        CAST(SUM(n) AS BIGINT) AS workloads,
        AVG(log_geomean) AS mean_log,
        STDDEV_SAMP(log_geomean) AS sd_log,
        MIN(min_kernel_log) AS min_log,
        MAX(max_kernel_log) AS max_log,
        EXP(SUM(sum_logs) / SUM(n)) AS pooled_geomean_speedup,
        MIN(min_speedup) AS min_speedup,
        MAX(max_speedup) AS max_speedup,
        CAST(SUM(wins) AS BIGINT) AS wins,
        CAST(SUM(losses) AS BIGINT) AS losses,
        CAST(SUM(faster) AS BIGINT) AS faster,
        CAST(SUM(slower) AS BIGINT) AS slower,
        CAST(SUM(within_noise) AS BIGINT) AS within_noise,
        CAST(SUM(mixed_centers) AS BIGINT) AS mixed_centers,
        CAST(SUM(negligible) AS BIGINT) AS negligible
    FROM per_family
    GROUP BY candidate, candidate_variant, baseline, baseline_variant, gpu, gpu_family, pass
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
    CASE WHEN a.families >= 3 THEN EXP(a.mean_log - q.t * a.sd_log / SQRT(a.families))
        END AS interval_low,
    CASE WHEN a.families >= 3 THEN EXP(a.mean_log + q.t * a.sd_log / SQRT(a.families))
        END AS interval_high,
    EXP(a.min_log) AS min_kernel_speedup,
    EXP(a.max_log) AS max_kernel_speedup,
    a.workloads - a.faster - a.slower - a.within_noise - a.negligible AS no_verdict,
    a.pooled_geomean_speedup,
    a.mixed_centers,
    a.negligible,
    a.families
FROM across a
LEFT JOIN student_t q
    ON a.families - 1 BETWEEN q.df_from AND q.df_to
