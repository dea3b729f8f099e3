-- view: speedups
-- purpose: Candidate vs baseline latency for every two implementations measured on the same kernel, pass, workload, GPU and protocol family, with a verdict that knows its evidence.
-- grain: one row per ordered pair (candidate, baseline) of different implementations, per kernel, pass, workload, GPU and protocol family; both directions are listed.
-- sources: latest_latencies, sample_medians, noise_envelopes, student_t, verdict_settings,
--   verdict_rule
-- columns:
--   kernel: kernel benchmarked.
--   pass: timed pass.
--   workload: workload name.
--   gpu: canonical GPU key.
--   family: protocol comparability family shared by both runs.
--   candidate: candidate implementation.
--   candidate_variant: candidate's variant, null for none.
--   baseline: baseline implementation.
--   baseline_variant: baseline's variant, null for none.
--   candidate_us: candidate central latency (µs): its median, else its mean
--     (latest_latencies.center_us; center_statistic says which).
--   baseline_us: baseline central latency (µs), as candidate_us.
--   latency_ratio: candidate_us / baseline_us; below 1 means the candidate is faster.
--   speedup: baseline_us / candidate_us; above 1 means the candidate is faster.
--   candidate_run_id: the candidate run used.
--   baseline_run_id: the baseline run used.
--   candidate_runs: how many passed runs the candidate has for this key (the latest is used).
--   baseline_runs: how many passed runs the baseline has for this key (the latest is used).
--   candidate_p20_us: candidate 20th-percentile latency (µs), null when not measured.
--   candidate_p80_us: candidate 80th-percentile latency (µs), null when not measured.
--   baseline_p20_us: baseline 20th-percentile latency (µs), null when not measured.
--   baseline_p80_us: baseline 80th-percentile latency (µs), null when not measured.
--   speedup_low: the low end of the speedup's interval under noise_basis: for 'samples'
--     baseline low / candidate high of the two medians' intervals (sample_medians), for
--     'welch' a 95% Welch t-interval of the ratio of the means, for 'run-to-run' the speedup
--     divided by (1 + the larger envelope), for 'within-run' baseline_low_us /
--     candidate_high_us, each end widened by half its resolution (for p20-p80 spreads:
--     baseline p20 / candidate p80); null without a noise estimate, or when a range's low end
--     is not above 0.
--   speedup_high: the high end of that interval (for 'within-run' baseline_high_us /
--     candidate_low_us).
--   verdict: from verdict_rule, joined on noise_basis (its kind), where the interval lies
--     against a speedup of 1 and whether the speedup lies beyond the minimum effect
--     (verdict_settings.min_effect): 'faster' or 'slower' (the interval excludes 1 and the
--     change exceeds the minimum effect), 'negligible' (beyond noise but smaller), 'within
--     noise' (the interval holds 1), or what is missing: 'different centers', 'different
--     spreads', 'single sample', 'no spread', 'zero width' (the candidate's first).
--   gpu_family: the GPU's family (e.g. 'h100'; gpus.family), for filters across cards.
--   candidate_role: the role the candidate plays in this key (latest_latencies.role), e.g.
--     'reference'; null for none.
--   baseline_role: the role the baseline plays in this key; `baseline_role = 'reference'`
--     gives every kernel's reference implementation (torch, huggingface, ...).
--   candidate_evidence: what the candidate's spread supports (latencies.evidence).
--   baseline_evidence: what the baseline's spread supports.
--   noise_basis: what the verdict's noise estimate rests on, the first that applies:
--     'samples' (both sides kept 7 or more raw samples and their centers are medians: each
--     median's distribution-free 97.5% interval, sample_medians), 'welch' (both sides give a
--     mean, a standard deviation and 2 or more samples, and their centers are means),
--     'run-to-run' (both sides' source, GPU and size class have a calibrated envelope in
--     noise_envelopes), 'within-run p20-p80' (or another spread: both sides have a measured
--     spread of the same statistics, or one under the resolution, which is widened), 'none'
--     otherwise (the verdict says what is missing).
--   candidate_low_us: lower end of the candidate's spread (µs).
--   candidate_high_us: upper end of the candidate's spread (µs).
--   baseline_low_us: lower end of the baseline's spread (µs).
--   baseline_high_us: upper end of the baseline's spread (µs).
--   center_statistic: what the ratio sets against each other: 'median' (both sides' medians),
--     'mean' (both sides give only a mean), or 'mixed' (a mean against a median: the ratio
--     is biased, as a mean sits above the median of a right-skewed latency distribution, and
--     the verdict is 'different centers').
--   candidate_center_statistic: the candidate's center, 'median' or 'mean'.
--   baseline_center_statistic: the baseline's center, 'median' or 'mean'.
--   candidate_observed_at: when the candidate's run was measured (its observed_at in
--     latest_latencies); null when its source gives no time.
--   baseline_observed_at: when the baseline's run was measured; null when not given.
--   measured_apart: true when the two runs were measured more than 30 days apart (the pair
--     may compare two different software stacks, drivers or machines as much as two
--     implementations); false within 30 days; null when either time is unknown.
--   min_effect: the minimum effect the verdict used (verdict_settings.min_effect).
--   noise_changes: for noise_basis 'run-to-run', how many re-run changes the envelope used
--     rests on (the fewer of the two sides'); null otherwise.
--   noise_df: for noise_basis 'welch', the Welch-Satterthwaite degrees of freedom (rounded
--     down) of the t quantile used; null otherwise.
--   stale: true when either side's latest run was measured more than 30 days before the
--     newest result its source has of the same kernel on the same GPU: a key the source
--     stopped measuring when it measured the kernel again (a workload no longer swept, an
--     implementation or variant dropped), so the pair describes an older software stack than
--     the kernel's other pairs. kernel_speedups and speedup_summary leave stale pairs
--     out; false when the times are unknown.
-- notes: Only runs with status 'passed' are compared, the latest per implementation and
--   variant (latest_latencies). Runs are never paired across GPUs, passes, workloads or
--   protocol families, and two variants of one implementation are not paired with each other.
--   The verdict compares an interval of the ratio with 1 and the ratio with the minimum
--   effect, not medians alone: a side without a noise estimate gives no verdict at all.
--   Noise is taken, in order of preference, from raw samples (each median's distribution-free
--   interval, sample_medians), from the samples' means and deviations (Welch),
--   from run-to-run noise calibrated on re-runs of the same code (noise_envelopes), and only
--   then from within-run spreads, which describe one process's samples and understate how
--   much the next run differs (docs/statistics.md). Rounding and timer steps widen an
--   interval; they no longer veto a verdict.
WITH settings AS (
    SELECT min_effect FROM verdict_settings
),
latest AS (
    -- Named once so that engines may compute it once for both sides of the pair. Each side's
    -- noise inputs: the variance of LN(mean) for Welch (the rounding step, uniform over one
    -- step, adds step^2 / 12), the spread widened by half the resolution, the envelope.
    SELECT
        l.*,
        CASE WHEN l.center_statistic = 'mean' AND l.samples >= 2 AND l.stddev_us >= 0
                  AND l.mean_us > 0
             THEN POWER(l.stddev_us / l.mean_us, 2) / l.samples
                  + POWER(COALESCE(l.resolution_us, 0) / l.mean_us, 2) / 12
        END AS log_variance,
        l.low_us - COALESCE(l.resolution_us, 0) / 2 AS wide_low_us,
        l.high_us + COALESCE(l.resolution_us, 0) / 2 AS wide_high_us,
        l.evidence IN ('measured', 'below resolution') AS has_spread,
        m.low / 1000 - COALESCE(l.resolution_us, 0) / 2 AS sample_wide_low_us,
        m.high / 1000 + COALESCE(l.resolution_us, 0) / 2 AS sample_wide_high_us,
        n.log_envelope,
        n.changes AS envelope_changes,
        -- Older by 30 days than its source's newest result of the kernel on the GPU: a
        -- window, so that latest_latencies is read once (docs/benchmarks.md, Run BI).
        COALESCE(l.observed_at < MAX(l.observed_at) OVER (
                     PARTITION BY l.source, l.gpu, l.kernel) - INTERVAL 30 DAYS,
                 FALSE) AS stale
    FROM latest_latencies l
    LEFT JOIN noise_envelopes n
        ON n.calibrated AND n.source = l.source AND n.gpu = l.gpu AND l.center_us > 0
        AND n.size_decade = CAST(LEAST(GREATEST(FLOOR(LOG10(l.center_us)), -1), 5) AS BIGINT)
    LEFT JOIN sample_medians m
        ON m.run_id = l.run_id AND m.metric = 'latency' AND m.high IS NOT NULL
),
paired AS (
    SELECT
        c.kernel,
        c.pass,
        c.workload,
        c.gpu,
        c.family,
        c.implementation AS candidate,
        c.variant AS candidate_variant,
        b.implementation AS baseline,
        b.variant AS baseline_variant,
        c.center_us AS candidate_us,
        b.center_us AS baseline_us,
        c.run_id AS candidate_run_id,
        b.run_id AS baseline_run_id,
        c.runs AS candidate_runs,
        b.runs AS baseline_runs,
        c.p20_us AS candidate_p20_us,
        c.p80_us AS candidate_p80_us,
        b.p20_us AS baseline_p20_us,
        b.p80_us AS baseline_p80_us,
        c.gpu_family,
        c.role AS candidate_role,
        b.role AS baseline_role,
        c.evidence AS candidate_evidence,
        b.evidence AS baseline_evidence,
        c.spread,
        c.low_us AS candidate_low_us,
        c.high_us AS candidate_high_us,
        b.low_us AS baseline_low_us,
        b.high_us AS baseline_high_us,
        c.center_statistic AS candidate_center_statistic,
        b.center_statistic AS baseline_center_statistic,
        c.observed_at AS candidate_observed_at,
        b.observed_at AS baseline_observed_at,
        c.stale OR b.stale AS stale,
        LN(c.center_us / b.center_us) AS log_ratio,
        c.log_variance + b.log_variance AS log_variance,
        FLOOR(POWER(c.log_variance + b.log_variance, 2)
              / NULLIF(POWER(c.log_variance, 2) / (c.samples - 1)
                 + POWER(b.log_variance, 2) / (b.samples - 1), 0)) AS welch_df,
        GREATEST(c.log_envelope, b.log_envelope) AS log_envelope,
        LEAST(c.envelope_changes, b.envelope_changes) AS envelope_changes,
        CASE WHEN c.wide_low_us > 0 AND b.wide_high_us > 0
             THEN LN(c.wide_low_us / b.wide_high_us) END AS range_log_low,
        CASE WHEN b.wide_low_us > 0 AND c.wide_high_us > 0
             THEN LN(c.wide_high_us / b.wide_low_us) END AS range_log_high,
        CASE WHEN c.sample_wide_low_us > 0 AND b.sample_wide_high_us > 0
             THEN LN(c.sample_wide_low_us / b.sample_wide_high_us) END AS sample_log_low,
        CASE WHEN b.sample_wide_low_us > 0 AND c.sample_wide_high_us > 0
             THEN LN(c.sample_wide_high_us / b.sample_wide_low_us) END AS sample_log_high,
        CASE
            WHEN c.center_statistic <> b.center_statistic THEN 'different centers'
            WHEN c.center_statistic = 'median' AND c.sample_wide_high_us IS NOT NULL
                AND b.sample_wide_high_us IS NOT NULL THEN 'samples'
            WHEN c.log_variance + b.log_variance > 0 THEN 'welch'
            WHEN c.log_envelope IS NOT NULL AND b.log_envelope IS NOT NULL THEN 'run-to-run'
            WHEN c.has_spread AND b.has_spread AND c.spread = b.spread THEN 'within-run'
            WHEN c.has_spread AND b.has_spread THEN 'different spreads'
            WHEN NOT c.has_spread THEN c.evidence
            ELSE b.evidence
        END AS basis
    FROM latest c
    JOIN latest b
        ON c.kernel = b.kernel
        AND c.pass = b.pass
        AND c.workload = b.workload
        AND c.gpu = b.gpu
        AND c.family = b.family
        AND c.implementation <> b.implementation
),
bounded AS (
    SELECT
        p.*,
        CASE p.basis
            WHEN 'samples' THEN p.sample_log_low
            WHEN 'welch' THEN p.log_ratio - t.t * SQRT(p.log_variance)
            WHEN 'run-to-run' THEN p.log_ratio - p.log_envelope
            WHEN 'within-run' THEN p.range_log_low
        END AS log_low,
        CASE p.basis
            WHEN 'samples' THEN p.sample_log_high
            WHEN 'welch' THEN p.log_ratio + t.t * SQRT(p.log_variance)
            WHEN 'run-to-run' THEN p.log_ratio + p.log_envelope
            WHEN 'within-run' THEN p.range_log_high
        END AS log_high
    FROM paired p
    LEFT JOIN student_t t
        ON p.basis = 'welch' AND GREATEST(p.welch_df, 1) BETWEEN t.df_from AND t.df_to
)
SELECT
    p.kernel,
    p.pass,
    p.workload,
    p.gpu,
    p.family,
    p.candidate,
    p.candidate_variant,
    p.baseline,
    p.baseline_variant,
    p.candidate_us,
    p.baseline_us,
    p.candidate_us / p.baseline_us AS latency_ratio,
    p.baseline_us / p.candidate_us AS speedup,
    p.candidate_run_id,
    p.baseline_run_id,
    p.candidate_runs,
    p.baseline_runs,
    p.candidate_p20_us,
    p.candidate_p80_us,
    p.baseline_p20_us,
    p.baseline_p80_us,
    EXP(-p.log_high) AS speedup_low,
    EXP(-p.log_low) AS speedup_high,
    v.verdict,
    p.gpu_family,
    p.candidate_role,
    p.baseline_role,
    p.candidate_evidence,
    p.baseline_evidence,
    CASE p.basis
        WHEN 'within-run' THEN CONCAT('within-run ', p.spread)
        WHEN 'samples' THEN 'samples'
        WHEN 'welch' THEN 'welch'
        WHEN 'run-to-run' THEN 'run-to-run'
        ELSE 'none'
    END AS noise_basis,
    p.candidate_low_us,
    p.candidate_high_us,
    p.baseline_low_us,
    p.baseline_high_us,
    CASE WHEN p.candidate_center_statistic = p.baseline_center_statistic
         THEN p.candidate_center_statistic ELSE 'mixed' END AS center_statistic,
    p.candidate_center_statistic,
    p.baseline_center_statistic,
    p.candidate_observed_at,
    p.baseline_observed_at,
    p.candidate_observed_at > p.baseline_observed_at + INTERVAL 30 DAYS
        OR p.baseline_observed_at > p.candidate_observed_at + INTERVAL 30 DAYS AS measured_apart,
    s.min_effect,
    CASE WHEN p.basis = 'run-to-run' THEN p.envelope_changes END AS noise_changes,
    CASE WHEN p.basis = 'welch' THEN CAST(GREATEST(p.welch_df, 1) AS BIGINT) END AS noise_df,
    p.stale
FROM bounded p
CROSS JOIN settings s
JOIN verdict_rule v
    ON v.basis = p.basis
    AND v.placement = CASE
        WHEN p.basis NOT IN ('samples', 'welch', 'run-to-run', 'within-run') THEN 'none'
        WHEN p.log_low > 0 THEN 'above'
        WHEN p.log_high < 0 THEN 'below'
        ELSE 'overlap'
    END
    AND v.effect = CASE WHEN ABS(p.log_ratio) > LN(1 + s.min_effect) THEN 'beyond'
                        ELSE 'under' END
