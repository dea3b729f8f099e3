"""What a load reports: counts, rejects and warnings (:class:`LoadReport`).

Kept apart from :mod:`kidata.warehouse` so that the load's worker processes, which fill
reports, do not import DuckDB (16 MB of memory in each).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kidata.core import config

# Rejects and warnings listed in a report (the counts, and the rejects table, keep them all).
MAX_REPORTED = 1000


def max_kept_rejects() -> int:
    """Rejects one load keeps in the rejects table (the first, in input order):
    ``KIDATA_MAX_REJECTS`` if set (at least 1), else 100,000 (:mod:`kidata.core.config`). The
    rest are counted (``loads.rejected``, ``loads.rejects_not_kept``), so that millions of bad
    lines cannot exhaust the commit's memory or the disk."""
    return config.current().max_rejects


@dataclass
class Reject:
    file: str
    position: str
    field: str | None
    reason: str

    def __str__(self) -> str:
        where = f"{self.file}, {self.position}"
        if self.field:
            where += f", field {self.field}"
        return f"{where}: {self.reason}"


class UnknownGpu(str):
    """The warning of one record measured on a GPU the catalog lacks (its text names the
    record). A report lists each such GPU once, with how many records name it and the first
    of them (:meth:`Tally.add_warning`), so a load of 68 rows on one unknown GPU says so once."""

    where: str
    name: str
    key: str

    def __new__(cls, where: str, name: str, key: str) -> UnknownGpu:
        self = super().__new__(cls, f"{where}: unknown GPU {name!r}; loaded under the derived "
                                    f"key {key!r}")
        self.where, self.name, self.key = where, name, key
        return self

    def __reduce__(self) -> tuple:  # to and from worker processes
        return (UnknownGpu, (self.where, self.name, self.key))

    def summary(self, records: int) -> str:
        """The report's one warning for this GPU, named by ``records`` records."""
        return (f"unknown GPU {self.name!r} in {records:,} record{'s' * (records != 1)} (the "
                f"first: {self.where}); loaded under the derived key {self.key!r}, without "
                "peaks. A typo: `kidata unload` the load and load it again with the right "
                "name. A GPU kidata does not know: add it to a GPU file named by $KIDATA_GPUS "
                "(docs/formats.md, \"GPUs kidata does not know\")")


class Tally:
    """Counts rejects and warnings, keeping the first ``MAX_REPORTED`` of each (for reports
    whose dataclass declares ``rejected``, ``rejects``, ``warned``, ``warnings`` and
    ``unknown_gpus``). An unknown GPU is one warning however many records name it."""

    rejected: int
    rejects: list
    warned: int
    warnings: list[str]
    # GPU name -> [records, index of its line in ``warnings`` (-1: not listed), first warning]
    unknown_gpus: dict[str, list]

    @property
    def ok(self) -> bool:
        return self.rejected == 0

    def add_reject(self, reject: Any) -> None:
        self.rejected += 1
        if len(self.rejects) < MAX_REPORTED:
            self.rejects.append(reject)

    def add_warning(self, message: str, records: int = 1) -> None:
        """Count a warning; an :class:`UnknownGpu` once per GPU, its line counting
        ``records`` more records of it."""
        if isinstance(message, UnknownGpu):
            entry = self.unknown_gpus.get(message.name)
            if entry is None:
                self.warned += 1
                listed = len(self.warnings) < MAX_REPORTED
                entry = self.unknown_gpus[message.name] = [
                    0, len(self.warnings) if listed else -1, message]
                if listed:
                    self.warnings.append(message)
            entry[0] += records
            if entry[1] >= 0:
                self.warnings[entry[1]] = entry[2].summary(entry[0])
            return
        self.warned += 1
        if len(self.warnings) < MAX_REPORTED:
            self.warnings.append(message)


@dataclass
class LoadReport(Tally):
    """What a load did. ``rejects`` and ``warnings`` keep the first 1,000 of each; the counts
    and the ``rejects`` table keep them all."""

    load_id: str
    files: int = 0
    records: int = 0
    added: dict[str, int] = field(default_factory=dict)
    duplicates: int = 0
    rejected: int = 0
    rejects: list[Reject] = field(default_factory=list)
    warned: int = 0
    warnings: list[str] = field(default_factory=list)
    unknown_gpus: dict[str, list] = field(default_factory=dict)
    committed: bool = False
    # Records staged by the fast path (kidata/ingest/fast.py); the other ``records`` took the
    # general path (the checker and flattener), which also makes every reject.
    fast_path: int = 0
    # Stored rows replaced by a richer version from this load's duplicates: runs whose record
    # here carries more of its documents, workloads known only by digest until now.
    enriched: int = 0
    # The ids of the runs it enriched (kept for the steps stored after the commit: an enriched
    # run's row keeps the load_id of the load that added it, kidata/store/contexts.py).
    enriched_runs: list[str] = field(default_factory=list)
    # Files not read again: byte-identical to a file this warehouse already loaded in full
    # without rejects or warnings (their records and runs are counted as duplicates).
    unchanged: list[str] = field(default_factory=list)
    # Tables whose small files the load merged after its commit: files before and after
    # (kidata.store.compaction.auto).
    compacted: dict[str, tuple[int, int]] = field(default_factory=dict)
    # Why those tables: the rule that merged them, in words (empty when none was merged).
    compacted_why: str = ""
    # Rejected records beyond max_kept_rejects(): counted, not kept in the rejects table.
    rejects_not_kept: int = 0
    # Runs the load staged (records read, less rejects and documents without a run): what
    # its commit must account for as added, duplicates and conflicts (LoadCommit's check).
    staged_runs: int = 0
    # Facts of the whole load, kept in its marker: commit, branch, ci_run (--set, else CI).
    facts: dict[str, str] = field(default_factory=dict)

    @property
    def runs_added(self) -> int:
        return self.added.get("runs", 0)
