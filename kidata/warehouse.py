"""The library's facade over a warehouse: load, query, check, compact, export.

A load is read → stage → commit: :meth:`Warehouse.load` has the inputs read and staged
(:mod:`kidata.ingest.inputs`), then committed (:mod:`kidata.store.load_commit`, through the one
commit mechanism of :mod:`kidata.store.commit`): all or nothing, under the writer lock.
Queries go through one cached session (:mod:`kidata.query.session`). Every path under a
warehouse is named in :mod:`kidata.store.layout`. See ``docs/architecture.md`` and
``docs/guarantees.md``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from kidata.core import config
from kidata.core.load_report import LoadReport
from kidata.errors import (
    NoSuchLoad,
    NotAWarehouse,
    QueryError,
    RecordError,
    UsageError,
    WarehouseError,
)
from kidata.query.session import KEPT_PAST, Session
from kidata.store import commit, reference
from kidata.store.layout import PRIVATE, Layout
from kidata.store.upgrade import upgrade

# The readers, the load's commit (its thread pool) and filelock (~0.05 s: it imports asyncio)
# are imported where a load or a repair uses them: a query process never does
# (tests/cli/test_startup.py).

DEFAULT_BATCH = 10_000


def default_path() -> Path:
    """The warehouse without a path given: ``$KIDATA_WAREHOUSE``, else ``./warehouse``."""
    return config.current().warehouse


class Warehouse:
    """A kidata warehouse folder: load records into it, query it with SQL, export from it."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 since: str | datetime | None = None, until: str | datetime | None = None,
                 min_effect: float | None = None):
        """The warehouse at ``path``; with ``since``/``until`` (ISO 8601, or a span back from
        now such as ``30d``), every query sees only the results measured in that window
        (:mod:`kidata.core.window`). ``min_effect`` is the verdict rule's minimum effect for
        every query (the ``verdict_settings`` view; None: ``KIDATA_MIN_EFFECT``, else 0.10)."""
        from kidata.core.window import Window
        from kidata.query.analysis import check_threshold

        if min_effect is not None:
            check_threshold(min_effect)
        self.path = Path(path) if path is not None else default_path()
        self.window = Window.of(since, until)
        self.min_effect = min_effect
        self.session = Session(self.path, self.require, self.window, min_effect)
        self._last_recovery: list[str] = []  # what the last writer_lock() recovered
        self._last_upgrade: list[str] = []  # and what it upgraded (kidata.store.upgrade)

    def __repr__(self) -> str:
        return f"Warehouse({str(self.path)!r})"

    # -- layout -------------------------------------------------------------------------------

    @property
    def layout(self) -> Layout:
        """Every path under this warehouse (:mod:`kidata.store.layout`)."""
        return Layout(self.path)

    @property
    def private(self) -> Path:
        return self.layout.private

    def table_files(self, table: str) -> list[Path]:
        return self.layout.table_files(table)

    def require(self) -> None:
        """Raise :class:`NotAWarehouse` unless :attr:`path` is a warehouse: a folder holding
        ``_kidata/``, which a warehouse's first load creates before anything else. One whose
        loads all added nothing yet (``_kidata/`` and no committed load) is a warehouse with
        empty tables. Every reading command asks this first; only :meth:`load` creates one.

        Raises :class:`~kidata.errors.NewerLayout` for a warehouse of a newer layout than this
        kidata knows, which it neither reads nor writes (:func:`kidata.store.commit.check_layout`:
        what a newer layout changed could make an older reader's answers wrong), and
        :class:`WarehouseError` for a malformed layout file."""
        if not self.path.exists():
            raise NotAWarehouse(self.path, "no such folder")
        if not self.path.is_dir():
            raise NotAWarehouse(self.path, "not a folder")
        if not self.private.is_dir():
            raise NotAWarehouse(self.path, f"no {PRIVATE}/ folder in it, which every "
                                           "warehouse has from its first load")
        commit.check_layout(self.path)

    def create(self) -> Warehouse:
        """Make :attr:`path` an empty warehouse if it is not one yet (what a first load does
        before reading anything), with its layout file; returns the warehouse. Raises
        :class:`~kidata.errors.NewerLayout`, changing nothing, for a warehouse of a newer
        layout than this kidata knows."""
        commit.ensure(self.path)
        return self

    @property
    def last_recovery(self) -> list[str]:
        """What the last :meth:`writer_lock` finished or removed of dead writers, one line
        each."""
        return self._last_recovery

    def forget_connection(self) -> None:
        """Open a fresh DuckDB connection on the next query: files under the warehouse
        changed in a way the cached one would not notice (compaction, repair)."""
        self.session.forget()

    @contextlib.contextmanager
    def writer_lock(self):
        """Hold the writer lock (one commit or compaction at a time), after finishing what
        dead writers left (:func:`kidata.store.commit.recover`) and upgrading an older
        layout (:mod:`kidata.store.upgrade`); yields what they did, one line each, as
        :attr:`last_recovery` gives it."""
        with commit.writer_lock(self.path) as recovered:
            # Every writer works on the current layout: an older warehouse is upgraded first.
            self._last_upgrade = upgrade(self.path)
            recovered = [*recovered, *self._last_upgrade]
            self._last_recovery = recovered
            yield recovered

    # -- load ---------------------------------------------------------------------------------

    def load(self, paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
             format: str | None = None, strict: bool = False,
             batch_size: int = DEFAULT_BATCH,
             progress: Callable[[str, int], None] | None = None,
             phase: Callable[[str], None] | None = None,
             settings: dict[str, str] | None = None, mapping: str | None = None
             ) -> LoadReport:
        """Read, validate and add records from files, folders (recursive), globs or ``-``.

        ``paths`` is one path (a ``str`` or :class:`~pathlib.Path`) or an iterable of them.

        Returns a :class:`LoadReport`. Bad records are rejected (listed in the report and kept
        in the ``rejects`` table) while the good ones load; with ``strict`` nothing is committed
        if anything would be rejected. ``progress(file, records_so_far)`` is called per file;
        ``phase(name)`` when the load moves on to ``"commit"`` and ``"compact"``.
        ``settings`` (``--set key=value``) supply context the field's formats lack;
        ``mapping`` reads every file by a TOML mapping (``docs/formats.md``).
        """
        from kidata.ingest import folder_settings
        from kidata.ingest.inputs import stage_inputs
        from kidata.ingest.readers import check_format, expand_paths
        from kidata.store import acks
        from kidata.store.load_commit import LoadCommit
        from kidata.store.manifest import FileManifest

        # What would fail every file fails before anything is created: a bad mapping, an
        # unknown format or a bad setting leaves no warehouse behind where there was none.
        if mapping is not None:
            from kidata.ingest.mapping import load_mapping

            load_mapping(str(mapping))
        check_format(format)
        from kidata.core.config import ci_facts
        from kidata.ingest.readers.builder import LOAD_FACTS, Settings

        # Checked as `--set` pairs are: an unknown key or GPU loads nothing. The load's facts
        # (commit, branch, CI run) go to its marker, not to its records; in CI, the CI's
        # variables give those the settings do not.
        settings = dict(Settings.of(settings)) if settings else {}
        facts = {**ci_facts(), **{k: settings.pop(k) for k in LOAD_FACTS if k in settings}}
        settings = settings or None
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        paths = [os.fspath(p) for p in paths]
        # A folder's kidata.toml (checked now, as the command line is) says how to read its
        # files; the file itself is not an input.
        folders = [f for p in paths if p != "-" and os.path.isdir(p)
                   and (f := folder_settings.find(p)) is not None]
        skipped: list[str] = []
        unreadable: list[RecordError] = []
        files = expand_paths(paths, skipped, unreadable)
        per_file = None
        if folders:
            files, per_file = folder_settings.read_as(files, folders, format, settings, mapping)
        commit.ensure(self.path)
        load_id = commit.new_id()
        report = LoadReport(load_id=load_id, facts=facts)
        for message in skipped:  # FIFOs, devices, symlink loops found in folders and globs
            report.add_warning(message)
        try:
            staging, owner = commit.new_staging(self.path, load_id)
        except OSError as exc:
            raise WarehouseError(f"cannot start a load in {self.path}: {exc}") from None
        # One database for the load's bookkeeping (which files are loaded, reference files)
        # and its commit.
        meta = LoadCommit.database(staging)
        try:
            try:
                read = stage_inputs(self.path, files, staging, format, batch_size, report,
                                    progress, meta, unreadable, settings, mapping, per_file)
                if strict and report.rejected:
                    return report
                if phase is not None:
                    phase("commit")
                with self.writer_lock():
                    for line in self._last_upgrade:  # older kidata versions now refuse it
                        report.add_warning(line)
                    if read is None:
                        # Every file unchanged since it was loaded: nothing staged, nothing
                        # to commit (and no pyarrow to import: a re-load is start-up only).
                        report.committed = True
                    else:
                        LoadCommit(self.path).commit(staging, report, strict, meta)
                    reference.write(self.path, meta)
                    acks.ensure_table(self.layout)
                    if report.committed and read:
                        FileManifest(self.path).remember(report, read)
                    if report.added.get("loads"):
                        self._derive_contexts(report)
                        if phase is not None:
                            phase("compact")
                        self._auto_compact(report)
            except (OSError, duckdb.Error) as exc:
                state = ("was committed, but then failed" if report.committed
                         else "failed and committed nothing")
                raise WarehouseError(f"load {load_id} {state}: {exc}") from exc
        finally:
            meta.close()
            owner.release()
            # A load that passed its commit point keeps its files until they are in place.
            if not self.layout.journal(load_id).exists():
                shutil.rmtree(staging, ignore_errors=True)
            self.session.forget()
        return report

    def _derive_contexts(self, report: LoadReport) -> None:
        """After a commit, under the writer lock: store the steps the load added or changed
        and that it is covered (:mod:`kidata.store.contexts`), from ``KIDATA_CONTEXTS_AT``
        runs on; every committed load, even one that added nothing, for readers to use the
        stored steps. The load is committed whatever happens here: without them, readers
        compute every step."""
        from kidata.store import contexts

        try:
            rows = contexts.store(self.path, report.load_id, only_load=True,
                                  enriched=report.enriched_runs)
            if rows is not None:  # None: a small warehouse, where queries compute them
                report.added[contexts.TABLE] = rows
        except (OSError, duckdb.Error) as exc:
            report.add_warning(f"load {report.load_id} is committed, but storing its steps "
                               f"failed ({exc}); queries compute every step until the next "
                               "load stores them all")

    def _auto_compact(self, report: LoadReport) -> None:
        """After a commit, under the writer lock: merge the small files of tables that have
        many (:func:`kidata.store.compaction.auto`). The load is committed whatever happens here."""
        from kidata.store import compaction

        try:
            done = compaction.auto(self.layout)
        except (OSError, duckdb.Error, WarehouseError) as exc:
            report.add_warning(f"load {report.load_id} is committed, but merging the tables' small "
                         f"files failed ({exc}); run kidata compact")
            return
        report.compacted = {t: n for t, n in done.tables.items() if n[0] != n[1]}
        if report.compacted:
            from kidata.store.contexts import EDITS_MOST, EDITS_SHARE

            report.compacted_why = "KIDATA_COMPACT_AT sets when"
            if "step_context" in report.compacted:  # contexts.edits_due, before that many files
                report.compacted_why += (f", or stored steps whose edits reach {EDITS_SHARE:.0%} "
                                         f"of them or {EDITS_MOST:,} rows")

    # -- query --------------------------------------------------------------------------------

    def names(self) -> dict[str, str]:
        """Every table and view name, with ``table`` or ``view``."""
        return self.session.names()

    def connect(self) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection with every table and view defined (refreshed after loads)."""
        return self.session.ready(None)

    def sql(self, query: str, params: dict[str, Any] | list | None = None, *,
            read_only: bool = False) -> duckdb.DuckDBPyRelation:
        """Run SQL over the tables and views; returns a DuckDB relation (``.pl()``,
        ``.arrow()``, ``.fetchall()``). Errors become :class:`QueryError` with DuckDB's text.
        With ``read_only``, statements that could write are refused
        (:mod:`kidata.query.readonly`)."""
        return self.session.sql(query, params, read_only=read_only)

    def rows(self, query: str, params: dict[str, Any] | list | None = None, *,
             read_only: bool = False) -> list[tuple]:
        """The rows of ``query`` at once, as a list of tuples: :meth:`sql` without the
        relation, which DuckDB binds once more (on a small warehouse, about a quarter of a
        deep view's time). For a large answer, stream :meth:`sql`'s relation instead."""
        return self.session.rows(query, params, read_only=read_only)

    def keep(self, view: str) -> None:
        """Compute ``view`` once, now, and answer later queries that read it from those rows,
        until the next commit (:meth:`kidata.query.session.Session.keep`): for a script that
        asks a costly view (``trends`` at a million runs) several questions."""
        self.session.keep(view)

    def release(self) -> None:
        """Hand back to the system the memory DuckDB keeps after the queries made so far
        (:meth:`kidata.query.session.Session.release`)."""
        self.session.release()

    def relation(self, name: str) -> duckdb.DuckDBPyRelation:
        """A table or view by name."""
        return self.session.relation(name)

    def rejects(self, load_id: str | None = None, file: str | None = None,
                everything: bool = False) -> duckdb.DuckDBPyRelation:
        """Rejected records still unresolved, oldest load first: when, which load, file,
        position, field and reason (``raw`` holds the record's text). Narrowed to one load or
        one input file; a load id that names no committed load raises :class:`NoSuchLoad`.

        A reject is resolved when a later load read its file again (under the same name): the
        newest read of each file says what is wrong with it now, so the rejects of a failed
        first try leave the list once the corrected load is in. ``everything`` (or a
        ``load_id``) lists every reject kept; :meth:`superseded_rejects` counts the others."""
        if load_id is not None and not self.rows(
                "SELECT 1 FROM loads WHERE load_id = $id", {"id": load_id}):
            raise NoSuchLoad(load_id)
        every = everything or load_id is not None
        keep = "TRUE" if every else f"NOT ({self._superseded_sql()})"
        return self.sql(
            "SELECT loaded_at, load_id, source_file, position, field, reason, raw FROM rejects "
            "WHERE ($load_id IS NULL OR load_id = $load_id) "
            f"AND ($file IS NULL OR source_file = $file) AND {keep} "
            "ORDER BY loaded_at, load_id, source_file, length(position), position",
            {"load_id": load_id, "file": file, **({} if every else self._later_reads())})

    def superseded_rejects(self, file: str | None = None) -> int:
        """Rejects kept whose file a later load read again (see :meth:`rejects`)."""
        return self.rows(f"SELECT count(*) FROM rejects WHERE ($file IS NULL OR source_file = "
                         f"$file) AND {self._superseded_sql()}",
                         {"file": file, **self._later_reads()})[0][0]

    def _later_reads(self) -> dict[str, list[str]]:
        """The query parameters of :meth:`_superseded_sql`: the loads (``$read_loads``) and
        files (``$read_files``) of every clean read the file manifests note, pairwise."""
        from kidata.store.manifest import FileManifest

        reads = FileManifest(self.path).clean_reads()
        return {"read_loads": [r[0] for r in reads], "read_files": [r[1] for r in reads]}

    @staticmethod
    def _superseded_sql() -> str:
        """Whether a ``rejects`` row's file was read by a later committed load: one that
        rejected records of it too, or read it in full without reject."""
        return (
            "EXISTS (SELECT 1 FROM (SELECT load_id, source_file FROM rejects UNION ALL "
            "SELECT unnest($read_loads), unnest($read_files)) r "
            "JOIN loads later ON later.load_id = r.load_id "
            "WHERE r.source_file = rejects.source_file AND later.loaded_at > rejects.loaded_at)")

    def rejects_not_kept(self, load_id: str | None = None) -> list[tuple[str, int]]:
        """``(load_id, count)`` of the loads that rejected more records than they kept in
        ``rejects`` (beyond ``KIDATA_MAX_REJECTS``), oldest first."""
        if not any(self.table_files("loads")):
            return []
        try:
            return self.rows(
                "SELECT load_id, rejects_not_kept FROM loads WHERE rejects_not_kept > 0 "
                "AND ($load_id IS NULL OR load_id = $load_id) ORDER BY loaded_at, load_id",
                {"load_id": load_id})
        except QueryError:  # only loads older than the column: none was capped
            return []

    def check(self, repair: bool = False):
        """Verify the warehouse on disk; see :func:`kidata.store.verify.check`."""
        from kidata.store.verify import check

        self.require()
        try:
            return check(self.layout, self.writer_lock, repair=repair)
        finally:
            if repair:
                self.session.forget()

    def unload(self, load_ids: list[str] | None = None, damaged: bool = False
               ) -> tuple[list[str], dict[str, int]]:
        """Take committed loads out: ``load_ids``, and with ``damaged`` every load whose
        commit ``check`` finds inconsistent. Their runs, measurements, claims, ``latest_runs``
        rows and rejects go, their documents and commit markers stay, and their files are
        read again by the next load of them (:mod:`kidata.store.unload`). Returns the loads
        taken out and the rows removed per table."""
        from kidata.store.unload import unload

        self.require()
        ids = list(load_ids or [])
        if damaged:
            ids += list(self.check().damaged)
        if not ids:
            return [], {}
        from kidata.store import commit, contexts

        try:
            with self.writer_lock():
                removed = unload(self.path, ids)
                # The unload emptied step_context: store every step's context again (at the
                # size loads store them at). The unload is committed whatever happens here.
                try:
                    contexts.store(self.path, commit.new_id())
                except (OSError, duckdb.Error) as exc:
                    raise WarehouseError(
                        f"unloaded {', '.join(sorted(set(ids)))}, but storing the series "
                        f"steps' contexts again failed ({exc}); queries compute them, and "
                        "kidata check --repair stores them") from exc
        finally:
            self.session.forget()
        return sorted(set(ids)), removed

    def compact(self, tables: list[str] | None = None):
        """Merge each table's small files; see :func:`kidata.store.compaction.compact`."""
        from kidata.store import compaction

        picked = compaction.chosen(tables)  # a wrong table name is refused before anything
        self.require()
        try:
            report = compaction.compact(self.layout, self.writer_lock, picked)
        finally:
            self.session.forget()
        report.upgraded = list(self._last_upgrade)
        return report

    def records(self):
        """The warehouse's runs as kernelindex bundles; see :func:`kidata.query.bundles.bundles`."""
        from kidata.query.bundles import bundles

        return bundles(self.session)


    def info(self) -> dict[str, Any]:
        """Tables with row and file counts, sources, GPUs and the time range of the runs."""
        return self.session.info()

    # -- export, report, analysis: what the CLI offers, for library users too -----------------

    def export(self, name: str, path: str | os.PathLike[str], format: str | None = None, *,
               parents: bool = False, csv_raw: bool = False) -> Exported:
        """Write the table or view ``name`` to the file ``path``: CSV, Parquet, Arrow, JSON,
        NDJSON or Excel (``format``, else from the suffix; column descriptions travel as
        Parquet metadata and Excel's ``columns`` sheet), or with ``format="kernelindex"`` the
        runs as kernelindex bundles (JSON Lines, loadable again; ``name`` must be ``runs``).
        The file is written whole or not at all, into a missing folder only with ``parents``;
        CSV text a spreadsheet would run as a formula gets a leading ``'`` unless ``csv_raw``
        (:mod:`kidata.query.export`, :mod:`kidata.query.bundles`)."""
        path = Path(path)
        if format == "kernelindex":
            if name != "runs":
                from kidata.errors import UsageError

                raise UsageError("the kernelindex format exports runs (as bundles with their "
                                 "documents); use: kidata export runs --format kernelindex "
                                 "-o FILE")
            from kidata.query import bundles

            rows = bundles.export(self.session, path, parents=parents)
            return Exported(path, "kernelindex", rows)
        from kidata.query import export as export_mod

        fmt = export_mod.format_for(path, format)
        rows = export_mod.export(self.relation(name), self.connect(), path, fmt, sheet=name,
                                 name=name, parents=parents, csv_raw=csv_raw)
        return Exported(path, fmt, rows)

    def export_query(self, query: str, path: str | os.PathLike[str], format: str | None = None,
                     *, read_only: bool = True, parents: bool = False, csv_raw: bool = False
                     ) -> Exported | None:
        """Run ``query`` (refusing statements that write unless ``read_only`` is false) and
        write its result to ``path`` as :meth:`export` writes a table (not ``kernelindex``),
        each column described as the tables and views it names describe it. The format is
        checked before the query runs. None when the statement returns no rows to write (a
        ``SET``, say): then no file is written."""
        from kidata.query import export as export_mod

        path = Path(path)
        fmt = export_mod.format_for(path, format)
        relation = self.sql(query, read_only=read_only)
        if relation is None:
            return None
        rows = export_mod.export(relation, self.connect(), path, fmt, sheet="query",
                                 described=export_mod.query_descriptions(query),
                                 parents=parents, csv_raw=csv_raw)
        return Exported(path, fmt, rows)

    def export_duckdb(self, path: str | os.PathLike[str], *, parents: bool = False
                      ) -> dict[str, int]:
        """Write a new DuckDB database file holding a copy of every table (committed rows
        only) and every view, for any DuckDB client; returns each table's row count. An
        existing file is never overwritten (:func:`kidata.query.export.duckdb_file`)."""
        from kidata.query import export as export_mod

        return export_mod.duckdb_file(self.connect, Path(path), parents=parents)

    def views_script(self) -> str:
        """Every table and view of this warehouse as one SQL script for the duckdb shell
        (:func:`kidata.query.views.script`). It names the warehouse's folders, so the path
        must be a warehouse (:meth:`require`)."""
        from kidata.query import views

        self.require()
        return views.script(self.path.resolve())

    def report(self, path: str | os.PathLike[str], *, kernels: Iterable[str] = (),
               gpus: Iterable[str] = (), implementations: Iterable[str] = (),
               since: datetime | None = None, until: datetime | None = None,
               png_dir: str | os.PathLike[str] | None = None,
               svg_dir: str | os.PathLike[str] | None = None, parents: bool = False):
        """Write the self-contained HTML report to ``path`` (:mod:`kidata.query.present`),
        restricted to these kernels, GPUs and implementations (none: all; two implementations
        make the speedup heatmap compare the first against the second) and to results measured
        from ``since`` (inclusive) to ``until`` (exclusive, UTC); each chart also as PNG/SVG
        into ``png_dir``/``svg_dir``. Returns the :class:`~kidata.query.present.ReportResult`
        (charts, files, warnings, what was left out, seconds)."""
        from kidata.core.window import Window
        from kidata.query.present import Filters, write_report

        # The window is the session's, as for every reading command (this warehouse's own,
        # unless the call gives one). The report reads through a session of its own, closed
        # after each of its queries: DuckDB's memory goes back between queries and before the
        # figures are drawn, and this warehouse's session keeps what it held. Its views read on
        # several of those connections are kept in files past a size (session.KEPT_PAST).
        window = Window.of(since, until) if since or until else self.window
        session = Session(self.path, self.require, window, self.min_effect,
                          across=KEPT_PAST)
        filters = Filters(list(kernels), list(gpus), list(implementations),
                          window.since if window else None, window.until if window else None)
        try:
            return write_report(session, Path(path), filters,
                                png_dir=Path(png_dir) if png_dir is not None else None,
                                svg_dir=Path(svg_dir) if svg_dir is not None else None,
                                parents=parents, names=self.session,
                                release=session.close)
        finally:
            session.close()

    def audit(self, everything: bool = False):
        """Published derived numbers (trainkernel's ratio, say) recomputed from their inputs:
        an :class:`~kidata.analysis.Audit` whose ``rows`` hold the claims that disagree beyond
        rounding (every claim with ``everything``), with counts (:func:`kidata.analysis.audit`)."""
        from kidata.query import analysis

        return analysis.audit(self.session, everything=everything)

    def verdict_min_effect(self) -> float:
        """The minimum effect this warehouse's verdicts use (the ``verdict_settings`` view)."""
        from kidata.query import analysis

        return analysis.min_effect(self.session)

    def regressions(self, threshold: float | None = None) -> duckdb.DuckDBPyRelation:
        """Results slower than the previous result of their series beyond noise and by more
        than ``threshold`` (0.05 = 5%; None: the minimum effect), between two versions, not a
        shift shared with the implementations measured beside them
        (:func:`kidata.analysis.regressions`)."""
        from kidata.query import analysis

        return analysis.regressions(self.session, threshold)

    def regression_scan(self, threshold: float | None = None):
        """:meth:`regressions` with :meth:`acknowledged_regressions` and the slower steps the
        ``shifts`` view lists, from one query: a
        :class:`~kidata.query.analysis.RegressionScan` (what ``kidata regressions`` prints)."""
        from kidata.query import analysis

        return analysis.regression_scan(self.session, threshold)

    def changes(self, min_effect: float | None = None, min_points: int = 6):
        """Change points over the whole history of every latency series with at least
        ``min_points`` timed results, beyond ``min_effect`` (None: this warehouse's minimum
        effect): a :class:`~kidata.query.changes.Changes` (:mod:`kidata.query.changes` says
        the method). Needs ``pip install 'kidata[changes]'``."""
        from kidata.query import changes

        return changes.changes(self.session, min_effect, min_points)

    def acknowledged_regressions(self, threshold: float | None = None) -> int:
        """The regressions :meth:`regressions` leaves out because they were acknowledged."""
        from kidata.query import analysis

        return analysis.acknowledged_regressions(self.session, threshold)

    def gate(self, baseline: str, candidate: str, thresholds: str | os.PathLike[str] | None
             = None, threshold: float | None = None, start_point: str | None = None,
             sessions: bool = False):
        """A regression gate: ``candidate`` judged against ``baseline`` (selectors, as
        :meth:`compare` takes them) by the verdict rule and the thresholds of a TOML file
        (``threshold`` replacing its global one), acknowledged slowdowns left out; the
        ``start_point`` is the baseline when ``baseline`` shares no key with the candidate;
        ``sessions`` reads the two sides as two sessions (docs/ci.md). A
        :class:`~kidata.query.gate.GateResult` (``exit_code``, ``markdown()``)."""
        from kidata.query import gate

        limits = gate.load_thresholds(thresholds, threshold)
        return gate.gate(self.session, baseline, candidate, limits, start_point, sessions)

    def ack(self, reason: str, author: str | None = None, runs: list[str] | None = None,
            baseline: str | None = None, candidate: str | None = None,
            thresholds: str | os.PathLike[str] | None = None,
            threshold: float | None = None) -> list[dict[str, Any]]:
        """Acknowledge slowdowns as intended (``kidata ack``): every key a gate of
        ``baseline`` against ``candidate`` finds slower (only those of ``runs`` when given),
        or, without a gate, the runs ``runs``. ``author`` defaults to the CI's actor, else the
        user. Returns the rows added to ``acknowledgements``."""
        import getpass

        from kidata.core.config import ci_actor
        from kidata.store import acks

        if (baseline is None) != (candidate is None):
            raise UsageError("give both sides of the gate (baseline and candidate), or none")
        if baseline is None and not runs:
            raise UsageError("name the runs to acknowledge, or a gate's two sides")
        self.require()
        rows: list[dict[str, Any]] = []
        if baseline is not None:
            result = self.gate(baseline, candidate, thresholds, threshold)
            at = {c: i for i, c in enumerate(result.rows.columns)}
            for r in result.table:
                if r[at["outcome"]] == "slower" and (not runs or r[at["candidate_run_id"]]
                                                     in runs):
                    rows.append({"run_id": r[at["candidate_run_id"]],
                                 "baseline_run_id": r[at["baseline_run_id"]],
                                 "change": r[at["change"]],
                                 **{k: r[at[k]] for k in ("kernel", "pass", "workload", "gpu",
                                                          "implementation")}})
        else:
            found = {r[0]: r for r in self.rows(
                "SELECT run_id, kernel, pass, workload, gpu, implementation FROM runs "
                "WHERE run_id IN (SELECT unnest($ids))", {"ids": list(runs)})}
            missing = [r for r in runs if r not in found]
            if missing:
                raise UsageError(f"no run {missing[0]!r} in the warehouse"
                                 + (f" (and {len(missing) - 1:,} more)" if len(missing) > 1
                                    else ""))
            rows = [dict(zip(("run_id", "kernel", "pass", "workload", "gpu", "implementation"),
                             found[r], strict=True)) for r in dict.fromkeys(runs)]
        who = author or ci_actor() or getpass.getuser()
        acks.acknowledge(self.layout, self.writer_lock, rows, reason, who)
        self.session.forget()
        return rows

    def compare(self, baseline: str | dict[str, str], candidate: str | dict[str, str],
                threshold: float | None = None, *, only_changed: bool = False):
        """Two sides (implementations, versions, loads, labels: ``'torch'`` or
        ``'implementation=liger,version=0.2.1'``) compared over every key both have, with
        noise-aware verdicts: a :class:`~kidata.analysis.Comparison`
        (:func:`kidata.analysis.compare`). With ``only_changed``, its ``rows`` keep only the
        keys slower or faster beyond noise and ``threshold`` (None: the minimum effect); the
        counts still cover every shared key."""
        from kidata.query import analysis

        result = analysis.compare(self.session, baseline, candidate, threshold)
        if only_changed:
            result.rows = result.rows.filter(
                f"placement IN ('above', 'below') AND ABS(LN(latency_ratio)) > "
                f"LN(1 + {result.threshold!r})")
        return result


@dataclass(frozen=True)
class Exported:
    """What :meth:`Warehouse.export` wrote: the file, its format, and how many rows (for
    ``kernelindex``, runs)."""

    path: Path
    format: str
    rows: int
