-- view: regressions
-- purpose: Which results got slower than the result before them in their series, beyond noise, by more than 5%, and not merely with everything measured beside them?
-- grain: one row per step of a series (see trends) that is slower beyond noise and beyond the 5% threshold, and is not a shared shift.
-- sources: trends, acknowledgements
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
--   change: center_us / previous_center_us - 1; above 0.05 here.
--   gpu_family: the GPU's family.
--   noise_basis: what the verdict rests on (trends.noise_basis): 'repeated runs' or a
--     within-run spread.
--   run_noise: the run-to-run noise it exceeded (trends.run_noise), null without re-runs.
--   attribution: 'own' (the implementations measured together did not move as much) or
--     'alone' (nothing was measured together, so the step is not attributed).
--   relative_change: the step against the implementations measured with it
--     (trends.relative_change); above 0.05 when not null.
--   center_us: central latency of the slower result (µs): the median, else the mean
--     (trends.center_us).
--   previous_center_us: central latency of the previous result (µs).
--   center_statistic: 'median' or 'mean', which statistic both centers are (a step between a
--     mean and a median is never 'slower', so never listed).
-- notes: A step is listed when trends.verdict is 'slower' (beyond run-to-run noise where an
--   implementation has re-runs of one release, else p20-p80 ranges apart; a side without a
--   measured spread is never listed), change > 0.05, it is not a 'shared' shift, and when other
--   implementations were measured at the same two times, relative_change > 0.05 too. The
--   threshold is fixed at 5% here because a view takes no parameters portably; `kidata
--   regressions --threshold 0.1` (kidata.analysis.regressions) applies another threshold to
--   trends with the same rule and these columns. A step whose run was acknowledged as
--   intended (kidata ack: the acknowledgements table) is left out; `kidata regressions` says
--   how many were.
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
    center_us,
    previous_center_us,
    center_statistic
FROM trends
WHERE verdict = 'slower' AND change > 0.05 AND attribution <> 'shared'
    AND (relative_change IS NULL OR relative_change > 0.05)
    AND run_id NOT IN (SELECT run_id FROM acknowledgements)
