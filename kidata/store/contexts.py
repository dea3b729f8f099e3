"""Stored steps: every step of every latency and memory series, kept per load.

``sql/series_context.sql`` works out each series' steps (each result with its previous one,
its place in the series) and each step's context (how the steps measured with it moved): a
window over every result and self-joins within each kernel, pass, GPU, family and metric.
At 1M runs that is most of a fresh ``kidata regressions``' 7 s and 2.5 GB (docs/benchmarks.md,
Runs AH and AQ). A step's row depends only on the results of its group (kernel, pass, GPU,
family, metric), but for ``points`` (the series' length) and ``gpu_family`` (reference
data), which readers add.

So, from ``KIDATA_CONTEXTS_AT`` runs on, every load stores, after its commit and under the
writer lock (:func:`store`), the rows of the groups it touched (the kernels, passes and GPUs
it added runs to, enriched runs of or gave a protocol family) that differ from the stored
ones: in ``step_context``, one file tagged with its id, its new and changed steps; then in
``step_edits``, a ``'void'`` row for each stored step it changed or that is no more, a
``'count'`` row per series whose length changed, a ``'covered'`` row saying the load's
steps are stored and a ``'wrote'`` row saying how many steps it wrote (its rows count only
while a reader sees them all). Rows are never rewritten in place, ``step_context`` holds
steps only and ``step_edits`` as many rows as there are changes, so that readers join them
cheaply (DuckDB builds a join's hash table from the side it estimates smaller:
docs/architecture.md). A load that only adds runs to a group works out the group's tail, not
its history: the steps from an hour before its first run there (:data:`TAIL_KEPT`). A
session reads ``series_context`` (and ``rerun_changes``) from these rows
(``sql/stored/``) only when every committed load has its ``'covered'`` row
(:func:`readable`): a load of an older
kidata, of a warehouse under the threshold, or one that crashed after its commit leaves the
tables incomplete, and the next writer that stores steps computes them all again
(:func:`derive`, one file per table replacing their files). ``kidata unload`` empties them
(results leave their groups) and stores every step again; ``kidata compact`` keeps the rows
in use in one file each (:func:`rebuild`); ``kidata check`` computes every step afresh and
compares (:func:`check`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from kidata.core import engine, viewfiles
from kidata.core.sql import quote_literal
from kidata.errors import WarehouseError
from kidata.store import durable, reference, schema, snapshot
from kidata.store.layout import Layout
from kidata.store.schema import COLUMNS, DUCKDB_TYPES, FLOAT64

if TYPE_CHECKING:
    from kidata.store.pqwrite import GroupedWriter

TABLE = "step_context"
EDITS = "step_edits"
VIEW = "series_context"
# What series_context and the views under it read, and the loads a 'covered' row names.
TABLES_READ = ("runs", "measurements", "protocols", "loads", TABLE, EDITS)
REFERENCE_READ = ("gpus",)


# Runs per pass of the computation (a few kernels, passes and GPUs at a time): what bounds
# the memory of storing, rebuilding and checking steps (one pass over 1M runs: 4.2 GB).
CHUNK_RUNS = 50_000
# Runs per pass of a rebuild (:func:`rebuild`), which copies the steps in use and computes
# none; each pass reads the stored steps. At 10M runs with 1.7M voids: 50k runs per pass
# 141 s and 500 MB, 200k 100 s and 600 MB, 1M 28 s and 700 MB, all at once 58 s and 0.97 GB
# (docs/benchmarks.md, Run AW).
REBUILD_RUNS = 200_000
# Rows of steps DuckDB hands over at a time. With 65,536 a rebuild of 1M runs' steps peaked at
# ~500 MiB (each pass's batches ~230 MiB over the process), with 8,192 at ~360, the same time
# (docs/benchmarks.md, Run BD).
BATCH_ROWS = 8192
# What bounds a query session's pass (:func:`compute`) too: the pairs of steps its contexts
# join and take medians of grow as the square of the results of one implementation measured
# together, estimated per kernel, pass and GPU as the sum of the squared counts of the passed
# runs of each implementation and variant in each clock hour. On benchmarks/generate.py's data
# (~80 workloads a session) 50k runs are ~1M such pairs: 400 MB resident under the default
# 300MB limit; 100k spilled (5x the time), 200k ran out of memory.
CHUNK_PAIRS = 1_000_000
PAIRS_SQL = """
    SELECT kernel, pass, gpu, sum(n) AS runs, sum(n * n) AS pairs FROM (
        SELECT kernel, pass, gpu, count(*) AS n FROM runs
        WHERE status = 'passed' AND observed_at IS NOT NULL
        GROUP BY kernel, pass, gpu, implementation, variant, date_trunc('hour', observed_at)
    ) GROUP BY ALL ORDER BY ALL"""

# A load that only adds runs (none of its groups has a run it enriched or a run of another
# load whose protocol it gave) changes no step of a group measured over an hour before its
# first run there (``since``): a step's own row reads its series up to it, its context the
# steps of its group within an hour of it. So it works out the steps from TAIL_KEPT before
# ``since`` on, which read the results from TAIL_READ before it (the contexts' neighbours) and
# each series' last result before those (the steps' previous results), whose stored step
# number gives the others theirs. At 1.9M runs in 95 loads, computing the touched groups'
# whole series took ~27 s of a 29 s load (docs/benchmarks.md, Run BK).
TAIL_KEPT = "INTERVAL 1 HOUR"
TAIL_READ = "INTERVAL 2 HOUR"

# The stored columns a step has (every one but load_id), and a series' key.
STEP_COLUMNS = tuple(c.name for c in COLUMNS[TABLE] if c.name != "load_id")
SERIES = ("kernel", "pass", "implementation", "variant", "workload", "gpu", "family", "metric")
# series_context's columns, as check() compares them (floats within 1e-9 of the larger, see
# :func:`agree`).
FLOATS = tuple(c.name for c in COLUMNS[TABLE] if c.type == FLOAT64)
# The float columns that are sums over other steps, with the absolute difference two
# computations of them may show whatever their value: AVG adds in the order DuckDB's threads
# and spills give it, so a mean of log changes that nearly cancel (|mean| < 1e-7: 49 of the
# 10M-run warehouse's steps) differs in its last bits relative to its inputs (~1e-17), not to
# itself. Log changes of benchmarks are well under 1, so 1e-12 is far below any real change.
SUMMED = {"together_log_change": 1e-12}


def agree(column: str, a: str, b: str) -> str:
    """SQL: the values of ``column`` (a step_context column) in the rows aliased ``a`` and
    ``b`` are the same step's, as :func:`check` judges: equal, nulls included; a float within
    1e-9 of the larger magnitude, or within :data:`SUMMED`'s absolute noise."""
    x, y = f"{a}.{column}", f"{b}.{column}"
    if column not in FLOATS:
        return f"{x} IS NOT DISTINCT FROM {y}"
    within = f"abs({x} - {y}) <= 1e-9 * greatest(abs({x}), abs({y}))"
    if column in SUMMED:
        within += f" OR abs({x} - {y}) <= {SUMMED[column]!r}"
    return f"({x} IS NOT DISTINCT FROM {y} OR coalesce({within}, FALSE))"

