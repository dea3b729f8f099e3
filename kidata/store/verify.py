"""Verify a warehouse (``kidata check``): what the commit protocol promises, checked on disk.

Each check reads the Parquet files as they are (not kidata's snapshot views), because the
guarantees are about the files any engine reads. A problem names the table, the file or the
rows at fault and says what was expected; ``repair`` first completes interrupted commits and
removes what dead writers left (the same recovery every writer runs).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from kidata.core import engine
from kidata.core.digest import digest
from kidata.core.sql import duckdb_type, quote_identifier, quote_literal, union_all
from kidata.errors import WarehouseError
from kidata.store import commit, derived, durable, snapshot
from kidata.store.layout import LOCK_TIMEOUT, NEW_STAGING_PREFIX, PRIVATE, Layout
from kidata.store.schema import DOCUMENT_KEYS, KEYS, SPEC_DIGESTS, TABLES
from kidata.store.snapshot import filtered_tables, id_table
from kidata.store.tablesql import documents_in_runs, steps_unread, table_sql
from kidata.store.unload import NO_MEDIAN, damaged_loads

SHOWN = 5  # examples shown per problem
q = quote_identifier


@dataclass
class CheckReport:
    """The outcome of :func:`check`: ``problems`` (the warehouse breaks a guarantee),
    ``repaired`` (what ``repair`` did first) and ``notes`` (harmless, worth knowing)."""

    warehouse: str
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    # Loads whose committed rows break the load invariant (kidata.store.unload.damaged_loads),
    # with what each broke: ``kidata unload --damaged`` takes them out.
    damaged: dict[str, list[str]] = field(default_factory=dict)
    files: int = 0
    rows: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems


def check(layout: Layout, writer_lock: Callable[[], AbstractContextManager[list[str]]],
          repair: bool = False) -> CheckReport:
    """Check schemas, identities, references between tables, commit markers and digests of
    the warehouse at ``layout``; with ``repair``, first complete or remove what dead writers
    left, under ``writer_lock()`` (which yields what its recovery did, as
    :func:`kidata.store.commit.writer_lock` does), then repair markers and ``latest_runs``.
    A repair changes files: a caller holding a query connection must open a new one."""
    report = CheckReport(str(layout.root))
    if repair:
        with writer_lock() as recovered:
            report.repaired = list(recovered)
            report.repaired += _write_missing_markers(layout)
            report.repaired += _rewrite_derived(layout)
            report.repaired += _restore_contexts(layout)
    with _writers_paused(layout):
        _check_files_and_rows(layout, report)
        if report.ok:  # on a sound warehouse only: the views read every table
            from kidata.store import contexts

            report.problems += contexts.check(layout.root)
    return report


@contextlib.contextmanager
def _writers_paused(layout: Layout) -> Iterator[None]:
    """Hold the writer lock while the files are read (without running recovery: a check
    reports an interrupted commit, it does not complete it), so that no commit or compaction
    renames files between the listing and the reading. A warehouse whose lock cannot be taken
    (a read-only copy) is checked as it is."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(layout.lock), timeout=LOCK_TIMEOUT)
    try:
        lock.acquire()
    except Timeout:
        raise WarehouseError(f"{layout.root} is locked by a writer for more than "
                             f"{LOCK_TIMEOUT:.0f} s; is a load stuck?") from None
    except OSError:
        yield
        return
    try:
        yield
    finally:
        lock.release()


def _check_files_and_rows(layout: Layout, report: CheckReport) -> None:
    pending = _check_private(layout, report)
    readable = _check_files(layout, report)
    con = engine.connect(engine.reading_settings())
    try:
        # Rows of a commit still to be completed are reported once, as that, and left out of
        # the other checks (its measurements may be in place while its runs are not yet).
        id_table(con, "_pending", sorted(pending))
        loaded = set(filtered_tables())
        views = []
        for table in TABLES:
            body = _table_sql(table, readable)
            if table in loaded and pending:
                body = (f"SELECT * FROM ({body}) WHERE load_id NOT IN "
                        "(SELECT load_id FROM _pending)")
            views.append(f"CREATE VIEW {q(table)} AS {body}")
        # Each check asks about every table in one statement (core.sql.union_all): a check
        # runs after every load of the test suite, on warehouses of a few rows.
        con.execute(";\n".join(views))
        counts = dict(con.execute(union_all(
            f"SELECT {quote_literal(t)}, count(*) FROM {q(t)}" for t in TABLES)).fetchall())
        report.rows.update((table, counts[table]) for table in TABLES)
        _check_nulls(con, report)
        _check_identities(con, report)
        _check_references(con, report)
        _check_damaged(con, report)
        _check_loads(con, report)
        _check_derived(con, report)
        _check_digests(con, report)
    finally:
        con.close()


