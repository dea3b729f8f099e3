"""Print query results: a table fitted to the terminal (rich), CSV/JSON/NDJSON/Markdown for
scripts.

One rule for values every format shares: numbers stay numbers (DECIMAL included), NaN and
infinities are spelled ``NaN``, ``Infinity`` and ``-Infinity`` (JSON has no such numbers, and a
null would hide them), timestamps are ISO 8601, durations ISO 8601 durations (``PT1.5S``), and
lists and structs are JSON (never Python's repr).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
import re
import shutil
import uuid
from decimal import Decimal
from typing import IO, Any

import orjson

FORMATS = ("table", "csv", "json", "ndjson", "markdown")
# Widest a table may be when not written to a terminal (a pipe or a file is not cut).
UNFITTED_WIDTH = 100_000
# The table format counts a result of up to this many rows from the rows it fetched.
COUNTED = 2_000
_PLAIN = re.compile("[ -~⏎]*")


def _number(value: float) -> float | str:
    if math.isfinite(value):
        return value
    return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")


def _duration(value: dt.timedelta) -> str:
    """ISO 8601: 1 day 2 h 3 min 4.5 s -> P1DT2H3M4.5S; negative as -PT1S."""
    sign = "-" if value < dt.timedelta(0) else ""
    value = abs(value)
    seconds = value.seconds + value.microseconds / 1e6
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    time = "".join(f"{int(n)}{u}" for n, u in ((hours, "H"), (minutes, "M")) if n)
    if secs or not (time or value.days):
        time += f"{secs:g}S"
    return f"{sign}P{f'{value.days}D' if value.days else ''}{'T' + time if time else ''}"


def plain(value: Any) -> Any:
    """A value as JSON can hold it (see the module's rule)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            return _number(float(value))
        return int(value) if value == value.to_integral_value() and value.as_tuple().exponent >= 0 \
            else float(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return _duration(value)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    return str(value)


def text(value: Any, short: bool = False) -> str:
    """A value as one piece of text: CSV (every digit), or with ``short`` Markdown and the
    terminal table (floats to 6 significant digits)."""
    value = plain(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6g}" if short else repr(value)
    if isinstance(value, dict | list):
        return orjson.dumps(value).decode()
    return str(value)


def _json(row: dict) -> bytes:
    value = {k: plain(v) for k, v in row.items()}
    try:
        return orjson.dumps(value)
    except TypeError:
        # orjson refuses integers beyond 64 bits (DuckDB's HUGEINT); the standard library
        # writes them exactly.
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


# Characters that make a spreadsheet read a CSV cell as a formula (OWASP, "CSV Injection"):
# a text cell starting with one gets a leading ' in CSV output, unless asked for raw text.
FORMULA_START = "=+-@\t\r"


def formula_safe(relation):
    """``relation`` with each text column's cells that start with a formula character
    (:data:`FORMULA_START`) prefixed with ``'``, as OWASP advises for CSV opened in a
    spreadsheet. The one home of the rule: ``kidata sql --format csv`` and every CSV export
    write through it (``--csv-raw`` skips it, for programs that read the CSV)."""
    from kidata.core.sql import quote_identifier

    if not any(str(t) == "VARCHAR" for t in relation.types):
        return relation
    # A bracket expression of the characters ('-' last, so it is not a range).
    pattern = "'^[" + FORMULA_START.replace("-", "") + "-]'"
    cols = []
    for name, kind in zip(relation.columns, relation.types, strict=True):
        q = quote_identifier(name)
        if str(kind) == "VARCHAR":
            cols.append(f"CASE WHEN regexp_matches({q}, {pattern}) THEN chr(39) || {q} "
                        f"ELSE {q} END AS {q}")
        else:
            cols.append(q)
    return relation.project(", ".join(cols))


def write(relation, fmt: str, out: IO[str], max_rows: int = 100,
          width: int | None = None, csv_raw: bool = False) -> None:
    """Write ``relation`` to ``out`` in ``fmt``. The table format shows ``max_rows`` rows and
    fits ``width`` columns (default: the terminal's when ``out`` is one, else no limit). CSV
    text that a spreadsheet would take for a formula is prefixed with ``'`` unless
    ``csv_raw`` (:func:`formula_safe`)."""
    if fmt == "csv" and not csv_raw:
        relation = formula_safe(relation)
    columns = relation.columns
    if fmt == "table":
        # One run of the query answers both the rows shown and how many there are, for any
        # result of up to COUNTED rows (a view's answer, typically): counting by a second run
        # would cost as much as the query again. Longer results are counted by DuckDB.
        rows = relation.limit(max(max_rows, COUNTED) + 1).fetchall()
        _table(columns, rows[:max_rows], out, width)
        if len(rows) > max_rows:
            total = (len(rows) if len(rows) <= COUNTED
                     else relation.count("*").fetchall()[0][0])
            out.write(f"({max_rows} of {total:,} rows shown; use --max-rows or --format csv)\n")
        return
    rows = relation.fetchall()
    if fmt == "csv":
        # The csv module quotes fields holding the separator, quotes or a character of its
        # line terminator (RFC 4180). With "\n" alone a carriage return went out unquoted and
        # broke the row: rows are written with "\r\n" (so both are quoted) and end in "\n".
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\r\n")
        for row in [columns, *([text(v) for v in r] for r in rows)]:
            writer.writerow(row)
            out.write(buffer.getvalue()[:-2] + "\n")
            buffer.seek(0)
            buffer.truncate()
    elif fmt == "json":
        items = [_json(dict(zip(columns, r, strict=True))) for r in rows]
        out.write(("[\n" + ",\n".join("  " + i.decode() for i in items) + "\n]\n") if items
                  else "[]\n")
    elif fmt == "ndjson":
        for r in rows:
            out.write(_json(dict(zip(columns, r, strict=True))).decode() + "\n")
    elif fmt == "markdown":
        out.write(markdown_table(columns, rows))


def markdown_table(columns: list[str] | tuple[str, ...], rows: list) -> str:
    """A Markdown table: a header, then one line per row, each value as the table format
    spells it (pipes escaped, line breaks as ``<br>``)."""
    lines = ["| " + " | ".join(_md(c) for c in columns) + " |",
             "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(_md(text(v, short=True)) for v in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _md(cell: str) -> str:
    """A Markdown table cell: pipes escaped, line breaks as <br> (a newline ends the row)."""
    return (cell.replace("\\", "\\\\").replace("|", "\\|").replace("\r\n", "<br>")
            .replace("\n", "<br>").replace("\r", "<br>"))


def _table(columns: list[str], rows: list[tuple], out: IO[str], width: int | None) -> None:
    if width is None:
        width = (shutil.get_terminal_size().columns if getattr(out, "isatty", lambda: False)()
                 else UNFITTED_WIDTH)
    numeric = [bool(rows) and all(isinstance(r[i], int | float | Decimal) and
                                  not isinstance(r[i], bool) or r[i] is None for r in rows)
               for i in range(len(columns))]
    cells = [[text(v, short=True).replace("\n", "⏎") for v in r] for r in rows]
    widths = _fit([max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)],
                  [len(c) for c in columns], numeric, width)
    if all(widths) and _plain(columns) and all(_plain(r) for r in cells):
        lines = _plain_lines(columns, cells, numeric, widths)
    else:
        lines = _rich_lines(columns, cells, numeric, widths, width)
    out.write("\n".join(line.rstrip() for line in lines) + "\n")
    out.write(f"({len(rows)} row{'s' if len(rows) != 1 else ''})\n")


def _plain(cells: list[str]) -> bool:
    """Whether every character of ``cells`` takes one column on a terminal and is drawn as
    itself: printable ASCII, or the ⏎ standing for a line break."""
    return all(_PLAIN.fullmatch(text) for text in cells)


def _plain_lines(columns: list[str], cells: list[list[str]], numeric: list[bool],
                 widths: list[int]) -> list[str]:
    """The table as rich draws it (:func:`_rich_lines`: a header, a rule, the rows; columns
    ``GAP`` apart, numbers right-aligned, a cell too wide cut to an ellipsis), for cells of
    plain characters only: 100 rows of 23 columns take rich ~0.3 s, this ~5 ms."""
    gap = " " * GAP

    def cell(value: str, width: int, right: bool) -> str:
        if right:
            value = value.rstrip()  # as rich aligns right: trailing spaces go
        if len(value) > width:
            value = value[:width - 1] + "…"
        return value.rjust(width) if right else value.ljust(width)

    def line(values: list[str]) -> str:
        return gap.join(cell(v, w, right)
                        for v, w, right in zip(values, widths, numeric, strict=True))

    rule = "─" * (sum(widths) + GAP * (len(widths) - 1))
    return [line(columns), rule, *(line(r) for r in cells)]


def _rich_lines(columns: list[str], cells: list[list[str]], numeric: list[bool],
                widths: list[int], width: int) -> list[str]:
    """The table drawn by rich, which knows how wide any character is on a terminal."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, highlight=False,
                  header_style="bold")
    for name, is_number, fitted in zip(columns, numeric, widths, strict=True):
        table.add_column(name, justify="right" if is_number else "left", no_wrap=True,
                         overflow="ellipsis", width=fitted)
    for r in cells:
        table.add_row(*r)
    console = Console(file=io.StringIO(), width=max(width, sum(widths) + GAP * len(widths)),
                      color_system=None, soft_wrap=False, highlight=False, emoji=False,
                      markup=False)
    with console.capture() as capture:
        console.print(table)
    return capture.get().splitlines()


# Spaces between two columns of rich's SIMPLE_HEAD table: a blank divider and the padding.
GAP = 3
# A text column is cut down to no less than this many characters (or its header's length).
MIN_TEXT_WIDTH = 8


def _fit(natural: list[int], headers: list[int], numeric: list[bool], width: int) -> list[int]:
    """Column widths that fit ``width`` (``GAP`` spaces between columns): the widest text column is
    cut first, numbers are never cut; if even that is too wide, the table is wider."""
    widths = list(natural)
    floor = [w if numeric[i] else min(w, max(MIN_TEXT_WIDTH, headers[i]))
             for i, w in enumerate(natural)]
    excess = sum(widths) + GAP * (len(widths) - 1) - width
    while excess > 0:
        cuttable = [i for i, w in enumerate(widths) if w > floor[i]]
        if not cuttable:
            break
        widest = max(cuttable, key=lambda i: widths[i])
        others = max([widths[i] for i in cuttable if i != widest] + [floor[widest]])
        step = min(excess, widths[widest] - max(others, floor[widest]) or 1)
        widths[widest] -= step
        excess -= step
    return widths