# Whether every committed load has its steps stored: the stored rows are then series_context.
READABLE_SQL = (f"SELECT EXISTS (SELECT 1 FROM {EDITS} WHERE kind = 'covered') AND NOT EXISTS "
                f"(SELECT 1 FROM loads WHERE load_id NOT IN "
                f"(SELECT load_id FROM {EDITS} WHERE kind = 'covered'))")


def _in_use_sql(mine: Callable[[str], str] = lambda alias: "TRUE",
                steps: Callable[[str], str] | None = None) -> str:
    """The stored steps in use (every column, load_id included), as the stored series_context
    takes them: those of writers whose steps are all there, that no such writer voided; only
    those (and only the voids) ``mine(alias)`` (a condition on the row ``alias``) keeps, and
    of the steps only those ``steps(alias)`` keeps (by default ``mine``).
    The writers are a constant list, never a semi-join an engine could build from the steps
    (sql/stored/series_context.sql says why)."""
    written = "array_contains((SELECT array_agg(load_id) FROM _writers), {}.load_id)"
    return f"""
    SELECT s.* FROM {TABLE} s
    LEFT JOIN (
        SELECT run_id, metric, of_load FROM {EDITS} e
        WHERE e.kind = 'void' AND {mine('e')} AND {written.format('e')}
    ) v ON v.of_load = s.load_id AND v.run_id = s.run_id AND v.metric = s.metric
    WHERE v.run_id IS NULL AND {(steps or mine)('s')} AND {written.format('s')}"""


WRITERS_SQL = f"""
    SELECT w.load_id FROM {EDITS} w
    LEFT JOIN (SELECT load_id, COUNT(*) AS n FROM {TABLE} GROUP BY load_id) c
        ON c.load_id = w.load_id
    WHERE w.kind = 'wrote' AND w.points = COALESCE(c.n, 0)"""


def readable(con: Any) -> bool:
    """Whether ``series_context`` can be read from the stored steps on ``con`` (DuckDB, or a
    Spark session), whose ``loads`` and ``step_edits`` are the snapshot's: every committed
    load has its 'covered' row."""
    if isinstance(con, duckdb.DuckDBPyConnection):
        return bool(con.execute(READABLE_SQL).fetchall()[0][0])
    return bool(con.sql(READABLE_SQL).collect()[0][0])


def stored_view() -> viewfiles.View:
    """The ``series_context`` a session defines when :func:`readable`
    (``sql/stored/series_context.sql``)."""
    return viewfiles.stored_views()[VIEW]


def _in_touched(alias: str, table: str = "_touched", margin: str | None = None,
                before: str | None = None) -> str:
    """Whether the row ``alias`` is of a kernel, pass and GPU in ``table``; with ``margin`` (an
    interval), within its tail too: observed at or after ``_touched``'s ``since`` less
    ``margin``, or any time where ``since`` is null (the whole group); with ``before`` (an
    interval), observed before ``since`` less ``before`` (never where ``since`` is null)."""
    tail = ("" if margin is None else
            f" AND (t.since IS NULL OR {alias}.observed_at >= t.since - {margin})")
    if before is not None:
        tail += f" AND {alias}.observed_at < t.since - {before}"
    return (f"EXISTS (SELECT 1 FROM {table} t WHERE t.kernel = {alias}.kernel "
            f"AND t.pass = {alias}.pass AND t.gpu = {alias}.gpu{tail})")


def define_views(con: duckdb.DuckDBPyConnection, root: Path) -> None:
    """Define, on ``con`` (a fresh connection), the committed snapshot's tables and the views
    ``series_context`` reads, with ``runs`` (and ``measurements``) holding only the runs of the
    kernels, passes and GPUs in the temporary table ``_touched``, empty until :func:`chunks`
    fills it: a step's row depends only on its group's runs, and a group lies within one
    kernel, pass and GPU, so computing a few of them at a time gives their rows exactly.
    ``_current`` is the stored steps in use of those kernels, passes and GPUs (their columns
    and load_id), ``_stored`` the stored series_context of them (points and gpu_family too)."""
    snapshot.define(con, root, tables=TABLES_READ)
    reference.define(con, root, REFERENCE_READ)
    con.execute("CREATE TEMP TABLE _touched "
                "(kernel VARCHAR, pass VARCHAR, gpu VARCHAR, since TIMESTAMPTZ)")
    con.execute(f"CREATE TEMP TABLE _before ({', '.join(f'{k} VARCHAR' for k in SERIES)}, "
                "run_id VARCHAR, step BIGINT, observed_at TIMESTAMPTZ)")
    con.execute("ALTER VIEW runs RENAME TO _all_runs")
    con.execute("ALTER VIEW measurements RENAME TO _all_measurements")
    con.execute(f"CREATE VIEW _writers AS {WRITERS_SQL}")
    _touched_views(con, [])  # runs and measurements among them
    views = viewfiles.load_views()
    for name in viewfiles.with_dependencies([VIEW]):
        con.execute(f"CREATE VIEW {name} AS {views[name].body}")
    con.execute(f"CREATE VIEW _in_use AS {_in_use_sql()}")
    # The stored body over the touched steps only (filtered before its joins, within the
    # connection's memory limit).
    body = stored_view().body
    if body.count(f"FROM {TABLE} s\n") != 1:
        raise AssertionError(f"{stored_view().path} reads {TABLE} other than once as s")
    con.execute("CREATE VIEW _stored AS " + body.replace(f"FROM {TABLE} s\n",
                                                         "FROM _touched_steps s\n"))