def _restore_contexts(layout: Layout) -> list[str]:
    """Store every series step again, computed afresh (stored rows unread): what mends a
    ``step_context`` whose values a check found wrong. Under the writer lock."""
    from kidata.store import contexts

    done = contexts.rebuild(layout.root, commit.new_id(), if_files=1, afresh=True)
    if done is None:
        return []
    return [f"stored every series step again, computed afresh: {done[1]:,} rows "
            f"({done[0]:,} files before)"]


def _write_missing_markers(layout: Layout) -> list[str]:
    """Give a commit marker to every load whose rows are in place without one (a warehouse
    written before markers existed, or a marker deleted by hand), so kidata shows them again.
    Runs under the writer lock after recovery, so no commit is in flight."""
    from kidata import __version__

    con = engine.connect(engine.reading_settings())
    done = []
    # One commit for all the markers: each is a new file that makes its load visible whole.
    tx = commit.Transaction(layout.root, "repair of the commit markers", faults="repair-")
    try:
        counts: dict[str, dict[str, int]] = {}
        stamps: dict[str, object] = {}
        for table in filtered_tables():
            if table == "loads" or not layout.table_files(table):
                continue
            has_time = "loaded_at" in TABLES[table].names
            earliest = "min(loaded_at)" if has_time else "NULL"
            rows = con.execute(f"SELECT load_id, count(*), {earliest}"
                               f" FROM ({table_sql(layout.root, table)}) GROUP BY load_id"
                               ).fetchall()
            for load_id, n, stamp in rows:
                counts.setdefault(load_id, {})[table] = n
                if stamp is not None:
                    stamps[load_id] = min(stamp, stamps.get(load_id, stamp))
        known = {r[0] for r in con.execute(
            f"SELECT load_id FROM ({table_sql(layout.root, 'loads')})").fetchall()}
        # Loads whose latest_runs rows all carry their evidence (derived.STATISTICS, 0.2.3)
        # and center (derived.CENTER, 0.2.4).
        evidenced: set[str] = set()
        latest = table_sql(layout.root, "latest_runs")
        if {"evidence", "center_statistic"} <= set(con.sql(latest).columns):
            evidenced = {r[0] for r in con.execute(
                f"SELECT load_id FROM ({latest}) GROUP BY load_id "
                "HAVING count(evidence) = count(*) AND count(center_statistic) = count(*)"
                ).fetchall()}
        for load_id in sorted(set(counts) - known):
            added = counts[load_id]
            row = {"load_id": load_id,
                   "loaded_at": stamps.get(load_id) or datetime.now(UTC),
                   # Only a load with latest_runs rows that carry their evidence was written
                   # by a kidata that derives them as this one does; any other is marked
                   # unknown, so readers compute its rows.
                   "kidata_version": __version__ if load_id in evidenced else "unknown",
                   "files": 0, "records": 0,
                   "added": json.dumps(added, sort_keys=True), "duplicates": 0,
                   "rejected": added.get("rejects", 0), "warnings": 0}
            tx.work.mkdir(parents=True, exist_ok=True)
            prepared = tx.work / f"{load_id}.parquet"
            pq.write_table(pa.Table.from_pylist([row], schema=TABLES["loads"]), prepared)
            durable.fsync_file(prepared)
            tx.add(prepared, layout.marker(load_id))
            done.append(f"wrote the missing commit marker of load {load_id} ("
                        + ", ".join(f"{n:,} {t}" for t, n in sorted(added.items())) + ")")
        tx.commit()
    finally:
        con.close()
        tx.discard()
    return done


