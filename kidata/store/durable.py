"""File-system primitives the commit protocol is built on: durable writes, atomic swaps, and
the fault hook the crash tests use.

Everything kidata makes visible in a warehouse appears by one atomic step of the file system:
a ``rename`` of a complete, fsync'd file (loads), or an exchange of two folders (compaction).
See ``docs/guarantees.md``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import signal
import sys
from pathlib import Path

from kidata.core import config
from kidata.errors import WarehouseError


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``path`` so that it either keeps its old content or has all of ``data``, durably:
    write a temporary file, fsync it, rename it over ``path``, fsync the folder. The temporary
    file is hidden and ends in ``.tmp`` (``.<name>.tmp``): no ``*.parquet`` glob of a reader sees
    it, ``kidata check`` knows it as the leftover of an interrupted write, and the next writer's
    recovery removes it."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_file(path: Path) -> None:
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


def fsync_dir(folder: Path) -> None:
    """Make the names in ``folder`` (created, renamed, removed) durable."""
    if sys.platform == "win32":  # no directory handles to fsync on Windows
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- atomic exchange of two folders ----------------------------------------------------------

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2  # linux/fs.h
_RENAME_SWAP = 2  # macOS sys/stdio.h (renamex_np)


def _libc():
    name = ctypes.util.find_library("c")
    return ctypes.CDLL(name, use_errno=True)


def exchange(a: Path, b: Path) -> None:
    """Atomically swap the names of two folders on one file system: afterwards ``a`` holds
    what ``b`` held and the other way round, and no process ever sees either name missing.

    Uses ``renameat2(RENAME_EXCHANGE)`` on Linux and ``renamex_np(RENAME_SWAP)`` on macOS.
    Raises :class:`WarehouseError` where neither exists (or the file system refuses)."""
    try:
        libc = _libc()
        if sys.platform.startswith("linux"):
            fn = libc.renameat2
            fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                           ctypes.c_uint]
            rc = fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
        elif sys.platform == "darwin":
            fn = libc.renamex_np
            fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint]
            rc = fn(os.fsencode(a), os.fsencode(b), _RENAME_SWAP)
        else:
            raise AttributeError
    except (AttributeError, OSError):
        raise WarehouseError(
            "this platform has no atomic folder exchange (Linux renameat2 or macOS "
            "renamex_np), which compaction needs so that readers never see a table "
            "half-swapped") from None
    if rc != 0:
        code = ctypes.get_errno()
        if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
            raise WarehouseError(
                f"the file system holding {b} cannot exchange folders atomically "
                f"({os.strerror(code)}); compaction needs it so that readers never see a "
                "table half-swapped")
        raise OSError(code, os.strerror(code), str(a), None, str(b))


# -- fault injection for the crash tests ------------------------------------------------------

class InjectedFault(WarehouseError):
    """Raised at a fault point named by ``KIDATA_FAULT`` (tests only)."""


def fault(point: str) -> None:
    """A named point in a commit or compaction where the crash tests interrupt kidata.

    ``KIDATA_FAULT=<point>`` selects the point; ``KIDATA_FAULT_ACTION`` says what happens
    there: ``raise`` (default; an exception, as a bug or a failing disk would raise),
    ``enospc`` (an ``OSError`` "No space left on device") or ``kill`` (SIGKILL to this
    process: a crash, a power cut for the purposes of ordering)."""
    settings = config.current()
    if settings.fault != point:
        return
    action = settings.fault_action
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if action == "enospc":
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), f"<fault {point}>")
    raise InjectedFault(f"injected fault at {point}")
