"""Stage a load: read, check and flatten input records into staging Parquet files, using
worker processes when the input is large.

Records are checked and flattened by one function,
:func:`~kidata.ingest.stage_writer.stage_record`, in the loading process or in a worker
(:mod:`kidata.ingest.stage_worker`). The readers hand out the lines of JSON Lines files unparsed
(:class:`~kidata.ingest.readers.Lines`) and the rows of Liger CSV files unconverted
(:class:`~kidata.ingest.readers.Rows`); once there are enough of them, they go in batches to a
pool of worker processes (``KIDATA_WORKERS``, default one per core; ``0`` turns the pool off) that
parse (or convert: :func:`~kidata.ingest.readers.liger.convert_rows`), check and flatten them and
write their own staging files. Everything else is done here.
In both places a JSON line of the common bundle shape is decoded by the fast path
(:mod:`kidata.ingest.fast`, ``KIDATA_SLOW_PATH=1`` turns it off) and every other record read by
the readers; both are flattened by the same :class:`~kidata.ingest.flatten.Flattener` and staged
by the same function (:mod:`kidata.ingest.stage_writer`), so they give the same rows.

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

A library load changes nothing process-wide in its caller (allocator, garbage collector): the
CLI's ``load`` command and the worker processes tune their own process
(:mod:`kidata._imports`).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from kidata.core import child
from kidata.core.load_report import LoadReport, UnknownGpu
from kidata.errors import RecordError
from kidata.ingest import fast as fast_path
from kidata.ingest.fast import FastPath
from kidata.ingest.flatten import Flattener
from kidata.ingest.readers import liger
from kidata.ingest.readers.base import Item, Lines, Rows
from kidata.ingest.stage_worker import JobResult, WorkerProcess
from kidata.ingest.stage_writer import FileTally, StagingWriter, stage_fast, stage_record

# Lines per batch sent to a worker (about 4.5 MB of typical bundles): large enough that a
# worker's staging files are few, small enough to keep every worker busy; 1024 lowers a load's
# peak a little for a little more CPU (docs/benchmarks.md, Run Q).
BATCH_LINES = 2048
# Rows of a Liger CSV per batch sent to a worker: larger batches cost the same time and more
# memory (docs/benchmarks.md, Run R).
POOL_ROWS = 2048
# Records read but not yet processed here (records of non-JSON-Lines files).
MAX_PENDING = 10_000


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
        self.stager = StagingWriter(staging, batch)
        self.flattener = Flattener()
        for env_id, gpu in known:
            self.flattener.know_environment(env_id, gpu)
        self.fast = FastPath(self.stager, self.flattener)
        self.workers = child.workers()
        # JSON Lines come unparsed, for the workers or for the fast path here; Liger CSV rows
        # unconverted, for the workers or to be converted here.
        self.batch_lines = BATCH_LINES
        self.batch_rows = POOL_ROWS if self.workers else None  # else read as records
        # Per read of a Liger CSV (Context.key): what its rows converted so far built.
        self.liger_docs: dict[int, Any] = {}
        self.pool: list[WorkerProcess] | None = None
        self.jobs = 0
        self.seq = 0
        # In input order: ("job", Future) or ("item", record, file name, seq).
        self.pending: collections.deque[tuple] = collections.deque()
        self.in_flight = 0
        self.segments: list[tuple[Lines | Rows, str]] = []
        self.segment_lines = 0  # JSON lines collected
        self.segment_rows = 0  # CSV rows collected
        self.name = ""
        self.counts: dict[str, FileTally] = {}  # per input file
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
        # The workers' memory (~200 MB) goes before the staged runs are merged in order
        # (kidata.store.pqwrite.Clustered), which would otherwise add to it (Run BC).
        self._stop_pool()
        self.stager.close()

    def summaries(self) -> list[dict[str, Any]]:
        """What was read of each file: size, SHA-256, modification time, format and counts
        (files read once)."""
        names = [f[0] for f in self.files]
        out = []
        for name, (size, sha256, mtime_ns, hashed_at), fmt, _ in self.files:
            if names.count(name) > 1:
                continue  # read twice in one load: its counts are not its own
            tally = self.counts.get(name) or FileTally()
            out.append({"source_file": name, "size": size, "sha256": sha256,
                        "mtime_ns": mtime_ns, "hashed_at": hashed_at, "format": fmt,
                        "records": tally.records, "runs": tally.runs,
                        "rejected": tally.rejected, "warnings": tally.warnings})
        return out

    def close(self) -> None:
        self.stager.abort()  # after finish(): nothing left to abort
        self._stop_pool()

    def _stop_pool(self) -> None:
        if self.pool is None:
            return
        pool, self.pool = self.pool, None
        failed: list[BaseException] = []
        for worker in pool:  # every one, whatever another's end
            try:
                worker.close()
            except Exception as e:
                failed.append(e)
        if failed:
            raise failed[0]

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
            self.pool = [WorkerProcess(setup) for _ in range(self.workers)]
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

    def _merge(self, result: JobResult) -> None:
        report = self.report
        # The batch's direct rows are written here, in input order: those before a record
        # the worker deferred, then that record's, then the rest.
        shipped = _InOrder(result.tables)
        report.records += result.records
        report.fast_path += result.fast_path
        for name, tally in result.counts.items():
            mine = self.counts.get(name)
            if mine is None:
                mine = self.counts[name] = FileTally()
            mine.add(tally)
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
        listed_warnings = sum(1 for e in result.events
                              if e[1] == "warn" and not isinstance(e[2], UnknownGpu))
        report.rejected += result.rejected - listed_rejects
        report.warned += result.warned - listed_warnings
        for records, _, first in result.unknown_gpus.values():
            if records > 1:  # the first was an event
                report.add_warning(first, records - 1)


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
