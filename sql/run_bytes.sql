-- view: run_bytes
-- purpose: How many bytes must each run's kernel pass move at the least, by the byte model of its kernel and pass and its workload's parameters?
-- grain: one row per run whose kernel and pass have a byte model and whose workload gives every parameter the model needs (any status, with or without a latency).
-- sources: runs, byte_models, workload_parameters, dtypes
-- columns:
--   run_id: the run.
--   bytes: minimum bytes the pass moves = SUM over the model's terms of coefficient x element
--     bytes x factor_1 x factor_2 x factor_3 (byte_models; see docs/efficiency.md), not
--     rounded (efficiency rounds it to whole bytes).
-- notes: The numerator of efficiency and the bytes of roofline, kept apart so that each is
--   worked out from the runs and their workloads alone (a few parameters per workload), before
--   any latency is. A kernel or pass without a model, a workload without a parameter the model
--   names (or whose parameter is not a number), and a dtype not in the dtypes table all leave
--   the run out: nothing is guessed.
WITH terms AS (
    SELECT
        r.run_id,
        m.term,
        m.coefficient
            * d.bytes
            * CASE WHEN m.factor_1 IS NULL THEN 1 ELSE f1.value END
            * CASE WHEN m.factor_2 IS NULL THEN 1 ELSE f2.value END
            * CASE WHEN m.factor_3 IS NULL THEN 1 ELSE f3.value END AS term_bytes
    FROM runs r
    JOIN byte_models m ON m.kernel = r.kernel AND m.pass = r.pass
    LEFT JOIN workload_parameters dp
        ON dp.workload_id = r.workload_id AND dp.name = m.dtype_parameter
    LEFT JOIN dtypes d ON d.name = COALESCE(m.dtype, dp.text)
    LEFT JOIN workload_parameters f1 ON f1.workload_id = r.workload_id AND f1.name = m.factor_1
    LEFT JOIN workload_parameters f2 ON f2.workload_id = r.workload_id AND f2.name = m.factor_2
    LEFT JOIN workload_parameters f3 ON f3.workload_id = r.workload_id AND f3.name = m.factor_3
)
SELECT run_id, SUM(term_bytes) AS bytes
FROM terms
GROUP BY run_id
HAVING COUNT(term_bytes) = COUNT(*)
