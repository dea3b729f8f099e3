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

from kidata.core import engine, scratch
from kidata.core.sql import quote_identifier, quote_literal
from kidata.store import contexts


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
            engine.give_back(con, engine.query_memory())  # before the query that reads them
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


# The most rows of its source one statement of copy_pooled's hands an aggregate that keeps
# every value (a percentile; DuckDB cannot spill its state): ~16 MB of doubles.
POOL_ROWS = 2_000_000
_POOLS = "_kidata_pool_batch"


def copy_pooled(con: duckdb.DuckDBPyConnection, body: str, source: str, keys: tuple[str, ...],
                values: tuple[str, ...], most: int | None = None
                ) -> Callable[[Path], list[Path]]:
    """A ``work`` for :meth:`KeptRows.define`: the rows of ``body``, SQL that reads the relation
    ``source`` (its columns ``keys`` and ``values``) and groups it by ``keys``, worked out a few
    groups at a time, each batch's groups holding at most ``most`` (:data:`POOL_ROWS`) rows of
    ``source`` together (a group with more is a batch of its own). ``source``'s columns are
    first copied to a file of the folder, in one pass; each batch then reads the body over its
    own groups' rows of it (a view named ``source`` in a schema of its own shadows the
    session's). The rows are the body's over all of ``source``, as long as the body computes
    each group from that group's rows alone."""

    def work(folder: Path) -> list[Path]:
        folder.mkdir(parents=True, exist_ok=True)
        rows = quote_literal(str(folder / "_source.parquet"))
        names = ", ".join(quote_identifier(c) for c in keys + values)
        key_list = ", ".join(quote_identifier(k) for k in keys)
        con.execute(f"COPY (SELECT {names} FROM {quote_identifier(source)}) TO {rows} "
                    "(FORMAT parquet)")
        counts = con.execute(f"SELECT {key_list}, COUNT(*) FROM read_parquet({rows}) "
                             f"GROUP BY ALL ORDER BY ALL").fetchall()
        groups = f"{_POOLS}_groups"
        con.execute(f"CREATE SCHEMA {_POOLS}")
        files: list[Path] = []
        try:
            con.execute(f"CREATE TEMP TABLE {groups} AS SELECT {key_list} FROM "
                        f"read_parquet({rows}) LIMIT 0")
            same = " AND ".join(f"g.{k} IS NOT DISTINCT FROM s.{k}"
                                for k in map(quote_identifier, keys))
            con.execute(f"""CREATE VIEW {_POOLS}.{quote_identifier(source)} AS
                SELECT * FROM read_parquet({rows}) s
                WHERE EXISTS (SELECT 1 FROM {groups} g WHERE {same})""")
            con.execute(f"CREATE VIEW {_POOLS}._rows AS {body}")
            # With no rows at all, one batch of no groups: a file of the body's columns.
            plan = list(contexts.batched(counts, most or POOL_ROWS, keys=len(keys)))
            for number, batch in enumerate(plan or [[]]):
                con.execute(f"DELETE FROM {groups}")
                if batch:
                    marks = ", ".join("?" for _ in keys)
                    con.executemany(f"INSERT INTO {groups} VALUES ({marks})", batch)
                path = folder / f"rows-{number:05d}.parquet"
                con.execute(f"COPY (SELECT * FROM {_POOLS}._rows) TO "
                            f"{quote_literal(str(path))} (FORMAT parquet)")
                files.append(path)
        finally:
            con.execute(f"DROP SCHEMA IF EXISTS {_POOLS} CASCADE")
            con.execute(f"DROP TABLE IF EXISTS {groups}")
            (folder / "_source.parquet").unlink(missing_ok=True)
        return files

    return work

