"""``kidata report``: one self-contained HTML page (charts inlined as SVG, styles inline, no
script, font or request at view time; a Content-Security-Policy forbids any), plus each chart
as PNG or SVG on request."""

from __future__ import annotations

import html
import importlib.util
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kidata import __version__
from kidata.errors import UsageError
from kidata.query import outfile
from kidata.query.present import charts as charts_mod
from kidata.query.present import data, drawing
from kidata.query.present.data import Filters

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    import polars as pl

    from kidata.query.session import Queryable

# Rows of the audit table shown on the page (flagged claims first); the rest are counted.
MAX_AUDIT_ROWS = 200

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;
max-width:1400px;padding:0 1.5rem 3rem;color:#1b1b1b}
h1{font-size:1.6rem;margin:1.2rem 0 .2rem}h2{margin-top:2.2rem;border-bottom:1px solid #ddd}
nav a{margin-right:1rem}figure{margin:1rem 0 2rem}figure svg{max-width:100%;height:auto}
p.caption{color:#555;font-size:.85rem;max-width:70rem}
table{border-collapse:collapse;font-size:.8rem;margin:.5rem 0}
th,td{border:1px solid #ddd;padding:.2rem .45rem;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#f4f4f4}
tr.flagged td{background:#fde8e8}.muted{color:#666}.empty{color:#666;font-style:italic}
"""
# Nothing may load from anywhere: the page is mailable and opens from disk, offline.
_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


@dataclass
class ReportResult:
    """What :func:`write_report` wrote: the page, the chart files, and what it left out."""

    path: Path
    charts: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    omitted: list[str] = field(default_factory=list)
    # Kept for callers of 0.2.8; empty since an unknown --kernel/--gpu/--implementation is an
    # error (exit 2) naming the closest known names.
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0


def write_report(db: Queryable, path: Path, filters: Filters | None = None, *,
                 png_dir: Path | None = None, svg_dir: Path | None = None,
                 parents: bool = False, names: Queryable | None = None,
                 release: Callable[[], None] | None = None) -> ReportResult:
    """Write the report page to ``path`` (and each chart to ``png_dir``/``svg_dir``); into a
    missing folder only with ``parents``. The kernels, GPUs and implementations asked for are
    checked against ``names`` (default ``db``: a windowed session would not know a kernel
    measured only outside its window). ``release`` is called after each frame is read from
    ``db``, the last time before the first figure is drawn: ``Warehouse.report`` closes its
    own session there, so that DuckDB's memory goes back to the system between queries
    instead of piling up beside the next query's and the figures' (docs/benchmarks.md,
    Run AS)."""
    outfile.check(path, parents)  # before the charts are drawn
    # Found, not imported: matplotlib (~33 MB) is imported once the queries are done, so that
    # it does not sit beside DuckDB's working memory at the report's peak.
    if importlib.util.find_spec("matplotlib") is None:
        raise UsageError("kidata report needs matplotlib: pip install 'kidata[report]'")
    start = time.perf_counter()
    filters = filters or Filters()
    unknown = _unknown(names or db, filters)
    if unknown:  # a typo would give a report of nothing, or of less than asked
        raise UsageError("; ".join(unknown))
    return _write(db, path, filters, png_dir, svg_dir, start, release)


@dataclass
class _Frames:
    """Everything the page shows, read before its first figure is drawn."""

    points: pl.DataFrame
    speedups: data.SpeedupCells
    regressions: pl.DataFrame
    series: int  # series with two or more timed results (the history draws MAX_SERIES)
    trends: pl.DataFrame
    shifts: pl.DataFrame
    efficiency: pl.DataFrame
    compute: pl.DataFrame
    audit: pl.DataFrame
    envelopes: pl.DataFrame
    effect: float
    summary: dict[str, Any]
    kernels: pl.DataFrame


def _read(db: Queryable, filters: Filters, release: Callable[[], None] | None) -> _Frames:
    def read(frame: Any) -> Any:
        if release is not None:
            release()
        return frame

    # The costliest queries first, before the process holds the other frames: whether any run
    # has a byte or FLOP model and the efficiency points (every run's latency worked out: with
    # byte models at 1M runs, read after the other frames, they peaked the report at 620 MB;
    # the question alone at 5M runs at ~500 MB; Run BD), then the speedups (at 1M runs they
    # peaked at ~500 MB after the points, and kernel_speedups at ~480 MB last; Run AZ).
    has_bytes = read(data.modelled(db, "run_bytes"))
    has_flops = read(data.modelled(db, "run_flops"))
    efficiency = read(data.efficiency(db, filters, has_bytes))
    compute = read(data.roofline(db, filters, has_flops))
    speedups = read(data.speedup_cells(db, filters))
    kernels = read(data.kernel_speedups(db, filters))
    points = read(data.latency_points(db, filters))
    regressions = read(data.regressions(db, filters))
    drawn_series, series = read(data.trend_series(db, filters, charts_mod.MAX_SERIES,
                                                  regressions["run_id"].to_list()))
    trends = read(data.trend_steps(db, filters, drawn_series))
    shifts = read(data.shifts(db, filters))
    audit = read(data.audit(db, filters))
    envelopes = read(data.noise_envelopes(db, filters))
    effect = data.min_effect(db)
    summary = read(data.summary(db))
    # Every frame before the first figure: DuckDB's working memory is given back before the
    # figures take theirs (at 1M runs the kernel_speedups query, run beside the drawn
    # figures, set the report's peak: 1.04 GB under a 500MB KIDATA_QUERY_MEMORY; Run AM).
    return _Frames(points, speedups, regressions, series, trends, shifts, efficiency, compute,
                   audit, envelopes, effect, summary, kernels)


def _write(db: Queryable, path: Path, filters: Filters, png_dir: Path | None,
           svg_dir: Path | None, start: float, release: Callable[[], None] | None
           ) -> ReportResult:
    f = _read(db, filters, release)
    try:  # found at the start, imported only now
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise UsageError(f"kidata report needs a working matplotlib ({exc}): "
                         "pip install 'kidata[report]'") from None
    with charts_mod.style():
        return _draw_page(f, path, filters, png_dir, svg_dir, start)


def _draw_page(f: _Frames, path: Path, filters: Filters, png_dir: Path | None,
               svg_dir: Path | None, start: float) -> ReportResult:
    palette = charts_mod.Palette(charts_mod.series_names(f.points)
                                 + charts_mod.series_names(f.efficiency)
                                 + charts_mod.series_names(f.compute)
                                 + charts_mod.series_names(f.trends))
    # Without image files to save, each figure is drawn, written to the page and freed before
    # the next is drawn (all of them held at once were ~170 MB of the report's peak at 1M
    # generated runs), and the latency figures are drawn by this process and a helper at once
    # (kidata.query.present.drawing: the helper starts here, and draws while this process
    # draws the other figures); with files to save, every figure is kept until they are
    # written.
    one_by_one = png_dir is None and svg_dir is None
    plan = charts_mod.latency_plan(f.points) if one_by_one else []
    if one_by_one:
        # The plan holds the rows it draws (a seventh of them at 1M generated runs): the rest
        # would sit beside every figure drawn (Run BF).
        f.points = f.points.clear()
    panels = sum(rows.select(["pass", "gpu", "parameter"]).n_unique() for _, rows, _ in plan)
    shared = drawing.SharedDrawing(plan, palette, drawing.helper_wanted(panels))
    try:
        return _draw(f, palette, shared, one_by_one, path, filters, png_dir, svg_dir, start)
    finally:
        shared.close()  # a page that failed leaves no helper drawing for nothing


def _draw(f: _Frames, palette: charts_mod.Palette, shared: drawing.SharedDrawing,
          one_by_one: bool, path: Path, filters: Filters, png_dir: Path | None,
          svg_dir: Path | None, start: float) -> ReportResult:
    # What each kind of chart left out, listed in this order at the end of the page.
    left_latency: list[str] = []
    left_heat: list[str] = []
    left_forest: list[str] = []
    heat: Iterable[charts_mod.Chart] = charts_mod.iter_heatmaps(
        f.speedups, filters.implementations, left_heat)
    chosen, _ = charts_mod.pairs(f.speedups, filters.implementations)
    forest: Iterable[charts_mod.Chart] = charts_mod.iter_forest_charts(f.kernels, chosen,
                                                                       left_forest)
    left_history: list[str] = []

    def history() -> charts_mod.Chart | None:
        chart, left = charts_mod.history_chart(f.trends, f.regressions, palette, f.series)
        left_history.extend(left)
        return chart

    latency: Iterable[charts_mod.Chart]
    if one_by_one:
        latency = shared.charts(left_latency)
    else:
        latency = list(charts_mod.iter_latency_charts(f.points, palette, left_latency))
        heat, forest = list(heat), list(forest)
    every: list[charts_mod.Chart] = []  # in the page's order

    summary = _summary_html(f.summary, filters)
    speedups = (_charts_html(heat, "No two implementations measured on the same kernel, pass, "
                             "workload and GPU.", every, one_by_one)
                + _charts_html(forest, "", every, one_by_one))
    # Drawn: the speedups' cells and the kernels' rows are not held beside the figures drawn
    # after them (Run BF).
    f.speedups, f.kernels = f.speedups.clear(), f.kernels.clear()
    # The history, efficiency and roofline figures are drawn now, while the helper draws
    # latency figures, and kept as SVG text (held as figures until their turn, they sat beside
    # every figure before them: Run BF); drawn at their turn, after the latency figures, they
    # were the page's last ~1.5 s at 1M runs, on one core (Run BG).
    history_charts = _early(history, one_by_one)
    efficiency_charts = _early(lambda: charts_mod.efficiency_chart(f.efficiency, palette),
                               one_by_one)
    roofline_charts = _early(lambda: charts_mod.roofline_chart(f.compute, palette), one_by_one)
    if one_by_one:
        f.trends, f.efficiency, f.compute = (f.trends.clear(), f.efficiency.clear(),
                                             f.compute.clear())
    sections = [
        ("summary", "What is loaded", summary),
        ("speedups", "Speedups", speedups),
        ("latency", "Latency against workload size",
         _charts_html(latency, "No passed latency results.", every, one_by_one)),
        ("history", "History and regressions",
         _charts_html(history_charts, "No series with two or more timed results.", every,
                      one_by_one)
         + _regressions_html(f.regressions, f.effect) + _shifts_html(f.shifts)),
        ("noise", "Run-to-run noise", _noise_html(f.envelopes, f.effect)),
        ("efficiency", "Efficiency",
         _charts_html(efficiency_charts,
                      "No run of a kernel with a byte model (docs/efficiency.md).", every,
                      one_by_one)
         + _charts_html(roofline_charts,
                        "No run of a kernel with a FLOP model (kidata/data/flop_models.toml).",
                        every, one_by_one)),
        ("audit", "Audit of published numbers", _audit_html(f.audit)),
    ]
    omitted = left_latency + left_heat + left_forest + left_history
    if omitted:
        sections.append(("omitted", "Left out", "<ul>" + "".join(
            f"<li>{html.escape(o)}</li>" for o in omitted) + "</ul>"))
    page = _page(sections, filters)
    # Whole or not at all; write_report checked the path (and made its folder if asked).
    with outfile.writing(path, parents=True) as tmp:
        tmp.write_text(page, "utf-8")

    result = ReportResult(path, [c.name for c in every], omitted=omitted)
    for folder, fmt in ((png_dir, "png"), (svg_dir, "svg")):
        if folder is None:
            continue
        folder.mkdir(parents=True, exist_ok=True)
        for chart in every:
            target = folder / f"{chart.name}.{fmt}"
            chart.save(target, fmt)
            result.files.append(target)
    for chart in every:
        if chart.figure is not None:
            chart.figure.clear()  # figures hold their data until cleared
    result.seconds = time.perf_counter() - start
    return result


def _drawn(make: Callable[[], charts_mod.Chart | None]) -> Iterator[charts_mod.Chart]:
    """The chart ``make`` draws, if any, drawn when first asked for."""
    chart = make()
    if chart is not None:
        yield chart


def _early(make: Callable[[], charts_mod.Chart | None], one_by_one: bool
           ) -> Iterable[charts_mod.Chart]:
    """The chart ``make`` draws, if any: drawn now and kept as its SVG text, its figure
    freed, when the page draws one figure at a time; else drawn when first asked for (with
    image files to save, every figure is kept)."""
    if not one_by_one:
        return _drawn(make)
    chart = make()
    return [] if chart is None else [chart.written()]


def _unknown(db: Queryable, filters: Filters) -> list[str]:
    """What is wrong with each kernel, GPU or implementation asked for that no run has (a
    typo would otherwise give an empty report): the closest known names, then all of them."""
    import difflib

    out = []
    for column, asked in (("kernel", filters.kernels), ("gpu", filters.gpus),
                          ("implementation", filters.implementations)):
        if not asked:
            continue
        known = sorted(r[0] for r in db.rows(f"SELECT DISTINCT {column} FROM runs "
                                             f"WHERE {column} IS NOT NULL"))
        for name in asked:
            if name not in known:
                # Names it begins (h100 -> h100-sxm5-80gb), then names spelled like it.
                close = list(dict.fromkeys(
                    [k for k in known if k.startswith(name.lower())]
                    + difflib.get_close_matches(name, known, n=3, cutoff=0.6)))[:3]
                out.append(f"--{column} {name!r}: no run has it; "
                           + (f"did you mean {' or '.join(map(repr, close))}? " if close
                              else "")
                           + f"(known: {', '.join(known) or 'none'})")
    return out


def _page(sections: list[tuple[str, str, str]], filters: Filters) -> str:
    now = datetime.now(UTC)
    nav = "".join(f'<a href="#{key}">{html.escape(title)}</a>' for key, title, _ in sections)
    body = "".join(f'<section id="{key}"><h2>{html.escape(title)}</h2>{content}</section>'
                   for key, title, content in sections)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{_CSP}\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            "<title>kidata report</title>"
            f"<style>{_CSS}</style></head><body><h1>kidata report</h1>"
            f"<p class=\"muted\">Covers {html.escape(filters.describe())}. Written "
            f"{now:%Y-%m-%d %H:%M} UTC by kidata {html.escape(__version__)}. Latencies in µs; "
            "speedup = baseline latency / candidate latency.</p>"
            f"<nav>{nav}</nav>{body}</body></html>\n")


def _charts_html(charts: Iterable[charts_mod.Chart], empty: str,
                 drawn: list[charts_mod.Chart], release: bool = False) -> str:
    """The charts, each kind's caption once, before the first chart of its kind (16 heatmaps
    share one: the same paragraph under each read as noise); ``empty`` (when not blank) if
    there are none. Each chart is added to ``drawn``; with ``release``, its figure is cleared
    once its SVG is on the page."""
    out = []
    said: set[str] = set()
    for chart in charts:
        drawn.append(chart)
        if chart.caption not in said:
            said.add(chart.caption)
            out.append(f'<p class="caption">{html.escape(chart.caption)}</p>')
        out.append(f'<figure class="chart" id="{html.escape(chart.name)}" '
                   f'data-chart="{html.escape(chart.name)}">{chart.svg()}</figure>')
        if release and chart.figure is not None:
            chart.figure.clear()  # its artists and data, no longer needed
    if not out:
        return f'<p class="empty">{html.escape(empty)}</p>' if empty else ""
    return "".join(out)


def _fmt(value: Any) -> tuple[str, bool]:
    """A cell's text and whether it is a number (right-aligned)."""
    if value is None:
        return "", False
    if isinstance(value, bool):
        return ("yes" if value else "no"), False
    if isinstance(value, int):
        return f"{value:,}", True
    if isinstance(value, float):
        return (f"{value:.4g}" if value == value else "NaN"), True
    if isinstance(value, datetime):
        return f"{value.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC", False
    return str(value), False


def _table(frame: pl.DataFrame, row_class: str | None = None) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in frame.columns)
    rows = []
    for row in frame.iter_rows(named=True):
        cells = []
        for value in row.values():
            text, numeric = _fmt(value)
            cells.append(f'<td class="n">{html.escape(text)}</td>' if numeric
                         else f"<td>{html.escape(text)}</td>")
        cls = ' class="flagged"' if row_class and row.get(row_class) else ""
        rows.append(f"<tr{cls}>{''.join(cells)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _summary_html(summary: dict[str, Any], filters: Filters) -> str:
    lo, hi = summary["observed_from"], summary["observed_to"]
    items = [
        ("warehouse", summary["warehouse"]),
        ("runs", f"{summary['tables']['runs']['rows']:,}"),
        ("sources", ", ".join(f"{k} ({v:,} runs)" for k, v in summary["sources"].items())
         or "none"),
        ("GPUs", ", ".join(f"{k} ({v:,} runs)" for k, v in summary["gpus"].items()) or "none"),
        ("measured", f"{_fmt(lo)[0]} to {_fmt(hi)[0]}" if lo else "no timestamps"),
        ("rejected records", f"{summary['tables']['rejects']['rows']:,}"),
        ("this report covers", filters.describe()),
    ]
    out = "<table>" + "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td>"
                              "</tr>" for k, v in items) + "</table>"
    out += "<h3>Loads</h3>" + _table(summary["loads"])
    if summary["rejects"].height:
        out += ("<h3>Rejects per file</h3>" + _table(summary["rejects"])
                + '<p class="muted">All of them: <code>kidata rejects</code>.</p>')
    return out


def _regressions_html(regressions: pl.DataFrame, effect: float) -> str:
    if regressions.is_empty():
        return (f'<p class="empty">No regressions beyond noise and the {effect:.0%} minimum '
                "effect.</p>")
    return (f"<h3>Regressions ({regressions.height:,})</h3>"
            + _table(regressions.drop("run_id", "family")))


def _shifts_html(shifts: pl.DataFrame) -> str:
    """The firm steps not blamed on the code (the ``shifts`` view, docs/statistics.md section
    4), apart from the regressions."""
    if shifts.is_empty():
        return ('<p class="empty">No firm step is a shift of the session or the environment, or '
                "a re-run of one version.</p>")
    return (f"<h3>Shifts of the session or environment ({shifts.height:,})</h3>"
            "<p>Firm steps that moved with the session (<code>session_change</code>, fitted "
            "over the implementation's workloads; <code>code_change</code> is what it leaves), "
            "with the implementations measured beside them, over a changed environment or "
            "between two runs of one version: not regressions of the code.</p>"
            + _table(shifts))


def _noise_html(envelopes: pl.DataFrame, effect: float) -> str:
    """The calibration the verdicts rest on (docs/statistics.md section 3): how far re-runs of
    the same code moved, per source, GPU and size class."""
    intro = ("<p>A verdict is firm when the interval of a ratio excludes 1 and the ratio lies "
             f"beyond the minimum effect ({effect:.0%}). Where a source, GPU and size class "
             "hold 10 or more re-runs of the same code (same version, or same session), the "
             "95th percentile of their changes is the run-to-run envelope comparisons there "
             "are judged by (<code>noise_envelopes</code>; the changes: "
             "<code>rerun_changes</code>).</p>")
    if envelopes.is_empty():
        return intro + ('<p class="empty">No re-runs of the same code: verdicts rest on '
                        "within-run spreads (or on raw samples where both sides kept 7 "
                        "or more, or Welch's test where means, deviations and sample counts "
                        "are given).</p>")
    return intro + _table(envelopes)


def _audit_html(audit: pl.DataFrame) -> str:
    if audit.is_empty():
        return '<p class="empty">No published derived numbers to check.</p>'
    flagged = int(audit["flagged"].fill_null(False).sum())
    note = (f"<p>{flagged:,} of {audit.height:,} published numbers disagree with their inputs "
            "beyond rounding (highlighted).</p>")
    shown = audit.head(MAX_AUDIT_ROWS).drop("observed_at")
    more = (f'<p class="muted">{audit.height - MAX_AUDIT_ROWS:,} more: '
            "<code>kidata audit --all</code>.</p>" if audit.height > MAX_AUDIT_ROWS else "")
    return note + _table(shown, row_class="flagged") + more
