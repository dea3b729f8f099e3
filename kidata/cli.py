"""The ``kidata`` command line: a thin layer over :class:`kidata.Warehouse`.

Exit codes: 0 success, 1 the work failed or some records were rejected, 2 bad usage.
Heavy modules are imported inside the commands so ``kidata --help`` starts fast.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from kidata import __version__
from kidata.errors import KidataError, UsageError

app = typer.Typer(
    name="kidata",
    help="Load GPU-kernel benchmark results into a Parquet warehouse and query them with SQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

_state: dict[str, Any] = {"warehouse": None, "debug": False}

WarehouseOpt = Annotated[
    Path | None,
    typer.Option("--warehouse", "-w",
                 help="Warehouse folder (default: $KIDATA_WAREHOUSE, else ./warehouse)."),
]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kidata {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    warehouse: WarehouseOpt = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors.")] = False,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Load GPU-kernel benchmark results into a Parquet warehouse and query them with SQL."""
    _state["warehouse"] = warehouse
    _state["debug"] = debug


def _wh(warehouse: Path | None = None):
    from kidata.warehouse import Warehouse

    return Warehouse(warehouse or _state["warehouse"])


# `kidata info` suggests compacting from this many files in one table (at 200 loads, a query
# process took 0.55 s before compacting and 0.38 s after: docs/benchmarks.md).
COMPACT_HINT_FILES = 100


def _err(message: str) -> None:
    typer.echo(message, err=True)


@app.command()
def load(
    paths: Annotated[list[str], typer.Argument(
        help="Files, folders (read recursively), globs, or '-' for standard input.")],
    format: Annotated[str | None, typer.Option(
        "--format", "-f", help="Force the input format: kernelindex, trainkernel, liger-csv "
        "(default: detected from content).")] = None,
    strict: Annotated[bool, typer.Option(
        "--strict", help="Load nothing if any record would be rejected.")] = False,
    quiet: Annotated[bool, typer.Option(
        "--quiet", "-q", help="Only print the summary line (no progress, warnings or reject "
        "lines; `kidata rejects` lists them).")] = False,
    warehouse: WarehouseOpt = None,
) -> None:
    """Validate records and add them to the warehouse (duplicates are skipped)."""
    wh = _wh(warehouse)
    progress = None
    if not quiet and sys.stderr.isatty():
        def progress(file: str, records: int) -> None:
            sys.stderr.write(f"\r\x1b[K{records:,} records read; now {file}")
            sys.stderr.flush()
    report = wh.load(paths, format=format, strict=strict, progress=progress)
    if progress is not None:
        sys.stderr.write("\r\x1b[K")
    if report.compacted and not quiet:
        merged = ", ".join(f"{t} {a:,} -> {b:,}" for t, (a, b) in report.compacted.items())
        _err(f"merged the small files of {len(report.compacted)} tables after the load "
             f"(files: {merged}; KIDATA_COMPACT_AT sets when)")
    if report.unchanged and not quiet:
        n = len(report.unchanged)
        _err(f"{n:,} file{'s' if n != 1 else ''} unchanged since a load without rejects: not "
             f"read again (their records count as duplicates)")
    if not quiet:  # the summary below counts them; `kidata rejects` lists them
        for message in report.warnings:
            _err(f"warning: {message}")
        if report.warned > len(report.warnings):
            _err(f"warning: … and {report.warned - len(report.warnings):,} more warnings")
        shown = report.rejects[:50]
        for reject in shown:
            _err(f"rejected: {reject}")
        if report.rejected > len(shown):
            _err(f"rejected: … and {report.rejected - len(shown):,} more (all are in the "
                 f"rejects table: kidata sql 'select * from rejects')")
    if report.enriched and not quiet:
        _err(f"{report.enriched:,} stored runs or workloads given the richer documents of a "
             f"duplicate record (docs/guarantees.md, 'Duplicates that carry more')")
    added = report.added
    if strict and report.rejected:
        typer.echo(f"strict: nothing loaded; {report.rejected:,} of {report.records:,} records "
                   f"would be rejected")
        raise typer.Exit(1)
    typer.echo(
        f"{report.files:,} files, {report.records:,} records: {added.get('runs', 0):,} runs "
        f"added ({added.get('measurements', 0):,} measurements, "
        f"{added.get('environments', 0):,} environments, {added.get('protocols', 0):,} "
        f"protocols, {added.get('workloads', 0):,} workloads), {report.duplicates:,} "
        f"duplicates skipped, {report.rejected:,} rejected, {report.warned:,} warnings "
        f"[{wh.path}]")
    if report.rejected:
        raise typer.Exit(1)


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help="SQL over the tables and views.")],
    format: Annotated[str, typer.Option(
        "--format", "-f", help="table, csv, json, ndjson or markdown.")] = "table",
    limit: Annotated[int, typer.Option(
        "--max-rows", help="Rows shown in table format (other formats print all).")] = 100,
    write: Annotated[bool, typer.Option(
        "--write", help="Allow statements that write (COPY, ATTACH, SET, ...); by default "
        "only queries run.")] = False,
    warehouse: WarehouseOpt = None,
) -> None:
    """Run a SQL query (read-only unless --write) and print the result."""
    from kidata import output

    if format not in output.FORMATS:
        raise typer.BadParameter(f"allowed formats are: {', '.join(output.FORMATS)}",
                                 param_hint="--format")
    relation = _wh(warehouse).sql(query, read_only=not write)
    if relation is None:  # a statement without a result
        return
    output.write(relation, format, sys.stdout, max_rows=limit)


