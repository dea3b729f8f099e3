"""Excel export for analysts, written cell by cell with xlsxwriter (``pip install
'kidata[excel]'``): the header frozen, widths that fit, numbers formatted so small values stay
readable, integer counts as integers, timestamps as UTC wall-clock time marked UTC, text never
taken for a formula, and a second sheet describing each column."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson

from kidata.errors import UsageError

MAX_WIDTH = 60      # characters; longer text wraps in the cell
SAMPLE_ROWS = 1000  # rows measured to fit column widths
MAX_SHEET_NAME = 31
SMALL = 1e-3        # floats below this (in magnitude) are shown in scientific notation


def write(relation, path: Path, sheet: str, descriptions: dict[str, str]) -> int:
    """Write ``relation`` to ``path`` as one data sheet and a ``columns`` sheet; returns rows."""
    try:
        import xlsxwriter
    except ImportError:
        raise UsageError("Excel export needs xlsxwriter: pip install 'kidata[excel]'") from None
    columns = relation.columns
    types = [str(t) for t in relation.types]
    rows = relation.fetchall()
    workbook = xlsxwriter.Workbook(str(path), {
        # Text stays text: never a formula, a number or a link, whatever it looks like.
        "strings_to_formulas": False, "strings_to_numbers": False, "strings_to_urls": False,
        "nan_inf_to_errors": True, "remove_timezone": True})
    try:
        bold = workbook.add_format({"bold": True, "bottom": 1, "text_wrap": True,
                                    "valign": "top"})
        formats = {
            "int": workbook.add_format({"num_format": "#,##0"}),
            "float": workbook.add_format({"num_format": "#,##0.0000##"}),
            "small": workbook.add_format({"num_format": "0.000E+00"}),
            "time": workbook.add_format({"num_format": "yyyy-mm-dd hh:mm:ss"}),
            "date": workbook.add_format({"num_format": "yyyy-mm-dd"}),
            "text": workbook.add_format({"text_wrap": False}),
        }
        name = _sheet_name(sheet)
        ws = workbook.add_worksheet(name)
        kinds = [_kind(t) for t in types]
        # Small-valued float columns in scientific notation, others with fixed decimals.
        for i, kind in enumerate(kinds):
            if kind == "float":
                values = [abs(r[i]) for r in rows[:SAMPLE_ROWS]
                          if isinstance(r[i], float | Decimal) and r[i] and math.isfinite(r[i])]
                if values and min(values) < SMALL:
                    kinds[i] = "small"
        headers = [f"{c} (UTC)" if k == "time" else c for c, k in zip(columns, kinds,
                                                                          strict=True)]
        widths = [len(h) for h in headers]
        for j, header in enumerate(headers):
            ws.write_string(0, j, header, bold)
        for i, row in enumerate(rows, start=1):
            for j, value in enumerate(row):
                shown = _write_cell(ws, i, j, value, kinds[j], formats)
                if i <= SAMPLE_ROWS:
                    widths[j] = max(widths[j], shown)
        for j, width in enumerate(widths):
            ws.set_column(j, j, min(width, MAX_WIDTH) + 2)
        ws.freeze_panes(1, 0)
        if rows:
            ws.autofilter(0, 0, len(rows), len(columns) - 1)
        about = workbook.add_worksheet(_sheet_name("columns") if name != "columns"
                                       else "columns_")
        for j, header in enumerate(("column", "type", "meaning")):
            about.write_string(0, j, header, bold)
        for i, (column, type_) in enumerate(zip(columns, types, strict=True), start=1):
            about.write_string(i, 0, column)
            about.write_string(i, 1, type_)
            about.write_string(i, 2, descriptions.get(column, ""))
        about.set_column(0, 0, max(len(c) for c in columns) + 2)
        about.set_column(1, 1, max(len(t) for t in types) + 2)
        about.set_column(2, 2, 100)
        about.freeze_panes(1, 0)
    finally:
        workbook.close()
    return len(rows)


def _sheet_name(name: str) -> str:
    # Excel forbids []:*?/\ in sheet names and allows 31 characters.
    cleaned = "".join("_" if ch in "[]:*?/\\" else ch for ch in name)
    return cleaned[:MAX_SHEET_NAME] or "data"


def _kind(duckdb_type: str) -> str:
    t = duckdb_type.upper()
    if t in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
             "UINTEGER", "UBIGINT") or (t.startswith("DECIMAL") and t.endswith(",0)")):
        return "int"
    if t in ("FLOAT", "DOUBLE", "REAL") or t.startswith("DECIMAL"):
        return "float"
    if t.startswith("TIMESTAMP"):
        return "time"
    if t == "DATE":
        return "date"
    if t == "BOOLEAN":
        return "bool"
    return "text"


def _write_cell(ws, i: int, j: int, value: Any, kind: str, formats: dict) -> int:
    """Write one cell; returns the width it needs, in characters."""
    if value is None:
        return 0
    if isinstance(value, bool):
        ws.write_boolean(i, j, value)
        return 5
    if isinstance(value, int | Decimal) and kind == "int":
        if abs(value) < 2**53:
            ws.write_number(i, j, int(value), formats["int"])
            return len(f"{int(value):,}")
        ws.write_string(i, j, str(value))  # beyond a double's exact integers: keep every digit
        return len(str(value))
    if isinstance(value, float | int | Decimal):
        number = float(value)
        if not math.isfinite(number):
            text = "NaN" if number != number else ("inf" if number > 0 else "-inf")
            ws.write_string(i, j, text)
            return len(text)
        ws.write_number(i, j, number, formats[kind if kind in ("float", "small") else "float"])
        return len(f"{number:,.6g}") + 2
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        ws.write_datetime(i, j, value, formats["time"])
        return 19
    if isinstance(value, dt.date):
        ws.write_datetime(i, j, dt.datetime(value.year, value.month, value.day), formats["date"])
        return 10
    if isinstance(value, str):
        text = value
    else:  # lists, structs, intervals, blobs: as JSON text
        text = orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    if len(text) > 32767:  # Excel's cell limit
        text = text[:32766] + "…"
    ws.write_string(i, j, text, formats["text"])
    return max((len(line) for line in text.splitlines()), default=0)
