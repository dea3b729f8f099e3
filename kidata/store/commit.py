"""The commit: the one way a change becomes visible in a warehouse, all or nothing.

Every writer (a load, compaction, ``kidata check --repair``, the reference tables' refresh)
holds the writer lock (:func:`writer_lock`), which first finishes what dead writers left
(:func:`recover`, :func:`roll_forward`), and makes its change through a :class:`Transaction`:
files prepared out of sight, the journal written as the commit point, then renames (or a
folder exchange, :func:`replace_table`) applied in order.

A load's commit (:class:`LoadCommit`) plans what each staged row becomes (added, duplicate,
conflict, enrich), writes one final file per table and its commit marker, and commits them
in one transaction, the marker last. See ``docs/architecture.md`` ("The commit protocol in one
page") and ``docs/guarantees.md``.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
from filelock import FileLock, Timeout

from kidata.errors import WarehouseError
from kidata.ingest.load_report import LoadReport, Reject, max_kept_rejects
from kidata.query import engine
from kidata.query import views as views_mod
from kidata.store import derived, durable
from kidata.store.durable import fault
from kidata.store.layout import (
    LOCK_TIMEOUT,
    NEW_STAGING_PREFIX,
    TEMP_GLOB,
    Layout,
    final_file,
    final_folder,
    owner_lock,
    staged_glob,
)
from kidata.store.schema import COLUMNS, COMMIT_ORDER, KEYS, REFERENCE

# DuckDB's memory limit while committing a load; beyond it the dedupe spills to disk. The big
# tables are written without a database sort (kidata.ingest.stage.stream_final), so this stays
# small.
COMMIT_MEMORY = os.environ.get("KIDATA_COMMIT_MEMORY", "192MB")
# ... and once the dedupe is done, while the big tables are streamed beside it and latest_runs
# is derived (which needs ~96 MB at 1M runs): DuckDB fills whatever limit it has.
COMMIT_WRITE_MEMORY = os.environ.get("KIDATA_COMMIT_WRITE_MEMORY", "128MB")
# A staging folder still being created this long after a crash is removed by the next writer.
STALE_NEW_STAGING = 3600.0
# Tables whose final file a commit writes straight from the staged files (LoadCommit.commit).
STREAMED = ("measurements", "runs")


# The documents a run points at, by table and digest column: a run's variant is richer the
# more of them the warehouse (or the load) has (LoadCommit._plan_variants).
DOCUMENT_KEYS = {"environments": "environment_id", "protocols": "protocol_id",
                 "workloads": "workload_id", "implementations": "implementation_id"}
# Columns the variants of one run must share to replace one another: what latest_runs and the
# views derive from a run besides its documents. Variants that differ here are duplicates.
VARIANT_SAME = ("kernel", "pass", "implementation", "variant", "workload", "gpu", "metric",
                "protocol_id", "observed_at", "status")


def ensure(root: Path) -> None:
    """Create the warehouse's folders at ``root`` if missing (what a first load does)."""
    if root.exists() and not root.is_dir():
        raise WarehouseError(f"{root} exists and is not a folder")
    try:
        for sub in (*Layout(root).created(), *COLUMNS):
            (root / sub).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WarehouseError(f"cannot write to the warehouse {root}: {exc}") from None


@contextlib.contextmanager
def writer_lock(root: Path) -> Iterator[list[str]]:
    """Hold the writer lock (one commit or compaction at a time), after finishing what
    dead writers left (:func:`recover`); yields what the recovery did, one line each."""
    ensure(root)
    lock = FileLock(str(Layout(root).lock), timeout=LOCK_TIMEOUT)
    try:
        lock.acquire()
    except Timeout:
        raise WarehouseError(f"{root} is locked by another writer for more than "
                             f"{LOCK_TIMEOUT:.0f} s; is a load stuck?") from None
    except OSError as exc:
        raise WarehouseError(f"cannot lock {root} for writing: {exc}") from None
    try:
        yield recover(root)
    finally:
        lock.release()


