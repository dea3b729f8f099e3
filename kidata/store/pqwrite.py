"""Write Parquet files in row groups big enough to query fast, with bounded memory.

Rows reach the writers in small pieces (a few thousand rows at a time). Written as they come,
each piece becomes its own row group: a 1M-run table then has about a thousand row groups and
a 5 MB footer that every query must read and plan over (3-10x slower queries at 1M runs).
:class:`GroupedWriter` gathers pieces until a row group is full (``ROWS`` rows) or its buffer
reaches ``MAX_BYTES``, whichever comes first, so memory stays bounded whatever the file size.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kidata.errors import WarehouseError
from kidata.store import durable
from kidata.store.layout import sort_spill

# DuckDB's own default row-group size; Spark and DuckDB read such groups in parallel.
ROWS = 122_880
# A row group of wide rows (runs keep their JSON document) is cut early at this many bytes.
MAX_BYTES = 16 * 1024 * 1024
# The file's key-value metadata entry holding the byte limit its row groups were cut at
# (GroupedWriter): `kidata compact` rewrites a sorted file cut finer than a load's own
# (kidata.store.compaction.is_coarse).
GROUP_BYTES_KEY = b"kidata.row_group_bytes"
# Columns whose values are all or nearly all distinct. Dictionary-encoding them is wasted work
# (pyarrow builds each column chunk's dictionary, then gives it up past 1 MB): a third of the
# time of writing a runs file. Every other column is dictionary-encoded, as by default.
DISTINCT = frozenset({"run_id", "external_id", "title", "content_hash", "document", "raw",
                      "value", "_seq", "_position", "_latency_median", "_latency_p20",
                      "_latency_p80"})


def options(schema: pa.Schema, compression: str = "zstd") -> dict[str, object]:
    """The ``pq.ParquetWriter`` / ``pq.write_table`` options of kidata's files: zstd (small
    files for the warehouse), or, for a load's own short-lived staged files, lz4 (written and
    read twice as fast, half the compression)."""
    return {"compression": compression,
            "use_dictionary": [n for n in schema.names if n not in DISTINCT]}


class GroupedWriter:
    """One Parquet file (zstd) with ``schema``, written in row groups of about ``rows`` rows.

    ``before_write`` is called before each row group goes to disk (the fault-injection hook of
    the crash tests). Nothing is created until the first row arrives: :attr:`rows` is 0 and no
    file exists when no rows were written, unless ``create_empty`` asks for an empty file.
    """

    def __init__(self, path: Path, schema: pa.Schema, rows: int | None = None,
                 max_bytes: int = MAX_BYTES, before_write: Callable[[], None] | None = None,
                 create_empty: bool = False):
        self.path = path
        self.schema = schema
        # Read at call time, so that a test can make row groups small (module ROWS).
        self.group_rows = ROWS if rows is None else rows
        self.max_bytes = max_bytes
        self.before_write = before_write
        self.create_empty = create_empty
        self.rows = 0
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._pending_bytes = 0
        self._writer: pq.ParquetWriter | None = None

    def write(self, table: pa.Table) -> None:
        if not table.num_rows:
            return
        self._pending.append(table)
        self._pending_rows += table.num_rows
        self._pending_bytes += table.nbytes
        self.rows += table.num_rows
        if self._pending_rows >= self.group_rows or self._pending_bytes >= self.max_bytes:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        data = pa.concat_tables(self._pending)
        self._pending, self._pending_rows, self._pending_bytes = [], 0, 0
        if self._writer is None:
            self._open()
        if self.before_write is not None:
            self.before_write()
        self._writer.write_table(data, row_group_size=max(self.group_rows, data.num_rows))

    def _open(self) -> None:
        # The byte limit goes in the file's metadata (GROUP_BYTES_KEY); readers ignore it.
        stamped = self.schema.with_metadata({**(self.schema.metadata or {}),
                                             GROUP_BYTES_KEY: str(self.max_bytes).encode()})
        self._writer = pq.ParquetWriter(self.path, stamped, **options(self.schema))

    def cut(self) -> None:
        """End the current row group here: what is buffered is written as one."""
        self._flush()

    def close(self) -> None:
        """Write what is buffered and close the file."""
        try:
            self._flush()
            if self._writer is None and self.create_empty:
                self._open()
        finally:
            if self._writer is not None:
                self._writer.close()
                self._writer = None

    def abort(self) -> None:
        """Close without writing what is buffered (the caller is failing anyway)."""
        self._pending = []
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def __enter__(self) -> GroupedWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class Clustered:
    """Rows handed to a :class:`GroupedWriter` (or anything with its ``write``, ``cut``,
    ``group_rows`` and ``max_bytes``) so that the file is sorted by ``keys`` (ascending, nulls
    last) from its first row to its last, and each row group holds one value of ``keys[0]``
    (one GPU): a filter on one GPU reads that GPU's row groups only, and a filter on a kernel
    (``keys[1]``) the few row groups of each GPU whose kernel range holds it. Memory stays
    bounded whatever the table's size. (A whole-table ORDER BY in DuckDB needed ~1.2 GB for
    300k runs and failed with Out of Memory under a 256 or 512 MB limit rather than spill:
    docs/benchmarks.md, Run AE; Run BB for 1M.)

    An external merge sort. Rows wait in one buffer per value of ``keys[0]``. A buffer that
    reaches a row group's worth (the writer's rows or bytes, at most :data:`CHUNK_BYTES`),
    or, the largest first, any
    buffer while all together hold more than ``budget`` bytes, is sorted and spilled to
    ``spill`` (a folder this object creates and removes; by default the one beside the
    writer's file, :func:`kidata.store.layout.sort_spill`) as a *chunk*: an lz4 Arrow IPC file
    of ~:data:`MERGE_BATCH_BYTES` batches. :meth:`close` writes the values in order (nulls
    last): a value that never spilled is sorted in memory, as one buffer; the chunks of one
    that did are merged (:func:`merge_sorted`), :data:`FAN_IN` at a time, the merged chunk
    going back in the queue until ``FAN_IN`` are left, whose merge goes to the writer. The
    writer cuts row groups at its limits within a value and :meth:`close` at each value's end,
    so the row groups are full-sized whatever the budget.

    A waiting part is held as an lz4-compressed Arrow IPC message, not as Arrow arrays: run
    documents compress ~8x, so the buffers of many GPUs' row groups fit in a few MB and no
    chunk is cut early for want of room (docs/benchmarks.md, Run AO). Parts under
    :data:`PACK_BYTES` wait as they are. ``budget`` counts the bytes held."""

    def __init__(self, writer: Any, keys: list[str], budget: int, spill: Path | None = None):
        self.writer = writer
        self.lead = keys[0]
        self.sort_keys = [(k, "ascending", "at_end") for k in keys]
        self.budget = budget
        self.spill = sort_spill(writer.path) if spill is None else spill
        self.buffers: dict[object, list[pa.Buffer | pa.Table]] = {}
        self.sizes: dict[object, tuple[int, int, int]] = {}  # rows, Arrow bytes, held bytes
        self.held = 0
        self.chunks: dict[object, list[Path]] = {}
        self.spilled = 0  # chunks written, merged ones included (for tests and profiling)
        self.hand_back = HandBack()

    def write(self, table: pa.Table) -> None:
        column = table.column(self.lead)
        for value in pc.unique(column).to_pylist():
            mask = pc.is_null(column) if value is None else pc.equal(column, value)
            part = table.filter(mask)
            # A small part is kept as it is: packing costs ~a millisecond whatever the size
            # (the oracle's loads, a part of a few rows each, took 20% longer).
            kept = _pack(part) if part.nbytes >= PACK_BYTES else part
            held = kept.size if isinstance(kept, pa.Buffer) else part.nbytes
            self.buffers.setdefault(value, []).append(kept)
            rows, size, before = self.sizes.get(value, (0, 0, 0))
            self.sizes[value] = rows + part.num_rows, size + part.nbytes, before + held
            self.held += held
            if (self.sizes[value][0] >= self.writer.group_rows
                    or self.sizes[value][1] >= min(self.writer.max_bytes, CHUNK_BYTES)):
                self._spill(value)
        while self.held > self.budget:
            self._spill(max(self.sizes, key=lambda v: self.sizes[v][2]))

    def close(self) -> None:
        """Write every row, by value of ``keys[0]`` (nulls last), each value's rows in order;
        then remove the spill folder."""
        try:
            for value in sorted(self.buffers.keys() | self.chunks.keys(), key=_nulls_last):
                if value in self.chunks:
                    if value in self.buffers:
                        self._spill(value)
                    self._merge(value)
                else:
                    self.writer.write(self._sorted(value))
                self.writer.cut()
        finally:
            self.abort()

    def abort(self) -> None:
        """Drop what waits and remove the spill folder (the caller is failing, or done)."""
        self.buffers, self.sizes, self.held, self.chunks = {}, {}, 0, {}
        shutil.rmtree(self.spill, ignore_errors=True)

    def _sorted(self, value: object) -> pa.Table:
        """The rows waiting for ``value``, sorted (the buffer is emptied)."""
        table = pa.concat_tables([_unpack(b) if isinstance(b, pa.Buffer) else b
                                  for b in self.buffers.pop(value)])
        self.held -= self.sizes.pop(value)[2]
        # The parts leave the allocator holding tens of MB at 1M runs otherwise.
        self.hand_back.add(table.nbytes)
        return table.take(pc.sort_indices(table, sort_keys=self.sort_keys))

    def _spill(self, value: object) -> None:
        self.chunks.setdefault(value, []).append(self._write_chunk([self._sorted(value)]))

    def _write_chunk(self, tables: Iterable[pa.Table]) -> Path:
        """A chunk file of ``tables`` (each sorted, in order), in batches of about
        :data:`MERGE_BATCH_BYTES`: a merge holds one batch of each chunk it reads."""
        self.spill.mkdir(parents=True, exist_ok=True)
        path = self.spill / f"chunk-{self.spilled}.arrow"
        self.spilled += 1
        writer = None
        try:
            for table in tables:
                if writer is None:
                    writer = pa.ipc.new_file(str(path), table.schema, options=_IPC)
                writer.write_table(table, max_chunksize=_batch_rows(table))
        finally:
            if writer is not None:
                writer.close()
        return path

    def _merge(self, value: object) -> None:
        queue = self.chunks.pop(value)
        keys = [k for k, _, _ in self.sort_keys]
        while len(queue) > FAN_IN:
            group, queue = queue[:FAN_IN], queue[FAN_IN:]
            queue.append(self._write_chunk(merge_sorted(group, keys)))
            for path in group:
                path.unlink()
        for table in merge_sorted(queue, keys):
            # In slices of about a batch, so that the writer cuts its row groups near its
            # limits (a round may hold a batch of each chunk).
            step = _batch_rows(table)
            for start in range(0, table.num_rows, step):
                self.writer.write(table.slice(start, step))
            self.hand_back.add(table.nbytes)
        for path in queue:
            path.unlink()


# Arrow bytes of a sorted chunk at most (Clustered; a row group's worth when less): a chunk is
# sorted by a copy of it, so chunks stay small while row groups may be large (Run BC).
CHUNK_BYTES = 8 * 1024 * 1024
# Chunks a merge reads at once (Clustered): with ~1 MB batches, ~16 MB of rows in the merge's
# hands; more chunks are merged in passes. A load of 1M runs spills ~15 chunks per GPU.
FAN_IN = 16
# Arrow bytes of a batch of a spilled chunk (Clustered), what a merge holds of each chunk.
MERGE_BATCH_BYTES = 1024 * 1024
# Fewest rows of such a batch (rows of documents are big).
MIN_BATCH_ROWS = 64


def _batch_rows(table: pa.Table) -> int:
    """Rows of ``table`` in about :data:`MERGE_BATCH_BYTES` (at least :data:`MIN_BATCH_ROWS`)."""
    return max(MIN_BATCH_ROWS, MERGE_BATCH_BYTES * table.num_rows // max(table.nbytes, 1))


def merge_sorted(paths: list[Path], keys: list[str]) -> Iterator[pa.Table]:
    """The rows of the Arrow IPC files ``paths`` (each sorted by ``keys``: ascending, nulls
    last, NaN after numbers, as ``pc.sort_indices`` orders), merged into tables in that
    order, holding one batch of each file at a time.

    Each round finds, of each file's current batch, the last key; the smallest of those is
    the round's bound. Every row up to the bound is in the current batches (a file's later
    rows come after its current batch's last key, which is not below the bound), so the
    round takes those rows from each batch (a binary search on its keys), sorts them
    together and yields them; the batch whose last key is the bound is used up, so each
    round moves at least one batch on. Rows from one file only are yielded as they are."""
    streams = [_Stream(p, keys) for p in paths]
    try:
        live = [s for s in streams if s.load()]
        sort_keys = [(k, "ascending", "at_end") for k in keys]
        while live:
            bound = min(s.last for s in live)
            pieces = [piece for s in live if (piece := s.take_to(bound)) is not None]
            live = [s for s in live if s.load()]
            if len(pieces) == 1:
                yield pieces[0]
            else:
                table = pa.concat_tables(pieces)
                yield table.take(pc.sort_indices(table, sort_keys=sort_keys))
    finally:
        for s in streams:
            s.close()


class _Stream:
    """One sorted chunk file, read a batch at a time. Read, not memory-mapped: a mapped file's
    pages stay resident once read, so a merge of a load of 5M runs held ~50 MB more at its
    last pass (docs/benchmarks.md, Run BC)."""

    def __init__(self, path: Path, keys: list[str]):
        self.source = pa.OSFile(str(path))
        self.reader = pa.ipc.open_file(self.source)
        self.keys = keys
        self.next = 0
        self.batch: pa.RecordBatch | None = None
        self.start = 0

    def load(self) -> bool:
        """Whether rows are left, reading the next batch when the current one is used up."""
        while self.batch is None or self.start >= self.batch.num_rows:
            if self.next >= self.reader.num_record_batches:
                self.batch = None
                return False
            self.batch = self.reader.get_batch(self.next)
            self.next += 1
            self.start = 0
            self.columns = [_comparable(self.batch.column(k)) for k in self.keys]
            self.last = self.key(self.batch.num_rows - 1)
        return True

    def key(self, i: int) -> tuple:
        return tuple(_key_part(c, i) for c in self.columns)

    def take_to(self, bound: tuple) -> pa.Table | None:
        """The rows of the current batch up to ``bound`` (keys not above it), as a table."""
        assert self.batch is not None
        end = self.batch.num_rows
        if self.last > bound:
            lo, hi = self.start, end - 1  # the last row is above: search the rest
            while lo < hi:
                mid = (lo + hi) // 2
                if self.key(mid) <= bound:
                    lo = mid + 1
                else:
                    hi = mid
            end = lo
        if end == self.start:
            return None
        piece = pa.Table.from_batches([self.batch.slice(self.start, end - self.start)])
        self.start = end
        return piece

    def close(self) -> None:
        self.batch = None
        self.source.close()


def _comparable(array: pa.Array) -> pa.Array:
    """``array`` with values Python compares as Arrow sorts them: times and dates as their
    integers (strings compare alike: UTF-8 keeps code point order)."""
    if pa.types.is_temporal(array.type):
        return array.cast(pa.int64())
    if pa.types.is_dictionary(array.type):
        return array.dictionary_decode()
    return array


def _nulls_last(value: object) -> tuple:
    """A value of a lead column (a GPU) as a key that orders it as Arrow sorts, nulls last."""
    return (value is None, value if value is not None else "")


def _key_part(array: pa.Array, i: int) -> tuple:
    """Row ``i`` of ``array`` as a sortable tuple: values, then NaN, then null (Arrow's
    ascending order with nulls at the end)."""
    value = array[i].as_py()
    if value is None:
        return (2,)
    if isinstance(value, float) and value != value:
        return (1,)
    return (0, value)


class HandBack:
    """Hands memory Arrow freed back to the system every :data:`RELEASE_BYTES` of rows
    written (:meth:`add`): at every row group it cost ~15% more CPU in page faults, never it
    left the allocator holding tens of MB at 1M runs (docs/benchmarks.md, Runs AN and AP)."""

    def __init__(self) -> None:
        self.written = 0

    def add(self, nbytes: int) -> None:
        self.written += nbytes
        if self.written >= RELEASE_BYTES:
            self.written = 0
            pa.default_memory_pool().release_unused()


# Parts of at least this many Arrow bytes wait compressed (a load's parts: ~1 MB of runs each).
PACK_BYTES = 64 * 1024
# Arrow bytes a Clustered writes between two hand-backs of freed memory to the system.
RELEASE_BYTES = 64 * 1024 * 1024
_IPC = pa.ipc.IpcWriteOptions(compression="lz4")


def _pack(table: pa.Table) -> pa.Buffer:
    """``table`` as one lz4-compressed Arrow IPC stream (what :func:`_unpack` reads)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=_IPC) as writer:
        writer.write_table(table)
    return sink.getvalue()


