"""Scratch folders of kidata's processes under the system's temporary directory: each DuckDB
connection's spill folder (``duckdb``: :func:`kidata.core.engine.connect`) and the rows a
session keeps (``kept``: :mod:`kidata.query.kept`); ``reading`` is the spill folders of kidata
0.3.20's reading sessions, swept as well.

Each is named ``kidata-<kind>-<process id>-<random>``. DuckDB removes its spill folder when the
connection closes and a session its kept rows when it ends, but a process that is killed does
neither: the next kidata process that makes a scratch folder removes those whose process is
gone (once per process; a process id reused since is left alone, which errs on keeping).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

KINDS = ("reading", "kept", "duckdb")
_swept = False


def name(kind: str) -> str:
    """A new scratch folder's path for ``kind`` (one of :data:`KINDS`), not made: DuckDB makes
    its spill folder when it first spills."""
    sweep()
    return os.path.join(tempfile.gettempdir(),
                        f"kidata-{kind}-{os.getpid()}-{uuid.uuid4().hex[:12]}")


def make(kind: str) -> Path:
    """A new scratch folder for ``kind``, made now."""
    path = Path(name(kind))
    path.mkdir(mode=0o700)
    return path


def sweep() -> None:
    """Remove the scratch folders of kidata processes that no longer run (once per process).
    Not on Windows, where a process cannot be asked whether another is alive without a handle
    to it."""
    global _swept
    if _swept or sys.platform == "win32":
        return
    _swept = True
    try:
        entries = os.scandir(tempfile.gettempdir())
    except OSError:
        return
    with entries:
        for entry in entries:
            parts = entry.name.split("-")
            if (len(parts) < 4 or parts[0] != "kidata" or parts[1] not in KINDS
                    or not parts[2].isdigit()):
                continue
            if _alive(int(parts[2])) or not entry.is_dir(follow_symlinks=False):
                continue
            shutil.rmtree(entry.path, ignore_errors=True)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process (PermissionError): alive
        return True
    return True
