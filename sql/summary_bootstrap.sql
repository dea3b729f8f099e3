-- view: summary_bootstrap
-- purpose: A percentile bootstrap interval over kernel families for each speedup_summary row: how far the family-weighted geometric mean moves when the families summarised are resampled, without assuming their log speedups are normal.
-- grain: one row per speedup_summary row (candidate, candidate_variant, baseline, baseline_variant, GPU and pass) with 3 to 64 kernel families; fewer or more families have no row.
-- sources: kernel_speedups
-- columns:
--   candidate: candidate implementation.
--   candidate_variant: candidate's variant, null for none.
--   baseline: baseline implementation, or 'role:<role>' (as in speedup_summary).
--   baseline_variant: baseline's variant, null for none and for role rows.
--   gpu: canonical GPU key.
--   gpu_family: the GPU's family.
--   pass: timed pass.
--   families: number of kernel families resampled (k), as speedup_summary.families.
--   geomean_speedup: the family-weighted geometric mean, EXP(AVG over families of LN(g_f)),
--     equal to speedup_summary.geomean_speedup.
--   bootstrap_low: the 2.5th percentile of the 1,000 resampled geometric means (continuous
--     percentile): the low end of a 95% percentile-bootstrap interval.
--   bootstrap_high: the 97.5th percentile of the resampled geometric means.
--   replicates: number of resamples (1,000).
--   min_family_speedup: the smallest family geometric mean g_f.
--   max_family_speedup: the largest family geometric mean g_f.
-- notes: Each replicate draws k families with replacement from the k families of the row (a
--   family is its kernels' geometric mean, g_f, as in speedup_summary) and takes the geometric
--   mean of the k drawn; the interval is the 2.5th-97.5th percentile of 1,000 replicates
--   (Efron's percentile bootstrap, the resampling unit the kernel family). The draws are
--   pseudo-random but fixed: family number pick (0 to k - 1, families in name order) of draw j
--   of replicate b is x mod k, x from x0 = (b - 1) x 1000003 + j x 1009 + k by three rounds
--   of x <- (x x a mod p)^2 mod p (a = 16807, 48271, then 69621, the minimal-standard
--   multipliers; p = 2^31 - 1), so the same inputs give
--   the same interval in DuckDB and Spark and in any load order. Unlike the t-interval
--   (speedup_summary.interval_low/high), it needs no normality and never leaves the range of
--   the families' values; with few families it is too narrow (a bootstrap of 3 values cannot
--   see beyond them): read it beside the t-interval, not instead of it.
WITH per_family AS (
    SELECT candidate, candidate_variant, baseline, baseline_variant, gpu, gpu_family, pass,
        kernel_family,
        AVG(LN(geomean_speedup)) AS log_geomean
    FROM kernel_speedups
    GROUP BY candidate, candidate_variant, baseline, baseline_variant, gpu, gpu_family, pass,
        kernel_family
),
numbered AS (
    SELECT f.*,
        CAST(COUNT(*) OVER (PARTITION BY candidate, candidate_variant, baseline,
                            baseline_variant, gpu, gpu_family, pass) AS BIGINT) AS k,
        CAST(ROW_NUMBER() OVER (PARTITION BY candidate, candidate_variant, baseline,
                                baseline_variant, gpu, gpu_family, pass
                                ORDER BY kernel_family) - 1 AS BIGINT) AS pick,
        AVG(log_geomean) OVER (PARTITION BY candidate, candidate_variant, baseline,
                               baseline_variant, gpu, gpu_family, pass) AS mean_log,
        MIN(log_geomean) OVER (PARTITION BY candidate, candidate_variant, baseline,
                               baseline_variant, gpu, gpu_family, pass) AS min_log,
        MAX(log_geomean) OVER (PARTITION BY candidate, candidate_variant, baseline,
                               baseline_variant, gpu, gpu_family, pass) AS max_log
    FROM per_family f
),
digits AS (
    SELECT CAST(v AS BIGINT) AS v FROM (VALUES (0), (1), (2), (3), (4), (5), (6), (7), (8), (9))
        AS t (v)
),
hundred AS (
    SELECT a.v * 10 + b.v AS i FROM digits a CROSS JOIN digits b
),
thousand AS (
    SELECT h.i * 10 + d.v AS i FROM hundred h CROSS JOIN digits d
),
sizes AS (
    -- Every family count a row can have, not those the rows have: reading numbered a second
    -- time for them made DuckDB and Spark work it out twice (DuckDB's view 2.7-3.0 s at 1M
    -- runs against 2.1-2.3 s, Spark's query 35-42 s against 30-34 s), and Spark's check of
    -- each registered view copies what a CTE read twice reads (docs/benchmarks.md, Run BG).
    -- The draws of a count no row has (2.1M draws in all) are joined to no row.
    SELECT i AS k FROM hundred WHERE i BETWEEN 3 AND 64
),
seeded AS (
    -- Draw j of replicate b for a row of k families.
    SELECT s.k, r.i + 1 AS replicate,
        MOD(r.i * 1000003 + j.i * 1009 + s.k, 2147483647) AS x0
    FROM sizes s
    JOIN hundred j ON j.i < s.k
    CROSS JOIN thousand r
),
mixed AS (
    SELECT k, replicate,
        MOD(MOD(x0 * 16807, 2147483647) * MOD(x0 * 16807, 2147483647), 2147483647) AS x1
    FROM seeded
),
remixed AS (
    SELECT k, replicate,
        MOD(MOD(x1 * 48271, 2147483647) * MOD(x1 * 48271, 2147483647), 2147483647) AS x2
    FROM mixed
),
draws AS (
    SELECT k, replicate,
        MOD(MOD(MOD(x2 * 69621, 2147483647) * MOD(x2 * 69621, 2147483647), 2147483647), k)
            AS pick
    FROM remixed
),
resampled AS (
    SELECT n.candidate, n.candidate_variant, n.baseline, n.baseline_variant, n.gpu,
        n.gpu_family, n.pass, n.k, d.replicate,
        SUM(n.log_geomean) / n.k AS replicate_log,
        MAX(n.mean_log) AS mean_log,
        MAX(n.min_log) AS min_log,
        MAX(n.max_log) AS max_log
    FROM numbered n
    JOIN draws d ON d.k = n.k AND d.pick = n.pick
    GROUP BY n.candidate, n.candidate_variant, n.baseline, n.baseline_variant, n.gpu,
        n.gpu_family, n.pass, n.k, d.replicate
),
spread AS (
    SELECT candidate, candidate_variant, baseline, baseline_variant, gpu, gpu_family, pass,
        k,
        MAX(mean_log) AS mean_log,
        MAX(min_log) AS min_log,
        MAX(max_log) AS max_log,
        PERCENTILE_CONT(0.025) WITHIN GROUP (ORDER BY replicate_log) AS low_log,
        PERCENTILE_CONT(0.975) WITHIN GROUP (ORDER BY replicate_log) AS high_log,
        CAST(COUNT(*) AS BIGINT) AS replicates
    FROM resampled
    GROUP BY candidate, candidate_variant, baseline, baseline_variant, gpu, gpu_family, pass, k
)
SELECT
    s.candidate,
    s.candidate_variant,
    s.baseline,
    s.baseline_variant,
    s.gpu,
    s.gpu_family,
    s.pass,
    s.k AS families,
    EXP(s.mean_log) AS geomean_speedup,
    EXP(s.low_log) AS bootstrap_low,
    EXP(s.high_log) AS bootstrap_high,
    s.replicates,
    EXP(s.min_log) AS min_family_speedup,
    EXP(s.max_log) AS max_family_speedup
FROM spread s