def _touched_views(con: duckdb.DuckDBPyConnection, batch: list[tuple],
                   first: datetime | None = None) -> None:
    """(Re)define the views of :func:`define_views` that hold the kernels, passes and GPUs in
    ``_touched`` (``batch``: the same, whose kernels are also named as constants, so that
    DuckDB filters the scans of runs and of the stored steps and edits, and skips their row
    groups of other kernels, instead of reading every row of them for each batch): ``runs``,
    ``_touched_steps`` and ``_current``, the touched steps in use, and ``_current_tail``,
    those of the tails (:data:`TAIL_KEPT`). ``_current`` joins only the touched groups'
    voids: joined with every void of the warehouse, each batch built a hash table of all of
    them (1.7M at 10M runs, spilled), and a rebuild peaked at ~0.9 GB.

    ``first``: the earliest ``since`` of the batch, when each of its groups has one (a load
    that only adds runs to them): ``_before`` then holds each series' last stored step before
    its tail, and ``runs`` is a table of the tails' runs and those steps' (named by constant
    bounds of time and of their loads' ids too, which skip the row groups of the runs,
    measurements and stored steps of other times: filtered only by joins, the whole history
    was read, ~5 s of a 10 s load at 2M runs). A run's measurements carry its load's id: the
    load that added the run wrote them, and a richer record replaces the run's row only."""
    kernels = _kernel_list(batch)

    def mine(alias: str) -> str:
        return f"{alias}.kernel IN ({kernels}) AND {_in_touched(alias)}"

    con.execute(f"CREATE OR REPLACE VIEW _touched_steps AS SELECT * FROM {TABLE} s "
                f"WHERE {mine('s')}")
    con.execute(f"CREATE OR REPLACE VIEW _current AS {_in_use_sql(mine)}")
    con.execute("DELETE FROM _before")
    if first is None:
        con.execute(f"CREATE OR REPLACE VIEW runs AS SELECT r.* FROM _all_runs r "
                    f"WHERE {mine('r')}")
        con.execute("CREATE OR REPLACE VIEW measurements AS SELECT m.* FROM _all_measurements m "
                    "WHERE m.run_id IN (SELECT run_id FROM runs)")
        con.execute(f"CREATE OR REPLACE VIEW _current_tail AS SELECT * FROM _current c "
                    f"WHERE {_in_touched('c', margin=TAIL_KEPT)}")
        return
    after = f"{quote_literal(first.isoformat())}::TIMESTAMPTZ"

    def tail(alias: str, margin: str) -> str:
        return (f"{alias}.kernel IN ({kernels}) AND {alias}.observed_at >= {after} - {margin} "
                f"AND {_in_touched(alias, margin=margin)}")

    con.execute(f"CREATE OR REPLACE VIEW _current_tail AS "
                f"{_in_use_sql(mine, lambda alias: tail(alias, TAIL_KEPT))}")
    keys = ", ".join(SERIES)
    con.execute(f"""
        INSERT INTO _before
        SELECT {keys}, arg_max(run_id, step), max(step), max(observed_at)
        FROM _current c WHERE {_in_touched("c", before=TAIL_READ)}
        GROUP BY {keys}""")
    [(low, high)] = con.execute("SELECT min(observed_at), max(observed_at) FROM _before").fetchall()
    before = "FALSE"
    if low is not None:
        before = (f"r.kernel IN ({kernels}) AND r.observed_at BETWEEN "
                  f"{quote_literal(low.isoformat())}::TIMESTAMPTZ AND "
                  f"{quote_literal(high.isoformat())}::TIMESTAMPTZ "
                  f"AND r.run_id IN (SELECT run_id FROM _before)")
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE _tail_runs AS
        SELECT r.* FROM _all_runs r WHERE {tail('r', TAIL_READ)}
        UNION ALL SELECT r.* FROM _all_runs r WHERE {before}""")
    loads = ", ".join(quote_literal(row[0]) for row in con.execute(
        "SELECT DISTINCT load_id FROM _tail_runs ORDER BY ALL").fetchall()) or "NULL"
    con.execute("CREATE OR REPLACE VIEW runs AS SELECT * FROM _tail_runs")
    con.execute(f"CREATE OR REPLACE VIEW measurements AS SELECT m.* FROM _all_measurements m "
                f"WHERE m.load_id IN ({loads}) AND m.run_id IN (SELECT run_id FROM runs)")


def _kernel_list(batch: list[tuple]) -> str:
    """The kernels of ``batch`` (kernel, pass, GPU) as SQL literals for ``IN (...)``."""
    return ", ".join(quote_literal(k) for k in sorted({k for k, _, _ in batch})) or "NULL"


def chunks(con: duckdb.DuckDBPyConnection, load_id: str | None = None,
           runs: list[str] | tuple[str, ...] = (), size: int | None = None) -> Iterator[int]:
    """Fill ``_touched`` (:func:`define_views`) with one batch of kernels, passes and GPUs
    after another, each of about :data:`CHUNK_RUNS` runs read (one that has more is a batch of
    its own; ``size`` runs instead, for work lighter than computing steps), yielding the
    batch's number: every one, whole, or (``load_id``) those the load added runs to, gave a
    protocol family or enriched a run of (``runs``: the runs it enriched, whose rows keep the
    load_id of the load that added them), each with its tail (see :data:`TAIL_KEPT`): its
    ``since`` the load's first run there, or null (the whole group) where the load enriched a
    run, gave the protocol of another load's run, or added no run with a time."""
    if load_id is None:
        counts = con.execute("SELECT kernel, pass, gpu, count(*), CAST(NULL AS TIMESTAMPTZ) "
                             "FROM _all_runs GROUP BY ALL ORDER BY ALL").fetchall()
    else:
        con.execute("CREATE OR REPLACE TEMP TABLE _enriched (run_id VARCHAR)")
        if runs:
            con.executemany("INSERT INTO _enriched VALUES (?)", [(r,) for r in runs])
        counts = con.execute(f"""
            WITH given AS (SELECT protocol_id FROM protocols WHERE load_id = $load_id),
            groups AS (
                SELECT kernel, pass, gpu,
                    CASE WHEN NOT bool_or(run_id IN (SELECT run_id FROM _enriched)
                        OR (load_id <> $load_id AND protocol_id IN (SELECT * FROM given)))
                    THEN min(observed_at) FILTER (WHERE load_id = $load_id) END AS since
                FROM _all_runs
                WHERE (kernel, pass, gpu) IN (SELECT kernel, pass, gpu FROM _all_runs
                    WHERE load_id = $load_id OR run_id IN (SELECT run_id FROM _enriched)
                        OR protocol_id IN (SELECT * FROM given))
                GROUP BY ALL)
            SELECT g.kernel, g.pass, g.gpu, count(*) FILTER (WHERE g.since IS NULL
                    OR r.observed_at >= g.since - {TAIL_READ}), g.since
            FROM groups g JOIN _all_runs r USING (kernel, pass, gpu)
            GROUP BY ALL ORDER BY ALL""", {"load_id": load_id}).fetchall()
    since = {tuple(row[:3]): row[4] for row in counts}
    for number, batch in enumerate(batched([row[:4] for row in counts], size)):
        con.execute("DELETE FROM _touched")
        con.executemany("INSERT INTO _touched VALUES (?, ?, ?, ?)",
                        [(*key, since[key]) for key in batch])
        starts = [since[key] for key in batch]
        _touched_views(con, batch, None if None in starts else min(starts))
        yield number


