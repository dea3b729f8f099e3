-- view: speedups
-- purpose: Candidate vs baseline latency for every two implementations measured on the same kernel, pass, workload, GPU and protocol family, with a verdict that knows its evidence.
-- grain: one row per ordered pair (candidate, baseline) of different implementations, per kernel, pass, workload, GPU and protocol family; both directions are listed.
-- sources: latest_latencies, verdict_rule
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
--   candidate_us: candidate central latency (µs): its median, else its mean
--     (latest_latencies.center_us; center_statistic says which).
--   baseline_us: baseline central latency (µs), as candidate_us.
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
--   speedup_low: baseline_low_us / candidate_high_us, the least favourable speedup the two
--     noise ranges allow (for p20-p80 spreads: baseline p20 / candidate p80); null when either
--     side has no spread.
--   speedup_high: baseline_high_us / candidate_low_us, the most favourable speedup the ranges
--     allow; null when either side has no spread.
--   verdict: from verdict_rule, with placement 'different centers' when one side's center is
--     a median and the other's a mean (center_statistic 'mixed'), 'below' when
--     candidate_high_us < baseline_low_us, 'above' when candidate_low_us > baseline_high_us,
--     'different spreads' when the two sides' spreads are different statistics, else
--     'overlap': 'faster', 'slower', 'within noise' (ranges overlap, touching ends
--     included), or what is missing: 'single sample', 'no spread', 'zero width', 'below
--     resolution' (candidate's first), 'different centers', 'different spreads'.
--   gpu_family: the GPU's family (e.g. 'h100'; gpus.family), for filters across cards.
--   candidate_role: the role the candidate plays in this key (latest_latencies.role), e.g.
--     'reference'; null for none.
--   baseline_role: the role the baseline plays in this key; `baseline_role = 'reference'`
--     gives every kernel's reference implementation (torch, huggingface, ...).
--   candidate_evidence: what the candidate's spread supports (latencies.evidence).
--   baseline_evidence: what the baseline's spread supports.
--   noise_basis: what the verdict's noise estimate rests on: 'within-run p20-p80' (or
--     another spread: 'within-run p25-p75', ...) when both sides have a measured spread of the
--     same statistics; 'none' otherwise.
--   candidate_low_us: lower end of the candidate's spread (µs).
--   candidate_high_us: upper end of the candidate's spread (µs).
--   baseline_low_us: lower end of the baseline's spread (µs).
--   baseline_high_us: upper end of the baseline's spread (µs).
--   center_statistic: what the ratio sets against each other: 'median' (both sides' medians),
--     'mean' (both sides give only a mean), or 'mixed' (a mean against a median: the ratio
--     is biased, as a mean sits above the median of a right-skewed latency distribution, and
--     the verdict is 'different centers').
--   candidate_center_statistic: the candidate's center, 'median' or 'mean'.
--   baseline_center_statistic: the baseline's center, 'median' or 'mean'.
--   candidate_observed_at: when the candidate's run was measured (its observed_at in
--     latest_latencies); null when its source gives no time.
--   baseline_observed_at: when the baseline's run was measured; null when not given.
--   measured_apart: true when the two runs were measured more than 30 days apart (the pair
--     may compare two different software stacks, drivers or machines as much as two
--     implementations); false within 30 days; null when either time is unknown.
-- notes: Only runs with status 'passed' are compared, the latest per implementation and
--   variant (latest_latencies). Runs are never paired across GPUs, passes, workloads or
--   protocol families, and two variants of one implementation are not paired with each other.
--   The verdict compares noise ranges, not medians: a speedup whose ranges overlap is not
--   clearly different from 1, and a side without a measured spread gives no verdict at all.
--   Only within-run spreads are used here: a run's p20-p80 range is not run-to-run noise, so
--   'faster' means "the two runs' sample ranges are apart", no more.
WITH latest AS (
    -- Named once so that engines may compute it once for both sides of the pair.
    SELECT * FROM latest_latencies
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
    c.center_us AS candidate_us,
    b.center_us AS baseline_us,
    c.center_us / b.center_us AS latency_ratio,
    b.center_us / c.center_us AS speedup,
    c.run_id AS candidate_run_id,
    b.run_id AS baseline_run_id,
    c.runs AS candidate_runs,
    b.runs AS baseline_runs,
    c.p20_us AS candidate_p20_us,
    c.p80_us AS candidate_p80_us,
    b.p20_us AS baseline_p20_us,
    b.p80_us AS baseline_p80_us,
    b.low_us / c.high_us AS speedup_low,
    b.high_us / c.low_us AS speedup_high,
    v.verdict,
    c.gpu_family,
    c.role AS candidate_role,
    b.role AS baseline_role,
    c.evidence AS candidate_evidence,
    b.evidence AS baseline_evidence,
    CASE WHEN c.evidence = 'measured' AND b.evidence = 'measured' AND c.spread = b.spread
         THEN CONCAT('within-run ', c.spread) ELSE 'none' END AS noise_basis,
    c.low_us AS candidate_low_us,
    c.high_us AS candidate_high_us,
    b.low_us AS baseline_low_us,
    b.high_us AS baseline_high_us,
    CASE WHEN c.center_statistic = b.center_statistic THEN c.center_statistic ELSE 'mixed' END
        AS center_statistic,
    c.center_statistic AS candidate_center_statistic,
    b.center_statistic AS baseline_center_statistic,
    c.observed_at AS candidate_observed_at,
    b.observed_at AS baseline_observed_at,
    c.observed_at > b.observed_at + INTERVAL 30 DAYS
        OR b.observed_at > c.observed_at + INTERVAL 30 DAYS AS measured_apart
FROM latest c
JOIN latest b
    ON c.kernel = b.kernel
    AND c.pass = b.pass
    AND c.workload = b.workload
    AND c.gpu = b.gpu
    AND c.family = b.family
    AND c.implementation <> b.implementation
JOIN verdict_rule v
    ON v.candidate_evidence = c.evidence
    AND v.baseline_evidence = b.evidence
    AND v.placement = CASE
        WHEN c.center_statistic <> b.center_statistic THEN 'different centers'
        WHEN COALESCE(c.spread, '') <> COALESCE(b.spread, '') THEN 'different spreads'
        WHEN c.high_us < b.low_us THEN 'below'
        WHEN c.low_us > b.high_us THEN 'above'
        ELSE 'overlap'
    END
