-- view: rate_speedups
-- purpose: Candidate vs baseline for every two implementations measured as a rate (throughput in FLOP/s, bandwidth in bytes/s: higher is better) on the same kernel, pass, workload, GPU and protocol family: the speedup in the right direction, with the verdict rule.
-- grain: one row per ordered pair (candidate, baseline) of different implementations, per kernel, pass, workload, GPU, protocol family, metric and unit; both directions are listed.
-- sources: runs, run_statistics, sample_medians, protocols, gpus, verdict_settings,
--   verdict_rule
-- columns:
--   kernel: kernel benchmarked.
--   pass: timed pass.
--   workload: workload name.
--   gpu: canonical GPU key.
--   family: protocol comparability family shared by both runs.
--   metric: 'throughput' or 'bandwidth'.
--   unit: the rate's unit (e.g. 'TFLOP/s', 'GB/s'), the same on both sides.
--   candidate: candidate implementation.
--   candidate_variant: candidate's variant, null for none.
--   baseline: baseline implementation.
--   baseline_variant: baseline's variant, null for none.
--   candidate_rate: the candidate's central rate (its median, else its mean), in unit.
--   baseline_rate: the baseline's central rate, in unit.
--   speedup: candidate_rate / baseline_rate; above 1 means the candidate is faster (it
--     does more work per second on the same workload), as speedups' speedup.
--   speedup_low: low end of the speedup's interval: from the two medians' intervals of
--     sample_medians when both sides kept 7 or more raw samples, else from the two within-run
--     spreads (candidate low / baseline high, each widened by half its resolution); null
--     without either.
--   speedup_high: high end (candidate high / baseline low).
--   verdict: from verdict_rule, as in speedups: 'faster' (the interval lies above 1 and the
--     speedup beyond the minimum effect), 'slower', 'negligible', 'within noise', or what is
--     missing ('no spread', 'zero width', 'single sample', 'different centers', 'different
--     spreads').
--   noise_basis: 'samples' when both sides kept 7 or more raw samples (and both centers are
--     medians), else 'within-run <spread>' when both sides have a measured spread of the same
--     statistics, else 'none'.
--   candidate_run_id: the candidate run used (the latest passed one of its key).
--   baseline_run_id: the baseline run used.
--   gpu_family: the GPU's family.
--   min_effect: the minimum effect the verdict used (verdict_settings.min_effect).
-- notes: speedups compares latencies (lower is better); a source that publishes rates (a
--   Triton perf_report in TFLOP/s or GB/s, FlashInfer's tflops) is compared here, higher
--   being better, so its speedup reads as speedups' does. Raw samples, then within-run
--   spreads give a verdict here: rates carry no sample counts for Welch, and run-to-run
--   envelopes are calibrated on latencies. Each side is the latest passed run of its key, as in
--   latest_latencies.
WITH settings AS (
    SELECT min_effect FROM verdict_settings
),
rates AS (
    SELECT
        r.run_id, r.kernel, r.pass, r.workload, r.gpu, r.implementation, r.variant,
        COALESCE(p.family, r.protocol_id) AS family,
        COALESCE(g.family, r.gpu) AS gpu_family,
        s.metric, s.unit, s.center, s.center_statistic, s.spread, s.evidence,
        s.low - COALESCE(s.resolution, 0) / 2 AS wide_low,
        s.high + COALESCE(s.resolution, 0) / 2 AS wide_high,
        s.evidence IN ('measured', 'below resolution') AS has_spread,
        m.low - COALESCE(s.resolution, 0) / 2 AS sample_wide_low,
        m.high + COALESCE(s.resolution, 0) / 2 AS sample_wide_high,
        ROW_NUMBER() OVER (
            PARTITION BY r.kernel, r.pass, r.workload, r.gpu, COALESCE(p.family, r.protocol_id),
                r.implementation, r.variant, s.metric, s.unit
            ORDER BY r.observed_at DESC NULLS LAST, r.run_id DESC
        ) AS rn
    FROM runs r
    JOIN run_statistics s ON s.run_id = r.run_id
    LEFT JOIN protocols p ON p.protocol_id = r.protocol_id
    LEFT JOIN gpus g ON g.gpu = r.gpu
    LEFT JOIN sample_medians m
        ON m.run_id = r.run_id AND m.metric = s.metric AND m.unit = s.unit
        AND m.high IS NOT NULL
    WHERE r.status = 'passed' AND s.metric IN ('throughput', 'bandwidth') AND s.center > 0
),
paired AS (
    SELECT
        c.kernel, c.pass, c.workload, c.gpu, c.family, c.metric, c.unit,
        c.implementation AS candidate, c.variant AS candidate_variant,
        b.implementation AS baseline, b.variant AS baseline_variant,
        c.center AS candidate_rate, b.center AS baseline_rate,
        c.run_id AS candidate_run_id, b.run_id AS baseline_run_id, c.gpu_family, c.spread,
        LN(c.center / b.center) AS log_speedup,
        CASE WHEN c.wide_low > 0 AND b.wide_high > 0
             THEN LN(c.wide_low / b.wide_high) END AS range_log_low,
        CASE WHEN b.wide_low > 0 AND c.wide_high > 0
             THEN LN(c.wide_high / b.wide_low) END AS range_log_high,
        CASE WHEN c.sample_wide_low > 0 AND b.sample_wide_high > 0
             THEN LN(c.sample_wide_low / b.sample_wide_high) END AS sample_log_low,
        CASE WHEN b.sample_wide_low > 0 AND c.sample_wide_high > 0
             THEN LN(c.sample_wide_high / b.sample_wide_low) END AS sample_log_high,
        CASE
            WHEN c.center_statistic <> b.center_statistic THEN 'different centers'
            WHEN c.center_statistic = 'median' AND c.sample_wide_high IS NOT NULL
                AND b.sample_wide_high IS NOT NULL THEN 'samples'
            WHEN c.has_spread AND b.has_spread AND c.spread = b.spread THEN 'within-run'
            WHEN c.has_spread AND b.has_spread THEN 'different spreads'
            WHEN NOT c.has_spread THEN c.evidence
            ELSE b.evidence
        END AS basis
    FROM rates c
    JOIN rates b
        ON c.kernel = b.kernel AND c.pass = b.pass AND c.workload = b.workload
        AND c.gpu = b.gpu AND c.family = b.family AND c.metric = b.metric
        AND c.unit = b.unit AND c.implementation <> b.implementation
    WHERE c.rn = 1 AND b.rn = 1
),
bounded AS (
    SELECT
        p.*,
        CASE p.basis WHEN 'samples' THEN p.sample_log_low
            WHEN 'within-run' THEN p.range_log_low END AS log_low,
        CASE p.basis WHEN 'samples' THEN p.sample_log_high
            WHEN 'within-run' THEN p.range_log_high END AS log_high
    FROM paired p
)
SELECT
    p.kernel,
    p.pass,
    p.workload,
    p.gpu,
    p.family,
    p.metric,
    p.unit,
    p.candidate,
    p.candidate_variant,
    p.baseline,
    p.baseline_variant,
    p.candidate_rate,
    p.baseline_rate,
    p.candidate_rate / p.baseline_rate AS speedup,
    EXP(p.log_low) AS speedup_low,
    EXP(p.log_high) AS speedup_high,
    v.verdict,
    CASE p.basis WHEN 'within-run' THEN CONCAT('within-run ', p.spread)
        WHEN 'samples' THEN 'samples' ELSE 'none' END AS noise_basis,
    p.candidate_run_id,
    p.baseline_run_id,
    p.gpu_family,
    s.min_effect
FROM bounded p
CROSS JOIN settings s
JOIN verdict_rule v
    ON v.basis = p.basis
    -- verdict_rule places the latency ratio: a rate ratio above 1 is a latency ratio below.
    AND v.placement = CASE
        WHEN p.basis NOT IN ('samples', 'within-run') THEN 'none'
        WHEN p.log_low > 0 THEN 'below'
        WHEN p.log_high < 0 THEN 'above'
        ELSE 'overlap'
    END
    AND v.effect = CASE WHEN ABS(p.log_speedup) > LN(1 + s.min_effect) THEN 'beyond'
                        ELSE 'under' END
