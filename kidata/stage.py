"""Stage a load: read, check and flatten input records into staging Parquet files, using
worker processes when the input is large.

Records are checked and flattened by one function, :func:`stage_record`, in the loading
process or in a worker. The readers hand out the lines of JSON Lines files unparsed
(:class:`~kidata.readers.Lines`); once there are enough of them, they go in batches to a pool of
worker processes (``KIDATA_WORKERS``, default one per core; ``0`` turns the pool off) that
parse, check and flatten them and write their own staging files. Everything else is done here.

The result is the same as reading the input in one pass, in order:

- each record gets a sequence number in input order (``_seq``: the commit orders and
  deduplicates by it), reserved when its batch is sent;
- a flattener's only state that changes a result is the environments it has seen (so that a
  run without its environment document can name its GPU). A worker knows the warehouse's
  environments and those of the records it has flattened, all earlier in the input; a run
  whose environment it does not know is handed back (:class:`~kidata.flatten.NeedsEnvironment`)
  and flattened here, after every record before it;
- results are merged in input order, so the report lists rejects and warnings in input order.

Memory stays bounded: at most ``workers + 1`` batches are in flight and each process stages
at most a batch of rows before writing them.
"""

from __future__ import annotations

import collections
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kidata.errors import RecordError
from kidata.flatten import Flattener, NeedsEnvironment
from kidata.readers import Item, Lines
from kidata.warehouse import LoadReport, Reject, _Stager

# Lines per batch sent to a worker (about 18 MB of typical bundles): large enough that a
# worker's staging files are few, small enough to keep every worker busy.
BATCH_LINES = 8192
# Records read but not yet processed here (records of non-JSON-Lines files).
MAX_PENDING = 10_000
FLAT_TABLES = ("runs", "measurements", "environments", "protocols", "workloads",
               "workload_parameters", "published")


def workers() -> int:
    """Worker processes for large loads: ``KIDATA_WORKERS`` if set, else one per core (none
    on a single core, where they would only add overhead)."""
    value = os.environ.get("KIDATA_WORKERS")
    if value is not None:
        try:
            return max(0, int(value))
        except ValueError:
            return 0
    cores = os.cpu_count() or 1
    return 0 if cores < 2 else min(cores, 8)


def stage_record(stager: _Stager, flattener: Flattener, report: LoadReport,
                 item: Item | RecordError, name: str, seq: int) -> None:
    """Check and flatten one record and stage its rows, or stage its reject. Raises
    :class:`NeedsEnvironment` (before staging anything) when the flattener defers it."""
    if isinstance(item, RecordError):
        report.records += 1
        _reject(stager, report, item, getattr(item, "raw", None), seq)
        return
    try:
        flat = flattener.flatten(item)
    except RecordError as err:
        report.records += 1
        _reject(stager, report, err, item.raw, seq)
        return
    report.records += 1
    for message in flat.warnings:
        report._warn(message)
    for table in FLAT_TABLES:
        for row in getattr(flat, table):
            if table != "measurements":
                row["source_file"] = name
            stager.add(table, row, seq, item.position)
    stager.maybe_flush()


