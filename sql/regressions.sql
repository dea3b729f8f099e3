-- view: regressions
-- purpose: Which results got slower than the result before them in their series, beyond noise and by more than 5%?
-- grain: one row per step of a series (see trends) that is slower beyond noise and beyond the 5% threshold.
-- sources: trends
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
--   median_us: median latency of the slower result (µs).
--   previous_median_us: median latency of the previous result (µs).
--   p20_us: p20 of the slower result (µs).
--   previous_p80_us: p80 of the previous result (µs); p20_us is above it.
--   change: median_us / previous_median_us - 1; above 0.05 here.
-- notes: Beyond noise means p20_us > previous_p80_us (the two p20-p80 ranges do not overlap); a
--   result without p20/p80 on either side is never listed, whatever its change. The threshold is
--   fixed at 5% here because a view takes no parameters portably; `kidata regressions --threshold
--   0.1` (kidata.analysis.regressions) applies another threshold to trends, with these columns.
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
    change
FROM trends
WHERE verdict = 'slower' AND change > 0.05
