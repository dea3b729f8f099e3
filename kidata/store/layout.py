"""Every path under a warehouse, named in one place.

::

    <warehouse>/<table>/part-<load>.parquet      a load's rows of one table (the committed data)
    <warehouse>/loads/part-<load>.parquet        the load's commit marker (kidata.store.snapshot)
    <warehouse>/_kidata/                         kidata's private folder: what makes a warehouse
    <warehouse>/_kidata/layout.json              the warehouse's layout number (absent: layout 1)
    <warehouse>/_kidata/lock                     writer lock (one commit or compaction at a time)
    <warehouse>/_kidata/journal/<load>.json      commits whose files are being moved into place
    <warehouse>/_kidata/staging/<load>/          files of a load in progress (owner.lock inside)
    <warehouse>/_kidata/staging/<load>/<table>.parquet       a big table's rows in final form,
    <warehouse>/_kidata/staging/<load>/<table>.seq.parquet   and their staging-only columns
    <warehouse>/_kidata/staging/<load>/final/    the load's final files, before their rename
    <warehouse>/_kidata/staging/<load>/final/enriched-<table>-<n>.parquet
                                                 a stored file rewritten with a load's richer rows
    <warehouse>/_kidata/staging/<load>/spill/    where the load's commit spills beyond its memory
    <folder>/.<file>.sort/                       sorted chunks of a runs or latest_runs file being
                                                 written (beside it; gone before it is used)
    <warehouse>/<reference>/reference.parquet    a reference table (gpus, dtypes, …): one file
    <warehouse>/_kidata/files/<load>.json        the input files a load read in full (skip list)
    <warehouse>/_kidata/compact/<name>/          work folders of commits other than loads
                                                 (compaction, repair, reference tables)
    <warehouse>/_kidata/compact/<name>/<table>/  a table's next folder, exchanged with the table's
    <warehouse>/_kidata/compact/<name>/<table>/compacted-<name>.parquet   its new file (witness)

The names are the on-disk format that warehouses written by earlier versions keep: change none of
them. Code elsewhere asks a :class:`Layout` for a path instead of joining names itself.

:data:`CURRENT_LAYOUT` numbers that format. ``layout.json`` (``{"layout": N, "written_by":
"kidata X.Y.Z"}``) says which one a warehouse is in; warehouses written by kidata 0.1-0.2.7 have
none and are layout 1. kidata reads warehouses up to :data:`CURRENT_LAYOUT`, writes the
current one (its writer lock upgrades an older warehouse first: :mod:`kidata.store.upgrade`) and
refuses newer ones (:func:`kidata.store.commit.check_layout`). Raise it when a change would
make an older kidata misread or damage a warehouse (a new journal entry, a new file or column
readers must honour, a renamed path), never for a change older versions handle as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PRIVATE = "_kidata"
# The layout this kidata reads and writes: the names here and what the files under them hold.
# 1: every warehouse kidata wrote from 0.1 to 0.3.13 (later versions kept every name and
# read what earlier ones wrote).
# 2: kidata 0.3.14: a run's document is in run_documents, no longer in its runs row (older
# versions would read runs without documents). kidata.store.upgrade takes a warehouse from 1.
# 3: kidata 0.3.15: step_context holds every step whole, read when every load is covered
# (older versions read its rows as fingerprinted contexts, and fail on the new ones).
CURRENT_LAYOUT = 3
LAYOUT_FILE = "layout.json"
LOCK = "lock"
# How long a writer (load, compaction, check) waits for the writer lock, in seconds.
LOCK_TIMEOUT = 600.0
JOURNAL = "journal"
STAGING = "staging"
FILES = "files"
COMPACT = "compact"
OWNER_LOCK = "owner.lock"
FINAL = "final"
SPILL = "spill"
REFERENCE_FILE = "reference.parquet"
# A staging folder is created under this prefix and renamed once its owner lock is held.
NEW_STAGING_PREFIX = ".new-"
PARQUET_GLOB = "*.parquet"
# Temporary files of atomic writes in table folders (kidata.store.durable.write_atomic).
TEMP_GLOB = ".*.tmp"


def part_name(load_id: str) -> str:
    """The file name of one load's rows in a table folder."""
    return f"part-{load_id}.parquet"


def staged_glob(table: str) -> str:
    """The staged files of ``table`` in a staging folder (written by kidata.ingest.stage)."""
    return f"{table}-*.parquet"


def staged_name(table: str, tag: str) -> str:
    """One staged file of ``table``; ``tag`` tells the writer and batch apart."""
    return f"{table}-{tag}.parquet"


