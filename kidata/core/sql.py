"""SQL text helpers every layer shares: quoting identifiers and literals, DuckDB's type for an
Arrow type, ``read_parquet(...)`` over a folder, and several selects as one statement.

They build text only (no connection, no warehouse), so the store, which writes SQL for its
commits, and the query layer, which binds views, use the same helpers without one importing
the other.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa


def quote_identifier(name: str) -> str:
    """Quote an identifier for SQL (the one helper every identifier goes through)."""
    return '"' + name.replace('"', '""') + '"'


def quote_literal(text: str) -> str:
    """Quote a string literal for SQL, for the places where DuckDB takes no parameter (paths
    in ``CREATE VIEW``)."""
    return "'" + text.replace("'", "''") + "'"


def union_all(selects: Iterable[str]) -> str:
    """One statement of several ``SELECT``s with the same columns, their rows together: where
    each would be a statement of its own, which costs DuckDB milliseconds however few rows it
    reads."""
    return " UNION ALL ".join(f"({select})" for select in selects)


@cache
def _duck_types() -> dict:
    import pyarrow as pa

    return {
        pa.string(): "VARCHAR",
        pa.float64(): "DOUBLE",
        pa.int64(): "BIGINT",
        pa.bool_(): "BOOLEAN",
    }


def duckdb_type(type_: pa.DataType) -> str:
    """The DuckDB type of an Arrow type (pyarrow is imported here, on first use: a query
    process that never asks lists views without loading Arrow)."""
    import pyarrow as pa

    if pa.types.is_timestamp(type_):
        return "TIMESTAMP WITH TIME ZONE" if type_.tz else "TIMESTAMP"
    return _duck_types()[type_]


_GLOB_CHARS = set("*?[]{}")


def parquet_source(folder: Path, pattern: str = "*.parquet") -> str:
    """``read_parquet(...)`` over the files of ``folder`` matching ``pattern``.

    A glob keeps later files visible to a saved script; but DuckDB would read glob characters
    in the folder's own path (``/tmp/wh [x]``) as a pattern, so such paths list their files.
    """
    if _GLOB_CHARS.isdisjoint(str(folder)):
        return f"read_parquet({quote_literal(str(folder / pattern))}, union_by_name = true)"
    files = ", ".join(quote_literal(str(p)) for p in sorted(folder.glob(pattern)))
    return f"read_parquet([{files}], union_by_name = true)"
