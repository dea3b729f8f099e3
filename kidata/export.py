"""Export a table or view to a file for analysts: CSV, Parquet, JSON, NDJSON or Excel."""

from __future__ import annotations

from pathlib import Path

from kidata.errors import UnknownFormat, UsageError
from kidata.views import quote_literal

FORMATS = {".csv": "csv", ".parquet": "parquet", ".json": "json", ".ndjson": "ndjson",
           ".jsonl": "ndjson", ".xlsx": "xlsx"}
ALLOWED = sorted(set(FORMATS.values()))
EXCEL_MAX_ROWS = 1_048_576  # including the header row
EXCEL_MAX_SHEET_NAME = 31


def format_for(path: Path, fmt: str | None) -> str:
    """The export format: ``fmt`` if given, else from the file suffix."""
    if fmt is not None:
        if fmt not in ALLOWED:
            raise UnknownFormat(fmt, ALLOWED)
        return fmt
    found = FORMATS.get(path.suffix.lower())
    if found is None:
        raise UsageError(f"cannot tell the format of {path.name!r} from its suffix; use "
                         f"--format (allowed formats are: {', '.join(ALLOWED)})")
    return found


def copy_options(fmt: str) -> str:
    """The DuckDB ``COPY … TO`` options for a format."""
    return {
        "csv": "(FORMAT csv, HEADER true)",
        "parquet": "(FORMAT parquet, COMPRESSION zstd)",
        "json": "(FORMAT json, ARRAY true)",
        "ndjson": "(FORMAT json)",
    }[fmt]


def export(relation, con, path: Path, fmt: str, sheet: str = "data") -> int:
    """Write ``relation`` to ``path`` in ``fmt``; returns the number of rows written."""
    rows = relation.count("*").fetchall()[0][0]
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "xlsx":
        return _excel(relation, path, rows, sheet)
    relation.create_view("_kidata_export", replace=True)
    con.execute(f"COPY (SELECT * FROM _kidata_export) TO {quote_literal(str(path))} "
                f"{copy_options(fmt)}")
    return rows


def _excel(relation, path: Path, rows: int, sheet: str) -> int:
    if rows + 1 > EXCEL_MAX_ROWS:
        raise UsageError(f"{rows:,} rows do not fit in one Excel sheet (at most "
                         f"{EXCEL_MAX_ROWS - 1:,} rows after the header); export CSV or Parquet")
    try:
        import xlsxwriter  # noqa: F401
    except ImportError:
        raise UsageError("Excel export needs xlsxwriter: pip install 'kidata[excel]'") from None
    frame = relation.pl()
    # Excel has no time zones: write timestamps as UTC wall-clock time.
    import polars as pl

    frame = frame.with_columns(
        [pl.col(c).dt.replace_time_zone(None) for c, t in frame.schema.items()
         if isinstance(t, pl.Datetime) and t.time_zone is not None])
    frame.write_excel(path, worksheet=sheet[:EXCEL_MAX_SHEET_NAME], autofit=True)
    return rows
