"""How to read the files of a results folder, said once in the folder: ``kidata.toml``.

A folder of mixed sources (Liger's CSV beside nvbench files from three GPUs) needs other
``--format``, ``--set`` and ``--mapping`` values per file; ``--set`` applies to every file of a
load, so such a folder took one load per file. A ``kidata.toml`` at the top of a folder given
to ``kidata load`` says them per glob::

    [[files]]
    glob = "nvbench/*1650.csv"        # relative to this folder; ** for any depth of folders
    set = { gpu = "GTX 1650" }        # --set values for these files
    format = "nvbench"                # optional: --format
    mapping = "team_mapping.toml"     # optional: --mapping, relative to this folder

    [[files]]
    glob = "flashinfer/*.txt"         # sidecars, notes: not inputs
    skip = true

A file takes the first entry whose glob matches it; a file no entry matches is read as
without the file. What the command line gives wins over the folder's file: ``--format`` and
``--mapping`` for every file, ``--set`` key by key. The file itself is not an input. Every
value is checked before anything is read, as the command line's are: a bad file is a usage
error naming the file and the field (``docs/formats.md``, "A folder's kidata.toml").
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from kidata.errors import KidataError, UsageError

FILE_NAME = "kidata.toml"
ENTRY_KEYS = ("glob", "format", "set", "mapping", "skip")


@dataclass(frozen=True)
class Entry:
    """One ``[[files]]`` entry: the files its glob matches are read with its values."""

    glob: str
    format: str | None
    settings: dict[str, str] | None
    mapping: str | None  # joined to the folder
    skip: bool = False  # the files are not inputs (sidecars, notes)


@dataclass(frozen=True)
class FolderSettings:
    """A folder's ``kidata.toml``, checked."""

    folder: str
    file: str
    entries: tuple[Entry, ...]

    def entry_for(self, path: str) -> Entry | None:
        """The first entry whose glob matches ``path`` (a file under :attr:`folder`)."""
        from kidata.ingest.readers.base import path_matches

        relative = os.path.relpath(path, self.folder)
        if relative.startswith(".." + os.sep):
            return None
        return next((e for e in self.entries if path_matches(e.glob, relative)), None)


def find(folder: str) -> FolderSettings | None:
    """The checked ``kidata.toml`` at the top of ``folder``, None when it has none."""
    file = os.path.join(folder, FILE_NAME)
    if not os.path.isfile(file):
        return None
    try:
        data = tomllib.loads(Path(file).read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{file}: cannot read the folder's settings: {exc}") from None
    unknown = sorted(set(data) - {"files"})
    if unknown:
        raise UsageError(f"{file}: unknown key(s) {', '.join(unknown)}; the file holds "
                         "[[files]] entries (docs/formats.md, \"A folder's kidata.toml\")")
    entries = data.get("files", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise UsageError(f"{file}, field files: expected [[files]] entries")
    return FolderSettings(folder, file, tuple(_entry(e, i, folder, file)
                                              for i, e in enumerate(entries)))


def _entry(raw: dict, index: int, folder: str, file: str) -> Entry:
    from kidata.ingest.readers import check_format
    from kidata.ingest.readers.builder import Settings

    where = f"{file}, field files[{index}]"
    for key in raw:
        if key not in ENTRY_KEYS:
            raise UsageError(f"{where}.{key}: unknown key; an entry has {', '.join(ENTRY_KEYS)}")
    skip = raw.get("skip", False)
    if not isinstance(skip, bool):
        raise UsageError(f"{where}.skip: expected true or false, got {skip!r}")
    if skip and len(raw) > 2:
        raise UsageError(f"{where}: an entry with skip = true reads no file, so it takes no "
                         f"{', '.join(k for k in raw if k not in ('glob', 'skip'))}")
    pattern = raw.get("glob")
    if not isinstance(pattern, str) or not pattern.strip() or pattern.startswith("/") \
            or ".." in pattern.split("/"):
        raise UsageError(f"{where}.glob: expected a glob relative to {folder}, such as "
                         f"'liger/*.csv', got {pattern!r}")
    fmt = raw.get("format")
    if fmt is not None:
        if not isinstance(fmt, str):
            raise UsageError(f"{where}.format: expected a format name, got {fmt!r}")
        try:
            check_format(fmt)
        except UsageError as exc:
            raise UsageError(f"{where}.format: {exc}") from None
    settings = raw.get("set")
    if settings is not None:
        if not isinstance(settings, dict) or not all(
                isinstance(v, str | int | float) and not isinstance(v, bool)
                for v in settings.values()):
            raise UsageError(f"{where}.set: expected a table of key = value, such as "
                             "{ gpu = \"H100 SXM\", unit = \"ms\" }")
        from kidata.ingest.readers.builder import LOAD_FACTS

        facts = [k for k in settings if k in LOAD_FACTS]
        if facts:
            raise UsageError(f"{where}.set.{facts[0]}: a fact of the whole load, not of some "
                             f"files: give it on the command line (--set {facts[0]}=...)")
        try:
            settings = dict(Settings.of({k: str(v) for k, v in settings.items()}))
        except UsageError as exc:
            raise UsageError(f"{where}.set: {exc}") from None
    mapping = raw.get("mapping")
    if mapping is not None:
        if not isinstance(mapping, str) or not mapping.strip():
            raise UsageError(f"{where}.mapping: expected the path of a mapping file")
        from kidata.ingest.mapping import load_mapping

        mapping = os.path.join(folder, mapping)
        try:
            load_mapping(mapping)
        except KidataError as exc:
            raise UsageError(f"{where}.mapping: {exc}") from None
    return Entry(pattern, fmt, settings or None, mapping, skip)


def read_as(files: list[str], folders: list[FolderSettings], fmt: str | None,
            settings: dict[str, str] | None, mapping: str | None
            ) -> tuple[list[str], dict[str, tuple[str | None, dict[str, str] | None,
                                                 str | None]]]:
    """The files to read (the folders' own ``kidata.toml`` and the files an entry skips left
    out), and ``{file: (format, settings, mapping)}`` for those an entry speaks of, the
    command line's values winning (``--set`` key by key)."""
    own = {os.path.normpath(f.file) for f in folders}
    kept: list[str] = []
    out = {}
    for path in files:
        if os.path.normpath(path) in own:
            continue
        entry = next((e for f in folders if (e := f.entry_for(path)) is not None), None)
        if entry is not None and entry.skip:
            continue
        kept.append(path)
        if entry is None:
            continue
        merged = {**(entry.settings or {}), **(settings or {})}
        out[path] = (fmt or entry.format, merged or None, mapping or entry.mapping)
    return kept, out