def recover(root: Path) -> list[str]:
    """Complete (or, if a file it needs is gone, undo) every commit that stopped after its
    journal was written; remove the staging folders of dead loads and the work folders of
    other dead commits. Called with the writer lock held; returns one line per thing done."""
    layout = Layout(root)
    done = [roll_forward(root, journal) for journal in sorted(layout.journals.glob("*.json"))]
    for tmp in layout.journals.glob("*.tmp"):
        tmp.unlink(missing_ok=True)  # a journal that was never complete: never decided
    for staging in layout.staging.iterdir():
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
    # kidata 0.2 wrote reference tables and repaired markers as temporary files in table
    # folders, under the writer lock: one there is the leftover of a killed writer.
    for table in COLUMNS:
        folder = layout.table(table)
        for tmp in folder.glob(TEMP_GLOB) if folder.is_dir() else ():
            tmp.unlink(missing_ok=True)
            done.append(f"removed {table}/{tmp.name}, left by an interrupted write")
    work = layout.compact
    if work.is_dir():  # their commits hold the writer lock throughout: these are dead
        for leftover in work.iterdir():
            shutil.rmtree(leftover, ignore_errors=True)
            done.append(f"removed the leftovers of interrupted commit {leftover.name}")
    return done


class Transaction:
    """One change made visible to readers as a whole: the one way anything in a table folder
    changes (a load's files, a compaction's merged folder, a repair's markers and rewritten
    ``latest_runs``, the reference tables).

    1. Prepare complete files (or a table's next folder) under :attr:`work` and fsync them;
       nothing there is visible to any reader.
    2. Record what goes where: :meth:`add` (a new file), :meth:`replace` (a new version of a
       stored file), :meth:`exchange` (a table's next folder for its current one).
    3. :meth:`commit`: the journal ``_kidata/journal/<name>.json`` is written atomically —
       **the commit point** — then applied in order (renames, then folder exchanges), the
       folders fsync'd and the journal deleted.

    Before the commit point a crash changes nothing (the work folder is removed by the next
    writer); after it, the next writer completes the journal (:func:`roll_forward`), so the
    change is in whole. Call under the writer lock.

    What a reader listing a table folder meanwhile sees: a rename adds or replaces one whole
    file at once; an exchange swaps the whole set of a table's files at once, so replacing
    N files by one (compaction) is never seen half done — the old set or the new, never both,
    never neither. Across tables a reader may see one table changed and not yet the next; for
    loads kidata's snapshot rule (the marker renamed last) hides that.
    """

    def __init__(self, root: Path, what: str, *, work: Path | None = None,
                 load_id: str | None = None, faults: str = ""):
        self.root = root
        self.what = what  # said in messages: "load <id>", "compaction of runs", ...
        self.load_id = load_id
        self.name = load_id or new_id()
        # Loads prepare in their staging folder; the others in a work folder of their own.
        self.work = work if work is not None else Layout(root).work(self.name)
        self.faults = faults  # prefix of this kind of commit's fault points (tests)
        self.moves: list[tuple[str, str]] = []
        self.replaces: list[str] = []
        self.exchanges: list[tuple[str, str, str]] = []

    @property
    def journal(self) -> Path:
        return Layout(self.root).journal(self.name)

    def _relative(self, path: Path) -> str:
        return str(path.resolve().relative_to(self.root.resolve()))

    def add(self, prepared: Path, target: Path) -> None:
        """Rename the complete, fsync'd file ``prepared`` to the new name ``target``."""
        self.moves.append((self._relative(prepared), self._relative(target)))

    def replace(self, prepared: Path, target: Path) -> None:
        """Rename ``prepared`` over the stored file ``target`` (or to it, if missing). Never
        undone: the stored file and its new version are each a whole, valid state."""
        self.add(prepared, target)
        self.replaces.append(self.moves[-1][1])

    def exchange(self, prepared: Path, folder: Path, witness: str) -> None:
        """Swap the folder ``prepared`` (a table's complete next folder) with ``folder`` in one
        atomic step. ``witness`` is a file only the prepared folder holds: where it is tells
        whether the exchange has happened (an exchange done twice would undo itself)."""
        self.exchanges.append((self._relative(prepared), self._relative(folder), witness))

    def commit(self) -> str | None:
        """Write the journal (the commit point) and apply it. Returns None, or a warning when
        applying failed and was completed at once; raises :class:`WarehouseError` when that
        failed too (the next writer completes it)."""
        if not self.moves and not self.exchanges:
            return None
        if self.exchanges:
            probe_exchange(self.root)  # before the commit point: refuse, changing nothing
        for folder in sorted({(self.root / src).parent for src, _ in self.moves}
                             | {(self.root / p).parent for p, _, _ in self.exchanges}):
            durable.fsync_dir(folder)
        fault(f"{self.faults}before-journal")
        journal = self.journal
        durable.write_atomic(journal, json.dumps({
            "load_id": self.load_id, "what": self.what, "moves": self.moves,
            "replaces": self.replaces, "exchanges": self.exchanges}).encode())
        # Commit point: from here on the change is decided and is completed, if not by this
        # process then by the next writer (recover).
        try:
            fault(f"{self.faults}after-journal")
            _apply(self.root, self.moves, self.exchanges, self.faults)
            journal.unlink()
            durable.fsync_dir(journal.parent)
        except Exception as exc:
            try:
                roll_forward(self.root, journal)
            except Exception as again:
                raise WarehouseError(
                    f"{self.what} passed its commit point but could not finish "
                    f"({exc}; then: {again}); the next kidata command that writes to "
                    f"{self.root} will complete it") from exc
            return f"the commit of {self.what} was interrupted ({exc}) and has been completed"
        return None

    def discard(self) -> None:
        """Remove the work folder, unless a journal still needs it (a commit that stopped
        after its commit point: the next writer completes it from there)."""
        if not self.journal.exists():
            shutil.rmtree(self.work, ignore_errors=True)


