-- view: roofline
-- purpose: How close does each run of a compute-class kernel (matrix multiplies) come to the GPU's published dense 16-bit tensor peak, and what bounds it?
-- grain: one row per passed latency run whose kernel and pass have a FLOP model and whose workload gives every parameter the model needs.
-- sources: run_flops, run_bytes, latencies, runs, workload_parameters, dtypes, gpus
-- columns:
--   run_id: the run.
--   kernel: kernel benchmarked.
--   pass: timed pass.
--   implementation: implementation key.
--   variant: implementation variant, null for none.
--   workload: workload name.
--   gpu: canonical GPU key.
--   gpu_family: the GPU's family (gpus.family).
--   family: protocol comparability family.
--   flops: floating-point operations of the pass = SUM over the model's terms of coefficient x
--     factor_1 x factor_2 x factor_3 x factor_4 (flop_models, kidata/data/flop_models.toml).
--   median_us: median latency (µs).
--   achieved_tflops: flops / (median_us x 10^6), in TFLOP/s.
--   peak_tflops: the GPU's published dense BF16 tensor peak (gpus.bf16_dense_tflops) when the
--     workload's `dtype` parameter is a 2-byte type (bfloat16 or float16, whose dense tensor
--     peaks are equal on these GPUs); null for other dtypes, a workload without `dtype`, or a
--     GPU without a peak.
--   compute_fraction: achieved_tflops / peak_tflops; null when the peak is null.
--   compute_us: the time the flops would take at peak_tflops: flops / (peak_tflops x 10^6) µs.
--   bytes: the run's minimum bytes when its kernel and pass also have a byte model (run_bytes,
--     rounded to whole bytes as in efficiency), else null.
--   arithmetic_intensity: flops / bytes (FLOP per byte), null without bytes.
--   ridge_intensity: the GPU's ridge point, peak_tflops x 10^12 / (memory_bandwidth_gbps x
--     10^9) FLOP per byte; null when either peak is unknown.
--   bound: 'overhead' when the work would take under 5 µs at both peaks (compute_us and the
--     byte time, where known, below 5) and the median is near the launch floor, under 20 µs;
--     'fixed cost' when the work would take under 5 µs but the median is 20 µs or more (as in
--     the efficiency view, neither the work nor launches set it); else 'compute' when
--     arithmetic_intensity >=
--     ridge_intensity, or when there are no bytes (a FLOP model is written for matmul-class
--     work); 'bandwidth' when arithmetic_intensity < ridge_intensity; null when peak_tflops is
--     null.
--   version: release of the implementation or harness (runs.version).
-- notes: FLOP models count matrix multiplies only (2 FLOPs per multiply-add), so
--   achieved_tflops and compute_fraction are lower bounds. A run is left out when its kernel and
--   pass have no model or its workload lacks a parameter the model names: nothing is guessed.
--   Only runs with a median count (as in efficiency).
WITH peaks AS (
    SELECT
        c.run_id,
        c.flops,
        CASE WHEN d.bytes = 2 THEN g.bf16_dense_tflops END AS peak_tflops,
        g.memory_bandwidth_gbps
    FROM run_flops c
    JOIN runs r ON r.run_id = c.run_id
    LEFT JOIN workload_parameters dp ON dp.workload_id = r.workload_id AND dp.name = 'dtype'
    LEFT JOIN dtypes d ON d.name = dp.text
    LEFT JOIN gpus g ON g.gpu = r.gpu
),
measured AS (
    SELECT
        l.run_id, l.kernel, l.pass, l.implementation, l.variant, l.workload, l.gpu,
        l.gpu_family, l.family, l.median_us, l.version,
        p.flops, p.peak_tflops, p.memory_bandwidth_gbps,
        CAST(ROUND(e.bytes) AS BIGINT) AS bytes,
        p.flops / (p.peak_tflops * 1000000) AS compute_us,
        ROUND(e.bytes) / (p.memory_bandwidth_gbps * 1000) AS byte_us,
        CAST(p.flops AS DOUBLE) / ROUND(e.bytes) AS arithmetic_intensity,
        p.peak_tflops * 1000 / p.memory_bandwidth_gbps AS ridge_intensity
    FROM peaks p
    JOIN latencies l ON l.run_id = p.run_id
    LEFT JOIN run_bytes e ON e.run_id = p.run_id
    WHERE l.status = 'passed' AND l.median_us IS NOT NULL
)
SELECT
    run_id,
    kernel,
    pass,
    implementation,
    variant,
    workload,
    gpu,
    gpu_family,
    family,
    flops,
    median_us,
    flops / (median_us * 1000000) AS achieved_tflops,
    peak_tflops,
    flops / (median_us * 1000000) / peak_tflops AS compute_fraction,
    compute_us,
    bytes,
    arithmetic_intensity,
    ridge_intensity,
    CASE
        WHEN peak_tflops IS NULL THEN NULL
        WHEN compute_us < 5 AND (byte_us IS NULL OR byte_us < 5) AND median_us < 20
            THEN 'overhead'
        WHEN compute_us < 5 AND (byte_us IS NULL OR byte_us < 5) THEN 'fixed cost'
        WHEN bytes IS NULL OR arithmetic_intensity >= ridge_intensity THEN 'compute'
        ELSE 'bandwidth'
    END AS bound,
    version
FROM measured
