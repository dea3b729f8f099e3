"""What kidata's readers see: a snapshot made of whole, committed loads.

A load makes its files visible one rename at a time, in ``schema.COMMIT_ORDER``, and renames
its row of the ``loads`` table (its commit marker) last. A reader that first lists the
committed loads and then reads every table keeping only rows whose ``load_id`` is among them
sees exactly the warehouse as it was when it listed the loads: each load fully in or fully
out, in every table at once, whatever commits or crashes happen meanwhile.

Files are never removed except by compaction, which swaps a table's folder atomically and
keeps every row with its ``load_id``; so the filter holds across compactions too.

The rule is stated once, here, for every engine binding: :func:`filtered_tables` (which tables
it applies to), :func:`visible_sql` (the filter, in SQL both DuckDB and Spark run) over a table
named :data:`VISIBLE` holding the committed loads' ids, read *before* any other table.
:func:`define` applies it for DuckDB, :func:`kidata.query.spark.register` for Spark; another engine
does the same two steps by hand (see ``docs/guarantees.md``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import duckdb

from kidata.core import engine
from kidata.core.sql import quote_identifier
from kidata.core.window import Window
from kidata.errors import WarehouseError
from kidata.store import derived
from kidata.store.layout import Layout
from kidata.store.schema import COLUMNS, COMMIT_ORDER, DUCKDB_TYPES, REFERENCE
from kidata.store.tablesql import table_sql

VISIBLE = "_kidata_visible_loads"
# Committed loads whose derived rows readers compute (written before the derived tables).
UNDERIVED = "_kidata_underived_loads"
ATTEMPTS = 5


def filtered_tables() -> list[str]:
    """Tables written by loads, whose rows are shown only for committed loads."""
    return [t for t in COMMIT_ORDER
            if t in COLUMNS and any(c.name == "load_id" for c in COLUMNS[t])]


def visible_sql(body: str, visible: str = VISIBLE) -> str:
    """The snapshot rule as SQL: the rows of ``body`` (a table of :func:`filtered_tables`)
    whose load is committed, i.e. listed in ``visible`` (a table of ``load_id``s read from the
    ``loads`` table before ``body``'s files were listed)."""
    return f"SELECT * FROM ({body}) WHERE load_id IN (SELECT load_id FROM {visible})"


def marker_state(warehouse: Path) -> tuple[str, ...]:
    """The names of the commit-marker files: changes whenever a load commits or the
    ``loads`` table is compacted (cheap: one folder listing)."""
    try:
        return tuple(sorted(os.listdir(Layout(warehouse).table("loads"))))
    except FileNotFoundError:
        return ()


def committed(warehouse: Path, con: duckdb.DuckDBPyConnection | None = None
              ) -> list[tuple[str, str | None]]:
    """``(load_id, kidata_version)`` of the loads whose commit marker is in place, read now
    (with DuckDB, on ``con`` or a connection of its own: no pyarrow on a query's start-up)."""
    for _ in range(ATTEMPTS):
        files = [str(p) for p in Layout(warehouse).table_files("loads")]
        if not files:
            return []
        own = con is None
        db = engine.connect() if own else con
        try:
            result = db.execute("SELECT * FROM read_parquet($files, union_by_name = true, "
                                "filename = '_kidata_file', file_row_number = true) "
                                "ORDER BY _kidata_file, file_row_number", {"files": files})
            names = [column[0] for column in result.description]
            rows = result.fetchall()
        except duckdb.Error as exc:
            if not all(os.path.exists(f) for f in files):
                continue  # compaction swapped the folder between listing and reading: again
            raise WarehouseError(f"cannot read the loads table of {warehouse}: {exc}") from None
        finally:
            if own:
                db.close()
        at = names.index("load_id")
        version = names.index("kidata_version") if "kidata_version" in names else None
        return [(row[at], None if version is None else row[version]) for row in rows]
    raise WarehouseError(f"the loads table of {warehouse} kept changing while being read")


def id_table(con: duckdb.DuckDBPyConnection, name: str, ids: list[str]) -> None:
    """A temporary table ``name`` of one column, ``load_id``, holding ``ids``."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS "
                "SELECT unnest($ids::VARCHAR[]) AS load_id", {"ids": ids})


def define(con: duckdb.DuckDBPyConnection, warehouse: Path, window: Window | None = None,
           tables: Iterable[str] | None = None) -> None:
    """Define one view per table that loads write on ``con``, showing the snapshot of the
    committed loads (the reference tables are :func:`kidata.store.reference.define`'s).

    ``latest_runs`` rows of loads written before that table existed are computed from their
    runs (see :mod:`kidata.store.derived`). With a ``window``, the runs are those measured
    in it (runs without a time are left out), the tables that hang on runs follow them,
    ``latest_runs`` is the latest run of each key within it, and ``rejects`` those of loads
    made in it. ``tables``: only these (default: every table loads write)."""
    loads = committed(warehouse, con)
    wanted = set(COLUMNS if tables is None else tables)
    id_table(con, VISIBLE, [load_id for load_id, _ in loads])
    old = derived.underived(loads)
    id_table(con, UNDERIVED, old)
    filtered = set(filtered_tables())
    q = quote_identifier
    for table in COLUMNS:
        if table in REFERENCE or table not in wanted:
            continue
        body = table_sql(warehouse, table)
        if table in filtered:
            body = visible_sql(body)
        if table == "loads":
            # Markers written before a column existed (commit, branch, ci_run: 0.2.9) read
            # as null, even when no marker has it yet.
            present = set(con.sql(f"SELECT * FROM ({body}) LIMIT 0").columns)
            missing = [c for c in COLUMNS[table] if c.name not in present]
            if missing:
                body = ("SELECT *, " + ", ".join(
                    f"CAST(NULL AS {DUCKDB_TYPES[c.type]}) AS {q(c.name)}" for c in missing)
                    + f" FROM ({body})")
        if window is not None:
            body = _windowed(table, body, window)
        elif table == "latest_runs" and old:
            # In the declared column order, whichever columns the stored files lack.
            body = (f"SELECT {', '.join(q(c.name) for c in COLUMNS[table])} FROM ("
                    f"SELECT * FROM ({body}) WHERE load_id NOT IN "
                    f"(SELECT load_id FROM {UNDERIVED}) "
                    f"UNION ALL BY NAME SELECT * FROM ({derived.latest_runs_of(UNDERIVED)}))")
        con.execute(f"CREATE VIEW {q(table)} AS {body}")


def _windowed(table: str, body: str, window: Window) -> str:
    """A table's body as a windowed session sees it (``define``; ``runs`` is defined before the
    tables that read it)."""
    if table == "runs":
        # A run without a time cannot be placed in the window (the comparison is null).
        return f"SELECT * FROM ({body}) WHERE {window.sql('observed_at')}"
    if table in ("measurements", "published", "samples"):
        return f"SELECT * FROM ({body}) WHERE run_id IN (SELECT run_id FROM runs)"
    if table == "latest_runs":
        # The stored rows are each load's latest run per key: with an end to the window a
        # load's latest may lie beyond it while an earlier run lies within, so the rows are
        # computed from the window's runs (every load's, as readers of old loads do).
        return derived.latest_runs_of(VISIBLE)
    if table == "rejects":
        return f"SELECT * FROM ({body}) WHERE {window.sql('loaded_at')}"
    return body
