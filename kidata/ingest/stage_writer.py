"""The staging writer: a record's rows buffered per table and written in batches, and the one
function that stages a flattened record, whichever front end read it.

:func:`stage_record` (any reader's record, checked and flattened by the general path) and
:func:`stage_fast` (a JSON line the fast path of :mod:`kidata.ingest.fast` took) both end in the
same function, so the two paths give the same rows; the rows go to a :class:`StagingWriter`
(:meth:`StagingWriter.add_flat`, :meth:`StagingWriter.add_reject`). The same code runs in the
loading process (:mod:`kidata.ingest.stage`) and in its worker processes
(:mod:`kidata.ingest.stage_worker`); :class:`FileTally` counts what each input file gave.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from kidata.core.load_report import LoadReport, Reject, max_kept_rejects
from kidata.errors import RecordError
from kidata.ingest.fast import FastPath
from kidata.ingest.flatten import (
    MEASUREMENT_COLUMNS,
    RUN_COLUMNS,
    SAMPLE_COLUMNS,
    Flat,
    Flattener,
    NeedsEnvironment,
)
from kidata.ingest.readers.base import Item, internal_error
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
                                     "and staging's: update stage_writer._FLAT")
        if self.names["samples"] != [*SAMPLE_COLUMNS, "source_file", "_seq", "_position"]:
            raise AssertionError("the staged columns of samples are not SAMPLE_COLUMNS and "
                                 "staging's: update stage_writer.add_flat")
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

    def add_flat(self, flat: Flat, name: str, seq: int, position: str) -> None:
        """Stage the rows of one flattened record: its runs and measurements (the flattener's
        tuples, beside the columns staging adds) and its rows of the other tables."""
        runs = flat.run_rows
        if runs:
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
            extra = self.extra["runs"]
            extra.append((name, seq, position, median if has_median else mean, p20, p80))
            for _ in runs[1:]:
                extra.append((name, seq, position, None, None, None))
            self.rows["runs"] += runs
            self.counts["runs"] += len(runs)
            if measurements:
                self.rows["measurements"] += measurements
                self.extra["measurements"] += [(seq, position)] * len(measurements)
                self.counts["measurements"] += len(measurements)
        if flat.samples:  # tuples in SAMPLE_COLUMNS order, then the staged columns
            self.rows["samples"] += [(*row, name, seq, position) for row in flat.samples]
            self.counts["samples"] += len(flat.samples)
        for table in _DICT_TABLES:
            rows = getattr(flat, table)
            if not rows:
                continue
            for row in rows:
                self.add(table, row, seq, position, name)  # drops a row already staged
        self.maybe_flush()

    def add_reject(self, err: RecordError, raw: str | None, seq: int) -> None:
        """Stage a rejected record's row in ``rejects``. Each process stages at most the cap,
        its first in input order: among them are the load's first ``max_rejects``, which
        the commit keeps (:mod:`kidata.store.load_commit`)."""
        if self.rejects_staged >= self.max_rejects:
            return
        self.rejects_staged += 1
        self.add("rejects", {"source_file": err.file, "position": err.position,
                             "field": err.field, "reason": err.reason, "raw": raw},
                 seq, err.position)
        self.maybe_flush()

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
        # columns (zip), each converted in one pass; the run documents by their bytes
        # (cheaper than one struct array of joined tuples: docs/benchmarks.md, Run S).
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


@dataclass(slots=True)
class FileTally:
    """What one input file gave a load so far: its records, runs, rejects and warnings
    (the file manifest's counts; summed over processes by :meth:`add`)."""

    records: int = 0
    runs: int = 0
    rejected: int = 0
    warnings: int = 0

    def add(self, other: FileTally) -> None:
        self.records += other.records
        self.runs += other.runs
        self.rejected += other.rejected
        self.warnings += other.warnings


def _tally(counts: dict[str, FileTally], name: str) -> FileTally:
    tally = counts.get(name)
    if tally is None:
        tally = counts[name] = FileTally()
    return tally


def stage_record(stager: StagingWriter, flattener: Flattener, report: LoadReport,
                 item: Item | RecordError, name: str, seq: int,
                 counts: dict[str, FileTally]) -> None:
    """Check and flatten one record and stage its rows, or stage its reject. Raises
    :class:`~kidata.ingest.flatten.NeedsEnvironment` (before staging anything) when the
    flattener defers it. ``counts[name]`` tallies the file's records, runs, rejects and
    warnings."""
    tally = _tally(counts, name)
    if isinstance(item, RecordError):
        _reject(stager, report, tally, item, getattr(item, "raw", None), seq)
        return
    try:
        flat = flattener.flatten(item)
    except RecordError as err:
        _reject(stager, report, tally, err, item.raw, seq)
        return
    except NeedsEnvironment:
        raise
    except Exception as exc:  # kidata's failure on this record: reject it, load the others
        _reject(stager, report, tally,
                internal_error(item.file, item.position, "this record", exc), item.raw, seq)
        return
    _stage_flat(stager, report, flat, name, seq, item.position, tally)


def stage_fast(fast: FastPath, report: LoadReport, line: bytes, file: str, position: str,
               name: str, seq: int, counts: dict[str, FileTally]) -> bool:
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
                position: str, tally: FileTally) -> None:
    """Count and stage the rows of one flattened record (either path's: they are staged only
    here)."""
    report.records += 1
    tally.records += 1
    if flat.warnings:
        tally.warnings += len(flat.warnings)
        for message in flat.warnings:
            report.add_warning(message)
    tally.runs += len(flat.run_rows)
    stager.add_flat(flat, name, seq, position)


def _documented(table: str, row: dict) -> bool:
    """Whether a staged dimension row wins over a later one with its key: every row but a
    workload known only by its digest (a later row with the document replaces it)."""
    return table != "workloads" or row.get("document") is not None


# The tables whose rows a Flat holds as dictionaries.
_DICT_TABLES = ("environments", "protocols", "workloads", "workload_parameters",
                "implementations", "published")


def _reject(stager: StagingWriter, report: LoadReport, tally: FileTally, err: RecordError,
            raw: str | None, seq: int) -> None:
    report.records += 1
    tally.records += 1
    tally.rejected += 1
    report.add_reject(Reject(err.file, err.position, err.field, err.reason))
    stager.add_reject(err, raw, seq)
