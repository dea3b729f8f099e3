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

A merged ``runs`` or ``latest_runs`` file is sorted by GPU, kernel, pass and time
(:data:`kidata.store.schema.CLUSTERED`) from its first row to its last, one GPU per row group
(:class:`kidata.store.pqwrite.Clustered`: an external merge sort in bounded memory), so its
row groups' statistics let DuckDB, Spark or any Parquet reader skip the row groups of other
GPUs, and, within a GPU, of other kernels: merging many loads' files in file order would
interleave them in every row group. Other tables keep file order.

``kidata compact`` (not the merge after a load) also rewrites every file of those two tables
that is not so sorted (:func:`is_sorted`, from the row groups' statistics), whatever its size:
a load's own file written before 0.3.12 (input order), or before 0.3.26 (one GPU per row group,
sorted within each row group only: every row group of a GPU spans its kernels), or a merged
file of a warehouse written before 0.3.4 or 0.3.26; and every sorted file cut into smaller row
groups than a load's own file (:func:`is_coarse`: a commit's copy of kept runs, ~10k runs a
row group; a merge before 0.3.27, ~19k), merged into row groups of ~100k runs. A file already
sorted in such row groups is left as it is, so a second compaction rewrites nothing.

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
from kidata.store import commit, contexts, finalize, pqwrite
from kidata.store.layout import Layout
from kidata.store.pqwrite import write_reader
from kidata.store.schema import CLUSTERED, COMMIT_ORDER, TABLES, clustered_keys

# Files at least this large are not merged (``kidata compact`` reclusters them: see above).
SMALL_BYTES = 64 * 1024 * 1024
ROW_GROUP = 128 * 1024
# Rows DuckDB hands over at a time. A batch goes into a row group whole: small batches keep a
# row group of wide rows (runs keep their documents) near the writer's byte limit
# (kidata.store.pqwrite.MAX_BYTES).
BATCH = 8192
# After a load, a table with this many small files has them merged (KIDATA_COMPACT_AT; 0 turns
# it off). Every query and every load plans over each file (~1-2 ms a file), so without it
# their cost would grow with the number of past loads rather than with the data.
AUTO_AT = config.Config.compact_at
# Compressed bytes of rows a sorted merge keeps waiting for their sorted chunk, all GPUs
# together (kidata.store.pqwrite.Clustered). Beyond it the largest buffer goes out early, as a
# smaller chunk (more chunks to merge; the row groups stay full): 32 MB hold ~250 MB of runs
# rows, the full chunks of ~16 GPUs (docs/benchmarks.md, Runs AE, AO and BC).
BUFFER_BYTES = 32 * 1024 * 1024


@dataclass
class CompactReport:
    """Per table: files before and after, and the files rewritten only to be clustered
    (``reclustered``) or only to be cut into larger row groups (``regrouped``; neither merged
    for being small); ``rows`` merged in total, of which ``steps`` the stored steps rebuilt
    (``STEPS``, in one file: a rebuild of one file is named too); ``upgraded``:
    what the writer lock did first to a warehouse of an older layout (kidata.store.upgrade;
    filled in by the facade, whose lock upgrades)."""

    tables: dict[str, tuple[int, int]] = field(default_factory=dict)
    reclustered: dict[str, int] = field(default_factory=dict)
    regrouped: dict[str, int] = field(default_factory=dict)
    rows: int = 0
    steps: int = 0
    upgraded: list[str] = field(default_factory=list)
    STEPS = contexts.TABLE

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
            tables: list[str] | None = None, small_bytes: int | None = None) -> CompactReport:
    """Merge the small files of each table (default: every table loads write) into one, and
    with them the files of ``runs`` and ``latest_runs`` not sorted
    (:func:`is_sorted`), under ``writer_lock()`` (the facade's, so that it records what
    recovery did). ``small_bytes``: :data:`SMALL_BYTES`."""
    picked = chosen(tables)
    small_bytes = SMALL_BYTES if small_bytes is None else small_bytes
    with writer_lock():
        report = _merge_tables(layout, {t: _split(layout, t, small_bytes, recluster=True)
                                        for t in picked}, 2)
        if set(picked) == set(compactable()):  # the whole warehouse: its contexts too
            _rebuild_contexts(layout, report, 1)
        return report


def auto_at() -> int:
    """Small files per table from which a load merges them: ``KIDATA_COMPACT_AT`` (``0``:
    never), else :data:`AUTO_AT`."""
    return config.current().compact_at


