-- view: latencies
-- purpose: Every latency run with its central latency (the median, else the mean), its spread and what that spread rests on, in microseconds.
-- grain: one row per run that has a latency median or mean (memory runs are left out).
-- sources: runs, latency_statistics, protocols, gpus
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
--   median_us: median latency in µs = measurements.value (ns, statistic median) / 1000; null
--     when the source gives only a mean (see center_us).
--   p20_us: 20th-percentile latency in µs, null when the source gives none.
--   p80_us: 80th-percentile latency in µs, null when the source gives none.
--   observed_at: when the result was measured (UTC), null when unknown.
--   status: run status; only 'passed' runs are compared in speedups.
--   version: implementation or harness release from the run's labels.
--   protocol_id: digest of the run's protocol document.
--   gpu_family: the GPU's generation and class from the catalog (gpus.family, e.g. 'h100' for
--     every H100 card); the GPU key itself for a GPU not in the catalog.
--   p25_us: 25th percentile (µs), null when not given (see latency_statistics).
--   p75_us: 75th percentile (µs), null when not given.
--   mean_us: mean (µs), null when not given.
--   stddev_us: standard deviation (µs), null when not given.
--   min_us: fastest sample (µs), null when not given.
--   max_us: slowest sample (µs), null when not given.
--   samples: timed samples behind the statistics, null when unknown.
--   resolution_us: rounding step / timer resolution of the center (µs), null when unknown.
--   spread: the statistics bounding the run's noise ('p20-p80', 'p25-p75', 'mean-stddev',
--     'min-max'), null for none (latency_statistics.spread).
--   low_us: lower end of the spread (µs).
--   high_us: upper end of the spread (µs).
--   evidence: 'measured', 'single sample', 'no spread', 'zero width' or 'below resolution'
--     (latency_statistics.evidence).
--   center_us: the run's central latency (µs), the number comparisons use: median_us, else
--     mean_us for sources that publish only a mean (KernelBench, old nvbench,
--     google-benchmark).
--   center_statistic: 'median' or 'mean': which statistic center_us is. A mean is pulled by
--     outliers, so a mean and a median are not set against each other as equals (see
--     speedups).
--   source: the run's source (runs.source), whose run-to-run noise envelope applies
--     (noise_envelopes).
SELECT
    r.run_id,
    r.kernel,
    r.pass,
    r.implementation,
    r.variant,
    r.workload,
    r.gpu,
    COALESCE(p.family, r.protocol_id) AS family,
    s.median_us,
    s.p20_us,
    s.p80_us,
    r.observed_at,
    r.status,
    r.version,
    r.protocol_id,
    COALESCE(g.family, r.gpu) AS gpu_family,
    s.p25_us,
    s.p75_us,
    s.mean_us,
    s.stddev_us,
    s.min_us,
    s.max_us,
    s.samples,
    s.resolution_us,
    s.spread,
    s.low_us,
    s.high_us,
    s.evidence,
    s.center_us,
    s.center_statistic,
    r.source
FROM runs r
JOIN latency_statistics s
    ON s.run_id = r.run_id
LEFT JOIN protocols p
    ON p.protocol_id = r.protocol_id
LEFT JOIN gpus g
    ON g.gpu = r.gpu
