"""The readers' primitives: what every format module builds on, and nothing that knows a
format (that is the dispatch in :mod:`kidata.ingest.readers`, which imports the format modules;
they import only this module, so no import circle runs through the package).

Limits (:data:`MAX_RECORD_BYTES`, :data:`INT_RANGE`, :data:`MAX_DEPTH`), the record types
(:class:`Item`, :class:`Lines`, :class:`Rows`, :class:`Overlong`), what a registered reader is
(:class:`Reader`), opening files (plain, gzip,
stdin, hashed as read: :func:`open_binary`; the context files beside them, bounded:
:func:`read_regular_head`), reading lines and blocks (:func:`iter_lines`,
:func:`iter_blocks`), listing paths (:func:`expand_paths`) and :func:`raw_text`.
"""

from __future__ import annotations

import errno
import fnmatch
import glob
import hashlib
import io
import itertools
import os
import reprlib
import stat
import sys
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kidata.errors import RecordError, UsageError

# A single record larger than this is rejected unread, so one huge line cannot exhaust memory.
MAX_RECORD_BYTES = 16 * 1024 * 1024
# The integers kidata keeps exactly (orjson's: it reads wider ones as floats, and cannot write
# them); records holding others are rejected (docs/guarantees.md).
INT_RANGE = (-(2**63), 2**64 - 1)
# The bytes of a file its format is told from (kidata.ingest.readers.detect).
HEAD_BYTES = 1 << 16
# orjson writes (and kidata stores) documents nested at most this deep; it reads up to 1,024.
MAX_DEPTH = 254

# How a reject message shows a value of the input: a few levels, items and characters of it.
# A plain repr() of a list nested ~1,000 deep (JSON readers take up to 1,024) recursed past
# Python's limit and crashed the load instead of rejecting the record.
_SHOWN = reprlib.Repr()  # keyword arguments only from Python 3.12
_SHOWN.maxlevel, _SHOWN.maxlist, _SHOWN.maxdict, _SHOWN.maxtuple = 3, 4, 4, 4
_SHOWN.maxstring, _SHOWN.maxother, _SHOWN.maxlong = 60, 60, 40


def shown(value: Any, width: int = 80) -> str:
    """``value`` as a reject message shows it: its ``repr``, at most three levels, four items
    a container and ``width`` characters; never a recursion, however deep ``value`` is."""
    text = _SHOWN.repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."


# The words that tell a reject made of kidata's own failure (internal_error) from one of the
# input's: the fuzzers fail on them.
BUG = "a bug in kidata"


def internal_error(file: str, position: str, what: str, exc: BaseException) -> RecordError:
    """The reject that stands for ``exc``, an exception kidata itself raised on a record or a
    file (``what``: "this record", "the rest of this file") where a reject naming the field
    was due: the load goes on without it instead of ending with a traceback, and says it is
    :data:`BUG` to report. Under ``KIDATA_DEBUG`` it raises ``exc`` again, traceback and all."""
    from kidata.core import config

    if config.current().debug:
        raise exc
    reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if len(reason) > 300:
        reason = reason[:297] + "..."
    return RecordError(file, position, None,
                       f"kidata failed to read {what} ({reason}); this is {BUG}: please "
                       "report it with the input")


def nesting_depth(value: Any) -> int:
    """Containers nested in ``value``, itself included (iterative: values may be ~1,024 deep)."""
    best, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            best = max(best, level)
            stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict)
                                                  else item))
    return best


def deep_field(value: Any, steps: int = 6) -> str | None:
    """The path to the first container nested beyond :data:`MAX_DEPTH`: its first ``steps``
    steps, then ``…`` (a path 255 steps long says nothing more)."""
    heights = _heights(value)
    path: list[str] = []
    depth = 1
    while depth <= MAX_DEPTH:
        children = (list(value.items()) if isinstance(value, dict)
                    else list(enumerate(value)) if isinstance(value, list) else [])
        deep = next(((k, v) for k, v in children if heights.get(id(v), 0) + depth > MAX_DEPTH),
                    None)
        if deep is None:
            break
        key, value = deep
        path.append(f"[{key}]" if isinstance(key, int) else f".{key}")
        depth += 1
    text = "".join(path[:steps]).lstrip(".") + ("…" if len(path) > steps else "")
    return text or None


