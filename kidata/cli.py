"""The ``kidata`` command line: a thin layer over :class:`kidata.Warehouse`.

Exit codes: 0 success, 1 the work failed or some records were rejected, 2 bad usage.
Heavy modules are imported inside the commands so ``kidata --help`` starts fast.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from kidata import __version__
from kidata.console import group_class
from kidata.core import config
from kidata.errors import KidataError, UsageError

app = typer.Typer(
    name="kidata",
    help="Load GPU-kernel benchmark results into a Parquet warehouse and query them with SQL.",
    no_args_is_help=True,
    cls=group_class(),
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

_state: dict[str, Any] = {"warehouse": None, "debug": False}

WarehouseOpt = Annotated[
    Path | None,
    typer.Option("--warehouse", "-w", metavar="DIR",
                 help="Warehouse folder (default: $KIDATA_WAREHOUSE, else ./warehouse)."),
]

CsvRawOpt = Annotated[bool, typer.Option(
    "--csv-raw", help="CSV: write text exactly, even text starting with = + - @ tab or CR, "
    "which otherwise gets a leading ' so that a spreadsheet never runs it as a formula "
    "(for programs reading the CSV).")]

ParentsOpt = Annotated[bool, typer.Option(
    "--parents", help="Create the output file's folder if it does not exist (else a missing "
    "folder is an error, as a mistyped path should be).")]


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


# Printed (on stderr, when it is a terminal) after a warehouse's first load.
NEXT_STEPS = """next:
  kidata sql "select * from speedup_summary"   how each candidate fares per GPU
  kidata views                                 what else there is to ask
  kidata report -o report.html                 charts (pip install 'kidata[report]')"""


FORMAT_HELP = ("Force the input format (default: detected from content); `kidata formats` "
               "lists them.")
SetOpt = Annotated[list[str] | None, typer.Option(
    "--set", help="Context the files lack, as key=value (gpu, observed_at, unit, "
    "implementation, kernel, pass, variant, dtype, version, statistic, x_columns); repeatable. "
    "`kidata formats` says what each format needs.")]
MappingOpt = Annotated[Path | None, typer.Option(
    "--mapping", help="Read the files by this TOML mapping (docs/formats.md) instead of a "
    "built-in format.")]


def _read_options(settings: list[str] | None, mapping: Path | None
                  ) -> tuple[dict[str, str] | None, str | None]:
    from kidata.ingest.readers.builder import Settings

    parsed = Settings.parse(settings)
    if mapping is not None:
        from kidata.ingest.mapping import load_mapping

        load_mapping(str(mapping))  # a bad mapping is a usage error, before any file is read
    return (parsed or None), (str(mapping) if mapping is not None else None)


@app.command()
def load(
    paths: Annotated[list[str], typer.Argument(
        metavar="PATH", help="Files, folders (read recursively), globs, or '-' for standard "
        "input.")],
    format: Annotated[str | None, typer.Option("--format", "-f", help=FORMAT_HELP)] = None,
    strict: Annotated[bool, typer.Option(
        "--strict", help="Load nothing if any record would be rejected.")] = False,
    quiet: Annotated[bool, typer.Option(
        "--quiet", "-q", help="Only print the summary line (no progress, warnings or reject "
        "lines; `kidata rejects` lists them).")] = False,
    set_: SetOpt = None,
    mapping: MappingOpt = None,
    warehouse: WarehouseOpt = None,
) -> None:
    """Validate records and add them to the warehouse (duplicates are skipped)."""
    settings, mapping_path = _read_options(set_, mapping)
    wh = _wh(warehouse)
    first = not wh.path.joinpath("loads").is_dir()
    progress = None
    if not quiet and sys.stderr.isatty():
        from kidata.console import LoadProgress

        progress = LoadProgress(paths, sys.stderr)
    from kidata._imports import StagingGC

    def phase(name: str) -> None:
        tuned.end()  # staged: the commit runs with the collector as it was
        if progress is not None:
            progress.phase(name)

    try:
        with StagingGC() as tuned:  # this process, tuned for staging (a library load is not)
            report = wh.load(paths, format=format, strict=strict, progress=progress,
                             phase=phase, settings=settings, mapping=mapping_path)
    finally:
        if progress is not None:
            progress.close()
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
            kept = ("all are" if not report.rejects_not_kept else
                    f"the first {report.rejected - report.rejects_not_kept:,} are")
            _err(f"rejected: … and {report.rejected - len(shown):,} more ({kept} in the "
                 f"rejects table: kidata rejects)")
    if report.rejects_not_kept:
        _err(f"rejected: {report.rejects_not_kept:,} rejects beyond the first "
             f"{report.rejected - report.rejects_not_kept:,} were counted but not kept "
             f"(KIDATA_MAX_REJECTS sets how many a load keeps)")
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
    if first and report.runs_added and not quiet and sys.stderr.isatty():
        _err(NEXT_STEPS)  # for a person at a terminal; scripts see a clean stderr
    if report.rejected:
        raise typer.Exit(1)


@app.command()
def sql(
    query: Annotated[str | None, typer.Argument(
        metavar="[QUERY]", help="SQL over the tables and views; '-' reads it from standard "
        "input.", show_default=False)] = None,
    file: Annotated[Path | None, typer.Option(
        "--file", metavar="FILE", help="Read the SQL from this file.")] = None,
    format: Annotated[str, typer.Option(
        "--format", "-f", help="table, csv, json, ndjson or markdown (standard output); "
        "with --output: csv, parquet, arrow, json, ndjson or xlsx.")] = "table",
    output_path: Annotated[Path | None, typer.Option(
        "--output", "-o", metavar="FILE", help="Write the result to FILE instead, in the "
        "format its suffix names (.csv, .parquet, .arrow, .json, .ndjson, .xlsx).")] = None,
    limit: Annotated[int, typer.Option(
        "--max-rows", help="Rows shown in table format (other formats print all).")] = 100,
    write: Annotated[bool, typer.Option(
        "--write", help="Allow statements that write (COPY, ATTACH, SET, ...); by default "
        "only queries run.")] = False,
    parents: ParentsOpt = False,
    csv_raw: CsvRawOpt = False,
    warehouse: WarehouseOpt = None,
) -> None:
    """Run a SQL query (read-only unless --write) and print the result or write it to a
    file."""
    from kidata.query import output

    if (query is None) == (file is None):
        raise typer.BadParameter("give the query as an argument ('-' for standard input) or "
                                 "with --file, not both", param_hint="QUERY")
    if file is not None:
        try:
            query = file.read_text("utf-8")
        except OSError as exc:
            raise typer.BadParameter(f"cannot read {file}: {exc.strerror}",
                                     param_hint="--file") from None
    elif query == "-":
        query = sys.stdin.read()
    if output_path is not None:
        from kidata.query import export as export_mod

        fmt = export_mod.format_for(output_path, None if format == "table" else format)
        wh = _wh(warehouse)
        relation = wh.sql(query, read_only=not write)
        if relation is None:
            raise typer.BadParameter("the statement returns no rows to write",
                                     param_hint="--output")
        rows = export_mod.export(relation, wh.connect(), output_path, fmt, sheet="query",
                                 described=export_mod.query_descriptions(query),
                                 parents=parents, csv_raw=csv_raw)
        typer.echo(f"wrote {rows:,} rows to {output_path} ({fmt})")
        return
    if format not in output.FORMATS:
        raise typer.BadParameter(f"allowed formats are: {', '.join(output.FORMATS)}",
                                 param_hint="--format")
    relation = _wh(warehouse).sql(query, read_only=not write)
    if relation is None:  # a statement without a result
        return
    output.write(relation, format, sys.stdout, max_rows=limit, csv_raw=csv_raw)


@app.command()
def views(
    as_sql: Annotated[bool, typer.Option(
        "--sql", help="Print every table and view as one SQL script for the duckdb shell.")]
    = False,
    warehouse: WarehouseOpt = None,
) -> None:
    """List the views with their one-line purpose."""
    from kidata.query import views as views_mod

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
    name: Annotated[str | None, typer.Argument(
        metavar="[NAME]", help="Table or view to export.", show_default=False)] = None,
    output_path: Annotated[Path | None, typer.Option(
        "--output", "-o", metavar="FILE", help="File to write.")] = None,
    format: Annotated[str | None, typer.Option(
        "--format", "-f", help="csv, parquet, arrow, json, ndjson or xlsx (default: from the "
        "suffix); for runs also kernelindex (bundles as JSON Lines, loadable again).")] = None,
    duckdb: Annotated[Path | None, typer.Option(
        "--duckdb", metavar="FILE", help="Instead: write a DuckDB database file with a copy "
        "of every table and every view defined, for any DuckDB client.")] = None,
    parents: ParentsOpt = False,
    csv_raw: CsvRawOpt = False,
    warehouse: WarehouseOpt = None,
) -> None:
    """Export a table or view to CSV, Parquet, Arrow, JSON, NDJSON or Excel, or everything to a
    DuckDB database file."""
    from kidata.query import export as export_mod

    if duckdb is not None:
        if name is not None or output_path is not None:
            raise typer.BadParameter("--duckdb writes every table and view; give no NAME or "
                                     "--output with it", param_hint="--duckdb")
        counts = export_mod.duckdb_file(_wh(warehouse), duckdb, parents=parents)
        typer.echo(f"wrote {len(counts)} tables ({counts.get('runs', 0):,} runs) and every "
                   f"view to {duckdb}; open it with: duckdb {duckdb}")
        return
    if name is None or output_path is None:
        raise typer.BadParameter("give a table or view and --output FILE (or --duckdb FILE)",
                                 param_hint="NAME")
    if format == "kernelindex":
        if name != "runs":
            raise typer.BadParameter("the kernelindex format exports runs (as bundles with "
                                     "their documents); use: kidata export runs --format "
                                     "kernelindex -o FILE", param_hint="--format")
        from kidata.query import bundles

        count = bundles.export(_wh(warehouse), output_path, parents=parents)
        typer.echo(f"wrote {count:,} runs as kernelindex bundles to {output_path}")
        return
    fmt = export_mod.format_for(output_path, format)
    wh = _wh(warehouse)
    rows = export_mod.export(wh.relation(name), wh.connect(), output_path, fmt, sheet=name,
                             name=name, parents=parents, csv_raw=csv_raw)
    typer.echo(f"wrote {rows:,} rows of {name} to {output_path} ({fmt})")


def _moment(value: str | None, option: str):
    from datetime import datetime

    if value is None:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not a date or time such as 2026-03-01 or "
                                 "2026-03-01T12:00 (UTC)", param_hint=option) from None


@app.command()
def report(
    output_path: Annotated[Path, typer.Option(
        "--output", "-o", help="HTML file to write.")] = Path("report.html"),
    kernel: Annotated[list[str] | None, typer.Option(
        "--kernel", "-k", metavar="NAME", help="Only this kernel (repeatable).")] = None,
    gpu: Annotated[list[str] | None, typer.Option(
        "--gpu", "-g", metavar="NAME", help="Only this GPU (repeatable).")] = None,
    implementation: Annotated[list[str] | None, typer.Option(
        "--implementation", "-i", metavar="NAME",
        help="Only this implementation (repeatable); two of them make the speedup heatmap "
        "compare the first against the second.")] = None,
    since: Annotated[str | None, typer.Option(
        "--since", metavar="DATE", help="Only results measured from then on (UTC).")] = None,
    until: Annotated[str | None, typer.Option(
        "--until", metavar="DATE", help="Only results measured before then (UTC).")] = None,
    png: Annotated[Path | None, typer.Option(
        "--png", metavar="DIR", help="Also write each chart as a PNG file into DIR.")] = None,
    svg: Annotated[Path | None, typer.Option(
        "--svg", metavar="DIR", help="Also write each chart as an SVG file into DIR.")] = None,
    parents: ParentsOpt = False,
    warehouse: WarehouseOpt = None,
) -> None:
    """Write a self-contained HTML report with charts: speedups, latency against size,
    history and regressions, efficiency, the audit and what is loaded."""
    from kidata.query.present import Filters, write_report

    filters = Filters(kernel or [], gpu or [], implementation or [],
                      _moment(since, "--since"), _moment(until, "--until"))
    result = write_report(_wh(warehouse), output_path, filters, png_dir=png, svg_dir=svg,
                          parents=parents)
    for warning in result.warnings:
        _err(f"warning: {warning}")
    for note in result.omitted:
        _err(f"left out: {note}")
    files = f" and {len(result.files):,} chart files" if result.files else ""
    typer.echo(f"wrote {output_path} ({len(result.charts):,} charts{files}) in "
               f"{result.seconds:.1f} s")


@app.command()
def convert(
    paths: Annotated[list[str], typer.Argument(
        metavar="PATH", help="Files, folders (read recursively), globs, or '-' for standard "
        "input.")],
    output: Annotated[Path, typer.Option(
        "--output", "-o", help="Folder to write the bundles into (created if missing).")],
    to: Annotated[str, typer.Option(
        "--to", help="Target format: kernelindex (one bundle file per run, like the "
        "seeds).")] = "kernelindex",
    format: Annotated[str | None, typer.Option("--format", "-f", help=FORMAT_HELP)] = None,
    set_: SetOpt = None,
    mapping: MappingOpt = None,
) -> None:
    """Convert records of any source kidata reads into kernelindex bundle files."""
    from kidata.ingest import convert as convert_mod

    settings, mapping_path = _read_options(set_, mapping)
    report = convert_mod.convert(paths, output, to=to, format=format, settings=settings,
                                 mapping=mapping_path)
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
def formats() -> None:
    """List the input formats kidata reads, with what each supplies and what it lacks (and
    the --set option that supplies it)."""
    from kidata.ingest.readers.field import describe

    for line in describe():
        typer.echo(line)


@app.command()
def info(
    format: Annotated[str, typer.Option(
        "--format", "-f", help="text, or json (one object, for scripts).")] = "text",
    warehouse: WarehouseOpt = None,
) -> None:
    """Show tables and row counts, sources, GPUs and the time range of the runs."""
    if format not in ("text", "json"):
        raise typer.BadParameter("allowed formats are: text, json", param_hint="--format")
    data = _wh(warehouse).info()
    if format == "json":
        import orjson

        from kidata.query.output import plain

        typer.echo(orjson.dumps(plain(data), option=orjson.OPT_INDENT_2).decode())
        return
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
    from kidata.query import output

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
    from kidata.query import analysis, output

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
    """Show results slower than the previous result of their series, beyond noise (run-to-run
    noise, else p20 above the previous p80) and by more than the threshold, and not a shift
    shared with the implementations measured beside them; exit 1 if there are any."""
    from kidata.query import analysis, output

    _format_option(format)
    rows = analysis.regressions(_wh(warehouse), threshold)
    found = rows.count("*").fetchall()[0][0]
    if found:
        output.write(rows, format, sys.stdout, max_rows=1_000_000)
    _err(f"{found:,} regressions slower beyond noise and by more than {threshold:.1%}")
    if found:
        raise typer.Exit(1)


@app.command()
def compare(
    baseline: Annotated[str, typer.Argument(
        help="The baseline side: an implementation ('torch'), or fields such as "
        "'implementation=liger,version=0.2.1' (fields: implementation, variant, version, load, "
        "gpu, gpu_family, family, kernel, pass, workload, label.<name>).")],
    candidate: Annotated[str, typer.Argument(help="The candidate side, in the same form.")],
    threshold: Annotated[float, typer.Option(
        "--threshold", "-t", help="Smallest change counted, as a fraction of the baseline "
        "median (0.05 = 5%).")] = 0.05,
    format: Annotated[str, typer.Option(
        "--format", "-f", help="table, csv, json, ndjson or markdown.")] = "table",
    only_changed: Annotated[bool, typer.Option(
        "--only-changed", help="List only keys slower or faster beyond noise and threshold."
    )] = False,
    warehouse: WarehouseOpt = None,
) -> None:
    """Compare two versions, loads or labels of an implementation, or two implementations,
    over every key both have, with noise-aware verdicts. Exit 1 if any key is slower beyond
    noise and the threshold (a CI gate), 0 if none, 2 on a usage error, 3 when nothing could be
    compared (no shared key, or the query failed)."""
    from kidata.query import analysis, output

    _format_option(format)
    try:
        result = analysis.compare(_wh(warehouse), baseline, candidate, threshold)
    except UsageError:
        raise
    except KidataError as exc:
        _err(f"Error: {exc}")
        raise typer.Exit(3) from None
    if result.shared == 0:
        _err(f"nothing to compare: no key has a passed run on both sides ({baseline!r} and "
             f"{candidate!r})")
        raise typer.Exit(3)
    rows = result.rows
    if only_changed:
        rows = rows.filter(f"verdict IN ('slower', 'faster') AND ABS(LN(ratio)) > "
                           f"LN(1 + {float(threshold)!r})")
    output.write(rows, format, sys.stdout, max_rows=1_000_000)
    geomean = "n/a" if result.geomean_ratio is None else f"{result.geomean_ratio:.4g}"
    _err(f"{result.shared:,} shared keys: {result.slower:,} slower, {result.faster:,} faster "
         f"(beyond noise and {threshold:.1%}), {result.unchanged:,} unchanged, "
         f"{result.no_verdict:,} without a verdict (no measured spread); "
         f"candidate/baseline geomean over {result.kernels:,} kernel-passes {geomean}")
    if result.regressed:
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
    from kidata.query import output

    if format not in output.FORMATS:
        raise typer.BadParameter(f"allowed formats are: {', '.join(output.FORMATS)}",
                                 param_hint="--format")
    wh = _wh(warehouse)
    relation = wh.rejects(load_id=load_id, file=file)
    if not raw:
        relation = relation.project("loaded_at, load_id, source_file, position, field, reason")
    output.write(relation, format, sys.stdout, max_rows=limit)
    for load, not_kept in wh.rejects_not_kept(load_id):
        _err(f"note: load {load} rejected {not_kept:,} more records than it kept here "
             f"(KIDATA_MAX_REJECTS); `loads` has the counts")


@app.command()
def check(
    repair: Annotated[bool, typer.Option(
        "--repair", help="First complete interrupted commits and remove what dead writers "
        "left (what any load does before committing).")] = False,
    warehouse: WarehouseOpt = None,
) -> None:
    """Verify the warehouse: schemas, identities, references, commit markers, digests."""
    from kidata.store.verify import summary

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
def unload(
    load_ids: Annotated[list[str] | None, typer.Argument(
        help="Loads to take out (their load_id, as `kidata sql 'select * from loads'` "
        "lists them).", show_default=False)] = None,
    damaged: Annotated[bool, typer.Option(
        "--damaged", help="Take out every load whose commit `kidata check` finds "
        "inconsistent (runs twice, measurements lost: kidata 0.2.5-0.2.7).")] = False,
    warehouse: WarehouseOpt = None,
) -> None:
    """Take loads out whole, so that loading their files again adds what they held."""
    if not load_ids and not damaged:
        raise typer.BadParameter("name the loads to take out, or give --damaged")
    done, removed = _wh(warehouse).unload(load_ids, damaged=damaged)
    if not done:
        typer.echo("no load to take out: kidata check finds no damaged load")
        return
    rows = ", ".join(f"{n:,} {table}" for table, n in removed.items() if n) or "no rows"
    typer.echo(f"took out {len(done):,} load(s) ({rows}): {', '.join(done)}")
    typer.echo("load their files again to add what they held (kidata load FILE...)")


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
        if _state["debug"] or config.value("KIDATA_DEBUG"):
            if getattr(exc, "detail", None):  # e.g. a staging worker's own traceback
                _err(exc.detail)
            raise
        _err(f"Error: {exc}")
        return 2 if isinstance(exc, UsageError) else 1
    except KeyboardInterrupt:
        _err("Interrupted.")
        return 130
    except Exception as exc:
        message = _engine_error(exc)
        if message is None or _state["debug"] or config.value("KIDATA_DEBUG"):
            raise
        _err(f"Error: {message}")
        return 1


def _engine_error(exc: Exception) -> str | None:
    """The message of an error DuckDB or the file system raised while a command was already
    producing its result (a query's rows are computed as they are printed: a failing cast, a
    file swapped by a compaction, a disk that fills); None for anything else (a bug, which
    keeps its traceback)."""
    duckdb = sys.modules.get("duckdb")
    if duckdb is not None and isinstance(exc, duckdb.Error):
        return str(exc).split("\n\nLINE ", 1)[0].strip()
    if isinstance(exc, OSError):
        return str(exc)
    return None


def main() -> None:
    """Console-script entry point."""
    from kidata._imports import refuse_pandas, use_system_allocator

    refuse_pandas()  # unused; pyarrow would import it anyway (start-up time, memory)
    use_system_allocator()  # before pyarrow is imported: a lower load peak, same CPU
    sys.exit(run())


if __name__ == "__main__":
    main()