@app.command()
def views(
    as_sql: Annotated[bool, typer.Option(
        "--sql", help="Print every table and view as one SQL script for the duckdb shell.")]
    = False,
    warehouse: WarehouseOpt = None,
) -> None:
    """List the views with their one-line purpose."""
    from kidata import views as views_mod

    if as_sql:
        wh = _wh(warehouse)
        wh.require()  # the script names the warehouse's folders: a mistyped path is an error
        typer.echo(views_mod.script(wh.path.resolve()), nl=False)
        return
    found = views_mod.load_views()
    width = max(len(n) for n in found)
    for view in found.values():
        typer.echo(f"{view.name:<{width}}  {view.purpose}")


@app.command()
def export(
    name: Annotated[str, typer.Argument(help="Table or view to export.")],
    output_path: Annotated[Path, typer.Option("--output", "-o", help="File to write.")],
    format: Annotated[str | None, typer.Option(
        "--format", "-f", help="csv, parquet, json, ndjson or xlsx (default: from the "
        "suffix); for runs also kernelindex (bundles as JSON Lines, loadable again).")] = None,
    warehouse: WarehouseOpt = None,
) -> None:
    """Export a table or view to CSV, Parquet, JSON, NDJSON or Excel."""
    from kidata import export as export_mod

    if format == "kernelindex":
        if name != "runs":
            raise typer.BadParameter("the kernelindex format exports runs (as bundles with "
                                     "their documents); use: kidata export runs --format "
                                     "kernelindex -o FILE", param_hint="--format")
        from kidata import records

        count = records.export(_wh(warehouse), output_path)
        typer.echo(f"wrote {count:,} runs as kernelindex bundles to {output_path}")
        return
    fmt = export_mod.format_for(output_path, format)
    wh = _wh(warehouse)
    rows = export_mod.export(wh.relation(name), wh.connect(), output_path, fmt, sheet=name)
    typer.echo(f"wrote {rows:,} rows of {name} to {output_path} ({fmt})")


