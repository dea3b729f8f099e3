-- view: kernel_speedups
-- purpose: How much faster a candidate is than a baseline per kernel, on one GPU and pass: the geometric mean of the speedups over the kernel's workloads, with a 95% interval and the counts behind it.
-- grain: one row per candidate, candidate_variant, baseline, baseline_variant, GPU, pass and kernel; baseline is an implementation, or 'role:<role>' (e.g. 'role:reference') for whichever implementation plays that role in each key.
-- sources: speedups, student_t, kernel_families
-- columns:
--   candidate: candidate implementation.
--   candidate_variant: candidate's variant, null for none.
--   baseline: baseline implementation, or 'role:<role>' (speedups.baseline_role) for the rows
--     comparing with whichever implementation plays that role for the kernel.
--   baseline_variant: baseline's variant, null for none and for role rows.
--   gpu: canonical GPU key.
--   gpu_family: the GPU's family (gpus.family).
--   pass: timed pass; passes are never pooled.
--   kernel: the kernel.
--   workloads: the kernel's workloads compared (speedups rows, n).
--   geomean_speedup: EXP(AVG(LN(speedup))) over the kernel's workloads: above 1, the
--     candidate is faster (speedup = baseline_us / candidate_us, as in speedups).
--   interval_low: lower end of the 95% t-interval of the geometric mean over workloads:
--     EXP(m - t x s / SQRT(n)), m and s the mean and sample standard deviation of the n values
--     LN(speedup), t the 0.975 quantile of Student's t with n - 1 degrees of freedom
--     (student_t); null when n < 3.
--   interval_high: EXP(m + t x s / SQRT(n)); null when n < 3.
--   min_speedup: smallest speedup of one workload.
--   max_speedup: largest speedup of one workload.
--   wins: workloads with speedup > 1 (candidate faster).
--   losses: workloads with speedup < 1; speedup = 1 counts as neither.
--   faster: workloads whose verdict is 'faster'.
--   slower: workloads whose verdict is 'slower'.
--   within_noise: workloads whose verdict is 'within noise'.
--   no_verdict: workloads with no noise estimate (see speedups.verdict); faster + slower +
--     within_noise + no_verdict + negligible = workloads.
--   mixed_centers: workloads whose ratio sets a mean against a median
--     (speedups.center_statistic 'mixed').
--   negligible: workloads whose verdict is 'negligible' (beyond noise, under the minimum
--     effect).
--   kernel_family: the kernel's family (kernel_families.family: variants of one kernel that
--     speedup_summary counts once), the kernel itself when it has none.
-- notes: Only fresh pairs count (speedups.stale is false): a key its source stopped measuring
--   more than 30 days before its newest result on that GPU is left out, so a headline
--   follows what the source measures now (speedups lists the stale pairs, flagged). A
--   kernel's workloads are the sizes its benchmark sweeps, not a random sample: the
--   interval says how far the speedup moves across the sweep around its geometric mean, not
--   how precisely each workload was measured (the verdict counts say that). With 2 workloads
--   t is 12.7 and the interval says nothing, so it starts at 3. speedup_summary summarises
--   these rows over kernels, each kernel weighing the same.
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
    WHERE (k.kind = 'implementation' OR s.baseline_role IS NOT NULL) AND NOT s.stale
),
per_kernel AS (
    SELECT candidate, candidate_variant, baseline, baseline_variant, gpu, gpu_family, pass,
        kernel,
        CAST(COUNT(*) AS BIGINT) AS workloads,
        AVG(LN(speedup)) AS mean_log,
        STDDEV_SAMP(LN(speedup)) AS sd_log,
        MIN(speedup) AS min_speedup,
        MAX(speedup) AS max_speedup,
        CAST(SUM(CASE WHEN speedup > 1 THEN 1 ELSE 0 END) AS BIGINT) AS wins,
        CAST(SUM(CASE WHEN speedup < 1 THEN 1 ELSE 0 END) AS BIGINT) AS losses,
        CAST(SUM(CASE WHEN verdict = 'faster' THEN 1 ELSE 0 END) AS BIGINT) AS faster,
        CAST(SUM(CASE WHEN verdict = 'slower' THEN 1 ELSE 0 END) AS BIGINT) AS slower,
        CAST(SUM(CASE WHEN verdict = 'within noise' THEN 1 ELSE 0 END) AS BIGINT)
            AS within_noise,
        CAST(SUM(CASE WHEN verdict = 'negligible' THEN 1 ELSE 0 END) AS BIGINT) AS negligible,
        CAST(SUM(CASE WHEN center_statistic = 'mixed' THEN 1 ELSE 0 END) AS BIGINT)
            AS mixed_centers
    FROM compared
    GROUP BY candidate, candidate_variant, baseline, baseline_variant, gpu, gpu_family, pass,
        kernel
)
SELECT
    k.candidate,
    k.candidate_variant,
    k.baseline,
    k.baseline_variant,
    k.gpu,
    k.gpu_family,
    k.pass,
    k.kernel,
    k.workloads,
    EXP(k.mean_log) AS geomean_speedup,
    CASE WHEN k.workloads >= 3 THEN EXP(k.mean_log - q.t * k.sd_log / SQRT(k.workloads))
        END AS interval_low,
    CASE WHEN k.workloads >= 3 THEN EXP(k.mean_log + q.t * k.sd_log / SQRT(k.workloads))
        END AS interval_high,
    k.min_speedup,
    k.max_speedup,
    k.wins,
    k.losses,
    k.faster,
    k.slower,
    k.within_noise,
    k.workloads - k.faster - k.slower - k.within_noise - k.negligible AS no_verdict,
    k.mixed_centers,
    k.negligible,
    COALESCE(f.family, k.kernel) AS kernel_family
FROM per_kernel k
LEFT JOIN kernel_families f
    ON f.kernel = k.kernel
LEFT JOIN student_t q
    ON k.workloads - 1 BETWEEN q.df_from AND q.df_to
