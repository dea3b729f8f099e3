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

# What one CSV file may cost (issue 27, item 7): a file past any of these is one reject naming
# the bound, and the load goes on with the other files. A 2.3 MB Triton file of 200,000
# columns (200,000 runs) took a whole load down. The real files these readers take have at
# most 97 columns, a 1,133-byte header, lines of 1,133 bytes and 10,864 cells (FlashInfer's
# sample; Triton's have 3-5 columns): the bounds are 10, 58, 925 and 24 times that. At the
# bounds the costliest shapes read in about 30 s and under 350 MB (Triton, 262,144 cells,
# each a run), or 2 s (1,023 x columns, 256 rows). The header is measured before it is
# parsed, every line before the CSV parser sees it, and the cells are counted before any
# row is handed on.
MAX_COLUMNS = 1024
MAX_HEADER_BYTES = 64 * 1024
MAX_LINE_BYTES = 1024 * 1024
MAX_CELLS = 256 * 1024


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
    lines are skipped); a :class:`RecordError` for a file that has no header. A file past
    :data:`MAX_HEADER_BYTES`, :data:`MAX_COLUMNS`, :data:`MAX_LINE_BYTES` or
    :data:`MAX_CELLS` is one :class:`RecordError` naming the bound, and none of its rows."""
    text = read_text(stream, file)
    if isinstance(text, RecordError):
        yield text
        return
    lines = _BoundedLines(text)
    reader = csv.reader(lines)
    try:
        header = next(reader, None)
    except _TooLong:
        yield RecordError(file, "header", None, lines.too_long(text))
        return
    except csv.Error as exc:
        yield RecordError(file, "header", None, f"malformed CSV header: {exc}")
        return
    if not header:
        yield RecordError(file, "header", None, "empty file: expected a CSV header line")
        return
    if len(header) > MAX_COLUMNS:
        yield RecordError(file, "header", None,
                          f"{len(header):,} columns; kidata reads at most {MAX_COLUMNS:,} "
                          f"(the file is not read)")
        return
    header = [h.strip() for h in header]
    lines.header = False
    # Every row is read (and its cells counted) before the first is handed on, so that a
    # file past MAX_CELLS is rejected whole, not loaded in part.
    out: list[tuple[str, list[str], list[str], str | None] | RecordError] = []
    number = cells = 0
    while True:
        try:
            values = next(reader)
        except StopIteration:
            break
        except _TooLong:
            yield RecordError(file, "document", None, lines.too_long(text))
            return
        except csv.Error as exc:
            number += 1
            out.append(RecordError(file, f"row {number}", None, f"malformed CSV: {exc}"))
            continue
        if not values or all(not v.strip() for v in values):
            continue
        cells += len(values)
        if cells > MAX_CELLS:
            yield RecordError(file, "document", None,
                              f"more than {MAX_CELLS:,} cells (row {number + 1} passes it, "
                              f"{len(header):,} columns); kidata reads at most "
                              f"{MAX_CELLS:,} (the file is not read)")
            return
        number += 1
        out.append((f"row {number}", header, values, raw_text(",".join(values))))
    yield from out


class _TooLong(Exception):
    """A line past its bound (:class:`_BoundedLines`)."""


class _BoundedLines:
    """The lines of ``text`` for :func:`csv.reader`, each measured before the parser sees it:
    the header's lines (one, unless a quoted name spans lines) at most
    :data:`MAX_HEADER_BYTES` together, every other line at most :data:`MAX_LINE_BYTES`.
    A line past its bound raises :class:`_TooLong` having read at most one byte beyond it."""

    def __init__(self, text: str):
        self.stream = io.StringIO(text)
        self.header = True
        self.used = 0  # bytes of the header's lines so far
        self.number = 0  # the line being read
        self.start = 0  # where it starts in the text (characters)

    def __iter__(self) -> _BoundedLines:
        return self

    def __next__(self) -> str:
        limit = MAX_HEADER_BYTES - self.used if self.header else MAX_LINE_BYTES
        self.start = self.stream.tell()
        # At most limit + 1 characters: a longer line is past the bound in bytes too.
        line = self.stream.readline(limit + 1)
        if not line:
            raise StopIteration
        self.number += 1
        size = len(line) if line.isascii() else len(line.encode("utf-8", "surrogatepass"))
        if size > limit:
            raise _TooLong
        if self.header:
            self.used += size
        return line

    def too_long(self, text: str) -> str:
        """Why the line just read is past its bound."""
        if self.header:
            # The names the header line holds, counted without copying it.
            end = text.find("\n", self.start)
            names = text.count(",", self.start, len(text) if end < 0 else end) + 1
            return (f"a header longer than {_size(MAX_HEADER_BYTES)} (about {names:,} "
                    f"column{'s' if names > 1 else ''}); kidata reads at most "
                    f"{_size(MAX_HEADER_BYTES)} and "
                    f"{MAX_COLUMNS:,} columns (the file is not read)")
        return (f"line {self.number} is longer than {_size(MAX_LINE_BYTES)}; kidata reads CSV "
                f"lines of at most {_size(MAX_LINE_BYTES)} (the file is not read)")


def _size(n: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n % scale == 0:
            return f"{n // scale:,} {unit}"
    return f"{n:,} bytes"


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
