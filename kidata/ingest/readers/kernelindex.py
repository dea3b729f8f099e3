"""kernelindex documents: bundles (``{"run": …, "protocol": …, "environment": …}``) and bare
documents of one kind, as one JSON value (object or array, optionally after a title line and a
blank line, as in the seeds) or as JSON Lines (one record per line)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator
from typing import IO, Any

import orjson

from kidata.errors import RecordError
from kidata.ingest.readers.base import (
    INT_RANGE,
    MAX_DEPTH,
    MAX_RECORD_BYTES,
    Item,
    Lines,
    Overlong,
    deep_field,
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
            title: str | None = None, data: bytes | None = None) -> Item | RecordError:
    """Classify one parsed JSON value as a bundle or a bare document. ``data``, the JSON text
    ``value`` was parsed from, is checked for what a parse would not keep exactly
    (:func:`json_problem`)."""
    if not isinstance(value, dict):
        return RecordError(file, position, None,
                           f"expected a JSON object (a bundle or a document), got {_type(value)}")
    if data is not None:
        problem = json_problem(value, data)
        if problem is not None:
            return RecordError(file, position, *problem)
    if "kind" in value:
        kind = value["kind"]
        role = ROLES.get(kind) if isinstance(kind, str) else None
        if role is None:
            return RecordError(file, position, "kind",
                               f"unknown kind {kind!r}; expected one of {', '.join(ROLES)}")
        return Item(file, position, {role: value}, raw, title)
    docs = {k: v for k, v in value.items() if k in KINDS}
    for role, doc in docs.items():
        if not isinstance(doc, dict):  # "run": null is no run, not a bundle without one
            return RecordError(file, position, role,
                               f"expected a {KINDS[role]} document (an object), got "
                               f"{_type(doc)}")
    if not docs:
        keys = ", ".join(sorted(map(str, value))[:8]) or "none"
        return RecordError(file, position, None,
                           "not a kernelindex bundle or document: expected a 'kind' key or "
                           f"bundle keys run/protocol/environment (found keys: {keys})")
    return Item(file, position, docs, raw, title)


# orjson reads an integer outside [-2**63, 2**64) as a float: the document would change
# (123456789012345678901234567890 -> 1.2345678901234568e+29) and so would its digest. Such an
# integer has at least 20 digits, or 19 after a minus sign; a text holding 19 digits in a row
# is read again exactly.
_DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")
_NINETEEN = b"0" * 19


def long_digits(data: bytes) -> bool:
    """Whether ``data`` holds 19 or more digits in a row (maybe an integer beyond 64 bits).
    A translation and a substring search: 470 MB/s, where a regular expression did 40."""
    return _NINETEEN in data.translate(_DIGITS_TO_ZERO)


def json_problem(value: Any, data: bytes) -> tuple[str | None, str] | None:
    """``(field, reason)`` when the record ``value``, parsed from ``data``, cannot be kept
    exactly as written: nested deeper than kidata stores, or holding an integer beyond 64
    bits. None when it can (the common case costs one serialisation and one byte scan).

    Depth is a stored document's: a bundle's documents are measured each from its own root,
    as the fast path (which serialises only the documents) measures them, so both paths
    accept and reject the same records (a bundle 255 deep whose run is 254 is kept)."""
    parts = ([(None, value)] if "kind" in value or not isinstance(value, dict) else
             [(role, doc) for role, doc in value.items() if role in KINDS])
    for role, part in parts:
        try:
            orjson.dumps(part)
        except TypeError:  # "Recursion limit reached" (integers were read as int or float)
            # Six steps shown from the record's root, the role being the first.
            field = deep_field(part, steps=6 if role is None else 5)
            if role is not None:
                field = role + ("" if field is None else
                                field if field.startswith("[") else "." + field)
            return (field, f"nested deeper than {MAX_DEPTH} levels; kidata stores documents "
                           f"up to {MAX_DEPTH} levels deep")
    if long_digits(data):
        try:
            exact = json.loads(data)
        except (ValueError, RecursionError):
            return None  # orjson read it; what it could not, it has refused already
        found = _wide_integer(exact, "")
        if found is not None:
            field, number = found
            return (field or None,
                    f"integer {number} is beyond 64 bits (kidata keeps integers from "
                    f"{INT_RANGE[0]} to {INT_RANGE[1]}); it would be changed when stored, "
                    "so the record is rejected; write it as a string or a float")
    return None


def _wide_integer(value: Any, path: str) -> tuple[str, int] | None:
    """The first integer outside :data:`INT_RANGE` in ``value``, with its dotted path."""
    if isinstance(value, dict):
        for key, item in value.items():
            found = _wide_integer(item, f"{path}.{key}" if path else str(key))
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _wide_integer(item, f"{path}[{index}]")
            if found is not None:
                return found
    elif (isinstance(value, int) and not isinstance(value, bool)
          and not INT_RANGE[0] <= value <= INT_RANGE[1]):
        return path, value
    return None


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


def json_error_message(exc: orjson.JSONDecodeError) -> str:
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


def record_error(file: str, position: str, message: str, raw: bytes | None) -> RecordError:
    """A record-level error that keeps the record's text for ``rejects.raw``."""
    err = RecordError(file, position, None, message)
    err.raw = raw_text(raw)  # type: ignore[attr-defined]
    return err