def _heights(value: Any) -> dict[int, int]:
    """:func:`nesting_depth` of every container in ``value``, by ``id``, in one pass (walking
    down a 5,000-deep record asking each level's depth anew was quadratic: 0.6 s a record)."""
    heights: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        item, done = stack.pop()
        if not isinstance(item, dict | list):
            continue
        children = item.values() if isinstance(item, dict) else item
        if done:
            heights[id(item)] = 1 + max((heights[id(c)] for c in children
                                         if isinstance(c, dict | list)), default=0)
        else:
            stack.append((item, True))
            stack.extend((c, False) for c in children if isinstance(c, dict | list))
    return heights


@dataclass(frozen=True)
class Reader:
    """One format kidata reads, registered as an object (:data:`kidata.ingest.readers.field.
    READERS`): its name (``--format``), what ``kidata formats`` says of it, and the reading
    function itself, so that a format's name leads to its code without an import string.
    ``settings``: whether ``read`` takes the load's ``--set`` context as a third argument (the
    field's formats and mappings do; kernelindex, Liger CSV and trainkernel do not)."""

    name: str
    title: str
    supplies: str
    lacks: str
    read: Callable[..., Iterator[Any]]
    settings: bool = True

    def records(self, stream: IO[bytes], file: str,
                settings: dict[str, str] | None = None) -> Iterator[Any]:
        """The file's records, one at a time (:class:`Item` or :class:`RecordError`)."""
        if self.settings:
            return self.read(stream, file, settings)
        return self.read(stream, file)


@dataclass
class Item:
    """One record read from a file, as kernelindex documents.

    ``docs`` maps a role (``run``, ``protocol``, ``environment``, ``workload``,
    ``implementation``) to a document. ``title`` is a bundle's title line, if any.
    """

    file: str
    position: str
    docs: dict[str, Any]
    raw: str | None = None
    title: str | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass
class Lines:
    """Lines of a JSON Lines file, read but not yet parsed. :func:`read_file` yields these
    instead of items when asked for ``batch_lines``, so a load can parse and check them in
    worker processes; :meth:`items` gives exactly the records the reader would have yielded.

    The lines are either listed, ``(number, line)`` each (a line as read, or an
    :class:`Overlong`), or, cheaper to read and to pass to a worker, one block of whole
    lines as read (``data``: newline-separated, the last one may lack its newline) whose first
    line is number ``first``. :meth:`numbered` lists either."""

    file: str
    title: str | None
    lines: list[tuple[int, Any]] = field(default_factory=list)
    data: bytes = b""
    first: int = 0

    # How many lines, when the reader knows it already (None: counted when asked).
    known_count: int | None = field(default=None, repr=False, compare=False)

    @property
    def count(self) -> int:
        """How many lines, blank ones included (counted once: a pass over the block)."""
        if self.known_count is None:
            self.known_count = (self.data.count(b"\n") + (not self.data.endswith(b"\n"))
                                if self.data else len(self.lines))
        return self.known_count

    def numbered(self) -> list[tuple[int, Any]]:
        """``(number, line)`` of every line (in a block, without its newline)."""
        if not self.data:
            return self.lines
        parts = self.data.split(b"\n")
        if not parts[-1]:
            parts.pop()
        return list(zip(itertools.count(self.first), parts, strict=False))


@dataclass
class Rows:
    """Rows of a CSV file, read (split into fields) but not yet converted into records: the
    :class:`Lines` of a CSV format. :func:`read_file` yields these instead of records when
    asked for ``batch_rows`` (Liger-Kernel's CSV), so that a load can convert and check them
    in worker processes. ``context`` is what the format's reader knows of the file (its
    header, column index and name; picklable), ``rows`` the reader's entries, in order (one
    per data row or per row that could not be read; the format module converts them: for
    Liger, :func:`kidata.ingest.readers.liger.convert_rows`)."""

    file: str
    context: Any
    rows: list[tuple]

    @property
    def count(self) -> int:
        """How many entries (each becomes one record or one reject)."""
        return len(self.rows)


