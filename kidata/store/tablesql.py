"""The ``SELECT`` that reads one stored table: its Parquet files, or an empty relation of the
table's declared columns when it has none yet. Every engine binding and every commit that
reads a table's current rows starts from it.
"""

from __future__ import annotations

from pathlib import Path

from kidata.core.sql import parquet_source, quote_identifier
from kidata.store.layout import PARQUET_GLOB, Layout


def table_sql(warehouse: Path, table: str) -> str:
    """The ``SELECT`` that reads one table: its Parquet files, or an empty typed relation."""
    from kidata.store.schema import COLUMNS, DUCKDB_TYPES

    folder = Layout(warehouse).table(table)
    if any(folder.glob(PARQUET_GLOB)):
        return f"SELECT * FROM {parquet_source(folder)}"
    cols = ", ".join(f"CAST(NULL AS {DUCKDB_TYPES[c.type]}) AS {quote_identifier(c.name)}"
                     for c in COLUMNS[table])
    return f"SELECT {cols} WHERE 1 = 0"
