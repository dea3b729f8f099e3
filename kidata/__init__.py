"""kidata: a columnar dataset and SQL query toolkit for GPU-kernel benchmark results.

    >>> import kidata
    >>> wh = kidata.Warehouse("warehouse")
    >>> report = wh.load(["tests/data/seeds"])
    >>> wh.sql("select * from speedups").pl()

Heavy imports (DuckDB, Arrow) happen on first use, so the CLI starts fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.3.34"

if TYPE_CHECKING:
    from kidata.errors import KidataError, QueryError, RecordError, UsageError
    from kidata.warehouse import LoadReport, Warehouse

_LAZY = {
    "Warehouse": "kidata.warehouse",
    "LoadReport": "kidata.warehouse",
    "KidataError": "kidata.errors",
    "RecordError": "kidata.errors",
    "QueryError": "kidata.errors",
    "UsageError": "kidata.errors",
}

__all__ = ["KidataError", "LoadReport", "QueryError", "RecordError", "UsageError", "Warehouse",
           "__version__"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'kidata' has no attribute {name!r}")
