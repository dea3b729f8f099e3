"""A load's worker processes: what runs in one (:class:`WorkerState`, :func:`serve`) and the
loading process's handle on one (:class:`WorkerProcess`).

A worker is a fresh interpreter (``python -c`` :data:`WORKER_MAIN`) that reads its set-up and
then jobs from its standard input, pickled, and writes each job's :class:`JobResult` to its
standard output, in order. A job is a batch of unparsed JSON lines and unconverted Liger CSV
rows with the sequence number of its first record; the worker parses (or converts), checks and
flattens them with the same functions as the loading process (:mod:`kidata.ingest.stage_writer`),
writes the rows of the small tables to staging files of its own, and hands back the rows of
``runs`` and ``measurements`` as Arrow buffers, with the events the loading process needs to
keep one pass's order (see :mod:`kidata.ingest.stage`).

:class:`WorkerState` is the public entry point of a worker's work, in any process: the tests
and ``benchmarks/worker_path.py`` run jobs through it without a process around it.
"""

from __future__ import annotations

import collections
import pickle
import threading
import traceback
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from kidata._imports import use_system_allocator
from kidata.core import child
from kidata.core.load_report import LoadReport, Reject, UnknownGpu
from kidata.errors import RecordError, WarehouseError
from kidata.ingest import fast as fast_path
from kidata.ingest.fast import FastPath
from kidata.ingest.flatten import Flattener, NeedsEnvironment
from kidata.ingest.readers import liger
from kidata.ingest.readers.base import Item, Lines, Rows
from kidata.ingest.stage_writer import FileTally, StagingWriter, stage_fast, stage_record


@dataclass
class JobResult(LoadReport):
    """A worker's report of one job: what happened, each with its sequence number, in order.
    ``events`` holds ``(seq, kind, payload)``: ``reject`` (a Reject), ``warn`` (a message),
    ``env`` (an environment id and its GPU, newly seen), ``learn`` (a Workload document a
    Liger row built) and ``defer`` (a record to flatten in the loading process). ``counts``
    tallies each input file; ``tables`` holds the job's rows of the direct tables
    (:meth:`StagingWriter.shipped`), for the loading process to write."""

    seq: int = 0
    events: list[tuple[int, str, Any]] = field(default_factory=list)
    counts: dict[str, FileTally] = field(default_factory=dict)
    tables: dict[str, pa.Table] = field(default_factory=dict)

    def add_reject(self, reject: Reject) -> None:
        self.rejected += 1
        if self.rejected <= 1000:
            self.events.append((self.seq, "reject", reject))

    def add_warning(self, message: str, records: int = 1) -> None:
        if isinstance(message, UnknownGpu):
            # Its first record is an event (the loading process lists it in input order);
            # the others are counted in ``unknown_gpus`` and added after the job's events.
            if message.name not in self.unknown_gpus:
                self.unknown_gpus[message.name] = [0, -1, message]
                self.events.append((self.seq, "warn", message))
            self.unknown_gpus[message.name][0] += records
            return
        self.warned += 1
        if self.warned <= 1000:
            self.events.append((self.seq, "warn", message))


