"""A load's big tables written once: staged in their final form, then renamed into place.

``runs``, ``run_documents`` and ``measurements`` (:data:`DIRECT`) hold nearly all of a load's
bytes. The loading process writes their rows while it stages them straight into the file that
becomes ``<table>/part-<load>.parquet`` (:class:`DirectWriter`): the final schema, zstd, the
final row groups, ``load_id`` and ``loaded_at`` filled in. A staged run carries its document,
which goes to ``run_documents`` (one row per run), so that ``runs`` rows stay narrow.
``measurements`` and ``run_documents`` are in input order; ``runs`` are sorted by GPU,
kernel, pass and time across the file, one GPU per row group (an external merge sort: its
rows wait in a buffer per GPU, :data:`CLUSTER_BYTES` in all, go to sorted chunks in the
staging folder and are merged when staging ends: :class:`kidata.store.pqwrite.Clustered`), so
a filter on one GPU skips the other GPUs' row groups in a load's own file, as in a compacted
one, and a filter on a kernel most of each GPU's. The columns
only the commit needs (the record's number ``_seq``, its position, a run's latency quantiles:
:data:`SIDECAR`) go, row for row, to a small sidecar file beside it, which never leaves the
staging folder. Worker processes hand their rows to the loading process (as
Arrow tables) instead of writing them, so that one file per table holds the load as a single
pass would write it.

At the commit (:func:`finish`), a table whose staged rows are all kept (no duplicate, no
conflict, no richer variant of a stored run) is linked to the name the commit renames, without
reading it; otherwise its kept rows are copied into a new file, in the same order (``runs``:
still sorted, one GPU per row group), and only then. Either way the commit's DuckDB queries see the
staged rows, sidecar included, as one relation (:func:`staged_source`, a positional join),
while the files are being finished.

``loaded_at`` is written while staging, so it is the time the load started (the time in its
``load_id``), the same in every table and in its commit marker
(:func:`kidata.store.commit.started_at`).
"""

from __future__ import annotations

import collections
import os
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from kidata.errors import WarehouseError
from kidata.store import durable
from kidata.store.durable import fault
from kidata.store.layout import direct_file, direct_sidecar, staged_glob
from kidata.store.schema import COLUMNS, KEYS, STAGED_LATENCY, clustered_keys

if TYPE_CHECKING:
    import pyarrow as pa

    from kidata.store.pqwrite import GroupedWriter, HandBack

# Tables a load stages in final form (the others are small: the commit writes them). The
# staged ``runs`` rows carry their documents, which DirectWriter writes to ``run_documents``.
DIRECT = ("runs", "run_documents", "measurements")
# Staging-only columns of each direct table, kept in its sidecar file.
SIDECAR = {"runs": ("_seq", "_position", *STAGED_LATENCY), "run_documents": ("_seq",),
           "measurements": ("_seq",)}
# Columns with one value for a whole load, filled in while it stages.
CONSTANT = ("load_id", "loaded_at")
# Rows read at a time when a commit copies the kept rows (runs: ~18 MB of documents).
BATCH = 8192
# Compressed bytes of ``runs`` rows (documents included) a load keeps waiting for their GPU's
# next sorted chunk (kidata.store.pqwrite.Clustered): a load's own file is sorted, one GPU per
# row group, so a filter on one GPU skips the others' before any compaction (docs/benchmarks.md,
# Runs AN and BC). 16 MB hold about 128 MB of rows: the full chunks (GROUP_BYTES) of sixteen
# GPUs.
CLUSTER_BYTES = 16 * 1024 * 1024
# Bytes of a row group of a commit's copy of a load's kept ``runs`` (and of a stored file
# rewritten with richer runs; kidata.store.pqwrite.MAX_BYTES for other tables): the copy runs
# beside the commit's DuckDB work, so its groups stay small (~10k narrow runs; Run AO).
GROUP_BYTES = 8 * 1024 * 1024
# Bytes of a row group of a load's own ``runs`` file, and of a compaction's merge: ~100k narrow
# runs (row groups of 10k took DuckDB twice as long for a filtered read of the 1M-run file). A
# load's rows are merged in order once the workers have ended (kidata.ingest.stage), so the
# group does not add to their memory: a 1M load peaked at 467 MB either way, a compaction of
# 1M runs at 510-541 MB with 16 MB groups or these (docs/benchmarks.md, Runs BC and BD).
ROW_GROUP_BYTES = 96 * 1024 * 1024
# How each commit of this process finished its direct tables, per table: ``as-staged`` (the
# staged file as it was) or ``rewritten`` (its kept rows copied). For tests and profiling.
finished: collections.Counter[tuple[str, str]] = collections.Counter()

