-- view: audit
-- purpose: Does every derived number a source published agree with the numbers it was derived from, within the rounding of both?
-- grain: one row per published claim (published: run_id, quantity, baseline_run_id).
-- sources: published, runs, measurements
-- columns:
--   gpu: canonical GPU key of the claim's run.
--   workload: workload name of the claim's run.
--   kernel: kernel of the claim's run.
--   pass: timed pass of the claim's run.
--   quantity: what was published: 'latency_ratio' (run / baseline run) or 'speedup'
--     (baseline run / run); other quantities are listed but not checked.
--   definition: how the source says it derived the number.
--   published: the published value.
--   recomputed: the same quantity recomputed from the two runs' median latencies as stored.
--   difference: published - recomputed.
--   tolerance: how far apart they may be from rounding alone: the largest deviation of the
--     ratio n / d over the input intervals n ± rn/2 and d ± rd/2, plus half the published
--     rounding step rp/2: GREATEST((n + rn/2) / (d - rd/2) - n/d, n/d - (n - rn/2) / (d + rd/2))
--     + rp/2, with n, d the numerator and denominator latencies and rn, rd their resolutions.
--   flagged: true when |difference| > tolerance (plus 1e-9 x |recomputed| for floating-point
--     error): the claim disagrees with its inputs beyond rounding. Null when not checked.
--   status: 'agrees', 'disagrees', or why it was not checked: 'run not loaded',
--     'baseline run not loaded', 'no latency median', 'unknown quantity', 'inputs too coarse'
--     (the denominator's rounding interval reaches 0, so any ratio is possible).
--   recomputed_low: smallest value of the ratio the rounded inputs allow, (n - rn/2) / (d + rd/2).
--   recomputed_high: largest value of the ratio the rounded inputs allow, (n + rn/2) / (d - rd/2);
--     null when d - rd/2 <= 0 (unbounded).
--   candidate_us: median latency of the claim's run (µs).
--   baseline_us: median latency of the baseline run (µs).
--   published_resolution: rounding step of the published value; null counts as 0 (exact).
--   run_id: the run the claim is about (published.run_id).
--   baseline_run_id: the baseline run (published.baseline_run_id).
-- notes: A resolution that is unknown (null) counts as 0: the number is taken as exact. Latency
--   resolutions come from measurements.resolution (trainkernel publishes µs to 0.01, so 10 ns);
--   ratio resolutions from published.resolution (0.001). The ratio uses the median latency of each
--   run, as the source's definition does.
WITH claims AS (
    SELECT
        p.run_id,
        p.baseline_run_id,
        p.quantity,
        p.definition,
        p.value AS published,
        COALESCE(p.resolution, 0) AS published_resolution,
        r.run_id AS found_run,
        b.run_id AS found_baseline,
        r.gpu,
        r.workload,
        r.kernel,
        r.pass,
        cm.value AS candidate_ns,
        COALESCE(cm.resolution, 0) AS candidate_resolution,
        bm.value AS baseline_ns,
        COALESCE(bm.resolution, 0) AS baseline_resolution
    FROM published p
    LEFT JOIN runs r ON r.run_id = p.run_id
    LEFT JOIN runs b ON b.run_id = p.baseline_run_id
    LEFT JOIN measurements cm
        ON cm.run_id = p.run_id AND cm.metric = 'latency' AND cm.statistic = 'median'
    LEFT JOIN measurements bm
        ON bm.run_id = p.baseline_run_id AND bm.metric = 'latency' AND bm.statistic = 'median'
),
oriented AS (
    SELECT
        c.*,
        CASE c.quantity WHEN 'latency_ratio' THEN c.candidate_ns
                        WHEN 'speedup' THEN c.baseline_ns END AS n,
        CASE c.quantity WHEN 'latency_ratio' THEN c.candidate_resolution
                        WHEN 'speedup' THEN c.baseline_resolution END AS rn,
        CASE c.quantity WHEN 'latency_ratio' THEN c.baseline_ns
                        WHEN 'speedup' THEN c.candidate_ns END AS d,
        CASE c.quantity WHEN 'latency_ratio' THEN c.baseline_resolution
                        WHEN 'speedup' THEN c.candidate_resolution END AS rd
    FROM claims c
),
computed AS (
    SELECT
        o.*,
        o.n / o.d AS recomputed,
        (o.n - o.rn / 2) / (o.d + o.rd / 2) AS recomputed_low,
        CASE WHEN o.d - o.rd / 2 > 0 THEN (o.n + o.rn / 2) / (o.d - o.rd / 2) END
            AS recomputed_high
    FROM oriented o
),
judged AS (
    SELECT
        c.*,
        -- GREATEST skips nulls in both engines: an unbounded high side must stay null.
        CASE WHEN c.recomputed_high IS NOT NULL THEN
            GREATEST(c.recomputed_high - c.recomputed, c.recomputed - c.recomputed_low)
            + c.published_resolution / 2 END AS tolerance
    FROM computed c
)
SELECT
    gpu,
    workload,
    kernel,
    pass,
    quantity,
    definition,
    published,
    recomputed,
    published - recomputed AS difference,
    tolerance,
    CASE WHEN recomputed IS NULL OR tolerance IS NULL THEN NULL
         ELSE ABS(published - recomputed) > tolerance + 1e-9 * ABS(recomputed)
    END AS flagged,
    CASE
        WHEN quantity NOT IN ('latency_ratio', 'speedup') THEN 'unknown quantity'
        WHEN found_run IS NULL THEN 'run not loaded'
        WHEN found_baseline IS NULL THEN 'baseline run not loaded'
        WHEN recomputed IS NULL THEN 'no latency median'
        WHEN tolerance IS NULL THEN 'inputs too coarse'
        WHEN ABS(published - recomputed) > tolerance + 1e-9 * ABS(recomputed) THEN 'disagrees'
        ELSE 'agrees'
    END AS status,
    recomputed_low,
    recomputed_high,
    candidate_ns / 1000.0 AS candidate_us,
    baseline_ns / 1000.0 AS baseline_us,
    published_resolution,
    run_id,
    baseline_run_id
FROM judged