def new_id() -> str:
    """A fresh, sortable name for a load or another commit (time, then random)."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ") + "-" + secrets.token_hex(4)


def _apply(root: Path, moves: list, exchanges: list, faults: str | None) -> None:
    """Carry out a journal's moves, then its exchanges, and make them durable. ``faults`` is
    the fault-point prefix of a live commit; None when rolling forward (then what is done
    already is skipped, instead of failing)."""
    resume = faults is None
    for src, dst in moves:
        if not resume or (root / src).exists():
            os.replace(root / src, root / dst)
        if not resume:
            fault(f"{faults}after-move:{Path(dst).parent.name}")
    for prepared, folder, witness in exchanges:
        if not (root / folder / witness).exists():
            durable.exchange(root / prepared, root / folder)
        if not resume:
            fault(f"{faults}after-swap:{Path(folder).name}")
    _fsync_dirs(root, [dst for _, dst in moves]
                + [f"{f}/{witness}" for _, f, witness in exchanges]
                + [f"{p}/{witness}" for p, _, witness in exchanges])


def roll_forward(root: Path, journal: Path) -> str:
    """Finish what a journal lists. If a file the commit needs is gone from both places
    (someone deleted it), undo the commit instead, so it is fully out. Reads journals
    written by kidata 0.2 (a load's renames) as well."""
    try:
        entry = json.loads(journal.read_bytes())
        load_id, moves = entry["load_id"], entry["moves"]
        exchanges = entry.get("exchanges", [])
        what = entry.get("what") or f"load {load_id}"
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise WarehouseError(f"commit journal {journal} is unreadable ({exc}); move it "
                             "aside and run `kidata check`") from None
    # Stored files a commit replaces by new versions: never removed by an undo (the
    # stored file and its new version are both a whole, valid state).
    replaces = set(entry.get("replaces", ()))
    lost = [src for src, dst in moves if dst not in replaces
            and not (root / src).exists() and not (root / dst).exists()]
    lost += [f"{prepared}/{witness}" for prepared, folder, witness in exchanges
             if not (root / folder / witness).exists()
             and not (root / prepared / witness).exists()]
    if lost:
        for src, dst in moves:
            if dst in replaces:
                (root / src).unlink(missing_ok=True)
            else:
                (root / dst).unlink(missing_ok=True)
        for prepared, folder, witness in exchanges:
            if (root / folder / witness).exists() and (root / prepared).is_dir():
                durable.exchange(root / prepared, root / folder)  # swap the old set back
        action = f"undid {what}: its staged file {lost[0]} is gone"
    else:
        _apply(root, moves, exchanges, None)
        action = f"completed the interrupted commit of {what}"
    journal.unlink()
    durable.fsync_dir(journal.parent)
    return action


def pending(root: Path) -> list[tuple[str, str | None, str]]:
    """``(name, load_id, what)`` of each commit stopped after its commit point (its journal
    is still there); ``load_id`` is None for commits other than loads. A journal that cannot be
    read is taken for a load's (the worse case)."""
    out = []
    for journal in sorted(Layout(root).journals.glob("*.json")):
        try:
            entry = json.loads(journal.read_bytes())
            load_id = entry["load_id"]
            out.append((journal.stem, load_id, entry.get("what") or f"load {load_id}"))
        except (OSError, ValueError, KeyError, TypeError):
            out.append((journal.stem, journal.stem, f"load {journal.stem}"))
    return out


def probe_exchange(root: Path) -> None:
    """Raise :class:`WarehouseError` unless the warehouse's file system swaps folders
    atomically (tried on two empty folders)."""
    probe = Layout(root).work(f"probe-{secrets.token_hex(4)}")
    try:
        (probe / "a").mkdir(parents=True)
        (probe / "b").mkdir()
        durable.exchange(probe / "a", probe / "b")
    finally:
        shutil.rmtree(probe, ignore_errors=True)


def can_exchange(root: Path) -> bool:
    """Whether :func:`probe_exchange` passes."""
    try:
        probe_exchange(root)
        return True
    except (WarehouseError, OSError):
        return False


def replace_table(root: Path, table: str, write: Callable[[Path], int],
                  keep: list[Path] | tuple[Path, ...] = (), *, what: str,
                  faults: str) -> int:
    """Replace the whole set of ``table``'s files, in one atomic step, by the file ``write``
    writes (it returns the rows written) and the files ``keep``: a :class:`Transaction`
    exchanging the table's folder with its prepared next folder. Call under the writer
    lock."""
    tx = Transaction(root, what, faults=faults)
    nxt = tx.work / table
    try:
        nxt.mkdir(parents=True)
        witness = f"compacted-{tx.name}.parquet"
        rows = write(nxt / witness)
        for path in keep:
            try:
                os.link(path, nxt / path.name)
            except OSError:  # no hard links on this file system: a copy is as good
                shutil.copy2(path, nxt / path.name)
                durable.fsync_file(nxt / path.name)
        durable.fsync_dir(nxt)
        fault(f"{faults}before-swap:{table}")
        tx.exchange(nxt, Layout(root).table(table), witness)
        tx.commit()
    finally:
        # Before the commit point: the unfinished next folder; after it: the old generation.
        tx.discard()
    return rows


def new_staging(root: Path, load_id: str) -> tuple[Path, FileLock]:
    """A staging folder owned by this process. The owner lock is taken before the folder
    gets its final name, so :func:`recover` never sees a live load's folder unlocked."""
    folder = Layout(root).staging
    fresh = folder / f"{NEW_STAGING_PREFIX}{load_id}"
    fresh.mkdir()
    owner = FileLock(str(owner_lock(fresh)), timeout=0)
    owner.acquire()
    staging = folder / load_id
    os.rename(fresh, staging)
    return staging, owner


class LoadCommit:
    """The commit of one load into the warehouse at :attr:`path` (see the module's doc)."""

    def __init__(self, path: Path):
        self.path = path

    @property
    def layout(self) -> Layout:
        return Layout(self.path)

    def table_files(self, table: str) -> list[Path]:
        return self.layout.table_files(table)

    def commit(self, staging: Path, report: LoadReport, strict: bool) -> None:
        """Commit the load staged in ``staging`` (under the writer lock), filling ``report``."""
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
            now = datetime.now(UTC)
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
            if any(staging.glob(staged_glob(table))):
                src = f"SELECT * FROM {views_mod.parquet_source(staging, staged_glob(table))}"
            else:
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
        """Write the final file of a big table (``STREAMED``) straight from the staged files:
        the rows of :meth:`_select_final`, in its order, without sorting them in DuckDB
        (memory stays flat at any load size). None when the staged files cannot be read in
        order (see :func:`kidata.ingest.stage.stream_final`); the caller then asks DuckDB."""
        from kidata.ingest.stage import stream_final
        from kidata.store.schema import TABLES

        order = [k for k in KEYS[table] if table != "runs"]
        constants = {"load_id": load_id, "loaded_at": now}
        count = stream_final(staging, table, keep, TABLES[table], order, constants, path,
                             lambda: fault(f"write-final:{table}"))
        if count:
            durable.fsync_file(path)
        return count


def _tiebreak(table: str) -> str:
    """Order of a record's rows within the record (one record gives several measurements or
    parameters): by their key, so the row order of every file is the same for the same
    input, however the staging files were split."""
    return ", ".join(f"s.{views_mod.quote_identifier(k)}" for k in KEYS[table])


def _fsync_dirs(root: Path, relative_files: list[str]) -> None:
    for folder in sorted({(root / f).parent for f in relative_files}):
        if folder.exists():
            durable.fsync_dir(folder)
