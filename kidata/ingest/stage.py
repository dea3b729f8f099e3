"""Stage a load: read, check and flatten input records into staging Parquet files, using
worker processes when the input is large.

Records are checked and flattened by one function, :func:`stage_record`, in the loading
process or in a worker. The readers hand out the lines of JSON Lines files unparsed
(:class:`~kidata.ingest.readers.Lines`) and the rows of Liger CSV files unconverted
(:class:`~kidata.ingest.readers.Rows`); once there are enough of them, they go in batches to a
pool of worker processes (``KIDATA_WORKERS``, default one per core; ``0`` turns the pool off) that
parse (or convert: :func:`~kidata.ingest.readers.liger.convert_rows`), check and flatten them and
write their own staging files. Everything else is done here.
In both places a JSON line of the common bundle shape is decoded by the fast path
(:mod:`kidata.ingest.fast`, ``KIDATA_SLOW_PATH=1`` turns it off) and every other record read by
the readers; both are flattened by the same :class:`~kidata.ingest.flatten.Flattener` and staged
by the same function (:func:`stage_record` / :func:`stage_fast`), so they give the same rows.

The result is the same as reading the input in one pass, in order:

- each record gets a sequence number in input order (``_seq``: the commit orders and
  deduplicates by it), reserved when its batch is sent;
- a Liger row's only state from earlier rows is its Workload document, built by the first row
  of its key: the reader marks the rows that depend on which row came first (a key seen in
  two variants), a worker hands those back (``defer``) to be converted here in order, and
  tells the documents it built (``learn``), so this process knows what one pass would;
- a flattener's only state that changes a result is the environments it has seen (so that a
  run without its environment document can name its GPU). A worker knows the warehouse's
  environments and those of the records it has flattened, all earlier in the input; a run
  whose environment it does not know is handed back
  (:class:`~kidata.ingest.flatten.NeedsEnvironment`) and flattened here, after every record
  before it;
- results are merged in input order, so the report lists rejects and warnings in input order.

The rows of ``runs`` and ``measurements`` are written once, by the loading process, in their
final form (:mod:`kidata.store.finalize`): a worker hands them back with its batch's result, as
Arrow buffers, and they are written in input order (a deferred record's rows at its place).
The other tables' rows are staged by each process into files of their own.

Memory stays bounded: at most ``workers + 1`` batches are in flight and each process stages
at most a batch of rows before writing them; the final files are written a row group at a time.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import itertools
import os
import pickle
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kidata._imports import POOL_VARIABLE, use_system_allocator
from kidata.core.load_report import LoadReport, Reject, max_kept_rejects
from kidata.errors import RecordError, WarehouseError
from kidata.ingest import fast as fast_path
from kidata.ingest.fast import FastPath
from kidata.ingest.flatten import (
    MEASUREMENT_COLUMNS,
    RUN_COLUMNS,
    Flat,
    Flattener,
    NeedsEnvironment,
)
from kidata.ingest.readers import liger
from kidata.ingest.readers.base import Item, Lines, Rows
from kidata.store import commit, finalize, pqwrite
from kidata.store.durable import fault
from kidata.store.layout import staged_name
from kidata.store.schema import STAGED_LATENCY, TABLES, staged_schema

# Tables whose rows repeat across records (one row per key): the stager drops repeats it has
# already staged, so a load of a million runs does not stage a million copies of the same
# environment. The commit's dedupe (first row by _seq per key; for workloads the first with a
# document) still decides; dropping a row that dedupe would never pick changes nothing.
_DIMENSIONS = {"environments": ("environment_id",), "protocols": ("protocol_id",),
               "workloads": ("workload_id",), "workload_parameters": ("workload_id", "name"),
               "implementations": ("implementation_id",)}
_MAX_SEEN = 200_000


# The rows of runs and measurements are the flattener's tuples (RUN_COLUMNS,
# MEASUREMENT_COLUMNS), each with a tuple of the columns staging adds (these, in order).
_FLAT = {"runs": (RUN_COLUMNS, ("source_file", "_seq", "_position", *STAGED_LATENCY)),
         "measurements": (MEASUREMENT_COLUMNS, ("_seq", "_position"))}
# Large text columns written by concatenating their UTF-8 bytes: converting a batch of run
# documents (~50 MB) one Python object at a time into a growing Arrow buffer cost ten times
# more.
_TEXT = frozenset({("runs", "document")})


class StagingWriter:
    """Buffers rows per table and writes them in batches: the rows of
    :data:`~kidata.store.finalize.DIRECT` tables (runs, measurements) in their final form
    (:class:`~kidata.store.finalize.DirectWriter`), the other tables to staging Parquet files.

    A row of runs or measurements is the flattener's tuple (:data:`~kidata.ingest.flatten.
    RUN_COLUMNS`, :data:`~kidata.ingest.flatten.MEASUREMENT_COLUMNS`) beside a tuple of the
    columns staging adds (:attr:`extra`); a row of any other table is a tuple of its values in
    the order of :attr:`names` (the staged schema). :meth:`pending` lists them all alike.

    In a worker process (``ship``), the direct tables' rows are not written but kept as Arrow
    tables (:meth:`shipped`) for the loading process to write (:meth:`append`), so that one
    file per table holds the load in input order."""

    def __init__(self, folder: Path, batch: int, ship: bool = False):
        self.folder = folder
        self.batch = batch
        self.schemas = {t: staged_schema(t) for t in TABLES}
        self.names = {t: list(schema.names) for t, schema in self.schemas.items()}
        for table, (flat, extra) in _FLAT.items():
            if sorted((*flat, *extra)) != sorted(self.names[table]):
                raise AssertionError(f"the staged columns of {table} are not the flattener's "
                                     "and staging's: update stage._FLAT")
        self.structs = {t: pa.struct(list(schema)) for t, schema in self.schemas.items()}
        # runs and measurements: where each staged column is, in order, as (0, place in the
        # flattener's tuple) or (1, place in the staging tuple), and whether it is a text
        # column (converted by its bytes).
        self.flat_at = {
            t: [((0, flat.index(f.name)) if f.name in flat else (1, extra.index(f.name)),
                 (t, f.name) in _TEXT) for f in self.schemas[t]]
            for t, (flat, extra) in _FLAT.items()}
        # Where add() puts the record's number, position and file in a row of each table.
        self.slots = {t: (names.index("_seq"), names.index("_position"),
                          names.index("source_file") if "source_file" in names else None)
                      for t, names in self.names.items()}
        # One tuple per row (one append per row rather than one per cell).
        self.rows: dict[str, list[tuple]] = {t: [] for t in TABLES}
        self.extra: dict[str, list[tuple]] = {t: [] for t in _FLAT}
        self.counts = dict.fromkeys(TABLES, 0)
        self.seen: dict[str, dict[tuple, bool]] = {t: {} for t in _DIMENSIONS if t in TABLES}
        self.parts = 0
        self.tag = ""  # in file names: worker processes stage into the same folder
        self.max_rejects = max_kept_rejects()
        self.rejects_staged = 0
        self.outbox: dict[str, list[pa.Table]] | None = (
            {t: [] for t in finalize.DIRECT} if ship else None)
        self.direct: finalize.DirectWriter | None = None

    def add(self, table: str, row: dict, seq: int, position: str,
            source_file: str | None = None) -> None:
        """Stage one row (a dictionary; not changed) of a table other than runs and
        measurements, with its record's number, position and, when given, file."""
        seen = self.seen.get(table)
        if seen is not None:
            key = self.staged_key(table, row)
            if key is None:
                return  # an earlier staged row is the one the commit would keep
            if len(seen) >= _MAX_SEEN:
                seen.clear()
            seen[key] = _documented(table, row)
        values = [row.get(name) for name in self.names[table]]
        at_seq, at_position, at_file = self.slots[table]
        values[at_seq] = seq
        values[at_position] = position
        if source_file is not None and at_file is not None:
            values[at_file] = source_file
        self.rows[table].append(tuple(values))
        self.counts[table] += 1

    def staged_key(self, table: str, row: dict) -> tuple | None:
        """The key of a dimension table's ``row`` (``table`` in :attr:`seen`), or None when an
        earlier staged row is the one the commit would keep: one with the same key, unless
        that one is a workload known only by its digest and ``row`` brings its document."""
        columns = _DIMENSIONS[table]
        key = (row.get(columns[0]),) if len(columns) == 1 else tuple(map(row.get, columns))
        documented = self.seen[table].get(key)
        if documented is None:
            return key
        return None if documented or not _documented(table, row) else key

    def pending(self) -> dict[str, list[tuple]]:
        """The rows buffered so far, per table, as tuples in the staged schema's order."""
        out = {}
        for table, rows in self.rows.items():
            if table not in _FLAT:
                out[table] = list(rows)
                continue
            order = (*_FLAT[table][0], *_FLAT[table][1])
            at = [order.index(n) for n in self.names[table]]
            out[table] = [tuple((*row, *extra)[i] for i in at)
                          for row, extra in zip(rows, self.extra[table], strict=True)]
        return out

    def maybe_flush(self) -> None:
        if self.counts["runs"] >= self.batch or self.counts["rejects"] >= self.batch:
            self.flush()

    def flush(self, direct_only: bool = False) -> None:
        """Write the buffered rows (``direct_only``: of the direct tables only, so that rows
        staged elsewhere can follow them in order)."""
        for table, rows in self.rows.items():
            direct = table in finalize.DIRECT
            if not self.counts[table] or (direct_only and not direct):
                continue
            data = self._table(table)
            rows.clear()
            if table in self.extra:
                self.extra[table].clear()
            self.counts[table] = 0
            if direct:
                if len(finalize.sort_keys(table)) > 1:
                    data = data.sort_by(finalize.sort_keys(table))
                if self.outbox is not None:
                    self.outbox[table].append(data)
                else:
                    self._direct().write(table, data)
                continue
            fault("stage-write")
            pq.write_table(data, self.folder / staged_name(table, f"{self.tag}{self.parts:06d}"),
                           **pqwrite.options(data.schema, compression="lz4"))
        if not direct_only:
            self.parts += 1

    def _table(self, table: str) -> pa.Table:
        schema = self.schemas[table]
        rows = self.rows[table]
        if table not in _FLAT:
            # The row tuples converted in one pass (as a struct array).
            return pa.Table.from_arrays(pa.array(rows, type=self.structs[table]).flatten(),
                                        schema=schema)
        extra = self.extra[table]
        n = len(rows)
        if len(extra) != n:
            raise AssertionError(f"{table}: {n} rows but {len(extra)} staging tuples")
        # Column by column: the flattener's tuples and the staging tuples turned into
        # columns (zip), each converted in one pass; the run documents by their bytes.
        # (Against joining each row's two tuples into one struct array, Run S in
        # docs/benchmarks.md: ~0.15 CPU µs per run cheaper for runs in a worker's batches,
        # within ±0.1 µs for measurements.)
        sources = (list(zip(*rows, strict=True)) if n else None,
                   list(zip(*extra, strict=True)) if n else None)
        arrays = []
        for f, ((source, i), text) in zip(schema, self.flat_at[table], strict=True):
            column = sources[source][i] if n else ()
            arrays.append(_text_array(column, f.type) if text
                          else pa.array(column, type=f.type))
        return pa.Table.from_arrays(arrays, schema=schema)

    def _direct(self) -> finalize.DirectWriter:
        if self.direct is None:
            # The staging folder is named after the load.
            load_id = self.folder.name
            self.direct = finalize.DirectWriter(self.folder, load_id,
                                                commit.started_at(load_id))
        return self.direct

    def shipped(self) -> dict[str, pa.Table]:
        """A worker's direct rows since the last call, one table each (after :meth:`flush`)."""
        assert self.outbox is not None
        out = {t: pa.concat_tables(parts) for t, parts in self.outbox.items() if parts}
        for parts in self.outbox.values():
            parts.clear()
        return out

    def append(self, tables: dict[str, pa.Table]) -> None:
        """Write direct rows a worker staged (:meth:`shipped`), after the rows buffered
        here: all of them come before, in input order."""
        self.flush(direct_only=True)
        for table, data in tables.items():
            self._direct().write(table, data)

    def close(self) -> None:
        """Write everything buffered and close the final-form files."""
        self.flush()
        if self.direct is not None:
            self.direct.close()

    def abort(self) -> None:
        if self.direct is not None:
            self.direct.abort()


def _text_array(values: Sequence, type_: pa.DataType) -> pa.Array:
    """A string column from ``str`` or UTF-8 ``bytes`` values, by joining their bytes once
    (the same array ``pa.array(values, type_)`` gives)."""
    if type_ == pa.string() and None not in values:
        try:
            data = [v if type(v) is bytes else v.encode() for v in values]
        except (AttributeError, UnicodeEncodeError):
            data = None
        if data is not None:
            offsets = list(itertools.accumulate(map(len, data), initial=0))
            if offsets[-1] < 2**31:
                return pa.StringArray.from_buffers(
                    len(data), pa.array(offsets, type=pa.int32()).buffers()[1],
                    pa.py_buffer(b"".join(data)))
    return pa.array(values, type=type_)


# Lines per batch sent to a worker (about 4.5 MB of typical bundles): large enough that a
# worker's staging files are few, small enough to keep every worker busy. 1024 lowered a
# 1M-bundle load's peak by ~35 MB but cost 1-3% more CPU (docs/benchmarks.md, Run Q).
BATCH_LINES = 2048
# Rows of a Liger CSV per batch sent to a worker. Measured at 150k rows (docs/benchmarks.md,
# Run R): 2,048, 4,096 and 8,192 cost the same CPU and wall time; a load's peak memory
# (loading process and two workers) was 484, 546 and 698 MB.
POOL_ROWS = 2048
# Records read but not yet processed here (records of non-JSON-Lines files).
MAX_PENDING = 10_000


def workers() -> int:
    """Worker processes for large loads: ``KIDATA_WORKERS`` if set, else one per core up to
    4 (none on a single core, where they would only add overhead). A worker writes its rows
    after every job (``BATCH_LINES`` lines) and keeps no numpy, so a load's memory is about
    200 MB plus ~100 MB per worker (mostly Python, pyarrow and a job's rows), whatever the
    input size (measured, docs/benchmarks.md Run Q: 306, 410 and 516 MB with 1, 2 and 3
    workers at 100k bundles; 427–434 MB with 2 at 1M, from 486–511 MB before; 442–462 MB
    since 0.2.7 keeps freed memory for reuse, Run U); the loading
    process alone stages up to ``batch`` runs (``Warehouse.load``'s ``batch_size``) at a time
    (344 MB at 100k without workers)."""
    value = os.environ.get("KIDATA_WORKERS")
    if value is not None:
        try:
            return max(0, int(value))
        except ValueError:
            return 0
    cores = os.cpu_count() or 1
    return 0 if cores < 2 else min(cores, 4)


def _tally(counts: dict[str, list[int]], name: str) -> list[int]:
    tally = counts.get(name)
    if tally is None:
        tally = counts[name] = [0, 0, 0, 0]
    return tally


def stage_record(stager: StagingWriter, flattener: Flattener, report: LoadReport,
                 item: Item | RecordError, name: str, seq: int,
                 counts: dict[str, list[int]]) -> None:
    """Check and flatten one record and stage its rows, or stage its reject. Raises
    :class:`NeedsEnvironment` (before staging anything) when the flattener defers it.
    ``counts[name]`` tallies the file's records, runs, rejects and warnings."""
    tally = _tally(counts, name)
    if isinstance(item, RecordError):
        report.records += 1
        tally[0] += 1
        tally[2] += 1
        _reject(stager, report, item, getattr(item, "raw", None), seq)
        return
    try:
        flat = flattener.flatten(item)
    except RecordError as err:
        report.records += 1
        tally[0] += 1
        tally[2] += 1
        _reject(stager, report, err, item.raw, seq)
        return
    _stage_flat(stager, report, flat, name, seq, item.position, tally)


def stage_fast(fast: FastPath, report: LoadReport, line: bytes, file: str, position: str,
               name: str, seq: int, counts: dict[str, list[int]]) -> bool:
    """Stage one JSON line by the fast path (:mod:`kidata.ingest.fast`: the same flattener,
    staged here by the same function as :func:`stage_record`); False (nothing staged or
    counted) when the line must take the general path."""
    flat = fast.flatten(line, file, position)
    if flat is None:
        return False
    report.fast_path += 1
    _stage_flat(fast.stager, report, flat, name, seq, position, _tally(counts, name))
    return True


def _stage_flat(stager: StagingWriter, report: LoadReport, flat: Flat, name: str, seq: int,
                position: str, tally: list[int]) -> None:
    """Stage the rows of one flattened record (either path's: they are staged only here)."""
    report.records += 1
    tally[0] += 1
    runs = flat.run_rows
    if flat.warnings:
        tally[3] += len(flat.warnings)
        for message in flat.warnings:
            report.add_warning(message)
    if runs:
        tally[1] += len(runs)
        measurements = flat.measurement_rows
        # One run per record: its latency quantiles, for latest_runs; the center is the
        # median, else the mean (run_statistics). Measurement rows: (run_id, metric,
        # statistic, unit, value, resolution).
        median = p20 = p80 = mean = None
        has_median = False
        for m in measurements:
            if m[1] == "latency":
                statistic = m[2]
                if statistic == "median":
                    median, has_median = m[4], True
                elif statistic == "p20":
                    p20 = m[4]
                elif statistic == "p80":
                    p80 = m[4]
                elif statistic == "mean":
                    mean = m[4]
        extra = stager.extra["runs"]
        extra.append((name, seq, position, median if has_median else mean, p20, p80))
        for _ in runs[1:]:
            extra.append((name, seq, position, None, None, None))
        stager.rows["runs"] += runs
        stager.counts["runs"] += len(runs)
        if measurements:
            stager.rows["measurements"] += measurements
            stager.extra["measurements"] += [(seq, position)] * len(measurements)
            stager.counts["measurements"] += len(measurements)
    for table in _DICT_TABLES:
        rows = getattr(flat, table)
        if not rows:
            continue
        for row in rows:
            stager.add(table, row, seq, position, name)  # drops a row already staged
    stager.maybe_flush()


def _documented(table: str, row: dict) -> bool:
    """Whether a staged dimension row wins over a later one with its key: every row but a
    workload known only by its digest (a later row with the document replaces it)."""
    return table != "workloads" or row.get("document") is not None


# The tables whose rows a Flat holds as dictionaries.
_DICT_TABLES = ("environments", "protocols", "workloads", "workload_parameters",
                "implementations", "published")


def _reject(stager: StagingWriter, report: LoadReport, err: RecordError, raw: str | None,
            seq: int) -> None:
    report.add_reject(Reject(err.file, err.position, err.field, err.reason))
    # Each process stages at most the cap, its first in input order: among them are the
    # load's first `cap` rejects, which the commit keeps (kidata.store.load_commit).
    if stager.rejects_staged >= stager.max_rejects:
        return
    stager.rejects_staged += 1
    stager.add("rejects", {"source_file": err.file, "position": err.position,
                           "field": err.field, "reason": err.reason, "raw": raw},
               seq, err.position)
    stager.maybe_flush()


# -- worker side -------------------------------------------------------------------------------

@dataclass
class _Events(LoadReport):
    """A worker's report of one batch: what happened, each with its sequence number, in order.
    ``events`` holds ``(seq, kind, payload)``: ``reject`` (a Reject), ``warn`` (a message),
    ``env`` (an environment id and its GPU, newly seen) and ``defer`` (a record to flatten in
    the loading process). ``tables`` holds the batch's rows of the direct tables
    (:meth:`StagingWriter.shipped`), for the loading process to write."""

    seq: int = 0
    events: list[tuple[int, str, Any]] = field(default_factory=list)
    counts: dict[str, list[int]] = field(default_factory=dict)
    tables: dict[str, pa.Table] = field(default_factory=dict)

    def add_reject(self, reject: Reject) -> None:
        self.rejected += 1
        if self.rejected <= 1000:
            self.events.append((self.seq, "reject", reject))

    def add_warning(self, message: str) -> None:
        self.warned += 1
        if self.warned <= 1000:
            self.events.append((self.seq, "warn", message))


_worker: dict[str, Any] = {}


def _init_worker(staging: str, batch: int, known: list[tuple[str, str]]) -> None:
    flattener = Flattener(defer_unknown_environments=True)
    for env_id, gpu in known:
        flattener.know_environment(env_id, gpu)
    stager = StagingWriter(Path(staging), batch, ship=True)
    _worker.update(flattener=flattener, stager=stager, fast=FastPath(stager, flattener),
                   liger={})


# What a worker process runs (``python -c``): numpy and pandas refused before this module
# imports pyarrow, which would import them for nothing (numpy: ~30 MB resident per worker;
# pandas: 0.4 s and 50 MB), then :func:`_serve`.
_WORKER_MAIN = ("from kidata._imports import refuse_numpy, refuse_pandas; "
                "refuse_numpy(); refuse_pandas(); "
                "from kidata.ingest.stage import _serve; _serve()")


def _serve() -> None:
    """A worker process: read the set-up, then jobs, from stdin (pickled); write each job's
    result to stdout (pickled), in order."""
    import signal

    from kidata._imports import refuse_pandas

    refuse_pandas()  # in case _serve is started otherwise than by _WORKER_MAIN
    # Ctrl-C is the loading process's to handle: it stops sending work and closes our input.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but results on the pipe
    _init_worker(*pickle.load(inp))
    # A worker's objects are rows and documents, freed as soon as staged (no cycles to
    # collect): the collector's passes over every imported module's objects cost ~3% of a
    # worker's time. Imports are frozen out of its reach and young passes made rarer.
    gc.freeze()
    gc.set_threshold(*STAGING_GC)
    while True:
        try:
            job = pickle.load(inp)
        except EOFError:
            return
        try:
            result: Any = _work(*job)
        except BaseException as exc:  # noqa: BLE001 - reported to the loading process
            # What failed, in one line (a full disk: "[Errno 28] No space left on device"),
            # and the traceback apart, for --debug.
            what = str(exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"
            result = ("error", what, traceback.format_exc())
        _send_result(out, result)
        # Sent: the job's lines and its events and rows are freed now, not when the next
        # job's replace them (the worker would hold two jobs' worth while reading the next).
        del job, result


def _send_result(out: Any, result: Any) -> None:
    """Write a job's result: the sizes of its Arrow buffers, the buffers, then the pickle
    that refers to them (out of band, :pep:`574`), so that the loading process reads them
    straight into Arrow memory (:func:`_receive_result`)."""
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(result, protocol=5, buffer_callback=buffers.append)
    views = [b.raw() for b in buffers]
    pickle.dump([v.nbytes for v in views], out, protocol=5)
    for view in views:
        out.write(view)
    out.write(data)
    out.flush()


def _receive_result(stream: Any) -> Any:
    """Read what :func:`_send_result` wrote. The rows' buffers are allocated by Arrow's
    memory pool, which gives memory back to the system once they are written: as Python
    ``bytes`` (an ordinary pickle) they fragmented the heap, and the loading process grew by
    ~70 MB."""
    sizes = pickle.load(stream)
    buffers = []
    for size in sizes:
        buffer = pa.allocate_buffer(size)
        view, got = memoryview(buffer), 0
        while got < size:
            n = stream.readinto(view[got:])
            if not n:
                raise EOFError
            got += n
        buffers.append(buffer)
    return pickle.load(stream, buffers=buffers)


@contextlib.contextmanager
def system_memory():
    """Arrow's allocations on the C library's allocator while a load stages (as in the
    worker processes), unless ``ARROW_DEFAULT_MEMORY_POOL`` says otherwise. The loading
    process writes the final files while the workers run; on mimalloc, Arrow's default, it
    kept ~50 MB more of what it had freed (and each worker ~15 MB), which the peak of a
    load (< 500 MB) cannot spare. Measured: the same CPU time."""
    if os.environ.get(POOL_VARIABLE):
        yield
        return
    before = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        yield
    finally:
        pa.default_memory_pool().release_unused()
        pa.set_memory_pool(before)


# The garbage collector's thresholds while a process stages: a young pass every 100,000
# allocations rather than 700. Staged rows hold no cycles (reference counting frees them);
# a pass every 700 allocations walked every row buffered so far (~15% of the time of turning
# a batch into Arrow).
STAGING_GC = (100_000, 50, 1_000)


@contextlib.contextmanager
def _frozen_objects():
    """While a load stages: the objects that exist when it starts (modules, the caller's) out
    of the garbage collector's passes (:func:`gc.freeze`) and the collector's thresholds at
    :data:`STAGING_GC`; both as they were after."""
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(*STAGING_GC)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


class _Worker:
    """One worker process (a fresh interpreter running :func:`_serve`). Plain subprocesses
    rather than multiprocessing, whose spawned children import the caller's main script
    again: a library user's unguarded script would then load recursively."""

    def __init__(self, setup: tuple):
        env = dict(os.environ)
        # The child imports the same kidata as this process: this process's path in order
        # ('' being the current folder), and not first a `kidata` folder in the current
        # folder that this process did not import (-P).
        env["PYTHONPATH"] = os.pathsep.join(p or os.getcwd() for p in sys.path)
        use_system_allocator(env)  # see system_memory()
        self.proc = subprocess.Popen(
            [sys.executable, "-P", "-c", _WORKER_MAIN],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.waiting: collections.deque[Future] = collections.deque()
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self._write(setup)

    def _write(self, obj: Any) -> None:
        try:
            pickle.dump(obj, self.proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the reader reports the dead worker

    def submit(self, *job: Any) -> Future:
        future: Future = Future()
        with self.lock:
            self.waiting.append(future)
        self._write(job)
        return future

    def _read(self) -> None:
        while True:
            try:
                result = _receive_result(self.proc.stdout)
            except (EOFError, OSError, pickle.UnpicklingError, ValueError):
                break
            with self.lock:
                future = self.waiting.popleft()
            if isinstance(result, tuple) and result[:1] == ("error",):
                error = WarehouseError(f"a staging worker failed: {result[1]}")
                error.detail = result[2]  # type: ignore[attr-defined]
                future.set_exception(error)
            else:
                future.set_result(result)
            # Delivered: the future is the only holder now (not this thread while it waits
            # for the next result), so a merged job's rows are freed at once.
            del future, result
        code = self.proc.wait()
        with self.lock:
            while self.waiting:
                self.waiting.popleft().set_exception(WarehouseError(
                    f"a staging worker process ended unexpectedly (exit code {code})"))

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.reader.join()
        self.proc.stdout.close()


def _work(job: int, first_seq: int, segments: list[tuple[Lines, str]]) -> _Events:
    flattener: Flattener = _worker["flattener"]
    stager: StagingWriter = _worker["stager"]
    fast: FastPath = _worker["fast"]
    stager.tag = f"j{job:07d}-"
    out = _Events(load_id="")
    seq = first_seq - 1
    for lines, name in segments:
        if isinstance(lines, Rows):
            seq = _work_rows(out, lines, name, seq)
            continue
        for position, line, error in fast_path.scan(lines):
            seq += 1
            out.seq = seq
            known = len(flattener.env_gpu)
            if error is None and stage_fast(fast, out, line, lines.file, position, name,
                                            seq, out.counts):
                pass
            else:
                item = error if error is not None else fast_path.parse(
                    line, lines.file, position, lines.title)
                _stage_or_defer(out, item, name, seq)
            if len(flattener.env_gpu) != known:  # inline: this loop runs once per line
                _tell_environments(out, known, seq)
    stager.flush()
    out.tables = stager.shipped()
    return out


def _work_rows(out: _Events, rows: Rows, name: str, seq: int) -> int:
    """Convert and stage CSV rows in a worker (see :func:`_work`); the last number used.
    A row that depends on an earlier row is handed back (``defer``); a Workload document
    built here is told to the loading process (``learn``), which needs it for such rows."""
    flattener: Flattener = _worker["flattener"]
    files = _worker["liger"]
    docs = files.get(rows.context.key)
    if docs is None:
        docs = files[rows.context.key] = liger.new_docs(learned=[])
    learned = docs.learned
    for entry, item in liger.convert_rows(rows, docs, defer=True):
        seq += 1
        out.seq = seq
        if learned:
            for found in learned:
                out.events.append((seq, "learn", (rows.context.key, found)))
            learned.clear()
        if item is None:
            out.events.append((seq, "defer", (Rows(rows.file, rows.context, [entry]), name)))
            continue
        known = len(flattener.env_gpu)
        _stage_or_defer(out, item, name, seq)
        if len(flattener.env_gpu) != known:
            _tell_environments(out, known, seq)
    return seq


def _stage_or_defer(out: _Events, item: Item | RecordError, name: str, seq: int) -> None:
    """Stage one record in a worker; a record whose environment this worker has not seen is
    handed back to the loading process (``defer``), which has seen every one before it."""
    try:
        stage_record(_worker["stager"], _worker["flattener"], out, item, name, seq, out.counts)
    except NeedsEnvironment:
        out.events.append((seq, "defer", (item, name)))


def _tell_environments(out: _Events, known: int, seq: int) -> None:
    """The environments this worker learned since it knew ``known`` of them (``env``)."""
    for env in list(_worker["flattener"].env_gpu.items())[known:]:
        out.events.append((seq, "env", env))


# -- loading process ---------------------------------------------------------------------------

class Stage:
    """Stages the records of one load (see the module docstring). Feed it what
    :func:`~kidata.ingest.readers.read_file` yields, in order, then call :meth:`finish`."""

    def __init__(self, staging: Path, batch: int, known: list[tuple[str, str]],
                 report: LoadReport, progress: Callable[[str, int], None] | None = None):
        self.staging = staging
        self.batch = batch
        self.known = known
        self.report = report
        self.progress = progress
        self.memory = contextlib.ExitStack()  # until close()
        self.memory.enter_context(system_memory())
        self.memory.enter_context(_frozen_objects())
        self.stager = StagingWriter(staging, batch)
        self.flattener = Flattener()
        for env_id, gpu in known:
            self.flattener.know_environment(env_id, gpu)
        self.fast = FastPath(self.stager, self.flattener)
        self.workers = workers()
        # JSON Lines come unparsed, for the workers or for the fast path here; Liger CSV rows
        # unconverted, for the workers or to be converted here.
        self.batch_lines = BATCH_LINES
        self.batch_rows = POOL_ROWS if self.workers else None  # else read as records
        # Per read of a Liger CSV (Context.key): what its rows converted so far built.
        self.liger_docs: dict[int, Any] = {}
        self.pool: list[_Worker] | None = None
        self.jobs = 0
        self.seq = 0
        # In input order: ("job", Future) or ("item", record, file name, seq).
        self.pending: collections.deque[tuple] = collections.deque()
        self.in_flight = 0
        self.segments: list[tuple[Lines | Rows, str]] = []
        self.segment_lines = 0  # JSON lines collected
        self.segment_rows = 0  # CSV rows collected
        self.name = ""
        self.counts: dict[str, list[int]] = {}  # per file: records, runs, rejects, warnings
        self.files: list[tuple[str, tuple[int, str, int, int], str, int]] = []

    def feed(self, unit: Item | RecordError | Lines | Rows, name: str) -> None:
        self.name = name
        if isinstance(unit, Lines | Rows):
            self.segments.append((unit, name))
            if isinstance(unit, Rows):
                self.segment_rows += unit.count
            else:
                self.segment_lines += unit.count
            if self._full():
                self._send()
        else:
            self._send()
            self.seq += 1
            self.pending.append(("item", unit, name, self.seq))
        self._drain(block=False)

    def file_done(self, name: str, fingerprint: tuple[int, str, int, int] | None,
                  fmt: str) -> None:
        """Note a file read to the end (see :meth:`summaries`)."""
        if fingerprint is not None:
            self.files.append((name, fingerprint, fmt, self.seq))

    def finish(self) -> None:
        """Process everything still pending and write the last staging files."""
        self._send()
        self._drain(block=True)
        self.stager.close()

    def summaries(self) -> list[dict[str, Any]]:
        """What was read of each file: size, SHA-256, modification time, format and counts
        (files read once)."""
        names = [f[0] for f in self.files]
        out = []
        for name, (size, sha256, mtime_ns, hashed_at), fmt, _ in self.files:
            if names.count(name) > 1:
                continue  # read twice in one load: its counts are not its own
            records, runs, rejected, warned = self.counts.get(name, [0, 0, 0, 0])
            out.append({"source_file": name, "size": size, "sha256": sha256,
                        "mtime_ns": mtime_ns, "hashed_at": hashed_at, "format": fmt,
                        "records": records, "runs": runs, "rejected": rejected,
                        "warnings": warned})
        return out

    def close(self) -> None:
        self.stager.abort()  # after finish(): nothing left to abort
        if self.pool is not None:
            for worker in self.pool:
                worker.close()
            self.pool = None
        self.memory.close()

    def _full(self) -> bool:
        """Whether the collected lines and rows make a batch for a worker."""
        return self.segment_lines >= BATCH_LINES or self.segment_rows >= POOL_ROWS

    def _send(self) -> None:
        """Send the collected lines and rows to a worker, or, while no pool is worth starting
        (less than a batch so far), process them here."""
        if not self.segments:
            return
        full = self._full()
        segments, count = self.segments, self.segment_lines + self.segment_rows
        self.segments, self.segment_lines, self.segment_rows = [], 0, 0
        if self.pool is None and (not full or not self.workers):
            self._drain(block=True)  # without a pool, only records wait: keep their order
            for batch, name in segments:
                if isinstance(batch, Rows):
                    self._local_rows(batch, name)
                else:
                    self._local_lines(batch, name)
            return
        if self.pool is None:
            setup = (str(self.staging), self.batch, self.known)
            self.pool = [_Worker(setup) for _ in range(self.workers)]
        self.jobs += 1
        # The worker with the fewest jobs waiting (each takes its jobs in order, so every
        # worker sees its records in input order).
        worker = min(self.pool, key=lambda w: len(w.waiting))
        future = worker.submit(self.jobs, self.seq + 1, segments)
        self.seq += count  # a number for every line and row; blank lines leave gaps, order is kept
        self.pending.append(("job", future))
        self.in_flight += 1

    def _drain(self, block: bool) -> None:
        while self.pending:
            head = self.pending[0]
            if head[0] == "item":
                self.pending.popleft()
                _, item, name, seq = head
                self._local(item, name, seq)
                continue
            future: Future = head[1]
            if not (block or future.done() or self.in_flight > self.workers
                    or len(self.pending) >= MAX_PENDING):
                return
            self.pending.popleft()
            self.in_flight -= 1
            result = future.result()
            del head, future  # the merged rows are freed with `result`, not later
            self._merge(result)
            del result
            if self.progress is not None:
                self.progress(self.name, self.report.records)

    def _local_lines(self, batch: Lines, name: str) -> None:
        """The records of unparsed lines, here and in order: by the fast path when it takes
        them, else as the readers would have yielded them."""
        report, progress = self.report, self.progress
        for position, line, error in fast_path.scan(batch):
            self.seq += 1
            if error is None and stage_fast(self.fast, report, line, batch.file, position,
                                            name, self.seq, self.counts):
                if progress is not None and report.records % 10_000 == 0:
                    progress(name, report.records)
                continue
            item = error if error is not None else fast_path.parse(line, batch.file,
                                                                   position, batch.title)
            self._local(item, name, self.seq)

    def _local_rows(self, batch: Rows, name: str) -> None:
        """The records of CSV rows, converted here and in order."""
        docs = self._liger_docs(batch.context.key)
        for _, item in liger.convert_rows(batch, docs):
            self.seq += 1
            self._local(item, name, self.seq)

    def _liger_docs(self, key: int) -> Any:
        docs = self.liger_docs.get(key)
        if docs is None:
            docs = self.liger_docs[key] = liger.new_docs()
        return docs

    def _local(self, item: Item | RecordError, name: str, seq: int) -> None:
        stage_record(self.stager, self.flattener, self.report, item, name, seq, self.counts)
        if self.progress is not None and self.report.records % 10_000 == 0:
            self.progress(name, self.report.records)

    def _merge(self, result: _Events) -> None:
        report = self.report
        # The batch's direct rows are written here, in input order: those before a record
        # the worker deferred, then that record's, then the rest.
        shipped = _InOrder(result.tables)
        report.records += result.records
        report.fast_path += result.fast_path
        for name, tally in result.counts.items():
            mine = self.counts.setdefault(name, [0, 0, 0, 0])
            for i, n in enumerate(tally):
                mine[i] += n
        for seq, kind, payload in result.events:
            if kind == "reject":
                report.add_reject(payload)
            elif kind == "warn":
                report.add_warning(payload)
            elif kind == "env":
                self.flattener.env_gpu[payload[0]] = payload[1]
            elif kind == "learn":  # a Workload document built by a Liger row
                key, found = payload
                self._liger_docs(key).learn(*found)
            else:  # defer: every record before it has been merged
                item, name = payload  # the worker did not count it
                self.stager.append(shipped.before(seq))
                if isinstance(item, Rows):  # a CSV row that depends on earlier ones
                    item = liger.convert_row(item.rows[0], item.context,
                                             self._liger_docs(item.context.key))
                self._local(item, name, seq)
        self.stager.append(shipped.before(None))
        listed_rejects = sum(1 for e in result.events if e[1] == "reject")
        listed_warnings = sum(1 for e in result.events if e[1] == "warn")
        report.rejected += result.rejected - listed_rejects
        report.warned += result.warned - listed_warnings


class _InOrder:
    """A worker's direct rows (each table in ``_seq`` order), handed out in pieces."""

    def __init__(self, tables: dict[str, pa.Table]):
        self.tables = tables
        self.done = dict.fromkeys(tables, 0)

    def before(self, seq: int | None) -> dict[str, pa.Table]:
        """The rows not handed out yet whose ``_seq`` is below ``seq`` (None: all)."""
        out = {}
        for table, data in self.tables.items():
            start = self.done[table]
            end = data.num_rows
            if seq is not None:  # (the sum of no rows is null)
                end = start + (pc.sum(pc.less(data["_seq"].slice(start), seq)).as_py() or 0)
            if end > start:
                out[table] = data.slice(start, end - start)
                self.done[table] = end
        return out
