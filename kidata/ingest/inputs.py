"""Read a load's inputs into its staging folder: which files to read (a file read in full by a
past load and unchanged since is skipped, by the warehouse's file manifest), and feeding their
records to the :class:`~kidata.ingest.stage.Stage` (checks, flatten, staged Parquet).

The read → stage half of :meth:`kidata.Warehouse.load`; the commit is
:mod:`kidata.store.load_commit`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

from kidata.core.load_report import LoadReport
from kidata.errors import RecordError
from kidata.ingest.readers import read_file
from kidata.store.manifest import FileManifest, fingerprint


def stage_inputs(root: Path, files: list[str], staging: Path, fmt: str | None, batch: int,
                 report: LoadReport, progress: Callable[[str, int], None] | None,
                 meta: duckdb.DuckDBPyConnection, unreadable: list[RecordError] = (),
                 settings: dict[str, str] | None = None, mapping: str | None = None,
                 per_file: dict[str, tuple[str | None, dict[str, str] | None, str | None]]
                 | None = None) -> list[dict[str, Any]] | None:
    """Stage the records of ``files`` into ``staging`` for the warehouse at ``root`` (and
    ``unreadable``: folders that could not be listed, as rejects), skipping the files a past
    load read in full and that are unchanged since; returns what was read of each file (for
    :meth:`kidata.store.manifest.FileManifest.remember`), or None when every file was
    skipped. ``per_file`` gives some files their own format, settings and mapping (a
    folder's ``kidata.toml``, :mod:`kidata.ingest.folder_settings`)."""
    # Checking and flattening happen in kidata.ingest.stage (in worker processes for large
    # inputs); the result is the same as one pass over the input in order. It is set up
    # when the first file must be read.
    stage = None
    manifest = FileManifest(root)
    loaded = manifest.loaded(meta)
    per_file = per_file or {}
    try:
        if unreadable:
            from kidata.ingest.stage import Stage

            stage = Stage(staging, batch, manifest.existing_environments(meta), report,
                          progress)
            for error in unreadable:
                stage.feed(error, error.file)
        for path in files:
            report.files += 1
            name = "<stdin>" if path == "-" else path
            fmt_of, settings_of, mapping_of = per_file.get(path, (fmt, settings, mapping))
            label = _label(fmt_of, settings_of, mapping_of)
            known = loaded.get((name, label))
            seen = None
            if path != "-" and known is not None:
                # Loaded before under this name: unchanged (same bytes) means skipped.
                print_ = fingerprint(path, known)
                seen = loaded.get((name, *print_[:2], label)) if print_ else None
            if seen is not None and manifest.still_loaded(seen, name, meta):
                # Unchanged since a clean load: reading it again would add nothing.
                report.records += seen["records"]
                report.duplicates += seen["runs"]
                report.unchanged.append(name)
                continue
            if stage is None:
                from kidata.ingest.stage import Stage

                stage = Stage(staging, batch, manifest.existing_environments(meta), report,
                              progress)
            # The manifest describes the bytes this read saw, hashed as they were read:
            # a file replaced meanwhile is not vouched for by the other file's hash.
            got: dict[str, Any] = {}
            read_as: dict[str, Any] = {}
            for unit in read_file(path, fmt_of, batch_lines=stage.batch_lines,
                                  fingerprint=got, settings=settings_of, mapping=mapping_of,
                                  batch_rows=stage.batch_rows, reader_of=read_as):
                stage.feed(unit, name)
            reader = read_as.get("reader")
            if settings_of and reader is not None and not reader.settings:
                # kernelindex, Liger CSV and trainkernel files name their own context: a
                # --set meant for them is said to be unused, never silently dropped.
                report.add_warning(
                    f"{name}: --set {', '.join(sorted(settings_of))} not used: {reader.name} "
                    "files carry their own context (only the field's formats take --set; "
                    "commit, branch and ci_run apply to every file)")
            read_print = ((got["size"], got["sha256"], got["mtime_ns"], got["hashed_at"])
                          if got else None)
            stage.file_done(name, read_print, label)
            if progress is not None:
                progress(name, report.records)
        if stage is None:
            return None
        stage.finish()
        # What the stage handed to the commit, counted here, independently of the staged
        # files: the commit checks its plan and its final files against it (issue 25).
        report.staged_runs = sum(tally.runs for tally in stage.counts.values())
    finally:
        if stage is not None:
            stage.close()
    return stage.summaries()


def _label(fmt: str | None, settings: dict[str, str] | None, mapping: str | None) -> str:
    """How a file is read, for the file manifest: the same file read with other context is
    another input."""
    label = fmt or "auto"
    if settings or mapping:
        from kidata.ingest.readers.builder import Settings

        label += "|" + Settings(settings or {}).label() + (f"|mapping={mapping}"
                                                           if mapping else "")
    return label