def _check_private(layout: Layout, report: CheckReport) -> set[str]:
    """Report commits in flight and leftovers; returns the ids of loads not complete yet."""
    loads = []
    for _, load_id, what in commit.pending(layout.root):
        if load_id is None:  # compaction, repair, reference tables: each table whole
            report.notes.append(
                f"{what} stopped after its commit point and is not complete yet: readers see "
                "each table it changes whole, before or after it; `kidata check --repair` or "
                "the next writer completes it")
            continue
        loads.append(load_id)
        report.problems.append(
            f"load {load_id} stopped after its commit point and is not complete yet: "
            "plain-Parquet readers may see part of it (kidata's views do not); "
            "`kidata check --repair` or the next load completes it")
    staging = layout.staging
    if staging.is_dir():
        for entry in sorted(staging.iterdir()):
            if entry.is_dir() and not entry.name.startswith(NEW_STAGING_PREFIX):
                report.notes.append(f"staging folder of load {entry.name} (a load in progress, "
                                    "or a dead one whose files the next writer removes)")
    compact = layout.compact
    if compact.is_dir():
        for entry in sorted(compact.iterdir()):
            report.notes.append(f"leftovers of commit {entry.name} (a compaction, repair or "
                                "reference-table refresh in progress, or interrupted: "
                                "invisible to readers, removed by the next writer)")
    return set(loads)


def _check_files(layout: Layout, report: CheckReport) -> dict[str, list[Path]]:
    """Every table file is complete Parquet with the declared schema. Returns, per table,
    the files that can be read."""
    readable: dict[str, list[Path]] = {}
    known = set(TABLES) | {PRIVATE}
    for entry in sorted(layout.root.iterdir()):
        if entry.is_dir() and entry.name not in known and not entry.name.startswith("."):
            report.notes.append(f"folder {entry.name}/ is not a kidata table; kidata ignores it")
    # Layout 1 (kidata.store.upgrade): each runs file holds its runs' documents, which are
    # the run_documents table until a writer upgrades the warehouse.
    in_runs = documents_in_runs(layout.root)
    old_steps = steps_unread(layout.root)
    for table, schema in TABLES.items():
        folder = layout.table(table)
        readable[table] = []
        if table == "runs" and in_runs:
            schema = pa.schema([*schema, TABLES["run_documents"].field("document")])
        if not folder.is_dir():
            continue
        if table == "step_context" and old_steps:
            # Not read (tablesql.steps_unread); emptied by the next writer's upgrade.
            report.notes.append(f"step_context/ holds {len(list(folder.glob('*.parquet')))} "
                                "files of kidata 0.3.7-0.3.14's step contexts, which this "
                                "kidata does not read; the next writer empties it")
            continue
        for path in sorted(folder.iterdir()):
            rel = f"{table}/{path.name}"
            if path.name.startswith(".") and path.name.endswith(".tmp"):
                report.notes.append(f"{rel}: a temporary file left by an interrupted write "
                                    "(no reader's *.parquet glob sees it)")
                continue
            if not path.name.endswith(".parquet"):
                report.problems.append(f"{rel}: not a Parquet file; a table folder holds only "
                                       "*.parquet files")
                continue
            report.files += 1
            try:
                found = pq.ParquetFile(path).schema_arrow
            except (OSError, pa.ArrowException) as exc:
                report.problems.append(f"{rel}: unreadable Parquet ({exc}); a half-written "
                                       "file never appears under its final name")
                continue
            bad = _schema_problems(found, schema)
            if bad:
                report.problems.append(f"{rel}: schema differs from kidata/store/schema.py: "
                                       + "; ".join(bad))
                continue
            readable[table].append(path)
    if in_runs:
        readable["run_documents"] = readable["runs"]
    return readable


def _schema_problems(found: pa.Schema, declared: pa.Schema) -> list[str]:
    out = []
    for f in found:
        if f.name not in declared.names:
            out.append(f"unexpected column {f.name}")
        elif not f.type.equals(declared.field(f.name).type):
            out.append(f"column {f.name} is {f.type}, expected {declared.field(f.name).type}")
    for f in declared:
        if f.name not in found.names and not f.nullable:
            out.append(f"required column {f.name} is missing")
    return out


