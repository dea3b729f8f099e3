-- view: series_context
-- purpose: Every step of every latency and memory series with its previous result and its context: how the steps measured with it moved (the inputs of series_steps' attribution). Where every load stored its steps (the table step_context), kidata reads this view's rows from there instead (sql/stored/series_context.sql): the same rows.
-- grain: one row per passed run with a timestamp and per metric it has a median or a mean of, as series_steps.
-- sources: runs, run_statistics, protocols, gpus
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
--   source: the run's source (runs.source).
--   previous_source: the previous run's source.
--   environment_id: the run's environment (runs.environment_id).
--   previous_environment_id: the previous run's environment.
--   median: median, in unit; null when the source gives only a mean.
--   previous_median: the previous result's median.
--   p20: 20th percentile, null when not measured.
--   p80: 80th percentile, null when not measured.
--   previous_p20: the previous result's p20.
--   previous_p80: the previous result's p80.
--   spread: which spread the run gives (run_statistics.spread).
--   previous_spread: the previous result's spread.
--   evidence: what this result's spread supports (run_statistics.evidence).
--   previous_evidence: what the previous result's spread supports.
--   center: this result's central value, in unit (run_statistics.center).
--   previous_center: the previous result's center.
--   center_statistic: 'median' or 'mean', which statistic center is.
--   previous_center_statistic: which statistic previous_center is.
--   samples: samples behind the statistics (run_statistics.samples).
--   previous_samples: the previous result's samples.
--   log_variance: for a mean with 2 or more samples and a standard deviation, the variance
--     of the log of the mean: (stddev / mean)^2 / samples + (resolution / mean)^2 / 12, as
--     speedups works it out; else null.
--   previous_log_variance: the previous result's log_variance.
--   wide_low: the low end of the run's spread less half its resolution.
--   wide_high: the high end of the run's spread plus half its resolution.
--   previous_wide_low: the previous result's wide_low.
--   previous_wide_high: the previous result's wide_high.
--   has_spread: true when evidence is 'measured' or 'below resolution'.
--   previous_has_spread: the previous result's has_spread.
--   half_step: half the run's resolution (0 when none).
--   previous_half_step: the previous result's half_step.
--   size_decade: for latency, the size class a run-to-run envelope is looked up by
--     (noise_envelopes.size_decade: FLOOR(LOG10(center in µs)) between -1 and 5); null for
--     memory.
--   previous_size_decade: the previous result's size_decade.
--   log_change: LN(center / previous_center); null at step 1.
--   same_center: true when both centers are of one statistic; null at step 1.
--   same_version: true when version = previous_version; null when either is unknown and at
--     step 1.
--   together_implementations: other implementations of the same kernel, pass, workload, GPU,
--     family and metric measured together with this step (each of their results within one
--     hour of this one's and of the previous one's, their centers of one statistic); null
--     when none.
--   together_log_change: the mean of those implementations' log changes over their steps;
--     null when none.
--   session_workloads: other workloads of the implementation and variant measured over the
--     same two sessions (each result within one hour of this step's, centers of one
--     statistic); null when none.
--   session_log_median: the median log change over those workloads' steps and this one's;
--     null when none.
--   echo_up: the largest log change of the other implementations' steps measured over the
--     same two sessions, at any workload; null when none.
--   echo_down: the smallest such log change; null when none.
-- notes: Time order is observed_at, then run_id for results with the same timestamp. The
--   context of a step depends only on the results of its kernel, pass, GPU, family and
--   metric measured up to one hour after it (its own and its neighbours' previous results
--   are earlier); a step's whole row depends only on its group's results (kernel, pass, GPU,
--   family, metric), but for points and gpu_family. From KIDATA_CONTEXTS_AT runs on, each
--   load stores the rows of the groups it touched that changed (kidata/store/contexts.py),
--   and a session whose every load did so reads them (sql/stored/series_context.sql);
--   kidata check computes them all again and compares. series_steps judges these rows; its
--   header gives every rule. Written so that each input is read a few times, not hundreds:
--   Spark plans a CTE anew wherever it is read (docs/spark.md), so the previous result is
--   read with LAG and the contexts read one CTE of steps.
WITH points AS (
    SELECT
        r.run_id, r.kernel, r.pass, r.implementation, r.variant, r.workload, r.gpu,
        COALESCE(p.family, r.protocol_id) AS family,
        COALESCE(g.family, r.gpu) AS gpu_family,
        r.observed_at, r.version, r.source, r.environment_id,
        s.metric, s.unit, s.median, s.p20, s.p80, s.spread, s.evidence,
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
keyed AS (
    -- Each result with its place in its series and the previous result's columns (the row
    -- before it in the series, read with LAG rather than a second read of points).
    SELECT
        p.*,
        ROW_NUMBER() OVER series_in_time AS step,
        CAST(COUNT(*) OVER series AS BIGINT) AS points,
        LAG(p.run_id) OVER series_in_time AS previous_run_id,
        LAG(p.observed_at) OVER series_in_time AS previous_observed_at,
        LAG(p.version) OVER series_in_time AS previous_version,
        LAG(p.source) OVER series_in_time AS previous_source,
        LAG(p.environment_id) OVER series_in_time AS previous_environment_id,
        LAG(p.median) OVER series_in_time AS previous_median,
        LAG(p.p20) OVER series_in_time AS previous_p20,
        LAG(p.p80) OVER series_in_time AS previous_p80,
        LAG(p.spread) OVER series_in_time AS previous_spread,
        LAG(p.evidence) OVER series_in_time AS previous_evidence,
        LAG(p.center) OVER series_in_time AS previous_center,
        LAG(p.center_statistic) OVER series_in_time AS previous_center_statistic,
        LAG(p.samples) OVER series_in_time AS previous_samples,
        LAG(p.log_variance) OVER series_in_time AS previous_log_variance,
        LAG(p.wide_low) OVER series_in_time AS previous_wide_low,
        LAG(p.wide_high) OVER series_in_time AS previous_wide_high,
        LAG(p.has_spread) OVER series_in_time AS previous_has_spread,
        LAG(p.half_step) OVER series_in_time AS previous_half_step,
        LAG(p.size_decade) OVER series_in_time AS previous_size_decade
    FROM points p
    WINDOW
        series AS (PARTITION BY p.kernel, p.pass, p.implementation, p.variant, p.workload,
                   p.gpu, p.family, p.metric),
        series_in_time AS (
            PARTITION BY p.kernel, p.pass, p.implementation, p.variant, p.workload, p.gpu,
                p.family, p.metric
            ORDER BY p.observed_at, p.run_id
        )
),
steps AS (
    -- Each result with its change against the previous one.
    SELECT
        k.kernel, k.pass, k.implementation, k.variant, k.workload, k.gpu, k.family, k.metric,
        k.unit, k.gpu_family, k.step, k.points, k.run_id, k.previous_run_id,
        k.observed_at, k.previous_observed_at,
        k.version, k.previous_version,
        k.source, k.previous_source,
        k.environment_id, k.previous_environment_id,
        k.median, k.previous_median,
        k.p20, k.p80, k.previous_p20, k.previous_p80,
        k.spread, k.previous_spread,
        k.evidence, k.previous_evidence,
        k.center, k.previous_center,
        k.center_statistic, k.previous_center_statistic,
        k.samples, k.previous_samples,
        k.log_variance, k.previous_log_variance,
        k.wide_low, k.wide_high, k.previous_wide_low, k.previous_wide_high,
        k.has_spread, k.previous_has_spread,
        k.half_step, k.previous_half_step,
        k.size_decade, k.previous_size_decade,
        LN(k.center / k.previous_center) AS log_change,
        k.center_statistic = k.previous_center_statistic AS same_center,
        CASE WHEN k.previous_run_id IS NULL THEN NULL
             ELSE k.version = k.previous_version END AS same_version
    FROM keyed k
),
near AS (
    -- The steps (only the columns the joins below read), each once per day its result's hour-wide neighbourhood touches (one, or
    -- two near midnight), so that the join pairs steps by equal days before it compares
    -- times: a step within one hour of another's result has that result's day among these
    -- (a day is longer than the two hours between the ends), and matches exactly one of them.
    SELECT o.run_id, o.kernel, o.pass, o.implementation, o.variant, o.workload, o.gpu,
        o.family, o.metric, o.observed_at, o.previous_observed_at, o.same_center,
        o.log_change,
        CASE WHEN d.side = 0 THEN DATE_TRUNC('day', o.observed_at - INTERVAL '1' HOUR)
             ELSE DATE_TRUNC('day', o.observed_at + INTERVAL '1' HOUR) END AS near_day
    FROM steps o
    CROSS JOIN (VALUES (0), (1)) AS d(side)
    WHERE o.same_center
        AND (d.side = 0 OR DATE_TRUNC('day', o.observed_at + INTERVAL '1' HOUR)
                           <> DATE_TRUNC('day', o.observed_at - INTERVAL '1' HOUR))
),
with_previous AS (
    -- The steps that have a context (only the columns the joins below read), each paired
    -- below with the steps of its group measured over the same two sessions (each of their
    -- results within one hour of this step's and of its previous one's, their centers of
    -- one statistic).
    SELECT s.run_id, s.kernel, s.pass, s.implementation, s.variant, s.workload, s.gpu,
        s.family, s.metric, s.observed_at, s.previous_observed_at, s.same_center,
        DATE_TRUNC('day', s.observed_at) AS observed_day
    FROM steps s
    WHERE s.previous_run_id IS NOT NULL
),
together AS (
    -- The other implementations of the same workload measured together with the step, and
    -- their mean log change.
    SELECT
        s.run_id,
        s.metric,
        CAST(COUNT(DISTINCT o.implementation) AS BIGINT) AS together_implementations,
        AVG(o.log_change) AS together_log_change
    FROM with_previous s
    JOIN near o
        ON o.near_day = s.observed_day AND o.kernel = s.kernel AND o.pass = s.pass
        AND o.workload = s.workload
        AND o.gpu = s.gpu AND o.family = s.family AND o.metric = s.metric
        AND o.implementation <> s.implementation
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
    FROM with_previous s
    JOIN near o
        ON o.near_day = s.observed_day AND o.kernel = s.kernel AND o.pass = s.pass
        AND o.implementation = s.implementation
        AND (o.variant = s.variant OR (o.variant IS NULL AND s.variant IS NULL))
        AND o.gpu = s.gpu AND o.family = s.family AND o.metric = s.metric
        AND (o.workload <> s.workload OR o.run_id = s.run_id)
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
    FROM with_previous s
    JOIN near o
        ON o.near_day = s.observed_day AND o.kernel = s.kernel AND o.pass = s.pass
        AND o.gpu = s.gpu AND o.family = s.family
        AND o.metric = s.metric AND o.implementation <> s.implementation
        AND o.observed_at BETWEEN s.observed_at - INTERVAL '1' HOUR
                              AND s.observed_at + INTERVAL '1' HOUR
        AND o.previous_observed_at BETWEEN s.previous_observed_at - INTERVAL '1' HOUR
                                       AND s.previous_observed_at + INTERVAL '1' HOUR
    GROUP BY s.run_id, s.metric
)
SELECT
    s.kernel, s.pass, s.implementation, s.variant, s.workload, s.gpu, s.family, s.metric,
    s.unit, s.gpu_family, s.step, s.points, s.run_id, s.previous_run_id,
    s.observed_at, s.previous_observed_at, s.version, s.previous_version,
    s.source, s.previous_source, s.environment_id, s.previous_environment_id,
    s.median, s.previous_median, s.p20, s.p80, s.previous_p20, s.previous_p80,
    s.spread, s.previous_spread, s.evidence, s.previous_evidence,
    s.center, s.previous_center, s.center_statistic, s.previous_center_statistic,
    s.samples, s.previous_samples, s.log_variance, s.previous_log_variance,
    s.wide_low, s.wide_high, s.previous_wide_low, s.previous_wide_high,
    s.has_spread, s.previous_has_spread, s.half_step, s.previous_half_step,
    s.size_decade, s.previous_size_decade, s.log_change, s.same_center, s.same_version,
    t.together_implementations, t.together_log_change,
    se.session_workloads, se.session_log_effect AS session_log_median,
    e.echo_up, e.echo_down
FROM steps s
LEFT JOIN together t ON t.run_id = s.run_id AND t.metric = s.metric
LEFT JOIN session se ON se.run_id = s.run_id AND se.metric = s.metric
LEFT JOIN echo e ON e.run_id = s.run_id AND e.metric = s.metric
