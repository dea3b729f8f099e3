"""Merge a table's small files into one (``kidata compact``) without changing any query result.

Each load adds one file per table, so a warehouse fed by many small loads ends up with many
small files, which every query must open. Compaction rewrites them as one file per table:
on demand, and after a load once a table has :data:`AUTO_AT` small files (:func:`auto`).

The hard part is the swap: a reader listing ``runs/*.parquet`` must see either the old files
or the new one, never both (duplicates) and never neither (lost rows). Renaming files one by
one cannot do that, so compaction builds the table's next folder beside it — the merged file
plus hard links to the files it keeps — and exchanges the two folders in one atomic step
(``renameat2(RENAME_EXCHANGE)`` on Linux, ``renamex_np(RENAME_SWAP)`` on macOS). That step is
a commit like any other (:func:`kidata.store.commit.replace_table`, a
:class:`~kidata.store.commit.Transaction`): journalled, so a crash before the journal leaves
the old folder (and the unfinished next one, removed by the next writer) and a crash after it
is completed by the next writer. Compaction holds the writer lock throughout, so no load
commits meanwhile, and it keeps every row as it was, ``load_id`` included, so kidata's
snapshot filter is unaffected.

Limit: a query that listed the old folder and opens a merged-away file after the swap fails
with "file not found" (never a wrong answer); run it again. See ``docs/guarantees.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from kidata.core import config, engine
from kidata.core.sql import duckdb_type, quote_identifier, quote_literal
from kidata.errors import UsageError, WarehouseError
from kidata.store import commit
from kidata.store.layout import Layout
from kidata.store.pqwrite import write_reader
from kidata.store.schema import COMMIT_ORDER, TABLES

# Files at least this large are left as they are.
SMALL_BYTES = 64 * 1024 * 1024
ROW_GROUP = 128 * 1024
# After a load, a table with this many small files has them merged (KIDATA_COMPACT_AT; 0 turns
# it off). Every query and every load plans over each file (~1-2 ms a file), so without it
# their cost would grow with the number of past loads rather than with the data.
AUTO_AT = config.Config.compact_at


@dataclass
class CompactReport:
    """Per table: files before and after; ``rows`` merged in total."""

    tables: dict[str, tuple[int, int]] = field(default_factory=dict)
    rows: int = 0

    @property
    def files_removed(self) -> int:
        return sum(before - after for before, after in self.tables.values())


def compactable() -> list[str]:
    """Tables written by loads (the reference tables are single files already)."""
    return [t for t in COMMIT_ORDER if t in TABLES]


def chosen(tables: list[str] | None) -> list[str]:
    """The tables a compaction of ``tables`` merges (default: every table loads write);
    :class:`UsageError` for a table loads do not write."""
    picked = tables or compactable()
    unknown = [t for t in picked if t not in compactable()]
    if unknown:
        raise UsageError(f"cannot compact {', '.join(unknown)}: no such table loads write; "
                         f"tables that can be compacted: {', '.join(compactable())}")
    return picked


def compact(layout: Layout, writer_lock: Callable[[], AbstractContextManager[Any]],
            tables: list[str] | None = None, small_bytes: int = SMALL_BYTES) -> CompactReport:
    """Merge the small files of each table (default: every table loads write) into one, under
    ``writer_lock()`` (the facade's, so that it records what recovery did)."""
    picked = chosen(tables)
    with writer_lock():
        return _merge_tables(layout, {t: _split(layout, t, small_bytes) for t in picked}, 2)


def auto_at() -> int:
    """Small files per table from which a load merges them: ``KIDATA_COMPACT_AT`` (``0``:
    never), else :data:`AUTO_AT`."""
    return config.current().compact_at


def auto(layout: Layout) -> CompactReport:
    """Merge the small files of each table that has :func:`auto_at` of them. Called by a
    load after its commit, under the writer lock it already holds. Each merge rewrites at most
    ``SMALL_BYTES`` per table, once per ``auto_at()`` loads: a constant cost per load."""
    at = auto_at()
    if not at:
        return CompactReport()
    at = max(2, at)
    plan = {t: _split(layout, t, SMALL_BYTES) for t in compactable()}
    if not any(len(small) >= at for _, small in plan.values()) \
            or not commit.can_exchange(layout.root):
        return CompactReport()  # where folders cannot be swapped, `kidata compact` says why
    return _merge_tables(layout, plan, at)


def _split(layout: Layout, table: str, small_bytes: int) -> tuple[list[Path], list[Path]]:
    """A table's files, and those of them smaller than ``small_bytes``."""
    files = layout.table_files(table)
    return files, [f for f in files if f.stat().st_size < small_bytes]


def _merge_tables(layout: Layout, plan: dict[str, tuple[list[Path], list[Path]]],
                  at_least: int) -> CompactReport:
    """Merge the small files of each table in ``plan`` (:func:`_split`) that has ``at_least``
    of them (under the writer lock)."""
    report = CompactReport()
    for table, (files, small) in plan.items():
        if len(small) < at_least:
            report.tables[table] = (len(files), len(files))
            continue
        report.rows += _compact_table(layout, table, small, [f for f in files if f not in small])
        report.tables[table] = (len(files), len(files) - len(small) + 1)
    return report


def _compact_table(layout: Layout, table: str, small: list[Path], keep: list[Path]) -> int:
    return commit.replace_table(layout.root, table, lambda out: _merge(table, small, out), keep,
                                what=f"compaction of {table}", faults="compact-")


def _merge(table: str, files: list[Path], out: Path) -> int:
    """Write the rows of ``files`` (in file order) to ``out`` with the declared schema."""
    schema = TABLES[table]
    present: set[str] = set()
    for path in files:
        names = pq.ParquetFile(path).schema_arrow.names
        extra = sorted(set(names) - set(schema.names))
        if extra:
            raise WarehouseError(f"{path} has columns kidata does not declare "
                                 f"({', '.join(extra)}); compaction would drop them")
        present.update(names)
    q = quote_identifier
    cols = ", ".join(q(f.name) if f.name in present
                     else f"CAST(NULL AS {duckdb_type(f.type)}) AS {q(f.name)}"
                     for f in schema)
    listed = ", ".join(quote_literal(str(p)) for p in files)
    con = engine.connect({"threads": 2, "memory_limit": "1GB",
                                 "preserve_insertion_order": True})
    try:
        reader = con.sql(f"SELECT {cols} FROM read_parquet([{listed}], union_by_name = true)"
                         ).to_arrow_reader(ROW_GROUP)
        # Even an empty table gets its file (the folder must hold one after the swap).
        rows = write_reader(out, schema, reader, rows=ROW_GROUP, create_empty=True)
    finally:
        con.close()
    return rows
