"""DuckDB connections as kidata opens them.

Every connection kidata makes goes through :func:`connect`, so that they all share the settings
that keep a query from reaching outside the warehouse on its own: DuckDB's automatic install
and load of extensions are off (a query naming ``sqlite_scan`` would otherwise download an
extension from the network). The extensions kidata needs (parquet, json, icu) are built in.
"""

from __future__ import annotations

from typing import Any

import duckdb

SETTINGS = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}


def connect(config: dict[str, Any] | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with kidata's settings (plus ``config``)."""
    return duckdb.connect(config={**SETTINGS, **(config or {})})
