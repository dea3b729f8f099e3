-- view: calibration
-- purpose: Which variant (schedule) of an implementation is fastest per workload, and how far is each from the selected one?
-- grain: one row per variant of an implementation, per kernel, pass, workload, GPU and protocol family (only runs with a variant).
-- sources: latest_latencies
-- columns:
--   kernel: kernel benchmarked.
--   pass: timed pass.
--   workload: workload name.
--   gpu: canonical GPU key.
--   family: protocol comparability family (for trainkernel: trainkernel_h100_calibration).
--   implementation: implementation whose variants are ranked.
--   variant: the variant (schedule).
--   schedule_rank: 1 for the fastest median; equal medians share a rank and the next rank is
--     skipped (RANK()).
--   schedules: number of variants ranked together.
--   median_us: the variant's median latency (µs).
--   is_selected: true for the selected variant (a name starting with 'selected').
--   selected_variant: the group's selected variant; null when the group has none or several.
--   selected_us: the selected variant's median latency (µs); null as selected_variant.
--   relative_to_selected: median_us / selected_us; above 1 means slower than the selected
--     variant; null when there is no single selected variant.
--   fastest_us: the smallest median in the group (µs).
--   run_id: the run used for this variant.
--   gpu_family: the GPU's family (gpus.family).
-- notes: Only variants whose latest run has a median are ranked (medians are compared). The
--   selected schedule is the variant whose name starts with 'selected' (case-insensitive),
--   as trainkernel marks it ('selected WMMA'); a group needs exactly one such variant for the
--   relative columns. Only passed runs count; when a variant has several runs, its latest is used
--   (latest_latencies: greatest observed_at, runs without a timestamp last, then the greatest
--   run_id), as in speedups.
--   Variants are never ranked across GPUs, passes, workloads or protocol families.
WITH latest AS (
    SELECT
        l.*,
        CASE WHEN LOWER(l.variant) LIKE 'selected%' THEN TRUE ELSE FALSE END AS is_selected
    FROM latest_latencies l
    WHERE l.variant IS NOT NULL AND l.median_us IS NOT NULL
),
grouped AS (
    SELECT
        l.*,
        RANK() OVER (
            PARTITION BY kernel, pass, workload, gpu, family, implementation
            ORDER BY median_us
        ) AS schedule_rank,
        CAST(COUNT(*) OVER (
            PARTITION BY kernel, pass, workload, gpu, family, implementation
        ) AS BIGINT) AS schedules,
        SUM(CASE WHEN is_selected THEN 1 ELSE 0 END) OVER (
            PARTITION BY kernel, pass, workload, gpu, family, implementation
        ) AS selected_count,
        MAX(CASE WHEN is_selected THEN variant END) OVER (
            PARTITION BY kernel, pass, workload, gpu, family, implementation
        ) AS any_selected_variant,
        MAX(CASE WHEN is_selected THEN median_us END) OVER (
            PARTITION BY kernel, pass, workload, gpu, family, implementation
        ) AS any_selected_us,
        MIN(median_us) OVER (
            PARTITION BY kernel, pass, workload, gpu, family, implementation
        ) AS fastest_us
    FROM latest l
)
SELECT
    kernel,
    pass,
    workload,
    gpu,
    family,
    implementation,
    variant,
    CAST(schedule_rank AS BIGINT) AS schedule_rank,  -- RANK is INT in Spark: one type
    CAST(schedules AS BIGINT) AS schedules,
    median_us,
    is_selected,
    CASE WHEN selected_count = 1 THEN any_selected_variant END AS selected_variant,
    CASE WHEN selected_count = 1 THEN any_selected_us END AS selected_us,
    CASE WHEN selected_count = 1 THEN median_us / any_selected_us END AS relative_to_selected,
    fastest_us,
    run_id,
    gpu_family
FROM grouped
