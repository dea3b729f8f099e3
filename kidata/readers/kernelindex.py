"""kernelindex documents: bundles (``{"run": …, "protocol": …, "environment": …}``) and bare
documents of one kind, as one JSON value (object or array, optionally after a title line and a
blank line, as in the seeds) or as JSON Lines (one record per line)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import IO, Any

import orjson

from kidata.errors import RecordError
from kidata.readers import (
    MAX_RECORD_BYTES,
    Item,
    Lines,
    Overlong,
    iter_blocks,
    iter_lines,
    raw_text,
)

API_VERSION = "kernelindex.dev/v1alpha1"
ROLES = {
    "BenchmarkRun": "run",
    "BenchmarkProtocol": "protocol",
    "ExecutionEnvironment": "environment",
    "Workload": "workload",
    "Implementation": "implementation",
}
KINDS = {role: kind for kind, role in ROLES.items()}
# A whole-document (non-JSON-Lines) file is parsed in one piece; beyond this, use JSON Lines.
MAX_DOCUMENT_BYTES = 512 * 1024 * 1024


def to_item(value: Any, file: str, position: str, raw: str | None,
            title: str | None = None) -> Item | RecordError:
    """Classify one parsed JSON value as a bundle or a bare document."""
    if not isinstance(value, dict):
        return RecordError(file, position, None,
                           f"expected a JSON object (a bundle or a document), got {_type(value)}")
    if "kind" in value:
        kind = value["kind"]
        role = ROLES.get(kind) if isinstance(kind, str) else None
        if role is None:
            return RecordError(file, position, "kind",
                               f"unknown kind {kind!r}; expected one of {', '.join(ROLES)}")
        return Item(file, position, {role: value}, raw, title)
    docs = {k: v for k, v in value.items() if k in KINDS}
    if not docs:
        keys = ", ".join(sorted(map(str, value))[:8]) or "none"
        return RecordError(file, position, None,
                           "not a kernelindex bundle or document: expected a 'kind' key or "
                           f"bundle keys run/protocol/environment (found keys: {keys})")
    return Item(file, position, docs, raw, title)


def _looks_like_json_lines(numbered: list[tuple[int, bytes]]) -> bool:
    """Whether a text that is not one JSON value has, after its first line, a line that is a
    complete JSON object (so it is JSON Lines, not a broken pretty-printed document)."""
    for _, line in numbered[1:]:
        stripped = line.strip()
        if stripped[:1] == b"{":
            try:
                return isinstance(orjson.loads(stripped), dict)
            except orjson.JSONDecodeError:
                return False
    return False


def _type(value: Any) -> str:
    return {list: "an array", str: "a string", int: "a number", float: "a number",
            bool: "a boolean", type(None): "null"}.get(type(value), type(value).__name__)


def _json_error(exc: orjson.JSONDecodeError) -> str:
    """Say what is wrong with a JSON text in words a user can act on."""
    where = f"line {exc.lineno} column {exc.colno}"
    doc = exc.doc if isinstance(exc.doc, str) else ""
    ahead = doc[exc.pos:exc.pos + 8]
    token = next((t for t in ("NaN", "Infinity") if ahead.startswith(t)), None)
    if token == "Infinity" and doc[exc.pos - 1:exc.pos] == "-":  # reported after the sign
        token, where = "-Infinity", f"line {exc.lineno} column {exc.colno - 1}"
    if token:
        return (f"invalid JSON: {token} at {where} is not a number JSON allows; expected a "
                "finite number")
    if "infinity when parsed as double" in exc.msg:
        return (f"invalid JSON: the number at {where} is too large for a 64-bit float; "
                "expected a finite number")
    if "depth limit" in exc.msg:
        return f"invalid JSON: nested deeper than 1,024 levels at {where}"
    if "not valid UTF-8" in exc.msg:
        return "invalid JSON: not UTF-8 text"  # orjson cannot say where
    return f"invalid JSON: {exc}"


def _error(file: str, position: str, message: str, raw: bytes | None) -> RecordError:
    """A record-level error that keeps the record's text for ``rejects.raw``."""
    err = RecordError(file, position, None, message)
    err.raw = raw_text(raw)  # type: ignore[attr-defined]
    return err


def _overlong(file: str, number: int, line: Overlong) -> RecordError:
    return _error(file, f"line {number}",
                  f"record of {line.size:,} bytes is longer than the "
                  f"{MAX_RECORD_BYTES // (1024 * 1024)} MiB limit; not read (its first 64 KiB "
                  "are kept in rejects.raw)", line.head)