@app.command()
def convert(
    paths: Annotated[list[str], typer.Argument(
        help="Files, folders (read recursively), globs, or '-' for standard input.")],
    output: Annotated[Path, typer.Option(
        "--output", "-o", help="Folder to write the bundles into (created if missing).")],
    to: Annotated[str, typer.Option(
        "--to", help="Target format: kernelindex (one bundle file per run, like the "
        "seeds).")] = "kernelindex",
    format: Annotated[str | None, typer.Option(
        "--format", "-f", help="Force the input format: kernelindex, trainkernel, liger-csv "
        "(default: detected from content).")] = None,
) -> None:
    """Convert records of any source kidata reads into kernelindex bundle files."""
    from kidata import convert as convert_mod

    report = convert_mod.convert(paths, output, to=to, format=format)
    for message in report.warnings:
        _err(f"warning: {message}")
    if report.warned > len(report.warnings):
        _err(f"warning: … and {report.warned - len(report.warnings):,} more warnings")
    for reject in report.rejects[:50]:
        _err(f"rejected: {reject}")
    if report.rejected > 50:
        _err(f"rejected: … and {report.rejected - 50:,} more")
    typer.echo(f"{report.files:,} files, {report.records:,} records: {report.written:,} "
               f"bundles written to {output}, {report.duplicates:,} duplicates skipped, "
               f"{report.rejected:,} rejected, {report.warned:,} warnings")
    if report.rejected:
        raise typer.Exit(1)


@app.command()
def info(warehouse: WarehouseOpt = None) -> None:
    """Show tables and row counts, sources, GPUs and the time range of the runs."""
    data = _wh(warehouse).info()
    typer.echo(f"warehouse: {data['warehouse']}")
    typer.echo("tables:")
    width = max(len(t) for t in data["tables"])
    for table, t in data["tables"].items():
        typer.echo(f"  {table:<{width}} {t['rows']:>10,} rows in {t['files']:,} files")
    typer.echo("sources: " + (", ".join(f"{k} ({v:,} runs)" for k, v in data["sources"].items())
                              or "none"))
    typer.echo("gpus: " + (", ".join(f"{k} ({v:,} runs)" for k, v in data["gpus"].items())
                           or "none"))
    lo, hi = data["observed_from"], data["observed_to"]
    typer.echo(f"observed: {lo:%Y-%m-%d %H:%M:%S} to {hi:%Y-%m-%d %H:%M:%S} UTC"
               if lo else "observed: no timestamps")
    most = max(t["files"] for t in data["tables"].values())
    if most >= COMPACT_HINT_FILES:
        typer.echo(f"hint: a table has {most:,} files (each load adds one); every query plans "
                   f"over each of them. `kidata compact` merges them.")


def _format_option(format: str) -> None:
    from kidata import output

    if format not in output.FORMATS:
        raise typer.BadParameter(f"allowed formats are: {', '.join(output.FORMATS)}",
                                 param_hint="--format")


@app.command()
def audit(
    all_claims: Annotated[bool, typer.Option(
        "--all", help="Show every published number, not only the flagged ones.")] = False,
    format: Annotated[str, typer.Option(
        "--format", "-f", help="table, csv, json, ndjson or markdown.")] = "table",
    warehouse: WarehouseOpt = None,
) -> None:
    """Recompute every published derived number (e.g. trainkernel's ratio) from its inputs and
    show those that disagree beyond rounding; exit 1 if any does."""
    from kidata import analysis, output

    _format_option(format)
    result = analysis.audit(_wh(warehouse), everything=all_claims)
    if all_claims or result.flagged:
        output.write(result.rows, format, sys.stdout, max_rows=1_000_000)
    unchecked = (f"; {result.unchecked:,} could not be checked (kidata audit --all shows why)"
                 if result.unchecked else "")
    _err(f"{result.flagged:,} of {result.claims:,} published numbers disagree with their "
         f"inputs beyond rounding{unchecked}")
    if result.flagged:
        raise typer.Exit(1)


@app.command()
def regressions(
    threshold: Annotated[float, typer.Option(
        "--threshold", "-t", help="Smallest slowdown reported, as a fraction of the previous "
        "median (0.05 = 5%).")] = 0.05,
    format: Annotated[str, typer.Option(
        "--format", "-f", help="table, csv, json, ndjson or markdown.")] = "table",
    warehouse: WarehouseOpt = None,
) -> None:
    """Show results slower than the previous result of their series, beyond noise (p20 above
    the previous p80) and by more than the threshold, with the versions involved; exit 1 if
    there are any."""
    from kidata import analysis, output

    _format_option(format)
    rows = analysis.regressions(_wh(warehouse), threshold)
    found = rows.count("*").fetchall()[0][0]
    if found:
        output.write(rows, format, sys.stdout, max_rows=1_000_000)
    _err(f"{found:,} regressions slower beyond noise and by more than {threshold:.1%}")
    if found:
        raise typer.Exit(1)


