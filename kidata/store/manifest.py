"""What a load knows of the warehouse before it stages: the manifest of input files past loads
read in full (``_kidata/files/<load>.json``, so that unchanged files are skipped), and the
environments stored.

The manifest is only an optimisation, written after a commit: a crash before it costs reading
the files again. See ``docs/guarantees.md``, "Input files and paths".
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import duckdb

from kidata.core.engine import fetch_retrying
from kidata.core.load_report import LoadReport
from kidata.store import durable, snapshot
from kidata.store.layout import Layout
from kidata.store.tablesql import table_sql

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


class FileManifest:
    """The input files past loads of the warehouse at :attr:`path` read in full."""

    def __init__(self, path: Path):
        self.path = path
        self.layout = Layout(path)

    def loaded(self, con: duckdb.DuckDBPyConnection) -> dict[tuple, dict[str, Any]]:
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
            # says so itself (see remember).
            if manifest.stem not in committed and not (
                    entries and all(e.get("load_added_nothing") for e in entries)):
                continue
            for e in entries:
                entry = {**e, "load_id": manifest.stem}
                out[(e["source_file"], e["size"], e["sha256"], e["format"])] = entry
                out[(e["source_file"], e["format"])] = entry  # for the stat check
        return out

    def clean_reads(self) -> list[tuple[str, str]]:
        """``(load_id, file)`` of every file a load read in full with no reject, as its
        manifest notes it (committed or not: :meth:`loaded` decides what is skipped). Used to
        tell which rejects a later read of their file superseded (:meth:`kidata.Warehouse.
        rejects`); a lost manifest only shows more rejects."""
        folder = self.layout.files
        out: list[tuple[str, str]] = []
        for manifest in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                entries = json.loads(manifest.read_bytes())
            except (OSError, ValueError):
                continue
            out += [(manifest.stem, e["source_file"]) for e in entries
                    if isinstance(e, dict) and isinstance(e.get("source_file"), str)]
        return out

    def remember(self, report: LoadReport, files: list[dict[str, Any]]) -> None:
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

    def still_loaded(self, seen: dict[str, Any], name: str,
                      con: duckdb.DuckDBPyConnection) -> bool:
        """Whether the runs the file added are all still there (a file that lost them, say to
        a repair, is read again). The load that added them is committed (see
        :meth:`loaded`), so its rows are read without the snapshot's filter."""
        if not seen["runs_added"]:
            return True
        [(count,)] = fetch_retrying(
            con, lambda: f"SELECT count(*) FROM ({table_sql(self.path, 'runs')}) "
                         "WHERE load_id = $load AND source_file = $file",
            {"load": seen["load_id"], "file": name})
        return count == seen["runs_added"]

    def existing_environments(self, con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
        if not self.layout.table_files("environments"):
            return []
        return fetch_retrying(con, lambda: "SELECT environment_id, gpu FROM "
                               f"({table_sql(self.path, 'environments')})")