def sort_keys(table: str) -> list[tuple[str, str, str]]:
    """The order of a table's rows in its final file: by record (``_seq``), then, within a
    record, by the table's key, so that a file's order does not depend on how the record was
    flattened (as DuckDB orders: ascending, nulls last)."""
    keys = () if table in ("runs", "run_documents") else KEYS[table]
    return [("_seq", "ascending", "at_end"), *((k, "ascending", "at_end") for k in keys)]


class DirectWriter:
    """Writes the rows of the :data:`DIRECT` tables a load stages to their final-form files
    and sidecars in ``staging``; rows arrive in input order (``_seq`` ascending) with the
    staged schema (:func:`kidata.store.schema.staged_schema`) and go out in that order, but
    for the tables :func:`kidata.store.schema.clustered_keys` orders (``runs``), which go out
    sorted by those keys, one GPU per row group, once :meth:`close` has merged them; a file
    and its sidecar stay row for row either way."""

    def __init__(self, staging: Path, load_id: str, loaded_at: datetime):
        self.staging = staging
        self.values = {"load_id": load_id, "loaded_at": loaded_at}
        self.writers: dict[str, tuple] = {}
        self._constants: dict[str, pa.Array] = {}
        # Freed memory goes back to the system every so many staged runs' bytes, documents
        # included: Clustered counts the narrow rows it writes only, while the documents are
        # most of what the workers' tables free (counted there alone, the hand-backs came ~5x
        # less often: docs/benchmarks.md, Run AP). Not at every write: the pages would come
        # back as page faults, which cost more than the peak it saves (Run U).
        self._hand_back: HandBack | None = None

    def write(self, table: str, data: pa.Table) -> None:
        if not data.num_rows:
            return
        import pyarrow as pa

        from kidata.store.pqwrite import MAX_BYTES, Clustered, GroupedWriter, HandBack
        from kidata.store.schema import TABLES

        if table == "runs":  # the documents apart, in input order (schema.RUN_DOCUMENTS)
            self.write("run_documents", data.select(["run_id", "document", "_seq"]))
            self._hand_back = self._hand_back or HandBack()
            self._hand_back.add(data.nbytes)

        found = self.writers.get(table)
        if found is None:
            side = pa.schema([data.schema.field(n) for n in SIDECAR[table]])
            keys = clustered_keys(table)
            pair = _Pair(GroupedWriter(direct_file(self.staging, table), TABLES[table],
                                       max_bytes=ROW_GROUP_BYTES if keys else MAX_BYTES,
                                       before_write=lambda: fault(f"write-final:{table}")),
                         GroupedWriter(direct_sidecar(self.staging, table), side,
                                       before_write=lambda: fault("stage-write")))
            found = self.writers[table] = (
                pair, Clustered(pair, keys, CLUSTER_BYTES) if keys else pair)
        pair, sink = found
        n = data.num_rows
        # The final columns, then the sidecar's: one table, so that clustering moves a row's
        # sidecar with it and the two files stay row for row.
        columns = [data[f.name] if f.name not in CONSTANT else self._constant(f, n)
                   for f in pair.final.schema]
        columns += [data[name] for name in SIDECAR[table]]
        sink.write(pa.Table.from_arrays(columns, schema=pair.schema))

    def _constant(self, field: pa.Field, n: int) -> pa.Array:
        """``n`` copies of a constant column's value (converted once, then sliced)."""
        import pyarrow as pa

        found = self._constants.get(field.name)
        if found is None or len(found) < n:
            value = self.values[field.name]
            if isinstance(value, datetime) and pa.types.is_timestamp(field.type):
                # A time as its count of the type's units since the epoch, then cast: the
                # same values, without pyarrow converting an aware datetime (which imports
                # pandas when it is installed: ~0.3 CPU s of every load).
                value = _since_epoch(value, field.type.unit)
                found = pa.array([value] * max(n, BATCH), type=pa.int64()).cast(field.type)
            else:
                found = pa.array([value] * max(n, BATCH), type=field.type)
            self._constants[field.name] = found
        return found.slice(0, n)

    def close(self) -> None:
        """Write what is buffered and close the files (not fsync'd: :func:`finish` does)."""
        writers, self.writers = self.writers, {}
        for pair, sink in writers.values():
            if sink is not pair:
                sink.close()
            pair.close()

    def abort(self) -> None:
        writers, self.writers = self.writers, {}
        for pair, sink in writers.values():
            if sink is not pair:
                sink.abort()
            pair.abort()


