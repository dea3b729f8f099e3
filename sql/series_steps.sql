-- view: series_steps
-- purpose: Every step of every latency and memory series, in the metric's unit, judged by the one verdict rule (raw samples where both results kept them, Welch where means and deviations are given, else run-to-run noise calibrated on re-runs, else within-run spreads) and against the implementations measured with it: the one trend rule trends and memory_trends show.
-- grain: one row per passed run with a timestamp and per metric it has a median or a mean of; a series is one kernel, pass, implementation, variant, workload, GPU, protocol family and metric, in time order.
-- sources: runs, run_statistics, protocols, gpus, environment_facts, noise_envelopes, sample_medians, student_t, verdict_settings, verdict_rule
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
points AS (
    SELECT
        r.run_id, r.kernel, r.pass, r.implementation, r.variant, r.workload, r.gpu,
        COALESCE(p.family, r.protocol_id) AS family,
        COALESCE(g.family, r.gpu) AS gpu_family,
        r.observed_at, r.version, r.source, r.environment_id,
        s.metric, s.unit, s.median, s.p20, s.p80, s.spread, s.low, s.high, s.evidence,
        s.center, s.center_statistic, s.samples,
        -- The noise inputs, as speedups works them out (there in µs, here in unit).
        CASE WHEN s.center_statistic = 'mean' AND s.samples >= 2 AND s.stddev >= 0
                  AND s.mean > 0
             THEN POWER(s.stddev / s.mean, 2) / s.samples
                  + POWER(COALESCE(s.resolution, 0) / s.mean, 2) / 12
        END AS log_variance,
        s.low - COALESCE(s.resolution, 0) / 2 AS wide_low,
        s.high + COALESCE(s.resolution, 0) / 2 AS wide_high,
        s.evidence IN ('measured', 'below resolution') AS has_spread,
        COALESCE(s.resolution, 0) / 2 AS half_step,
        -- The latency size class a run-to-run envelope is looked up by (noise_envelopes).
        CASE WHEN s.metric = 'latency' AND s.center > 0
             THEN CAST(LEAST(GREATEST(FLOOR(LOG10(s.center / 1000.0)), -1), 5) AS BIGINT)
        END AS size_decade
    FROM runs r
    JOIN run_statistics s ON s.run_id = r.run_id
    LEFT JOIN protocols p ON p.protocol_id = r.protocol_id
    LEFT JOIN gpus g ON g.gpu = r.gpu
    WHERE r.status = 'passed' AND r.observed_at IS NOT NULL
),
ordered AS (
    SELECT
        points.*,
        ROW_NUMBER() OVER series_in_time AS step,
        CAST(COUNT(*) OVER series AS BIGINT) AS points,
        LAG(run_id) OVER series_in_time AS previous_run_id,
        LAG(observed_at) OVER series_in_time AS previous_observed_at,
        LAG(version) OVER series_in_time AS previous_version,
        LAG(source) OVER series_in_time AS previous_source,
        LAG(environment_id) OVER series_in_time AS previous_environment_id,
        LAG(median) OVER series_in_time AS previous_median,
        LAG(p20) OVER series_in_time AS previous_p20,
        LAG(p80) OVER series_in_time AS previous_p80,
        LAG(spread) OVER series_in_time AS previous_spread,
        LAG(evidence) OVER series_in_time AS previous_evidence,
        LAG(center) OVER series_in_time AS previous_center,
        LAG(center_statistic) OVER series_in_time AS previous_center_statistic,
        LAG(samples) OVER series_in_time AS previous_samples,
        LAG(log_variance) OVER series_in_time AS previous_log_variance,
        LAG(wide_low) OVER series_in_time AS previous_wide_low,
        LAG(wide_high) OVER series_in_time AS previous_wide_high,
        LAG(has_spread) OVER series_in_time AS previous_has_spread,
        LAG(half_step) OVER series_in_time AS previous_half_step,
        LAG(size_decade) OVER series_in_time AS previous_size_decade
    FROM points
    WINDOW
        series AS (PARTITION BY kernel, pass, implementation, variant, workload, gpu, family,
                   metric),
        series_in_time AS (
            PARTITION BY kernel, pass, implementation, variant, workload, gpu, family, metric
            ORDER BY observed_at, run_id
        )
),
steps AS (
    SELECT
        o.*,
        DATE_TRUNC('day', observed_at) AS observed_day,
        LN(center / previous_center) AS log_change,
        center_statistic = previous_center_statistic AS same_center,
        CASE WHEN previous_run_id IS NULL THEN NULL
             ELSE version = previous_version END AS same_version
    FROM ordered o
),
near AS (
    -- Each step once per day its result's hour-wide neighbourhood touches (one, or two near
    -- midnight), so that the joins below pair steps by equal days before they compare times:
    -- a step within one hour of another's result has that result's day among these (a day
    -- is longer than the two hours between the ends), and matches exactly one of them.
    -- Only the columns the joins read.
    SELECT run_id, kernel, pass, implementation, variant, workload, gpu, family, metric,
        observed_at, previous_observed_at, same_center, log_change,
        DATE_TRUNC('day', observed_at - INTERVAL '1' HOUR) AS near_day
    FROM steps
    UNION ALL
    SELECT run_id, kernel, pass, implementation, variant, workload, gpu, family, metric,
        observed_at, previous_observed_at, same_center, log_change,
        DATE_TRUNC('day', observed_at + INTERVAL '1' HOUR) AS near_day
    FROM steps
    WHERE DATE_TRUNC('day', observed_at + INTERVAL '1' HOUR)
        <> DATE_TRUNC('day', observed_at - INTERVAL '1' HOUR)
),
together AS (
    SELECT
        s.run_id,
        s.metric,
        CAST(COUNT(DISTINCT o.implementation) AS BIGINT) AS together_implementations,
        AVG(o.log_change) AS together_log_change
    FROM steps s
    JOIN near o
        ON o.near_day = s.observed_day AND o.kernel = s.kernel AND o.pass = s.pass
        AND o.workload = s.workload
        AND o.gpu = s.gpu AND o.family = s.family AND o.metric = s.metric
        AND o.implementation <> s.implementation AND o.same_center
        AND o.observed_at BETWEEN s.observed_at - INTERVAL '1' HOUR
                              AND s.observed_at + INTERVAL '1' HOUR
        AND o.previous_observed_at BETWEEN s.previous_observed_at - INTERVAL '1' HOUR
                                       AND s.previous_observed_at + INTERVAL '1' HOUR
    GROUP BY s.run_id, s.metric
),
session AS (
    -- The two-way model of log center with workload and session effects, fitted over this
    -- step's two sessions: every workload of the implementation measured over both (each
    -- result within one hour of this step's), this one included, changed by the session's
    -- effect plus its own. Fitted by least absolute deviations, the session's effect is the
    -- median of their log changes; what is left of this step is its code's.
    SELECT
        s.run_id,
        s.metric,
        CAST(COUNT(CASE WHEN o.workload <> s.workload THEN 1 END) AS BIGINT)
            AS session_workloads,
        PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY o.log_change) AS session_log_effect
    FROM steps s
    JOIN near o
        ON o.near_day = s.observed_day AND o.kernel = s.kernel AND o.pass = s.pass
        AND o.implementation = s.implementation
        AND (o.variant = s.variant OR (o.variant IS NULL AND s.variant IS NULL))
        AND o.gpu = s.gpu AND o.family = s.family AND o.metric = s.metric
        AND (o.workload <> s.workload OR o.run_id = s.run_id) AND o.same_center
        AND s.same_center
        AND o.observed_at BETWEEN s.observed_at - INTERVAL '1' HOUR
                              AND s.observed_at + INTERVAL '1' HOUR
        AND o.previous_observed_at BETWEEN s.previous_observed_at - INTERVAL '1' HOUR
                                       AND s.previous_observed_at + INTERVAL '1' HOUR
    GROUP BY s.run_id, s.metric
    HAVING COUNT(CASE WHEN o.workload <> s.workload THEN 1 END) > 0
),
echo AS (
    -- How the other implementations of the kernel measured over the same two sessions moved:
    -- their largest rise and largest fall at any workload, for the session's effect to be
    -- echoed (the same way by at least half as much): the effect is the session's, not a
    -- release's that moved all of one implementation.
    SELECT s.run_id, s.metric, MAX(o.log_change) AS echo_up, MIN(o.log_change) AS echo_down
    FROM steps s
    JOIN near o
        ON o.near_day = s.observed_day AND o.kernel = s.kernel AND o.pass = s.pass
        AND o.gpu = s.gpu AND o.family = s.family
        AND o.metric = s.metric AND o.implementation <> s.implementation AND o.same_center
        AND o.observed_at BETWEEN s.observed_at - INTERVAL '1' HOUR
                              AND s.observed_at + INTERVAL '1' HOUR
        AND o.previous_observed_at BETWEEN s.previous_observed_at - INTERVAL '1' HOUR
                                       AND s.previous_observed_at + INTERVAL '1' HOUR
    GROUP BY s.run_id, s.metric
),
paired AS (
    -- The pair's noise, as speedups works it out: joined after the self-joins above, so that
    -- the envelopes (which read every run) enter the plan once.
    SELECT
        s.*,
        t.together_implementations,
        t.together_log_change,
        se.session_workloads,
        -- The session's effect, fitted on 4 or more workloads and echoed.
        CASE WHEN se.session_workloads >= 3
                  AND (se.session_log_effect > 0 AND e.echo_up >= se.session_log_effect / 2
                       OR se.session_log_effect < 0
                          AND e.echo_down <= se.session_log_effect / 2)
             THEN se.session_log_effect END AS fitted_log_effect,
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
    LEFT JOIN together t
        ON t.run_id = s.run_id AND t.metric = s.metric
    LEFT JOIN session se
        ON se.run_id = s.run_id AND se.metric = s.metric
    LEFT JOIN echo e
        ON e.run_id = s.run_id AND e.metric = s.metric
    LEFT JOIN environment_facts fc
        ON s.previous_run_id IS NOT NULL AND fc.environment_id = s.environment_id
    LEFT JOIN environment_facts fp
        ON fp.environment_id = s.previous_environment_id
    LEFT JOIN noise_envelopes nc
        ON nc.calibrated AND nc.source = s.source AND nc.gpu = s.gpu
        AND nc.size_decade = s.size_decade
    LEFT JOIN noise_envelopes np
        ON np.calibrated AND np.source = s.previous_source AND np.gpu = s.gpu
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