def _table_sql(table: str, readable: dict[str, list[Path]]) -> str:
    """All rows of a table's readable files, every declared column present."""
    files = readable.get(table, [])
    schema = TABLES[table]
    if not files:
        cols = ", ".join(f"CAST(NULL AS {duckdb_type(f.type)}) AS {q(f.name)}"
                         for f in schema)
        return f"SELECT {cols} WHERE 1 = 0"
    present: set[str] = set()
    for path in files:
        present.update(pq.ParquetFile(path).schema_arrow.names)
    cols = ", ".join(q(f.name) if f.name in present
                     else f"CAST(NULL AS {duckdb_type(f.type)}) AS {q(f.name)}"
                     for f in schema)
    listed = ", ".join(quote_literal(str(p)) for p in files)
    return f"SELECT {cols} FROM read_parquet([{listed}], union_by_name = true)"


def _examples(rows: list[tuple]) -> str:
    shown = ", ".join("(" + ", ".join(repr(v) for v in r) + ")" if len(r) > 1 else repr(r[0])
                      for r in rows[:SHOWN])
    return shown + (", …" if len(rows) > SHOWN else "")


# Past this many runs a check asks its questions one statement each. In one statement DuckDB
# works their joins and groupings side by side: at 10M runs the reference checks' anti-joins
# (each building a hash table of every run id) ran out of the default 300MB together, and pass
# one at a time (docs/benchmarks.md, Run AX). On the few rows of the test suite's checks one
# statement is the cheaper: a statement costs ~2-8 ms whatever its rows.
APART_RUNS = 50_000


def _rows(con: duckdb.DuckDBPyConnection, report: CheckReport, selects: list[str]
          ) -> list[tuple]:
    """The rows of ``selects`` (the same columns), in one statement or, past
    :data:`APART_RUNS` runs, one statement each."""
    if report.rows.get("runs", 0) > APART_RUNS:
        return [row for select in selects for row in con.execute(select).fetchall()]
    return con.execute(union_all(selects)).fetchall()


def _check_nulls(con: duckdb.DuckDBPyConnection, report: CheckReport) -> None:
    required = {table: [f.name for f in schema if not f.nullable]
                for table, schema in TABLES.items() if report.rows.get(table)}
    required = {table: columns for table, columns in required.items() if columns}
    if not required:
        return
    counts = dict(_rows(con, report, [
        f"SELECT {quote_literal(table)}, [" + ", ".join(f"count(*) FILTER (WHERE {q(c)} IS NULL)"
                                                for c in columns) + f"] FROM {q(table)}"
        for table, columns in required.items()]))
    for table, columns in required.items():
        for column, n in zip(columns, counts[table], strict=True):
            if n:
                report.problems.append(f"{table}: {n:,} rows have no {column}, which is "
                                       "required")


def _check_identities(con: duckdb.DuckDBPyConnection, report: CheckReport) -> None:
    keys = {table: ", ".join(q(k) for k in key) for table, key in KEYS.items()
            if key and table in TABLES and report.rows.get(table)}
    if not keys:
        return
    totals = dict(_rows(con, report, [
        f"SELECT {quote_literal(table)}, (SELECT count(*) FROM (SELECT {cols} FROM {q(table)} "
        "GROUP BY ALL HAVING count(*) > 1))" for table, cols in keys.items()]))
    for table, cols in keys.items():
        total = totals[table]
        if not total:
            continue
        dups = con.execute(f"SELECT {cols}, count(*) AS n FROM {q(table)} GROUP BY ALL "
                           f"HAVING count(*) > 1 ORDER BY {cols} LIMIT {SHOWN + 1}").fetchall()
        report.problems.append(
            f"{table}: {total:,} identities ({', '.join(KEYS[table])}) appear more than "
            "once, e.g. " + _examples([r[:-1] for r in dups]))


# (table, column, referenced table, referenced column, why it matters)
REFERENCES = [
    ("measurements", "run_id", "runs", "run_id", "every measurement belongs to a run"),
    ("published", "run_id", "runs", "run_id", "every published number belongs to a run"),
    ("run_documents", "run_id", "runs", "run_id", "every run document belongs to a run"),
    ("runs", "run_id", "run_documents", "run_id", "every run keeps its document"),
    ("workload_parameters", "workload_id", "workloads", "workload_id",
     "every workload parameter belongs to a workload"),
]


