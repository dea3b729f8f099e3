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
    """An in-memory DuckDB connection with kidata's settings (plus ``config``). Its progress
    bar is off: a long statement (a commit, a compaction) would draw it on standard output,
    into the command's own output. (It is a session setting: DuckDB refuses it in ``config``.)"""
    con = duckdb.connect(config={**SETTINGS, **(config or {})})
    con.execute("SET enable_progress_bar = false")
    return con


def reading_settings() -> dict[str, Any]:
    """The settings of a connection that reads the warehouse (queries, views, exports):
    ``KIDATA_QUERY_MEMORY``'s memory limit when set, with a temporary folder of the
    connection's own to spill to (DuckDB makes it when it first spills and removes it when the
    connection closes; its default, ``.tmp`` in the working directory, would write beside the
    user's files). Empty when unset: DuckDB's own limit."""
    import os
    import tempfile
    import uuid

    from kidata.core import config

    limit = config.current().query_memory
    if limit is None:
        return {}
    folder = os.path.join(tempfile.gettempdir(), f"kidata-spill-{os.getpid()}-{uuid.uuid4().hex}")
    return {"memory_limit": limit, "temp_directory": folder}


def fetch_retrying(con: duckdb.DuckDBPyConnection, sql: Callable[[], str],
                   params: dict[str, Any] | None = None) -> list[tuple]:
    """The rows of a query over table folders read without the writer lock: when a compaction
    swapped a folder between listing and reading it, the query (``sql()``) is made again."""
    for attempt in range(SWAP_RETRIES):
        try:
            return con.sql(sql(), params=params).fetchall()
        except duckdb.IOException:
            if attempt == SWAP_RETRIES - 1:
                raise
    raise AssertionError("unreachable")
