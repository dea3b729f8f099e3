-- view: speedups
-- purpose: Candidate vs baseline latency for every two implementations measured on the same kernel, pass, workload, GPU and protocol family.
-- grain: one row per ordered pair (candidate, baseline) of different implementations, per kernel, pass, workload, GPU and protocol family; both directions are listed.
-- sources: latencies
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
-- notes: Only runs with status 'passed' are compared. When an implementation (and variant) has
--   several runs for one kernel, pass, workload, GPU and family, its latest is used: greatest
--   observed_at, runs without a timestamp last, ties broken by the greatest run_id. Runs are
--   never paired across GPUs, passes, workloads or protocol families, and two variants of one
--   implementation are not paired with each other.
WITH ranked AS (
    SELECT
        l.*,
        ROW_NUMBER() OVER (
            PARTITION BY kernel, pass, workload, gpu, family, implementation, variant
            ORDER BY observed_at DESC NULLS LAST, run_id DESC
        ) AS rn,
        COUNT(*) OVER (
            PARTITION BY kernel, pass, workload, gpu, family, implementation, variant
        ) AS runs_in_key
    FROM latencies l
    WHERE l.status = 'passed'
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
    b.runs_in_key AS baseline_runs
FROM latest c
JOIN latest b
    ON c.kernel = b.kernel
    AND c.pass = b.pass
    AND c.workload = b.workload
    AND c.gpu = b.gpu
    AND c.family = b.family
    AND c.implementation <> b.implementation