class WorkerState:
    """What a worker process keeps from job to job: its flattener (which knows the
    warehouse's environments and those of the records it has flattened), its staging writer
    (which ships the direct tables' rows), its fast path and, per read of a Liger CSV, the
    documents its rows built. :meth:`run` does one job."""

    def __init__(self, staging: str | Path, batch: int, known: list[tuple[str, str]]):
        self.flattener = Flattener(defer_unknown_environments=True)
        for env_id, gpu in known:
            self.flattener.know_environment(env_id, gpu)
        self.stager = StagingWriter(Path(staging), batch, ship=True)
        self.fast = FastPath(self.stager, self.flattener)
        self.liger: dict[int, Any] = {}

    def run(self, job: int, first_seq: int, segments: list[tuple[Lines | Rows, str]]
            ) -> JobResult:
        """Stage job number ``job``: its lines and rows (each with its file's name), numbered
        from ``first_seq`` in order."""
        flattener, fast = self.flattener, self.fast
        self.stager.tag = f"j{job:07d}-"
        out = JobResult(load_id="")
        seq = first_seq - 1
        for lines, name in segments:
            if isinstance(lines, Rows):
                seq = self._rows(out, lines, name, seq)
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
                    self._stage_or_defer(out, item, name, seq)
                if len(flattener.env_gpu) != known:  # inline: this loop runs once per line
                    self._tell_environments(out, known, seq)
        self.stager.flush()
        out.tables = self.stager.shipped()
        return out

    def _rows(self, out: JobResult, rows: Rows, name: str, seq: int) -> int:
        """Convert and stage CSV rows (see :meth:`run`); the last number used. A row that
        depends on an earlier row is handed back (``defer``); a Workload document built here
        is told to the loading process (``learn``), which needs it for such rows."""
        flattener = self.flattener
        docs = self.liger.get(rows.context.key)
        if docs is None:
            docs = self.liger[rows.context.key] = liger.new_docs(learned=[])
        learned = docs.learned
        for entry, item in liger.convert_rows(rows, docs, defer=True):
            seq += 1
            out.seq = seq
            if learned:
                for found in learned:
                    out.events.append((seq, "learn", (rows.context.key, found)))
                learned.clear()
            if item is None:
                out.events.append((seq, "defer", (Rows(rows.file, rows.context, [entry]),
                                                  name)))
                continue
            known = len(flattener.env_gpu)
            self._stage_or_defer(out, item, name, seq)
            if len(flattener.env_gpu) != known:
                self._tell_environments(out, known, seq)
        return seq

    def _stage_or_defer(self, out: JobResult, item: Item | RecordError, name: str,
                        seq: int) -> None:
        """Stage one record; a record whose environment this worker has not seen is handed
        back to the loading process (``defer``), which has seen every one before it."""
        try:
            stage_record(self.stager, self.flattener, out, item, name, seq, out.counts)
        except NeedsEnvironment:
            out.events.append((seq, "defer", (item, name)))

    def _tell_environments(self, out: JobResult, known: int, seq: int) -> None:
        """The environments this worker learned since it knew ``known`` of them (``env``)."""
        for env in list(self.flattener.env_gpu.items())[known:]:
            out.events.append((seq, "env", env))


# What a worker process runs (``python -c``): numpy and pandas refused before this module
# imports pyarrow, which would import them for nothing (numpy: ~30 MB resident per worker;
# pandas: 0.4 s and 50 MB), then :func:`serve`.
WORKER_MAIN = ("from kidata._imports import refuse_numpy, refuse_pandas; "
               "refuse_numpy(); refuse_pandas(); "
               "from kidata.ingest.stage_worker import serve; serve()")


def serve() -> None:
    """A worker process: read the set-up, then jobs, from stdin (pickled); write each job's
    result to stdout (pickled), in order. Changes this process's state (signals, the garbage
    collector): call it only in a process of its own."""
    from kidata._imports import refuse_pandas, tune_gc_for_staging

    refuse_pandas()  # in case serve is started otherwise than by WORKER_MAIN
    inp, out = child.serving()  # Ctrl-C is the loading process's: it closes our input
    state = WorkerState(*pickle.load(inp))
    tune_gc_for_staging()
    for job in child.jobs(inp):
        try:
            result: Any = state.run(*job)
        except BaseException as exc:  # noqa: BLE001 - reported to the loading process
            # What failed, in one line (a full disk: "[Errno 28] No space left on device"),
            # and the traceback apart, for --debug.
            what = str(exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"
            result = ("error", what, traceback.format_exc())
        send_result(out, result)
        # Sent: the job's lines and its events and rows are freed now, not when the next
        # job's replace them (the worker would hold two jobs' worth while reading the next).
        del job, result


def send_result(out: Any, result: Any) -> None:
    """Write a job's result: the sizes of its Arrow buffers, the buffers, then the pickle
    that refers to them (out of band, :pep:`574`), so that the loading process reads them
    straight into Arrow memory (:func:`receive_result`)."""
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(result, protocol=5, buffer_callback=buffers.append)
    views = [b.raw() for b in buffers]
    pickle.dump([v.nbytes for v in views], out, protocol=5)
    for view in views:
        out.write(view)
    out.write(data)
    out.flush()


def receive_result(stream: Any) -> Any:
    """Read what :func:`send_result` wrote. The rows' buffers are allocated by Arrow's
    memory pool, which gives memory back to the system once they are written: as Python
    ``bytes`` (an ordinary pickle) they fragmented the heap and the loading process grew."""
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


class WorkerProcess:
    """One worker process (a fresh interpreter running :func:`serve`), set up with
    ``(staging folder, batch, known environments)``. Plain subprocesses rather than
    multiprocessing, whose spawned children import the caller's main script again: a library
    user's unguarded script would then load recursively."""

    def __init__(self, setup: tuple):
        # Arrow on the C library's allocator in the worker, unless the user chose a pool:
        # mimalloc and jemalloc keep what a worker freed (docs/benchmarks.md).
        self.proc = child.start(WORKER_MAIN, prepare=use_system_allocator)
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
                result = receive_result(self.proc.stdout)
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
        child.end(self.proc, timeout=60)
        self.reader.join()
        self.proc.stdout.close()