class _Pair:
    """A direct table's final file and its sidecar written as one: each table written holds
    the final columns, then the sidecar's; row groups end in both at once (:meth:`cut`)."""

    def __init__(self, final: GroupedWriter, sidecar: GroupedWriter):
        import pyarrow as pa

        self.final, self.sidecar = final, sidecar
        self.path = final.path  # where a Clustered in front of the pair spills (beside it)
        self.schema = pa.schema([*final.schema, *sidecar.schema])
        self.width = len(final.schema)
        self.group_rows, self.max_bytes = final.group_rows, final.max_bytes

    def write(self, data: pa.Table) -> None:
        import pyarrow as pa

        columns = data.columns
        self.final.write(pa.Table.from_arrays(columns[:self.width], schema=self.final.schema))
        self.sidecar.write(pa.Table.from_arrays(columns[self.width:],
                                                schema=self.sidecar.schema))

    def cut(self) -> None:
        self.final.cut()
        self.sidecar.cut()

    def close(self) -> None:
        self.final.close()
        self.sidecar.close()

    def abort(self) -> None:
        self.final.abort()
        self.sidecar.abort()


def group_bytes(table: str) -> int:
    """The byte limit of a row group of a file of ``table`` a commit writes (a copy of a load's
    kept rows, a stored file rewritten with richer runs): small for ``runs`` (:data:`GROUP_BYTES`;
    a load's own file: :data:`ROW_GROUP_BYTES`)."""
    from kidata.store.pqwrite import MAX_BYTES

    return GROUP_BYTES if clustered_keys(table) else MAX_BYTES


_UNITS = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def _since_epoch(value: datetime, unit: str) -> int:
    """An aware ``value`` as a count of ``unit`` (``s``, ``ms``, ``us``, ``ns``) since the
    Unix epoch, exactly (integer arithmetic on its ``timedelta``)."""
    delta = value - datetime(1970, 1, 1, tzinfo=UTC)
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    scale = _UNITS[unit]
    return micros * scale // 1_000_000 if scale >= 1_000_000 else micros // (1_000_000 // scale)


def staged_source(staging: Path, table: str) -> str | None:
    """The ``SELECT`` giving the rows a load staged for ``table``, with the staged schema
    (final columns without :data:`CONSTANT`, then the staging-only ones); None when it staged
    none. A direct table's file and its sidecar are read side by side (``POSITIONAL JOIN``)."""
    from kidata.core.sql import parquet_source, quote_identifier

    if table not in DIRECT:
        if not any(staging.glob(staged_glob(table))):
            return None
        return f"SELECT * FROM {parquet_source(staging, staged_glob(table))}"
    data, sidecar = direct_file(staging, table), direct_sidecar(staging, table)
    if not data.exists():
        return None
    # Joined on the row number, not by DuckDB's POSITIONAL JOIN: a positional scan has no
    # row estimate, so the optimizer took it for the small side of every semi-join
    # (``staged_runs WHERE _seq IN (…)``) and hashed every staged document.
    final = ", ".join(f"f.{quote_identifier(c.name)}" for c in COLUMNS[table]
                      if c.name not in CONSTANT)
    side = ", ".join(f"s.{quote_identifier(c)}" for c in SIDECAR[table])
    return (f"SELECT {final}, {side} FROM {_numbered(data)} f "
            f"JOIN {_numbered(sidecar)} s USING (file_row_number)")