@app.command()
def rejects(
    load_id: Annotated[str | None, typer.Option(
        "--load", help="Only this load (see `kidata sql 'select * from loads'`).")] = None,
    file: Annotated[str | None, typer.Option(
        "--file", help="Only records from this input file (as it was named when loaded).")]
    = None,
    raw: Annotated[bool, typer.Option(
        "--raw", help="Also show the raw text of each record (up to 64 KiB).")] = False,
    format: Annotated[str, typer.Option(
        "--format", "-f", help="table, csv, json, ndjson or markdown.")] = "table",
    limit: Annotated[int, typer.Option(
        "--max-rows", help="Rows shown in table format (other formats print all).")] = 100,
    warehouse: WarehouseOpt = None,
) -> None:
    """List rejected records: file, position, field and what was wrong."""
    from kidata import output

    if format not in output.FORMATS:
        raise typer.BadParameter(f"allowed formats are: {', '.join(output.FORMATS)}",
                                 param_hint="--format")
    relation = _wh(warehouse).rejects(load_id=load_id, file=file)
    if not raw:
        relation = relation.project("loaded_at, load_id, source_file, position, field, reason")
    output.write(relation, format, sys.stdout, max_rows=limit)


@app.command()
def check(
    repair: Annotated[bool, typer.Option(
        "--repair", help="First complete interrupted commits and remove what dead writers "
        "left (what any load does before committing).")] = False,
    warehouse: WarehouseOpt = None,
) -> None:
    """Verify the warehouse: schemas, identities, references, commit markers, digests."""
    from kidata.check import summary

    report = _wh(warehouse).check(repair=repair)
    for line in report.repaired:
        typer.echo(f"repaired: {line}")
    for line in report.notes:
        typer.echo(f"note: {line}")
    for line in report.problems:
        _err(f"problem: {line}")
    typer.echo(summary(report))
    if not report.ok:
        raise typer.Exit(1)


@app.command()
def compact(
    tables: Annotated[list[str] | None, typer.Argument(
        help="Tables to compact (default: every table loads write).")] = None,
    warehouse: WarehouseOpt = None,
) -> None:
    """Merge each table's small files into one, without changing any query result."""
    report = _wh(warehouse).compact(tables or None)
    for table, (before, after) in report.tables.items():
        if before != after:
            typer.echo(f"{table}: {before:,} files -> {after:,}")
    typer.echo(f"compacted: {report.files_removed:,} fewer files, {report.rows:,} rows "
               "rewritten")


def run(argv: list[str] | None = None) -> int:
    """Run the CLI with ``argv`` and return its exit code: the one handler that turns kidata
    errors into ``Error: …`` on stderr (re-raised under ``--debug``)."""
    _state.update(warehouse=None, debug=False)
    try:
        result = app(args=argv, standalone_mode=False, prog_name="kidata")
        return result if isinstance(result, int) else 0
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        _err("Aborted.")
        return 1
    except typer.TyperException as exc:  # usage errors found by the parser
        exc.show()
        return getattr(exc, "exit_code", 2)
    except KidataError as exc:
        if _state["debug"] or os.environ.get("KIDATA_DEBUG"):
            raise
        _err(f"Error: {exc}")
        return 2 if isinstance(exc, UsageError) else 1
    except KeyboardInterrupt:
        _err("Interrupted.")
        return 130


def main() -> None:
    """Console-script entry point."""
    from kidata._imports import refuse_pandas

    refuse_pandas()  # unused; pyarrow would import it anyway (start-up time, memory)
    sys.exit(run())


if __name__ == "__main__":
    main()
