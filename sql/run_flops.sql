-- view: run_flops
-- purpose: How many floating-point operations does each run's kernel pass do, by the FLOP model of its kernel and pass and its workload's parameters?
-- grain: one row per run whose kernel and pass have a FLOP model and whose workload gives every parameter the model needs (any status, with or without a latency).
-- sources: runs, flop_models, workload_parameters
-- columns:
--   run_id: the run.
--   flops: floating-point operations of the pass = SUM over the model's terms of coefficient x
--     factor_1 x factor_2 x factor_3 x factor_4 (flop_models, kidata/data/flop_models.toml).
-- notes: The numerator of roofline, kept apart so that it is worked out from the runs and their
--   workloads alone, before any latency is. FLOP models count matrix multiplies only (2 FLOPs
--   per multiply-add). A kernel or pass without a model, or a workload without a parameter the
--   model names, leaves the run out: nothing is guessed.
WITH terms AS (
    SELECT
        r.run_id,
        m.term,
        m.coefficient
            * CASE WHEN m.factor_1 IS NULL THEN 1 ELSE f1.value END
            * CASE WHEN m.factor_2 IS NULL THEN 1 ELSE f2.value END
            * CASE WHEN m.factor_3 IS NULL THEN 1 ELSE f3.value END
            * CASE WHEN m.factor_4 IS NULL THEN 1 ELSE f4.value END AS term_flops
    FROM runs r
    JOIN flop_models m ON m.kernel = r.kernel AND m.pass = r.pass
    LEFT JOIN workload_parameters f1 ON f1.workload_id = r.workload_id AND f1.name = m.factor_1
    LEFT JOIN workload_parameters f2 ON f2.workload_id = r.workload_id AND f2.name = m.factor_2
    LEFT JOIN workload_parameters f3 ON f3.workload_id = r.workload_id AND f3.name = m.factor_3
    LEFT JOIN workload_parameters f4 ON f4.workload_id = r.workload_id AND f4.name = m.factor_4
)
SELECT run_id, SUM(term_flops) AS flops
FROM terms
GROUP BY run_id
HAVING COUNT(term_flops) = COUNT(*)