def _reject(stager: _Stager, report: LoadReport, err: RecordError, raw: str | None,
            seq: int) -> None:
    report._reject(Reject(err.file, err.position, err.field, err.reason))
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
    the loading process)."""

    seq: int = 0
    events: list[tuple[int, str, Any]] = field(default_factory=list)

    def _reject(self, reject: Reject) -> None:
        self.rejected += 1
        if self.rejected <= 1000:
            self.events.append((self.seq, "reject", reject))

    def _warn(self, message: str) -> None:
        self.warned += 1
        if self.warned <= 1000:
            self.events.append((self.seq, "warn", message))


_worker: dict[str, Any] = {}


def _init_worker(staging: str, batch: int, known: list[tuple[str, str]]) -> None:
    flattener = Flattener(defer_unknown_environments=True)
    for env_id, gpu in known:
        flattener.know_environment(env_id, gpu)
    _worker.update(flattener=flattener, stager=_Stager(Path(staging), batch))


def _work(job: int, first_seq: int, segments: list[tuple[Lines, str]]) -> _Events:
    flattener: Flattener = _worker["flattener"]
    stager: _Stager = _worker["stager"]
    stager.tag = f"j{job:07d}-"
    out = _Events(load_id="")
    seq = first_seq - 1
    for lines, name in segments:
        for item in lines.items():
            seq += 1
            out.seq = seq
            known = len(flattener.env_gpu)
            try:
                stage_record(stager, flattener, out, item, name, seq)
            except NeedsEnvironment:
                out.events.append((seq, "defer", (item, name)))
            if len(flattener.env_gpu) != known:
                for env in list(flattener.env_gpu.items())[known:]:
                    out.events.append((seq, "env", env))
    stager.flush()
    return out


# -- loading process ---------------------------------------------------------------------------

class Stage:
    """Stages the records of one load (see the module docstring). Feed it what
    :func:`~kidata.readers.read_file` yields, in order, then call :meth:`finish`."""

    def __init__(self, staging: Path, batch: int, known: list[tuple[str, str]],
                 report: LoadReport, progress: Callable[[str, int], None] | None = None):
        self.staging = staging
        self.batch = batch
        self.known = known
        self.report = report
        self.progress = progress
        self.stager = _Stager(staging, batch)
        self.flattener = Flattener()
        for env_id, gpu in known:
            self.flattener.know_environment(env_id, gpu)
        self.workers = workers()
        self.batch_lines = BATCH_LINES if self.workers else None
        self.pool: ProcessPoolExecutor | None = None
        self.jobs = 0
        self.seq = 0
        # In input order: ("job", Future) or ("item", record, file name, seq).
        self.pending: collections.deque[tuple] = collections.deque()
        self.in_flight = 0
        self.segments: list[tuple[Lines, str]] = []
        self.segment_lines = 0
        self.name = ""

    def feed(self, unit: Item | RecordError | Lines, name: str) -> None:
        self.name = name
        if isinstance(unit, Lines):
            self.segments.append((unit, name))
            self.segment_lines += len(unit.lines)
            if self.segment_lines >= BATCH_LINES:
                self._send()
        else:
            self._send()
            self.seq += 1
            self.pending.append(("item", unit, name, self.seq))
        self._drain(block=False)

    def finish(self) -> None:
        """Process everything still pending and write the last staging files."""
        self._send()
        self._drain(block=True)
        self.stager.flush()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None

    def _send(self) -> None:
        """Send the collected lines to a worker, or, while no pool is worth starting (less
        than a batch so far), process them here."""
        if not self.segments:
            return
        segments, lines = self.segments, self.segment_lines
        self.segments, self.segment_lines = [], 0
        if self.pool is None and lines < BATCH_LINES:
            for batch, name in segments:
                for item in batch.items():
                    self.seq += 1
                    self.pending.append(("item", item, name, self.seq))
                    if len(self.pending) >= MAX_PENDING:
                        self._drain(block=True)
            return
        if self.pool is None:
            self.pool = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_worker, initargs=(str(self.staging), self.batch, self.known))
        self.jobs += 1
        future = self.pool.submit(_work, self.jobs, self.seq + 1, segments)
        self.seq += lines  # a number for every line; blank lines leave gaps, order is kept
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
            self._merge(future.result())
            if self.progress is not None:
                self.progress(self.name, self.report.records)

    def _local(self, item: Item | RecordError, name: str, seq: int) -> None:
        stage_record(self.stager, self.flattener, self.report, item, name, seq)
        if self.progress is not None and self.report.records % 10_000 == 0:
            self.progress(name, self.report.records)

    def _merge(self, result: _Events) -> None:
        report = self.report
        report.records += result.records
        for seq, kind, payload in result.events:
            if kind == "reject":
                report._reject(payload)
            elif kind == "warn":
                report._warn(payload)
            elif kind == "env":
                self.flattener.env_gpu[payload[0]] = payload[1]
            else:  # defer: every record before it has been merged
                item, name = payload  # the worker did not count it
                self._local(item, name, seq)
        listed_rejects = sum(1 for e in result.events if e[1] == "reject")
        listed_warnings = sum(1 for e in result.events if e[1] == "warn")
        report.rejected += result.rejected - listed_rejects
        report.warned += result.warned - listed_warnings