def _check_references(con: duckdb.DuckDBPyConnection, report: CheckReport) -> None:
    missing_median = f"SELECT r.run_id FROM runs r WHERE {NO_MEDIAN}"
    checked = [(table, column, target, target_column, why)
               for table, column, target, target_column, why in REFERENCES
               if table in TABLES and target in TABLES]
    orphan_sql = [
        f"SELECT DISTINCT t.{q(column)} FROM {q(table)} t WHERE NOT EXISTS (SELECT 1 FROM "
        f"{q(target)} r WHERE r.{q(target_column)} = t.{q(column)})"
        for table, column, target, target_column, _ in checked]
    # How many of each (in one statement where the warehouse is small); the examples only
    # where there are some.
    counts = [n for _, n in sorted(_rows(con, report, [
        f"SELECT {i}, (SELECT count(*) FROM ({sql}))"
        for i, sql in enumerate([*orphan_sql, missing_median])]))]
    for (table, column, target, _, why), sql, n in zip(checked, orphan_sql, counts,
                                                         strict=False):
        if n:
            orphans = con.execute(f"{sql} ORDER BY 1 LIMIT {SHOWN + 1}").fetchall()
            report.problems.append(f"{table}: rows for {n:,} {column}s that are not "
                                   f"in {target} ({why}), e.g. {_examples(orphans)}")
    missing = counts[-1]
    if missing:
        shown = con.execute(f"{missing_median} ORDER BY 1 LIMIT {SHOWN + 1}").fetchall()
        report.problems.append(f"runs: {missing:,} runs have no median (or primary "
                               f"statistic) measurement of their metric (never a run without "
                               f"its measurements), e.g. "
                               f"{_examples(shown)}")


def _check_damaged(con: duckdb.DuckDBPyConnection, report: CheckReport) -> None:
    """Name the loads whose commits are inconsistent (kidata 0.2.5-0.2.7 committed loads with
    repeated runs that way: issue 25), so that they can be taken out whole."""
    report.damaged = damaged_loads(con)
    if report.damaged:
        shown = "; ".join(f"{load_id} ({', '.join(why)})"
                          for load_id, why in list(report.damaged.items())[:SHOWN])
        more = len(report.damaged) - SHOWN
        report.problems.append(
            f"loads: {len(report.damaged):,} loads hold inconsistent rows: {shown}"
            + (f"; and {more:,} more" if more > 0 else "")
            + " (kidata 0.2.5-0.2.7 committed such loads; files copied or deleted by hand "
            "leave them too). Take them out with `kidata unload --damaged`, then load their "
            "files again (docs/guarantees.md, \"Warehouses damaged by 0.2.5-0.2.7\")")


# The most rows of runs and of stored latest_runs one comparison of ``_derived_difference``
# reads (loads a batch at a time past it): the rows a load's runs give hold every latest run's
# statistics at once (percentiles, which DuckDB cannot spill), so over every load at once they
# needed more than the default reading limit at 1M runs in 50 loads, and 200k rows a batch
# still did beside the check's other work (docs/benchmarks.md, Run BJ).
DERIVED_BATCH_ROWS = 100_000


@dataclass
class DerivedDifference:
    """What ``_derived_difference`` found: how many ``latest_runs`` rows are missing from and
    extra in the stored table, in which loads, and the batches of loads it compared (in load
    id order), from which :func:`_computed_rows` gives the rows the loads' runs give."""

    missing: int
    extra: int
    loads: set[str]
    batches: list[list[str]]


_COLUMNS = ", ".join(q(f.name) for f in TABLES["latest_runs"])
# The latest_runs rows the runs of the loads in table _derived_batch give.
_BATCH_SQL = f"SELECT {_COLUMNS} FROM ({derived.latest_runs_of('_derived_batch')})"