def batched(counts: list[tuple], most: int | None = None, keys: int = 3
            ) -> Iterator[list[tuple]]:
    """``counts`` (``keys`` key columns, by default kernel, pass and GPU, then runs[, pairs])
    as lists of keys of about ``most`` (:data:`CHUNK_RUNS`) runs and at most
    :data:`CHUNK_PAIRS` pairs each, in order (a group of more is a batch of its own)."""
    most = CHUNK_RUNS if most is None else most
    batch: list[tuple] = []
    size = pairs = 0
    for row in counts:
        key, (n, *more) = tuple(row[:keys]), row[keys:]
        p = more[0] if more else 0
        if batch and (size + n > most or pairs + p > CHUNK_PAIRS):
            yield batch
            batch, size, pairs = [], 0, 0
        batch.append(key)
        size += n
        pairs += p
    if batch:
        yield batch


# The schema a session's computed series_context is worked out in, batch by batch
# (:func:`compute`).
_BATCH = "_kidata_step_batch"


def sizes(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    """On a query session's connection: its passed runs with a time per kernel, pass and GPU,
    with their estimated pairs (:data:`PAIRS_SQL`), for :func:`compute`."""
    return con.execute(PAIRS_SQL).fetchall()


def compute(con: duckdb.DuckDBPyConnection, folder: Path, counts: list[tuple]) -> list[Path]:
    """On a query session's connection (``con``: its tables defined) that works its steps out
    rather than reading stored ones (a ``--since``/``--until`` window, or a load whose steps
    are not stored): work out ``series_context``'s rows a few kernels, passes and GPUs at a
    time (as :func:`chunks` does, the same rows: see :func:`define_views`; ``counts`` is
    :func:`sizes`', batches bounded by :data:`CHUNK_RUNS` and :data:`CHUNK_PAIRS`) into
    Parquet files in ``folder`` (made now), one per batch, and return them; the caller defines
    the view as their rows (:mod:`kidata.query.kept`). At once, the view's contexts pair each
    step with every step of its sessions and take medians of them, which do not spill: ~1.8 GB
    for a window of 500k runs. With no memory limit (``KIDATA_QUERY_MEMORY=none``) in one
    batch: all at once is faster."""
    views = viewfiles.load_views()
    folder.mkdir(parents=True, exist_ok=True)
    groups = f"{_BATCH}_groups"
    measurements = folder / "_measurements.parquet"
    files: list[Path] = []
    # Views of a schema of their own read its runs and measurements (those of the batch's
    # kernels, passes and GPUs) and the session's other tables (names not in the schema).
    con.execute(f"CREATE SCHEMA {_BATCH}")
    try:
        con.execute(f"CREATE TEMP TABLE {groups} (kernel VARCHAR, pass VARCHAR, gpu VARCHAR)")
        whole = engine.query_memory() is None
        if whole:
            plan: Iterable[list[tuple]] = [[row[:3] for row in counts]]
            con.execute(f"CREATE VIEW {_BATCH}.runs AS SELECT * FROM main.runs")
            con.execute(f"CREATE VIEW {_BATCH}.measurements AS SELECT * FROM main.measurements")
        else:
            plan = batched(counts)
            _copy_measurements(con, measurements)
            _batch_views(con, measurements, groups, [])
        for name in viewfiles.with_dependencies([VIEW]):
            con.execute(f"CREATE VIEW {_BATCH}.{name} AS {views[name].body}")
        for number, batch in enumerate(plan):
            if not whole:  # (all at once, the views read every run)
                con.execute(f"DELETE FROM {groups}")
                con.executemany(f"INSERT INTO {groups} VALUES (?, ?, ?)", batch)
                _batch_views(con, measurements, groups, batch)
            path = folder / f"steps-{number:05d}.parquet"
            con.execute(f"COPY (SELECT * FROM {_BATCH}.{VIEW}) TO {quote_literal(str(path))} "
                        "(FORMAT parquet)")
            files.append(path)
    finally:
        con.execute(f"DROP SCHEMA IF EXISTS {_BATCH} CASCADE")
        con.execute(f"DROP TABLE IF EXISTS {groups}")
        measurements.unlink(missing_ok=True)
    return files


# The columns compute()'s copy of the measurements adds: its run's kernel, pass, GPU.
_KEYS = ("_kidata_kernel", "_kidata_pass", "_kidata_gpu")


def _copy_measurements(con: duckdb.DuckDBPyConnection, measurements: Path) -> None:
    """Write the session's measurements with their run's kernel, pass and GPU: each of
    :func:`compute`'s batches then picks its own from this copy by those columns instead of
    joining every measurement of the warehouse to its runs again (at 5M runs, 0.65 s of a
    batch's 1.4 s). Sorting the copy (and the runs) so that batches skip row groups cost more
    than it saved (2.5 s for the runs of a window of 477k at 5M). The join's key is the run
    id's 128-bit MD5: with the id's text in its hash table, a window of 5M runs ran out of the
    default 300MB (docs/benchmarks.md, Run AY); two run ids of one MD5 in one window, the
    odds ~1e-25 at 10M unless forged, would give each the other's measurements too."""
    con.execute(f"""
        COPY (SELECT m.* EXCLUDE (k), r.kernel AS {_KEYS[0]}, r.pass AS {_KEYS[1]},
                     r.gpu AS {_KEYS[2]}
              FROM (SELECT *, md5_number(run_id) AS k FROM main.measurements) m
              JOIN (SELECT md5_number(run_id) AS k, kernel, pass, gpu FROM main.runs) r
                  USING (k))
        TO {quote_literal(str(measurements))} (FORMAT parquet)""")


def _batch_views(con: duckdb.DuckDBPyConnection, measurements: Path, groups: str,
                 batch: list[tuple]) -> None:
    """(Re)define the batch schema's runs and measurements: the session's runs and the copy's
    measurements of the kernels, passes and GPUs in ``groups`` (``batch``: their kernels are
    named as constants too, so that DuckDB skips row groups of others by their statistics)."""
    kernels = _kernel_list(batch)
    con.execute(f"""
        CREATE OR REPLACE VIEW {_BATCH}.runs AS
        SELECT r.* FROM main.runs r
        WHERE r.kernel IN ({kernels}) AND {_in_touched('r', groups)}""")
    con.execute(f"""
        CREATE OR REPLACE VIEW {_BATCH}.measurements AS
        SELECT m.* EXCLUDE ({", ".join(_KEYS)})
        FROM read_parquet({quote_literal(str(measurements))}) m
        WHERE m.{_KEYS[0]} IN ({kernels}) AND EXISTS (SELECT 1 FROM {groups} t
            WHERE t.kernel = m.{_KEYS[0]} AND t.pass = m.{_KEYS[1]} AND t.gpu = m.{_KEYS[2]})""")


# When a load's compaction rebuilds step_context although it has few files: once step_edits
# holds this share of step_context's rows (and at least EDITS_AT rows). Every reading query
# joins the voids, building its hash table from them: 1.7M of them (5M runs loaded into a 5M
# warehouse) ran `kidata report` and `sql -o` of trends out of the default 300MB and made
# `trends` 8x slower than over the same steps rebuilt (docs/benchmarks.md, Run AW).
EDITS_SHARE = 0.1
EDITS_AT = 100_000
# ... or once it holds this many rows, whatever the share: at 10M runs a tenth is 1.2M voids,
# and the query's join with 322k of them already spilled at 2M (Run AW); at 10M, with 243k
# voids a count of trends took 9 s and 400 MB, with 486k it ran out of the default 300MB: the
# join's hash table holds each void's run id (~450 bytes a void in all; Run AX).
EDITS_MOST = 200_000


def _footer_rows(layout: Layout, table: str) -> int:
    """``table``'s rows, counted from its files' Parquet footers (no scan); OSError or
    ValueError where a file is unreadable (kidata check names it)."""
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(p).num_rows for p in layout.table_files(table))


