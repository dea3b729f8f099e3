"""Stored step contexts: what the ``series_steps`` view's attribution reads, kept per step.

A step of a latency or memory series is judged against the steps measured with it: the other
implementations' steps of the same workload and their mean log change, the implementation's
other workloads over the same two sessions and their median, the other implementations' largest
rise and fall (``sql/series_context.sql``). Working these out pairs every step with the steps of
its kernel, pass, GPU, family and metric within an hour: the self-joins that made ``trends``
cost ~50 CPU s and ~4 GB at 1M runs (docs/benchmarks.md, Run Z).

A step's context depends only on the results of its group (kernel, pass, GPU, family, metric)
measured no later than one hour after it: its own previous result, its neighbours' results and
theirs are all earlier. ``series_context`` counts, for every step, the results of its group
measured up to five clock hours after the step's (a superset of those, whatever the session's
time zone), with the sum of a number read from each run id's MD5, and reads the stored row of
``step_context`` whose family, clock hour, count and sum are the step's; the other steps'
contexts are computed, joining only the groups they are in. Results only ever join a group: a
load adds them, a protocol document loaded later moves runs from the group named by the
protocol's digest to the one named by its family (the stored rows carry the family they were
computed for). So while the count up to the same hour is the same, the set is the same, and
the row holds; when a result arrives within the hours it depends on, the count changes and the
row is simply not used. The one way results leave a group, ``kidata unload``, empties the
table in its own commit (and the next load at that size stores every context again); the sum
of MD5 numbers also tells a set that lost one result and gained another (a hand-deleted commit
marker, say) from the same count. Readers do not filter the rows by load, and a crash that
leaves none costs time, not answers.

After each load commits (from ``KIDATA_CONTEXTS_AT`` runs on), :func:`store` writes the
contexts that ``series_context`` would compute (the steps the load added, and the steps whose
set it changed), in one file tagged with the load's id; after an unload, every step's.
``kidata compact`` rewrites the table as one file (:func:`rebuild`); ``kidata check`` verifies
that every stored row a reader uses holds what is computed afresh (:func:`check`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb

from kidata.core import engine, viewfiles
from kidata.store import durable, reference, snapshot
from kidata.store.layout import Layout
from kidata.store.schema import TABLES

TABLE = "step_context"
VIEW = "series_context"
# What series_context and the views under it read (a connection defines only these).
TABLES_READ = ("runs", "measurements", "protocols", TABLE)
REFERENCE_READ = ("gpus",)


# Runs per pass of the computation (a few kernels, passes and GPUs at a time): what bounds
# the memory of storing, rebuilding and checking contexts (one pass over 1M runs: 4.2 GB).
CHUNK_RUNS = 50_000


def define_views(con: duckdb.DuckDBPyConnection, root: Path) -> None:
    """Define, on ``con`` (a fresh connection), the committed snapshot's tables and the views
    ``series_context`` reads, with ``runs`` (and ``measurements``) holding only the runs of the
    kernels, passes and GPUs in the temporary table ``_touched``, empty until :func:`chunks`
    fills it: a step's context depends only on its group's runs, and a group lies within one
    kernel, pass and GPU, so computing a few of them at a time gives their rows exactly."""
    snapshot.define(con, root, tables=TABLES_READ)
    reference.define(con, root, REFERENCE_READ)
    con.execute("CREATE TEMP TABLE _touched (kernel VARCHAR, pass VARCHAR, gpu VARCHAR)")
    con.execute("ALTER VIEW runs RENAME TO _all_runs")
    con.execute("CREATE VIEW runs AS SELECT r.* FROM _all_runs r WHERE EXISTS ("
                "SELECT 1 FROM _touched t WHERE t.kernel = r.kernel AND t.pass = r.pass "
                "AND t.gpu = r.gpu)")
    con.execute("ALTER VIEW measurements RENAME TO _all_measurements")
    con.execute("CREATE VIEW measurements AS SELECT m.* FROM _all_measurements m "
                "WHERE m.run_id IN (SELECT run_id FROM runs)")
    views = viewfiles.load_views()
    for name in viewfiles.with_dependencies([VIEW]):
        con.execute(f"CREATE VIEW {name} AS {views[name].body}")


def ignore_stored(con: duckdb.DuckDBPyConnection) -> None:
    """On a connection of :func:`define_views`: the stored rows become ``_stored_context`` and
    ``step_context`` (which ``series_context`` reads, by name when each statement runs) holds
    none, so every context is computed afresh."""
    con.execute("ALTER VIEW step_context RENAME TO _stored_context")
    con.execute("CREATE VIEW step_context AS SELECT * FROM _stored_context WHERE 1 = 0")


def chunks(con: duckdb.DuckDBPyConnection, load_id: str | None = None) -> Iterator[int]:
    """Fill ``_touched`` (:func:`define_views`) with one batch of kernels, passes and GPUs
    after another, each of about :data:`CHUNK_RUNS` runs (one that has more is a batch of its
    own), yielding the batch's number: every one, or (``load_id``) those the load added runs
    to or gave a protocol family."""
    where = ""
    if load_id is not None:
        where = ("WHERE (kernel, pass, gpu) IN (SELECT kernel, pass, gpu FROM _all_runs "
                 "WHERE load_id = $load_id OR protocol_id IN "
                 "(SELECT protocol_id FROM protocols WHERE load_id = $load_id))")
    counts = con.execute(
        f"SELECT kernel, pass, gpu, count(*) FROM _all_runs {where} GROUP BY ALL ORDER BY ALL",
        {"load_id": load_id} if load_id is not None else None).fetchall()
    batch: list[tuple] = []
    size = 0
    number = 0
    for kernel, pass_, gpu, n in [*counts, (None, None, None, None)]:
        if batch and (n is None or size + n > CHUNK_RUNS):
            con.execute("DELETE FROM _touched")
            con.executemany("INSERT INTO _touched VALUES (?, ?, ?)", batch)
            yield number
            number += 1
            batch, size = [], 0
        if n is not None:
            batch.append((kernel, pass_, gpu))
            size += n


def due(root: Path) -> str | None:
    """Whether a load into ``root`` stores contexts: None below ``KIDATA_CONTEXTS_AT`` runs
    (counted from the runs files' Parquet footers), ``"all"`` when the table has no file yet
    (the first load at that size stores every step's), else ``"load"`` (the groups it
    touched)."""
    import pyarrow.parquet as pq

    from kidata.core import config

    at = config.current().contexts_at
    layout = Layout(root)
    if at:
        runs = 0
        for path in layout.table_files("runs"):
            try:
                runs += pq.read_metadata(path).num_rows
            except (OSError, ValueError):  # unreadable: kidata check names it; store nothing
                return None
            if runs >= at:
                break
        if runs < at:
            return None
    return "load" if layout.table_files(TABLE) else "all"


def store(root: Path, writer_id: str, only_load: bool = False) -> int | None:
    """:func:`derive` when :func:`due`: after a load (``only_load``: ``writer_id`` is that
    load, and the groups it touched are looked at unless the table has no file yet) or an
    unload (every group). None below ``KIDATA_CONTEXTS_AT`` runs, else the rows written."""
    scope = due(root)
    if scope is None:
        return None
    return derive(root, writer_id, only_load=only_load and scope == "load")


def _columns() -> str:
    """``series_context``'s columns as ``step_context`` names them (but ``load_id``)."""
    return ", ".join("observed_hour AS context_hour" if f.name == "context_hour" else f.name
                     for f in TABLES[TABLE] if f.name != "load_id")


def missing_sql() -> str:
    """The rows ``series_context`` computes rather than reads: what :func:`derive` stores."""
    cols = _columns()
    return (f"SELECT {cols}, $load_id AS load_id FROM {VIEW} "
            "WHERE NOT context_stored AND previous_run_id IS NOT NULL ORDER BY run_id, metric")


def derive(root: Path, writer_id: str, only_load: bool = False) -> int:
    """Store, as one new file of ``step_context`` tagged ``writer_id``, the contexts of every
    step whose stored row is missing or no longer holds. Called under the writer lock, after
    a commit; ``only_load``: ``writer_id`` is a load, and only the groups it touched are
    looked at. A few groups at a time (:func:`chunks`), on a connection of its own with the
    commit's memory limit. Returns the rows written (a file is added only when there are some,
    or when the table has none: an engine that infers schemas from files needs one to define
    the views)."""
    from kidata.store.pqwrite import write_reader

    layout = Layout(root)
    folder = layout.table(TABLE)
    folder.mkdir(parents=True, exist_ok=True)
    target = layout.part(TABLE, writer_id)
    work = folder / f".{target.name}.tmp"  # layout.TEMP_GLOB: recovery removes a leftover
    con = _connect()
    try:
        define_views(con, root)

        def batches() -> Iterator[Any]:
            for _ in chunks(con, writer_id if only_load else None):
                yield from con.sql(missing_sql(), params={"load_id": writer_id}
                                   ).to_arrow_reader(65536)

        rows = write_reader(work, TABLES[TABLE], batches())
    finally:
        con.close()
    if rows or not layout.table_files(TABLE):
        if not rows:
            write_reader(work, TABLES[TABLE], iter(()), create_empty=True)
        durable.fsync_file(work)
        os.replace(work, target)
        durable.fsync_dir(folder)
    else:
        work.unlink(missing_ok=True)
    return rows


def _connect() -> duckdb.DuckDBPyConnection:
    """A connection for storing, rebuilding or checking contexts: DuckDB within the commit's
    memory limit (``KIDATA_COMMIT_MEMORY``), spilling beyond it."""
    from kidata.core import config

    return engine.connect({"memory_limit": config.current().commit_memory})


# The columns a stored row gives series_context, compared by check().
GIVEN = ("together_implementations", "together_log_change", "session_workloads",
         "session_log_median", "echo_up", "echo_down")


def check(root: Path) -> list[str]:
    """The stored contexts that readers use (their fingerprint holds) and that differ from
    what is computed afresh: one problem naming how many and a few steps, or none. A few
    groups at a time, as :func:`derive`."""
    if not Layout(root).table_files(TABLE):
        return []
    con = _connect()
    bad: list[tuple[str, str]] = []
    try:
        define_views(con, root)
        ignore_stored(con)  # the stored rows against every context computed afresh
        same = " AND ".join(
            f"(c.{col} IS NOT DISTINCT FROM f.{col} OR coalesce(abs(c.{col} - f.{col}) <= "
            f"1e-9 * greatest(abs(c.{col}), abs(f.{col})), FALSE))" for col in GIVEN)
        for _ in chunks(con):
            # The stored rows a reader uses (the same run, metric, family, hour, count and
            # sum as the step now), against the contexts computed afresh, in one pass.
            bad += con.execute(f"""
                SELECT c.run_id, c.metric FROM _stored_context c
                JOIN series_context f
                    ON f.previous_run_id IS NOT NULL AND f.run_id = c.run_id
                    AND f.metric = c.metric AND f.family IS NOT DISTINCT FROM c.family
                    AND f.observed_hour = c.context_hour AND f.context_runs = c.context_runs
                    AND f.context_key = c.context_key
                WHERE NOT ({same})
                ORDER BY c.run_id, c.metric
            """).fetchall()
    finally:
        con.close()
    if not bad:
        return []
    examples = ", ".join(f"{run} ({metric})" for run, metric in bad[:3])
    return [f"step_context: {len(bad):,} stored contexts in use differ from what their steps "
            f"give, e.g. {examples} (trends and regressions would attribute those steps "
            "wrongly; kidata check --repair stores them again)"]


def write_empty(path: Path) -> int:
    """Write ``step_context`` with no row at ``path`` (what an unload leaves: see
    :func:`kidata.store.unload.unload`). Returns 0."""
    from kidata.store.pqwrite import write_reader

    return write_reader(path, TABLES[TABLE], iter(()), create_empty=True)


def rebuild(root: Path, writer_id: str, *, if_files: int = 2, afresh: bool = False
            ) -> tuple[int, int] | None:
    """Replace ``step_context`` by one file holding the context of every step now (the stored
    rows that hold, the others computed; ``afresh``: every one computed, stored rows unread),
    tagged ``writer_id``: what ``kidata compact`` does, a load's compaction once the table has
    ``if_files`` files, and ``kidata check --repair`` (afresh). Rows no longer used go.
    Under the writer lock. Returns (files before, rows written), or None when there was
    nothing to do: no file, fewer than ``if_files``, or (not afresh) one whose rows are all in
    use with no context left to compute."""
    from kidata.store import commit
    from kidata.store.pqwrite import write_reader

    layout = Layout(root)
    files = layout.table_files(TABLE)
    if not files or len(files) < if_files:
        return None
    con = _connect()
    try:
        define_views(con, root)
        if afresh:
            ignore_stored(con)
        elif len(files) == 1:
            [(before,)] = con.execute("SELECT count(*) FROM step_context").fetchall()
            used = steps = 0
            for _ in chunks(con):
                [(n, m)] = con.execute(
                    f"SELECT count(*) FILTER (WHERE context_stored), "
                    f"count(*) FILTER (WHERE previous_run_id IS NOT NULL) FROM {VIEW}"
                ).fetchall()
                used, steps = used + n, steps + m
            if used == before == steps:
                return None
        query = (f"SELECT {_columns()}, $id AS load_id FROM {VIEW} "
                 "WHERE previous_run_id IS NOT NULL ORDER BY run_id, metric")

        def batches() -> Iterator[Any]:
            for _ in chunks(con):
                yield from con.sql(query, params={"id": writer_id}).to_arrow_reader(65536)

        def write(path: Path) -> int:
            return write_reader(path, TABLES[TABLE], batches(), create_empty=True)

        rows = commit.replace_table(root, TABLE, write, what=f"rebuild of {TABLE}",
                                    faults="contexts-")
    finally:
        con.close()
    return len(files), rows
