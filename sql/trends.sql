-- view: trends
-- purpose: How did each series' latency move from one result to the next, was each step beyond noise (run-to-run noise where repeated runs exist), and did the implementations measured with it move too?
-- grain: one row per passed latency run with a timestamp; a series is one kernel, pass, implementation, variant, workload, GPU, protocol family and metric, in time order.
-- sources: latencies, verdict_rule
-- columns:
--   kernel: kernel benchmarked.
--   pass: timed pass.
--   implementation: implementation key.
--   variant: implementation variant, null for none.
--   workload: workload name.
--   gpu: canonical GPU key.
--   family: protocol comparability family.
--   metric: always 'latency' (memory series are not included yet).
--   step: position in the series, 1 for the earliest result.
--   points: number of results in the series.
--   run_id: this result's run.
--   previous_run_id: the run just before it in the series; null at step 1.
--   observed_at: when this result was measured (UTC).
--   previous_observed_at: when the previous result was measured.
--   version: release of the implementation or harness for this run (runs.version).
--   previous_version: release for the previous run.
--   median_us: median latency (µs).
--   previous_median_us: the previous result's median latency (µs).
--   p20_us: 20th-percentile latency (µs), null when not measured.
--   p80_us: 80th-percentile latency (µs), null when not measured.
--   previous_p20_us: the previous result's p20 (µs).
--   previous_p80_us: the previous result's p80 (µs).
--   change: median_us / previous_median_us - 1; above 0 means slower; null at step 1.
--   beyond_noise: true when the verdict is 'faster' or 'slower', false when 'within noise',
--     null otherwise (no firm verdict) and at step 1.
--   verdict: from verdict_rule, judging this result (candidate) against the previous one
--     (baseline): 'slower', 'faster', 'within noise', or what is missing ('single sample', 'no
--     spread', 'zero width', 'below resolution', 'different spreads'); null at step 1. With
--     noise_basis 'repeated runs' the placement is 'above' when LN(median_us /
--     previous_median_us) > LN(1 + run_noise), 'below' when it is < -LN(1 + run_noise), else
--     'overlap'; when both results also have a measured spread of the same statistics, the
--     ranges must lie apart the same way (else 'overlap'). Otherwise (within-run basis) the
--     placement compares the two noise ranges as speedups does: 'above' when low_us >
--     previous high_us, 'below' when high_us < previous low_us.
--   gpu_family: the GPU's family (gpus.family).
--   evidence: what this result's spread supports (latencies.evidence).
--   previous_evidence: what the previous result's spread supports.
--   same_version: true when version = previous_version (a re-run of the same release); null
--     when either is unknown and at step 1.
--   run_noise: run-to-run noise of the implementation on this kernel, pass, variant, GPU and
--     family: EXP(MAX |LN(median_us / previous_median_us)|) - 1 over its same-version steps
--     (across workloads); null when it has none.
--   noise_steps: number of same-version steps run_noise is estimated from (0 when none).
--   noise_basis: what the verdict's noise estimate rests on: 'repeated runs' (run_noise is
--     known), 'within-run p20-p80' (or another spread) when both results have a measured spread
--     of the same statistics, 'none' otherwise; null at step 1.
--   together_implementations: other implementations of the same kernel, pass, workload, GPU
--     and family measured together with this step: a step of theirs whose result and previous
--     result were each observed within one hour of this result's and the previous result's
--     (harnesses such as Liger's time one provider after another, seconds apart); null when
--     none.
--   together_change: how those moved over the same step: EXP(AVG(LN(their median /
--     previous median))) - 1; null when none.
--   relative_change: (1 + change) / (1 + together_change) - 1, the step against the
--     implementations measured with it (the candidate/baseline ratio's change); null when none.
--   attribution: who moved: 'shared' when the implementations measured together moved the
--     same way by at least half as much (LN(1 + together_change) has the sign of LN(1 + change)
--     and at least half its size): an environment or harness shift, not this implementation;
--     'own' when they did not; 'alone' when nothing was measured together; null at step 1.
-- notes: Time order is observed_at, then run_id for results with the same timestamp (a tie is
--   ordered, never merged). Runs without a timestamp cannot be placed in time and are left out,
--   as are runs whose status is not 'passed'. Series never cross GPUs, passes, variants or protocol
--   families. A within-run p20-p80 range is not run-to-run noise: where an implementation has
--   re-runs of one release, their largest step is the noise floor, so a same-version step is
--   never beyond noise. The method is a lookback of one step (previous result), not a change-
--   point search: a slow drift of small steps is never flagged, and one noisy same-version step
--   widens the noise floor of the whole kernel. The regressions view keeps the slower steps
--   beyond a threshold that are not shared shifts.
WITH ordered AS (
    SELECT
        l.*,
        ROW_NUMBER() OVER series_in_time AS step,
        COUNT(*) OVER series AS points,
        LAG(run_id) OVER series_in_time AS previous_run_id,
        LAG(observed_at) OVER series_in_time AS previous_observed_at,
        LAG(version) OVER series_in_time AS previous_version,
        LAG(median_us) OVER series_in_time AS previous_median_us,
        LAG(p20_us) OVER series_in_time AS previous_p20_us,
        LAG(p80_us) OVER series_in_time AS previous_p80_us,
        LAG(spread) OVER series_in_time AS previous_spread,
        LAG(low_us) OVER series_in_time AS previous_low_us,
        LAG(high_us) OVER series_in_time AS previous_high_us,
        LAG(evidence) OVER series_in_time AS previous_evidence
    FROM latencies l
    WHERE l.status = 'passed' AND l.observed_at IS NOT NULL
    WINDOW
        series AS (PARTITION BY kernel, pass, implementation, variant, workload, gpu, family),
        series_in_time AS (
            PARTITION BY kernel, pass, implementation, variant, workload, gpu, family
            ORDER BY observed_at, run_id
        )
),
steps AS (
    SELECT
        o.*,
        LN(median_us / previous_median_us) AS log_change,
        CASE WHEN previous_run_id IS NULL THEN NULL
             ELSE version = previous_version END AS same_version,
        CASE
            WHEN previous_run_id IS NULL THEN NULL
            WHEN evidence <> 'measured' OR previous_evidence <> 'measured' THEN NULL
            WHEN spread <> previous_spread THEN 'different spreads'
            WHEN low_us > previous_high_us THEN 'above'
            WHEN high_us < previous_low_us THEN 'below'
            ELSE 'overlap'
        END AS range_placement
    FROM ordered o
),
noise AS (
    SELECT kernel, pass, implementation, variant, gpu, family,
        MAX(ABS(log_change)) AS log_noise,
        CAST(COUNT(*) AS BIGINT) AS noise_steps
    FROM steps
    WHERE same_version
    GROUP BY kernel, pass, implementation, variant, gpu, family
),
together AS (
    SELECT
        s.run_id,
        CAST(COUNT(DISTINCT o.implementation) AS BIGINT) AS together_implementations,
        AVG(o.log_change) AS together_log_change
    FROM steps s
    JOIN steps o
        ON o.kernel = s.kernel AND o.pass = s.pass AND o.workload = s.workload
        AND o.gpu = s.gpu AND o.family = s.family AND o.implementation <> s.implementation
        AND o.observed_at BETWEEN s.observed_at - INTERVAL '1' HOUR
                              AND s.observed_at + INTERVAL '1' HOUR
        AND o.previous_observed_at BETWEEN s.previous_observed_at - INTERVAL '1' HOUR
                                       AND s.previous_observed_at + INTERVAL '1' HOUR
    GROUP BY s.run_id
),
judged AS (
    SELECT
        s.*,
        n.log_noise,
        COALESCE(n.noise_steps, CAST(0 AS BIGINT)) AS noise_steps,
        t.together_implementations,
        t.together_log_change,
        CASE WHEN n.log_noise IS NULL THEN NULL
             WHEN s.log_change > n.log_noise THEN 'above'
             WHEN s.log_change < -n.log_noise THEN 'below'
             ELSE 'overlap' END AS runs_placement
    FROM steps s
    LEFT JOIN noise n
        ON n.kernel = s.kernel AND n.pass = s.pass AND n.implementation = s.implementation
        AND n.gpu = s.gpu AND n.family = s.family
        AND (n.variant = s.variant OR (n.variant IS NULL AND s.variant IS NULL))
    LEFT JOIN together t
        ON t.run_id = s.run_id
)
SELECT
    j.kernel,
    j.pass,
    j.implementation,
    j.variant,
    j.workload,
    j.gpu,
    j.family,
    'latency' AS metric,
    j.step,
    j.points,
    j.run_id,
    j.previous_run_id,
    j.observed_at,
    j.previous_observed_at,
    j.version,
    j.previous_version,
    j.median_us,
    j.previous_median_us,
    j.p20_us,
    j.p80_us,
    j.previous_p20_us,
    j.previous_p80_us,
    j.median_us / j.previous_median_us - 1 AS change,
    CASE WHEN v.verdict IN ('faster', 'slower') THEN TRUE
         WHEN v.verdict = 'within noise' THEN FALSE END AS beyond_noise,
    v.verdict,
    j.gpu_family,
    j.evidence,
    j.previous_evidence,
    j.same_version,
    EXP(j.log_noise) - 1 AS run_noise,
    j.noise_steps,
    CASE
        WHEN j.previous_run_id IS NULL THEN NULL
        WHEN j.log_noise IS NOT NULL THEN 'repeated runs'
        WHEN j.range_placement IN ('above', 'below', 'overlap') THEN CONCAT('within-run ', j.spread)
        ELSE 'none'
    END AS noise_basis,
    j.together_implementations,
    EXP(j.together_log_change) - 1 AS together_change,
    EXP(j.log_change - j.together_log_change) - 1 AS relative_change,
    CASE
        WHEN j.previous_run_id IS NULL THEN NULL
        WHEN j.together_log_change IS NULL THEN 'alone'
        WHEN j.log_change <> 0 AND SIGN(j.together_log_change) = SIGN(j.log_change)
            AND ABS(j.together_log_change) >= ABS(j.log_change) / 2 THEN 'shared'
        ELSE 'own'
    END AS attribution
FROM judged j
LEFT JOIN verdict_rule v
    ON j.previous_run_id IS NOT NULL
    AND v.candidate_evidence = CASE WHEN j.log_noise IS NOT NULL THEN 'repeated runs'
                                    ELSE j.evidence END
    AND v.baseline_evidence = CASE WHEN j.log_noise IS NOT NULL THEN 'repeated runs'
                                   ELSE j.previous_evidence END
    AND v.placement = CASE
        WHEN j.log_noise IS NOT NULL THEN
            CASE WHEN j.range_placement IS NULL OR j.range_placement = 'different spreads'
                      OR j.range_placement = j.runs_placement THEN j.runs_placement
                 ELSE 'overlap' END
        ELSE COALESCE(j.range_placement, 'overlap')
    END
