"""DuckDB connections as kidata opens them.

Every connection kidata makes goes through :func:`connect`, so that they all share the settings
that keep a query from reaching outside the warehouse on its own: DuckDB's automatic install
and load of extensions are off (a query naming ``sqlite_scan`` would otherwise download an
extension from the network). The extensions kidata needs (parquet, json, icu) are built in.

:func:`fetch_retrying` is the one rule for reading table folders without the writer lock, used
by the store's bookkeeping and by the query session alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import duckdb

SETTINGS = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}

# Times a reader lists a table folder again when a compaction swapped it while being read.
SWAP_RETRIES = 5


def connect(config: dict[str, Any] | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with kidata's settings (plus ``config``). It spills,
    beyond its memory limit, into a scratch folder of its own under the system's temporary
    directory (:mod:`kidata.core.scratch`) unless ``config`` names a ``temp_directory``:
    DuckDB's default, ``.tmp`` in the working directory, would write beside the user's files,
    and fail where that folder is read-only. Its progress bar is off: a long statement (a
    commit, a compaction) would draw it on standard output, into the command's own output.
    (It is a session setting: DuckDB refuses it in ``config``.)"""
    from kidata.core import scratch

    config = config or {}
    spill = {} if "temp_directory" in config else {"temp_directory": scratch.name("duckdb")}
    con = duckdb.connect(config={**SETTINGS, **spill, **config})
    con.execute("SET enable_progress_bar = false")
    return con


def give_back(con: duckdb.DuckDBPyConnection, limit: str | None = None) -> None:
    """Hand back to the system the memory DuckDB's allocator keeps after the statements of
    ``con`` finished: setting the memory limit flushes the allocator (DuckDB 2.0), here to
    ``limit`` (the one ``con`` was opened with), else to the limit as DuckDB shows it (which
    rounds it to 0.1 MiB). Worth it between a costly statement and the next: after working out
    ``noise_envelopes`` at 1M runs a process held 149 MB, 79 MB after this (docs/benchmarks.md,
    Run AX)."""
    if limit is None:
        limit = con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
    con.execute("SET memory_limit = $limit", {"limit": limit})


# The reading sessions' memory limit when KIDATA_QUERY_MEMORY is unset, in MB: enough for the
# stored series steps' queries at 1M runs with no spilling (Run AR), more on a machine whose
# DuckDB runs more threads (each needs room for its own buffers).
DEFAULT_QUERY_MB = 300
DEFAULT_QUERY_MB_PER_CORE = 75


def query_memory() -> str | None:
    """The memory limit of a session that reads the warehouse: ``KIDATA_QUERY_MEMORY``, by
    default the larger of :data:`DEFAULT_QUERY_MB` and :data:`DEFAULT_QUERY_MB_PER_CORE` per
    core; None for ``none`` (DuckDB's own, 80% of RAM)."""
    import os

    from kidata.core import config

    limit = config.current().query_memory
    if limit is None:
        cores = os.cpu_count() or 1
        return f"{max(DEFAULT_QUERY_MB, DEFAULT_QUERY_MB_PER_CORE * cores)}MB"
    return None if limit == "none" else limit


def reading_settings() -> dict[str, Any]:
    """The settings of a connection that reads the warehouse (queries, views, exports):
    :func:`query_memory`'s memory limit (it spills beyond it into its own folder, as every
    connection of :func:`connect` does). Empty for ``KIDATA_QUERY_MEMORY=none``: DuckDB's own
    limit."""
    limit = query_memory()
    return {} if limit is None else {"memory_limit": limit}


def fetch_retrying(con: duckdb.DuckDBPyConnection, sql: Callable[[], str],
                   params: dict[str, Any] | None = None) -> list[tuple]:
    """The rows of a query over table folders read without the writer lock: when a compaction
    swapped a folder between listing and reading it, the query (``sql()``) is made again."""
    for attempt in range(SWAP_RETRIES):
        try:
            return con.execute(sql(), params).fetchall()
        except duckdb.IOException:
            if attempt == SWAP_RETRIES - 1:
                raise
    raise AssertionError("unreachable")
