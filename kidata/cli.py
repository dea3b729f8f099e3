"""The ``kidata`` command line: a thin layer over :class:`kidata.Warehouse`.

Each command parses its options, calls the facade (:class:`kidata.Warehouse`, or
:mod:`kidata.library` for what needs no warehouse) and prints through one
:class:`~kidata.cli_output.Output`; it imports nothing below the facade
(``tests/cli/test_layers.py``). Exit codes: 0 success, 1 the work failed or some records were
rejected, 2 bad usage. The facade is imported inside the commands so ``kidata --help`` starts
fast.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kidata import __version__
from kidata.cli_output import Output, check_format
from kidata.console import group_class
from kidata.core import config
from kidata.errors import KidataError, UsageError

if TYPE_CHECKING:
    import click  # typer's own dependency

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
out = Output()

SinceOpt = Annotated[str | None, typer.Option(
    "--since", metavar="WHEN", help="Only results measured from then on: a date or time "
    "(2026-03-01, 2026-03-01T12:00Z; UTC) or a span back from now (30d, 12h, 2w).")]
UntilOpt = Annotated[str | None, typer.Option(
    "--until", metavar="WHEN", help="Only results measured before then (as --since).")]
# The --format of the commands that print rows (regressions, compare, changes, ...).
RowsFormatOpt = Annotated[str, typer.Option(
    "--format", "-f", help="table, csv, json, ndjson or markdown.")]
MinEffectOpt = Annotated[float | None, typer.Option(
    "--min-effect", metavar="FRACTION", help="The verdict rule's minimum effect: a change "
    "smaller than this is never 'faster' or 'slower' (0.05 = 5%; default 0.10 or "
    "$KIDATA_MIN_EFFECT).")]
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
        out.echo(f"kidata {__version__}")
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
    if debug:  # the library's too (a reader's failure raises instead of being a reject)
        config.turn_on("KIDATA_DEBUG")


def _wh(warehouse: Path | None = None, since: str | None = None, until: str | None = None,
        min_effect: float | None = None):
    from kidata.warehouse import Warehouse

    return Warehouse(warehouse or _state["warehouse"], since=since, until=until,
                     min_effect=min_effect)


# `kidata info` suggests compacting from this many files in one table (at 200 loads, a query
# process took 0.55 s before compacting and 0.38 s after: docs/benchmarks.md).
COMPACT_HINT_FILES = 100


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
    """Validate records and add them to the warehouse (duplicates are skipped). A folder
    with a kidata.toml at its top is read as that file says, per glob (docs/formats.md)."""
    from kidata.library import read_options

    settings, mapping_path = read_options(set_, mapping)
    wh = _wh(warehouse)
    first = not wh.layout.table("loads").is_dir()  # no load committed here yet
    progress = None
    if not quiet and out.err.isatty():
        from kidata.console import LoadProgress

        progress = LoadProgress(paths, out.err)
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
        n = len(report.compacted)
        out.note(f"merged the small files of {n} table{'s' if n != 1 else ''} after the load "
                 f"(files: {merged}; {report.compacted_why})")
    if report.unchanged and not quiet:
        n = len(report.unchanged)
        out.note(f"{n:,} file{'s' if n != 1 else ''} unchanged since a load without rejects: "
                 f"not read again (their records count as duplicates)")
    if not quiet:  # the summary below counts them; `kidata rejects` lists them
        kept = ("all are" if not report.rejects_not_kept else
                f"the first {report.rejected - report.rejects_not_kept:,} are")
        out.report_lines(report, more=f" ({kept} in the rejects table: kidata rejects)")
    if report.rejects_not_kept:
        out.note(f"rejected: {report.rejects_not_kept:,} rejects beyond the first "
                 f"{report.rejected - report.rejects_not_kept:,} were counted but not kept "
                 f"(KIDATA_MAX_REJECTS sets how many a load keeps)")
    if report.enriched and not quiet:
        out.note(f"{report.enriched:,} stored runs or workloads given the richer documents of "
                 f"a duplicate record (docs/guarantees.md, 'Duplicates that carry more')")
    added = report.added
    if strict and report.rejected:
        out.echo(f"strict: nothing loaded; {report.rejected:,} of {report.records:,} records "
                 f"would be rejected")
        raise typer.Exit(1)
    samples = f"{added['samples']:,} samples, " if added.get("samples") else ""
    out.echo(
        f"{report.files:,} files, {report.records:,} records: {added.get('runs', 0):,} runs "
        f"added ({added.get('measurements', 0):,} measurements, {samples}"
        f"{added.get('environments', 0):,} environments, {added.get('protocols', 0):,} "
        f"protocols, {added.get('workloads', 0):,} workloads), {report.duplicates:,} "
        f"duplicates skipped, {report.rejected:,} rejected, {report.warned:,} warnings "
        f"[{wh.path}]")
    if first and report.runs_added and not quiet and out.err.isatty():
        out.note(NEXT_STEPS)  # for a person at a terminal; scripts see a clean stderr
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
    since: SinceOpt = None,
    until: UntilOpt = None,
    min_effect: MinEffectOpt = None,
    warehouse: WarehouseOpt = None,
) -> None:
    """Run a SQL query (read-only unless --write) and print the result or write it to a
    file."""
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
        written = _wh(warehouse, since, until, min_effect).export_query(
            query, output_path, None if format == "table" else format, read_only=not write,
            parents=parents, csv_raw=csv_raw)
        if written is None:
            raise typer.BadParameter("the statement returns no rows to write",
                                     param_hint="--output")
        out.echo(f"wrote {written.rows:,} rows to {output_path} ({written.format})")
        return
    check_format(format)
    relation = _wh(warehouse, since, until, min_effect).sql(query, read_only=not write)
    if relation is None:  # a statement without a result
        return
    out.rows(relation, format, max_rows=limit, csv_raw=csv_raw)


@app.command()
def views(
    as_sql: Annotated[bool, typer.Option(
        "--sql", help="Print every table and view as one SQL script for the duckdb shell.")]
    = False,
    warehouse: WarehouseOpt = None,
) -> None:
    """List the views with their one-line purpose."""
    if as_sql:  # the script names the warehouse's folders: a mistyped path is an error
        out.echo(_wh(warehouse).views_script(), nl=False)
        return
    from kidata.library import views as defined

    found = defined()
    width = max(len(n) for n in found)
    for name, purpose in found.items():
        out.echo(f"{name:<{width}}  {purpose}")


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
    since: SinceOpt = None,
    until: UntilOpt = None,
    min_effect: MinEffectOpt = None,
    warehouse: WarehouseOpt = None,
) -> None:
    """Export a table or view to CSV, Parquet, Arrow, JSON, NDJSON or Excel, or everything to a
    DuckDB database file."""
    if duckdb is not None:
        if name is not None or output_path is not None:
            raise typer.BadParameter("--duckdb writes every table and view; give no NAME or "
                                     "--output with it", param_hint="--duckdb")
        counts = _wh(warehouse, since, until, min_effect).export_duckdb(duckdb, parents=parents)
        out.echo(f"wrote {len(counts)} tables ({counts.get('runs', 0):,} runs) and every "
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
    written = _wh(warehouse, since, until, min_effect).export(
        name, output_path, format, parents=parents, csv_raw=csv_raw)
    if written.format == "kernelindex":
        out.echo(f"wrote {written.rows:,} runs as kernelindex bundles to {output_path}")
    else:
        out.echo(f"wrote {written.rows:,} rows of {name} to {output_path} ({written.format})")


def _moment(value: str | None, option: str):
    """A ``--since``/``--until`` of the report (:func:`kidata.library.moment`)."""
    from kidata.library import moment

    return None if value is None else moment(value, option)


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
    min_effect: MinEffectOpt = None,
    warehouse: WarehouseOpt = None,
) -> None:
    """Write a self-contained HTML report with charts: speedups, latency against size,
    history and regressions, efficiency, the audit and what is loaded."""
    start, end = _moment(since, "--since"), _moment(until, "--until")
    result = _wh(warehouse, min_effect=min_effect).report(
        output_path, kernels=kernel or [], gpus=gpu or [], implementations=implementation or [],
        since=start, until=end, png_dir=png, svg_dir=svg, parents=parents)
    for warning in result.warnings:
        out.note(f"warning: {warning}")
    for note in result.omitted:
        out.note(f"left out: {note}")
    files = f" and {len(result.files):,} chart files" if result.files else ""
    out.echo(f"wrote {output_path} ({len(result.charts):,} charts{files}) in "
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
    from kidata.library import convert as convert_files
    from kidata.library import read_options

    settings, mapping_path = read_options(set_, mapping)
    report = convert_files(paths, output, to=to, format=format, settings=settings,
                           mapping=mapping_path)
    out.report_lines(report)
    out.echo(f"{report.files:,} files, {report.records:,} records: {report.written:,} "
             f"bundles written to {output}, {report.duplicates:,} duplicates skipped, "
             f"{report.rejected:,} rejected, {report.warned:,} warnings")
    if report.rejected:
        raise typer.Exit(1)


@app.command()
def formats() -> None:
    """List the input formats kidata reads, with what each supplies and what it lacks (and
    the --set option that supplies it)."""
    from kidata.library import formats as described

    for line in described():
        out.echo(line)


@app.command()
def info(
    format: Annotated[str, typer.Option(
        "--format", "-f", help="text, or json (one object, for scripts).")] = "text",
    since: SinceOpt = None,
    until: UntilOpt = None,
    warehouse: WarehouseOpt = None,
) -> None:
    """Show tables and row counts, sources, GPUs and the time range of the runs."""
    check_format(format, ("text", "json"))
    data = _wh(warehouse, since, until).info()
    if format == "json":
        out.json(data)
        return
    out.echo(f"warehouse: {data['warehouse']}")
    out.echo("tables:")
    width = max(len(t) for t in data["tables"])
    for table, t in data["tables"].items():
        out.echo(f"  {table:<{width}} {t['rows']:>10,} rows in {t['files']:,} files")
    out.echo("sources: " + (", ".join(f"{k} ({v:,} runs)" for k, v in data["sources"].items())
                            or "none"))
    out.echo("gpus: " + (", ".join(f"{k} ({v:,} runs)" for k, v in data["gpus"].items())
                         or "none"))
    lo, hi = data["observed_from"], data["observed_to"]
    out.echo(f"observed: {lo:%Y-%m-%d %H:%M:%S} to {hi:%Y-%m-%d %H:%M:%S} UTC"
             if lo else "observed: no timestamps")
    most = max(t["files"] for t in data["tables"].values())
    if most >= COMPACT_HINT_FILES:
        out.echo(f"hint: a table has {most:,} files (each load adds one); every query plans "
                 f"over each of them. `kidata compact` merges them.")


@app.command()
def audit(
    all_claims: Annotated[bool, typer.Option(
        "--all", help="Show every published number, not only the flagged ones.")] = False,
    format: RowsFormatOpt = "table",
    since: SinceOpt = None,
    until: UntilOpt = None,
    warehouse: WarehouseOpt = None,
) -> None:
    """Recompute every published derived number (e.g. trainkernel's ratio) from its inputs and
    show those that disagree beyond rounding; exit 1 if any does."""
    check_format(format)
    result = _wh(warehouse, since, until).audit(everything=all_claims)
    if all_claims or result.flagged:
        out.rows(result.rows, format, max_rows=1_000_000)
    unchecked = (f"; {result.unchecked:,} could not be checked (kidata audit --all shows why)"
                 if result.unchecked else "")
    out.note(f"{result.flagged:,} of {result.claims:,} published numbers disagree with their "
             f"inputs beyond rounding{unchecked}")
    if result.flagged:
        raise typer.Exit(1)


@app.command()
def regressions(
    threshold: Annotated[float | None, typer.Option(
        "--threshold", "-t", help="Smallest slowdown reported, as a fraction of the previous "
        "result (0.05 = 5%): the verdict rule's minimum effect (default 0.10 or "
        "$KIDATA_MIN_EFFECT).")] = None,
    format: RowsFormatOpt = "table",
    since: SinceOpt = None,
    until: UntilOpt = None,
    warehouse: WarehouseOpt = None,
) -> None:
    """Show results slower than the previous result of their series, beyond noise (Welch,
    calibrated run-to-run noise, else within-run spreads: docs/statistics.md) and by more than
    the threshold, between two versions, and not a shift shared with the implementations
    measured beside them, of the session or of the environment (those are counted, and listed
    by the shifts view); exit 1 if there are any."""
    check_format(format)
    wh = _wh(warehouse, since, until, threshold)
    scan = wh.regression_scan()  # the rows and both counts from one pass over trends
    found, acked, shifted, threshold = scan.found, scan.acknowledged, scan.shifted, scan.threshold
    if found:
        out.rows(scan.rows, format, max_rows=1_000_000)
    out.note(f"{found:,} regressions slower beyond noise and by more than {threshold:.1%}"
             + (f" ({acked:,} acknowledged left out: kidata sql 'select * from "
                "acknowledgements')" if acked else "")
             + (f"; {shifted:,} slower steps left out as shifts of the session, the "
                "environment or a re-run: kidata sql 'select * from shifts'" if shifted else ""))
    if found:
        raise typer.Exit(1)


@app.command()
def changes(
    min_effect: MinEffectOpt = None,
    min_points: Annotated[int, typer.Option(
        "--min-points", help="Search only series with at least this many timed results.")] = 6,
    format: RowsFormatOpt = "table",
    since: SinceOpt = None,
    until: UntilOpt = None,
    warehouse: WarehouseOpt = None,
) -> None:
    """Show where each latency series' level moved over its whole history (change points:
    asv's step objective, solved exactly; docs/statistics.md), beyond the minimum effect, each
    with its cause (code, same version, shared, session, environment). The one-step
    `regressions` stays the CI rule; this finds steps made of several results.
    Needs pip install 'kidata[changes]'."""
    check_format(format)
    result = _wh(warehouse, since, until, min_effect).changes(min_points=min_points)
    if result.found:
        out.rows(result.rows, format, max_rows=1_000_000)
    out.note(f"{result.found:,} change points in {result.series:,} series "
             f"({result.slower:,} slower, {result.code_slower:,} of them the code's) beyond "
             f"the {result.min_effect:.1%} minimum effect")


@app.command()
def compare(
    baseline: Annotated[str, typer.Argument(
        help="The baseline side: an implementation ('torch'), or fields such as "
        "'implementation=liger,version=0.2.1' (fields: implementation, variant, version, load, "
        "gpu, gpu_family, family, kernel, pass, workload, commit, branch, ci_run, label.<name>).")],
    candidate: Annotated[str, typer.Argument(help="The candidate side, in the same form.")],
    threshold: Annotated[float | None, typer.Option(
        "--threshold", "-t", help="Smallest change counted, as a fraction of the baseline "
        "(0.05 = 5%): the verdict rule's minimum effect (default 0.10 or "
        "$KIDATA_MIN_EFFECT).")] = None,
    format: RowsFormatOpt = "table",
    only_changed: Annotated[bool, typer.Option(
        "--only-changed", help="List only keys slower or faster beyond noise and threshold."
    )] = False,
    since: SinceOpt = None,
    until: UntilOpt = None,
    warehouse: WarehouseOpt = None,
) -> None:
    """Compare two versions, loads or labels of an implementation, or two implementations,
    over every key both have, with noise-aware verdicts. Exit 1 if any key is slower beyond
    noise and the threshold and not a shift of the session it was measured in (docs/statistics.md
    section 4), 0 if none, 2 on a usage error, 3 when nothing could be compared (no shared key,
    or the query failed)."""
    check_format(format)
    try:
        result = _wh(warehouse, since, until, threshold).compare(
            baseline, candidate, only_changed=only_changed)
        threshold = result.threshold
    except UsageError:
        raise
    except KidataError as exc:
        out.error(str(exc))
        raise typer.Exit(3) from None
    if result.shared == 0:
        out.note(f"nothing to compare: no key has a passed run on both sides ({baseline!r} and "
                 f"{candidate!r})")
        raise typer.Exit(3)
    out.rows(result.rows, format, max_rows=1_000_000)
    geomean = ("n/a" if result.geomean_speedup is None else
               f"{result.geomean_speedup:.4g}x (above 1: candidate faster; latency ratio "
               f"{result.geomean_ratio:.4g})")
    out.note(f"{result.shared:,} shared keys: {result.slower:,} slower, {result.faster:,} faster "
             f"(beyond noise and {threshold:.1%}), {result.unchanged:,} unchanged, "
             f"{result.no_verdict:,} without a verdict (no noise estimate)"
             + (f", {result.shifted:,} slower with their session (session_shift, code_change)"
                if result.shifted else "")
             + f"; geomean speedup over {result.kernels:,} kernel-passes {geomean}")
    if result.regressed:
        raise typer.Exit(1)


SIDE_HELP = ("fields such as 'liger,branch=main' or 'load=<id>' (as compare takes them: "
             "implementation, variant, version, load, commit, branch, ci_run, gpu, gpu_family, "
             "family, kernel, pass, workload, label.<name>)")


@app.command()
def gate(
    baseline: Annotated[str, typer.Argument(help=f"The baseline side: {SIDE_HELP}.")],
    candidate: Annotated[str, typer.Argument(help="The candidate side, in the same form.")],
    thresholds: Annotated[Path | None, typer.Option(
        "--thresholds", help="A TOML file of thresholds: global, and per kernel, GPU, pass "
        "and metric; no_spread = \"percent\" judges keys without a spread by their change "
        "(docs/ci.md).")] = None,
    threshold: Annotated[float | None, typer.Option(
        "--threshold", "-t", help="The global threshold, as a fraction of the baseline "
        "(0.05 = 5%); replaces the file's.")] = None,
    start_point: Annotated[str | None, typer.Option(
        "--start-point", help="The baseline when BASELINE shares no key with the candidate "
        "(a new branch's first run), e.g. 'branch=main'.")] = None,
    summary: Annotated[Path | None, typer.Option(
        "--summary", help="Write the Markdown summary to this file too (default: "
        "$GITHUB_STEP_SUMMARY when set, appended).")] = None,
    report_url: Annotated[str | None, typer.Option(
        "--report-url", help="A link to the report, put in the Markdown summary.")] = None,
    format: Annotated[str, typer.Option(
        "--format", "-f", help="table, csv, json, ndjson or markdown (the rows).")] = "table",
    all_keys: Annotated[bool, typer.Option(
        "--all", help="List every shared key, not only those slower or faster.")] = False,
    sessions: Annotated[bool, typer.Option(
        "--sessions", help="Read the two sides as two sessions: a key slower with its "
        "session (the implementation's other keys moved alike and another implementation "
        "measured in both moved too) is 'session shift', not slower (docs/ci.md).")] = False,
    since: SinceOpt = None,
    until: UntilOpt = None,
    warehouse: WarehouseOpt = None,
) -> None:
    """A regression gate for CI: judge the candidate against the baseline key by key (the
    verdict rule and the thresholds), acknowledged slowdowns left out. Exit 0 if nothing is
    slower, 1 if a key is, 2 on a usage error, 3 when nothing could be compared."""
    from kidata.core import config

    check_format(format)
    try:
        result = _wh(warehouse, since, until, threshold).gate(
            baseline, candidate, thresholds, threshold, start_point, sessions)
    except UsageError:
        raise
    except KidataError as exc:
        out.error(str(exc))
        raise typer.Exit(3) from None
    rows = result.rows if all_keys else result.rows.filter(
        "outcome IN ('slower', 'faster', 'session shift')")
    if result.shared:
        if all_keys or result.slower or result.faster or result.shifted or format != "table":
            out.rows(rows, format, max_rows=1_000_000)
    else:
        out.note(f"nothing to compare: no key has a passed run on both sides ({baseline!r} "
                 f"and {candidate!r}"
                 + (f", nor with the start point {start_point!r})" if start_point else ")"))
    out.note(result.summary_line())
    text = result.markdown(report_url)
    targets = [summary] if summary else []
    step = config.github_step_summary()
    if step:
        targets.append(Path(step))
    for target in targets:
        try:
            with open(target, "a" if target != summary else "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            raise KidataError(f"cannot write the summary to {target}: "
                              f"{exc.strerror or exc}") from None
    raise typer.Exit(result.exit_code)


@app.command()
def ack(
    runs: Annotated[list[str] | None, typer.Argument(
        help="Runs whose slowdown is intended (a gate's candidate_run_id, a regression's "
        "run_id). With --baseline/--candidate: only those of the gate's slower keys.")] = None,
    reason: Annotated[str, typer.Option(
        "--reason", "-m", help="Why the slowdown is intended (required).")] = "",
    baseline: Annotated[str | None, typer.Option(
        "--baseline", help=f"With --candidate: acknowledge what this gate finds slower; "
        f"{SIDE_HELP}.")] = None,
    candidate: Annotated[str | None, typer.Option(
        "--candidate", help="The gate's candidate side.")] = None,
    thresholds: Annotated[Path | None, typer.Option(
        "--thresholds", help="The gate's thresholds file (as kidata gate).")] = None,
    threshold: Annotated[float | None, typer.Option(
        "--threshold", "-t", help="The gate's global threshold (as kidata gate).")] = None,
    by: Annotated[str | None, typer.Option(
        "--by", help="Who acknowledges (default: the CI's actor, else your user name).")]
    = None,
    warehouse: WarehouseOpt = None,
) -> None:
    """Record that slowdowns are intended: kidata gate and kidata regressions leave them out
    (and say how many). Kept in the warehouse's acknowledgements table: who, why, when, the
    runs."""
    added = _wh(warehouse).ack(reason, by, runs or None, baseline, candidate, thresholds,
                               threshold)
    for row in added:
        change = "" if row.get("change") is None else f" ({row['change']:+.1%})"
        out.echo(f"acknowledged {row['run_id']}: {row['kernel']} {row['pass']} "
                 f"{row['workload']} on {row['gpu']}{change}")
    out.note(f"{len(added):,} slowdown{'s' * (len(added) != 1)} acknowledged"
             + ("" if added or baseline is None else ": the gate found nothing slower"))


@app.command()
def rejects(
    load_id: Annotated[str | None, typer.Option(
        "--load", help="Only this load (see `kidata sql 'select * from loads'`).")] = None,
    file: Annotated[str | None, typer.Option(
        "--file", help="Only records from this input file (as it was named when loaded).")]
    = None,
    raw: Annotated[bool, typer.Option(
        "--raw", help="Also show the raw text of each record (up to 64 KiB).")] = False,
    everything: Annotated[bool, typer.Option(
        "--all", help="Also the rejects of files a later load read again (resolved or "
        "superseded by that read).")] = False,
    format: RowsFormatOpt = "table",
    limit: Annotated[int, typer.Option(
        "--max-rows", help="Rows shown in table format (other formats print all).")] = 100,
    since: SinceOpt = None,
    until: UntilOpt = None,
    warehouse: WarehouseOpt = None,
) -> None:
    """List rejected records still unresolved: file, position, field and what was wrong. A
    reject whose file a later load read again is left out (--all lists it)."""
    check_format(format)
    wh = _wh(warehouse, since, until)
    relation = wh.rejects(load_id=load_id, file=file, everything=everything)
    if not raw:
        relation = relation.project("loaded_at, load_id, source_file, position, field, reason")
    out.rows(relation, format, max_rows=limit)
    if not everything and load_id is None:
        hidden = wh.superseded_rejects(file)
        if hidden:
            out.note(f"note: {hidden:,} rejects of files that a later load read again are not "
                     "listed (the newest read of a file says what is wrong with it now); "
                     "--all lists them")
    for load, not_kept in wh.rejects_not_kept(load_id):
        out.note(f"note: load {load} rejected {not_kept:,} more records than it kept here "
                 f"(KIDATA_MAX_REJECTS); `loads` has the counts")


@app.command()
def check(
    repair: Annotated[bool, typer.Option(
        "--repair", help="First complete interrupted commits and remove what dead writers "
        "left (what any load does before committing), restore commit markers, and write the "
        "derived tables again (latest_runs; step_context, computed afresh).")] = False,
    warehouse: WarehouseOpt = None,
) -> None:
    """Verify the warehouse: schemas, identities, references, commit markers, digests."""
    from kidata.library import check_summary

    report = _wh(warehouse).check(repair=repair)
    for line in report.repaired:
        out.echo(f"repaired: {line}")
    for line in report.notes:
        out.echo(f"note: {line}")
    for line in report.problems:
        out.note(f"problem: {line}")
    out.echo(check_summary(report))
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
        out.echo("no load to take out: kidata check finds no damaged load")
        return
    rows = ", ".join(f"{n:,} {table}" for table, n in removed.items() if n) or "no rows"
    out.echo(f"took out {len(done):,} load(s) ({rows}): {', '.join(done)}")
    out.echo("load their files again to add what they held (kidata load FILE...)")


@app.command()
def compact(
    tables: Annotated[list[str] | None, typer.Argument(
        help="Tables to compact (default: every table loads write).")] = None,
    warehouse: WarehouseOpt = None,
) -> None:
    """Merge each table's small files into one, without changing any query result (runs
    files not sorted by GPU, kernel, pass and time, as older versions wrote them, are
    rewritten sorted, and sorted ones cut into small row groups rewritten in larger ones)."""
    report = _wh(warehouse).compact(tables or None)
    for line in report.upgraded:
        out.echo(line)
    for table, (before, after) in report.tables.items():
        mixed = report.reclustered.get(table)
        fine = report.regrouped.get(table)
        notes = ([f"{mixed:,} {'file' if mixed == 1 else 'files'} rewritten sorted by GPU, "
                  "kernel, pass and time"] if mixed else []) + (
            [f"{fine:,} {'file' if fine == 1 else 'files'} rewritten in larger row groups"]
            if fine else []) + (
            [f"{report.steps:,} steps stored again"] if table == report.STEPS else [])
        if before != after or notes:
            out.echo(f"{table}: {before:,} files -> {after:,}"
                     + (f" ({'; '.join(notes)})" if notes else ""))
    out.echo(f"compacted: {report.files_removed:,} fewer files, {report.rows:,} rows "
             "rewritten")


@functools.cache
def _command() -> click.Command:
    """The click command typer makes of ``app``, made once per process: making it reads every
    command's signature and type hints (~70 ms), which a process that runs several commands
    (a library caller, the tests) would otherwise pay for each. Called directly rather than
    through ``app()``, which also sets ``sys.excepthook`` in the caller's process."""
    return typer.main.get_command(app)


