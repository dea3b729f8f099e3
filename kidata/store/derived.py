"""Derived tables: facts a commit computes once from the rows it adds, so that queries at
millions of runs need not recompute them.

``latest_runs`` holds, per load, the latest passed latency run of each (kernel, pass, workload,
GPU, protocol, implementation, variant) among the runs that load added, with its numbers and how
many passed latency runs the load added for that key. The ``speedups`` view picks the latest run
per key across all loads from these rows (a few per key) instead of ranking every run: the
latest of the loads' latest runs is the latest run, and the loads' counts add up to the count,
because each run is added by exactly one load. ``protocol_id`` (not the family) is part of the
key because a protocol's family is only known once its document is loaded, possibly later.

The rows depend only on the load's own runs and measurements, so adding a load costs time in
proportion to its size, never to the warehouse's.

Loads written by kidata 0.1 (before the table existed) have no rows; readers compute theirs on
the fly with the same SQL (:func:`latest_runs_sql`), in DuckDB (:mod:`kidata.store.snapshot`) and in
Spark (:mod:`kidata.query.spark`), so answers never depend on which version wrote a load.
"""

from __future__ import annotations

import re

# The key of a latest run within a load (protocol_id and variant may be null; GROUP/PARTITION
# BY treat nulls as equal, as the speedups view does).
KEY = ("kernel", "pass", "workload", "gpu", "protocol_id", "implementation", "variant")

# The first kidata version whose commits write latest_runs.
LATEST_RUNS_SINCE = (0, 2)


def latest_runs_sql(runs: str, measurements: str) -> str:
    """Standard SQL (DuckDB and Spark) giving the ``latest_runs`` rows of every load in
    ``runs``: ``runs`` and ``measurements`` are table names or parenthesised queries. The
    latency columns are defined exactly as in the ``latencies`` view."""
    key = ", ".join(KEY)
    return f"""
        WITH passed AS (
            SELECT
                r.load_id, r.kernel, r.pass, r.workload, r.gpu, r.protocol_id,
                r.implementation, r.variant, r.run_id, r.observed_at,
                med.value / 1000.0 AS median_us,
                p20.value / 1000.0 AS p20_us,
                p80.value / 1000.0 AS p80_us
            FROM {runs} r
            JOIN {measurements} med
                ON med.run_id = r.run_id AND med.metric = 'latency'
                AND med.statistic = 'median'
            LEFT JOIN {measurements} p20
                ON p20.run_id = r.run_id AND p20.metric = 'latency' AND p20.statistic = 'p20'
            LEFT JOIN {measurements} p80
                ON p80.run_id = r.run_id AND p80.metric = 'latency' AND p80.statistic = 'p80'
            WHERE r.status = 'passed'
        ),
        ranked AS (
            SELECT passed.*,
                ROW_NUMBER() OVER (PARTITION BY load_id, {key}
                                   ORDER BY observed_at DESC NULLS LAST, run_id DESC) AS rn,
                COUNT(*) OVER (PARTITION BY load_id, {key}) AS passed_runs
            FROM passed
        )
        SELECT {key}, run_id, observed_at, median_us, p20_us, p80_us,
            CAST(passed_runs AS BIGINT) AS passed_runs, load_id
        FROM ranked
        WHERE rn = 1
    """


def latest_runs_of(loads: str) -> str:
    """:func:`latest_runs_sql` for the loads whose ids are in table ``loads`` (column
    ``load_id``), over the tables ``runs`` and ``measurements``."""
    return latest_runs_sql(
        f"(SELECT * FROM runs WHERE load_id IN (SELECT load_id FROM {loads}))", "measurements")


def underived(loads: list[tuple[str, str | None]]) -> list[str]:
    """The ids, among ``(load_id, kidata_version)`` pairs, of the loads whose ``latest_runs``
    rows readers must compute (:func:`is_before_latest_runs`)."""
    return [load_id for load_id, version in loads if is_before_latest_runs(version)]


def is_before_latest_runs(kidata_version: str | None) -> bool:
    """Whether a load whose marker names ``kidata_version`` may lack its ``latest_runs`` rows:
    written by kidata 0.1, or of unknown origin (a marker rewritten by ``kidata check
    --repair``). Readers compute such loads' rows instead of trusting the table."""
    parts = re.match(r"^(\d+)\.(\d+)", kidata_version or "")
    return parts is None or (int(parts[1]), int(parts[2])) < LATEST_RUNS_SINCE
