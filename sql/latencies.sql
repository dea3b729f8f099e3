-- view: latencies
-- purpose: Every latency run with its median and p20/p80 spread in microseconds.
-- grain: one row per run that has a latency median (memory runs are left out).
-- sources: runs, measurements, protocols
-- columns:
--   run_id: the run (runs.run_id).
--   kernel: kernel benchmarked.
--   pass: timed pass (forward, backward, full, no-grad-forward, step).
--   implementation: implementation key (liger, torch, trainkernel, inductor, ...).
--   variant: implementation variant (a schedule), null for none.
--   workload: workload name as the source writes it.
--   gpu: canonical GPU key.
--   family: comparability family of the run's protocol (protocols.family); the protocol
--     digest when the protocol document was never loaded.
--   median_us: median latency in µs = measurements.value (ns, statistic median) / 1000.
--   p20_us: 20th-percentile latency in µs, null when the source gives none.
--   p80_us: 80th-percentile latency in µs, null when the source gives none.
--   observed_at: when the result was measured (UTC), null when unknown.
--   status: run status; only 'passed' runs are compared in speedups.
--   version: implementation or harness release from the run's labels.
--   protocol_id: digest of the run's protocol document.
SELECT
    r.run_id,
    r.kernel,
    r.pass,
    r.implementation,
    r.variant,
    r.workload,
    r.gpu,
    COALESCE(p.family, r.protocol_id) AS family,
    med.value / 1000.0 AS median_us,
    p20.value / 1000.0 AS p20_us,
    p80.value / 1000.0 AS p80_us,
    r.observed_at,
    r.status,
    r.version,
    r.protocol_id
FROM runs r
JOIN measurements med
    ON med.run_id = r.run_id AND med.metric = 'latency' AND med.statistic = 'median'
LEFT JOIN measurements p20
    ON p20.run_id = r.run_id AND p20.metric = 'latency' AND p20.statistic = 'p20'
LEFT JOIN measurements p80
    ON p80.run_id = r.run_id AND p80.metric = 'latency' AND p80.statistic = 'p80'
LEFT JOIN protocols p
    ON p.protocol_id = r.protocol_id
