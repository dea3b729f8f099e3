"""Rows a query session worked out once and keeps in Parquet files for as long as it reads the
same snapshot: what a session computes rather than reads, costly to compute again on every
connection (the report closes its connection after each of its queries, so that DuckDB's
memory goes back), and big enough that DuckDB's memory limit is better left to the queries.

Under a ``--since``/``--until`` window (or where loads did not store their steps) a session
computes ``series_context`` (a few kernels at a time: :func:`kidata.store.contexts.compute`),
``rerun_changes`` and ``latest_runs``; at 1M runs, a report of half of them computed each for
every query that read it (52 s; 22 s with them kept: docs/benchmarks.md, Run AU).

The files live in a temporary folder of the session's own (:mod:`kidata.core.scratch`), removed
with the session and the connections whose views read them (or when the interpreter exits; a
killed process's by the next kidata process); a new snapshot (a load's commit) drops the files
of the old one (the session closes the connections of the old one).
"""

from __future__ import annotations

import itertools
import shutil
import weakref
from collections.abc import Callable
from pathlib import Path

import duckdb

from kidata.core import scratch
from kidata.core.sql import quote_identifier, quote_literal


class _Folder:
    """A scratch folder, removed when the last of its holders goes: the :class:`KeptRows` that
    made it and every connection whose views read its files (``Warehouse.connect()`` hands the
    session's connection to a caller, who may keep it longer than the warehouse object)."""

    def __init__(self) -> None:
        self.path = scratch.make("kept")
        # Removed when this object is collected, at the latest when the interpreter exits.
        weakref.finalize(self, shutil.rmtree, self.path, ignore_errors=True)


# Each connection with views over kept files, and the folder that holds them.
_readers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class KeptRows:
    """The relations one session keeps as files, for one snapshot at a time."""

    def __init__(self) -> None:
        self._state: object = None  # the snapshot the files are of
        self._files: dict[str, list[Path]] = {}
        self._folder: _Folder | None = None
        self._numbers = itertools.count()

    def define(self, con: duckdb.DuckDBPyConnection, name: str, state: object,
               work: Callable[[Path], list[Path]]) -> None:
        """Define (or replace) the view ``name`` on ``con`` as the rows kept for the snapshot
        ``state``: those an earlier connection kept, else the files ``work`` writes into the
        (new) folder it is given."""
        if state != self._state:
            self.drop()
            self._state = state
        files = self._files.get(name)
        if files is None:
            folder = self._root() / f"{name}-{next(self._numbers)}"
            try:
                files = work(folder)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            self._files[name] = files
        sources = ", ".join(quote_literal(str(f)) for f in files)
        con.execute(f"CREATE OR REPLACE VIEW {quote_identifier(name)} AS "
                    f"SELECT * FROM read_parquet([{sources}])")
        _readers[con] = self._folder

    def drop(self) -> None:
        """Remove every file kept (the folder stays for the next snapshot's)."""
        for files in self._files.values():
            if files:
                shutil.rmtree(files[0].parent, ignore_errors=True)
        self._files.clear()
        self._state = None

    def _root(self) -> Path:
        if self._folder is None:
            self._folder = _Folder()
        return self._folder.path


def copy_to(con: duckdb.DuckDBPyConnection, relation: str) -> Callable[[Path], list[Path]]:
    """A ``work`` for :meth:`KeptRows.define`: the rows of ``relation`` (SQL) in one file."""

    def work(folder: Path) -> list[Path]:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "rows.parquet"
        con.execute(f"COPY ({relation}) TO {quote_literal(str(path))} (FORMAT parquet)")
        return [path]

    return work
