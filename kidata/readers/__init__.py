"""Read a source: open files (plain, gzip, stdin), detect their format, yield records.

Every reader yields :class:`Item` (one record as kernelindex documents, with its position in
the file) or :class:`~kidata.errors.RecordError` (a record that could not be read). Readers
never raise for bad records, so one bad record never stops the good ones.
"""

from __future__ import annotations

import glob
import gzip
import io
import itertools
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kidata.errors import RecordError, UnknownFormat, UsageError

# A single record larger than this is rejected unread, so one huge line cannot exhaust memory.
MAX_RECORD_BYTES = 16 * 1024 * 1024


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

    @property
    def count(self) -> int:
        """How many lines, blank ones included."""
        if self.data:
            return self.data.count(b"\n") + (not self.data.endswith(b"\n"))
        return len(self.lines)

    def numbered(self) -> list[tuple[int, Any]]:
        """``(number, line)`` of every line (in a block, without its newline)."""
        if not self.data:
            return self.lines
        parts = self.data.split(b"\n")
        if not parts[-1]:
            parts.pop()
        return list(zip(itertools.count(self.first), parts, strict=False))

    def items(self) -> Iterator[Item | RecordError]:
        from kidata.readers.kernelindex import parse_lines

        return parse_lines(self)


def formats() -> dict[str, Any]:
    from kidata.readers import kernelindex, liger, trainkernel
    from kidata.readers.field import FORMATS

    return {
        "kernelindex": kernelindex.read,
        "trainkernel": trainkernel.read,
        "liger-csv": liger.read,
        # The field's formats take the load's --set context as a third argument.
        **{name: info.read() for name, info in FORMATS.items()},
    }


def expand_paths(paths: Iterable[str]) -> list[str]:
    """Files, folders (recursively, sorted) and globs to a list of files; ``-`` is stdin."""
    out: list[str] = []
    for p in paths:
        if p == "-":
            out.append(p)
            continue
        if any(ch in p for ch in "*?["):
            matches = sorted(glob.glob(p, recursive=True))
            if not matches:
                raise UsageError(f"no files match {p!r}")
            for m in matches:
                out.extend(expand_paths([m]) if os.path.isdir(m) else [m])
            continue
        path = Path(p)
        if path.is_dir():
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                out.extend(str(Path(root) / f) for f in sorted(files) if not f.startswith("."))
        elif path.exists():
            out.append(str(path))
        else:
            raise UsageError(f"no such file or folder: {p}")
    return out


def open_binary(path: str) -> IO[bytes]:
    """Open ``path`` for reading bytes, transparently un-gzipping; ``-`` is stdin."""
    raw: IO[bytes] = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115
    buffered = io.BufferedReader(raw) if not isinstance(raw, io.BufferedReader) else raw
    if buffered.peek(2)[:2] == b"\x1f\x8b":
        if path == "-":
            gz = gzip.GzipFile(fileobj=buffered)
        else:
            # Opened by name so that closing the reader closes the file too.
            buffered.close()
            gz = gzip.open(path, "rb")
        return io.BufferedReader(gz, buffer_size=1 << 16)  # type: ignore[arg-type]
    return buffered


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
        data = pending + chunk if pending else chunk
        if not data:
            return
        end = data.rfind(b"\n") + 1
        if not end:  # no line ends in it yet
            if not chunk:  # the end of the stream: the last line, without a newline
                yield number, Overlong(data[:head], len(data)) if len(data) > limit else data
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
        yield from _split_block(block, number, limit, max_lines, head)
        number += block.count(b"\n")


def _split_block(block: bytes, number: int, limit: int, max_lines: int | None, head: int
                 ) -> Iterator[tuple[int, bytes | Overlong]]:
    """``block`` (whole lines) as blocks of at most ``max_lines`` lines, each overlong line
    apart; one piece, uncopied, when it needs no cutting (the common case)."""
    short = len(block) <= limit + 1  # no line in it can be longer than the limit
    if short and (max_lines is None or block.count(b"\n") <= max_lines):
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


def detect(head: bytes) -> str:
    """Name the format of a file from its first bytes."""
    text = head.lstrip(b"\xef\xbb\xbf").lstrip()
    first_line = text.split(b"\n", 1)[0].strip().lower()
    if first_line.startswith(b"kernel_name,") or (b"kernel_name" in first_line
                                                   and b"," in first_line
                                                   and not first_line.startswith((b"{", b"["))):
        return "liger-csv"
    from kidata.readers.field import detect as detect_field

    found = detect_field(text)
    if found:
        return found
    if _is_trainkernel_table(text):
        return "trainkernel"
    return "kernelindex"


def _is_trainkernel_table(text: bytes) -> bool:
    """A trainkernel results table is one JSON object with a top-level ``held_out`` key.

    Decided on the parsed top level, never by searching the text: a kernelindex record may carry
    "held_out" as a label key or value (converted trainkernel runs do). A table too large to
    parse from the first 64 KiB is read as kernelindex, which names its keys in the error;
    ``--format trainkernel`` reads it.
    """
    import orjson

    if not text.startswith(b"{"):
        return False
    for candidate in (text, text.split(b"\n", 1)[0]):
        try:
            value = orjson.loads(candidate)
        except orjson.JSONDecodeError:
            continue
        return isinstance(value, dict) and "held_out" in value and "kind" not in value \
            and "run" not in value
    return False


def read_file(path: str, fmt: str | None = None, batch_lines: int | None = None,
              settings: dict[str, str] | None = None, mapping: str | None = None
              ) -> Iterator[Item | RecordError | Lines]:
    """Yield the records of one file, detecting its format unless ``fmt`` names one.

    With ``batch_lines``, the records of a JSON Lines file come as :class:`Lines` of that many
    lines, still to be parsed (:meth:`Lines.items`); everything else comes as records.
    ``settings`` (``--set key=value``) supply what the field's formats lack; ``mapping`` (a
    TOML mapping file, :mod:`kidata.mapping`) reads the file by that mapping instead."""
    from kidata.readers.field import FORMATS

    if mapping is not None:
        from kidata.mapping import read_with_mapping

        yield from read_with_mapping(mapping, path, settings)
        return
    readers = formats()
    if fmt is not None and fmt not in readers:
        raise UnknownFormat(fmt, sorted(readers))
    name = "<stdin>" if path == "-" else path
    try:
        stream = open_binary(path)
    except OSError as exc:
        yield RecordError(name, "file", None, f"cannot open: {exc.strerror or exc}")
        return
    with stream:
        try:
            head = stream.peek(65536)[:65536] if hasattr(stream, "peek") else b""
        except (OSError, EOFError) as exc:
            yield RecordError(name, "file", None, f"cannot read: {exc}")
            return
        chosen = fmt or detect(head)
        try:
            if batch_lines and chosen == "kernelindex":
                from kidata.readers import kernelindex

                yield from kernelindex.read(stream, name, batch_lines=batch_lines)
            elif chosen in FORMATS:
                yield from readers[chosen](stream, name, settings)
            else:
                yield from readers[chosen](stream, name)
        except (OSError, EOFError) as exc:  # e.g. a truncated gzip stream
            yield RecordError(name, "file", None, f"cannot read the rest of the file: {exc}")
