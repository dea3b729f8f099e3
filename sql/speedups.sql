-- view: speedups
-- purpose: Candidate vs baseline latency for every two implementations measured on the same kernel, pass, workload, GPU and protocol family.
-- grain: one row per ordered pair (candidate, baseline) of different implementations, per kernel, pass, workload, GPU and protocol family; both directions are listed.
-- sources: latest_runs, protocols
-- columns:
--   kernel: kernel benchmarked.
--   pass: timed pass.
--   workload: workload name.
--   gpu: canonical GPU key.
--   family: protocol comparability family shared by both runs.
--   candidate: candidate implementation.
--   candidate_variant: candidate's variant, null for none.
--   baseline: baseline implementation.
--   baseline_variant: baseline's variant, null for none.
--   candidate_us: candidate median latency (µs).
--   baseline_us: baseline median latency (µs).
--   latency_ratio: candidate_us / baseline_us; below 1 means the candidate is faster.
--   speedup: baseline_us / candidate_us; above 1 means the candidate is faster.
--   candidate_run_id: the candidate run used.
--   baseline_run_id: the baseline run used.
--   candidate_runs: how many passed runs the candidate has for this key (the latest is used).
--   baseline_runs: how many passed runs the baseline has for this key (the latest is used).
--   candidate_p20_us: candidate 20th-percentile latency (µs), null when not measured.
--   candidate_p80_us: candidate 80th-percentile latency (µs), null when not measured.
--   baseline_p20_us: baseline 20th-percentile latency (µs), null when not measured.
--   baseline_p80_us: baseline 80th-percentile latency (µs), null when not measured.
--   speedup_low: baseline_p20_us / candidate_p80_us, the least favourable speedup the two
--     p20-p80 ranges allow; null when either side lacks p20 or p80.
--   speedup_high: baseline_p80_us / candidate_p20_us, the most favourable speedup the ranges
--     allow; null when either side lacks p20 or p80.
--   verdict: 'faster' when the candidate's whole p20-p80 range lies below the baseline's
--     (candidate_p80_us < baseline_p20_us, i.e. speedup_low > 1); 'slower' when it lies above
--     (candidate_p20_us > baseline_p80_us, i.e. speedup_high < 1); 'within noise' when the two
--     ranges overlap, touching ends included; 'no spread' when either side lacks p20 or p80.
-- notes: Only runs with status 'passed' are compared. When an implementation (and variant) has
--   several runs for one kernel, pass, workload, GPU and family, its latest is used: greatest
--   observed_at, runs without a timestamp last, ties broken by the greatest run_id. Runs are
--   never paired across GPUs, passes, workloads or protocol families, and two variants of one
--   implementation are not paired with each other. The verdict compares p20-p80 ranges, not
--   medians: a speedup whose ranges overlap is not clearly different from 1. The latest run
--   is found among the loads' own latest runs (table latest_runs), which gives the same run as
--   ranking every run in latencies, at a cost that grows with the keys, not the runs.
WITH heads AS (
    -- Each load's latest passed latency run per key (see the latest_runs table); the family
    -- is resolved here because a protocol document may arrive in a later load than its runs.
    SELECT h.*, COALESCE(p.family, h.protocol_id) AS family
    FROM latest_runs h
    LEFT JOIN protocols p ON p.protocol_id = h.protocol_id
),
ranked AS (
    SELECT
        heads.*,
        ROW_NUMBER() OVER (
            PARTITION BY kernel, pass, workload, gpu, family, implementation, variant
            ORDER BY observed_at DESC NULLS LAST, run_id DESC
        ) AS rn,
        CAST(SUM(passed_runs) OVER (
            PARTITION BY kernel, pass, workload, gpu, family, implementation, variant
        ) AS BIGINT) AS runs_in_key
    FROM heads
),
latest AS (
    SELECT * FROM ranked WHERE rn = 1
)
SELECT
    c.kernel,
    c.pass,
    c.workload,
    c.gpu,
    c.family,
    c.implementation AS candidate,
    c.variant AS candidate_variant,
    b.implementation AS baseline,
    b.variant AS baseline_variant,
    c.median_us AS candidate_us,
    b.median_us AS baseline_us,
    c.median_us / b.median_us AS latency_ratio,
    b.median_us / c.median_us AS speedup,
    c.run_id AS candidate_run_id,
    b.run_id AS baseline_run_id,
    c.runs_in_key AS candidate_runs,
    b.runs_in_key AS baseline_runs,
    c.p20_us AS candidate_p20_us,
    c.p80_us AS candidate_p80_us,
    b.p20_us AS baseline_p20_us,
    b.p80_us AS baseline_p80_us,
    b.p20_us / c.p80_us AS speedup_low,
    b.p80_us / c.p20_us AS speedup_high,
    CASE
        WHEN c.p20_us IS NULL OR c.p80_us IS NULL OR b.p20_us IS NULL OR b.p80_us IS NULL
            THEN 'no spread'
        WHEN c.p80_us < b.p20_us THEN 'faster'
        WHEN c.p20_us > b.p80_us THEN 'slower'
        ELSE 'within noise'
    END AS verdict
FROM latest c
JOIN latest b
    ON c.kernel = b.kernel
    AND c.pass = b.pass
    AND c.workload = b.workload
    AND c.gpu = b.gpu
    AND c.family = b.family
    AND c.implementation <> b.implementation
