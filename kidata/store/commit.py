"""The commit: the one way a change becomes visible in a warehouse, all or nothing.

Every writer (a load, compaction, ``kidata check --repair``, the reference tables' refresh)
holds the writer lock (:func:`writer_lock`), which first finishes what dead writers left
(:func:`recover`, :func:`roll_forward`), and makes its change through a :class:`Transaction`:
files prepared out of sight, the journal written as the commit point, then renames (or a
folder exchange, :func:`replace_table`) applied in order.

A load's commit (:class:`kidata.store.load_commit.LoadCommit`) prepares its files and commits
them in one transaction, the marker last. See ``docs/architecture.md`` ("The commit protocol in one
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
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from kidata.errors import NewerLayout, WarehouseError
from kidata.store import durable
from kidata.store.durable import fault
from kidata.store.layout import (
    CURRENT_LAYOUT,
    LOCK_TIMEOUT,
    NEW_STAGING_PREFIX,
    TEMP_GLOB,
    Layout,
    owner_lock,
    witness_name,
)
from kidata.store.schema import COLUMNS

if TYPE_CHECKING:
    from filelock import FileLock

# filelock (~0.05 s: it imports asyncio) is imported where a lock is taken: a query never takes
# one (tests/cli/test_startup.py).

# A staging folder still being created this long after a crash is removed by the next writer.
STALE_NEW_STAGING = 3600.0


def ensure(root: Path) -> None:
    """Create the warehouse's folders at ``root`` if missing (what a first load does), and its
    layout file. Every writer passes here first (a load before it stages, every other writer
    through :func:`writer_lock`): a warehouse of a newer layout than this kidata knows is
    refused (:class:`NewerLayout`) before anything is created or changed. A warehouse without
    the file (written by kidata 0.1-0.2.7: layout 1) is given one."""
    if root.exists() and not root.is_dir():
        raise WarehouseError(f"{root} exists and is not a folder")
    check_layout(root)
    layout = Layout(root)
    try:
        for sub in (*layout.created(), *COLUMNS):
            (root / sub).mkdir(parents=True, exist_ok=True)
        if not layout.layout_file.exists():
            # A warehouse holding data without the file was written by kidata 0.1-0.2.7:
            # layout 1, until the writer lock upgrades it (kidata.store.upgrade).
            _write_layout(layout, 1 if layout.table_files("runs") else CURRENT_LAYOUT)
    except OSError as exc:
        raise WarehouseError(f"cannot write to the warehouse {root}: {exc}") from None


_LAYOUT_MAX = 64 * 1024


def check_layout(root: Path) -> int:
    """The layout of the warehouse at ``root`` (``_kidata/layout.json``; 1 when it has none, as
    warehouses written by kidata 0.1-0.2.7 have not). Raises :class:`NewerLayout` when it is
    newer than this kidata knows (:data:`~kidata.store.layout.CURRENT_LAYOUT`), and
    :class:`WarehouseError` naming the file when it cannot be read as a layout. Other keys are
    ignored: a later kidata may add some."""
    path = Layout(root).layout_file
    try:
        with open(path, "rb") as fh:
            data = fh.read(_LAYOUT_MAX + 1)  # a warehouse's files are input: read a bound
    except (FileNotFoundError, NotADirectoryError):  # no file, or no _kidata/ folder yet
        return 1
    except OSError as exc:
        raise WarehouseError(f"cannot read the warehouse layout file {path}: {exc}") from None
    why = 'not a JSON object with an integer "layout" of 1 or more'
    try:
        entry = json.loads(data) if len(data) <= _LAYOUT_MAX else None
    except ValueError as exc:  # also invalid UTF-8
        entry, why = None, f"not JSON: {exc}"
    if len(data) > _LAYOUT_MAX:
        why = f"larger than {_LAYOUT_MAX:,} bytes"
    number = entry.get("layout") if isinstance(entry, dict) else None
    if type(number) is not int or number < 1:
        raise WarehouseError(f"the warehouse layout file {path} is malformed ({why}); kidata "
                             f"neither reads nor writes {root} until it holds "
                             f'{{"layout": N, ...}}')
    if number > CURRENT_LAYOUT:
        from kidata import __version__

        by = entry.get("written_by")
        # Shown to a terminal: only a short, printable name (a warehouse's files are input).
        by = by if isinstance(by, str) and len(by) <= 80 and by.isprintable() else None
        raise NewerLayout(root, number, CURRENT_LAYOUT, __version__, by)
    return number


def layout_bytes(number: int) -> bytes:
    """The text of a ``layout.json`` saying layout ``number``, written by this kidata."""
    from kidata import __version__

    return json.dumps({"layout": number, "written_by": f"kidata {__version__}"}).encode() + b"\n"


def _write_layout(layout: Layout, number: int) -> None:
    """Give the warehouse its layout file, complete and durable, unless one is there by now:
    the file is written under a name of this writer's own and linked into place, which never
    replaces a file another writer put there meanwhile (a concurrent first load, or a newer
    kidata's layout, which must never be overwritten by an older number)."""
    tmp = layout.layout_temp(secrets.token_hex(4))
    try:
        with open(tmp, "xb") as fh:
            fh.write(layout_bytes(number))
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, layout.layout_file)
        except FileExistsError:
            return  # another writer's, as good as ours (or newer: the next check refuses it)
        except OSError:  # no hard links on this file system: a rename, unless one is there
            if layout.layout_file.exists():
                return
            os.replace(tmp, layout.layout_file)
        durable.fsync_dir(layout.private)
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def writer_lock(root: Path) -> Iterator[list[str]]:
    """Hold the writer lock (one commit or compaction at a time), after finishing what
    dead writers left (:func:`recover`); yields what the recovery did, one line each.
    (:meth:`kidata.Warehouse.writer_lock`, which every writer takes, then upgrades a
    warehouse of an older layout: :mod:`kidata.store.upgrade`.)"""
    from filelock import FileLock, Timeout

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
        # Again under the lock: a newer kidata may have upgraded the warehouse while this
        # writer waited for it, and recovery must not roll its journals.
        check_layout(root)
        yield recover(root)
    finally:
        lock.release()