def auto(layout: Layout) -> CompactReport:
    """Merge the small files of each table that has :func:`auto_at` of them, and rebuild the
    stored steps in one file once they have as many files or their edits are many
    (:func:`kidata.store.contexts.edits_due`). Called by a load after its commit, under the
    writer lock it already holds. Each merge rewrites at most ``SMALL_BYTES`` per table, once
    per ``auto_at()`` loads: a constant cost per load; a rebuild of the steps rewrites them
    all, once per load that changes a tenth of them."""
    at = auto_at()
    if not at:
        return CompactReport()
    at = max(2, at)
    plan = {t: _split(layout, t, SMALL_BYTES) for t in compactable()}
    # The stored steps once they have as many files, or sooner once their edits are many
    # (contexts.edits_due: every query joins the voids).
    contexts_due = (len(layout.table_files(contexts.TABLE)) >= at
                    or contexts.edits_due(layout.root))
    if not (contexts_due or any(len(small) >= at for _, small, _, _ in plan.values())) \
            or not commit.can_exchange(layout.root):
        return CompactReport()  # where folders cannot be swapped, `kidata compact` says why
    report = _merge_tables(layout, plan, at)
    if contexts_due:
        _rebuild_contexts(layout, report, 1)
    return report


def _rebuild_contexts(layout: Layout, report: CompactReport, if_files: int) -> None:
    """Store the context of every step in one file (:func:`kidata.store.contexts.rebuild`),
    counted in ``report`` as a merge of ``step_context``'s files."""
    done = contexts.rebuild(layout.root, commit.new_id(), if_files=if_files)
    if done is not None:
        files, rows = done
        report.tables[contexts.TABLE] = (files, 1)
        report.rows += rows
        report.steps = rows


def _split(layout: Layout, table: str, small_bytes: int, recluster: bool = False
           ) -> tuple[list[Path], list[Path], list[Path], list[Path]]:
    """A table's files, those of them smaller than ``small_bytes``, and (``recluster``, for
    the tables :func:`kidata.store.schema.clustered_keys` orders) those that are not
    :func:`is_sorted` and those sorted but cut finer than a load's own (not :func:`is_coarse`)."""
    files = layout.table_files(table)
    small = [f for f in files if f.stat().st_size < small_bytes]
    if not (recluster and clustered_keys(table)):
        return files, small, [], []
    mixed, fine = [], []
    for f in files:
        meta = pq.ParquetFile(f).metadata  # each footer read once
        if not _sorted(meta):
            mixed.append(f)
        elif not _coarse(meta):
            fine.append(f)
    return files, small, mixed, fine


def is_coarse(path: Path) -> bool:
    """Whether a sorted file's row groups are as large as a load's own: cut at
    :data:`kidata.store.finalize.ROW_GROUP_BYTES` or more (the byte limit its writer stamped in
    the file's metadata, :data:`kidata.store.pqwrite.GROUP_BYTES_KEY`), or one per GPU (nothing
    to gain). A commit's copy of a load's kept runs is cut at 8 MB (~10k runs), a compaction
    of 0.3.26 or before at 16 MB (~19k), a load's own file of 0.3.26 unstamped."""
    return _coarse(pq.ParquetFile(path).metadata)


def _coarse(meta: pq.FileMetaData) -> bool:
    stamp = (meta.metadata or {}).get(pqwrite.GROUP_BYTES_KEY, b"")
    if stamp.isdigit() and int(stamp) >= finalize.ROW_GROUP_BYTES:
        return True  # (a stamp that is no number counts as none)
    index = meta.schema.to_arrow_schema().get_field_index(CLUSTERED[0])
    gpus = set()
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(index).statistics  # one GPU each (is_sorted)
        gpus.add(stats.min if stats is not None and stats.has_min_max else None)
    return meta.num_row_groups <= len(gpus)


def is_sorted(path: Path) -> bool:
    """Whether the Parquet file is in the order kidata writes ``runs`` and ``latest_runs``
    (:data:`kidata.store.schema.CLUSTERED`), as far as its row groups' statistics tell: each
    row group holds one GPU (nulls counting as one); the GPUs come in order, nulls last, each
    in consecutive row groups; and each row group of a GPU starts at or after where the one
    before it ended, by kernel, then (where both hold one kernel) by pass, then by time.
    Statistics cannot see rows out of order inside a row group, nor between two row groups
    whose ranges only touch; a file kidata wrote unsorted (input order, or one GPU per row
    group sorted within it, before 0.3.26) has row groups whose kernels overlap."""
    return _sorted(pq.ParquetFile(path).metadata)


def _sorted(meta: pq.FileMetaData) -> bool:
    arrow = meta.schema.to_arrow_schema()
    columns = [arrow.get_field_index(c) for c in CLUSTERED]
    if min(columns) < 0:
        return False
    before: list[_Range] | None = None
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        ranges = []
        for index in columns:
            stats = group.column(index).statistics
            if stats is None:
                return False
            if stats.null_count == group.num_rows:
                ranges.append(_Range(None, None, True, True))
            elif not stats.has_min_max:
                return False
            else:
                ranges.append(_Range(stats.min, stats.max, stats.null_count > 0, False))
        if not ranges[0].constant:
            return False  # more than one GPU in the row group
        if before is not None and not _after(before, ranges):
            return False
        before = ranges
    return True