def expand_paths(paths: Iterable[str], skipped: list[str] | None = None,
                 unreadable: list[RecordError] | None = None) -> list[str]:
    """Files, folders (recursively, sorted) and globs to a list of files; ``-`` is stdin.

    Only regular files are listed from folders and globs: FIFOs, devices, sockets, broken
    symlinks and symlink loops are left out, each with a line in ``skipped`` (a warning of
    the load). A folder that cannot be listed is a :class:`RecordError` in ``unreadable``
    (a reject of the load). A path named as such is listed whatever it is (reading a
    non-regular one is refused with a reject, :func:`read_file`). Symlinks to folders are
    followed, each real folder once: a loop ends where it would come back."""
    skipped = [] if skipped is None else skipped
    unreadable = [] if unreadable is None else unreadable
    out: list[str] = []
    for p in paths:
        if p == "-":
            out.append(p)
            continue
        if any(ch in p for ch in "*?["):
            matches = _glob(p, skipped, unreadable)
            if not matches:
                raise UsageError(f"no files match {p!r}")
            found: list[str] = []
            seen: set[tuple[int, int]] = set()
            for m in matches:
                if os.path.isdir(m):
                    found.extend(_walk(m, seen, skipped, unreadable))
                else:
                    found.extend(_regular([m], skipped))
            out.extend(dict.fromkeys(found))  # `**` matches folders and the files in them
            continue
        path = Path(p)
        if path.is_dir():
            out.extend(_walk(p, set(), skipped, unreadable))
        elif path.exists():
            out.append(str(path))
        else:
            raise UsageError(f"no such file or folder: {p}")
    return out


def _regular(paths: list[str], skipped: list[str]) -> list[str]:
    """The regular files among ``paths`` (symlinks followed); the rest noted in ``skipped``."""
    out = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError as exc:
            what = ("a symlink loop" if exc.errno == errno.ELOOP
                    else "a broken symlink" if os.path.islink(path)
                    else f"cannot stat it ({exc.strerror})")
            skipped.append(f"skipped {path}: {what}")
            continue
        if stat.S_ISREG(st.st_mode):
            out.append(path)
        elif not stat.S_ISDIR(st.st_mode):
            skipped.append(f"skipped {path}: {file_kind(st.st_mode)}, not a regular file")
    return out


def _walk(top: str, seen: set[tuple[int, int]], skipped: list[str],
          unreadable: list[RecordError]) -> Iterator[str]:
    """The regular files under folder ``top``, as os.walk orders them (a folder's files by
    name, then its subfolders by name), hidden names left out; each real folder once."""
    folders = []
    for path, is_dir in _listing(top, seen, skipped, unreadable):
        if is_dir:  # a symlink to a folder too: a loop is caught by `seen`
            folders.append(path)
        else:
            yield from _regular([path], skipped)
    for path in folders:
        yield from _walk(path, seen, skipped, unreadable)


def _listing(top: str, seen: set[tuple[int, int]], skipped: list[str],
             unreadable: list[RecordError]) -> list[tuple[str, bool]]:
    """``(path, is_folder)`` of folder ``top``'s entries by name, hidden names left out; empty
    when ``top`` was listed before (a symlink loop: said in ``skipped``) or cannot be listed
    (a :class:`RecordError` in ``unreadable``)."""
    try:
        st = os.stat(top)
        key = (st.st_dev, st.st_ino)
        if key in seen:
            skipped.append(f"skipped {top}: a symlink loop (or a second link) to a folder "
                           "already read")
            return []
        seen.add(key)
        with os.scandir(top) as listing:
            return sorted((e.path, _is_dir(e)) for e in listing if not e.name.startswith("."))
    except OSError as exc:
        unreadable.append(RecordError(top, "folder", None,
                                      f"cannot list the folder: {exc.strerror or exc}; its "
                                      "files are not read"))
        return []


