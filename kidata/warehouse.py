"""Write the warehouse: staged, deduplicated, atomic loads into folders of Parquet files.

Layout: one folder of Parquet files per table, readable by any engine, and kidata's private
``_kidata/`` folder; every path is named in :mod:`kidata.store.layout`.

A load reads and validates its inputs into staging files (memory bounded by the batch size),
then, holding the writer lock, deduplicates them against the warehouse with DuckDB, writes one
final file per table, records the moves in a journal and renames the files into the table
folders, runs last. The commit unit is one call of :meth:`Warehouse.load` (one ``kidata load``).
See ``docs/guarantees.md``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
from filelock import FileLock, Timeout

from kidata.errors import (
    NoSuchLoad,
    NoSuchView,
    NotAWarehouse,
    QueryError,
    RecordError,
    WarehouseError,
)
from kidata.ingest.load_report import LoadReport, Reject, max_kept_rejects
from kidata.ingest.readers import expand_paths, read_file
from kidata.query import engine
from kidata.query import views as views_mod
from kidata.store import derived, durable, finalize, reference, snapshot
from kidata.store.durable import fault
from kidata.store.layout import (
    LOCK_TIMEOUT,
    NEW_STAGING_PREFIX,
    PRIVATE,
    TEMP_GLOB,
    Layout,
    final_file,
    final_folder,
    owner_lock,
)
from kidata.store.schema import COLUMNS, COMMIT_ORDER, KEYS, REFERENCE

DEFAULT_BATCH = 10_000
# DuckDB's memory limit while committing a load; beyond it the dedupe spills to disk. The big
# tables are written without a database sort (kidata.ingest.stage.stream_final), so this stays
# small.
COMMIT_MEMORY = os.environ.get("KIDATA_COMMIT_MEMORY", "192MB")
# ... and once the dedupe is done, while the big tables are streamed beside it and latest_runs
# is derived (which needs ~96 MB at 1M runs): DuckDB fills whatever limit it has.
COMMIT_WRITE_MEMORY = os.environ.get("KIDATA_COMMIT_WRITE_MEMORY", "128MB")
# A staging folder still being created this long after a crash is removed by the next writer.
STALE_NEW_STAGING = 3600.0
# Times a reader lists a table folder again when a compaction swapped it while being read.
SWAP_RETRIES = 5
# Tables staged in their final form, which a commit renames (or copies the kept rows of).
STREAMED = finalize.DIRECT


# The documents a run points at, by table and digest column: a run's variant is richer the
# more of them the warehouse (or the load) has (Warehouse._plan_variants).
DOCUMENT_KEYS = {"environments": "environment_id", "protocols": "protocol_id",
                 "workloads": "workload_id", "implementations": "implementation_id"}
# Columns the variants of one run must share to replace one another: what latest_runs and the
# views derive from a run besides its documents. Variants that differ here are duplicates.
VARIANT_SAME = ("kernel", "pass", "implementation", "variant", "workload", "gpu", "metric",
                "protocol_id", "observed_at", "status")


def default_path() -> Path:
    return Path(os.environ.get("KIDATA_WAREHOUSE") or "warehouse")


class Warehouse:
    """A kidata warehouse folder: load records into it, query it with SQL, export from it."""

    def __init__(self, path: str | os.PathLike[str] | None = None):
        self.path = Path(path) if path is not None else default_path()
        self._con: duckdb.DuckDBPyConnection | None = None
        self._con_state: tuple | None = None
        self._con_views: set[str] = set()  # the views defined on _con
        self._last_recovery: list[str] = []  # what the last _recover() did

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
        empty tables. Every reading command asks this first; only :meth:`load` creates one."""
        if not self.path.exists():
            raise NotAWarehouse(self.path, "no such folder")
        if not self.path.is_dir():
            raise NotAWarehouse(self.path, "not a folder")
        if not self.private.is_dir():
            raise NotAWarehouse(self.path, f"no {PRIVATE}/ folder in it, which every "
                                           "warehouse has from its first load")

    def create(self) -> Warehouse:
        """Make :attr:`path` an empty warehouse if it is not one yet (what a first load does
        before reading anything); returns the warehouse."""
        self._ensure()
        return self

    def _ensure(self) -> None:
        if self.path.exists() and not self.path.is_dir():
            raise WarehouseError(f"{self.path} exists and is not a folder")
        try:
            for sub in (*self.layout.created(), *COLUMNS):
                (self.path / sub).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise WarehouseError(f"cannot write to the warehouse {self.path}: {exc}") from None

    @property
    def last_recovery(self) -> list[str]:
        """What the last :meth:`writer_lock` finished or removed of dead writers, one line
        each."""
        return self._last_recovery

    def forget_connection(self) -> None:
        """Open a fresh DuckDB connection on the next query: files under the warehouse
        changed in a way the cached one would not notice (compaction, repair)."""
        self._con_state = None

    @contextlib.contextmanager
    def writer_lock(self):
        """Hold the writer lock (one commit or compaction at a time), after finishing what
        dead writers left (:meth:`_recover`)."""
        self._ensure()
        lock = FileLock(str(self.layout.lock), timeout=LOCK_TIMEOUT)
        try:
            lock.acquire()
        except Timeout:
            raise WarehouseError(f"{self.path} is locked by another writer for more than "
                                 f"{LOCK_TIMEOUT:.0f} s; is a load stuck?") from None
        except OSError as exc:
            raise WarehouseError(f"cannot lock {self.path} for writing: {exc}") from None
        try:
            self._last_recovery = self._recover()
            yield
        finally:
            lock.release()

    def _recover(self) -> list[str]:
        """Complete (or, if a file it needs is gone, undo) every commit that stopped after its
        journal was written; remove staging and compaction folders of dead processes. Called
        with the writer lock held; returns one line per thing done."""
        done = [self._roll_forward(journal)
                for journal in sorted(self.layout.journals.glob("*.json"))]
        for tmp in self.layout.journals.glob("*.tmp"):
            tmp.unlink(missing_ok=True)  # a journal that was never complete: never decided
        for staging in self.layout.staging.iterdir():
            # Live loads create and delete their own folders meanwhile (they hold no writer
            # lock while staging): a folder may vanish at any step here.
            try:
                if staging.name.startswith(NEW_STAGING_PREFIX):
                    # Being created (its owner lock is taken before it gets its name); left
                    # behind only by a crash in that instant.
                    if time.time() - staging.stat().st_mtime > STALE_NEW_STAGING:
                        shutil.rmtree(staging, ignore_errors=True)
                    continue
                if not staging.is_dir():
                    continue
                owner = FileLock(str(owner_lock(staging)), timeout=0)
                with owner:
                    shutil.rmtree(staging, ignore_errors=True)
            except Timeout:
                continue  # a live load still owns it
            except FileNotFoundError:
                continue  # its load finished and removed it
            done.append(f"removed the staging files of dead load {staging.name}")
        # Atomic writes in table folders (reference tables, repaired markers) happen under the
        # writer lock: a temporary file there is the leftover of a killed writer.
        for table in COLUMNS:
            folder = self.layout.table(table)
            for tmp in folder.glob(TEMP_GLOB) if folder.is_dir() else ():
                tmp.unlink(missing_ok=True)
                done.append(f"removed {table}/{tmp.name}, left by an interrupted write")
        compact = self.layout.compact
        if compact.is_dir():  # compaction holds the writer lock throughout: these are dead
            for leftover in compact.iterdir():
                shutil.rmtree(leftover, ignore_errors=True)
                done.append(f"removed the leftovers of interrupted compaction {leftover.name}")
        return done

    def _roll_forward(self, journal: Path) -> str:
        """Finish the renames a journal lists. If a file the commit needs is gone from both
        places (someone deleted it), undo the commit instead, so it is fully out."""
        try:
            entry = json.loads(journal.read_bytes())
            load_id, moves = entry["load_id"], entry["moves"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise WarehouseError(f"commit journal {journal} is unreadable ({exc}); move it "
                                 "aside and run `kidata check`") from None
        # Stored files a commit replaces by enriched versions: never removed by an undo (the
        # stored file and its enriched version are both a whole, valid state).
        replaces = set(entry.get("replaces", ()))
        lost = [src for src, dst in moves if dst not in replaces
                and not (self.path / src).exists() and not (self.path / dst).exists()]
        if lost:
            for src, dst in moves:
                if dst in replaces:
                    (self.path / src).unlink(missing_ok=True)
                else:
                    (self.path / dst).unlink(missing_ok=True)
            action = f"undid load {load_id}: its staged file {lost[0]} is gone"
        else:
            for src, dst in moves:
                if (self.path / src).exists():
                    os.replace(self.path / src, self.path / dst)
            action = f"completed the interrupted commit of load {load_id}"
        _fsync_dirs(self.path, [dst for _, dst in moves])
        journal.unlink()
        durable.fsync_dir(journal.parent)
        return action

    def _new_staging(self, load_id: str) -> tuple[Path, FileLock]:
        """A staging folder owned by this process. The owner lock is taken before the folder
        gets its final name, so :meth:`_recover` never sees a live load's folder unlocked."""
        root = self.layout.staging
        fresh = root / f"{NEW_STAGING_PREFIX}{load_id}"
        fresh.mkdir()
        owner = FileLock(str(owner_lock(fresh)), timeout=0)
        owner.acquire()
        staging = root / load_id
        os.rename(fresh, staging)
        return staging, owner

    # -- load ---------------------------------------------------------------------------------

    def load(self, paths: Iterable[str], format: str | None = None, strict: bool = False,
             batch_size: int = DEFAULT_BATCH,
             progress: Callable[[str, int], None] | None = None,
             phase: Callable[[str], None] | None = None,
             settings: dict[str, str] | None = None, mapping: str | None = None
             ) -> LoadReport:
        """Read, validate and add records from files, folders (recursive), globs or ``-``.

        Returns a :class:`LoadReport`. Bad records are rejected (listed in the report and kept
        in the ``rejects`` table) while the good ones load; with ``strict`` nothing is committed
        if anything would be rejected. ``progress(file, records_so_far)`` is called per file;
        ``phase(name)`` when the load moves on to ``"commit"`` and ``"compact"``.
        ``settings`` (``--set key=value``) supply context the field's formats lack;
        ``mapping`` reads every file by a TOML mapping (``docs/formats.md``).
        """
        skipped: list[str] = []
        unreadable: list[RecordError] = []
        files = expand_paths(paths, skipped, unreadable)
        self._ensure()
        load_id = finalize.load_id_at(datetime.now(UTC)) + "-" + secrets.token_hex(4)
        report = LoadReport(load_id=load_id)
        for message in skipped:  # FIFOs, devices, symlink loops found in folders and globs
            report.add_warning(message)
        try:
            staging, owner = self._new_staging(load_id)
        except OSError as exc:
            raise WarehouseError(f"cannot start a load in {self.path}: {exc}") from None
        # One connection for the load's bookkeeping (which files are loaded, reference files).
        meta = engine.connect()
        try:
            try:
                read = self._stage(files, staging, format, batch_size, report, progress, meta,
                                   unreadable, settings, mapping)
                if strict and report.rejected:
                    return report
                if phase is not None:
                    phase("commit")
                with self.writer_lock():
                    if read is None:
                        # Every file unchanged since it was loaded: nothing staged, nothing
                        # to commit (and no pyarrow to import: a re-load is start-up only).
                        report.committed = True
                    else:
                        self._commit(staging, report, strict)
                    reference.write(self.path, meta)
                    if report.committed and read:
                        self._remember_files(report, read)
                    if report.added.get("loads"):
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
            self._con_state = None
        return report

    def _auto_compact(self, report: LoadReport) -> None:
        """After a commit, under the writer lock: merge the small files of tables that have
        many (:func:`kidata.store.compaction.auto`). The load is committed whatever happens here."""
        from kidata.store import compaction

        try:
            done = compaction.auto(self)
        except (OSError, duckdb.Error, WarehouseError) as exc:
            report.add_warning(f"load {report.load_id} is committed, but merging the tables' small "
                         f"files failed ({exc}); run kidata compact")
            return
        report.compacted = {t: n for t, n in done.tables.items() if n[0] != n[1]}

    def _stage(self, files: list[str], staging: Path, fmt: str | None, batch: int,
               report: LoadReport, progress: Callable[[str, int], None] | None,
               meta: duckdb.DuckDBPyConnection, unreadable: list[RecordError] = (),
               settings: dict[str, str] | None = None, mapping: str | None = None
               ) -> list[dict[str, Any]] | None:
        """Stage the records of ``files`` (and ``unreadable``: folders that could not be
        listed, as rejects); returns what was read of each file (for
        :meth:`_remember_files`), or None when every file was skipped as already loaded."""
        # Checking and flattening happen in kidata.ingest.stage (in worker processes for large
        # inputs); the result is the same as one pass over the input in order. It is set up
        # when the first file must be read.
        stage = None
        loaded = self._loaded_files(meta)
        label = fmt or "auto"
        if settings or mapping:  # the same file read with other context is another input
            from kidata.ingest.readers.builder import Settings

            label += "|" + Settings(settings or {}).label() + (f"|mapping={mapping}"
                                                               if mapping else "")
        try:
            if unreadable:
                from kidata.ingest.stage import Stage

                stage = Stage(staging, batch, self._existing_environments(meta), report,
                              progress)
                for error in unreadable:
                    stage.feed(error, error.file)
            for path in files:
                report.files += 1
                name = "<stdin>" if path == "-" else path
                known = loaded.get((name, label))
                seen = None
                if path != "-" and known is not None:
                    # Loaded before under this name: unchanged (same bytes) means skipped.
                    print_ = fingerprint(path, known)
                    seen = loaded.get((name, *print_[:2], label)) if print_ else None
                if seen is not None and self._still_loaded(seen, name, meta):
                    # Unchanged since a clean load: reading it again would add nothing.
                    report.records += seen["records"]
                    report.duplicates += seen["runs"]
                    report.unchanged.append(name)
                    continue
                if stage is None:
                    from kidata.ingest.stage import Stage

                    stage = Stage(staging, batch, self._existing_environments(meta), report,
                                  progress)
                # The manifest describes the bytes this read saw, hashed as they were read:
                # a file replaced meanwhile is not vouched for by the other file's hash.
                got: dict[str, Any] = {}
                for unit in read_file(path, fmt, batch_lines=stage.batch_lines,
                                      fingerprint=got, settings=settings, mapping=mapping):
                    stage.feed(unit, name)
                read_print = ((got["size"], got["sha256"], got["mtime_ns"], got["hashed_at"])
                              if got else None)
                stage.file_done(name, read_print, label)
                if progress is not None:
                    progress(name, report.records)
            if stage is None:
                return None
            stage.finish()
        finally:
            if stage is not None:
                stage.close()
        return stage.summaries()

    def _loaded_files(self, con: duckdb.DuckDBPyConnection) -> dict[tuple, dict[str, Any]]:
        """Files that committed loads read in full with no reject, conflict or warning, by
        (name, size, sha256, format), from ``_kidata/files/<load_id>.json``."""
        folder = self.layout.files
        manifests = sorted(folder.glob("*.json")) if folder.is_dir() else []
        if not manifests:
            return {}
        committed = {load_id for load_id, _ in snapshot.committed(self.path, con)}
        out: dict[tuple, dict[str, Any]] = {}
        for manifest in manifests:
            try:
                entries = json.loads(manifest.read_bytes())
            except (OSError, ValueError):
                continue  # only an optimisation: the files are read again
            # A load that added nothing has no commit marker to vouch for it; its manifest
            # says so itself (see _remember_files).
            if manifest.stem not in committed and not (
                    entries and all(e.get("load_added_nothing") for e in entries)):
                continue
            for e in entries:
                entry = {**e, "load_id": manifest.stem}
                out[(e["source_file"], e["size"], e["sha256"], e["format"])] = entry
                out[(e["source_file"], e["format"])] = entry  # for the stat check
        return out

    def _remember_files(self, report: LoadReport, files: list[dict[str, Any]]) -> None:
        """After a commit, note the files it read in full without reject, conflict or warning,
        so that a later load can skip them while they are unchanged. Written after the
        commit: a crash before it only costs reading them again.

        A load that added nothing at all (every run a duplicate) commits no marker; its
        manifest is kept all the same, each entry marked ``load_added_nothing``, so that
        re-loading such a file is not a full read every time."""
        marker = self.layout.marker(report.load_id)
        added_nothing = not any(report.added.values())
        if not files or not (marker.exists() or added_nothing):
            return
        conflicted = {r.file for r in report.rejects if r.field == "run.metadata.name"}
        if len(report.rejects) < report.rejected:
            return  # not every reject is listed: do not vouch for any file
        clean = [f for f in files if not f["rejected"] and not f["warnings"]
                 and f["source_file"] not in conflicted]
        if not clean:
            return
        added: dict[str, int] = {}
        runs = self.layout.part("runs", report.load_id)
        if runs.exists():
            # ParquetFile.read, unlike read_table, does not import pandas; counted in Arrow (a
            # million names as Python strings would cost 100 MB).
            import pyarrow.compute as pc
            import pyarrow.parquet as pq

            names = pq.ParquetFile(runs).read(columns=["source_file"]).column(0)
            for entry in pc.value_counts(names).to_pylist():
                added[entry["values"]] = entry["counts"]
        entries = [{k: f[k] for k in ("source_file", "size", "sha256", "mtime_ns", "hashed_at",
                                       "format", "records", "runs")}
                   | {"runs_added": added.get(f["source_file"], 0)}
                   | ({"load_added_nothing": True} if added_nothing else {}) for f in clean]
        self.layout.files.mkdir(exist_ok=True)
        durable.write_atomic(self.layout.files_manifest(report.load_id),
                             json.dumps(entries).encode())

    def _still_loaded(self, seen: dict[str, Any], name: str,
                      con: duckdb.DuckDBPyConnection) -> bool:
        """Whether the runs the file added are all still there (a file that lost them, say to
        a repair, is read again). The load that added them is committed (see
        :meth:`_loaded_files`), so its rows are read without the snapshot's filter."""
        if not seen["runs_added"]:
            return True
        [(count,)] = _fetch_unlocked(
            con, lambda: f"SELECT count(*) FROM ({views_mod.table_sql(self.path, 'runs')}) "
                         "WHERE load_id = $load AND source_file = $file",
            {"load": seen["load_id"], "file": name})
        return count == seen["runs_added"]

    def _existing_environments(self, con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
        if not self.table_files("environments"):
            return []
        return _fetch_unlocked(con, lambda: "SELECT environment_id, gpu FROM "
                               f"({views_mod.table_sql(self.path, 'environments')})")

    def _commit(self, staging: Path, report: LoadReport, strict: bool) -> None:
        # The dedupe and the ordered final writes spill to disk beyond the memory limit, so a
        # load's memory does not grow with its size.
        con = engine.connect({"memory_limit": COMMIT_MEMORY, "threads": 2,
                                     "temp_directory": str(staging / "spill"),
                                     # every query that writes has its own ORDER BY
                                     "preserve_insertion_order": False})
        try:
            con.execute("SET enable_progress_bar = false")  # a long commit draws one on stdout
            self._plan(con, staging)
            con.execute(f"SET memory_limit = '{COMMIT_WRITE_MEMORY}'")
            conflicts = con.sql(
                "SELECT source_file, _position, reason FROM conflict_rejects ORDER BY _seq"
            ).fetchall()
            for file, position, reason in conflicts:
                report.add_reject(Reject(file, position, "run.metadata.name", reason))
            if strict and conflicts:
                return
            report.rejects_not_kept = max(0, report.rejected - max_kept_rejects())
            report.duplicates += con.sql(
                "SELECT count(*) FROM run_outcome WHERE _outcome IN ('duplicate', 'enrich')"
            ).fetchall()[0][0]
            now = finalize.started_at(report.load_id)  # as in the rows staged in final form
            final = final_folder(staging)
            final.mkdir()
            moves: list[tuple[str, str]] = []
            # The two big tables are streamed from the staged files in threads (pyarrow
            # releases the GIL), beside the small tables written by DuckDB here; latest_runs
            # follows runs (COMMIT_ORDER), so DuckDB's memory for it is not added to theirs.
            keep = con.sql("SELECT _seq FROM run_outcome WHERE _outcome = 'added' "
                           "ORDER BY _seq").to_arrow_table()["_seq"].combine_chunks()
            with ThreadPoolExecutor(max_workers=len(STREAMED)) as pool:
                streamed = {table: pool.submit(self._stream_final, staging, table, keep,
                                               final_file(staging, table), report.load_id, now)
                            for table in STREAMED}
                try:
                    for table in COMMIT_ORDER:
                        if table == "loads":
                            continue
                        path = final_file(staging, table)
                        count = streamed[table].result() if table in streamed else None
                        if count is None:
                            count = self._write_final(con, table, path, report.load_id, now)
                        report.added[table] = count
                        if count:
                            moves.append((str(path.relative_to(self.path)),
                                          self.layout.part_relative(table, report.load_id)))
                        fault(f"after-write:{table}")
                finally:
                    for future in streamed.values():
                        future.cancel()
            # Stored rows this load makes richer (docs/guarantees.md, "Duplicates that carry
            # more"): their files are replaced after the marker, see below.
            replaces: list[tuple[str, str]] = []
            report.enriched = self._write_enriched(con, final, replaces)
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
        moves += replaces
        durable.fsync_dir(final)
        fault("before-journal")
        journal = self.layout.journal(report.load_id)
        durable.write_atomic(journal, json.dumps({
            "load_id": report.load_id, "moves": moves,
            "replaces": [dst for _, dst in replaces]}).encode())
        # Commit point: from here on the load is decided and is completed, if not by this
        # process then by the next writer (_recover).
        try:
            fault("after-journal")
            for src, dst in moves:
                os.replace(self.path / src, self.path / dst)
                fault(f"after-move:{Path(dst).parent.name}")
            _fsync_dirs(self.path, [dst for _, dst in moves])
            journal.unlink()
        except Exception as exc:
            try:
                self._roll_forward(journal)
            except Exception as again:
                raise WarehouseError(
                    f"load {report.load_id} passed its commit point but could not finish "
                    f"({exc}; then: {again}); the next kidata command that writes to "
                    f"{self.path} will complete it") from exc
            report.add_warning(f"the commit of load {report.load_id} was interrupted ({exc}) and "
                         "has been completed")
        if any(dst.startswith("loads/") for _, dst in moves):
            report.added["loads"] = 1
        report.committed = True

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
               "rejects_not_kept": report.rejects_not_kept}
        pq.write_table(pa.Table.from_pylist([row], schema=TABLES["loads"]), path,
                       compression="zstd")
        durable.fsync_file(path)

    def _plan(self, con: duckdb.DuckDBPyConnection, staging: Path) -> None:
        """Create temp tables saying what each staged row becomes (added, duplicate, conflict)."""
        from kidata.store.schema import staged_schema

        for table in COLUMNS:
            if table in REFERENCE:
                continue  # not loaded (kidata/store/reference.py writes them)
            existing = views_mod.table_sql(self.path, table)
            con.execute(f"CREATE TEMP VIEW existing_{table} AS {existing}")
            src = finalize.staged_source(staging, table)
            if src is None:
                cols = ", ".join(f"CAST(NULL AS {views_mod.duckdb_type(f.type)}) AS "
                                 f"{views_mod.quote_identifier(f.name)}"
                                 for f in staged_schema(table))
                src = f"SELECT {cols} WHERE 1 = 0"
            con.execute(f"CREATE TEMP VIEW staged_{table} AS {src}")
        con.execute("""
            CREATE TEMP TABLE run_outcome_wide AS
            WITH ranked AS (
                SELECT s.run_id, s.content_hash, s.source_file, s._seq, s._position,
                    row_number() OVER w AS _rn,
                    first_value(content_hash) OVER w AS _first_hash,
                    first_value(source_file) OVER w AS _first_file,
                    first_value(_position) OVER w AS _first_position
                FROM staged_runs s
                WINDOW w AS (PARTITION BY run_id ORDER BY _seq
                             ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
            )
            SELECT r.*, e.content_hash AS _old_hash, e.source_file AS _old_file,
                CASE
                    WHEN r._rn > 1 AND r.content_hash = r._first_hash THEN 'duplicate'
                    WHEN r._rn > 1 THEN 'conflict_load'
                    WHEN e.run_id IS NULL THEN 'added'
                    WHEN e.content_hash = r.content_hash THEN 'duplicate'
                    ELSE 'conflict_existing'
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
                s.document AS raw, o._seq, o._position
            FROM run_outcome_wide o JOIN staged_runs s ON s._seq = o._seq
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
        known = " UNION ".join(
            f"SELECT {key} AS id FROM {side}_{table}"
            + (" WHERE document IS NOT NULL" if table == "workloads" else "")
            for table, key in DOCUMENT_KEYS.items() for side in ("existing", "staged"))
        con.execute(f"CREATE TEMP TABLE known_documents AS {known}")

        def richness(alias: str) -> str:
            return " + ".join(f"(CASE WHEN {alias}.{key} IN (SELECT id FROM known_documents) "
                              "THEN 1 ELSE 0 END)" for key in DOCUMENT_KEYS.values())

        same = " AND ".join(f"e.{views_mod.quote_identifier(c)} IS NOT DISTINCT FROM "
                            f"s.{views_mod.quote_identifier(c)}" for c in VARIANT_SAME)
        stored_cols = ", ".join(f"e.{views_mod.quote_identifier(c)}" for c in
                                dict.fromkeys(("run_id", *DOCUMENT_KEYS.values(),
                                               *VARIANT_SAME)))
        # Each source is scanned once into a small table of what choosing needs (the
        # documents' text stays where it is: only hashes of it are carried).
        con.execute("""
            CREATE TEMP TABLE variant_ids AS
            SELECT o.run_id, max(CASE WHEN o._rn = 1 THEN o._outcome END) AS first_outcome
            FROM run_outcome_wide o
            WHERE o.content_hash = o._first_hash
            GROUP BY o.run_id
            HAVING (count(*) > 1 OR first_outcome = 'duplicate')
                AND first_outcome IN ('added', 'duplicate')
        """)
        con.execute(f"""
            CREATE TEMP TABLE variant_stored AS
            SELECT {stored_cols}, hash(e.document) AS _hash, {richness("e")} AS richness
            FROM existing_runs e WHERE e.run_id IN (SELECT run_id FROM variant_ids)
        """)
        staged_cols = stored_cols.replace("e.", "s.")
        con.execute(f"""
            CREATE TEMP TABLE variant_staged AS
            SELECT {staged_cols}, s._seq, hash(s.document) AS _hash,
                {richness("s")} AS richness
            FROM staged_runs s JOIN run_outcome_wide o ON o._seq = s._seq
            WHERE o.run_id IN (SELECT run_id FROM variant_ids)
                AND o.content_hash = o._first_hash
        """)
        con.execute(f"""
            CREATE TEMP TABLE picked AS
            WITH candidates AS (
                SELECT s.run_id, s._seq, s._hash, s.richness, FALSE AS stored
                FROM variant_staged s LEFT JOIN variant_stored e ON e.run_id = s.run_id
                -- a variant may change only what no other table derives from the run
                WHERE e.run_id IS NULL OR ({same})
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
                SELECT _seq, md5(document) AS _doc FROM staged_runs
                WHERE run_id IN (SELECT run_id FROM differ)
            ),
            stored_md5 AS (
                SELECT run_id, md5(document) AS _doc FROM existing_runs
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
            SELECT r.run_id, r._seq, r.stored, i.first_outcome
            FROM ranked r JOIN variant_ids i ON i.run_id = r.run_id
            WHERE r._pick = 1
        """)
        con.execute("UPDATE run_outcome_wide SET _outcome = 'duplicate' "
                    "WHERE _outcome = 'added' AND run_id IN (SELECT run_id FROM picked)")
        con.execute("UPDATE run_outcome_wide AS o SET _outcome = CASE WHEN p.first_outcome = "
                    "'duplicate' THEN 'enrich' ELSE 'added' END FROM picked AS p "
                    "WHERE o._seq = p._seq AND NOT p.stored")

    def _write_enriched(self, con: duckdb.DuckDBPyConnection, final: Path,
                        replaces: list[tuple[str, str]]) -> int:
        """Write the new version of every stored file holding a row that this load enriches:
        runs whose richer variant it brings (``enrich``), and workloads known only by digest
        whose document it brings. Each file keeps its rows in order, the enriched ones
        replaced by the new record's (keeping their ``load_id`` and ``loaded_at``: the row is
        still the run its first load added). Appends ``(new file, stored file)`` to
        ``replaces``; returns the rows replaced."""
        from kidata.store.pqwrite import write_reader
        from kidata.store.schema import TABLES

        con.execute("CREATE TEMP TABLE enrich_runs AS SELECT s.* FROM staged_runs s "
                    "WHERE s._seq IN (SELECT _seq FROM run_outcome WHERE _outcome = 'enrich')")
        con.execute("""
            CREATE TEMP TABLE enrich_workloads AS
            SELECT * EXCLUDE (_first) FROM (
                SELECT s.*, row_number() OVER (PARTITION BY workload_id ORDER BY _seq) AS _first
                FROM staged_workloads s WHERE s.document IS NOT NULL
                    AND s.workload_id IN (SELECT workload_id FROM existing_workloads
                                          WHERE document IS NULL)
            ) WHERE _first = 1
        """)
        q = views_mod.quote_identifier
        replaced = 0
        for table, key in (("runs", "run_id"), ("workloads", "workload_id")):
            [(count,)] = con.execute(f"SELECT count(*) FROM enrich_{table}").fetchall()
            if not count:
                continue
            replaced += count
            files = sorted({row[0] for row in con.execute(
                f"SELECT DISTINCT filename FROM read_parquet($files, union_by_name = true, "
                f"filename = true) WHERE {key} IN (SELECT {key} FROM enrich_{table})",
                {"files": [str(f) for f in self.table_files(table)]}).fetchall()})
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
                out = final / f"enriched-{table}-{n}.parquet"
                write_reader(out, TABLES[table],
                             con.sql(query, params={"f": stored}).to_arrow_reader(8192))
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
                cols.append(f"s.{views_mod.quote_identifier(f.name)}")
        select = ", ".join(cols)
        if table == "runs":
            # run_outcome holds only keys and outcomes (not the wide run rows): the added runs
            # are found by their record's number (one run per record).
            return (f"SELECT {select} FROM staged_runs s WHERE s._seq IN "
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
        keys = [views_mod.quote_identifier(k) for k in KEYS[table]]
        prefer = "document IS NULL, " if table == "workloads" else ""
        return (f"SELECT {select} FROM (SELECT *, row_number() OVER (PARTITION BY "
                f"{', '.join(keys)} ORDER BY {prefer}_seq) AS _rn FROM staged_{table}) s "
                f"WHERE _rn = 1 AND NOT EXISTS (SELECT 1 FROM existing_{table} e "
                f"WHERE {' AND '.join(f'e.{k} = s.{k}' for k in keys)}) "
                f"ORDER BY s._seq, {_tiebreak(table)}")

    def _write_final(self, con: duckdb.DuckDBPyConnection, table: str, path: Path,
                     load_id: str, now: datetime) -> int:
        from kidata.store.pqwrite import write_reader
        from kidata.store.schema import TABLES

        if table == "latest_runs":  # derived, not staged
            return derived.write_latest_runs(con, path, load_id)
        params = {"load_id": load_id}
        if "loaded_at" in TABLES[table].names:
            params["now"] = now
        reader = con.sql(self._select_final(table), params=params).to_arrow_reader(8192)
        return write_reader(path, TABLES[table], reader,
                            before_write=lambda: fault(f"write-final:{table}"))

    @staticmethod
    def _stream_final(staging: Path, table: str, keep: Any, path: Path, load_id: str,
                      now: datetime) -> int | None:
        """Put the final file of a big table (``STREAMED``), staged in final form, at
        ``path``: the staged file itself when the load keeps all its rows, else a copy of
        the kept ones (:func:`kidata.store.finalize.finish`)."""
        return finalize.finish(staging, table, keep, path, lambda: fault(f"write-final:{table}"))

    # -- query --------------------------------------------------------------------------------

    def names(self) -> dict[str, str]:
        """Every table and view name, with ``table`` or ``view``."""
        out = dict.fromkeys(COLUMNS, "table")
        out.update(dict.fromkeys(views_mod.load_views(), "view"))
        return out

    def connect(self) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection with every table and view defined (refreshed after loads)."""
        return self._ready(None)

    def _ready(self, views: list[str] | None) -> duckdb.DuckDBPyConnection:
        """The cached connection with every table and ``views`` (None: all) defined.

        A query defines only the views it names and the views those read
        (:func:`kidata.query.views.needed`): defining all of them costs ~0.1 s, the better part
        of a one-query process."""
        wanted = list(views_mod.load_views()) if views is None else views
        for attempt in range(SWAP_RETRIES):
            con = self._tables()
            try:
                for name in wanted:
                    if name in self._con_views:
                        continue
                    view = views_mod.load_views()[name]
                    try:
                        con.execute(f"CREATE VIEW {view.name} AS {view.body}")
                    except duckdb.IOException:
                        raise
                    except duckdb.Error as exc:
                        raise QueryError(f"view {view.name} ({view.path}) is invalid: "
                                         f"{exc}") from None
                    self._con_views.add(name)
            except duckdb.IOException as exc:
                # A compaction swapped a table folder between listing and reading it (the
                # views read file schemas when defined): define everything again.
                self._con_state = None
                if attempt == SWAP_RETRIES - 1:
                    raise QueryError(str(exc)) from None
                continue
            return con
        raise AssertionError("unreachable")

    def _tables(self) -> duckdb.DuckDBPyConnection:
        """The cached connection with the tables defined (a new one after a load committed
        or a table folder was created); views are :meth:`_ready`'s."""
        self.require()
        state = (tuple(bool(self.table_files(t)) for t in COLUMNS),
                 snapshot.marker_state(self.path))
        if self._con is not None and self._con_state == state:
            return self._con
        if self._con is not None:
            self._con.close()
            self._con = None
        for attempt in range(SWAP_RETRIES):
            con = engine.connect()
            try:
                # Tables show only rows of committed loads: a consistent state mid-commit.
                snapshot.define(con, self.path)
                reference.define(con, self.path)
            except duckdb.IOException as exc:
                con.close()  # a compaction swapped a folder mid-listing: again
                if attempt == SWAP_RETRIES - 1:
                    raise QueryError(str(exc)) from None
                continue
            except duckdb.Error as exc:
                # A table file that is not Parquet (planted, half-copied): every table is
                # defined up front, so name the file and the way to find every such problem.
                con.close()
                raise QueryError(f"cannot read the warehouse's tables: {_first_line(exc)} "
                                 "(kidata check lists every unreadable file)") from None
            self._con, self._con_state, self._con_views = con, state, set()
            return con
        raise AssertionError("unreachable")

    def sql(self, query: str, params: dict[str, Any] | list | None = None, *,
            read_only: bool = False) -> duckdb.DuckDBPyRelation:
        """Run SQL over the tables and views; returns a DuckDB relation (``.pl()``,
        ``.arrow()``, ``.fetchall()``). Errors become :class:`QueryError` with DuckDB's text.
        With ``read_only``, statements that could write are refused
        (:mod:`kidata.query.readonly`)."""
        views = views_mod.needed(query)
        con = self._ready(views)
        if read_only:
            from kidata.query import readonly

            readonly.check(con, query)
        for attempt in range(SWAP_RETRIES):
            try:
                return con.sql(query, params=params)
            except duckdb.IOException as exc:
                # As in _ready(): a folder swapped by a compaction while the query was being
                # planned. Planning again lists the new files. (Once rows are being fetched,
                # such an error reaches the caller, who may run the query again.)
                if attempt == SWAP_RETRIES - 1:
                    raise QueryError(str(exc)) from None
                self._con_state = None
                con = self._ready(views)
            except duckdb.Error as exc:
                raise QueryError(str(exc)) from None
        raise AssertionError("unreachable")

    def relation(self, name: str) -> duckdb.DuckDBPyRelation:
        """A table or view by name."""
        if name not in self.names():
            raise NoSuchView(name, list(self.names()))
        return self.sql(f"SELECT * FROM {views_mod.quote_identifier(name)}")

    def rejects(self, load_id: str | None = None, file: str | None = None
                ) -> duckdb.DuckDBPyRelation:
        """Rejected records, oldest load first: when, which load, file, position, field and
        reason (``raw`` holds the record's text). Narrowed to one load or one input file; a
        load id that names no committed load raises :class:`NoSuchLoad`."""
        if load_id is not None and not self.sql(
                "SELECT 1 FROM loads WHERE load_id = $id", {"id": load_id}).fetchall():
            raise NoSuchLoad(load_id)
        return self.sql(
            "SELECT loaded_at, load_id, source_file, position, field, reason, raw FROM rejects "
            "WHERE ($load_id IS NULL OR load_id = $load_id) "
            "AND ($file IS NULL OR source_file = $file) "
            "ORDER BY loaded_at, load_id, source_file, length(position), position",
            {"load_id": load_id, "file": file})

    def rejects_not_kept(self, load_id: str | None = None) -> list[tuple[str, int]]:
        """``(load_id, count)`` of the loads that rejected more records than they kept in
        ``rejects`` (beyond ``KIDATA_MAX_REJECTS``), oldest first."""
        if not any(self.table_files("loads")):
            return []
        try:
            return self.sql(
                "SELECT load_id, rejects_not_kept FROM loads WHERE rejects_not_kept > 0 "
                "AND ($load_id IS NULL OR load_id = $load_id) ORDER BY loaded_at, load_id",
                {"load_id": load_id}).fetchall()
        except QueryError:  # only loads older than the column: none was capped
            return []

    def check(self, repair: bool = False):
        """Verify the warehouse on disk; see :func:`kidata.store.verify.check`."""
        from kidata.store.verify import check

        return check(self, repair=repair)

    def compact(self, tables: list[str] | None = None):
        """Merge each table's small files; see :func:`kidata.store.compaction.compact`."""
        from kidata.store.compaction import compact

        return compact(self, tables)

    def records(self):
        """The warehouse's runs as kernelindex bundles; see :func:`kidata.query.bundles.bundles`."""
        from kidata.query.bundles import bundles

        return bundles(self)

    def info(self) -> dict[str, Any]:
        """Tables with row and file counts, sources, GPUs and the time range of the runs."""
        tables = {}
        for table in COLUMNS:
            count = self.sql(f"SELECT count(*) FROM {table}").fetchall()[0][0]
            tables[table] = {"rows": count, "files": len(self.table_files(table))}
        sources = self.sql("SELECT coalesce(source, '(none)'), count(*) FROM runs "
                           "GROUP BY 1 ORDER BY 1").fetchall()
        gpus = self.sql("SELECT gpu, count(*) FROM runs GROUP BY 1 ORDER BY 1").fetchall()
        lo, hi = self.sql("SELECT min(observed_at), max(observed_at) FROM runs").fetchall()[0]
        return {
            "warehouse": str(self.path),
            "tables": tables,
            "sources": dict(sources),
            "gpus": dict(gpus),
            "observed_from": lo,
            "observed_to": hi,
        }


# A file whose modification time is this close to when it was hashed may have changed again
# within the same clock tick: its stat is not trusted (git's "racy" rule).
RACY_NS = 2_000_000_000


def fingerprint(path: str, known: dict[str, Any] | None = None
                ) -> tuple[int, str, int, int] | None:
    """Size, SHA-256, modification time and when it was hashed, of a file's bytes; None when
    it cannot be read. When ``known`` (what a past load noted of the same path) has the same
    size and modification time, hashed well after that time, the file is taken as unchanged
    without reading it, as git and make do."""
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            if (known is not None and known.get("mtime_ns") == st.st_mtime_ns
                    and known.get("size") == st.st_size
                    and st.st_mtime_ns < known.get("hashed_at", 0) - RACY_NS):
                return st.st_size, known["sha256"], st.st_mtime_ns, known["hashed_at"]
            hashed_at = time.time_ns()
            digest = hashlib.file_digest(fh, "sha256").hexdigest()
            return st.st_size, digest, st.st_mtime_ns, hashed_at
    except OSError:
        return None


def _first_line(exc: BaseException) -> str:
    """DuckDB's message without the SQL excerpt it appends (the views' own SQL)."""
    return str(exc).split("\n\nLINE ", 1)[0].strip()


def _fetch_unlocked(con: duckdb.DuckDBPyConnection, sql: Callable[[], str],
                   params: dict[str, Any] | None = None) -> list[tuple]:
    """The rows of a query over table folders read without the writer lock: when a compaction
    swapped a folder between listing and reading it, the query (``sql()``) is made again."""
    for attempt in range(SWAP_RETRIES):
        try:
            return con.sql(sql(), params=params).fetchall()
        except duckdb.IOException:
            if attempt == SWAP_RETRIES - 1:
                raise
    raise AssertionError("unreachable")


def _tiebreak(table: str) -> str:
    """Order of a record's rows within the record (one record gives several measurements or
    parameters): by their key, so the row order of every file is the same for the same
    input, however the staging files were split."""
    return ", ".join(f"s.{views_mod.quote_identifier(k)}" for k in KEYS[table])


def _fsync_dirs(root: Path, relative_files: list[str]) -> None:
    for folder in sorted({(root / f).parent for f in relative_files}):
        if folder.exists():
            durable.fsync_dir(folder)
