-- view: series_context
-- purpose: series_context read from the tables step_context and step_edits: what a session defines instead of sql/series_context.sql when every committed load stored its steps there (kidata/store/contexts.py), the same rows without working out every series.
-- grain: as series_context: one row per passed run with a timestamp and per metric it has a median or a mean of.
-- sources: step_context, step_edits, gpus
-- notes: A step_context row holds unless a step_edits 'void' row names it (its run_id,
--   metric and load_id: a later load changed the step, or it is no more). points (the
--   series' length, which every new result of the series changes) is the sum of the series'
--   step_edits 'count' rows, and gpu_family comes from the reference table gpus, as
--   series_context works it out. Both joins read step_edits, whose rows are as few as the
--   changes: an engine builds its hash tables from it, not from the steps (step_context
--   holds steps only, so that no filter of this body shrinks an engine's estimate of their
--   number; a query's own filter on a kernel or GPU does, so the complete writers are a
--   filter on their few load ids, never a semi-join an engine could build from the steps). A
--   session defines this body only when every load in loads has a step_edits 'covered' row
--   and it reads the warehouse as it is now (no --as-of window); kidata check compares the
--   rows with series_context computed afresh. Each writer's rows count only while all the
--   steps it wrote are there (its 'wrote' row): a query that lists the two tables' files
--   while a load stores its steps sees them as they were before that load, not half of its
--   changes.
WITH writers AS (
    -- The writers whose steps are all there: their steps, voids and counts apply.
    SELECT w.load_id
    FROM step_edits w
    LEFT JOIN (SELECT load_id, COUNT(*) AS n FROM step_context GROUP BY load_id) c
        ON c.load_id = w.load_id
    WHERE w.kind = 'wrote' AND w.points = COALESCE(c.n, 0)
)
SELECT
    s.kernel, s.pass, s.implementation, s.variant, s.workload, s.gpu, s.family, s.metric,
    s.unit, COALESCE(g.family, s.gpu) AS gpu_family, s.step, c.points,
    s.run_id, s.previous_run_id, s.observed_at, s.previous_observed_at, s.version,
    s.previous_version, s.source, s.previous_source, s.environment_id,
    s.previous_environment_id, s.median, s.previous_median, s.p20, s.p80, s.previous_p20,
    s.previous_p80, s.spread, s.previous_spread, s.evidence, s.previous_evidence, s.center,
    s.previous_center, s.center_statistic, s.previous_center_statistic, s.samples,
    s.previous_samples, s.log_variance, s.previous_log_variance, s.wide_low, s.wide_high,
    s.previous_wide_low, s.previous_wide_high, s.has_spread, s.previous_has_spread,
    s.half_step, s.previous_half_step, s.size_decade, s.previous_size_decade, s.log_change,
    s.same_center, s.same_version, s.together_implementations, s.together_log_change,
    s.session_workloads, s.session_log_median, s.echo_up, s.echo_down
FROM step_context s
LEFT JOIN (
    SELECT run_id, metric, of_load FROM step_edits
    WHERE kind = 'void' AND load_id IN (SELECT load_id FROM writers)
) v
    ON v.of_load = s.load_id AND v.run_id = s.run_id AND v.metric = s.metric
LEFT JOIN (
    SELECT kernel, pass, implementation, variant, workload, gpu, family, metric,
        CAST(SUM(points) AS BIGINT) AS points
    FROM step_edits
    WHERE kind = 'count' AND load_id IN (SELECT load_id FROM writers)
    GROUP BY kernel, pass, implementation, variant, workload, gpu, family, metric
) c
    ON c.kernel = s.kernel AND c.pass = s.pass AND c.implementation = s.implementation
    AND c.variant IS NOT DISTINCT FROM s.variant AND c.workload = s.workload
    AND c.gpu = s.gpu AND c.family IS NOT DISTINCT FROM s.family AND c.metric = s.metric
LEFT JOIN gpus g ON g.gpu = s.gpu
WHERE v.run_id IS NULL
    -- A filter on the writers' few load ids, not a semi-join: a query that restricts the
    -- steps (a kernel, a GPU) shrank DuckDB's estimate of them below its estimate of the
    -- writers (a GROUP BY of every step), and it built the join's hash table from the steps,
    -- every column, instead: `kidata report -k rms_norm` ran out of the default 300MB at 5M
    -- runs (docs/benchmarks.md, Run AT).
    AND array_contains((SELECT array_agg(load_id) FROM writers), s.load_id)