@dataclass(frozen=True)
class _Range:
    """A column's values in one row group: least and greatest (None: all null), whether any
    and whether all are null. Ascending, nulls last: a null is above every value."""

    low: Any
    high: Any
    nulls: bool
    all_null: bool

    @property
    def constant(self) -> bool:
        return self.all_null or (self.low == self.high and not self.nulls)

    @property
    def top(self) -> tuple:
        return (1,) if self.nulls else (0, self.high)

    @property
    def bottom(self) -> tuple:
        return (1,) if self.all_null else (0, self.low)


def _after(before: list[_Range], ranges: list[_Range]) -> bool:
    """Whether a row group of ``ranges`` may follow one of ``before`` in sorted order."""
    for a, b in zip(before, ranges, strict=True):
        if a.top != b.bottom:
            return a.top < b.bottom
        if not (a.constant and b.constant):
            return True  # they touch at one value; the rows there are ordered by later keys
    return True


def _merge_tables(layout: Layout,
                  plan: dict[str, tuple[list[Path], list[Path], list[Path], list[Path]]],
                  at_least: int) -> CompactReport:
    """Merge the small files of each table in ``plan`` (:func:`_split`) that has ``at_least``
    of them, with its files to sort or to regroup (under the writer lock)."""
    report = CompactReport()
    for table, (files, small, mixed, fine) in plan.items():
        if len(small) < at_least and not mixed and not fine:
            report.tables[table] = (len(files), len(files))
            continue
        # A file rewritten anyway takes the small ones with it.
        merged = [f for f in files if f in small or f in mixed or f in fine]
        report.rows += _compact_table(layout, table, merged,
                                      [f for f in files if f not in merged])
        report.tables[table] = (len(files), len(files) - len(merged) + 1)
        # The files rewritten only to be sorted, or regrouped (not merged for being small).
        merging_small = len(small) >= at_least
        alone = [f for f in mixed if f not in small] if merging_small else mixed
        if alone:
            report.reclustered[table] = len(alone)
        alone = [f for f in fine if f not in small] if merging_small else fine
        if alone:
            report.regrouped[table] = len(alone)
    return report


def _compact_table(layout: Layout, table: str, small: list[Path], keep: list[Path]) -> int:
    return commit.replace_table(layout.root, table, lambda out: merge(table, small, out), keep,
                                what=f"compaction of {table}", faults="compact-")


def merge(table: str, files: list[Path], out: Path, *, clustered: bool = True) -> int:
    """Write the rows of ``files`` to ``out`` with the declared schema and return how many: in
    file order, or, for the tables :func:`kidata.store.schema.clustered_keys` names, sorted
    by those keys (:class:`~kidata.store.pqwrite.Clustered`), one GPU per row group.
    ``clustered=False`` is file order for every table, as compactions before 0.3.4 wrote (the
    baseline of ``benchmarks/pruning.py``)."""
    declared = TABLES[table]
    present: set[str] = set()
    for path in files:
        names = pq.ParquetFile(path).schema_arrow.names
        extra = sorted(set(names) - set(declared.names))
        if extra:
            raise WarehouseError(f"{path} has columns kidata does not declare "
                                 f"({', '.join(extra)}); compaction would drop them")
        present.update(names)
    q = quote_identifier
    cols = ", ".join(q(f.name) if f.name in present
                     else f"CAST(NULL AS {duckdb_type(f.type)}) AS {q(f.name)}"
                     for f in declared)
    listed = ", ".join(quote_literal(str(p)) for p in files)
    con = engine.connect({"threads": 2, "memory_limit": "1GB",
                          "preserve_insertion_order": True})
    try:
        batch_rows = min(BATCH, ROW_GROUP)
        reader = con.sql(f"SELECT {cols} FROM read_parquet([{listed}], union_by_name = true)"
                         ).to_arrow_reader(batch_rows)
        keys = clustered_keys(table) if clustered else []
        # Even an empty table gets its file (the folder must hold one after the swap).
        # Sorted tables in row groups of a load's own file (~100k runs: a filter reads fewer
        # and larger groups); a 1M-run merge peaked the same with 16 MB groups (Run BD).
        return write_reader(out, declared, reader, rows=ROW_GROUP, create_empty=True,
                            max_bytes=finalize.ROW_GROUP_BYTES if keys else pqwrite.MAX_BYTES,
                            through=pqwrite.clustered(keys, BUFFER_BYTES))
    finally:
        con.close()
