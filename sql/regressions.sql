-- view: regressions
-- purpose: Which results got slower than the result before them in their series, beyond noise and the minimum effect, between two versions, and not merely with everything measured beside them?
-- grain: one row per step of a series (see trends) whose verdict is 'slower', that is not a re-run of the same version and not a shared shift.
-- sources: trends, acknowledgements, verdict_settings
-- columns:
--   kernel: kernel benchmarked.
--   pass: timed pass.
--   implementation: implementation key.
--   variant: implementation variant, null for none.
--   workload: workload name.
--   gpu: canonical GPU key.
--   family: protocol comparability family.
--   metric: always 'latency'.
--   run_id: the slower result's run.
--   previous_run_id: the result before it in the series.
--   observed_at: when the slower result was measured (UTC).
--   previous_observed_at: when the previous result was measured.
--   version: release for the slower run.
--   previous_version: release for the previous run.
--   median_us: median latency of the slower result (µs); null when its source gives only a
--     mean.
--   previous_median_us: median latency of the previous result (µs).
--   p20_us: p20 of the slower result (µs).
--   previous_p80_us: p80 of the previous result (µs).
--   change: center_us / previous_center_us - 1; above verdict_settings.min_effect here.
--   gpu_family: the GPU's family.
--   noise_basis: what the verdict rests on (trends.noise_basis): 'samples', 'welch',
--     'run-to-run' or a within-run spread.
--   run_noise: the run-to-run noise envelope it exceeded (trends.run_noise), null for other
--     bases.
--   attribution: 'own' (the implementations measured together did not move as much) or
--     'alone' (nothing was measured together, so the step is not attributed).
--   relative_change: the step against the implementations measured with it
--     (trends.relative_change); above the minimum effect when not null.
--   code_change: the step with its session's fitted effect taken out (trends.code_change):
--     the code's part; above the minimum effect when not null.
--   center_us: central latency of the slower result (µs): the median, else the mean
--     (trends.center_us).
--   previous_center_us: central latency of the previous result (µs).
--   center_statistic: 'median' or 'mean', which statistic both centers are (a step between a
--     mean and a median is never 'slower', so never listed).
-- notes: A step is listed when trends.verdict is 'slower' (the interval of its ratio lies
--   above 1 and the change exceeds verdict_settings.min_effect: the one verdict rule, see
--   speedups), its two results are not a re-run of one version (same_version: a re-run of the
--   same code is noise or a shift of its environment, never a change of the code), it is not
--   a 'shared', 'session' or 'environment' shift (those are in the shifts view; together:
--   trends.cause is 'code'), and when other implementations were measured at the same two
--   times, relative_change exceeds the minimum effect too, as does code_change when the
--   session's effect was fitted (the code's part of a step made partly by the session).
--   `kidata regressions --threshold 0.05` (kidata.analysis.regressions) applies another
--   minimum effect to trends with the same rule and these columns. A step whose run was
--   acknowledged as intended (kidata ack: the acknowledgements table) is left out; `kidata
--   regressions` says how many were.
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
    median_us,
    previous_median_us,
    p20_us,
    previous_p80_us,
    change,
    gpu_family,
    noise_basis,
    run_noise,
    attribution,
    relative_change,
    code_change,
    center_us,
    previous_center_us,
    center_statistic
FROM trends
WHERE verdict = 'slower' AND cause = 'code'
    AND (relative_change IS NULL
         OR relative_change > (SELECT min_effect FROM verdict_settings))
    AND (code_change IS NULL OR code_change > (SELECT min_effect FROM verdict_settings))
    AND run_id NOT IN (SELECT run_id FROM acknowledgements)