def _is_dir(entry: os.DirEntry) -> bool:
    """Whether a folder entry is a folder (or a symlink to one), from the listing itself
    where it can: a stat of a path too long to name fails, and must not hide a folder."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def _glob(pattern: str, skipped: list[str], unreadable: list[RecordError]) -> list[str]:
    """What ``pattern`` matches, sorted. ``**`` (any number of folders) is matched by
    :func:`_walk`, which visits each real folder once: glob.glob follows symlink loops
    without end."""
    if "**" not in pattern:
        return sorted(glob.glob(pattern))
    parts = pattern.split(os.sep)
    first = next(i for i, part in enumerate(parts) if glob.has_magic(part))
    base = os.sep.join(parts[:first]) or ("/" if pattern.startswith(os.sep) else ".")
    rest = parts[first:]
    if not os.path.isdir(base):
        return []
    found = []
    for path in _walk_all(base, set(), skipped, unreadable):
        if _match(rest, os.path.relpath(path, base).split(os.sep)):
            found.append(path if base != "." or pattern.startswith("./") else
                         os.path.relpath(path, base))
    return sorted(found)


def _walk_all(top: str, seen: set[tuple[int, int]], skipped: list[str],
              unreadable: list[RecordError]) -> Iterator[str]:
    """Every path under ``top`` (folders and files, hidden names left out); each real folder
    once."""
    for path, is_dir in _listing(top, seen, skipped, unreadable):
        yield path
        if is_dir:
            yield from _walk_all(path, seen, skipped, unreadable)


def path_matches(pattern: str, relative: str) -> bool:
    """Whether the ``/``-separated ``relative`` path matches the glob ``pattern`` as kidata's
    command line matches globs (``*`` within a folder, ``**`` any number of folders)."""
    return _match(pattern.split("/"), relative.replace(os.sep, "/").split("/"))


def _match(pattern: list[str], parts: list[str]) -> bool:
    """Whether path ``parts`` match glob ``pattern`` parts (``**``: any number of parts)."""
    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(_match(pattern[1:], parts[i:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], pattern[0]) \
        and _match(pattern[1:], parts[1:])


class NotRegularFile(OSError):
    """A path that is not a regular file (a FIFO, a device, a socket): never read, since
    reading it may never end (``/dev/zero``) or wait forever (a FIFO without a writer)."""


_KINDS = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a folder"}


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words (``a FIFO (named pipe)``)."""
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def open_binary(path: str) -> IO[bytes]:
    """Open ``path`` for reading bytes, transparently un-gzipping; ``-`` is stdin.

    Only a regular file is opened (:class:`NotRegularFile` otherwise; checked on the open
    file, so a path swapped for a FIFO after it was listed is refused too). The bytes read
    from a file are hashed as they are read: :func:`read_file` reports what it read, so a
    load's manifest describes exactly those bytes (see
    :meth:`kidata.store.manifest.FileManifest.remember`). A damaged gzip stream ends the data
    at its last complete line instead of raising (:class:`Gunzip`)."""
    source: _Hashing | None = None
    if path == "-":
        raw: IO[bytes] = sys.stdin.buffer
    else:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise NotRegularFile(f"not a regular file: {file_kind(st.st_mode)}; only "
                                     "regular files are read (pipe other input to "
                                     "`kidata load -`)")
            os.set_blocking(fd, True)
            source = _Hashing(os.fdopen(fd, "rb", buffering=0), st)
        except BaseException:
            os.close(fd)
            raise
        raw = source  # type: ignore[assignment]
    # A buffer of HEAD_BYTES: the format is told from what one peek gives (io's default
    # buffer of 8 KiB hid the rest of a one-line trainkernel table of 8-64 KiB from detection).
    buffered = io.BufferedReader(raw, buffer_size=HEAD_BYTES)
    if buffered.peek(2)[:2] == b"\x1f\x8b":
        stream = io.BufferedReader(Gunzip(buffered), buffer_size=HEAD_BYTES)
        stream.kidata_gunzip = stream.raw  # type: ignore[attr-defined]
    else:
        stream = buffered
    stream.kidata_source = source  # type: ignore[attr-defined]
    return stream


