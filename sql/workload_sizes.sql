-- view: workload_sizes
-- purpose: Which numeric parameter does each workload sweep, and at what value, so that workloads sort and plot by size instead of by name?
-- grain: one row per workload and swept parameter. A parameter is swept when the workload has a neighbour: another workload of the same kernel with the same parameter names that differs from it in that parameter only, and both values are numbers.
-- sources: workloads, workload_parameters
-- columns:
--   workload_id: the workload (workloads.workload_id).
--   kernel: kernel the workload is for.
--   workload: workload name, as in runs.workload and latencies.workload.
--   parameter: name of the swept parameter (workload_parameters.name), e.g. V for Liger's
--     `vocab4096-batch8-seq2048`.
--   size: the workload's value of that parameter (workload_parameters.value), a number.
--   neighbours: how many workloads of the kernel differ from this one in this parameter only.
-- notes: Liger's sources name the swept parameter (x_name); kidata finds it from the parameters
--   alone so that every source, and every engine, gets the same answer without parsing JSON. A
--   workload alone on its sweep (no neighbour), or without numeric parameters (the seeds'
--   `tiny-online`, `small`, ...), has no row: it has no size to sort by, and nothing is guessed.
--   A workload at the crossing of two sweeps (T swept at E = 128, E swept at T = 1024) has one
--   row per sweep.
WITH params AS (
    SELECT w.kernel, p.workload_id, p.name, p.value, p.text
    FROM workload_parameters p
    JOIN workloads w ON w.workload_id = p.workload_id
),
counts AS (
    SELECT workload_id, COUNT(*) AS names
    FROM params
    GROUP BY workload_id
),
pairs AS (
    SELECT
        a.workload_id AS workload_id,
        b.workload_id AS other_id,
        COUNT(*) AS shared,
        SUM(CASE WHEN a.value = b.value OR a.text = b.text THEN 0 ELSE 1 END) AS differing
    FROM params a
    JOIN params b
        ON b.kernel = a.kernel AND b.name = a.name AND b.workload_id <> a.workload_id
    GROUP BY a.workload_id, b.workload_id
),
neighbours AS (
    SELECT pr.workload_id, pr.other_id
    FROM pairs pr
    JOIN counts ca ON ca.workload_id = pr.workload_id
    JOIN counts cb ON cb.workload_id = pr.other_id
    WHERE pr.differing = 1 AND pr.shared = ca.names AND pr.shared = cb.names
),
swept AS (
    SELECT a.workload_id, a.name AS parameter, a.value AS size, COUNT(*) AS neighbours
    FROM neighbours n
    JOIN params a ON a.workload_id = n.workload_id
    JOIN params b ON b.workload_id = n.other_id AND b.name = a.name
    WHERE a.value IS NOT NULL AND b.value IS NOT NULL AND a.value <> b.value
    GROUP BY a.workload_id, a.name, a.value
)
SELECT
    s.workload_id,
    w.kernel,
    w.name AS workload,
    s.parameter,
    s.size,
    s.neighbours
FROM swept s
JOIN workloads w ON w.workload_id = s.workload_id
