"""Print query results: a readable table on a terminal, CSV/JSON/NDJSON/Markdown for scripts."""

from __future__ import annotations

import csv
import datetime as dt
import json
from typing import IO, Any

import orjson

FORMATS = ("table", "csv", "json", "ndjson", "markdown")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return str(value)


def _default(value: Any) -> Any:
    if isinstance(value, dt.date | dt.datetime | dt.time):
        return value.isoformat()
    return str(value)


def _dumps(value: Any, option: int = 0) -> str:
    """JSON text of ``value``; integers beyond 64 bits (DuckDB's HUGEINT), which orjson
    refuses, are written exactly by the standard library instead."""
    try:
        return orjson.dumps(value, default=_default, option=option | orjson.OPT_NON_STR_KEYS
                            ).decode()
    except TypeError:
        if option & orjson.OPT_INDENT_2:
            return json.dumps(value, default=_default, ensure_ascii=False, indent=2)
        return json.dumps(value, default=_default, ensure_ascii=False, separators=(",", ":"))


def write(relation, fmt: str, out: IO[str], max_rows: int = 100) -> None:
    columns = relation.columns
    if fmt == "table":
        rows = relation.limit(max_rows + 1).fetchall()
        _table(columns, rows[:max_rows], out)
        if len(rows) > max_rows:
            total = relation.count("*").fetchall()[0][0]
            out.write(f"({max_rows} of {total:,} rows shown; use --max-rows or --format csv)\n")
        return
    rows = relation.fetchall()
    if fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow(["" if v is None else (v.isoformat() if isinstance(v, dt.datetime)
                                                   else v) for v in row])
    elif fmt == "json":
        out.write(_dumps([dict(zip(columns, r, strict=True)) for r in rows],
                         orjson.OPT_INDENT_2) + "\n")
    elif fmt == "ndjson":
        for r in rows:
            out.write(_dumps(dict(zip(columns, r, strict=True))) + "\n")
    elif fmt == "markdown":
        out.write("| " + " | ".join(columns) + " |\n")
        out.write("|" + "|".join("---" for _ in columns) + "|\n")
        for r in rows:
            out.write("| " + " | ".join(_cell(v).replace("|", "\\|") for v in r) + " |\n")


def _table(columns: list[str], rows: list[tuple], out: IO[str]) -> None:
    cells = [[_cell(v) for v in r] for r in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    numeric = [all(isinstance(r[i], int | float) or r[i] is None for r in rows) and rows
               for i in range(len(columns))]

    def line(values: list[str]) -> str:
        return "  ".join(v.rjust(w) if numeric[i] else v.ljust(w)
                         for i, (v, w) in enumerate(zip(values, widths, strict=True))).rstrip()

    out.write(line(list(columns)) + "\n")
    out.write("  ".join("-" * w for w in widths) + "\n")
    for r in cells:
        out.write(line(r) + "\n")
    out.write(f"({len(rows)} row{'s' if len(rows) != 1 else ''})\n")
