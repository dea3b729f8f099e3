-- view: remeasured
-- purpose: Where one implementation was measured on the same GPU, kernel, pass and workload in two tables (protocol families), do the two numbers agree?
-- grain: one row per pair of protocol families (family_a < family_b) measuring the same implementation and variant on one kernel, pass, workload and GPU.
-- sources: latest_latencies
-- columns:
--   kernel: kernel benchmarked.
--   pass: timed pass.
--   workload: workload name.
--   gpu: canonical GPU key.
--   implementation: implementation measured twice.
--   family_a: the first protocol family (alphabetically).
--   variant_a: variant measured under family_a, null for none.
--   median_us_a: median latency under family_a (µs).
--   family_b: the second protocol family.
--   variant_b: variant measured under family_b, null for none.
--   median_us_b: median latency under family_b (µs).
--   difference_us: median_us_b - median_us_a.
--   relative_difference: median_us_b / median_us_a - 1.
--   run_id_a: the run used under family_a.
--   run_id_b: the run used under family_b.
--   gpu_family: the GPU's family (gpus.family).
-- notes: Only latest runs with a median are paired (medians are compared). A run without a
--   variant is the implementation as shipped, which is its selected
--   schedule, so it pairs with a variant whose name starts with 'selected' (trainkernel's held-out
--   table measures what its calibration table calls 'selected WMMA'); other variants pair only
--   with the same variant name. Only passed runs count, the latest per family and variant
--   (latest_latencies, as in speedups). Different protocols may time different things: the
--   difference is a calibration check between tables, not a speedup.
WITH latest AS (
    SELECT
        l.*,
        CASE WHEN l.variant IS NULL OR LOWER(l.variant) LIKE 'selected%' THEN '(selected)'
             ELSE l.variant END AS variant_key
    FROM latest_latencies l
    WHERE l.median_us IS NOT NULL
)
SELECT
    a.kernel,
    a.pass,
    a.workload,
    a.gpu,
    a.implementation,
    a.family AS family_a,
    a.variant AS variant_a,
    a.median_us AS median_us_a,
    b.family AS family_b,
    b.variant AS variant_b,
    b.median_us AS median_us_b,
    b.median_us - a.median_us AS difference_us,
    b.median_us / a.median_us - 1 AS relative_difference,
    a.run_id AS run_id_a,
    b.run_id AS run_id_b,
    a.gpu_family
FROM latest a
JOIN latest b
    ON a.kernel = b.kernel
    AND a.pass = b.pass
    AND a.workload = b.workload
    AND a.gpu = b.gpu
    AND a.implementation = b.implementation
    AND a.variant_key = b.variant_key
    AND a.family < b.family