def edits_due(root: Path) -> bool:
    """Whether step_edits has grown to :data:`EDITS_SHARE` of step_context's rows (or to
    :data:`EDITS_MOST` rows) and :data:`EDITS_AT` rows (counted from the files' Parquet
    footers): time to rebuild the stored steps in one file with no voids (:func:`rebuild`)."""
    layout = Layout(root)
    try:
        edits = _footer_rows(layout, EDITS)
        return edits >= EDITS_AT and edits >= min(EDITS_SHARE * _footer_rows(layout, TABLE),
                                                  EDITS_MOST)
    except (OSError, ValueError):  # unreadable: rebuild nothing
        return False


def due(root: Path) -> bool:
    """Whether a writer of ``root`` stores steps: from ``KIDATA_CONTEXTS_AT`` runs on
    (counted from the runs files' Parquet footers)."""
    from kidata.core import config

    at = config.current().contexts_at
    if not at:
        return True
    try:
        return _footer_rows(Layout(root), "runs") >= at
    except (OSError, ValueError):  # unreadable: store nothing
        return False


def store(root: Path, writer_id: str, only_load: bool = False,
          enriched: list[str] | tuple[str, ...] = ()) -> int | None:
    """:func:`derive` when :func:`due`: after a load (``only_load``: ``writer_id`` is that
    load, ``enriched`` the runs it enriched) or an unload. None below ``KIDATA_CONTEXTS_AT``
    runs, else the rows written."""
    if not due(root):
        return None
    return derive(root, writer_id, only_load=only_load, enriched=enriched)


