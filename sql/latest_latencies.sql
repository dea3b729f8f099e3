-- view: latest_latencies
-- purpose: The latest passed latency run of every implementation and variant per kernel, pass, workload, GPU and protocol family: the one rule speedups, remeasured and calibration read.
-- grain: one row per kernel, pass, workload, GPU, protocol family, implementation and variant with at least one passed latency run.
-- sources: latest_runs, protocols, gpus, implementation_roles
-- columns:
--   kernel: kernel benchmarked.
--   pass: timed pass.
--   workload: workload name.
--   gpu: canonical GPU key.
--   family: protocol comparability family.
--   implementation: implementation key.
--   variant: implementation variant, null for none.
--   run_id: the latest passed run of the key: greatest observed_at, runs without a timestamp
--     last, ties broken by the greatest run_id.
--   runs: how many passed latency runs the key has (the latest is used).
--   role: the role this implementation plays in its key (implementation_roles): the role for
--     which it is the most preferred implementation measured in the key (variant-less runs
--     before variants); null when it plays none. With several roles, the first alphabetically.
--   observed_at: the run's observed_at.
--   version: the run's version.
--   gpu_family: the GPU's family from the catalog (gpus.family), the GPU key itself for a GPU
--     not in the catalog (as latencies.gpu_family).
--   median_us: median latency (µs); null when the source gives only a mean.
--   p20_us: 20th percentile (µs), null when not given.
--   p80_us: 80th percentile (µs), null when not given.
--   samples: timed samples, null when unknown.
--   resolution_us: timer resolution / rounding step of the center (µs), null when unknown.
--   spread: the statistics bounding the noise (latencies.spread).
--   low_us: lower end of the spread (µs).
--   high_us: upper end of the spread (µs).
--   evidence: what the spread supports (latencies.evidence).
--   center_us: the run's central latency (µs): the median, else the mean (latencies.center_us).
--   center_statistic: 'median' or 'mean', which statistic center_us is.
--   source: the run's source (runs.source), whose run-to-run noise envelope applies
--     (noise_envelopes).
--   mean_us: the run's mean latency (µs), null when not given.
--   stddev_us: the run's latency standard deviation (µs), null when not given.
-- notes: The latest run is found among the loads' own latest runs (table latest_runs), which
--   gives the same run as ranking every passed run in latencies, at a cost that grows with the
--   keys, not the runs; the family is resolved here because a protocol document may arrive in
--   a later load than its runs. The run's numbers and evidence come from its latest_runs row,
--   which a commit works out with the latencies view's own rule (run_statistics, in µs) from
--   that run's measurements (kidata/store/derived.py), so statistics are not worked out for every
--   run; the gpus catalog is joined here, as it may change after the load. Roles: an implementation_roles row of the run's kernel replaces
--   the '*' rows of the same role; within a key and role, the lowest preference plays it.
--   Cost: a key has one head per load (and protocol of its family) that ran it; one window
--   pass over the heads ranks each key's heads and sums its runs, reading heads once
--   (docs/benchmarks.md, Run BI: a grouping joined back read them four times over, which was
--   most of Spark's analysis of every view above this one).
WITH heads AS (
    SELECT h.*, COALESCE(p.family, h.protocol_id) AS family
    FROM latest_runs h
    LEFT JOIN protocols p ON p.protocol_id = h.protocol_id
),
latest AS (
    -- Each key's newest head (runs without a timestamp last, ties to the greatest run_id) and
    -- the key's passed runs over all its heads, in one pass over heads: both windows share
    -- their partition and order, so engines sort once, and heads is read once (Spark's check
    -- of every view above this one copies each further read of it).
    SELECT *
    FROM (
        SELECT h.*,
            CAST(SUM(h.passed_runs) OVER (
                PARTITION BY h.kernel, h.pass, h.workload, h.gpu, h.family, h.implementation,
                    h.variant
                ORDER BY h.observed_at DESC NULLS LAST, h.run_id DESC
                ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING
            ) AS BIGINT) AS runs,
            ROW_NUMBER() OVER (
                PARTITION BY h.kernel, h.pass, h.workload, h.gpu, h.family, h.implementation,
                    h.variant
                ORDER BY h.observed_at DESC NULLS LAST, h.run_id DESC
            ) AS rn
        FROM heads h
    ) ranked
    WHERE rn = 1
),
kernel_roles AS (
    SELECT DISTINCT kernel, role FROM implementation_roles WHERE kernel <> '*'
),
candidates AS (
    -- Every role each latest row may play, with its preference.
    SELECT l.kernel, l.pass, l.workload, l.gpu, l.family, l.implementation, l.variant,
        r.role, r.preference
    FROM latest l
    JOIN implementation_roles r
        ON r.implementation = l.implementation AND (r.kernel = l.kernel OR r.kernel = '*')
    LEFT JOIN kernel_roles k
        ON k.kernel = l.kernel AND k.role = r.role
    WHERE r.kernel = l.kernel OR k.kernel IS NULL
),
players AS (
    SELECT c.*,
        ROW_NUMBER() OVER (
            PARTITION BY kernel, pass, workload, gpu, family, role
            ORDER BY preference, variant NULLS FIRST
        ) AS role_rank
    FROM candidates c
),
roles AS (
    SELECT kernel, pass, workload, gpu, family, implementation, variant, MIN(role) AS role
    FROM players
    WHERE role_rank = 1
    GROUP BY kernel, pass, workload, gpu, family, implementation, variant
)
SELECT
    l.kernel,
    l.pass,
    l.workload,
    l.gpu,
    l.family,
    l.implementation,
    l.variant,
    l.run_id,
    l.runs,
    r.role,
    l.observed_at,
    l.version,
    COALESCE(g.family, l.gpu) AS gpu_family,
    l.median_us,
    l.p20_us,
    l.p80_us,
    l.samples,
    l.resolution_us,
    l.spread,
    l.low_us,
    l.high_us,
    l.evidence,
    l.center_us,
    l.center_statistic,
    l.source,
    l.mean_us,
    l.stddev_us
FROM latest l
LEFT JOIN gpus g
    ON g.gpu = l.gpu
LEFT JOIN roles r
    ON r.kernel = l.kernel AND r.pass = l.pass AND r.workload = l.workload AND r.gpu = l.gpu
    AND r.family = l.family AND r.implementation = l.implementation
    AND (r.variant = l.variant OR (r.variant IS NULL AND l.variant IS NULL))
