-- view: series_steps
-- purpose: Every step of every latency and memory series, in the metric's unit, judged against run-to-run noise where repeated runs exist and against the implementations measured with it: the one trend rule trends and memory_trends show.
-- grain: one row per passed run with a timestamp and per metric it has a median or a mean of; a series is one kernel, pass, implementation, variant, workload, GPU, protocol family and metric, in time order.
-- sources: runs, run_statistics, protocols, gpus, verdict_rule
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
--   run_noise: run-to-run noise of the implementation on this kernel, pass, variant, GPU,
--     family and metric: EXP(MAX |LN(center / previous_center)|) - 1 over its same-version
--     steps whose two centers are the same statistic (across workloads); null when it has
--     none.
--   noise_steps: number of same-version steps run_noise is estimated from (0 when none).
--   noise_basis: what the verdict's noise estimate rests on: 'repeated runs' (run_noise is
--     known), 'within-run p20-p80' (or another spread) when both results have a measured
--     spread of the same statistics, 'none' otherwise; null at step 1.
--   verdict: from verdict_rule, judging this result (candidate) against the previous one
--     (baseline): 'slower', 'faster', 'within noise', or what is missing ('single sample', 'no
--     spread', 'zero width', 'below resolution', 'different centers', 'different spreads');
--     null at step 1. The placement is 'different centers' when one result's center is a
--     median and the other's a mean. With
--     noise_basis 'repeated runs' the placement is 'above' when LN(center / previous_center) >
--     LN(1 + run_noise), 'below' when it is < -LN(1 + run_noise), else 'overlap'; when both
--     results also have a measured spread of the same statistics, the ranges must lie apart the
--     same way (else 'overlap'). Otherwise (within-run basis) the placement compares the two
--     noise ranges as speedups does: 'above' when low > previous high, 'below' when high <
--     previous low. For memory, 'slower' means more memory.
--   beyond_noise: true when the verdict is 'faster' or 'slower', false when 'within noise',
--     null otherwise (no firm verdict) and at step 1.
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
--   attribution: who moved: 'shared' when the implementations measured together moved the
--     same way by at least half as much (LN(1 + together_change) has the sign of LN(1 + change)
--     and at least half its size): an environment or harness shift, not this implementation;
--     'own' when they did not; 'alone' when nothing was measured together; null at step 1.
--   center: this result's central value, in unit: the median, else the mean
--     (run_statistics.center).
--   previous_center: the previous result's center.
--   center_statistic: 'median' or 'mean', which statistic center is.
--   previous_center_statistic: which statistic previous_center is.
-- notes: Time order is observed_at, then run_id for results with the same timestamp (a tie is
--   ordered, never merged). Runs without a timestamp cannot be placed in time and are left
--   out, as are runs whose status is not 'passed'. Series never cross GPUs, passes, variants,
--   protocol families or metrics. A within-run p20-p80 range is not run-to-run noise: where an
--   implementation has re-runs of one release, their largest step is the noise floor, so a
--   same-version step is never beyond noise. The method is a lookback of one step (the previous
--   result), not a change-point search (asv's step detection) or a lookback window
--   (conbench's): a slow drift of small steps is never flagged, and one noisy same-version
--   step widens the noise floor of the whole kernel. Attribution needs the other
--   implementations' results within an hour of both of this step's results; a harness that
--   times providers further apart is 'alone'.
WITH points AS (
    SELECT
        r.run_id, r.kernel, r.pass, r.implementation, r.variant, r.workload, r.gpu,
        COALESCE(p.family, r.protocol_id) AS family,
        COALESCE(g.family, r.gpu) AS gpu_family,
        r.observed_at, r.version,
        s.metric, s.unit, s.median, s.p20, s.p80, s.spread, s.low, s.high, s.evidence,
        s.center, s.center_statistic
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
        LAG(median) OVER series_in_time AS previous_median,
        LAG(p20) OVER series_in_time AS previous_p20,
        LAG(p80) OVER series_in_time AS previous_p80,
        LAG(spread) OVER series_in_time AS previous_spread,
        LAG(low) OVER series_in_time AS previous_low,
        LAG(high) OVER series_in_time AS previous_high,
        LAG(evidence) OVER series_in_time AS previous_evidence,
        LAG(center) OVER series_in_time AS previous_center,
        LAG(center_statistic) OVER series_in_time AS previous_center_statistic
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
        LN(center / previous_center) AS log_change,
        center_statistic = previous_center_statistic AS same_center,
        CASE WHEN previous_run_id IS NULL THEN NULL
             ELSE version = previous_version END AS same_version,
        CASE
            WHEN previous_run_id IS NULL THEN NULL
            WHEN evidence <> 'measured' OR previous_evidence <> 'measured' THEN NULL
            WHEN spread <> previous_spread THEN 'different spreads'
            WHEN low > previous_high THEN 'above'
            WHEN high < previous_low THEN 'below'
            ELSE 'overlap'
        END AS range_placement
    FROM ordered o
),
noise AS (
    SELECT kernel, pass, implementation, variant, gpu, family, metric,
        MAX(ABS(log_change)) AS log_noise,
        CAST(COUNT(*) AS BIGINT) AS noise_steps
    FROM steps
    WHERE same_version AND same_center
    GROUP BY kernel, pass, implementation, variant, gpu, family, metric
),
together AS (
    SELECT
        s.run_id,
        s.metric,
        CAST(COUNT(DISTINCT o.implementation) AS BIGINT) AS together_implementations,
        AVG(o.log_change) AS together_log_change
    FROM steps s
    JOIN steps o
        ON o.kernel = s.kernel AND o.pass = s.pass AND o.workload = s.workload
        AND o.gpu = s.gpu AND o.family = s.family AND o.metric = s.metric
        AND o.implementation <> s.implementation AND o.same_center
        AND o.observed_at BETWEEN s.observed_at - INTERVAL '1' HOUR
                              AND s.observed_at + INTERVAL '1' HOUR
        AND o.previous_observed_at BETWEEN s.previous_observed_at - INTERVAL '1' HOUR
                                       AND s.previous_observed_at + INTERVAL '1' HOUR
    GROUP BY s.run_id, s.metric
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
        AND n.gpu = s.gpu AND n.family = s.family AND n.metric = s.metric
        AND (n.variant = s.variant OR (n.variant IS NULL AND s.variant IS NULL))
    LEFT JOIN together t
        ON t.run_id = s.run_id AND t.metric = s.metric
)
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
    EXP(j.log_noise) - 1 AS run_noise,
    j.noise_steps,
    CASE
        WHEN j.previous_run_id IS NULL THEN NULL
        WHEN j.log_noise IS NOT NULL THEN 'repeated runs'
        WHEN j.range_placement IN ('above', 'below', 'overlap')
            THEN CONCAT('within-run ', j.spread)
        ELSE 'none'
    END AS noise_basis,
    v.verdict,
    CASE WHEN v.verdict IN ('faster', 'slower') THEN TRUE
         WHEN v.verdict = 'within noise' THEN FALSE END AS beyond_noise,
    j.together_implementations,
    EXP(j.together_log_change) - 1 AS together_change,
    EXP(j.log_change - j.together_log_change) - 1 AS relative_change,
    CASE
        WHEN j.previous_run_id IS NULL THEN NULL
        WHEN j.together_log_change IS NULL THEN 'alone'
        WHEN j.log_change <> 0 AND SIGN(j.together_log_change) = SIGN(j.log_change)
            AND ABS(j.together_log_change) >= ABS(j.log_change) / 2 THEN 'shared'
        ELSE 'own'
    END AS attribution,
    j.center,
    j.previous_center,
    j.center_statistic,
    j.previous_center_statistic
FROM judged j
LEFT JOIN verdict_rule v
    ON j.previous_run_id IS NOT NULL
    AND v.candidate_evidence = CASE WHEN j.log_noise IS NOT NULL THEN 'repeated runs'
                                    ELSE j.evidence END
    AND v.baseline_evidence = CASE WHEN j.log_noise IS NOT NULL THEN 'repeated runs'
                                   ELSE j.previous_evidence END
    AND v.placement = CASE
        WHEN NOT j.same_center THEN 'different centers'
        WHEN j.log_noise IS NOT NULL THEN
            CASE WHEN j.range_placement IS NULL OR j.range_placement = 'different spreads'
                      OR j.range_placement = j.runs_placement THEN j.runs_placement
                 ELSE 'overlap' END
        ELSE COALESCE(j.range_placement, 'overlap')
    END
