-- view: shifts
-- purpose: Which steps moved beyond noise and the minimum effect because the session or the environment did, not the code: the steps regressions leaves out for that reason.
-- grain: one row per step of a latency series (see trends) whose verdict is 'slower' or 'faster' and that is a re-run of one version, a shift shared with the implementations measured beside it, a shift of the session the implementation's workloads share, or a step over a changed environment under one version.
-- sources: trends
-- columns:
--   kernel: kernel benchmarked.
--   pass: timed pass.
--   implementation: implementation key.
--   variant: implementation variant, null for none.
--   workload: workload name.
--   gpu: canonical GPU key.
--   family: protocol comparability family.
--   run_id: the later result's run.
--   previous_run_id: the result before it in the series.
--   observed_at: when the later result was measured (UTC).
--   previous_observed_at: when the previous result was measured.
--   version: release for the later run.
--   previous_version: release for the previous run.
--   change: center_us / previous_center_us - 1.
--   verdict: 'slower' or 'faster' (trends.verdict).
--   cause: why the step is not the code's, the first that applies: 'same version' (a re-run
--     of one release moved: the environment, the machine or noise beyond its envelope),
--     'shared' (the implementations measured beside it moved the same way, trends.attribution),
--     'session' (the session's effect, fitted over the implementation's workloads in the same
--     two sessions and echoed by another implementation, explains the step up to the
--     minimum effect, trends.session_change), 'environment' (a software fact of the
--     environment changed under the same version, trends.changed_facts).
--   together_change: how the implementations measured beside it moved (trends), null when
--     none.
--   session_workloads: the implementation's other workloads over the same two sessions.
--   session_change: the session's fitted effect (trends.session_change), null when not
--     fitted.
--   code_change: the step without the session's effect (trends.code_change).
--   noise_basis: what the verdict rests on (trends.noise_basis).
--   changed_facts: the software facts that changed between the two results (trends), null
--     when none.
-- notes: regressions lists the code-caused slowdowns; this view lists the rest of the firm
--   steps, slower and faster, so a shift of a driver, a clock or a harness is seen without
--   being blamed on the code. A step whose cause is one of these and also a real code change
--   (a release that made everything uniformly slower on a day the machine also changed)
--   cannot be told apart from the numbers alone; docs/statistics.md section 4 says what the
--   rules rest on.
SELECT
    kernel,
    pass,
    implementation,
    variant,
    workload,
    gpu,
    family,
    run_id,
    previous_run_id,
    observed_at,
    previous_observed_at,
    version,
    previous_version,
    change,
    verdict,
    cause,
    together_change,
    session_workloads,
    session_change,
    code_change,
    noise_basis,
    changed_facts
FROM trends
WHERE verdict IN ('slower', 'faster') AND cause <> 'code'
