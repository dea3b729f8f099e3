"""The commit of one load: what each staged row becomes and the files that make it visible.

Under the writer lock, :class:`LoadCommit` plans with DuckDB what each staged run becomes
(added, duplicate, conflict, or ``enrich``: a richer record of a stored run), writes one final
file per table, the files its enriched rows replace, and the load's row of ``loads`` (its commit
marker), then commits them all in one :class:`kidata.store.commit.Transaction`: the tables in
``COMMIT_ORDER``, the marker last, then the replaced files. See ``docs/guarantees.md``, "How a
load commits" and "Duplicates that carry more".
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from kidata.core import config, engine
from kidata.core.load_report import MAX_REPORTED, LoadReport, Reject, max_kept_rejects
from kidata.core.sql import duckdb_type, quote_identifier, quote_literal
from kidata.errors import LoadRefused
from kidata.store import derived, durable, finalize
from kidata.store.commit import Transaction, started_at
from kidata.store.durable import fault
from kidata.store.layout import (
    Layout,
    direct_sidecar,
    enriched_file,
    final_file,
    final_folder,
    spill_folder,
)
from kidata.store.schema import (
    AFTER_COMMIT,
    APART,
    COLUMNS,
    COMMIT_ORDER,
    DOCUMENT_KEYS,
    FILED_WHEN_EMPTY,
    KEYS,
    REFERENCE,
)
from kidata.store.tablesql import table_sql

# Columns the variants of one run must share to replace one another: what latest_runs and the
# views derive from a run besides its documents. Variants that differ here are duplicates.
VARIANT_SAME = ("kernel", "pass", "implementation", "variant", "workload", "gpu", "metric",
                "protocol_id", "observed_at", "status")


class LoadCommit:
    """The commit of one load into the warehouse at :attr:`path` (see the module's doc)."""

    def __init__(self, path: Path):
        self.path = path
        self.layout = Layout(path)
        # The tables the load staged no rows for (set by _plan): their final queries are
        # not run (each statement costs milliseconds, whatever the load's size).
        self.unstaged: set[str] = set()

    @staticmethod
    def database(staging: Path) -> duckdb.DuckDBPyConnection:
        """The DuckDB database of a load staged in ``staging``, with the commit's settings:
        its bookkeeping (which files are loaded, the reference files) and its commit (on a
        cursor, :meth:`commit`) share it, as creating a database costs 20-35 ms, about a
        tenth of a small load. The settings are the database's, so they are set here.

        The dedupe and the ordered final writes spill to disk beyond the memory limit, so a
        load's memory does not grow with its size. The big tables are staged in final form
        and never sorted by the database (kidata.store.finalize), so the limit stays small
        (KIDATA_COMMIT_MEMORY); once the dedupe is done, while the big tables are streamed
        and latest_runs is derived, KIDATA_COMMIT_WRITE_MEMORY: DuckDB fills whatever limit
        it has. The bookkeeping's queries are small and order their results where it
        matters, so these settings cost them nothing."""
        settings = config.current()
        return engine.connect({"memory_limit": settings.commit_memory, "threads": 2,
                               "temp_directory": str(spill_folder(staging)),
                               # every query that writes has its own ORDER BY
                               "preserve_insertion_order": False})

    def commit(self, staging: Path, report: LoadReport, strict: bool,
               database: duckdb.DuckDBPyConnection) -> None:
        """Commit the load staged in ``staging`` (under the writer lock), filling ``report``.
        ``database`` is the load's (:meth:`database`, opened with the commit's settings); the
        commit runs on a cursor of it, whose temporary tables are gone when it returns."""
        settings = config.current()
        con = database.cursor()
        try:
            self._plan(con, staging)
            con.execute(f"SET memory_limit = '{settings.commit_write_memory}'")  # a size
            # Counted, and only those the report can list fetched: a load of millions of
            # conflicting duplicates holds no Python object per conflict (issue 27, item 8).
            [(conflicts, duplicates, enriching, added, staged)] = con.execute(
                "SELECT (SELECT count(*) FROM conflict_rejects), "
                "count(*) FILTER (WHERE _outcome IN ('duplicate', 'enrich')), "
                "count(*) FILTER (WHERE _outcome = 'enrich'), "
                "count(*) FILTER (WHERE _outcome = 'added'), count(*) FROM run_outcome"
            ).fetchall()
            listed = [] if not conflicts else con.execute(
                "SELECT source_file, _position, reason FROM conflict_rejects ORDER BY _seq "
                f"LIMIT {max(0, MAX_REPORTED - len(report.rejects))}").fetchall()
            for file, position, reason in listed:
                report.add_reject(Reject(file, position, "run.metadata.name", reason))
            report.rejected += conflicts - len(listed)
            if strict and conflicts:
                return
            report.rejects_not_kept = max(0, report.rejected - max_kept_rejects())
            report.duplicates += duplicates
            now = started_at(report.load_id)  # as in the rows staged in final form
            final = final_folder(staging)
            final.mkdir()
            moves: list[tuple[str, str]] = []
            empty: list[tuple[str, Path]] = []
            # The two big tables, staged in final form, are put in place (or their kept rows
            # copied) in threads (pyarrow releases the GIL), beside the small tables written
            # by DuckDB here; latest_runs follows runs (COMMIT_ORDER), so DuckDB's memory for
            # it is not added to theirs.
            # The records whose rows are kept; None: all of them (a load of new runs only),
            # so the staged files are renamed without looking at a row.
            keep = None if added == staged else con.sql(
                "SELECT _seq FROM run_outcome WHERE _outcome = 'added' ORDER BY _seq"
            ).to_arrow_table()["_seq"].combine_chunks()
            with ThreadPoolExecutor(max_workers=len(finalize.DIRECT)) as pool:
                streamed = {table: pool.submit(self._stream_final, staging, table, keep,
                                               final_file(staging, table))
                            for table in finalize.DIRECT}
                try:
                    for table in COMMIT_ORDER:
                        if table == "loads":
                            continue
                        path = final_file(staging, table)
                        count = streamed[table].result() if table in streamed else None
                        if count is None and (table not in self.unstaged
                                              or table == "latest_runs"  # derived
                                              or (table == "rejects" and conflicts)):
                            count = self._write_final(con, table, path, report.load_id, now)
                        report.added[table] = count = count or 0
                        if count:
                            moves.append((str(path.relative_to(self.path)),
                                          self.layout.part_relative(table, report.load_id)))
                        elif table in FILED_WHEN_EMPTY and not self.layout.table_files(table):
                            empty.append((table, path))
                        fault(f"after-write:{table}")
                finally:
                    for future in streamed.values():
                        future.cancel()
            if moves:  # a load that commits gives such a table its first, empty file: for an
                # engine that infers a table's schema from its files (plain Spark), which
                # cannot define the views reading a table that has none
                from kidata.store.pqwrite import write_reader
                from kidata.store.schema import TABLES

                for table, path in empty:
                    write_reader(path, TABLES[table], iter(()), create_empty=True)
                    moves.append((str(path.relative_to(self.path)),
                                  self.layout.part_relative(table, report.load_id)))
            # Stored rows this load makes richer (docs/guarantees.md, "Duplicates that carry
            # more"): their files are replaced after the marker, see below.
            replaces: list[tuple[str, str]] = []
            report.enriched = self._write_enriched(con, final, replaces, enriching)
            if enriching:
                report.enriched_runs = [r[0] for r in con.execute(
                    "SELECT run_id FROM enrich_runs ORDER BY run_id").fetchall()]
            # Before the commit point: what the final files hold must be what was read.
            disagreements = self._verify(con, staging, report, staged, added,
                                         keep is not None)
            if disagreements:
                raise LoadRefused(report.load_id, disagreements)
        finally:
            con.close()
        if not moves and not replaces:
            report.committed = True
            return
        if moves:
            # The load's row in `loads` is its commit marker, renamed after its files:
            # kidata's readers show only rows of the loads listed there (kidata/store/snapshot.py).
            marker = final_file(staging, "loads")
            self._write_marker(marker, report, now)
            moves.append((str(marker.relative_to(self.path)),
                          self.layout.part_relative("loads", report.load_id)))
        # Then the enriched files replace the stored ones, one rename each: until then a
        # reader sees the stored row (consistent: it is what the warehouse held), after it
        # the richer one, whose documents this load's files already made visible.
        tx = Transaction(self.path, f"load {report.load_id}", work=final,
                         load_id=report.load_id)
        for src, dst in moves:
            tx.add(self.path / src, self.path / dst)
        for src, dst in replaces:
            tx.replace(self.path / src, self.path / dst)
        warning = tx.commit()
        if warning:
            report.add_warning(warning)
        if moves:
            report.added["loads"] = 1
        report.committed = True

    def _verify(self, con: duckdb.DuckDBPyConnection, staging: Path, report: LoadReport,
                planned: int, added: int, copied: bool) -> list[str]:
        """What disagrees between what the load read and the final files it is about to
        commit (empty: nothing), checked from sources other than the code that wrote the
        files: the runs the stage counted as it read them, the plan's outcomes, the staged
        sidecars' record numbers, and the final files, read back.

        - every staged run has one outcome, and the final ``runs`` file holds one row per
          added run, each run once, and the ``run_documents`` file one document per added run;
        - the final ``measurements`` file holds as many rows as the added records staged, and
          its runs are exactly the final file's runs (every added run has measurements, no
          other run has any);
        - when the kept rows were copied (``copied``: a load with duplicates, conflicts or
          richer variants), the final runs are exactly the staged runs the plan added.

        Runs are compared by a 64-bit hash of their id (DuckDB's ``hash``): sets of integers
        are compared at a fraction of the cost of their text. Two ids sharing a hash (about 1
        in 10^7 loads of 1M runs) could hide a disagreement or, in the each-once check, refuse
        a good load (which, run again, commits: the refusal changes nothing)."""
        q = quote_literal
        out: list[str] = []
        written = report.added.get("runs", 0)
        out += [message for wrong, message in (
            (planned != report.staged_runs,
             f"{report.staged_runs:,} runs were staged, the commit planned {planned:,}"),
            (written != added, f"{added:,} runs to add, {written:,} written")) if wrong]
        if not added:
            return out
        runs_file = final_file(staging, "runs")
        documents_file = final_file(staging, "run_documents")
        measurements_file = final_file(staging, "measurements")
        sidecar = direct_sidecar(staging, "measurements")
        missing = [f.name for f in (runs_file, documents_file, measurements_file, sidecar)
                   if not f.exists()]
        if missing:
            return [*out, f"{added:,} runs to add and no {', '.join(missing)}"]
        runs = f"read_parquet([{q(str(runs_file))}])"
        documents = f"read_parquet([{q(str(documents_file))}])"
        measurements = f"read_parquet([{q(str(measurements_file))}])"
        side = f"read_parquet([{q(str(sidecar))}])"
        expected = (f"(SELECT count(*) FROM {side})" if not copied else
                    f"(SELECT count(*) FROM {side} WHERE _seq IN "
                    "(SELECT _seq FROM run_outcome WHERE _outcome = 'added'))")
        [(rows, distinct, found, staged, in_measurements, in_either, docs, documented,
          in_runs_or_docs)] = con.execute(f"""
            WITH r AS (SELECT hash(run_id) AS h FROM {runs}),
                 m AS (SELECT hash(run_id) AS h FROM {measurements}),
                 d AS (SELECT hash(run_id) AS h FROM {documents})
            SELECT (SELECT count(*) FROM r), (SELECT count(DISTINCT h) FROM r),
                (SELECT count(*) FROM m), {expected},
                (SELECT count(DISTINCT h) FROM m),
                (SELECT count(DISTINCT h) FROM (SELECT h FROM r UNION ALL SELECT h FROM m)),
                (SELECT count(*) FROM d), (SELECT count(DISTINCT h) FROM d),
                (SELECT count(DISTINCT h) FROM (SELECT h FROM r UNION ALL SELECT h FROM d))
        """).fetchall()
        out += [message for wrong, message in (
            (rows != added, f"the runs file holds {rows:,} rows for {added:,} added runs"),
            (distinct != rows, f"{rows - distinct:,} runs are in the runs file more than once"),
            (found != staged, f"the measurements file holds {found:,} rows, the added "
                              f"records staged {staged:,}"),
            (in_either != distinct, f"measurements of {in_either - distinct:,} runs that are "
                                    "not added"),
            (in_either != in_measurements, f"{in_either - in_measurements:,} added runs have "
                                           "no measurement"),
            (docs != rows, f"the run documents file holds {docs:,} rows for {rows:,} runs"),
            (in_runs_or_docs != distinct, f"documents of {in_runs_or_docs - distinct:,} runs "
                                          "that are not added"),
            (in_runs_or_docs != documented, f"{in_runs_or_docs - documented:,} added runs "
                                            "have no document")) if wrong]
        if copied:
            [(extra, lost)] = con.execute(f"""
                WITH f AS (SELECT DISTINCT hash(run_id) AS h FROM {runs}),
                     s AS (SELECT DISTINCT hash(run_id) AS h FROM staged_runs WHERE _seq IN
                           (SELECT _seq FROM run_outcome WHERE _outcome = 'added'))
                SELECT (SELECT count(*) FROM (SELECT h FROM f EXCEPT SELECT h FROM s)),
                       (SELECT count(*) FROM (SELECT h FROM s EXCEPT SELECT h FROM f))
            """).fetchall()
            out += [message for wrong, message in (
                (extra, f"{extra:,} runs in the runs file are not runs the load added"),
                (lost, f"{lost:,} runs the load added are not in the runs file")) if wrong]
        return out

    @staticmethod
    def _write_marker(path: Path, report: LoadReport, now: datetime) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from kidata import __version__
        from kidata.store.schema import TABLES

        added = {t: n for t, n in sorted(report.added.items()) if n}
        row = {"load_id": report.load_id, "loaded_at": now, "kidata_version": __version__,
               "files": report.files, "records": report.records,
               "added": json.dumps(added, sort_keys=True), "duplicates": report.duplicates,
               "rejected": report.rejected, "warnings": report.warned,
               "rejects_not_kept": report.rejects_not_kept,
               **{k: report.facts.get(k) for k in ("commit", "branch", "ci_run")}}
        pq.write_table(pa.Table.from_pylist([row], schema=TABLES["loads"]), path,
                       compression="zstd")
        durable.fsync_file(path)

    def _plan(self, con: duckdb.DuckDBPyConnection, staging: Path) -> None:
        """Create temp tables saying what each staged row becomes (added, duplicate, conflict)."""
        from kidata.store.schema import staged_schema

        views = []
        for table in COLUMNS:
            if table in REFERENCE or table in APART or table in AFTER_COMMIT:
                continue  # not loaded (reference.py, acks.py and contexts.py write them)
            src = finalize.staged_source(staging, table)
            # The stored rows are read by the final query of a table the load staged (and
            # of rejects, which conflicts add to), and the documents' and runs' by the
            # variant choice whatever was staged. Defining a view reads its files' footers:
            # the others are not defined.
            if (src is not None or table in ("runs", "run_documents", "rejects")
                    or table in DOCUMENT_KEYS):
                views.append(f"CREATE TEMP VIEW existing_{table} AS "
                             f"{table_sql(self.path, table)}")
            if src is None:
                self.unstaged.add(table)
                cols = ", ".join(f"CAST(NULL AS {duckdb_type(f.type)}) AS "
                                 f"{quote_identifier(f.name)}"
                                 for f in staged_schema(table))
                src = f"SELECT {cols} WHERE 1 = 0"
            views.append(f"CREATE TEMP VIEW staged_{table} AS {src}")
        con.execute(";\n".join(views))  # one call: each costs a millisecond or two
        # Each staged run's place among the load's records of the same run (_rn) and the
        # first of them. Only run ids staged more than once (_repeated) need the window,
        # which sorts its rows: a load of new runs, nearly all distinct, pays one hash
        # aggregate instead (at 1M runs: ~1 CPU s instead of ~2).
        con.execute("""
            CREATE TEMP TABLE run_outcome_wide AS
            WITH repeated AS (
                SELECT run_id FROM staged_runs GROUP BY run_id HAVING count(*) > 1
            ),
            ranked AS (
                SELECT s.run_id, s.content_hash, s.source_file, s._seq, s._position,
                    row_number() OVER w AS _rn,
                    first_value(content_hash) OVER w AS _first_hash,
                    first_value(source_file) OVER w AS _first_file,
                    first_value(_position) OVER w AS _first_position,
                    TRUE AS _repeated
                FROM staged_runs s
                SEMI JOIN repeated r ON r.run_id IS NOT DISTINCT FROM s.run_id
                WINDOW w AS (PARTITION BY run_id ORDER BY _seq
                             ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
                UNION ALL
                SELECT s.run_id, s.content_hash, s.source_file, s._seq, s._position,
                    1, s.content_hash, s.source_file, s._position, FALSE
                FROM staged_runs s
                ANTI JOIN repeated r ON r.run_id IS NOT DISTINCT FROM s.run_id
            )
            -- A run the warehouse holds is the reference of every record of it in the load
            -- (each is a duplicate or a conflict of the stored run, whatever came first in
            -- the load); otherwise the load's first record of it is.
            SELECT r.*, e.content_hash AS _old_hash, e.source_file AS _old_file,
                coalesce(e.content_hash, r._first_hash) AS _ref_hash,
                CASE
                    WHEN e.run_id IS NOT NULL AND e.content_hash = r.content_hash
                        THEN 'duplicate'
                    WHEN e.run_id IS NOT NULL THEN 'conflict_existing'
                    WHEN r._rn > 1 AND r.content_hash = r._first_hash THEN 'duplicate'
                    WHEN r._rn > 1 THEN 'conflict_load'
                    ELSE 'added'
                END AS _outcome
            FROM ranked r
            LEFT JOIN (SELECT run_id, content_hash, source_file FROM existing_runs) e
                ON e.run_id = r.run_id
        """)
        con.execute("""
            CREATE TEMP TABLE conflict_rejects AS
            SELECT o.source_file, o._position AS position, 'run.metadata.name' AS field,
                CASE WHEN _outcome = 'conflict_load' THEN
                    'conflict: run ' || o.run_id || ' appears earlier in this load (' ||
                    _first_file || ', ' || _first_position || ') with different numbers'
                ELSE
                    'conflict: run ' || o.run_id || ' is already in the warehouse, loaded from ' ||
                    _old_file || ', with different numbers'
                END AS reason,
                d.document AS raw, o._seq, o._position
            FROM run_outcome_wide o JOIN staged_run_documents d ON d._seq = o._seq
            WHERE o._outcome IN ('conflict_load', 'conflict_existing')
        """)
        self._plan_variants(con)
        # What the rest of the commit needs of each run: its record's number and outcome.
        # Without the wide rows (run ids, hashes, file names: ~150 MB at 1M runs) DuckDB has
        # that memory for latest_runs while the big tables are streamed beside it.
        con.execute("CREATE TEMP TABLE run_outcome AS "
                    "SELECT _seq, _outcome FROM run_outcome_wide")
        con.execute("DROP TABLE run_outcome_wide")

    @staticmethod
    def _plan_variants(con: duckdb.DuckDBPyConnection) -> None:
        """Choose, for every run that several records give with the same numbers (in this
        load, or in this load and the warehouse), the record kept: the richest variant
        (the most documents the warehouse or the load holds among those it points at; on a
        tie the smallest MD5 of its document), whatever the order of the loads. A staged
        variant that beats the stored run becomes ``enrich`` (:meth:`_write_enriched`
        replaces the stored row); the others stay ``duplicate``. Only runs with more than one
        record are looked at, so a load of new runs pays one aggregate here."""
        # Each source is scanned once into a small table of what choosing needs (the
        # documents' text stays where it is: only hashes of it are carried).
        con.execute("""
            CREATE TEMP TABLE variant_ids AS
            SELECT o.run_id, bool_or(o._old_hash IS NOT NULL) AS is_stored
            FROM run_outcome_wide o
            -- the records with the reference's numbers (the stored run's, else the load's
            -- first record's); a run staged once is one only when the warehouse has it
            WHERE o.content_hash = o._ref_hash AND (o._repeated OR o._outcome = 'duplicate')
            GROUP BY o.run_id
            HAVING count(*) > 1 OR is_stored
        """)
        [(variants,)] = con.execute("SELECT count(*) FROM variant_ids").fetchall()
        if not variants:  # nothing to choose: every record keeps its outcome
            return
        known = " UNION ".join(
            f"SELECT {key} AS id FROM {side}_{table}"
            + (" WHERE document IS NOT NULL" if table == "workloads" else "")
            for table, key in DOCUMENT_KEYS.items() for side in ("existing", "staged"))
        con.execute(f"CREATE TEMP TABLE known_documents AS {known}")

        def richness(alias: str) -> str:
            return " + ".join(f"(CASE WHEN {alias}.{key} IN (SELECT id FROM known_documents) "
                              "THEN 1 ELSE 0 END)" for key in DOCUMENT_KEYS.values())

        def same_as(alias: str) -> str:
            return " AND ".join(f"{alias}.{quote_identifier(c)} IS NOT DISTINCT FROM "
                                f"s.{quote_identifier(c)}" for c in VARIANT_SAME)
        same, same_first = same_as("e"), same_as("f")
        stored_cols = ", ".join(f"e.{quote_identifier(c)}" for c in
                                dict.fromkeys(("run_id", *DOCUMENT_KEYS.values(),
                                               *VARIANT_SAME)))
        con.execute(f"""
            CREATE TEMP TABLE variant_stored AS
            SELECT {stored_cols}, hash(d.document) AS _hash, {richness("e")} AS richness
            FROM existing_runs e LEFT JOIN existing_run_documents d ON d.run_id = e.run_id
            WHERE e.run_id IN (SELECT run_id FROM variant_ids)
        """)
        staged_cols = stored_cols.replace("e.", "s.")
        con.execute(f"""
            CREATE TEMP TABLE variant_staged AS
            SELECT {staged_cols}, s._seq, hash(d.document) AS _hash,
                {richness("s")} AS richness
            FROM staged_runs s JOIN run_outcome_wide o ON o._seq = s._seq
            JOIN staged_run_documents d ON d._seq = s._seq
            WHERE o.run_id IN (SELECT run_id FROM variant_ids)
                AND o.content_hash = o._ref_hash
        """)
        con.execute(f"""
            CREATE TEMP TABLE picked AS
            WITH first_staged AS (
                SELECT * FROM variant_staged
                QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY _seq) = 1
            ),
            candidates AS (
                SELECT s.run_id, s._seq, s._hash, s.richness, FALSE AS stored
                FROM variant_staged s LEFT JOIN variant_stored e ON e.run_id = s.run_id
                LEFT JOIN first_staged f ON f.run_id = s.run_id
                -- a variant may change only what no other table derives from the run: it
                -- shares those columns with the stored run, else with the load's first
                -- record of it (so one load and several loads keep the same record)
                WHERE (e.run_id IS NOT NULL AND ({same}))
                    OR (e.run_id IS NULL AND ({same_first}))
                UNION ALL
                SELECT e.run_id, NULL, e._hash, e.richness, TRUE FROM variant_stored e
            ),
            differ AS (  -- runs whose records are not all the same document
                SELECT run_id FROM candidates GROUP BY run_id
                HAVING count(DISTINCT _hash) > 1
            ),
            -- Ties are broken by the MD5 of the document (stable; hash() is DuckDB's own),
            -- computed only where records differ: a re-loaded file costs no MD5 at all.
            staged_md5 AS (
                SELECT _seq, md5(document) AS _doc FROM staged_run_documents
                WHERE run_id IN (SELECT run_id FROM differ)
            ),
            stored_md5 AS (
                SELECT run_id, md5(document) AS _doc FROM existing_run_documents
                WHERE run_id IN (SELECT run_id FROM differ)
            ),
            ranked AS (
                SELECT c.*, row_number() OVER (PARTITION BY c.run_id
                    ORDER BY c.richness DESC, coalesce(t._doc, d._doc), c.stored DESC, c._seq
                    ) AS _pick
                FROM candidates c
                LEFT JOIN staged_md5 t ON NOT c.stored AND t._seq = c._seq
                LEFT JOIN stored_md5 d ON c.stored AND d.run_id = c.run_id
            )
            SELECT r.run_id, r._seq, r.stored, i.is_stored
            FROM ranked r JOIN variant_ids i ON i.run_id = r.run_id
            WHERE r._pick = 1
        """)
        con.execute("UPDATE run_outcome_wide SET _outcome = 'duplicate' "
                    "WHERE _outcome = 'added' AND run_id IN (SELECT run_id FROM picked)")
        con.execute("UPDATE run_outcome_wide AS o SET _outcome = CASE WHEN p.is_stored "
                    "THEN 'enrich' ELSE 'added' END FROM picked AS p "
                    "WHERE o._seq = p._seq AND NOT p.stored")

    def _write_enriched(self, con: duckdb.DuckDBPyConnection, final: Path,
                        replaces: list[tuple[str, str]], enriching: int) -> int:
        """Write the new version of every stored file holding a row that this load enriches:
        runs whose richer variant it brings (``enrich``: their rows and their documents), and
        workloads known only by digest whose document it brings. Each file keeps its rows in
        order, the enriched ones replaced by the new record's (keeping their ``load_id`` and
        ``loaded_at``: the row is still the run its first load added). Appends ``(new file,
        stored file)`` to ``replaces``; returns the rows replaced (a run and its document count
        once). ``enriching``: the runs planned ``enrich``
        (none: the runs' files are not looked at; nor are the workloads' when the load
        staged none)."""
        from kidata.store.pqwrite import clustered, write_reader
        from kidata.store.schema import TABLES, clustered_keys

        tables = [table for table, there in (("runs", enriching), ("run_documents", enriching),
                                             ("workloads", "workloads" not in self.unstaged))
                  if there]
        for table in ("runs", "run_documents"):
            if table in tables:
                con.execute(f"CREATE TEMP TABLE enrich_{table} AS SELECT s.* FROM staged_{table} "
                            "s WHERE s._seq IN (SELECT _seq FROM run_outcome "
                            "WHERE _outcome = 'enrich')")
        if "workloads" in tables:
            con.execute("""
            CREATE TEMP TABLE enrich_workloads AS
            SELECT * EXCLUDE (_first) FROM (
                SELECT s.*, row_number() OVER (PARTITION BY workload_id ORDER BY _seq) AS _first
                FROM staged_workloads s WHERE s.document IS NOT NULL
                    AND s.workload_id IN (SELECT workload_id FROM existing_workloads
                                          WHERE document IS NULL)
            ) WHERE _first = 1
        """)
        q = quote_identifier
        replaced = 0
        for table, key in (("runs", "run_id"), ("run_documents", "run_id"),
                           ("workloads", "workload_id")):
            if table not in tables:
                continue
            [(count,)] = con.execute(f"SELECT count(*) FROM enrich_{table}").fetchall()
            if not count:
                continue
            replaced += count if table != "run_documents" else 0  # counted as runs
            files = sorted({row[0] for row in con.execute(
                f"SELECT DISTINCT filename FROM read_parquet($files, union_by_name = true, "
                f"filename = true) WHERE {key} IN (SELECT {key} FROM enrich_{table})",
                {"files": [str(f) for f in self.layout.table_files(table)]}).fetchall()})
            for n, stored in enumerate(files):
                have = {row[0] for row in con.execute(
                    "SELECT name FROM parquet_schema($f)", {"f": stored}).fetchall()}
                cols = []
                for field in TABLES[table]:
                    name = q(field.name)
                    old = f"f.{name}" if field.name in have else "NULL"
                    if field.name in ("load_id", "loaded_at"):
                        cols.append(f"{old} AS {name}")
                    else:
                        cols.append(f"CASE WHEN e.{q(key)} IS NULL THEN {old} "
                                    f"ELSE e.{name} END AS {name}")
                query = (f"SELECT {', '.join(cols)} FROM read_parquet($f, "
                         f"file_row_number = true) f LEFT JOIN enrich_{table} e "
                         f"ON e.{q(key)} = f.{q(key)} ORDER BY f.file_row_number")
                out = enriched_file(final, table, n)
                # runs sorted again, one GPU per row group, as every writer of theirs does
                # (a richer row may bring a time or a GPU the stored one lacked).
                write_reader(out, TABLES[table],
                             con.sql(query, params={"f": stored}).to_arrow_reader(8192),
                             through=clustered(clustered_keys(table), finalize.CLUSTER_BYTES),
                             max_bytes=finalize.group_bytes(table))
                durable.fsync_file(out)
                replaces.append((str(out.relative_to(self.path)),
                                 str(Path(stored).resolve().relative_to(self.path.resolve()))))
        return replaced

    def _select_final(self, table: str) -> str:
        """The query giving the rows a commit adds to ``table``."""
        cols = []
        for f in COLUMNS[table]:
            if f.name == "loaded_at":
                cols.append("CAST($now AS TIMESTAMP WITH TIME ZONE) AS loaded_at")
            elif f.name == "load_id":
                cols.append("CAST($load_id AS VARCHAR) AS load_id")
            else:
                cols.append(f"s.{quote_identifier(f.name)}")
        select = ", ".join(cols)
        if table in ("runs", "run_documents"):
            # run_outcome holds only keys and outcomes (not the wide run rows): the added runs
            # are found by their record's number (one run per record).
            return (f"SELECT {select} FROM staged_{table} s WHERE s._seq IN "
                    f"(SELECT _seq FROM run_outcome WHERE _outcome = 'added') ORDER BY s._seq")
        if table in ("measurements", "published"):
            extra = ""
            if table == "published":
                extra = ("AND NOT EXISTS (SELECT 1 FROM existing_published e WHERE "
                         "e.run_id = s.run_id AND e.quantity = s.quantity AND "
                         "e.baseline_run_id IS NOT DISTINCT FROM s.baseline_run_id)")
            # A record's measurements and claims are about its run (same run_id): keep those
            # of the records whose run is added. Matching on the record number alone keeps
            # the lookup table small (one integer per run).
            return (f"SELECT {select} FROM staged_{table} s WHERE s._seq IN "
                    f"(SELECT _seq FROM run_outcome WHERE _outcome = 'added') "
                    f"{extra} ORDER BY s._seq, {_tiebreak(table)}")
        if table == "samples":
            # A run's raw samples come from one record of it that is not a conflict (the one
            # that adds it, a duplicate, a richer variant: the same numbers), the first that
            # has samples, unless the warehouse has samples of the run with those numbers: so a
            # Liger CSV row (no samples) and a bundle of the same run (with them) leave the
            # same rows in either order, in one load or in two, and two records' lists are
            # never mixed. Keyed by the run's numbers too, they stay when a load is taken out,
            # as documents do (kidata.store.unload).
            kept = "_outcome IN ('added', 'duplicate', 'enrich')"
            return (f"SELECT {select} FROM staged_samples s WHERE s._seq IN ("
                    f"SELECT min(_seq) FROM staged_samples WHERE _seq IN "
                    f"(SELECT _seq FROM run_outcome WHERE {kept}) GROUP BY run_id, content_hash) "
                    f"AND NOT EXISTS (SELECT 1 FROM existing_samples e WHERE "
                    f"e.run_id = s.run_id AND e.content_hash = s.content_hash) "
                    f"ORDER BY s._seq, {_tiebreak(table)}")
        if table == "rejects":
            # A record rejected again for the same reason (a re-run) is kept once.
            same = " AND ".join(f"e.{k} IS NOT DISTINCT FROM s.{k}" for k in KEYS["rejects"])
            cols = ", ".join(KEYS["rejects"])
            # The load's first max_kept_rejects() rejects, in input order (an int, not input).
            return (f"SELECT {select} FROM (SELECT *, row_number() OVER (PARTITION BY {cols} "
                    f"ORDER BY _seq) AS _rn FROM (SELECT {cols}, _seq FROM staged_rejects "
                    f"UNION ALL SELECT {cols}, _seq FROM conflict_rejects "
                    f"ORDER BY _seq LIMIT {int(max_kept_rejects())})) s "
                    f"WHERE _rn = 1 AND NOT EXISTS (SELECT 1 FROM existing_rejects e "
                    f"WHERE {same}) ORDER BY s._seq")
        keys = [quote_identifier(k) for k in KEYS[table]]
        prefer = "document IS NULL, " if table == "workloads" else ""
        return (f"SELECT {select} FROM (SELECT *, row_number() OVER (PARTITION BY "
                f"{', '.join(keys)} ORDER BY {prefer}_seq) AS _rn FROM staged_{table}) s "
                f"WHERE _rn = 1 AND NOT EXISTS (SELECT 1 FROM existing_{table} e "
                f"WHERE {' AND '.join(f'e.{k} = s.{k}' for k in keys)}) "
                f"ORDER BY s._seq, {_tiebreak(table)}")

    def _write_final(self, con: duckdb.DuckDBPyConnection, table: str, path: Path,
                     load_id: str, now: datetime) -> int:
        from kidata.store.pqwrite import clustered, write_reader
        from kidata.store.schema import TABLES, clustered_keys

        if table == "latest_runs":  # derived, not staged
            return derived.write_latest_runs(con, path, load_id)
        params = {"load_id": load_id}
        if "loaded_at" in TABLES[table].names:
            params["now"] = now
        reader = con.sql(self._select_final(table), params=params).to_arrow_reader(8192)
        # runs: sorted, one GPU per row group, as finalize writes them
        return write_reader(path, TABLES[table], reader,
                            through=clustered(clustered_keys(table), finalize.CLUSTER_BYTES),
                            max_bytes=finalize.group_bytes(table),
                            before_write=lambda: fault(f"write-final:{table}"))

    @staticmethod
    def _stream_final(staging: Path, table: str, keep: Any, path: Path) -> int | None:
        """Put the final file of a big table (``finalize.DIRECT``), staged in final form, at
        ``path``: the staged file itself when the load keeps all its rows, else a copy of
        the kept ones (:func:`kidata.store.finalize.finish`)."""
        return finalize.finish(staging, table, keep, path, lambda: fault(f"write-final:{table}"))


def _tiebreak(table: str) -> str:
    """Order of a record's rows within the record (one record gives several measurements or
    parameters): by their key, so the row order of every file is the same for the same
    input, however the staging files were split."""
    return ", ".join(f"s.{quote_identifier(k)}" for k in KEYS[table])