def read(stream: IO[bytes], file: str, batch_lines: int | None = None
         ) -> Iterator[Item | RecordError | Lines]:
    """The records of a kernelindex file; with ``batch_lines``, the lines of a JSON Lines file
    come unparsed as :class:`~kidata.readers.Lines` of that many lines."""
    lines = iter_lines(stream)
    title: str | None = None
    for number, line in lines:
        if isinstance(line, Overlong):
            yield _overlong(file, number, line)
            if batch_lines:
                yield from _blocks(stream, number + 1, file, None, batch_lines)
            else:
                yield from _json_lines(lines, file)
            return
        if number == 1:
            line = line.removeprefix(b"\xef\xbb\xbf")
        stripped = line.strip()
        if not stripped:
            continue
        if stripped[:1] == b"{":
            try:
                value = orjson.loads(stripped)
            except orjson.JSONDecodeError:
                # Not complete on one line: a pretty-printed document.
                yield from _whole(line, lines, file, title, number)
                return
            if batch_lines:
                # JSON Lines: the first line, parsed here only to tell, goes out with the rest,
                # which is read in blocks from where the lines so far left the stream.
                yield Lines(file, title, [(number, line)])
                yield from _blocks(stream, number + 1, file, title, batch_lines)
                return
            yield to_item(value, file, f"line {number}", raw_text(stripped), title)
            yield from _json_lines(lines, file, title)
            return
        if stripped[:1] == b"[":
            yield from _whole(line, lines, file, title, number)
            return
        if title is not None:
            yield RecordError(file, f"line {number}", None,
                              "expected JSON after the title line, got text: "
                              f"{raw_text(stripped, 80)!r}")
            return
        try:
            title = stripped.decode("utf-8")
        except UnicodeDecodeError:
            yield RecordError(file, f"line {number}", None,
                              "not UTF-8 text: the file is not kernelindex JSON")
            return
        if len(title) > 200:
            yield RecordError(file, f"line {number}", None,
                              "not JSON and too long to be a title line: expected kernelindex "
                              "JSON, JSON Lines, or a title line then JSON")
            return
    if title is not None:
        yield RecordError(file, "document", None, "a title line but no JSON document after it")
    else:
        yield RecordError(file, "document", None, "empty file: no records")


def _blocks(stream: IO[bytes], number: int, file: str, title: str | None,
            batch_lines: int) -> Iterator[Lines]:
    """The rest of a JSON Lines file, from line ``number`` on, as unparsed :class:`Lines`
    of at most ``batch_lines`` lines."""
    for first, block in iter_blocks(stream, number, MAX_RECORD_BYTES, batch_lines):
        if isinstance(block, Overlong):
            yield Lines(file, title, [(first, block)])
        else:
            yield Lines(file, title, data=block, first=first)


def parse_lines(batch: Lines) -> Iterator[Item | RecordError]:
    """The records of lines a reader handed out unparsed (see :func:`read`)."""
    return _json_lines(batch.numbered(), batch.file, batch.title)


def _json_lines(lines: Iterable[tuple[int, bytes | Overlong]], file: str,
                title: str | None = None) -> Iterator[Item | RecordError]:
    for number, line in lines:
        position = f"line {number}"
        if isinstance(line, Overlong):
            yield _overlong(file, number, line)
            continue
        stripped = line.strip()
        if not stripped:
            continue
        try:
            value = orjson.loads(stripped)
        except orjson.JSONDecodeError as exc:
            yield _error(file, position, _json_error(exc), stripped)
            continue
        yield to_item(value, file, position, raw_text(stripped), title)


def _whole(first: bytes, lines: Iterator[tuple[int, bytes | Overlong]], file: str,
           title: str | None, first_number: int) -> Iterator[Item | RecordError]:
    chunks = [first]
    size = len(first)
    for number, line in lines:
        if isinstance(line, Overlong) or size > MAX_DOCUMENT_BYTES:
            yield RecordError(file, f"line {number}", None,
                              "document too large to parse in one piece; write it as JSON "
                              "Lines (one record per line)")
            return
        chunks.append(line)
        size += len(line)
    text = b"".join(chunks)
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        numbered = list(enumerate(chunks, start=first_number))
        if _looks_like_json_lines(numbered):
            # JSON Lines whose first record is bad: keep the good records after it.
            yield from _json_lines(numbered, file, title)
            return
        yield _error(file, "document" if first_number == 1 else f"line {first_number}",
                     _json_error(exc), text)
        return
    if isinstance(value, list):
        for index, element in enumerate(value):
            raw = raw_text(orjson.dumps(element)) if isinstance(element, dict | list) else None
            yield to_item(element, file, f"index {index}", raw, title)
    else:
        yield to_item(value, file, "document", raw_text(text), title)
