"""What the library offers without a warehouse: the input formats kidata reads, the views it
defines, converting files to kernelindex bundles, and reading the ``--set``/``--mapping``
options of a load.

:class:`kidata.Warehouse` is the facade over one warehouse; this module is its companion for
the work that needs none, so that ``kidata formats``, ``kidata views`` and ``kidata convert``
never import DuckDB (``kidata.warehouse`` does, at import). Everything here is imported where
it is used: importing this module costs nothing (``tests/cli/test_startup.py``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kidata.ingest.convert import ConvertReport


def formats() -> list[str]:
    """The input formats kidata reads, what each supplies and lacks, and the ``--set`` keys
    that supply it: the lines ``kidata formats`` prints."""
    from kidata.ingest.readers.field import describe

    return describe()


def views() -> dict[str, str]:
    """Every view kidata defines (``sql/*.sql``), by name, with its one-line purpose."""
    from kidata.core.viewfiles import load_views

    return {view.name: view.purpose for view in load_views().values()}


def read_options(settings: list[str] | None, mapping: str | os.PathLike[str] | None
                 ) -> tuple[dict[str, str] | None, str | None]:
    """``--set key=value`` pairs and a ``--mapping`` file as :meth:`kidata.Warehouse.load` and
    :func:`convert` take them: the settings as a dict (None for none), the mapping's path.
    A bad pair or a bad mapping raises a :class:`~kidata.errors.UsageError` before any file is
    read."""
    from kidata.ingest.readers.builder import Settings

    parsed = Settings.parse(settings)
    if mapping is not None:
        from kidata.ingest.mapping import load_mapping

        load_mapping(str(mapping))  # checked now: a bad mapping is a usage error
    return (parsed or None), (str(mapping) if mapping is not None else None)


def convert(paths: Iterable[str], output: str | os.PathLike[str], to: str = "kernelindex",
            format: str | None = None, settings: dict[str, str] | None = None,
            mapping: str | None = None) -> ConvertReport:
    """Convert records of any source kidata reads into kernelindex bundle files in the folder
    ``output``; see :func:`kidata.ingest.convert.convert`."""
    from kidata.ingest.convert import convert as convert_files

    return convert_files(paths, Path(output), to=to, format=format, settings=settings,
                         mapping=mapping)


def check_summary(report) -> str:
    """The one-line summary of a :meth:`kidata.Warehouse.check` report (tables, files and rows
    checked, ok or how many problems)."""
    from kidata.store.verify import summary

    return summary(report)


def engine_message(exc: BaseException) -> str | None:
    """The message of an error DuckDB or the file system raised while a result was being
    produced (a query's rows are computed as they are read: a failing cast, a file swapped by
    a compaction, a disk that fills), without the SQL excerpt DuckDB appends; None for any
    other exception (a bug, which should keep its traceback). Imports DuckDB only when it is
    already loaded."""
    import sys

    duckdb = sys.modules.get("duckdb")
    if duckdb is not None and isinstance(exc, duckdb.OutOfMemoryException):
        # DuckDB's advice (SET memory_limit, threads, ...) names settings a command's user
        # cannot reach; the one that bounds a reading session is KIDATA_QUERY_MEMORY.
        from kidata.core import config, engine

        limit = engine.query_memory()
        if limit:
            named = ("KIDATA_QUERY_MEMORY=" + limit if config.current().query_memory
                     else f"the default KIDATA_QUERY_MEMORY, {limit},")
            return (f"{str(exc).split(chr(10), 1)[0].strip()} ({named} is too small for this "
                    "query: raise it, or set it to none for DuckDB's own limit)")
    if duckdb is not None and isinstance(exc, duckdb.Error):
        from kidata.query.session import first_line

        return first_line(exc)
    if isinstance(exc, OSError):
        return str(exc)
    return None


def moment(value: str, option: str):
    """A ``--since``/``--until`` bound as a UTC time: ISO 8601, or a span back from now such as
    ``30d`` (:func:`kidata.core.window.moment`); a bad one is a usage error naming ``option``."""
    from kidata.core.window import moment as parse

    return parse(value, option)