def _numbered(file: Path) -> str:
    """``read_parquet`` of one file with its rows' numbers (a list of one path: no glob)."""
    from kidata.core.sql import quote_literal

    return f"read_parquet([{quote_literal(str(file))}], file_row_number = true)"


def finish(staging: Path, table: str, keep: pa.Array | None, path: Path,
           before_write: Callable[[], None] | None = None) -> int:
    """Put the final file of a direct ``table`` at ``path``: the staged rows whose ``_seq``
    is in ``keep`` (None: every staged row, as the commit knows when the load adds every run
    it staged), in their staged order (``runs``: sorted, one GPU per row group). When
    every staged row is kept, ``path`` is a hard link to the staged file (nothing is read or
    written); otherwise the kept rows are copied into it (memory: :data:`BATCH` rows at a
    time). The file is fsync'd. Returns the rows in
    it (0: no file)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from kidata.store.pqwrite import GroupedWriter, InOrder
    from kidata.store.schema import TABLES

    data = direct_file(staging, table)
    if not data.exists():
        return 0
    if keep is None:
        total = kept = pq.ParquetFile(direct_sidecar(staging, table)).metadata.num_rows
    else:
        numbers = pq.ParquetFile(direct_sidecar(staging, table)).read(columns=["_seq"]).column(0)
        mask = pc.is_in(numbers, value_set=keep)
        total, kept = len(numbers), pc.sum(mask).as_py() or 0
        del numbers
        pa.default_memory_pool().release_unused()  # ~60 MB at 1M runs, before latest_runs
    if kept == total:
        try:
            os.link(data, path)
        except OSError:  # a file system without hard links: a copy of the bytes will do
            shutil.copyfile(data, path)
        durable.fsync_file(path)
        finished[(table, "as-staged")] += 1
        return total
    finished[(table, "rewritten")] += 1
    if not kept:
        return 0
    schema = TABLES[table]
    offset = 0
    keys = clustered_keys(table)
    with GroupedWriter(path, schema, max_bytes=group_bytes(table),
                       before_write=before_write) as writer:
        # The staged file is sorted, a GPU per row group (DirectWriter): its kept rows, read
        # in file order, are too; cut again at each GPU.
        sink = InOrder(writer, keys[0]) if keys else writer
        for batch in pq.ParquetFile(data).iter_batches(batch_size=BATCH):
            # The mask is sliced by the rows *read*, not the rows kept: advancing by the kept
            # rows (0.2.5-0.2.7) shifted the mask after the first batch with a dropped row,
            # keeping duplicates and dropping added rows (issue 25).
            read = batch.num_rows
            rows = pa.Table.from_batches([batch]).filter(mask.slice(offset, read))
            offset += read
            sink.write(rows if rows.schema.equals(schema, check_metadata=True)
                       else rows.cast(schema))
            # Keep the process's memory flat (runs: one batch of documents at a time).
            pa.default_memory_pool().release_unused()
        if sink is not writer:
            sink.close()
    if offset != total or writer.rows != kept:
        # Never commit a copy that is not exactly the kept rows (the load's own check,
        # load_commit.LoadCommit._verify, looks again from the files).
        raise WarehouseError(f"{table}: copied {writer.rows} of {kept} kept rows "
                           f"(read {offset} of {total} staged)")
    durable.fsync_file(path)
    return writer.rows