def _derived_difference(con: duckdb.DuckDBPyConnection, stored_table: str,
                        sizes: tuple[int, int] | None = None) -> DerivedDifference:
    """Compare ``stored_table`` with the ``latest_runs`` rows the loads' runs give (for the
    loads whose kidata derives them). Needs tables ``loads``, ``runs`` and ``measurements``
    on ``con``. ``sizes``: the rows of ``runs`` and ``stored_table``, when known. Past
    :data:`DERIVED_BATCH_ROWS` rows the loads are compared a batch at a time, each batch's
    runs and stored rows within it (a load with more is a batch of its own)."""
    loads = con.execute("SELECT load_id, kidata_version FROM loads").fetchall()
    old = set(derived.underived(loads))
    checked = sorted(load_id for load_id, _ in loads if load_id not in old)
    if sizes is None:
        sizes = con.execute(f"SELECT (SELECT count(*) FROM runs), "
                            f"(SELECT count(*) FROM {stored_table})").fetchall()[0]
    if max(sizes) <= DERIVED_BATCH_ROWS:
        batches = [checked]
    else:
        weight = dict(con.execute(
            f"SELECT load_id, max(n) FROM (SELECT load_id, count(*) AS n FROM runs GROUP BY ALL "
            f"UNION ALL SELECT load_id, count(*) FROM {stored_table} GROUP BY ALL) "
            "GROUP BY ALL").fetchall())
        batches, batch, held = [], [], 0
        for load_id in checked:
            rows = weight.get(load_id, 0)
            if batch and held + rows > DERIVED_BATCH_ROWS:
                batches.append(batch)
                batch, held = [], 0
            batch.append(load_id)
            held += rows
        batches.append(batch)
    found = DerivedDifference(0, 0, set(), batches)
    for batch in batches:
        id_table(con, "_derived_batch", batch)
        stored = (f"SELECT {_COLUMNS} FROM {stored_table} "
                  "WHERE load_id IN (SELECT load_id FROM _derived_batch)")
        for first, then, kind in ((_BATCH_SQL, stored, "missing"),
                                  (stored, _BATCH_SQL, "extra")):
            for load_id, n in con.execute(f"SELECT load_id, count(*) FROM ({first} EXCEPT ALL "
                                          f"{then}) GROUP BY ALL").fetchall():
                setattr(found, kind, getattr(found, kind) + n)
                found.loads.add(load_id)
    return found


def _computed_rows(con: duckdb.DuckDBPyConnection, batches: list[list[str]]
                   ) -> Iterator[pa.RecordBatch]:
    """The ``latest_runs`` rows the runs of the loads in ``batches`` give, a batch of loads at
    a time, in the order a load writes them (by load id, then key: the batches are in load id
    order)."""
    order = ", ".join(f"{q(c)} NULLS LAST" for c in ("load_id", *derived.KEY))
    for batch in batches:
        id_table(con, "_derived_batch", batch)
        yield from con.sql(f"{_BATCH_SQL} ORDER BY {order}").to_arrow_reader(8192)


def _rewrite_derived(layout: Layout) -> list[str]:
    """Rewrite ``latest_runs`` from the committed loads' runs when it does not match them.
    Runs under the writer lock, after recovery and the missing commit markers."""
    from kidata.store.pqwrite import write_reader

    con = engine.connect(engine.reading_settings())
    try:
        snapshot.define(con, layout.root)
        stored = table_sql(layout.root, "latest_runs")
        # Files written before 0.2.3 lack the evidence columns (derived.STATISTICS), before
        # 0.2.4 the center (derived.CENTER).
        lacking = [f for f in TABLES["latest_runs"] if f.name not in con.sql(stored).columns]
        if lacking:
            stored = ("SELECT *, " + ", ".join(
                f"CAST(NULL AS {duckdb_type(f.type)}) AS {q(f.name)}" for f in lacking)
                + f" FROM ({stored})")
        stored = f"({stored})"
        difference = _derived_difference(con, stored)
        if not difference.missing and not difference.extra:
            return []

        rows = commit.replace_table(layout.root, "latest_runs", lambda out: write_reader(
            out, TABLES["latest_runs"], _computed_rows(con, difference.batches),
            create_empty=True), what="repair of latest_runs", faults="repair-")
    finally:
        con.close()
    return [f"rewrote latest_runs from the loads' runs: {rows:,} rows "
            f"({difference.missing:,} were missing, {difference.extra:,} were not given by the "
            "runs)"]


def _check_derived(con: duckdb.DuckDBPyConnection, report: CheckReport) -> None:
    """``latest_runs`` holds exactly what its loads' runs give (kidata/store/derived.py), for every
    load whose kidata derives it (readers compute the others' rows themselves)."""
    difference = _derived_difference(con, "latest_runs",
                                     (report.rows["runs"], report.rows["latest_runs"]))
    if difference.missing or difference.extra:
        loads = sorted(difference.loads)
        report.problems.append(
            f"latest_runs: {difference.missing:,} rows missing and {difference.extra:,} rows not "
            f"given by the loads' runs, in {len(loads):,} loads, e.g. "
            f"{_examples([(x,) for x in loads])}"
            " (speedups would pick the wrong latest runs; kidata check --repair rewrites them)")


