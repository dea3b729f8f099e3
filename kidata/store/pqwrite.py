"""Write Parquet files in row groups big enough to query fast, with bounded memory.

Rows reach the writers in small pieces (a few thousand rows at a time). Written as they come,
each piece becomes its own row group: a 1M-run table then has about a thousand row groups and
a 5 MB footer that every query must read and plan over (3-10x slower queries at 1M runs).
:class:`GroupedWriter` gathers pieces until a row group is full (``ROWS`` rows) or its buffer
reaches ``MAX_BYTES``, whichever comes first, so memory stays bounded whatever the file size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kidata.store import durable

# DuckDB's own default row-group size; Spark and DuckDB read such groups in parallel.
ROWS = 122_880
# A row group of wide rows (runs keep their JSON document) is cut early at this many bytes.
MAX_BYTES = 16 * 1024 * 1024
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
            self._writer = pq.ParquetWriter(self.path, self.schema, **options(self.schema))
        if self.before_write is not None:
            self.before_write()
        self._writer.write_table(data, row_group_size=max(self.group_rows, data.num_rows))

    def cut(self) -> None:
        """End the current row group here: what is buffered is written as one."""
        self._flush()

    def close(self) -> None:
        """Write what is buffered and close the file."""
        try:
            self._flush()
            if self._writer is None and self.create_empty:
                self._writer = pq.ParquetWriter(self.path, self.schema, **options(self.schema))
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
    ``group_rows`` and ``max_bytes``) so that each row group holds one value of ``keys[0]``
    (one GPU), its rows ordered by ``keys`` (ascending, nulls last). Rows wait in one buffer
    per value; a buffer goes out as a row group once it is a row group's worth (the writer's
    rows or bytes), or, the largest first, when all buffers together hold more than
    ``budget`` bytes. Memory stays bounded whatever the table's size, and a filter on one GPU
    reads that GPU's row groups only. (A whole-table ORDER BY in DuckDB needed ~1.2 GB for
    300k runs and failed with Out of Memory under a 256 or 512 MB limit rather than spill:
    docs/benchmarks.md, Run AE.)

    A waiting part is held as an lz4-compressed Arrow IPC message, not as Arrow arrays: run
    documents compress ~8x, so the buffers of many GPUs' row groups fit in a few MB and no
    row group is cut early for want of room (docs/benchmarks.md, Run AO: a load of 1M runs
    peaked at 529-532 MB holding them as arrays in 32 MB, 499-505 MB compressed, for ~3 CPU s
    of compression at most). Parts under :data:`PACK_BYTES` wait as they are. ``budget``
    counts the bytes held."""

    def __init__(self, writer: Any, keys: list[str], budget: int):
        self.writer = writer
        self.lead = keys[0]
        self.sort_keys = [(k, "ascending", "at_end") for k in keys]
        self.budget = budget
        self.buffers: dict[object, list[pa.Buffer | pa.Table]] = {}
        self.sizes: dict[object, tuple[int, int, int]] = {}  # rows, Arrow bytes, held bytes
        self.held = 0
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
                    or self.sizes[value][1] >= self.writer.max_bytes):
                self._emit(value)
        while self.held > self.budget:
            self._emit(max(self.sizes, key=lambda v: self.sizes[v][2]))

    def close(self) -> None:
        """Write what is buffered, by value (nulls last), so the file's end is in order too."""
        for value in sorted(self.buffers, key=lambda v: (v is None, v or "")):
            self._emit(value)

    def _emit(self, value: object) -> None:
        table = pa.concat_tables([_unpack(b) if isinstance(b, pa.Buffer) else b
                                  for b in self.buffers.pop(value)])
        self.held -= self.sizes.pop(value)[2]
        self.writer.write(table.take(pc.sort_indices(table, sort_keys=self.sort_keys)))
        self.writer.cut()
        # The parts leave the allocator holding tens of MB at 1M runs otherwise.
        self.hand_back.add(table.nbytes)


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
    """The ``through`` of :func:`write_reader` that clusters by ``keys``
    (:func:`kidata.store.schema.clustered_keys`) within ``budget`` bytes; None (file order)
    when ``keys`` is empty."""
    return (lambda writer: Clustered(writer, keys, budget)) if keys else None


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
        for batch in reader:
            sink.write(pa.Table.from_batches([batch]).cast(schema))
        if through is not None:
            sink.close()
    if path.exists():
        durable.fsync_file(path)
    return writer.rows