def overlong_error(file: str, number: int, line: Overlong) -> RecordError:
    return record_error(file, f"line {number}",
                  f"record of {line.size:,} bytes is longer than the "
                  f"{MAX_RECORD_BYTES // (1024 * 1024)} MiB limit; not read (its first 64 KiB "
                  "are kept in rejects.raw)", line.head)


def read(stream: IO[bytes], file: str, batch_lines: int | None = None
         ) -> Iterator[Item | RecordError | Lines]:
    """The records of a kernelindex file; with ``batch_lines``, the lines of a JSON Lines file
    come unparsed as :class:`~kidata.ingest.readers.Lines` of that many lines."""
    lines = iter_lines(stream)
    title: str | None = None
    for number, line in lines:
        if isinstance(line, Overlong):
            yield overlong_error(file, number, line)
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
            yield to_item(value, file, f"line {number}", raw_text(stripped), title, stripped)
            yield from _json_lines(lines, file, title)
            return
        if stripped[:1] == b"[":
            yield from _whole(line, lines, file, title, number)
            return
        found = _title(stripped, title, file, number)
        if isinstance(found, RecordError):
            yield found
            return
        title = found
    if title is not None:
        yield RecordError(file, "document", None, "a title line but no JSON document after it")
    else:
        yield RecordError(file, "document", None, "empty file: no records")


def _title(stripped: bytes, title: str | None, file: str, number: int) -> str | RecordError:
    """A line of text before the JSON: the file's title line, or (a second one, not UTF-8, or
    over 200 characters) the reject that says the file is not kernelindex JSON."""
    if title is not None:
        return RecordError(file, f"line {number}", None,
                           "expected JSON after the title line, got text: "
                           f"{raw_text(stripped, 80)!r}")
    try:
        title = stripped.decode("utf-8")
    except UnicodeDecodeError:
        return RecordError(file, f"line {number}", None,
                           "not UTF-8 text: the file is not kernelindex JSON")
    if len(title) > 200:
        return RecordError(file, f"line {number}", None,
                           "not JSON and too long to be a title line: expected kernelindex "
                           "JSON, JSON Lines, or a title line then JSON")
    return title


def _blocks(stream: IO[bytes], number: int, file: str, title: str | None,
            batch_lines: int) -> Iterator[Lines]:
    """The rest of a JSON Lines file, from line ``number`` on, as unparsed :class:`Lines`
    of at most ``batch_lines`` lines."""
    # Each block is handed out when the next one is read: the next one's first line number
    # says how many lines it has (not counting them again saves a pass over the file).
    before: tuple[int, bytes | Overlong] | None = None
    for first, block in iter_blocks(stream, number, MAX_RECORD_BYTES, batch_lines):
        if before is not None:
            yield _lines(file, title, *before, first - before[0])
        before = first, block
    if before is not None:
        yield _lines(file, title, *before, None)


def _lines(file: str, title: str | None, first: int, block: bytes | Overlong,
           count: int | None) -> Lines:
    if isinstance(block, Overlong):
        return Lines(file, title, [(first, block)])
    return Lines(file, title, data=block, first=first, known_count=count)


def parse_lines(batch: Lines) -> Iterator[Item | RecordError]:
    """The records of lines a reader handed out unparsed (see :func:`read`)."""
    return _json_lines(batch.numbered(), batch.file, batch.title)


def _json_lines(lines: Iterable[tuple[int, bytes | Overlong]], file: str,
                title: str | None = None) -> Iterator[Item | RecordError]:
    for number, line in lines:
        position = f"line {number}"
        if isinstance(line, Overlong):
            yield overlong_error(file, number, line)
            continue
        stripped = line.strip()
        if not stripped:
            continue
        try:
            value = orjson.loads(stripped)
        except orjson.JSONDecodeError as exc:
            yield record_error(file, position, json_error_message(exc), stripped)
            continue
        yield to_item(value, file, position, raw_text(stripped), title, stripped)


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
        yield record_error(file, "document" if first_number == 1 else f"line {first_number}",
                     json_error_message(exc), text)
        return
    if isinstance(value, list):
        # The elements' integers as written (orjson made floats of the widest), for the
        # 64-bit check: the text read again once, when it may hold such an integer.
        exact = _exact_elements(text) if long_digits(text) else None
        for index, element in enumerate(value):
            try:
                data = orjson.dumps(element) if isinstance(element, dict | list) else None
            except TypeError:  # nested too deep to write again: to_item says so
                data = b"[]"
            if exact is not None and data is not None:
                with contextlib.suppress(RecursionError, ValueError):
                    data = json.dumps(exact[index]).encode()
            yield to_item(element, file, f"index {index}", raw_text(data), title, data)
    else:
        yield to_item(value, file, "document", raw_text(text), title, text)



def _exact_elements(text: bytes) -> list | None:
    """The JSON array ``text`` parsed with every integer exact (None if it cannot be)."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, list) else None