def read_regular_head(path: str, limit: int = MAX_RECORD_BYTES) -> tuple[bytes, bool]:
    """The first ``limit`` bytes of the regular file ``path``, and whether it holds more: how
    context files beside an input (a mapping's ``[sidecar]``, FlashInfer's stdout ``.txt``)
    are read, by the rule inputs follow.

    Only a regular file is read (:class:`NotRegularFile` otherwise): checked before opening,
    so a device is never opened, and again on the open file, which is opened without blocking,
    so a path swapped for a FIFO in between cannot make the read wait for a writer. What is
    read is bounded, so a huge (or sparse) file costs at most ``limit`` bytes. A missing file
    raises :class:`FileNotFoundError`, any other failure its :class:`OSError`."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFile(f"not a regular file: {file_kind(st.st_mode)}")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(f"not a regular file: {file_kind(st.st_mode)}")
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        size = 0
        while size <= limit and (chunk := os.read(fd, min(1 << 20, limit + 1 - size))):
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    return data[:limit], len(data) > limit


class _Hashing(io.RawIOBase):
    """A file's bytes as read, hashed (SHA-256) and counted on the way."""

    def __init__(self, fh: io.FileIO, st: os.stat_result):
        self.fh = fh
        self.mtime_ns = st.st_mtime_ns
        self.hashed_at = time.time_ns()
        self.size = 0
        self.hash = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        n = self.fh.readinto(buffer)
        if n:
            self.hash.update(memoryview(buffer)[:n])  # releases the GIL on large chunks
            self.size += n
        return n or 0

    def finish(self) -> tuple[int, str, int, int]:
        """Read what the reader left unread, then ``(size, sha256, mtime_ns, hashed_at)`` of
        every byte of the open file (the one read, whatever the path names by now)."""
        while chunk := self.fh.read(1 << 20):
            self.hash.update(chunk)
            self.size += len(chunk)
        return self.size, self.hash.hexdigest(), self.mtime_ns, self.hashed_at

    def close(self) -> None:
        self.fh.close()
        super().close()


class Gunzip(io.RawIOBase):
    """The data of a gzip stream (one member or several), read from ``raw``.

    Unlike :mod:`gzip`, damage does not lose what came before it: the data ends at the last
    complete line before a truncation or corrupt bytes, and :attr:`problem` says what
    happened (:func:`read_file` reports it as a reject). Bytes after the last member that
    are not gzip (trailing garbage) end the data the same way; zero padding is ignored."""

    def __init__(self, raw: IO[bytes]):
        self.raw = raw
        self.member = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self.pending = bytearray()  # decompressed, not yet handed out
        self.lines = 0  # complete lines handed out or pending
        self.out = 0  # bytes of data handed out or pending
        self.done = False
        self.problem: str | None = None
        self.rest = b""  # the incomplete last line, when the stream was damaged

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        # Only whole lines go out before the end (a line cut by damage must not reach the
        # reader); a line longer than any record may be goes out as it is (the reader skips
        # it), so memory stays bounded whatever the stream holds.
        while not self.done:
            end = self.pending.rfind(b"\n") + 1
            if end or len(self.pending) > MAX_RECORD_BYTES:
                break
            self._more()
        end = len(self.pending) if self.done else (self.pending.rfind(b"\n") + 1
                                                   or len(self.pending))
        n = min(len(buffer), end)
        buffer[:n] = self.pending[:n]
        del self.pending[:n]
        return n

    def _take(self, data: bytes) -> None:
        self.pending += data
        self.out += len(data)
        self.lines += data.count(b"\n")

    def _damaged(self, what: str) -> None:
        """End the data at the last complete line; the rest is :attr:`rest`."""
        cut = self.pending.rfind(b"\n") + 1
        self.rest = bytes(self.pending[cut:])
        del self.pending[cut:]
        self.out -= len(self.rest)
        lost = (f"; the incomplete line {self.lines + 1} after it ({len(self.rest):,} bytes) "
                "is not read" if self.rest else "")
        self.problem = (f"{what} after {self.out:,} bytes of data ({self.lines:,} complete "
                        f"lines, all read){lost}")
        self.done = True

    def _more(self) -> None:
        chunk = self.raw.read(1 << 16)
        if not chunk:
            if not self.member.eof:
                self._take(self.member.flush())
                self._damaged("the gzip data is cut short (a truncated file)")
            self.done = True
            return
        data = chunk
        while data:
            if self.member.eof:  # what follows a complete member: another one, or not gzip
                if not data.strip(b"\0"):
                    return  # zero padding, as gzip tools write and ignore
                if len(data) < 2:
                    data += self.raw.read(1)
                if data[:2] != b"\x1f\x8b":
                    self._damaged("the gzip data is followed by bytes that are not gzip "
                                  "(trailing garbage, not read)")
                    return
                self.member = zlib.decompressobj(16 + zlib.MAX_WBITS)
            try:
                self._take(self.member.decompress(data))
            except zlib.error as exc:
                self._damaged(f"the gzip data is corrupt ({exc})")
                return
            data = self.member.unused_data if self.member.eof else b""


