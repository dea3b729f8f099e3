-- view: efficiency
-- purpose: How close does each run of a memory-bound kernel come to the GPU's published peak memory bandwidth?
-- grain: one row per passed latency run whose kernel and pass have a byte model and whose workload gives every parameter the model needs.
-- sources: run_bytes, latencies, gpus
-- columns:
--   run_id: the run.
--   kernel: kernel benchmarked.
--   pass: timed pass.
--   implementation: implementation key.
--   variant: implementation variant, null for none.
--   workload: workload name.
--   gpu: canonical GPU key.
--   family: protocol comparability family.
--   bytes: minimum bytes the pass moves = SUM over the model's terms of coefficient x
--     element bytes x factor_1 x factor_2 x factor_3 (run_bytes, rounded to whole bytes; see
--     docs/efficiency.md).
--   median_us: median latency (µs).
--   achieved_gbps: bytes / median time, in GB/s (10^9 bytes/s) = bytes / (median_us x 1000).
--   achieved_gbps_low: bytes / (p80_us x 1000), the rate at the slower end of the p20-p80
--     range; null without p80.
--   achieved_gbps_high: bytes / (p20_us x 1000), the rate at the faster end; null without p20.
--   peak_gbps: the GPU's published peak memory bandwidth (gpus.memory_bandwidth_gbps); null
--     when the catalog has none.
--   peak_fraction: achieved_gbps / peak_gbps; null when the peak is unknown.
--   above_peak: true when achieved_gbps exceeds the published peak (peak_fraction > 1): faster
--     than the hardware allows, so the measurement (or the workload's parameters) is wrong and
--     the number should not be quoted; null when the peak is unknown.
--   version: release of the implementation or harness (runs.version).
--   gpu_family: the GPU's family (gpus.family).
--   peak_us: the time the bytes would take at the published peak: bytes / (peak_gbps x
--     1000) µs; null when the peak is unknown.
--   bound: what sets the latency, when the bytes do not: 'overhead' when the bytes would move
--     in under 5 µs at peak (peak_us < 5) or flat_latency is true (the latency does not grow
--     with the bytes) *and* the median is near the launch floor, under 20 µs (a few kernel
--     launches, each some 2-5 µs on current NVIDIA GPUs); 'fixed cost' when either holds
--     but the median is 20 µs or more (neither bytes nor launches set it: synchronisation,
--     host work, compute or a cache effect); 'bandwidth' otherwise; null when the peak is
--     unknown and flat_latency is not true. In both non-bandwidth cases peak_fraction is no
--     bandwidth measurement and should not be quoted as one.
--   flat_latency: true when a point of the same sweep (kernel, pass, implementation, variant,
--     GPU, family and version) with at least twice the bytes has a median under 1.25 times
--     this one's (size_growth < 1.25): doubling the bytes adds under a quarter to the latency,
--     so fixed costs, not the bytes, set it (a bandwidth-bound point would take about twice as
--     long); false when the sweep has such larger points but each takes 1.25 times as long or
--     more; null when it has no point with twice the bytes (the largest points of a sweep).
--   size_growth: the smallest median_us ratio (larger point / this point) over the sweep's
--     points with at least twice this point's bytes; null when there are none.
-- notes: Only runs with a median count (a mean-only run's mean is pulled by slow samples, so its
--   rate would not be comparable). The byte models are lower bounds on traffic (each tensor counted once, at the
--   workload's dtype, per-row statistics left out), so achieved_gbps and peak_fraction are lower
--   bounds too. A kernel or pass without a model, a workload without a parameter the model names
--   (or whose parameter is not a number), and a dtype not in the dtypes table all leave the run
--   out: nothing is guessed. Two overhead rules: one point's bytes against the peak (peak_us),
--   and the sweep's shape (flat_latency), which catches launch- and overhead-bound points whose
--   bytes would take over 5 µs at peak, and needs no peak. flat_latency compares medians within
--   one release's sweep only; a sweep of one point, or the largest points of a sweep, are
--   never called flat (their latency may be flat beyond the sizes measured), and a point whose
--   larger neighbours are slowed by something else than bytes (a cache threshold) may pass as
--   bandwidth-bound. Cost: size_growth is worked out per byte count of each sweep (a running
--   minimum from the most bytes down), not per pair of runs, so it grows with the runs, not
--   with the square of a sweep's runs (docs/benchmarks.md, Run BF).
WITH measured AS (
    -- Every column but the sweep rule's, with the point's bound by its bytes alone.
    SELECT
        l.run_id,
        l.kernel,
        l.pass,
        l.implementation,
        l.variant,
        l.workload,
        l.gpu,
        l.family,
        CAST(ROUND(s.bytes) AS BIGINT) AS bytes,
        l.median_us,
        s.bytes / (l.median_us * 1000) AS achieved_gbps,
        s.bytes / (l.p80_us * 1000) AS achieved_gbps_low,
        s.bytes / (l.p20_us * 1000) AS achieved_gbps_high,
        g.memory_bandwidth_gbps AS peak_gbps,
        s.bytes / (l.median_us * 1000) / g.memory_bandwidth_gbps AS peak_fraction,
        s.bytes / (l.median_us * 1000) > g.memory_bandwidth_gbps AS above_peak,
        l.version,
        l.gpu_family,
        s.bytes / (g.memory_bandwidth_gbps * 1000) AS peak_us,
        CASE WHEN g.memory_bandwidth_gbps IS NULL THEN NULL
             WHEN s.bytes / (g.memory_bandwidth_gbps * 1000) < 5 THEN 'overhead'
             ELSE 'bandwidth' END AS peak_bound,
        s.bytes AS exact_bytes
    FROM run_bytes s
    JOIN latencies l ON l.run_id = s.run_id
    LEFT JOIN gpus g ON g.gpu = l.gpu
    WHERE l.status = 'passed' AND l.median_us IS NOT NULL
),
sweep_bytes AS (
    -- Each sweep's byte counts, with the least median at each. A point with no kernel, pass,
    -- implementation, GPU, family or bytes is in no sweep; variant and version may be null
    -- (null matches null, as in GROUP BY and PARTITION BY).
    SELECT kernel, pass, implementation, variant, gpu, family, version, exact_bytes,
           MIN(median_us) AS median_us
    FROM measured
    WHERE kernel IS NOT NULL AND pass IS NOT NULL AND implementation IS NOT NULL
        AND gpu IS NOT NULL AND family IS NOT NULL AND exact_bytes IS NOT NULL
    GROUP BY kernel, pass, implementation, variant, gpu, family, version, exact_bytes
),
least AS (
    -- Per sweep and byte count, the least median among the sweep's points with at least
    -- twice those bytes (null when there is none). Each byte count is in its sweep twice, as
    -- a point (its bytes) and as a question (twice its bytes); from the most bytes down, a
    -- point before a question of the same bytes, the least median so far answers each
    -- question. Worked out per byte count, not per pair of runs: the pairs grow as the square
    -- of a sweep's runs (docs/benchmarks.md, Run BF).
    SELECT kernel, pass, implementation, variant, gpu, family, version,
           asked_for AS exact_bytes, least_us
    FROM (
        SELECT kernel, pass, implementation, variant, gpu, family, version, question,
               asked_for,
               MIN(median_us) OVER (
                   PARTITION BY kernel, pass, implementation, variant, gpu, family, version
                   ORDER BY at_bytes DESC, question
                   ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS least_us
        FROM (
            SELECT kernel, pass, implementation, variant, gpu, family, version,
                   exact_bytes AS at_bytes, 0 AS question, median_us,
                   CAST(NULL AS DOUBLE) AS asked_for
            FROM sweep_bytes
            UNION ALL
            SELECT kernel, pass, implementation, variant, gpu, family, version,
                   2 * exact_bytes, 1, CAST(NULL AS DOUBLE), exact_bytes
            FROM sweep_bytes
        ) asked
    ) ranked
    WHERE question = 1
),
grown AS (
    -- Each point with how much longer the sweep's points with at least twice its bytes take:
    -- the least of their medians over its own (medians are > 0: the least ratio is the
    -- least median's).
    SELECT m.*, q.least_us / m.median_us AS size_growth
    FROM measured m
    LEFT JOIN least q
        ON q.kernel = m.kernel AND q.pass = m.pass AND q.implementation = m.implementation
        AND q.variant IS NOT DISTINCT FROM m.variant AND q.gpu = m.gpu
        AND q.family = m.family AND q.version IS NOT DISTINCT FROM m.version
        AND q.exact_bytes = m.exact_bytes
)
SELECT
    m.run_id,
    m.kernel,
    m.pass,
    m.implementation,
    m.variant,
    m.workload,
    m.gpu,
    m.family,
    m.bytes,
    m.median_us,
    m.achieved_gbps,
    m.achieved_gbps_low,
    m.achieved_gbps_high,
    m.peak_gbps,
    m.peak_fraction,
    m.above_peak,
    m.version,
    m.gpu_family,
    m.peak_us,
    CASE WHEN (m.peak_bound = 'overhead' OR m.size_growth < 1.25) AND m.median_us < 20
             THEN 'overhead'
         WHEN m.peak_bound = 'overhead' OR m.size_growth < 1.25 THEN 'fixed cost'
         ELSE m.peak_bound END AS bound,
    m.size_growth < 1.25 AS flat_latency,
    m.size_growth
FROM grown m
