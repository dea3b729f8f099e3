"""Export a table or view to a file for analysts: CSV, Parquet, JSON, NDJSON or Excel."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from kidata.core.sql import quote_identifier, quote_literal
from kidata.errors import UnknownFormat, UsageError
from kidata.query import outfile
from kidata.store.durable import fault

if TYPE_CHECKING:
    import duckdb

FORMATS = {".csv": "csv", ".parquet": "parquet", ".json": "json", ".ndjson": "ndjson",
           ".jsonl": "ndjson", ".xlsx": "xlsx", ".arrow": "arrow", ".feather": "arrow"}
ALLOWED = sorted(set(FORMATS.values()))
EXCEL_MAX_ROWS = 1_048_576  # including the header row


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


def descriptions(name: str | None) -> dict[str, str]:
    """What each column of a table or view means (kidata/store/schema.py, the view's header); empty
    for a query's result."""
    from kidata.core.viewfiles import load_views
    from kidata.store.schema import COLUMNS

    if name in COLUMNS:
        return {c.name: c.description for c in COLUMNS[name]}
    view = load_views().get(name) if name else None
    return dict(view.columns) if view else {}


def query_descriptions(query: str) -> dict[str, str]:
    """Column descriptions for a query's result, by column name, from the tables and views it
    names: a name that means one thing in all of them gets ``As in <relation>.<column>: …``
    (the query may have computed it differently, hence the "as in")."""
    import re

    from kidata.core.viewfiles import load_views
    from kidata.store.schema import COLUMNS

    words = set(re.findall(r"\w+", query.lower()))
    meanings: dict[str, set[tuple[str, str]]] = {}
    for relation in [*COLUMNS, *load_views()]:
        if relation.lower() in words:
            for column, meaning in descriptions(relation).items():
                meanings.setdefault(column, set()).add((relation, meaning))
    out = {}
    for column, found in meanings.items():
        if len({m for _, m in found}) == 1:
            relation, meaning = sorted(found)[0]
            out[column] = f"As in {relation}.{column}: {meaning}"
    return out


def export(relation, con, path: Path, fmt: str, sheet: str = "data",
           name: str | None = None, described: dict[str, str] | None = None,
           parents: bool = False, csv_raw: bool = False) -> int:
    """Write ``relation`` to ``path`` in ``fmt``; returns the number of rows written. ``name``
    (a table or view) gives the column descriptions that Parquet carries as field metadata
    and Excel lists on a ``columns`` sheet; ``described`` gives them for a query's result.
    The file is written whole or not at all, never inside a warehouse, and into a missing
    folder only with ``parents`` (:mod:`kidata.query.outfile`). CSV text a spreadsheet would
    take for a formula gets a leading ``'`` unless ``csv_raw``
    (:func:`kidata.query.output.formula_safe`)."""
    outfile.check(path, parents)
    if described is None:
        described = descriptions(name)
    if fmt == "xlsx":
        # A sheet has a row limit: counted first (an Excel file is small by that limit).
        rows = relation.count("*").fetchall()[0][0]
        if rows + 1 > EXCEL_MAX_ROWS:
            _too_many_for_excel(rows)
    # Everything else streams: the query runs once and its rows are written as they come,
    # so memory stays bounded whatever the result's size (issue 30, item 2).
    with outfile.writing(path, parents) as tmp:
        if fmt == "xlsx":
            return _excel(relation, tmp, sheet, described)
        if fmt in ("parquet", "arrow"):
            return _arrow(relation, tmp, described, fmt)
        if fmt == "csv" and not csv_raw:
            from kidata.query.output import formula_safe

            relation = formula_safe(relation)
        relation.create_view("_kidata_export", replace=True)
        # COPY answers with the number of rows it wrote.
        return con.execute(f"COPY (SELECT * FROM _kidata_export) TO "
                           f"{quote_literal(str(tmp))} {copy_options(fmt)}").fetchall()[0][0]


def _too_many_for_excel(rows: int) -> None:
    raise UsageError(f"{rows:,} rows do not fit in one Excel sheet (at most "
                     f"{EXCEL_MAX_ROWS - 1:,} rows after the header); export CSV or Parquet")


def _excel(relation, path: Path, sheet: str, described: dict[str, str]) -> int:
    from kidata.query import excel

    return excel.write(relation, path, sheet, described)


# A streamed export reads DuckDB's result in small Arrow batches (a wide view's 122,880-row
# batches, several in flight, doubled the peak under KIDATA_QUERY_MEMORY: docs/benchmarks.md,
# Run AM) and writes a Parquet row group once ROW_GROUP_ROWS rows or ROW_GROUP_BYTES bytes are
# buffered: about 100k rows of a narrow table, large enough for engines to read efficiently,
# small enough to prune; fewer of a wide one, so that memory holds one row group, not the result
# (64 MiB took `export speedups` to 523 MB and `sql -o` of trends to 540 MB at 5M runs, under
# the default KIDATA_QUERY_MEMORY; 32 MiB: 500 and 520 MB. Run AS).
READ_BATCH_ROWS = 16_384
ROW_GROUP_ROWS = 8 * READ_BATCH_ROWS  # 131,072
ROW_GROUP_BYTES = 32 << 20


def _arrow(relation, path: Path, described: dict[str, str], fmt: str) -> int:
    """Parquet, or an Arrow IPC file, each field carrying its description (metadata key
    ``description``, as the warehouse's own files do), written as DuckDB produces the rows:
    memory holds one row group, not the result."""
    import pyarrow as pa

    reader = relation.to_arrow_reader(READ_BATCH_ROWS)
    fields = [f.with_metadata({**(f.metadata or {}), b"description": described[f.name]})
              if described.get(f.name) else f for f in reader.schema]
    schema = pa.schema(fields, metadata=reader.schema.metadata)
    rows = 0
    if fmt == "parquet":
        import pyarrow.parquet as pq

        writer = pq.ParquetWriter(path, schema, compression="zstd")
    else:
        sink = pa.OSFile(str(path), "wb")
        writer = pa.ipc.new_file(sink, schema)
    held: list = []
    held_rows = held_bytes = 0

    def flush() -> None:
        nonlocal held, held_rows, held_bytes
        if held:
            writer.write_table(pa.Table.from_batches(held, schema=schema))
        held, held_rows, held_bytes = [], 0, 0

    try:
        for batch in reader:
            batch = pa.RecordBatch.from_arrays(batch.columns, schema=schema)
            rows += batch.num_rows
            if fmt != "parquet":
                writer.write_batch(batch)
                continue
            held.append(batch)
            held_rows += batch.num_rows
            held_bytes += batch.nbytes
            if held_rows >= ROW_GROUP_ROWS or held_bytes >= ROW_GROUP_BYTES:
                flush()
        flush()
    finally:
        writer.close()
        if fmt != "parquet":
            sink.close()
    return rows


def duckdb_file(connect: Callable[[], duckdb.DuckDBPyConnection], path: Path,
                parents: bool = False) -> dict[str, int]:
    """Write a DuckDB database file holding a copy of every table (the committed rows) and
    every view, with column comments: an analyst opens it in any DuckDB client, without kidata
    and without the warehouse. ``connect`` gives the warehouse's connection with every table
    and view defined (``Warehouse.connect``). Returns each table's row count."""
    if path.exists():
        raise UsageError(f"{path} exists; choose a new file (kidata never overwrites a database)")
    with outfile.writing(path, parents, overwrite=False) as tmp:
        # Written whole under a temporary name: a database with half its tables never
        # appears at ``path`` (a kill leaves only the temporary file, which a rerun ignores).
        return _duckdb_file(connect(), tmp)


def _duckdb_file(con: duckdb.DuckDBPyConnection, path: Path) -> dict[str, int]:
    import duckdb

    from kidata.core.viewfiles import load_views
    from kidata.store.schema import COLUMNS

    counts = {}
    # The tables are copied by the reading connection itself, the file attached to it, so
    # that one memory limit (KIDATA_QUERY_MEMORY) bounds the whole copy: DuckDB streams each
    # table from the Parquet files into the file without a second engine or Arrow in between.
    con.execute(f"ATTACH {quote_literal(str(path))} AS _kidata_out")
    try:
        for table in COLUMNS:
            con.execute(f"CREATE TABLE _kidata_out.main.{quote_identifier(table)} AS "
                        f"SELECT * FROM {quote_identifier(table)}")
            counts[table] = con.execute(
                f"SELECT COUNT(*) FROM _kidata_out.main.{quote_identifier(table)}"
            ).fetchall()[0][0]
            fault(f"export-duckdb:{table}")  # the crash tests: killed with tables still to copy
    finally:
        con.execute("DETACH _kidata_out")
    # Comments and views on the file's own connection: the views' bodies name the file's
    # tables as they will be read there.
    out = duckdb.connect(str(path))
    try:
        for table in COLUMNS:
            for column in COLUMNS[table]:
                out.execute(f"COMMENT ON COLUMN {quote_identifier(table)}."
                            f"{quote_identifier(column.name)} IS "
                            f"{quote_literal(column.description)}")
        for view in load_views().values():  # in dependency order
            out.execute(f"CREATE VIEW {quote_identifier(view.name)} AS {view.body}")
            out.execute(f"COMMENT ON VIEW {quote_identifier(view.name)} IS "
                        f"{quote_literal(view.purpose)}")
            defined = {r[0] for r in out.execute(
                "SELECT column_name FROM duckdb_columns() WHERE table_name = ?",
                [view.name]).fetchall()}
            for column, meaning in view.columns.items():
                if column in defined:
                    out.execute(f"COMMENT ON COLUMN {quote_identifier(view.name)}."
                                f"{quote_identifier(column)} IS {quote_literal(meaning)}")
        out.execute("CHECKPOINT")
    finally:
        out.close()
        path.with_name(path.name + ".wal").unlink(missing_ok=True)
    return counts
