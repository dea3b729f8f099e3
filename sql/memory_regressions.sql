-- view: memory_regressions
-- purpose: Which results used more memory than the result before them in their series, beyond noise and the minimum effect, between two versions, and not merely with everything measured beside them?
-- grain: one row per step of a memory series (see memory_trends) whose verdict is 'slower' (more memory), that is not a re-run of one version and not a shared shift.
-- sources: memory_trends, verdict_settings
-- columns:
--   kernel: kernel benchmarked.
--   pass: timed pass.
--   implementation: implementation key.
--   variant: implementation variant, null for none.
--   workload: workload name.
--   gpu: canonical GPU key.
--   family: protocol comparability family.
--   metric: always 'memory'.
--   run_id: the result that uses more memory.
--   previous_run_id: the result before it in the series.
--   observed_at: when it was measured (UTC).
--   previous_observed_at: when the previous result was measured.
--   version: release for the run.
--   previous_version: release for the previous run.
--   median_mb: median memory of the result (MB); null when its source gives only a mean.
--   previous_median_mb: median memory of the previous result (MB).
--   p20_mb: p20 of the result (MB).
--   previous_p80_mb: p80 of the previous result (MB).
--   change: center_mb / previous_center_mb - 1; above verdict_settings.min_effect here.
--   gpu_family: the GPU's family.
--   noise_basis: what the verdict rests on (memory_trends.noise_basis).
--   run_noise: null (run-to-run envelopes are calibrated on latency only).
--   attribution: 'own' or 'alone' (memory_trends.attribution).
--   relative_change: the step against the implementations measured with it; above the
--     minimum effect when not null.
--   code_change: the step with its session's fitted effect taken out
--     (memory_trends.code_change); above the minimum effect when not null.
--   center_mb: central memory of the result (MB): the median, else the mean
--     (memory_trends.center_mb).
--   previous_center_mb: central memory of the previous result (MB).
--   center_statistic: 'median' or 'mean', which statistic both centers are.
-- notes: The rule of the regressions view, on memory: memory_trends.verdict is 'slower' (more
--   memory beyond noise and the minimum effect), put down to the code (memory_trends.cause
--   'code': not a re-run of one version, not a 'shared', 'session' or 'environment' shift),
--   relative_change above the minimum effect when other implementations were measured at
--   the same two times, and code_change above it when the session's effect was fitted.
SELECT
    kernel,
    pass,
    implementation,
    variant,
    workload,
    gpu,
    family,
    metric,
    run_id,
    previous_run_id,
    observed_at,
    previous_observed_at,
    version,
    previous_version,
    median_mb,
    previous_median_mb,
    p20_mb,
    previous_p80_mb,
    change,
    gpu_family,
    noise_basis,
    run_noise,
    attribution,
    relative_change,
    code_change,
    center_mb,
    previous_center_mb,
    center_statistic
FROM memory_trends
WHERE verdict = 'slower' AND cause = 'code'
    AND (relative_change IS NULL
         OR relative_change > (SELECT min_effect FROM verdict_settings))
    AND (code_change IS NULL OR code_change > (SELECT min_effect FROM verdict_settings))