def direct_file(staging: Path, table: str) -> Path:
    """The rows of ``table`` a load stages already in final form (kidata.store.finalize)."""
    return staging / f"{table}.parquet"


def direct_sidecar(staging: Path, table: str) -> Path:
    """The staging-only columns (``_seq``, …) of :func:`direct_file`'s rows, row for row."""
    return staging / f"{table}.seq.parquet"


@dataclass(frozen=True)
class Layout:
    """The paths of the warehouse at :attr:`root`."""

    root: Path

    @property
    def private(self) -> Path:
        return self.root / PRIVATE

    @property
    def layout_file(self) -> Path:
        """The warehouse's layout number (``{"layout": N, "written_by": …}``); absent in
        warehouses written by kidata 0.1-0.2.7, which are layout 1."""
        return self.private / LAYOUT_FILE

    def layout_temp(self, tag: str) -> Path:
        """A private temporary name :attr:`layout_file` is written under before it is linked
        into place (``tag`` makes it the writer's own)."""
        return self.private / f".{LAYOUT_FILE}.{tag}.tmp"

    @property
    def lock(self) -> Path:
        return self.private / LOCK

    @property
    def journals(self) -> Path:
        return self.private / JOURNAL

    def journal(self, load_id: str) -> Path:
        return self.journals / f"{load_id}.json"

    @property
    def staging(self) -> Path:
        return self.private / STAGING

    @property
    def files(self) -> Path:
        """Folder of the per-load manifests of input files read in full."""
        return self.private / FILES

    def files_manifest(self, load_id: str) -> Path:
        return self.files / f"{load_id}.json"

    @property
    def compact(self) -> Path:
        """The folder of the work folders of commits other than loads (named for compaction,
        its first user, in warehouses written by 0.2)."""
        return self.private / COMPACT

    def work(self, name: str) -> Path:
        """The work folder where a commit other than a load prepares its files."""
        return self.compact / name

    def next_table(self, work: Path, table: str) -> Path:
        """The next folder of ``table`` a commit prepares in its work folder ``work``, to be
        exchanged with the table's folder in one step (kidata.store.commit.replace_tables)."""
        return work / table

    def table(self, table: str) -> Path:
        return self.root / table

    def reference_file(self, table: str) -> Path:
        """The one file of a reference table (``gpus``, ``dtypes``, …; kidata.store.reference)."""
        return self.table(table) / REFERENCE_FILE

    def part(self, table: str, load_id: str) -> Path:
        return self.table(table) / part_name(load_id)

    def part_relative(self, table: str, load_id: str) -> str:
        """:meth:`part` relative to the warehouse, as a commit journal lists it."""
        return f"{table}/{part_name(load_id)}"

    def marker(self, load_id: str) -> Path:
        """The load's row in ``loads``: written last, it makes the load visible."""
        return self.part("loads", load_id)

    def table_files(self, table: str) -> list[Path]:
        return sorted(self.table(table).glob(PARQUET_GLOB))

    def created(self) -> tuple[str, ...]:
        """The folders (relative to the root) a warehouse's first load creates, in order."""
        return (PRIVATE, f"{PRIVATE}/{JOURNAL}", f"{PRIVATE}/{STAGING}")


def prepared_layout(work: Path) -> Path:
    """A new ``layout.json`` prepared in a commit's work folder (an upgrade's), before the
    commit renames it over the warehouse's."""
    return work / LAYOUT_FILE


def owner_lock(staging: Path) -> Path:
    """The lock a load holds on its staging folder while it lives."""
    return staging / OWNER_LOCK


def final_folder(staging: Path) -> Path:
    return staging / FINAL


def final_file(staging: Path, table: str) -> Path:
    return final_folder(staging) / f"{table}.parquet"


def spill_folder(staging: Path) -> Path:
    """Where DuckDB spills while a load in ``staging`` commits (beyond its memory limit)."""
    return staging / SPILL


def sort_spill(file: Path) -> Path:
    """Where the rows of ``file`` wait, sorted in chunks, while it is written in order
    (kidata.store.pqwrite.Clustered): a folder beside it, removed before the file is used."""
    return file.with_name(f".{file.name}.sort")


def enriched_file(final: Path, table: str, n: int) -> Path:
    """The ``n``-th stored file of ``table`` rewritten with the richer rows a load brings, in
    the load's :func:`final_folder` ``final``."""
    return final / f"enriched-{table}-{n}.parquet"


def witness_name(name: str) -> str:
    """The new file of a table's next folder in the commit ``name``: only the next folder holds
    it, so where it is tells whether the exchange happened (kidata.store.commit)."""
    return f"compacted-{name}.parquet"
