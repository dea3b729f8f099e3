"""A query session over a warehouse: one cached DuckDB connection with the tables (kidata's
snapshot of the committed loads, :mod:`kidata.store.snapshot`) and the ``sql/*.sql`` views
defined, renewed when a load commits or a table folder changes.

A compaction may swap a table folder between the listing of its files and their reading: the
session then lists again (up to :data:`SWAP_RETRIES` times) while a query is planned.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

import duckdb

from kidata.core import config, engine, viewfiles
from kidata.core.engine import SWAP_RETRIES
from kidata.core.sql import quote_identifier, quote_literal, union_all
from kidata.core.window import Window
from kidata.errors import NoSuchView, QueryError
from kidata.query import kept
from kidata.query import views as views_mod
from kidata.store import contexts, reference, snapshot
from kidata.store.layout import Layout
from kidata.store.schema import COLUMNS

# Views worked out once per snapshot, past contexts.CHUNK_RUNS runs, and kept in files
# (kidata.query.kept) for every connection of the session, with what they read: the relation,
# the columns their groups are keyed by and the other columns they read of it.
# noise_envelopes: a few dozen rows from every re-run, which the comparing and series views
# join. Worked out inside each query that read it, it read the steps a second time beside the
# query's own reading, and its percentiles held every re-run's change at once (memory DuckDB
# cannot spill: 10M changes ran it out of the default 300MB at 10M runs); the report, which
# opens a connection per query, worked it out in each (docs/benchmarks.md, Run AX). Kept, it
# is worked out a few pools at a time (kept.copy_pooled) past kept.POOL_ROWS runs.
KEPT_VIEWS = {
    "noise_envelopes": ("rerun_changes", ("source", "gpu", "size_decade"), ("log_change",)),
}

# Views a session opened with ``across`` keeps in files the same way, past a number of rows of
# the table they rank (with that table and number): for a command that reads them on several
# connections, as the report does (one per query). latest_latencies ranks every head of
# latest_runs, and a key has one per load that measured it (docs/benchmarks.md, Run BJ). Other
# sessions read the view, which DuckDB can narrow to a query's filters and a one-query process
# never copies.
KEPT_PAST = {"latest_latencies": ("latest_runs", 200_000)}


class Queryable(Protocol):
    """What the query layer's functions (analysis, bundles, the report) need of a warehouse:
    its SQL and its summary. A :class:`Session` is one, and so is a :class:`kidata.Warehouse`
    (library users pass one to ``kidata.analysis``); neither is imported by those functions."""

    def sql(self, query: str, params: dict[str, Any] | list | None = None, *,
            read_only: bool = False) -> duckdb.DuckDBPyRelation: ...

    def rows(self, query: str, params: dict[str, Any] | list | None = None, *,
             read_only: bool = False) -> list[tuple]: ...

    def info(self) -> dict[str, Any]: ...

    def keep(self, view: str) -> None: ...

    def release(self) -> None: ...


class Session:
    """Queries over the warehouse at :attr:`path`; ``require`` raises unless it is one."""

    def __init__(self, path: Path, require: Callable[[], None], window: Window | None = None,
                 min_effect: float | None = None, across: Iterable[str] = ()):
        self.path = path
        self.require = require
        self.window = window  # the results measured in it only (kidata.core.window)
        # The verdict rule's minimum effect (verdict_settings): None is KIDATA_MIN_EFFECT's,
        # else the view's own 0.10.
        self.min_effect = min_effect
        # Views of KEPT_PAST this session keeps in files past their number of rows.
        self.across = frozenset(across)
        self._con: duckdb.DuckDBPyConnection | None = None
        self._con_state: tuple | None = None
        self._con_views: set[str] = set()  # the views defined on _con
        self._con_stored: bool | None = None  # whether _con reads the stored steps
        self._con_sizes: list[tuple] | None = None  # _large's answer for _con
        self._con_rows: dict[str, int] = {}  # _rows' answers for _con
        # Computed rows kept in files across the connections of one snapshot (_keep).
        self._kept = kept.KeptRows()

    @property
    def cached(self) -> duckdb.DuckDBPyConnection | None:
        """The connection queries use now (None before the first)."""
        return self._con

    def forget(self) -> None:
        """Open a fresh connection on the next query: files under the warehouse changed in a
        way the cached one would not notice (a load, compaction, repair)."""
        self._con_state = None
        self._kept.drop()

    def close(self) -> None:
        """Close the cached connection, so that DuckDB's memory goes back to the system (after
        the report's queries at 1M runs, ~250 MB that its figures would otherwise be drawn
        beside); the next query opens a new one. What the connection held goes with it: the
        views kept (:meth:`keep`) and any temporary table made through :meth:`sql`; the rows
        kept in files (:meth:`_keep`) stay for the next."""
        if self._con is not None:
            self._con.close()
            self._con = None
        self._con_state = None

    def table_files(self, table: str) -> list[Path]:
        return Layout(self.path).table_files(table)

    def names(self) -> dict[str, str]:
        """Every table and view name, with ``table`` or ``view``."""
        out = dict.fromkeys(COLUMNS, "table")
        out.update(dict.fromkeys(viewfiles.load_views(), "view"))
        return out

    def ready(self, views: list[str] | None = None, query: str | None = None
              ) -> duckdb.DuckDBPyConnection:
        """The cached connection with every table and ``views`` (None: all) defined, for
        ``query`` when given (what it reads may be kept: :meth:`_keep_latest_runs`).

        A query defines only the views it names and the views those read
        (:func:`kidata.query.views.needed`): defining all of them costs ~0.1 s, the better part
        of a one-query process."""
        wanted = list(viewfiles.load_views()) if views is None else views
        for attempt in range(SWAP_RETRIES):
            con = self._tables()
            try:
                # latest_runs first: a view kept past a size (KEPT_PAST) is worked out as it
                # is defined, and would otherwise rank a window's runs for it a second time.
                if query is not None and views is not None:
                    self._keep_latest_runs(con, views, query)
                for name in wanted:
                    self._define(con, name)
            except duckdb.IOException as exc:
                # A compaction swapped a table folder between listing and reading it (the
                # views read file schemas when defined): define everything again.
                self._con_state = None
                if attempt == SWAP_RETRIES - 1:
                    raise QueryError(str(exc)) from None
                continue
            return con
        raise AssertionError("unreachable")

    def _define(self, con: duckdb.DuckDBPyConnection, name: str) -> None:
        """Define the view ``name`` on ``con`` unless it is: from its own file, or, where every
        load stored its steps and the session reads the warehouse as it is now, from its
        ``sql/stored/`` file (:mod:`kidata.store.contexts`), after the views that one reads;
        otherwise, past a size, ``series_context`` and ``rerun_changes`` kept as files
        (:meth:`_keep`); past a size, :data:`KEPT_VIEWS` kept as files whatever the window, and
        the views of :data:`KEPT_PAST` this session was opened ``across``."""
        if name in self._con_views:
            return
        view = viewfiles.load_views()[name]
        if name in viewfiles.stored_views():
            if self._con_stored is None:
                self._con_stored = self.window is None and contexts.readable(con)
            if self._con_stored:
                view = viewfiles.stored_views()[name]
                for dep in view.depends:
                    self._define(con, dep)
            elif self._keep(con, name):
                self._con_views.add(name)
                return
        work = self._kept_work(con, name, view.body)
        if work is not None:
            for dep in view.depends:
                self._define(con, dep)
            self._kept.define(con, name, self._con_state, work)
            self._con_views.add(name)
            return
        body = self._settings_body() if name == "verdict_settings" else None
        try:
            con.execute(f"CREATE VIEW {view.name} AS {body or view.body}")
        except duckdb.IOException:
            raise
        except duckdb.Error as exc:
            raise QueryError(f"view {view.name} ({view.path}) is invalid: {exc}") from None
        self._con_views.add(name)

    def _kept_work(self, con: duckdb.DuckDBPyConnection, name: str, body: str
                   ) -> Callable[[Path], list[Path]] | None:
        """How to keep the view ``name`` (SQL ``body``) in files, None to define it as a view:
        :data:`KEPT_VIEWS` past ``contexts.CHUNK_RUNS`` runs, :data:`KEPT_PAST` past its
        number of rows in a session opened ``across`` it."""
        if name in self.across:
            table, most = KEPT_PAST[name]
            return kept.copy_to(con, body) if self._rows(con, table) > most else None
        if name not in KEPT_VIEWS:
            return None
        runs = self._rows(con, "runs")
        if runs <= contexts.CHUNK_RUNS:
            return None
        # In batches of pools only where one statement could hold too many values: the copy
        # and the batches cost ~1 s at 10M runs (docs/benchmarks.md, Run AX).
        return (kept.copy_pooled(con, body, *KEPT_VIEWS[name]) if runs > kept.POOL_ROWS
                else kept.copy_to(con, body))

    def _keep(self, con: duckdb.DuckDBPyConnection, name: str) -> bool:
        """Define the computed ``name`` (``series_context``, a few kernels at a time, or
        ``rerun_changes``) on ``con`` as rows kept in files (:mod:`kidata.query.kept`) when
        this session computes over more than ``contexts.CHUNK_RUNS`` runs; False otherwise
        (the view is then worked out as queried: DuckDB may push a query's filters into it)."""
        counts = self._large(con)
        if counts is None:
            return False
        work = ((lambda folder: contexts.compute(con, folder, counts)) if name == contexts.VIEW
                else kept.copy_to(con, viewfiles.load_views()[name].body))
        self._kept.define(con, name, self._con_state, work)
        return True

    def _keep_latest_runs(self, con: duckdb.DuckDBPyConnection, views: list[str],
                          query: str) -> None:
        """Under a window ``latest_runs`` is computed from the window's runs (its stored rows
        are each load's latest of all its runs: :mod:`kidata.store.snapshot`): keep its rows
        (:mod:`kidata.query.kept`) past ``contexts.CHUNK_RUNS`` runs, when ``query`` or one
        of the ``views`` it reads reads it."""
        table = "latest_runs"
        if self.window is None or f"kept:{table}" in self._con_views:
            return
        found = viewfiles.load_views()
        if not (table in re.findall(r"\w+", query.lower())
                or any(table in found[v].sources for v in views)):
            return
        if self._large(con) is not None:
            self._kept.define(con, table, self._con_state,
                              kept.copy_to(con, f"SELECT * FROM {table}"))
            self._con_views.add(f"kept:{table}")

    def _large(self, con: duckdb.DuckDBPyConnection) -> list[tuple] | None:
        """:func:`kidata.store.contexts.sizes` of ``con`` when its passed runs with a time
        are more than ``contexts.CHUNK_RUNS``, else None (asked once per connection)."""
        if self._con_sizes is None:
            counts = contexts.sizes(con)
            self._con_sizes = (counts if sum(row[3] for row in counts) > contexts.CHUNK_RUNS
                               else [])
        return self._con_sizes or None

    def _rows(self, con: duckdb.DuckDBPyConnection, table: str) -> int:
        """The rows of the warehouse's ``table`` (as stored: a window does not narrow it),
        counted from its files' Parquet footers (once per connection): no scan, where
        :meth:`_large` counts the passed runs with a time (and no pyarrow import, ~35 MB for a
        one-query CLI process)."""
        if table not in self._con_rows:
            files = [str(p) for p in self.table_files(table)]
            self._con_rows[table] = con.execute(
                "SELECT COALESCE(SUM(num_rows), 0) FROM parquet_file_metadata(?)", [files]
            ).fetchall()[0][0] if files else 0
        return self._con_rows[table]

    def _settings_body(self) -> str | None:
        """The ``verdict_settings`` view's body for this session's minimum effect, None for the
        view's own."""
        effect = self.min_effect if self.min_effect is not None else config.current().min_effect
        return None if effect is None else \
            f"SELECT CAST({float(effect)!r} AS DOUBLE) AS min_effect"

    def _tables(self) -> duckdb.DuckDBPyConnection:
        """The cached connection with the tables defined (a new one after a load committed
        or a table folder was created); views are :meth:`ready`'s."""
        self.require()
        state = (tuple(bool(self.table_files(t)) for t in COLUMNS),
                 snapshot.marker_state(self.path))
        if self._con is not None and self._con_state == state:
            return self._con
        if self._con is not None:
            self._con.close()
            self._con = None
        for attempt in range(SWAP_RETRIES):
            con = engine.connect(engine.reading_settings())
            try:
                # Tables show only rows of committed loads: a consistent state mid-commit.
                snapshot.define(con, self.path, self.window)
                reference.define(con, self.path)
            except duckdb.IOException as exc:
                con.close()  # a compaction swapped a folder mid-listing: again
                if attempt == SWAP_RETRIES - 1:
                    raise QueryError(str(exc)) from None
                continue
            except duckdb.Error as exc:
                # A table file that is not Parquet (planted, half-copied): every table is
                # defined up front, so name the file and the way to find every such problem.
                con.close()
                raise QueryError(f"cannot read the warehouse's tables: {first_line(exc)} "
                                 "(kidata check lists every unreadable file)") from None
            self._con, self._con_state, self._con_views = con, state, set()
            self._con_stored = self._con_sizes = None
            self._con_rows = {}
            return con
        raise AssertionError("unreachable")

    def release(self) -> None:
        """Hand back to the system the memory DuckDB's allocator keeps after this session's
        statements (:func:`kidata.core.engine.give_back`), keeping the connection and what it
        holds: between costly statements whose rows Python keeps meanwhile (compare's, at 10M
        runs 394 MB held after the first of them, 126 MB after this)."""
        if self._con is not None:
            engine.give_back(self._con, engine.query_memory())

    def keep(self, view: str) -> None:
        """Compute ``view`` once, now, and answer every later query of this session that
        reads it from those rows (:func:`kidata.query.views.keep`): for a command that asks
        one costly view several questions. Answers are the same; a new snapshot (a commit)
        starts without it."""
        query = f"SELECT * FROM {view}"
        views_mod.keep(self.ready(views_mod.needed(query), query), view)

    def sql(self, query: str, params: dict[str, Any] | list | None = None, *,
            read_only: bool = False) -> duckdb.DuckDBPyRelation:
        """Run SQL over the tables and views; returns a DuckDB relation (``.pl()``,
        ``.arrow()``, ``.fetchall()``). Errors become :class:`QueryError` with DuckDB's text.
        With ``read_only``, statements that could write are refused
        (:mod:`kidata.query.readonly`)."""
        return self._run(query, lambda con: con.sql(query, params=params), read_only)

    def rows(self, query: str, params: dict[str, Any] | list | None = None, *,
             read_only: bool = False) -> list[tuple]:
        """The rows of ``query`` at once, as :meth:`sql` runs it (the same views, errors and
        ``read_only``), without a relation: DuckDB binds a relation when it is made and again
        when it runs, which on a few rows is a quarter of a deep view's time (``SELECT
        count(*) FROM speedups`` over the seeds: 48 ms as a relation, 36 ms so). For
        answers fetched whole; a large one streams better through :meth:`sql`."""
        return self._run(query, lambda con: con.execute(query, params).fetchall(), read_only)

    def _run(self, query: str, run: Callable[[duckdb.DuckDBPyConnection], Any],
             read_only: bool) -> Any:
        """``run`` on the connection with what ``query`` reads defined."""
        views = views_mod.needed(query)
        # Parsed (and, read-only, checked) before the views are defined: defining them may
        # compute what they read (under a window at 1M runs, ~10 s), which a typo or a refused
        # statement should not wait for.
        tables = self._tables()
        if read_only:
            from kidata.query import readonly

            readonly.check(tables, query)
        else:
            try:
                tables.extract_statements(query)
            except duckdb.Error as exc:
                raise QueryError(with_closest_name(str(exc), self.names())) from None
        con = self.ready(views, query)
        views_mod.materialize(con, views)
        for attempt in range(SWAP_RETRIES):
            try:
                return run(con)
            except duckdb.IOException as exc:
                # As in ready(): a folder swapped by a compaction while the query was being
                # planned. Planning again lists the new files. (Once rows of a relation are
                # being fetched, such an error reaches the caller, who may run it again.)
                if attempt == SWAP_RETRIES - 1:
                    raise QueryError(str(exc)) from None
                self._con_state = None
                con = self.ready(views, query)
            except duckdb.Error as exc:
                raise QueryError(with_closest_name(str(exc), self.names())) from None
        raise AssertionError("unreachable")

    def relation(self, name: str) -> duckdb.DuckDBPyRelation:
        """A table or view by name."""
        if name not in self.names():
            raise NoSuchView(name, list(self.names()), closest_names(name, self.names()))
        return self.sql(f"SELECT * FROM {quote_identifier(name)}")

    def info(self) -> dict[str, Any]:
        """Tables with row and file counts, sources, GPUs and the time range of the runs."""
        counts = dict(self.rows(union_all(f"SELECT {quote_literal(table)}, count(*) FROM {table}"
                                          for table in COLUMNS)))  # one statement
        tables = {table: {"rows": counts[table], "files": len(self.table_files(table))}
                  for table in COLUMNS}
        sources = self.rows("SELECT coalesce(source, '(none)'), count(*) FROM runs "
                            "GROUP BY 1 ORDER BY 1")
        gpus = self.rows("SELECT gpu, count(*) FROM runs GROUP BY 1 ORDER BY 1")
        lo, hi = self.rows("SELECT min(observed_at), max(observed_at) FROM runs")[0]
        return {
            "warehouse": str(self.path),
            "tables": tables,
            "sources": dict(sources),
            "gpus": dict(gpus),
            "observed_from": lo,
            "observed_to": hi,
        }


def first_line(exc: BaseException) -> str:
    """DuckDB's message without the SQL excerpt it appends (the views' own SQL)."""
    return str(exc).split("\n\nLINE ", 1)[0].strip()


# DuckDB's message for a missing table or view, and its own guess (which picks among its
# catalog, where kidata's views not named by the query are not yet defined: it offered
# "pg_depend" for "speedup").
_MISSING = re.compile(r'^(?:Catalog Error: )?Table with name (?P<name>"[^"]+"|\S+) does not exist!'
                      r'(?P<guess>\s*Did you mean "[^"]*"\?)?', re.DOTALL)


def closest_names(name: str, known: Iterable[str]) -> list[str]:
    """Up to three of ``known`` spelled like ``name`` (case aside), closest first."""
    known = list(known)
    lowered = {k.lower(): k for k in known}
    return [lowered[m] for m in difflib.get_close_matches(name.lower(), lowered, n=3,
                                                           cutoff=0.6)]


def with_closest_name(message: str, known: Iterable[str]) -> str:
    """DuckDB's error text, its guess at a misspelled table replaced by the closest of
    kidata's tables and views (or by where to find them when none is close)."""
    found = _MISSING.match(message)
    if found is None:
        return message
    name = found["name"].strip('"')
    close = closest_names(name, known)
    hint = (" Did you mean " + " or ".join(f'"{c}"' for c in close) + "?" if close else
            " It is none of kidata's tables and views (`kidata views` lists them).")
    return message[:found.start("guess")] + hint + message[found.end():] if found["guess"] \
        else message[:found.end()] + hint + message[found.end():]
