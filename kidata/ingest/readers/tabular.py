"""Reading CSV-like and JSON inputs for the field's formats: rows with their positions, the
header with repeated names kept apart, and the record's raw text for ``rejects.raw``."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import IO, Any

import orjson

from kidata.errors import RecordError
from kidata.ingest.readers.base import raw_text

# A result file larger than this is rejected unread (the formats here are whole documents).
MAX_BYTES = 256 * 1024 * 1024


def read_text(stream: IO[bytes], file: str) -> str | RecordError:
    data = stream.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        return RecordError(file, "document", None,
                           f"larger than {MAX_BYTES // (1024 * 1024)} MiB; not read")
    try:
        return data.removeprefix(b"\xef\xbb\xbf").decode("utf-8")
    except UnicodeDecodeError as exc:
        return RecordError(file, "document", None,
                           f"not UTF-8 text (byte {exc.start}: {exc.reason})")


def read_json(stream: IO[bytes], file: str, prefix: str = "") -> Any:
    """The file as one JSON value (after an optional text prefix such as
    ``window.BENCHMARK_DATA =``), or a :class:`RecordError`."""
    text = read_text(stream, file)
    if isinstance(text, RecordError):
        return text
    body = text.strip()
    if prefix:
        if not body.startswith(prefix):
            return RecordError(file, "document", None, f"expected the text to start with "
                                                       f"{prefix!r}")
        body = body[len(prefix):].strip().rstrip(";")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        return RecordError(file, "document", None, f"invalid JSON: {exc}")


def read_benchmarks_json(stream: IO[bytes], file: str, what: str) -> Any:
    """The file as a JSON object holding a ``benchmarks`` list (google-benchmark's and
    nvbench's shape), or a :class:`RecordError` naming ``what`` was expected."""
    data = read_json(stream, file)
    if isinstance(data, RecordError):
        return data
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        return RecordError(file, "document", "benchmarks",
                           f"expected {what} JSON object with a 'benchmarks' list")
    return data


def csv_rows(stream: IO[bytes], file: str
             ) -> Iterator[tuple[str, list[str], list[str], str | None] | RecordError]:
    """``(position, header, values, raw)`` per data row (``row N``: N counts data rows; blank
    lines are skipped); a :class:`RecordError` for a file that has no header."""
    text = read_text(stream, file)
    if isinstance(text, RecordError):
        yield text
        return
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader, None)
    except csv.Error as exc:
        yield RecordError(file, "header", None, f"malformed CSV header: {exc}")
        return
    if not header:
        yield RecordError(file, "header", None, "empty file: expected a CSV header line")
        return
    header = [h.strip() for h in header]
    number = 0
    while True:
        try:
            values = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            number += 1
            yield RecordError(file, f"row {number}", None, f"malformed CSV: {exc}")
            continue
        if not values or all(not v.strip() for v in values):
            continue
        number += 1
        yield f"row {number}", header, values, raw_text(",".join(values))


def by_name(header: list[str], values: list[str], file: str, position: str
            ) -> dict[str, str]:
    """A row as ``{column: value}``. A name the header repeats (FlashInfer writes
    ``num_tokens`` twice) keeps its one non-empty value; two different non-empty values are an
    error naming the column."""
    if len(values) != len(header):
        raise RecordError(file, position, None,
                          f"{len(values)} fields, the header has {len(header)}"
                          + (" (an unquoted comma?)" if len(values) > len(header) else ""))
    out: dict[str, str] = {}
    for name, value in zip(header, values, strict=True):
        value = value.strip()
        if name in out and out[name] and value and out[name] != value:
            raise RecordError(file, position, name,
                              f"the header repeats {name!r} and this row gives it two values "
                              f"({out[name]!r} and {value!r})")
        if value or name not in out:
            out[name] = value
    return out


def raw_json(value: Any) -> str | None:
    try:
        return raw_text(orjson.dumps(value))
    except TypeError:
        return None