@dataclass
class Overlong:
    """A line longer than the record limit: its first 64 KiB (for ``rejects.raw``) and its
    length; the rest was skipped without being kept in memory."""

    head: bytes
    size: int


def iter_lines(stream: IO[bytes], limit: int = MAX_RECORD_BYTES
               ) -> Iterator[tuple[int, bytes | Overlong]]:
    """Yield ``(line_number, line)`` with 1-based numbers; ``line`` is an :class:`Overlong`
    when the line is longer than ``limit`` bytes."""
    number = 0
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        number += 1
        if len(line) > limit and not line.endswith(b"\n"):
            size = len(line)
            while True:
                more = stream.readline(1 << 20)
                size += len(more)
                if not more or more.endswith(b"\n"):
                    break
            yield number, Overlong(line[:65536], size)
            continue
        yield number, line


def iter_blocks(stream: IO[bytes], number: int, limit: int = MAX_RECORD_BYTES,
                max_lines: int | None = None, size: int = 1 << 20
                ) -> Iterator[tuple[int, bytes | Overlong]]:
    """The rest of ``stream``, from its line ``number`` on, read ``size`` bytes at a time:
    ``(first line's number, block)`` where a block is whole lines (newline-separated; the last
    line of the stream may lack its newline) and at most ``max_lines`` of them, or
    ``(number, Overlong)`` for a line longer than ``limit`` bytes. The same lines, numbers and
    overlong lines as :func:`iter_lines`, without a Python call per line."""
    head = min(65536, limit + 1)  # what iter_lines keeps of an overlong line
    pending = b""  # what was read after the last newline so far
    while True:
        chunk = stream.read(size)
        end = chunk.rfind(b"\n") + 1
        if pending and end:
            # The common case: the whole lines (the one begun in the last read, then this
            # read's up to its last newline) copied once, not joined and then cut (pending
            # holds no newline).
            block, pending = b"".join((pending, memoryview(chunk)[:end])), chunk[end:]
        else:
            data = pending + chunk if pending else chunk
            if not data:
                return
            end = data.rfind(b"\n") + 1
            if not end:  # no line ends in it yet
                if not chunk:  # the end of the stream: the last line, without a newline
                    yield number, (Overlong(data[:head], len(data)) if len(data) > limit
                                   else data)
                    return
                pending = data
                if len(data) > limit:  # a line longer than the limit: skip to its end, unkept
                    skipped, pending = len(data), b""
                    while more := stream.read(size):
                        cut = more.find(b"\n") + 1
                        if cut:
                            skipped, pending = skipped + cut, more[cut:]
                            break
                        skipped += len(more)
                    yield number, Overlong(data[:head], skipped)
                    number += 1
                continue
            block, pending = data[:end], data[end:]
        lines = block.count(b"\n")  # counted once: a pass over every byte read
        yield from _split_block(block, number, limit, max_lines, head, lines)
        number += lines


def _split_block(block: bytes, number: int, limit: int, max_lines: int | None, head: int,
                 lines: int) -> Iterator[tuple[int, bytes | Overlong]]:
    """``block`` (whole lines, ``lines`` of them) as blocks of at most ``max_lines`` lines,
    each overlong line apart; one piece, uncopied, when it needs no cutting (the common
    case)."""
    short = len(block) <= limit + 1  # no line in it can be longer than the limit
    if short and (max_lines is None or lines <= max_lines):
        yield number, block
        return
    run: list[bytes] = []
    first = number
    for line in block[:-1].split(b"\n"):
        if len(line) > limit:
            if run:
                yield first, b"\n".join(run) + b"\n"
                run = []
            yield number, Overlong(line[:head], len(line) + 1)
        else:
            if not run:
                first = number
            run.append(line)
            if max_lines is not None and len(run) >= max_lines:
                yield first, b"\n".join(run) + b"\n"
                run = []
        number += 1
    if run:
        yield first, b"\n".join(run) + b"\n"


def raw_text(data: bytes | str | None, limit: int = 65536) -> str | None:
    """The raw text of a record as kept in ``rejects.raw``: decoded leniently, truncated."""
    if data is None:
        return None
    if isinstance(data, bytes):
        data = data[:limit].decode("utf-8", errors="replace")
    return data[:limit]
