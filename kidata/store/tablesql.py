"""The ``SELECT`` that reads one stored table: its Parquet files, or an empty relation of the
table's declared columns when it has none yet. Every engine binding and every commit that
reads a table's current rows starts from it.

A warehouse of layout 1 (kidata 0.1-0.3.13; :mod:`kidata.store.upgrade`) keeps each run's
document in its ``runs`` row: read here as it is now stored, ``runs`` without the column and
``run_documents`` from the runs files, until a writer upgrades the warehouse.
"""

from __future__ import annotations

from pathlib import Path

from kidata.core.sql import parquet_source, quote_identifier
from kidata.store.commit import check_layout
from kidata.store.layout import PARQUET_GLOB, Layout


def documents_in_runs(warehouse: Path) -> bool:
    """Whether the warehouse keeps each run's document in its ``runs`` row (layout 1, until a
    writer upgrades it), so that ``run_documents`` is read from the ``runs`` files: here, in
    ``kidata check`` and in Spark."""
    return check_layout(warehouse) == 1


def steps_unread(warehouse: Path) -> bool:
    """Whether the warehouse's ``step_context`` files are in the format of kidata 0.3.7-0.3.14
    (fingerprinted contexts, layouts 1-2, until a writer upgrades it), which this kidata reads
    as an empty table: here and in ``kidata check``."""
    return check_layout(warehouse) < 3


def table_sql(warehouse: Path, table: str) -> str:
    """The ``SELECT`` that reads one table: its Parquet files, or an empty typed relation."""
    from kidata.store.schema import COLUMNS, DUCKDB_TYPES

    layout = Layout(warehouse)
    folder = layout.table(table)
    in_runs = table in ("runs", "run_documents") and documents_in_runs(warehouse)
    if in_runs and table == "run_documents":
        folder = layout.table("runs")
    old_steps = table == "step_context" and steps_unread(warehouse)
    if any(folder.glob(PARQUET_GLOB)) and not old_steps:
        if not in_runs:
            return f"SELECT * FROM {parquet_source(folder)}"
        if table == "runs":
            return f"SELECT * EXCLUDE (document) FROM {parquet_source(folder)}"
        cols = ", ".join(quote_identifier(c.name) for c in COLUMNS["run_documents"])
        return f"SELECT {cols} FROM {parquet_source(folder)}"
    cols = ", ".join(f"CAST(NULL AS {DUCKDB_TYPES[c.type]}) AS {quote_identifier(c.name)}"
                     for c in COLUMNS[table])
    return f"SELECT {cols} WHERE 1 = 0"