def _uncovered(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The committed loads without a 'covered' row."""
    return [r[0] for r in con.execute(
        f"SELECT load_id FROM loads WHERE load_id NOT IN "
        f"(SELECT load_id FROM {EDITS} WHERE kind = 'covered') ORDER BY load_id").fetchall()]


def _nulls(table: str, skip: tuple[str, ...]) -> str:
    return ", ".join(f"CAST(NULL AS {DUCKDB_TYPES[c.type]}) AS {c.name}"
                     for c in COLUMNS[table] if c.name not in skip)


def _covered_sql(loads: str) -> str:
    """step_edits' 'covered' rows for the load ids of the query ``loads`` (one column)."""
    return (f"SELECT 'covered' AS kind, {_nulls(EDITS, ('kind', 'load_id'))}, load_id "
            f"FROM ({loads}) c")


def _wrote_sql(counts: str) -> str:
    """step_edits' 'wrote' rows: per writer (``counts``: load_id, n), how many steps it wrote
    to step_context. A reader applies a writer's steps, voids and counts only while it sees
    that many of its steps (a query listing the two tables' files while a load stores them
    sees the steps as they were before that load, never half of its changes)."""
    nulls = _nulls(EDITS, ("kind", "points", "load_id"))
    return (f"SELECT 'wrote' AS kind, {nulls}, CAST(n AS BIGINT) AS points, load_id "
            f"FROM ({counts}) w")


def _counts_sql(rows: str) -> str:
    """'count' rows of step_edits: per series, how many rows the query ``rows`` has, tagged
    $id."""
    keys = ", ".join(SERIES)
    return (f"SELECT 'count' AS kind, {keys}, CAST(NULL AS VARCHAR) AS run_id, "
            f"CAST(NULL AS VARCHAR) AS of_load, CAST(count(*) AS BIGINT) AS points, "
            f"$id AS load_id FROM ({rows}) GROUP BY {keys}")


def _same(a: str, b: str) -> str:
    """SQL: the rows aliased ``a`` and ``b`` are the same step, as :func:`check` judges
    (:func:`agree`). Compared exactly, the last bits of ``together_log_change`` (an AVG, whose
    sum follows the order rows arrive in) differed between the stored step and the one worked
    out again, so a load voided and rewrote every step of a session it touched: ~12 times its
    own steps, and the edits then rebuilt all steps after every load (docs/benchmarks.md,
    Run BJ)."""
    return " AND ".join(agree(c, a, b) for c in STEP_COLUMNS)


def _changes(con: duckdb.DuckDBPyConnection, writer_id: str, edits: GroupedWriter
             ) -> Iterator[Any]:
    """For the groups in ``_touched``: the step_context rows that bring the stored steps to
    what series_context computes (new and changed steps, as batches), writing to ``edits``
    (the load's step_edits file in the making) the step_edits rows: 'void' rows for the
    stored steps changed or no more, 'count' rows for the series whose length changed. They
    go to the file batch by batch: a load that extends every series of a large warehouse
    voids millions of steps (1.7M for 5M runs into 5M), which held in memory until the end
    took its peak from ~0.5 to 1.1 GB."""
    import pyarrow as pa

    cols = ", ".join(STEP_COLUMNS)
    keys = ", ".join(SERIES)
    # The steps of the tails (TAIL_KEPT), numbered on from their series' last step before.
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE _fresh AS
        SELECT * EXCLUDE (_offset) REPLACE (step + _offset AS step) FROM (
            SELECT v.*, coalesce(max(b.step - v.step) OVER (PARTITION BY
                {", ".join(f"v.{k}" for k in SERIES)}), 0) AS _offset
            FROM (SELECT {cols} FROM {VIEW}) v
            LEFT JOIN _before b ON b.run_id = v.run_id AND b.metric = v.metric) f
        WHERE {_in_touched("f", margin=TAIL_KEPT)}""")
    con.execute(f"CREATE OR REPLACE TEMP TABLE _cur AS SELECT {cols}, load_id FROM _current_tail")
    params = {"id": writer_id}
    declared = schema.arrow_tables()[EDITS]
    for batch in con.sql(f"""
        SELECT 'void' AS kind, {", ".join(f"c.{k}" for k in SERIES)}, c.run_id,
            c.load_id AS of_load, CAST(NULL AS BIGINT) AS points, $id AS load_id
        FROM _cur c LEFT JOIN _fresh f ON f.run_id = c.run_id AND f.metric = c.metric
        WHERE f.run_id IS NULL OR NOT ({_same("f", "c")})
        UNION ALL
        SELECT 'count', {keys}, NULL, NULL, CAST(sum(d) AS BIGINT), $id FROM (
            SELECT {keys}, 1 AS d FROM _fresh UNION ALL SELECT {keys}, -1 AS d FROM _cur)
        GROUP BY {keys} HAVING sum(d) <> 0""", params=params).to_arrow_reader(BATCH_ROWS):
        edits.write(pa.Table.from_batches([batch]).cast(declared))
    yield from con.sql(f"""
        SELECT {", ".join(f"f.{c}" for c in STEP_COLUMNS)}, $id AS load_id
        FROM _fresh f LEFT JOIN _cur c ON c.run_id = f.run_id AND c.metric = f.metric
        WHERE c.run_id IS NULL OR NOT ({_same("f", "c")})""", params=params
                       ).to_arrow_reader(BATCH_ROWS)


def _write_file(layout: Layout, table: str, writer_id: str, batches: Iterator[Any]) -> int:
    """Write ``batches`` as ``table``'s new file tagged ``writer_id``, in place at once."""
    from kidata.store.pqwrite import write_reader

    with _new_file(layout, table, writer_id) as work:
        return write_reader(work, schema.arrow_tables()[table], batches)


@contextlib.contextmanager
def _new_file(layout: Layout, table: str, writer_id: str) -> Iterator[Path]:
    """The path to write ``table``'s new file tagged ``writer_id`` at: a hidden name in the
    table's folder (layout.TEMP_GLOB: recovery removes a leftover), synced and renamed into
    place when the block ends, removed if it fails."""
    folder = layout.table(table)
    folder.mkdir(parents=True, exist_ok=True)
    target = layout.part(table, writer_id)
    work = folder / f".{target.name}.tmp"
    try:
        yield work
        durable.fsync_file(work)
        os.replace(work, target)
        durable.fsync_dir(folder)
    finally:
        work.unlink(missing_ok=True)


def derive(root: Path, writer_id: str, only_load: bool = False,
           enriched: list[str] | tuple[str, ...] = ()) -> int:
    """Store steps, under the writer lock, after a commit: with ``only_load`` (``writer_id``
    is a load) and every other committed load covered, the changes of the groups the load
    touched (``enriched``: the runs it enriched): a ``step_context`` file, then a
    ``step_edits`` file holding its 'covered' row (so a crash between leaves the load
    uncovered, never half-stored); otherwise (no stored steps, a load not covered, an unload)
    every step computed again, one file per table replacing their files, with a 'covered'
    row per committed load. A few groups at a time (:func:`chunks`), on a connection of its
    own with the commit's memory limit. Returns the steps written to step_context."""

    layout = Layout(root)
    con = _connect()
    try:
        define_views(con, root)
        uncovered = _uncovered(con)
        incremental = (only_load and bool(layout.table_files(EDITS))
                       and uncovered in ([], [writer_id]))
        if not incremental:
            return _write_all(con, root, writer_id)
        from kidata.store.pqwrite import GroupedWriter

        params = {"id": writer_id}
        # The edits are written beside the steps, batch by batch, to a hidden file renamed
        # into place only after the steps' file: until the edits' file (and its 'covered'
        # row) is in place, the load is not covered and nothing stored is read.
        with _new_file(layout, EDITS, writer_id) as work:
            edits = GroupedWriter(work, schema.arrow_tables()[EDITS], create_empty=True)
            with edits:

                def batches() -> Iterator[Any]:
                    for _ in chunks(con, writer_id, enriched):
                        yield from _changes(con, writer_id, edits)

                rows = _write_file(layout, TABLE, writer_id, batches())
                covered = con.sql(f"{_covered_sql('SELECT $id AS load_id')} UNION ALL "
                                  f"{_wrote_sql(f'SELECT $id AS load_id, {rows} AS n')}",
                                  params=params).to_arrow_table()
                edits.write(covered.cast(schema.arrow_tables()[EDITS]))
        return rows
    finally:
        con.close()


# Stamped in the metadata of the one file of each table that every step stored afresh or
# rebuilt writes: a digest of the committed loads whose 'covered' rows the files hold. A
# `kidata compact` finding each table one file stamped for the loads committed now has nothing
# to rebuild (it rewrote every step each time: 1M rows at 1M runs). A load adds files or (its
# steps not stored) changes the loads committed, an unload replaces the pair: the next
# compaction rebuilds unless that pair was stored afresh, stamped, for the loads now.
COVERS_KEY = b"kidata.steps_cover"


def _covers(con: duckdb.DuckDBPyConnection) -> bytes:
    """The stamp of files covering the committed loads on ``con`` (see :data:`COVERS_KEY`)."""
    ids = sorted(row[0] for row in con.execute("SELECT load_id FROM loads").fetchall())
    return hashlib.sha256("\n".join(ids).encode()).hexdigest().encode()


def _stamped(table: str, covers: bytes) -> Any:
    """``table``'s Arrow schema with :data:`COVERS_KEY` in its metadata."""
    arrow = schema.arrow_tables()[table]
    return arrow.with_metadata({**(arrow.metadata or {}), COVERS_KEY: covers})


def _rebuilt_for(layout: Layout) -> bytes | None:
    """The loads' digest the stored steps were last stored afresh or rebuilt for, when each
    table is that one stamped file still (both stamps the same); else None."""
    import pyarrow.parquet as pq

    stamps = set()
    for table in (TABLE, EDITS):
        files = layout.table_files(table)
        if len(files) != 1:
            return None
        try:
            stamps.add((pq.ParquetFile(files[0]).metadata.metadata or {}).get(COVERS_KEY))
        except (OSError, ValueError):  # unreadable: rebuild (kidata check names it)
            return None
    return stamps.pop() if len(stamps) == 1 else None


def _write_all(con: duckdb.DuckDBPyConnection, root: Path, writer_id: str) -> int:
    """Every step computed afresh, as step_context's one file, and each series' length and a
    'covered' row per committed load as step_edits' (both tables' files replaced in one
    transaction). Returns the steps written."""
    from kidata.store import commit
    from kidata.store.pqwrite import write_reader

    params = {"id": writer_id}
    covers = _covers(con)
    counts: list = []
    cols = ", ".join(STEP_COLUMNS)
    keys = ", ".join(SERIES)

    def batches() -> Iterator[Any]:
        for _ in chunks(con):
            con.execute(f"CREATE OR REPLACE TEMP TABLE _fresh AS SELECT {cols} FROM {VIEW}")
            counts.append(con.sql(_counts_sql(f"SELECT {keys} FROM _fresh"), params=params
                                  ).to_arrow_table())
            yield from con.sql(f"SELECT {cols}, $id AS load_id FROM _fresh "
                               "ORDER BY run_id, metric", params=params).to_arrow_reader(BATCH_ROWS)

    written: list[int] = []

    def write_steps(path: Path) -> int:
        written.append(write_reader(path, _stamped(TABLE, covers), batches(),
                                    create_empty=True))
        return written[0]

    def write_edits(path: Path) -> int:  # after write_steps, which filled counts
        covered = con.sql(f"{_covered_sql('SELECT load_id FROM loads')} UNION ALL "
                          f"{_wrote_sql(f'SELECT $id AS load_id, {written[0]} AS n')}",
                          params=params).to_arrow_table()
        return write_reader(path, _stamped(EDITS, covers),
                            (b for t in [*counts, covered] for b in t.to_batches()),
                            create_empty=True)

    return commit.replace_tables(root, {TABLE: (write_steps, []), EDITS: (write_edits, [])},
                                 what=f"steps of {TABLE}", faults="contexts-")[TABLE]


def _connect() -> duckdb.DuckDBPyConnection:
    """A connection for storing, rebuilding or checking steps: DuckDB within the commit's
    memory limit (``KIDATA_COMMIT_MEMORY``), spilling beyond it."""
    from kidata.core import config

    return engine.connect({"memory_limit": config.current().commit_memory})


def check(root: Path) -> list[str]:
    """When the stored steps are read (every committed load covered): the steps whose stored
    row (points included) differs from what series_context computes afresh, is missing or is
    extra; one problem naming how many and a few steps, or none. A few groups at a time, as
    :func:`derive`."""
    if not Layout(root).table_files(EDITS):
        return []
    con = _connect()
    wrong: list[tuple[str, str, str]] = []
    try:
        define_views(con, root)
        if not readable(con):
            return []  # the rows are not read: queries compute every step
        names = viewfiles.load_views()[VIEW].columns
        same = " AND ".join(agree(col, "c", "f") for col in names)
        for _ in chunks(con):
            # Computed alone first (its windows and quantiles hold their rows in memory), then
            # compared: both at once overran the commit's memory limit now and then.
            con.execute(f"CREATE OR REPLACE TEMP TABLE _fresh_view AS SELECT * FROM {VIEW}")
            wrong += con.execute(f"""
                SELECT coalesce(f.run_id, c.run_id), coalesce(f.metric, c.metric),
                    CASE WHEN c.run_id IS NULL THEN 'missing'
                         WHEN f.run_id IS NULL THEN 'extra' ELSE 'different' END
                FROM _fresh_view f FULL JOIN _stored c
                    ON c.run_id = f.run_id AND c.metric = f.metric
                WHERE c.run_id IS NULL OR f.run_id IS NULL OR NOT ({same})
                ORDER BY 1, 2
            """).fetchall()
    finally:
        con.close()
    if not wrong:
        return []
    kinds = sorted({k for _, _, k in wrong})
    examples = ", ".join(f"{run} ({metric}, {kind})" for run, metric, kind in wrong[:3])
    return [f"{TABLE}: {len(wrong):,} stored steps differ from what their series give "
            f"({', '.join(kinds)}), e.g. {examples} (trends and regressions read them; "
            "kidata check --repair stores them again)"]


def write_empty(path: Path, table: str = TABLE) -> int:
    """Write ``table`` (step_context or step_edits) with no row at ``path`` (what an unload
    leaves: see :func:`kidata.store.unload.unload`). Returns 0."""
    from kidata.store.pqwrite import write_reader

    return write_reader(path, schema.arrow_tables()[table], iter(()), create_empty=True)


def rebuild(root: Path, writer_id: str, *, if_files: int = 2, afresh: bool = False
            ) -> tuple[int, int] | None:
    """Replace ``step_context`` and ``step_edits`` by one file each: when the steps are read
    (every load covered) and not ``afresh``, the steps in use as they are, the 'covered' rows
    of the committed loads and each series' length; otherwise every step computed again
    (``afresh``: ``kidata check --repair``). What ``kidata compact`` does, and a load's
    compaction once step_context has ``if_files`` files. Under the writer lock. Returns (files
    before, rows written to step_context), or None when there was nothing to do: no file, or
    fewer than ``if_files``, or (not ``afresh``) each table one file stored afresh or rebuilt
    for the loads committed now (:func:`_rebuilt_for`): what a rebuild would write again."""
    from kidata.store import commit
    from kidata.store.pqwrite import write_reader

    layout = Layout(root)
    files = layout.table_files(TABLE)
    if not files or len(files) < if_files:
        return None
    con = _connect()
    try:
        define_views(con, root)
        covers = _covers(con)
        if not afresh and _rebuilt_for(layout) == covers:
            return None
        if afresh or not readable(con):
            return len(files), _write_all(con, root, writer_id)
        keys = ", ".join(SERIES)
        params = {"id": writer_id}

        def batches() -> Iterator[Any]:
            # A few groups at a time: all at once, the steps' every column went through the
            # join with every void (at 10M runs, 0.9 GB and 58 s; docs/benchmarks.md, Run AW).
            for _ in chunks(con, size=REBUILD_RUNS):
                yield from con.sql("SELECT * FROM _current").to_arrow_reader(BATCH_ROWS)

        def write_steps(path: Path) -> int:
            rows = write_reader(path, _stamped(TABLE, covers), batches(),
                                create_empty=True)
            [(in_use,)] = con.execute("SELECT count(*) FROM _in_use").fetchall()
            if rows != in_use:  # a step whose group no run has: not rebuilt, not dropped
                raise WarehouseError(f"rebuilding {TABLE}: {rows:,} steps written of "
                                     f"{in_use:,} in use; kidata check --repair stores "
                                     "every step again")
            return rows

        def write_edits(path: Path) -> int:
            return write_reader(path, _stamped(EDITS, covers), con.sql(
                f"{_counts_sql(f'SELECT {keys} FROM _in_use')} UNION ALL "
                f"{_covered_sql('SELECT load_id FROM loads')} UNION ALL "
                f"{_wrote_sql('SELECT load_id, count(*) AS n FROM _in_use GROUP BY load_id')}"
                f" UNION ALL {_wrote_sql('SELECT $id AS load_id, 0 AS n')}", params=params
            ).to_arrow_reader(BATCH_ROWS), create_empty=True)

        rows = commit.replace_tables(
            root, {TABLE: (write_steps, []), EDITS: (write_edits, [])},
            what=f"rebuild of {TABLE}", faults="contexts-")[TABLE]
    finally:
        con.close()
    return len(files), rows