def recover(root: Path) -> list[str]:
    """Complete (or, if a file it needs is gone, undo) every commit that stopped after its
    journal was written; remove the staging folders of dead loads and the work folders of
    other dead commits. Called with the writer lock held; returns one line per thing done."""
    from filelock import FileLock, Timeout

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


_ID_TIME = "%Y%m%dT%H%M%S%fZ"


def new_id() -> str:
    """A fresh, sortable name for a load or another commit (time, then random)."""
    return datetime.now(UTC).strftime(_ID_TIME) + "-" + secrets.token_hex(4)


def started_at(name: str) -> datetime:
    """When the load or commit ``name`` (a :func:`new_id`) started: the time it begins with; a
    load's ``loaded_at``. (A name not made by :func:`new_id`, as in tests staging into any
    folder, gives the present time.)"""
    try:
        return datetime.strptime(name.split("-", 1)[0], _ID_TIME).replace(tzinfo=UTC)
    except ValueError:
        return datetime.now(UTC)


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
    # The folders whose names changed: those files were renamed into, and the parents of
    # both exchanged folders (the table's in the warehouse, the work folder).
    _fsync_dirs(root, [dst for _, dst in moves] + [name for p, f, _ in exchanges
                                                   for name in (p, f)])


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
    outside = _unconfined(root, moves, exchanges)
    if outside:
        # A journal is input like any other file of a shared or mailed warehouse: one that
        # names a path outside the places a commit may touch is refused, nothing moved.
        raise WarehouseError(f"commit journal {journal} names {outside!r}, outside the places a "
                             "kidata commit prepares (_kidata/staging, _kidata/compact) or "
                             "changes (a table's folder); refused, nothing was moved. Move "
                             "the journal aside and run `kidata check`")
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


