"""One error hierarchy for kidata. The CLI turns any of these into ``Error: …`` and exit 1."""

from __future__ import annotations


class KidataError(Exception):
    """Base class of every error kidata raises on purpose."""


class UsageError(KidataError):
    """The caller asked for something that cannot be done as asked (bad option, unknown name)."""


class NoSuchView(UsageError):
    def __init__(self, name: str, known: list[str], closest: list[str] | None = None):
        guess = ("did you mean " + " or ".join(repr(c) for c in closest) + "? "
                 if closest else "")
        super().__init__(
            f"no table or view named {name!r}; {guess}known: {', '.join(sorted(known))}"
        )
        self.name = name


class NoSuchLoad(UsageError):
    def __init__(self, load_id: str):
        super().__init__(f"no committed load {load_id!r}; the loads are listed by: "
                         "kidata sql 'select load_id, loaded_at, rejected from loads'")
        self.load_id = load_id


class UnknownFormat(UsageError):
    def __init__(self, fmt: str, allowed: list[str], what: str = "format"):
        super().__init__(f"unknown {what} {fmt!r}; allowed {what}s are: {', '.join(allowed)}")
        self.format = fmt


class QueryError(KidataError):
    """A SQL query failed; the message is DuckDB's."""


class WarehouseError(KidataError):
    """The warehouse folder is missing, locked, or not a kidata warehouse."""


class LoadRefused(WarehouseError):
    """A load's own check found that what it was about to commit disagrees with what it read
    (runs twice, runs without their measurements, counts that do not add up): nothing was
    committed. A defect of kidata, never of the input: the message says what disagreed."""

    def __init__(self, load_id: str, disagreements: list[str]):
        super().__init__(f"load {load_id} refused to commit, the warehouse is unchanged: what it "
                         "staged disagrees with what it read (" + "; ".join(disagreements)
                         + "). This is a kidata bug: please report it with the input files")
        self.load_id = load_id
        self.disagreements = disagreements


class NotAWarehouse(WarehouseError, UsageError):
    """A command that reads a warehouse was pointed at a folder that is not one (a mistyped
    ``-w``, a file): bad usage, so that a check in CI fails instead of reading nothing."""

    def __init__(self, path: object, why: str):
        super().__init__(f"{path} is not a kidata warehouse ({why}); check --warehouse / "
                         f"$KIDATA_WAREHOUSE, or create one with: kidata load FILE...")
        self.path = path


class RecordError(KidataError):
    """One input record is invalid. Names the file, the record and the field.

    ``position`` is human readable: ``line 3``, ``row 12``, ``index 0``, ``document``.
    ``field`` is a dotted path into the record (``run.spec.timing.latencyNs.median``) or a
    column name for CSV input.
    """

    def __init__(self, file: str, position: str, field: str | None, message: str):
        self.file = file
        self.position = position
        self.field = field
        self.reason = message
        where = f"{file}, {position}"
        if field:
            where += f", field {field}"
        super().__init__(f"{where}: {message}")


class NewerLayout(WarehouseError, UsageError):
    """The warehouse is in a layout newer than this kidata knows (``_kidata/layout.json``,
    :mod:`kidata.store.layout`): it is neither read nor written, since an older kidata could
    misread it or undo what it does not understand. Bad usage (exit 2): upgrade kidata."""

    def __init__(self, path: object, layout: int, known: int, version: str,
                 written_by: str | None = None):
        by = f", written by {written_by}" if written_by else ""
        super().__init__(f"the warehouse {path} has layout {layout}{by}; this kidata "
                         f"{version} knows layouts up to {known} and neither reads nor writes "
                         "a newer one (nothing was changed): upgrade kidata")
        self.path = path
        self.layout = layout
        self.known = known
