"""Read a source: detect a file's format and hand it to that format's reader.

Every reader yields :class:`Item` (one record as kernelindex documents, with its position in
the file) or :class:`~kidata.errors.RecordError` (a record that could not be read). Readers
never raise for bad records, so one bad record never stops the good ones.

This package's ``__init__`` is the dispatch (:func:`detect`, :func:`formats`,
:func:`read_file`); the primitives every reader shares (limits, :class:`Item`, :class:`Lines`,
opening files, reading lines) are in :mod:`kidata.ingest.readers.base`, re-exported here for
callers. Format modules import ``base``, never this package, so no import circle is left.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

from kidata.errors import RecordError, UnknownFormat
from kidata.ingest.readers.base import (
    HEAD_BYTES,
    INT_RANGE,
    MAX_DEPTH,
    MAX_RECORD_BYTES,
    Gunzip,
    Item,
    Lines,
    NotRegularFile,
    Overlong,
    Reader,
    Rows,
    expand_paths,
    file_kind,
    internal_error,
    iter_blocks,
    iter_lines,
    nesting_depth,
    open_binary,
    raw_text,
)

__all__ = ["INT_RANGE", "MAX_DEPTH", "MAX_RECORD_BYTES", "Gunzip", "Item", "Lines",
           "NotRegularFile", "Overlong", "Reader", "Rows", "detect", "expand_paths", "file_kind",
           "formats", "iter_blocks", "iter_lines", "nesting_depth", "open_binary", "raw_text",
           "read_file"]


def formats() -> dict[str, Any]:
    """Every format's reading function by its ``--format`` name (the registry's
    :class:`Reader` objects are :data:`kidata.ingest.readers.field.READERS`)."""
    from kidata.ingest.readers.field import READERS

    return {name: reader.read for name, reader in READERS.items()}


def detect(head: bytes) -> str:
    """Name the format of a file from its first bytes."""
    text = head.lstrip(b"\xef\xbb\xbf").lstrip()
    first_line = text.split(b"\n", 1)[0].strip().lower()
    if first_line.startswith(b"kernel_name,") or (b"kernel_name" in first_line
                                                   and b"," in first_line
                                                   and not first_line.startswith((b"{", b"["))):
        return "liger-csv"
    from kidata.ingest.readers.field import detect as detect_field

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


def check_format(fmt: str | None) -> None:
    """Raise :class:`UnknownFormat` unless ``fmt`` is None (detect) or a ``--format`` name."""
    from kidata.ingest.readers.field import READERS

    if fmt is not None and fmt not in READERS:
        raise UnknownFormat(fmt, sorted(READERS))


def read_file(path: str, fmt: str | None = None, batch_lines: int | None = None,
              fingerprint: dict[str, Any] | None = None,
              settings: dict[str, str] | None = None, mapping: str | None = None,
              batch_rows: int | None = None, reader_of: dict[str, Any] | None = None
              ) -> Iterator[Item | RecordError | Lines | Rows]:
    """Yield the records of one file, detecting its format unless ``fmt`` names one.

    With ``batch_lines``, the records of a JSON Lines file come as :class:`Lines` of that many
    lines, still to be parsed (:meth:`Lines.items`); with ``batch_rows``, the rows of a Liger
    CSV as :class:`Rows` of that many, still to be converted
    (:func:`~kidata.ingest.readers.liger.convert_rows`); everything else comes as records. Once
    the file is read to its end, ``fingerprint`` (if given) receives ``size``, ``sha256``,
    ``mtime_ns`` and ``hashed_at`` of exactly the bytes read (not of a second open, which
    may find another file by then); it stays empty for standard input and for a file read by
    a mapping (such a file is read again by every load, which adds nothing twice).
    ``settings`` (``--set key=value``) supply what the field's formats lack; ``mapping`` (a
    TOML mapping file, :mod:`kidata.ingest.mapping`) reads the file by that mapping instead.
    ``reader_of`` (if given) receives ``reader``: the :class:`Reader` the file was read with
    (none for a mapping or a file that could not be opened)."""
    from kidata.ingest.readers.field import READERS

    if mapping is not None:
        from kidata.ingest.mapping import read_with_mapping

        yield from read_with_mapping(mapping, path, settings)
        return
    check_format(fmt)
    name = "<stdin>" if path == "-" else path
    try:
        stream = open_binary(path)
    except NotRegularFile as exc:
        yield RecordError(name, "file", None, str(exc))
        return
    except OSError as exc:
        yield RecordError(name, "file", None, f"cannot open: {exc.strerror or exc}")
        return
    with stream:
        try:
            head = stream.peek(HEAD_BYTES)[:HEAD_BYTES] if hasattr(stream, "peek") else b""
        except (OSError, EOFError) as exc:
            yield RecordError(name, "file", None, f"cannot read: {exc}")
            return
        reader = READERS[fmt or detect(head)]
        if reader_of is not None:
            reader_of["reader"] = reader
        try:
            yield from _records(reader, stream, name, settings, batch_lines, batch_rows)
        except (OSError, EOFError) as exc:  # a read error in the middle of the file
            yield RecordError(name, "file", None, f"cannot read the rest of the file: {exc}")
        except Exception as exc:  # the reader's own failure on this input: the load goes on
            yield internal_error(name, "file", "the rest of this file", exc)
        yield from _gunzip_problem(stream, name)
        if fingerprint is not None:
            _fingerprint(stream, fingerprint)


def _records(reader: Reader, stream: IO[bytes], name: str, settings: dict[str, str] | None,
             batch_lines: int | None, batch_rows: int | None
             ) -> Iterator[Item | RecordError | Lines | Rows]:
    """The file's records by ``reader``; kernelindex and Liger CSV in batches when asked."""
    if batch_lines and reader.name == "kernelindex":
        from kidata.ingest.readers import kernelindex

        return kernelindex.read(stream, name, batch_lines=batch_lines)
    if batch_rows and reader.name == "liger-csv":
        from kidata.ingest.readers import liger

        return liger.read(stream, name, batch_rows=batch_rows)
    return reader.records(stream, name, settings)


def _gunzip_problem(stream: IO[bytes], name: str) -> Iterator[RecordError]:
    """The reject for a gzip file's damaged or truncated end, if it has one."""
    gunzip = getattr(stream, "kidata_gunzip", None)
    if gunzip is not None and gunzip.problem is not None:
        error = RecordError(name, f"line {gunzip.lines + 1}" if gunzip.rest else "file",
                            None, gunzip.problem)
        error.raw = raw_text(gunzip.rest) if gunzip.rest else None  # type: ignore
        yield error


def _fingerprint(stream: IO[bytes], fingerprint: dict[str, Any]) -> None:
    """Fill ``fingerprint`` with what the hashing stream saw, once read to its end; left empty
    for standard input, or when the file cannot vouch for what was read."""
    source = getattr(stream, "kidata_source", None)
    if source is None:
        return
    try:
        size, sha256, mtime_ns, hashed_at = source.finish()
    except OSError:
        return  # not vouched for: read again next time
    fingerprint.update(size=size, sha256=sha256, mtime_ns=mtime_ns, hashed_at=hashed_at)
