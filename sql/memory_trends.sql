-- view: memory_trends
-- purpose: How did each series' memory use move from one result to the next, beyond noise, and did the implementations measured with it move too?
-- grain: one row per passed memory run with a timestamp; a series is one kernel, pass, implementation, variant, workload, GPU, protocol family and metric, in time order.
-- sources: series_steps
-- columns:
--   kernel: kernel benchmarked.
--   pass: timed pass.
--   implementation: implementation key.
--   variant: implementation variant, null for none.
--   workload: workload name.
--   gpu: canonical GPU key.
--   family: protocol comparability family.
--   metric: always 'memory'.
--   step: position in the series, 1 for the earliest result.
--   points: number of results in the series.
--   run_id: this result's run.
--   previous_run_id: the run just before it in the series; null at step 1.
--   observed_at: when this result was measured (UTC).
--   previous_observed_at: when the previous result was measured.
--   version: release of the implementation or harness for this run (runs.version).
--   previous_version: release for the previous run.
--   median_mb: median memory (MB); null when the source gives only a mean (see center_mb).
--   previous_median_mb: the previous result's median memory (MB).
--   p20_mb: 20th percentile memory (MB), null when not measured.
--   p80_mb: 80th percentile memory (MB), null when not measured.
--   previous_p20_mb: the previous result's p20 memory (MB).
--   previous_p80_mb: the previous result's p80 memory (MB).
--   change: center / previous center - 1 (center_mb: the median, else the mean); above 0
--     means more memory; null at step 1.
--   beyond_noise: true when the verdict is 'faster', 'slower' or 'negligible', false when
--     'within noise', null otherwise and at step 1 (series_steps.beyond_noise).
--   verdict: this result against the previous one, by the one verdict rule
--     (series_steps.verdict): 'slower', 'faster', 'negligible' (beyond noise, under
--     verdict_settings.min_effect), 'within noise', or what evidence is missing; null at step 1.
--   gpu_family: the GPU's family (gpus.family).
--   evidence: what this result's spread supports (run_statistics.evidence).
--   previous_evidence: what the previous result's spread supports.
--   same_version: true when version = previous_version; null when either is unknown and at step
--     1.
--   run_noise: the run-to-run noise envelope the step was judged by (series_steps.run_noise:
--     noise_basis 'run-to-run' only), null otherwise.
--   noise_steps: re-run changes that envelope rests on (0 when none was used).
--   noise_basis: 'samples', 'welch', 'run-to-run', 'within-run p20-p80' (or another spread) or
--     'none'; null at step 1.
--   together_implementations: other implementations measured together with this step
--     (series_steps), null when none.
--   together_change: how those moved over the same step (geometric mean), null when none.
--   relative_change: (1 + change) / (1 + together_change) - 1, null when none.
--   attribution: 'shared' (an environment or harness shift: the others moved the same way by at
--     least half as much), 'session' (the session's fitted effect over the same two
--     sessions explains the step up to the minimum effect: series_steps), 'environment' (a
--     software fact changed under the same version: changed_facts), 'own', 'alone' (nothing
--     measured together); null at step 1 (series_steps.attribution).
--   center_mb: this result's central memory (MB): the median, else the mean
--     (series_steps.center).
--   previous_center_mb: the previous result's central memory (MB).
--   center_statistic: 'median' or 'mean', which statistic center_mb is.
--   previous_center_statistic: which statistic previous_center_mb is.
--   change_low: low end of the change's interval under noise_basis
--     (series_steps.change_low); null without a noise estimate.
--   change_high: high end of that interval.
--   min_effect: the minimum effect the verdict used (verdict_settings.min_effect).
--   noise_df: Welch degrees of freedom for noise_basis 'welch', else null.
--   session_workloads: other workloads of the implementation measured over the same two
--     sessions (series_steps.session_workloads); null when none.
--   session_change: the session's effect fitted over the implementation's workloads in the
--     same two sessions (series_steps.session_change); null when no shift was fitted.
--   code_change: (1 + change) / (1 + session_change) - 1, the step without the session's
--     effect (series_steps.code_change); null when session_change is.
--   changed_facts: the software facts that differ between the two results' environments, as
--     'torch 2.4.0 -> 2.5.1' (series_steps.changed_facts); null when none.
--   cause: 'same version', 'shared', 'session', 'environment' or 'code': what the step is put
--     down to (series_steps.cause); null at step 1.
-- notes: series_steps for metric 'memory', in MB; every rule (time order, run-to-run noise,
--   attribution, what is left out) is written in series_steps' header. The memory_regressions
--   view keeps the steps that use more memory beyond a threshold and are not shared shifts.
SELECT
    kernel,
    pass,
    implementation,
    variant,
    workload,
    gpu,
    family,
    metric,
    step,
    points,
    run_id,
    previous_run_id,
    observed_at,
    previous_observed_at,
    version,
    previous_version,
    median AS median_mb,
    previous_median AS previous_median_mb,
    p20 AS p20_mb,
    p80 AS p80_mb,
    previous_p20 AS previous_p20_mb,
    previous_p80 AS previous_p80_mb,
    change,
    beyond_noise,
    verdict,
    gpu_family,
    evidence,
    previous_evidence,
    same_version,
    run_noise,
    noise_steps,
    noise_basis,
    together_implementations,
    together_change,
    relative_change,
    attribution,
    center AS center_mb,
    previous_center AS previous_center_mb,
    center_statistic,
    previous_center_statistic,
    change_low,
    change_high,
    min_effect,
    noise_df,
    session_workloads,
    session_change,
    code_change,
    changed_facts,
    cause
FROM series_steps
WHERE metric = 'memory'