def _unconfined(root: Path, moves: list, exchanges: list) -> str | None:
    """The first path a journal names that a commit could not have written: a prepared file
    or folder outside ``_kidata/staging/`` and ``_kidata/compact/``, a target other than a
    Parquet file directly in a table's folder (or a table's folder, for an exchange) or the
    layout file (an upgrade's), a
    witness that is not a plain file name, or anything that resolves (through ``..`` or a
    symbolic link) outside the warehouse. None when every path is confined."""
    real = root.resolve()
    layout = Layout(root)
    prepared_in = [layout.staging.resolve(), layout.compact.resolve()]
    tables = {layout.table(t).resolve() for t in COLUMNS}

    def inside(path: str, under: list[Path]) -> bool:
        if not isinstance(path, str) or not path or os.path.isabs(path):
            return False
        resolved = (root / path).resolve()
        return resolved.is_relative_to(real) and any(
            resolved != base and resolved.is_relative_to(base) for base in under)

    def in_table(path: str) -> bool:
        if not isinstance(path, str) or not path or os.path.isabs(path):
            return False
        resolved = (root / path).resolve()
        return resolved.parent in tables and resolved.suffix == ".parquet"

    def is_layout_file(path: str) -> bool:  # an upgrade's new layout (kidata.store.upgrade)
        if not isinstance(path, str) or not path or os.path.isabs(path):
            return False
        return (root / path).resolve() == layout.layout_file.resolve()

    try:
        for src, dst in moves:
            if not inside(src, prepared_in):
                return src
            if not in_table(dst) and not is_layout_file(dst):
                return dst
        for prepared, folder, witness in exchanges:
            if not inside(prepared, prepared_in):
                return prepared
            if not isinstance(folder, str) or (root / folder).resolve() not in tables:
                return folder
            if not isinstance(witness, str) or Path(witness).name != witness \
                    or witness in ("", ".", ".."):
                return witness
    except (TypeError, ValueError) as exc:
        return f"a malformed entry ({exc})"
    return None


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
    return replace_tables(root, {table: (write, keep)}, what=what, faults=faults)[table]


def replace_tables(root: Path,
                   tables: dict[str, tuple[Callable[[Path], int], list[Path] | tuple[Path, ...]]],
                   *, what: str, faults: str) -> dict[str, int]:
    """:func:`replace_table` for several tables in one :class:`Transaction`: each table's
    files become the file its ``write`` writes plus its ``keep`` files, all committed by one
    journal (a crash leaves every table old or, once the journal is written, every table
    new). Returns the rows written per table."""
    tx = Transaction(root, what, faults=faults)
    rows: dict[str, int] = {}
    try:
        witness = witness_name(tx.name)
        for table, (write, keep) in tables.items():
            nxt = Layout(root).next_table(tx.work, table)
            nxt.mkdir(parents=True)
            rows[table] = write(nxt / witness)
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
        # Before the commit point: the unfinished next folders; after it: the old generation.
        tx.discard()
    return rows


def new_staging(root: Path, load_id: str) -> tuple[Path, FileLock]:
    """A staging folder owned by this process. The owner lock is taken before the folder
    gets its final name, so :func:`recover` never sees a live load's folder unlocked."""
    from filelock import FileLock

    folder = Layout(root).staging
    fresh = folder / f"{NEW_STAGING_PREFIX}{load_id}"
    fresh.mkdir()
    owner = FileLock(str(owner_lock(fresh)), timeout=0)
    owner.acquire()
    staging = folder / load_id
    os.rename(fresh, staging)
    return staging, owner


def _fsync_dirs(root: Path, relative_files: list[str]) -> None:
    for folder in sorted({(root / f).parent for f in relative_files}):
        if folder.exists():
            durable.fsync_dir(folder)
