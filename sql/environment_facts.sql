-- view: environment_facts
-- purpose: The software facts each execution environment records (framework, CUDA, driver and Triton versions), one column each, so that a step between two results can name what changed around the code.
-- grain: one row per environment (environments).
-- sources: environments
-- columns:
--   environment_id: the environment's digest (environments.environment_id).
--   gpu: canonical GPU key.
--   torch: the PyTorch version, from spec.software.torch (or spec.software.pytorch); null
--     when not recorded.
--   cuda: the CUDA version, from spec.software.cuda; null when not recorded.
--   driver: the GPU driver version, from spec.software.driver; null when not recorded.
--   triton: the Triton version, from spec.software.triton; null when not recorded.
-- notes: kernelindex documents carry these facts in their ExecutionEnvironment's spec.software;
--   the field's formats take them from `kidata load --set torch=... --set cuda=... --set
--   driver=... --set triton=...` (the environment document kidata builds records them, so
--   its digest differs when they do). A fact is read from the stored spec.software text (JSON,
--   as kidata writes it: no spaces) when its value is a string or a number; a nested value
--   reads as null. The pattern functions used (regexp_extract, NULLIF) are the same in DuckDB
--   and Spark.
SELECT
    environment_id,
    gpu,
    COALESCE(NULLIF(regexp_extract(software, '"torch":"?([^",{}]*)', 1), ''),
             NULLIF(regexp_extract(software, '"pytorch":"?([^",{}]*)', 1), '')) AS torch,
    NULLIF(regexp_extract(software, '"cuda":"?([^",{}]*)', 1), '') AS cuda,
    NULLIF(regexp_extract(software, '"driver":"?([^",{}]*)', 1), '') AS driver,
    NULLIF(regexp_extract(software, '"triton":"?([^",{}]*)', 1), '') AS triton
FROM environments
