-- view: series_steps
-- purpose: Every step of every latency and memory series, in the metric's unit, judged by the one verdict rule (raw samples where both results kept them, Welch where means and deviations are given, else run-to-run noise calibrated on re-runs, else within-run spreads) and against the implementations measured with it: the one trend rule trends and memory_trends show.
-- grain: one row per passed run with a timestamp and per metric it has a median or a mean of; a series is one kernel, pass, implementation, variant, workload, GPU, protocol family and metric, in time order.
-- sources: series_context, environment_facts, noise_envelopes, sample_medians, student_t, verdict_settings, verdict_rule
-- columns:
--   kernel: kernel benchmarked.
--   pass: timed pass.
--   implementation: implementation key.
--   variant: implementation variant, null for none.
--   workload: workload name.
--   gpu: canonical GPU key.
--   family: protocol comparability family (protocols.family; the protocol digest when the
--     protocol document was never loaded).
--   metric: 'latency' or 'memory'.
--   unit: the metric's unit ('ns' or 'MB').
--   gpu_family: the GPU's family (gpus.family; the GPU key when not in the catalog).
--   step: position in the series, 1 for the earliest result.
--   points: number of results in the series.
--   run_id: this result's run.
--   previous_run_id: the run just before it in the series; null at step 1.
--   observed_at: when this result was measured (UTC).
--   previous_observed_at: when the previous result was measured.
--   version: release of the implementation or harness for this run (runs.version).
--   previous_version: release for the previous run.
--   median: median, in unit; null when the source gives only a mean.
--   previous_median: the previous result's median.
--   p20: 20th percentile, null when not measured.
--   p80: 80th percentile, null when not measured.
--   previous_p20: the previous result's p20.
--   previous_p80: the previous result's p80.
--   change: center / previous_center - 1; above 0 means slower (or more memory); null at
--     step 1.
--   evidence: what this result's spread supports (run_statistics.evidence).
--   previous_evidence: what the previous result's spread supports.
--   same_version: true when version = previous_version (a re-run of the same release); null
--     when either is unknown and at step 1.
--   run_noise: the run-to-run noise envelope the step was judged by (noise_basis
--     'run-to-run'): the larger of the two results' envelopes (noise_envelopes.envelope, per
--     source, GPU and latency size class); null for other bases and for memory.
--   noise_steps: how many re-run changes that envelope rests on (the fewer of the two
--     results'); 0 when no envelope was used.
--   noise_basis: what the verdict's noise estimate rests on, as in speedups: 'samples',
--     'welch', 'run-to-run', 'within-run p20-p80' (or another spread), 'none'; null at step 1.
--   verdict: from verdict_rule, judging this result (candidate) against the previous one
--     (baseline) exactly as speedups judges a pair: 'slower', 'faster' (the interval of the
--     ratio excludes 1 and the change exceeds verdict_settings.min_effect), 'negligible'
--     (beyond noise, under the minimum effect), 'within noise', or what is missing ('single
--     sample', 'no spread', 'zero width', 'different centers', 'different spreads'); null at
--     step 1. For memory, 'slower' means more memory.
--   beyond_noise: true when the verdict is 'faster', 'slower' or 'negligible' (the interval
--     excludes 1), false when 'within noise', null otherwise (no noise estimate) and at step 1.
--   together_implementations: other implementations of the same kernel, pass, workload, GPU,
--     family and metric measured together with this step: a step of theirs whose result and
--     previous result were each observed within one hour of this result's and the previous
--     result's (harnesses such as Liger's time one provider after another, seconds apart);
--     null when none.
--   together_change: how those moved over the same step: EXP(AVG(LN(their center /
--     previous center))) - 1 over their steps between centers of one statistic; null when
--     none.
--   relative_change: (1 + change) / (1 + together_change) - 1, the step against the
--     implementations measured with it (the change of the candidate/baseline ratio); null
--     when none.
--   attribution: who moved, the first that applies: 'shared' when the implementations
--     measured together moved the same way by at least half as much (LN(1 + together_change)
--     has the sign of LN(1 + change) and at least half its size): an environment or harness
--     shift, not this implementation; 'session' when the session's fitted shift
--     (session_change) moved the same way and what is left (code_change) is within
--     verdict_settings.min_effect: a shift of the session, not of the code; 'environment'
--     when a software fact of the environment changed between the two results (changed_facts)
--     and the implementation's version did not (same_version true, or unknown): the changed
--     fact is the likely cause; 'alone' when nothing was measured together; 'own' otherwise;
--     null at step 1.
--   center: this result's central value, in unit: the median, else the mean
--     (run_statistics.center).
--   previous_center: the previous result's center.
--   center_statistic: 'median' or 'mean', which statistic center is.
--   previous_center_statistic: which statistic previous_center is.
--   change_low: the low end of the change's interval under noise_basis (as speedups'
--     interval, of center / previous_center, minus 1); null without a noise estimate.
--   change_high: the high end of that interval.
--   min_effect: the minimum effect the verdict used (verdict_settings.min_effect).
--   noise_df: for noise_basis 'welch', the Welch-Satterthwaite degrees of freedom used.
--   session_workloads: other workloads of the implementation measured over the same two
--     sessions (each result within one hour of this step's); null when none.
--   session_change: the session's shift, fitted by a two-way model of log center (workload
--     and session effects, least absolute deviations) over this step's two sessions: EXP of
--     the median log change of the implementation's workloads measured over both, this one
--     included, minus 1. Null unless 3 or more other workloads were measured, another
--     implementation measured over those sessions moved the same way by at least half as
--     much at some workload (else a uniform move may be a release's, not the session's), and
--     the effect exceeds verdict_settings.min_effect (a smaller one is not a shift).
--   code_change: (1 + change) / (1 + session_change) - 1, the step with the session's effect
--     taken out: what the model leaves to the implementation's code; null when
--     session_change is.
--   changed_facts: the software facts (environment_facts: torch, cuda, driver, triton) that
--     differ between the previous result's environment and this one's, as 'torch 2.4.0 ->
--     2.5.1; cuda 12.4 -> 12.6'; a fact recorded on one side only is not a change; null when
--     none changed, when neither records any, and at step 1.
--   cause: what the step is put down to, the first that applies: 'same version' (a re-run of
--     one release: same_version), the attribution when it is 'shared', 'session' or
--     'environment', else 'code'; null at step 1. regressions and memory_regressions list
--     'code' steps only, shifts the others, and kidata changes names each change point's
--     cause by it.
-- notes: Time order is observed_at, then run_id for results with the same timestamp (a tie is
--   ordered, never merged). Runs without a timestamp cannot be placed in time and are left
--   out, as are runs whose status is not 'passed'. Series never cross GPUs, passes, variants,
--   protocol families or metrics. Run-to-run envelopes are calibrated on latency re-runs only
--   (rerun_changes); memory steps are judged on within-run spreads. The method is a lookback of one step (the previous
--   result), not a change-point search (asv's step detection) or a lookback window
--   (conbench's): a slow drift of small steps is never flagged. Attribution needs the other
--   implementations' results within an hour of both of this step's results; a harness that
--   times providers further apart is 'alone'.
WITH settings AS (
    SELECT min_effect FROM verdict_settings
),
envelopes AS (
    -- Read once for both ends of a step.
    SELECT source, gpu, size_decade, log_envelope, changes FROM noise_envelopes
    WHERE calibrated
),
steps AS (
    -- Each step with its previous result and the context its attribution reads (how the
    -- steps measured with it moved), stored by loads or computed (series_context).
    SELECT * FROM series_context
),
paired AS (
    -- The pair's noise, as speedups works it out: joined after the self-joins above, so that
    -- the envelopes (which read every run) enter the plan once.
    SELECT
        s.*,
        -- The session's effect, fitted on 4 or more workloads and echoed.
        CASE WHEN s.session_workloads >= 3
                  AND (s.session_log_median > 0 AND s.echo_up >= s.session_log_median / 2
                       OR s.session_log_median < 0
                          AND s.echo_down <= s.session_log_median / 2)
             THEN s.session_log_median END AS fitted_log_effect,
        s.log_variance + s.previous_log_variance AS pair_log_variance,
        FLOOR(POWER(s.log_variance + s.previous_log_variance, 2)
              / NULLIF(POWER(s.log_variance, 2) / (s.samples - 1)
                 + POWER(s.previous_log_variance, 2) / (s.previous_samples - 1), 0))
            AS welch_df,
        GREATEST(nc.log_envelope, np.log_envelope) AS pair_log_envelope,
        LEAST(nc.changes, np.changes) AS pair_envelope_changes,
        NULLIF(CONCAT_WS('; ',
            CASE WHEN fc.torch <> fp.torch THEN CONCAT('torch ', fp.torch, ' -> ', fc.torch) END,
            CASE WHEN fc.cuda <> fp.cuda THEN CONCAT('cuda ', fp.cuda, ' -> ', fc.cuda) END,
            CASE WHEN fc.driver <> fp.driver
                 THEN CONCAT('driver ', fp.driver, ' -> ', fc.driver) END,
            CASE WHEN fc.triton <> fp.triton
                 THEN CONCAT('triton ', fp.triton, ' -> ', fc.triton) END), '')
            AS changed_facts,
        CASE WHEN s.wide_low > 0 AND s.previous_wide_high > 0
             THEN LN(s.wide_low / s.previous_wide_high) END AS range_log_low,
        CASE WHEN s.previous_wide_low > 0 AND s.wide_high > 0
             THEN LN(s.wide_high / s.previous_wide_low) END AS range_log_high,
        CASE WHEN mc.low - s.half_step > 0 AND mp.high IS NOT NULL
             THEN LN((mc.low - s.half_step) / (mp.high + s.previous_half_step))
        END AS sample_log_low,
        CASE WHEN mp.low - s.previous_half_step > 0 AND mc.high IS NOT NULL
             THEN LN((mc.high + s.half_step) / (mp.low - s.previous_half_step))
        END AS sample_log_high,
        CASE
            WHEN s.previous_run_id IS NULL THEN NULL
            WHEN s.center_statistic <> s.previous_center_statistic THEN 'different centers'
            WHEN s.center_statistic = 'median' AND mc.high IS NOT NULL AND mp.high IS NOT NULL
                THEN 'samples'
            WHEN s.log_variance + s.previous_log_variance > 0 THEN 'welch'
            WHEN nc.log_envelope IS NOT NULL AND np.log_envelope IS NOT NULL
                THEN 'run-to-run'
            WHEN s.has_spread AND s.previous_has_spread AND s.spread = s.previous_spread
                THEN 'within-run'
            WHEN s.has_spread AND s.previous_has_spread THEN 'different spreads'
            WHEN NOT s.has_spread THEN s.evidence
            ELSE s.previous_evidence
        END AS basis
    FROM steps s
    LEFT JOIN environment_facts fc
        ON s.previous_run_id IS NOT NULL AND fc.environment_id = s.environment_id
    LEFT JOIN environment_facts fp
        ON fp.environment_id = s.previous_environment_id
    LEFT JOIN envelopes nc
        ON nc.source = s.source AND nc.gpu = s.gpu
        AND nc.size_decade = s.size_decade
    LEFT JOIN envelopes np
        ON np.source = s.previous_source AND np.gpu = s.gpu
        AND np.size_decade = s.previous_size_decade
    LEFT JOIN sample_medians mc
        ON mc.run_id = s.run_id AND mc.metric = s.metric AND mc.high IS NOT NULL
    LEFT JOIN sample_medians mp
        ON mp.run_id = s.previous_run_id AND mp.metric = s.metric AND mp.high IS NOT NULL
),
judged AS (
    SELECT
        p.*,
        CASE p.basis
            WHEN 'samples' THEN p.sample_log_low
            WHEN 'welch' THEN p.log_change - t.t * SQRT(p.pair_log_variance)
            WHEN 'run-to-run' THEN p.log_change - p.pair_log_envelope
            WHEN 'within-run' THEN p.range_log_low
        END AS log_low,
        CASE p.basis
            WHEN 'samples' THEN p.sample_log_high
            WHEN 'welch' THEN p.log_change + t.t * SQRT(p.pair_log_variance)
            WHEN 'run-to-run' THEN p.log_change + p.pair_log_envelope
            WHEN 'within-run' THEN p.range_log_high
        END AS log_high,
        -- A shift of the session: the fitted effect beyond the minimum effect (a smaller one
        -- is not taken out of the step; with no shift, removing the median of noise would
        -- move the step by noise).
        CASE WHEN ABS(p.fitted_log_effect) > LN(1 + ss.min_effect)
             THEN p.fitted_log_effect END AS session_log_effect
    FROM paired p
    CROSS JOIN settings ss
    LEFT JOIN student_t t
        ON p.basis = 'welch' AND GREATEST(p.welch_df, 1) BETWEEN t.df_from AND t.df_to
),
judged_steps AS (
SELECT
    j.kernel,
    j.pass,
    j.implementation,
    j.variant,
    j.workload,
    j.gpu,
    j.family,
    j.metric,
    j.unit,
    j.gpu_family,
    j.step,
    j.points,
    j.run_id,
    j.previous_run_id,
    j.observed_at,
    j.previous_observed_at,
    j.version,
    j.previous_version,
    j.median,
    j.previous_median,
    j.p20,
    j.p80,
    j.previous_p20,
    j.previous_p80,
    j.center / j.previous_center - 1 AS change,
    j.evidence,
    j.previous_evidence,
    j.same_version,
    CASE WHEN j.basis = 'run-to-run' THEN EXP(j.pair_log_envelope) - 1 END AS run_noise,
    CASE WHEN j.basis = 'run-to-run' THEN j.pair_envelope_changes
         ELSE CAST(0 AS BIGINT) END AS noise_steps,
    CASE
        WHEN j.previous_run_id IS NULL THEN NULL
        WHEN j.basis = 'within-run' THEN CONCAT('within-run ', j.spread)
        WHEN j.basis IN ('samples', 'welch', 'run-to-run') THEN j.basis
        ELSE 'none'
    END AS noise_basis,
    v.verdict,
    CASE WHEN v.verdict IN ('faster', 'slower', 'negligible') THEN TRUE
         WHEN v.verdict = 'within noise' THEN FALSE END AS beyond_noise,
    j.together_implementations,
    EXP(j.together_log_change) - 1 AS together_change,
    EXP(j.log_change - j.together_log_change) - 1 AS relative_change,
    CASE
        WHEN j.previous_run_id IS NULL THEN NULL
        WHEN j.together_log_change IS NOT NULL AND j.log_change <> 0
            AND SIGN(j.together_log_change) = SIGN(j.log_change)
            AND ABS(j.together_log_change) >= ABS(j.log_change) / 2 THEN 'shared'
        WHEN j.session_log_effect IS NOT NULL AND j.log_change <> 0
            AND SIGN(j.session_log_effect) = SIGN(j.log_change)
            AND ABS(j.log_change - j.session_log_effect) <= LN(1 + st.min_effect)
            THEN 'session'
        WHEN j.changed_facts IS NOT NULL AND j.same_version IS NOT FALSE THEN 'environment'
        WHEN j.together_log_change IS NULL THEN 'alone'
        ELSE 'own'
    END AS attribution,
    j.center,
    j.previous_center,
    j.center_statistic,
    j.previous_center_statistic,
    EXP(j.log_low) - 1 AS change_low,
    EXP(j.log_high) - 1 AS change_high,
    st.min_effect,
    CASE WHEN j.basis = 'welch' THEN CAST(GREATEST(j.welch_df, 1) AS BIGINT) END AS noise_df,
    j.session_workloads,
    EXP(j.session_log_effect) - 1 AS session_change,
    EXP(j.log_change - j.session_log_effect) - 1 AS code_change,
    j.changed_facts
FROM judged j
CROSS JOIN settings st
LEFT JOIN verdict_rule v
    ON j.previous_run_id IS NOT NULL
    AND v.basis = j.basis
    AND v.placement = CASE
        WHEN j.basis NOT IN ('samples', 'welch', 'run-to-run', 'within-run') THEN 'none'
        WHEN j.log_low > 0 THEN 'above'
        WHEN j.log_high < 0 THEN 'below'
        ELSE 'overlap'
    END
    AND v.effect = CASE WHEN ABS(j.log_change) > LN(1 + st.min_effect) THEN 'beyond'
                        ELSE 'under' END
)
SELECT
    *,
    CASE
        WHEN previous_run_id IS NULL THEN NULL
        WHEN same_version THEN 'same version'
        WHEN attribution IN ('shared', 'session', 'environment') THEN attribution
        ELSE 'code'
    END AS cause
FROM judged_steps