def _unpack(buffer: pa.Buffer) -> pa.Table:
    return pa.ipc.open_stream(buffer).read_all()


def clustered(keys: list[str], budget: int) -> Callable[[GroupedWriter], Clustered] | None:
    """The ``through`` of :func:`write_reader` that sorts by ``keys``
    (:func:`kidata.store.schema.clustered_keys`) within ``budget`` bytes; None (file order)
    when ``keys`` is empty."""
    return (lambda writer: Clustered(writer, keys, budget)) if keys else None


class InOrder:
    """Rows already in the order of a :class:`Clustered` file (a subset of one, read in file
    order) handed to a writer, which is cut at each change of ``lead`` so that each row group
    holds one value of it again. Rows of a value that comes back after another, or of values
    out of order (ascending, nulls last), are refused (:class:`WarehouseError`): the rows were
    not in that order, and the file would not be either."""

    def __init__(self, writer: Any, lead: str):
        self.writer = writer
        self.lead = lead
        self.current: tuple | None = None  # (is null, value) of the last row's lead

    def write(self, table: pa.Table) -> None:
        if not table.num_rows:
            return
        runs = pc.run_end_encode(table.column(self.lead).combine_chunks())
        start = 0
        for end, value in zip(runs.run_ends.to_pylist(), runs.values.to_pylist(), strict=True):
            key = _nulls_last(value)
            if self.current is not None and key != self.current:
                if key < self.current:
                    before = None if self.current[0] else self.current[1]
                    raise WarehouseError(f"rows out of order: {self.lead} {value!r} after "
                                         f"{before!r}")
                self.writer.cut()
            self.current = key
            self.writer.write(table.slice(start, end - start))
            start = end

    def close(self) -> None:
        self.writer.cut()


def write_reader(path: Path, schema: pa.Schema, reader: Iterable[pa.RecordBatch],
                 through: Callable[[GroupedWriter], Any] | None = None,
                 **options: object) -> int:
    """Write every batch of ``reader`` (cast to ``schema``) to ``path`` with a
    :class:`GroupedWriter` (``options`` are its keyword arguments), fsync the file if one was
    written, and return the rows written. ``through(writer)``, if given, makes what the
    tables go through on their way to the writer (its ``write(table)``, then ``close()``: the
    clustering of :func:`kidata.store.compaction.merge`)."""
    with GroupedWriter(path, schema, **options) as writer:  # type: ignore[arg-type]
        sink = writer if through is None else through(writer)
        try:
            for batch in reader:
                sink.write(pa.Table.from_batches([batch]).cast(schema))
        except BaseException:
            if through is not None:
                sink.abort()  # its spill folder
            raise
        if through is not None:
            sink.close()
    if path.exists():
        durable.fsync_file(path)
    return writer.rows