def _check_loads(con: duckdb.DuckDBPyConnection, report: CheckReport) -> None:
    """Every row belongs to a committed load, and each load has the rows it recorded."""
    markers = con.execute("SELECT load_id, added FROM loads").fetchall()
    recorded: dict[str, dict[str, int]] = {}
    for load_id, added in markers:
        try:
            counts = json.loads(added)
            if not isinstance(counts, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            report.problems.append(f"loads: load {load_id} has an unreadable 'added' ({exc})")
            continue
        if "run_documents" not in counts and counts.get("runs"):
            # A load committed in layout 1 (kidata 0.3.13 or older) recorded its runs only:
            # its documents were in them (kidata.store.upgrade moved them, one per run).
            counts = {**counts, "run_documents": counts["runs"]}
        recorded[load_id] = counts
    tables = [table for table in filtered_tables() if table != "loads"]
    found: dict[str, dict[str, int]] = {table: {} for table in tables}
    counted = [table for table in tables if report.rows.get(table)]
    if counted:
        for table, load_id, n in con.execute(union_all(
                f"SELECT {quote_literal(table)}, load_id, count(*) FROM {q(table)} GROUP BY load_id"
                for table in counted)).fetchall():
            found[table][load_id] = n
    for table in tables:
        actual = found[table]
        unmarked = sorted(set(actual) - set(recorded))
        if unmarked:
            report.problems.append(
                f"{table}: rows of {len(unmarked):,} loads that have no commit marker in loads "
                f"(a partial commit), e.g. {_examples([(u,) for u in unmarked])}")
        wrong = sorted((load_id, counts.get(table, 0), actual.get(load_id, 0))
                       for load_id, counts in recorded.items()
                       if counts.get(table, 0) != actual.get(load_id, 0))
        if wrong:
            report.problems.append(
                f"{table}: {len(wrong):,} loads have another number of rows than they recorded "
                "(load_id, recorded, found): " + _examples(wrong))


def _check_digests(con: duckdb.DuckDBPyConnection, report: CheckReport) -> None:
    """Declared digests match the documents stored with them."""
    documents: dict[str, list[tuple[str, str]]] = {table: [] for table in DOCUMENT_KEYS}
    for table, ident, document in con.execute(union_all(
            f"SELECT {quote_literal(table)} AS t, {key} AS id, document FROM {table} "
            "WHERE document IS NOT NULL" for table, key in DOCUMENT_KEYS.items())
            + " ORDER BY t, id").fetchall():
        documents[table].append((ident, document))
    for table, key in DOCUMENT_KEYS.items():
        bad = []
        for ident, document in documents[table]:
            try:
                actual = digest(json.loads(document))
            except (ValueError, TypeError, AttributeError):
                actual = "unreadable JSON"
            if actual != ident:
                bad.append((ident, actual))
        if bad:
            report.problems.append(f"{table}: {len(bad):,} documents do not hash to their "
                                   f"{key} (declared, actual): {_examples(bad)}")
    _check_run_documents(con, report)


def _run_disagreements(declared: dict[str, str]) -> str:
    """SQL for the key (``md5_number`` of the run id) of every run whose document disagrees
    with its row, as :func:`_run_disagreement` decides it, one row per disagreeing pair.

    Each side is cut to fixed-width values before the join: the run id to its 128-bit MD5,
    and each digest the document declares (a JSON string; null or absent is undeclared) and
    the row's column to theirs. A hash table of 10M runs' ids and digests as text did not fit
    the default 300MB at 10M runs (nor did the documents, 11.7 GB); of 16-byte numbers it
    spills and passes (docs/benchmarks.md, Run AY). Two run ids with one MD5 can only add a
    pair to report, never hide one; a declared digest and a row's value with one MD5 would
    hide one, which takes a forged MD5 collision of two digests."""
    paths = ", ".join(quote_literal(f"$.spec.{key}") for key in declared)
    digests = ", ".join(f"v[{i + 2}] AS d{i}" for i in range(len(declared)))
    kinds = " OR ".join(f"coalesce(json_type(d{i}), 'NULL') NOT IN ('NULL', 'VARCHAR')"
                        for i in range(len(declared)))
    differ = " OR ".join(
        f"(json_type(d.d{i}) = 'VARCHAR' AND md5_number(d.d{i} ->> '$') "
        f"IS DISTINCT FROM r.h{i})" for i in range(len(declared)))
    hashed = ", ".join(f"md5_number({q(column)}) AS h{i}"
                       for i, column in enumerate(declared.values()))
    # The document is parsed only where it is a JSON object: json_extract raises on any other
    # text, and CASE evaluates its branch for the rows it selects only.
    return f"""
        WITH parsed AS (
            SELECT run_id,
                   CASE WHEN valid THEN json_type(document) = 'OBJECT' ELSE false END AS object,
                   CASE WHEN valid
                        THEN json_extract(document, ['$.metadata.name', {paths}]) END AS v
            FROM (SELECT *, coalesce(json_valid(document), false) AS valid
                  FROM run_documents)),
        documents AS (
            SELECT md5_number(run_id) AS k, {digests},
                   NOT object
                   OR json_type(v[1]) IS DISTINCT FROM 'VARCHAR'
                   OR v[1] ->> '$' IS DISTINCT FROM run_id
                   OR {kinds} AS wrong
            FROM parsed)
        SELECT d.k FROM documents d
        JOIN (SELECT md5_number(run_id) AS k, {hashed} FROM runs) r USING (k)
        WHERE d.wrong OR {differ}"""


def _check_run_documents(con: duckdb.DuckDBPyConnection, report: CheckReport) -> None:
    """Each run's document names its run and declares the digests its row holds (those it
    declares: a digest a document leaves out is not checked). DuckDB finds the runs in
    disagreement (:func:`_run_disagreements`); Python says why for the first few by run id."""
    declared = {SPEC_DIGESTS[table]: key for table, key in DOCUMENT_KEYS.items()}
    con.execute("CREATE OR REPLACE TEMP TABLE _disagreeing AS "
                + _run_disagreements(declared))
    try:
        [(disagree,)] = con.execute("SELECT count(*) FROM _disagreeing").fetchall()
        if not disagree:
            return
        first = [r for (r,) in con.execute(
            "SELECT DISTINCT run_id FROM runs WHERE md5_number(run_id) IN "
            f"(SELECT k FROM _disagreeing) ORDER BY run_id LIMIT {SHOWN + 1}").fetchall()]
    finally:
        con.execute("DROP TABLE _disagreeing")
    cols = ", ".join(q(column) for column in declared.values())
    pairs = [(run_id, _run_disagreement(run_id, document, declared, ids))
             for run_id, document, *ids in con.execute(
                 f"SELECT run_id, d.document, {cols} FROM runs JOIN run_documents d "
                 "USING (run_id) WHERE run_id IN (SELECT unnest($1))", [first]).fetchall()]
    # A run with two documents, one of them its own, shows only the other; words for a pair
    # only SQL finds wrong (a document Python's json reads otherwise) rather than none.
    shown = (sorted((r, why) for r, why in pairs if why is not None)
             or sorted((r, "its document disagrees with its row") for r, _ in pairs))
    report.problems.append(f"runs: {disagree:,} run documents disagree with their "
                           f"row: {_examples(shown[:SHOWN + 1])}")


def _run_disagreement(run_id: str, document: str | None, declared: dict[str, str],
                      ids: list[str | None]) -> str | None:
    """What a run's document says against its row (None: they agree): not a JSON object,
    another run's name, or a declared digest other than the row's. The words of what
    :func:`_run_disagreements` finds in SQL."""
    try:
        doc = json.loads(document)  # type: ignore[arg-type]
    except (ValueError, TypeError):
        doc = None
    if not isinstance(doc, dict):
        return "document is not a JSON object"
    metadata, spec = doc.get("metadata"), doc.get("spec")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if name != run_id:
        return f"document names run {name!r}"
    spec = spec if isinstance(spec, dict) else {}
    for (key, column), ident in zip(declared.items(), ids, strict=True):
        if spec.get(key) is not None and spec.get(key) != ident:
            return f"{key} {spec.get(key)} but {column} {ident}"
    return None


def summary(report: CheckReport) -> str:
    rows = sum(report.rows.values())
    return (f"{len(report.rows)} tables, {report.files:,} files, {rows:,} rows checked in "
            f"{report.warehouse}: " + ("ok" if report.ok else
                                       f"{len(report.problems)} problem(s)"))