def run(argv: list[str] | None = None) -> int:
    """Run the CLI with ``argv`` and return its exit code: the one handler that turns kidata
    errors into ``Error: …`` on stderr (re-raised under ``--debug``)."""
    _state.update(warehouse=None, debug=False)
    try:
        result = _command().main(args=argv, standalone_mode=False, prog_name="kidata")
        return result if isinstance(result, int) else 0
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        out.note("Aborted.")
        return 1
    except typer.TyperException as exc:  # usage errors found by the parser
        exc.show()
        return getattr(exc, "exit_code", 2)
    except KidataError as exc:
        if _state["debug"] or config.value("KIDATA_DEBUG"):
            if getattr(exc, "detail", None):  # e.g. a staging worker's own traceback
                out.note(exc.detail)
            raise
        out.error(str(exc))
        return 2 if isinstance(exc, UsageError) else 1
    except KeyboardInterrupt:
        out.note("Interrupted.")
        return 130
    except Exception as exc:
        message = out.failure(exc)
        if message is None or _state["debug"] or config.value("KIDATA_DEBUG"):
            raise
        out.error(message)
        return 1


def main() -> None:
    """Console-script entry point."""
    from kidata._imports import refuse_pandas, use_system_allocator

    refuse_pandas()  # unused; pyarrow would import it anyway (start-up time, memory)
    use_system_allocator()  # before pyarrow is imported: a lower load peak, same CPU
    sys.exit(run())


if __name__ == "__main__":
    main()
