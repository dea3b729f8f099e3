"""Derived tables: facts a commit computes once from the rows it adds, so that queries at
millions of runs need not recompute them.

``latest_runs`` holds, per load, the latest passed latency run of each (kernel, pass, workload,
GPU, protocol, implementation, variant) among the runs that load added, with its numbers and how
many passed latency runs the load added for that key. The ``speedups`` view picks the latest run
per key across all loads from these rows (a few per key) instead of ranking every run: the
latest of the loads' latest runs is the latest run, and the loads' counts add up to the count,
because each run is added by exactly one load. ``protocol_id`` (not the family) is part of the
key because a protocol's family is only known once its document is loaded, possibly later.

Each row also carries the run's version and its latency evidence (``STATISTICS``: samples,
resolution, spread, its ends and what it supports), worked out by the ``run_statistics`` view's
own SQL (:func:`run_statistics_sql`) over the run's measurements, so the ``latest_latencies``
view reads everything from these few rows and never works out statistics for every run.

The rows depend only on the load's own runs and measurements, so adding a load costs time in
proportion to its size, never to the warehouse's.

Each row's latency is the run's center (``CENTER``: its median, else its mean, with which
statistic it is), so runs whose source gives only a mean (KernelBench, old nvbench) have
latest runs too.

Loads written by kidata 0.1 (before the table existed) have no rows, loads written by
kidata 0.2.0-0.2.2 have rows without the ``STATISTICS`` columns, and loads written by 0.2.3
have rows without ``CENTER`` and without their mean-only runs; readers compute these loads'
rows on the fly with the same SQL (:func:`latest_runs_sql`), in DuckDB
(:mod:`kidata.store.snapshot`) and in Spark (:mod:`kidata.query.spark`), so answers never
depend on which version wrote a load.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from kidata.store.durable import fault

if TYPE_CHECKING:
    import duckdb

# The key of a latest run within a load (protocol_id and variant may be null; GROUP/PARTITION
# BY treat nulls as equal, as the speedups view does).
KEY = ("kernel", "pass", "workload", "gpu", "protocol_id", "implementation", "variant")

# The columns of a latest run's evidence, as the latencies view gives them (added in 0.2.3).
STATISTICS = ("version", "samples", "resolution_us", "spread", "low_us", "high_us", "evidence")

# The columns of a latest run's center (added in 0.2.4, when runs whose source gives only a
# mean became latest runs: their center is the mean, as in the latencies view).
CENTER = ("center_us", "center_statistic")

# The columns the verdict rule's noise model reads (added in 0.3.0): the run's source (its
# run-to-run noise envelope is calibrated per source), and its mean and standard deviation
# (with samples, Welch's test on the ratio of two means).
NOISE = ("source", "mean_us", "stddev_us")

# The first kidata version whose commits write latest_runs as this one does: with the
# STATISTICS columns (0.2.3), with runs that have only a latency mean and the CENTER
# columns (0.2.4), with the NOISE columns and the 'median-stddev' spread (0.3.0).
LATEST_RUNS_SINCE = (0, 3, 0)


def run_statistics_sql(measurements: str) -> str:
    """The ``run_statistics`` view's SQL (sql/run_statistics.sql: the one statement of the
    spread and evidence rule) over ``measurements``, a table name or parenthesised query."""
    from kidata.core.viewfiles import load_views

    body, n = re.subn(r"\bFROM measurements\b", f"FROM {measurements}",
                      load_views()["run_statistics"].body)
    if n != 1:  # the view reads its source once; anything else would need a closer look
        raise AssertionError(f"run_statistics reads measurements {n} times, expected once")
    return body


def latest_statistics_sql(latest: str, measurements: str) -> str:
    """The ``STATISTICS`` columns (and ``run_id``) of the runs whose ids are in ``latest``
    (a table name or parenthesised query with a ``run_id`` column), from ``measurements``:
    only those runs' rows are read, then ``run_statistics`` and ``latency_statistics`` (µs)
    apply. ``version`` is not among them (it is a run's column); the run's median, p20 and
    p80 and its ``CENTER`` are."""
    stats = run_statistics_sql(f"(SELECT * FROM {measurements} WHERE metric = 'latency' AND "
                               f"run_id IN (SELECT run_id FROM {latest}))")
    return f"""
        SELECT run_id, median / 1000.0 AS median_us, p20 / 1000.0 AS p20_us,
            p80 / 1000.0 AS p80_us, samples, resolution / 1000.0 AS resolution_us, spread,
            low / 1000.0 AS low_us, high / 1000.0 AS high_us, evidence,
            center / 1000.0 AS center_us, center_statistic, mean / 1000.0 AS mean_us,
            stddev / 1000.0 AS stddev_us
        FROM ({stats}) s
        WHERE metric = 'latency'
    """


def latest_runs_sql(runs: str, measurements: str) -> str:
    """Standard SQL (DuckDB and Spark) giving the ``latest_runs`` rows of every load in
    ``runs``: ``runs`` and ``measurements`` are table names or parenthesised queries. The
    latency columns are defined exactly as in the ``latencies`` view: a run with a latency
    median or mean (its center) is a latency run."""
    key = ", ".join(KEY)
    return f"""
        WITH centered AS (
            SELECT DISTINCT run_id FROM {measurements}
            WHERE metric = 'latency' AND statistic IN ('median', 'mean')
        ),
        passed AS (
            SELECT
                r.load_id, r.kernel, r.pass, r.workload, r.gpu, r.protocol_id,
                r.implementation, r.variant, r.run_id, r.observed_at, r.version, r.source
            FROM {runs} r
            JOIN centered c ON c.run_id = r.run_id
            WHERE r.status = 'passed'
        ),
        ranked AS (
            SELECT passed.*,
                ROW_NUMBER() OVER (PARTITION BY load_id, {key}
                                   ORDER BY observed_at DESC NULLS LAST, run_id DESC) AS rn,
                COUNT(*) OVER (PARTITION BY load_id, {key}) AS passed_runs
            FROM passed
        ),
        latest AS (
            SELECT {key}, run_id, observed_at,
                CAST(passed_runs AS BIGINT) AS passed_runs, load_id, version, source
            FROM ranked
            WHERE rn = 1
        )
        SELECT {", ".join(f"l.{k}" for k in KEY)}, l.run_id, l.observed_at, s.median_us,
            s.p20_us, s.p80_us, l.passed_runs, l.load_id, l.version,
            {", ".join(f"s.{c}" for c in (*STATISTICS, *CENTER) if c != "version")},
            l.source, s.mean_us, s.stddev_us
        FROM latest l
        LEFT JOIN ({latest_statistics_sql("latest", measurements)}) s ON s.run_id = l.run_id
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
    """Whether a load whose marker names ``kidata_version`` may lack its ``latest_runs`` rows
    or their ``STATISTICS``, ``CENTER`` or ``NOISE`` (and lack mean-only runs, or hold the
    spread of a median-and-stddev run as none): written by kidata before 0.3.0, or of unknown
    origin (a marker
    rewritten by ``kidata check --repair``). Readers compute such loads' rows instead of
    trusting the table."""
    parts = re.match(r"^(\d+)\.(\d+)(?:\.(\d+))?", kidata_version or "")
    return parts is None or (int(parts[1]), int(parts[2]), int(parts[3] or 0)) < LATEST_RUNS_SINCE


def write_latest_runs(con: duckdb.DuckDBPyConnection, path: Path, load_id: str) -> int:
    """Write this load's ``latest_runs`` rows (the module docstring says what they are).

    They come from the staged rows of the runs this load adds, which carry their central
    latency (``schema.STAGED_LATENCY``: the median, else the mean), so no join with the
    measurements is needed to find them; only the chosen runs' measurements are read, for
    their numbers and evidence (:func:`kidata.store.latest_statistics_sql`). It gives the rows of
    :func:`kidata.store.derived.latest_runs_sql` over the final tables (``kidata check``
    compares the two)."""
    key = ", ".join(KEY)

    def same(a: str, b: str) -> str:  # protocol_id and variant may be null
        return " AND ".join(f"{a}.{k} IS NOT DISTINCT FROM {b}.{k}" for k in KEY)

    # The latest run: greatest observed_at (none last), then greatest run_id. Found in
    # two steps, each over plain columns: arg_max over a struct took 3.5 s and more than
    # 128 MB of DuckDB memory at 1M runs; these joins take 1.4 s and fit in 96 MB.
    query = f"""
        WITH passed AS (
            SELECT {key}, run_id, observed_at, version, source, _seq
            FROM staged_runs
            WHERE _seq IN (SELECT _seq FROM run_outcome WHERE _outcome = 'added')
                AND status = 'passed' AND _latency_median IS NOT NULL
        ),
        per_key AS (  -- latest time: null when no run of the key has one
            SELECT {key}, count(*) AS n, max(observed_at) AS latest_at
            FROM passed GROUP BY ALL
        ),
        at_latest AS (  -- the runs at that time (all of them when none has a time)
            SELECT p.*, g.n FROM passed p JOIN per_key g
                ON {same("g", "p")} AND p.observed_at IS NOT DISTINCT FROM g.latest_at
        ),
        chosen AS (
            SELECT {key}, max(run_id) AS run_id FROM at_latest GROUP BY ALL
        ),
        latest AS (
            SELECT a.* FROM at_latest a JOIN chosen c ON {same("c", "a")}
                AND c.run_id = a.run_id
        ),
        -- The chosen runs' own measurements (their records', by record number).
        their_measurements AS (
            SELECT * FROM staged_measurements WHERE _seq IN (SELECT _seq FROM latest)
        )
        SELECT {", ".join(f"a.{k}" for k in KEY)}, a.run_id, a.observed_at,
            s.median_us, s.p20_us, s.p80_us, a.n AS passed_runs,
            CAST($load_id AS VARCHAR) AS load_id, a.version,
            {", ".join(f"s.{c}" for c in (*STATISTICS, *CENTER) if c != "version")},
            a.source, s.mean_us, s.stddev_us
        FROM latest a
        LEFT JOIN ({latest_statistics_sql("latest", "their_measurements")}) s
            ON s.run_id = a.run_id
        ORDER BY {", ".join(f"a.{k} NULLS LAST" for k in KEY)}
    """
    from kidata.store.finalize import CLUSTER_BYTES
    from kidata.store.pqwrite import clustered, write_reader
    from kidata.store.schema import TABLES, clustered_keys

    reader = con.sql(query, params={"load_id": load_id}).to_arrow_reader(8192)
    # One GPU per row group, as the load's runs (kidata.store.schema.CLUSTERED).
    return write_reader(path, TABLES["latest_runs"], reader,
                        through=clustered(clustered_keys("latest_runs"), CLUSTER_BYTES),
                        before_write=lambda: fault("write-final:latest_runs"))
