"""The report's charts, drawn with matplotlib (object API only: no pyplot, no global figure
state) and kept as :class:`Chart` objects that render to SVG (for the page) or PNG.

Why matplotlib: static output needs no script or network at view time, SVG and PNG come from the
same figure, it is installable from wheels everywhere and has been maintained for two decades.
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kidata.query.present import data

if TYPE_CHECKING:
    from collections.abc import Iterator

    import polars as pl
    from matplotlib.figure import Figure

# Implementations taken as the reference side of a pair when the other side is not one of them
# (PyTorch eager and its compiler, Hugging Face's modules): the heatmaps show the other side
# as the candidate. Choose a pair explicitly with two --implementation options.
REFERENCES = ("torch", "pytorch", "eager", "huggingface", "inductor", "torch_compile")
# Limits that keep a report readable (and fast) on large warehouses; the page says what it left
# out.
MAX_PANELS = 12        # panels per latency figure (one figure per kernel)
# Latency panels in all (each costs ~70 ms to draw and write: 288 took 20 s of a 34 s report at
# 1M generated runs, Run AR); shared out so every kernel keeps as many as it can. Liger's two
# benchmark CSVs together (39 kernels) have 138: all drawn.
MAX_LATENCY_PANELS = 144
MAX_PAIRS = 4          # speedup heatmaps
MAX_SERIES = 12        # history panels
MAX_SETTINGS = 4       # lines per implementation in a latency panel (settings of the other
                       # parameters at which the size was swept, e.g. B x T for embedding's V)
LINE_STYLES = ("-", "--", ":", "-.")
PANEL = (4.2, 3.0)     # inches per panel
AXES_HEIGHT = 2.1      # inches of a panel's plotting area
# Text size: 8.5 pt is 11.3 CSS px when a chart is drawn at its own size (SVG sizes are in pt,
# 96 px = 72 pt), the least that reads comfortably. The page's column is 1352 px (14.08 in)
# wide at its 1400 px maximum and scales a wider chart down, its text with it: no figure is
# wider than MAX_WIDTH.
FONT = 8.5
MAX_WIDTH = 13.5       # inches
LINE = FONT * 1.5 / 72  # inches per line of text in legends and margins

_RC = {
    "svg.fonttype": "none",         # text stays text: smaller, searchable, selectable
    "svg.hashsalt": "kidata",       # stable element ids: the same data gives the same file
    "font.size": FONT,
    "axes.titlesize": FONT,
    "axes.titley": 1.0,
    "axes.labelsize": FONT,
    "legend.fontsize": FONT,
    "xtick.labelsize": FONT,
    "ytick.labelsize": FONT,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
}


def text_width(text: str, size: float = FONT) -> float:
    """The width in inches of ``text`` at ``size`` pt, a little over DejaVu Sans' (the average
    glyph is about 0.55 em, digits and capitals 0.64-0.7 em): enough to lay labels out apart
    without measuring them, which would cost a draw of the figure."""
    return len(text) * size * 0.64 / 72


# The bounds (efficiency, roofline) of points their bytes or work do not bound: drawn hollow.
NOT_BYTES = data.NOT_BYTES

def style() -> Any:
    """A context in which charts are drawn and saved with the report's style."""
    import matplotlib

    return matplotlib.rc_context(_RC)


@dataclass
class Chart:
    """One figure: a file-safe ``name``, a ``title``, and the ``caption`` of its kind, which
    the page shows once, above the first chart of the kind."""

    name: str
    section: str
    title: str
    caption: str
    figure: Figure | None
    # The SVG already written (by the process that drew it: kidata.query.present.drawing),
    # its figure freed.
    text: str | None = None

    def svg(self) -> str:
        """The figure as an ``<svg>`` element to inline in HTML (no XML prolog, no date)."""
        if self.text is not None:
            return self.text
        buffer = io.StringIO()
        with style():
            self.figure.savefig(buffer, format="svg", metadata={"Date": None})
        text = buffer.getvalue()
        return text[text.index("<svg"):]

    def written(self) -> Chart:
        """This chart with its SVG written (:meth:`svg` gives it from now on) and its figure
        freed: what a page drawing one figure at a time keeps until the figure's section."""
        if self.figure is not None:
            self.text = self.svg()
            self.figure.clear()
            self.figure = None
        return self

    def save(self, path, fmt: str) -> None:
        with style():
            if fmt == "svg":
                self.figure.savefig(path, format="svg", metadata={"Date": None})
            else:
                self.figure.savefig(path, format="png", dpi=150, metadata={"Software": None})


def slug(*parts: Any) -> str:
    text = "-".join(str(p) for p in parts if p not in (None, ""))
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:120] or "chart"


def _wrap(text: str, width: float, size: float = FONT) -> list[str]:
    """``text`` in lines that fit ``width`` inches at ``size`` pt."""
    import textwrap

    return textwrap.wrap(text, max(10, int(width / text_width("x", size))))


@dataclass
class _Grid:
    """A figure of panels laid out in inches (not matplotlib's constrained layout, which
    measured every tick label again and took 40% of a report's time): a title, a legend for
    the whole figure under it (outside every panel, so it hides no line or point), then the
    panels, each with room for its title (``title_lines``) and, below, its tick labels and
    axis label (``bottom``, grown by panels whose category labels are rotated)."""

    fig: Figure
    axes: list[Any]
    cols: int
    title_lines: int = 1
    bottom: float = 0.62

    def finish(self, title: str, handles: list[Any] | None = None,
               labels: list[str] | None = None) -> None:
        """Size the figure and place the title, the legend (``handles``, ``labels``) and
        the panels."""
        width = PANEL[0] * self.cols + 0.1
        lines = _wrap(title, width - 0.2, FONT + 1)
        head = 0.12 + len(lines) * (FONT + 1) * 1.4 / 72
        legend_rows, ncol = _legend_shape(labels or [], width - 0.2)
        legend_top = head
        if legend_rows:
            head += legend_rows * LINE + 0.12
        pad_top = 0.1 + self.title_lines * FONT * 1.35 / 72
        pitch = pad_top + AXES_HEIGHT + self.bottom
        rows = math.ceil(len(self.axes) / self.cols)
        height = head + rows * pitch
        self.fig.set_size_inches(width, height)
        for i, ax in enumerate(self.axes):
            row, col = divmod(i, self.cols)
            x, w = col * PANEL[0] + 0.8, PANEL[0] - 1.05
            top = head + row * pitch + pad_top
            h = pitch - pad_top - self.bottom
            ax.set_position((x / width, 1 - (top + h) / height, w / width, h / height))
        self.fig.text(0.1 / width, 1 - 0.1 / height, "\n".join(lines), fontsize=FONT + 1,
                      ha="left", va="top")
        if legend_rows:
            self.fig.legend(handles, labels, loc="upper left", ncol=ncol, frameon=False,
                            bbox_to_anchor=(0.05 / width, 1 - legend_top / height),
                            borderaxespad=0, handlelength=2.2, columnspacing=1.5)


def _legend_shape(labels: list[str], width: float) -> tuple[int, int]:
    """Rows and columns of a legend of ``labels`` across ``width`` inches: as many columns
    as the longest label allows."""
    if not labels:
        return 0, 1
    entry = max(text_width(label) for label in labels) + 0.55  # handle, gap, column space
    ncol = max(1, min(len(labels), int(width // entry)))
    return math.ceil(len(labels) / ncol), ncol


def _figure(panels: int, cols: int = 3, title_lines: int = 1) -> _Grid:
    from matplotlib.figure import Figure

    cols = max(1, min(cols, panels))
    with style():
        fig = Figure(figsize=(PANEL[0] * cols, PANEL[1]))
        # Only the panels drawn: an empty grid cell would cost an axes' creation for nothing.
        axes = [fig.add_axes((0, 0, 1, 1)) for _ in range(panels)]
    return _Grid(fig, axes, cols, title_lines)


class Palette:
    """One colour per implementation, the same in every chart of a report."""

    def __init__(self, names: list[str]):
        import matplotlib

        # The ten strong colours first (most frequent names get them), then the ten pale ones:
        # tab20 in its own order puts near-identical pairs side by side.
        strong = list(matplotlib.colormaps["tab10"].colors)
        pale = list(matplotlib.colormaps["tab20"].colors)[1::2]
        counts: dict[str, int] = {}
        for n in names:
            counts[n] = counts.get(n, 0) + 1
        ranked = sorted(counts, key=lambda n: (-counts[n], n))
        colours = strong + pale
        self.colours = {n: colours[i % len(colours)] for i, n in enumerate(ranked)}

    def __call__(self, name: str, variant: str | None = None) -> Any:
        key = f"{name} [{variant}]" if variant else name
        return self.colours.get(key, self.colours.get(name, "grey"))


def series_names(frame: pl.DataFrame) -> list[str]:
    """Palette keys of a frame's rows: the implementation, with its variant when it has one."""
    variants = frame["variant"].to_list() if "variant" in frame.columns else [None] * frame.height
    return [f"{i} [{v}]" if v else i for i, v in zip(frame["implementation"], variants,
                                                     strict=True)]


def _label(implementation: str, variant: str | None, family: str | None, families: int) -> str:
    label = implementation + (f" [{variant}]" if variant else "")
    if families > 1 and family:
        label += f" ({family[:24]})"
    return label


def _number(value: float, _position: Any = None) -> str:
    """A tick label in plain text (matplotlib's default log labels are mathtext, which costs
    most of a report's time): 4096 -> "4096", 131072 -> "128k", 0.05 -> "0.05"."""
    if value >= 10_000 and value == int(value):
        for unit, scale in (("G", 2**30), ("M", 2**20), ("k", 2**10)):
            if value >= scale and value % scale == 0:
                return f"{int(value // scale)}{unit}"
        for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
            if value >= scale:
                return f"{value / scale:g}{unit}"
    return f"{value:g}"


def _log(axis: Any, base: float = 10, values: list[float] | None = None) -> None:
    """A log scale with plain-text labels on the major ticks only; 1-2-5 steps when the
    ``values`` span under two decades (a panel spanning one decade would show one label),
    decades alone otherwise (each tick costs drawing time)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    (axis.axes.set_xscale if axis.axis_name == "x" else axis.axes.set_yscale)("log", base=base)
    positive = [v for v in values or [] if v and v > 0]
    narrow = base == 10 and positive and max(positive) / min(positive) < 100
    axis.set_major_locator(LogLocator(base=base, subs=(1.0, 2.0, 5.0) if narrow else (1.0,),
                                      numticks=10))
    axis.set_major_formatter(FuncFormatter(_number))
    # No minor ticks: each is an artist drawn and measured, and they cost a third of the time.
    axis.set_minor_locator(NullLocator())


def _decades(values: list[float]) -> bool:
    positive = [v for v in values if v and v > 0]
    return len(positive) > 1 and max(positive) / min(positive) >= 10


LATENCY_CAPTION = (
    "One figure per kernel, a panel per pass, GPU and swept parameter; lower is better. A line "
    "joins workloads that differ in the swept parameter alone, in size order; where the size "
    "was swept at several settings of other parameters, each setting is its own line, one "
    "dash style each (named in the legend by the values that tell the settings apart). The "
    "shaded band is p20–p80 where the source gives it; axes are logarithmic where values span "
    "a decade or more. Workloads without a size are drawn by name, fastest first.")


def latency_charts(points: pl.DataFrame, palette: Palette) -> tuple[list[Chart], list[str]]:
    """One figure per kernel: a panel per pass, GPU and swept parameter with latency against
    size, a line per implementation with its p20-p80 band; workloads without a size are drawn
    by name, in order of their median latency. One legend per figure, above the panels: a
    colour per implementation, a dash style per setting of the other parameters (at most
    ``MAX_SETTINGS`` per swept parameter, those with the most results). Returns the charts
    and what was left out."""
    omitted: list[str] = []
    return list(iter_latency_charts(points, palette, omitted)), omitted


def iter_latency_charts(points: pl.DataFrame, palette: Palette, omitted: list[str]
                        ) -> Iterator[Chart]:
    """:func:`latency_charts` one figure at a time, what was left out added to ``omitted`` as
    it is drawn: a page that writes each figure's SVG before the next is drawn holds one
    figure at a time (all of them at once were ~110 MB at 1M generated runs)."""
    for kernel, drawn, cut in latency_plan(points):
        omitted += cut
        yield latency_chart(kernel, drawn, palette, omitted)


def latency_plan(points: pl.DataFrame) -> list[tuple[str, pl.DataFrame, list[str]]]:
    """What :func:`iter_latency_charts` draws, figure by figure: each kernel, the rows of its
    panels (at most its share of ``MAX_LATENCY_PANELS``) and what was cut (a line for the
    page's "left out", or none). Each figure is then :func:`latency_chart` of one of these,
    whichever process draws it (:mod:`kidata.query.present.drawing`)."""
    import polars as pl

    kernels = [(kernel, list(rows.group_by(["pass", "gpu", "parameter"], maintain_order=True)))
               for (kernel,), rows in points.group_by(["kernel"], maintain_order=True)]
    share = panel_share([len(panels) for _, panels in kernels], MAX_PANELS, MAX_LATENCY_PANELS)
    plan = []
    for kernel, panels in kernels:
        cut = []
        if len(panels) > share:
            cut.append(f"{kernel}: {len(panels) - share} of {len(panels)} panels "
                       f"(restrict with --kernel, --gpu or --implementation)")
            panels = panels[:share]
        plan.append((kernel, pl.concat([panel for _, panel in panels]), cut))
    return plan


@dataclass
class LatencyLine:
    """One line of a latency panel: its points in drawing order (``x`` is the size, or the
    workload's position when the panel has no swept parameter) and how it is drawn."""

    x: list[Any]
    median: list[float]
    low: list[float | None]
    high: list[float | None]
    colour: Any
    dash: str


@dataclass
class LatencyPanel:
    """One panel of a latency figure: its title, the swept parameter (None: workloads by
    name, ``order`` fastest first), its lines, and the values that choose its log axes."""

    title: str
    parameter: str | None
    order: list[str]
    lines: list[LatencyLine]
    sizes: list[Any]
    medians: list[float]


@dataclass
class LatencyFigure:
    """Everything a latency figure draws, worked out from the rows (Polars) before drawing
    (matplotlib alone): the drawing helper (:mod:`kidata.query.present.drawing`) is handed
    this, plain values only, so it never imports Polars."""

    kernel: str
    panels: list[LatencyPanel]
    legend: dict[str, Any]  # implementation label -> colour, in order of first line
    settings: list[tuple[str, str]]  # (dash style, legend label) of each setting kept


def latency_chart(kernel: str, drawn: pl.DataFrame, palette: Palette, omitted: list[str]
                  ) -> Chart:
    """The latency figure of ``kernel``: a panel per pass, GPU and swept parameter of
    ``drawn`` (one kernel's rows of :func:`latency_plan`, in its order); the lines a panel
    leaves out are added to ``omitted``."""
    return draw_latency(latency_figure(kernel, drawn, palette, omitted))


def latency_figure(kernel: str, drawn: pl.DataFrame, palette: Palette, omitted: list[str]
                   ) -> LatencyFigure:
    """What :func:`latency_chart` draws for ``kernel``, without drawing it; the lines its
    panels leave out are added to ``omitted``."""
    import polars as pl

    # Per swept parameter (rope sweeps H at one setting of T and T at one of H), the
    # settings with the most results, a dash style each.
    kept: list[str] = []
    dash: dict[str | None, dict[str, str]] = {}
    for (parameter,), part in drawn.group_by(["parameter"], maintain_order=True):
        settings = (part.group_by("others").agg(n=pl.len(), first=pl.col("size").min())
                    .sort(["n", "first", "others"], descending=[True, False, False],
                          nulls_last=True)["others"].to_list())[:MAX_SETTINGS]
        dash[parameter] = {o: LINE_STYLES[i % len(LINE_STYLES)]
                           for i, o in enumerate(settings)}
        kept += [o for o in settings if o not in kept]
    families = drawn["family"].n_unique()
    legend: dict[str, Any] = {}
    panels = []
    for (pass_, gpu, parameter), panel in drawn.group_by(["pass", "gpu", "parameter"],
                                                          maintain_order=True):
        figure_panel, left = _latency_panel(panel, f"{pass_} · {gpu}", parameter, palette,
                                            dash[parameter], families, legend)
        panels.append(figure_panel)
        if left:
            every = _distinct(sorted(set(panel["others"].to_list())))
            omitted.append(f"{kernel} {pass_} · {gpu}, {parameter} sweep: the lines at "
                           f"{'; '.join(every[o] for o in left)} (restrict with --gpu or "
                           "--implementation)")
    settings: list[tuple[str, str]] = []
    if len(kept) > 1 or (kept and kept[0]):
        named = _distinct(kept)
        styles = {o: style for sweep in dash.values() for o, style in sweep.items()}
        settings = [(styles[o], _shorten(named[o])) for o in kept]
    return LatencyFigure(kernel, panels, legend, settings)


def draw_latency(figure: LatencyFigure) -> Chart:
    """Draw a :class:`LatencyFigure` (matplotlib only)."""
    from matplotlib.lines import Line2D

    grid = _figure(len(figure.panels))
    for ax, panel in zip(grid.axes, figure.panels, strict=True):
        _draw_latency_panel(ax, panel, grid)
        ax.set_title(panel.title, loc="left")
    # Colour names the implementation and dash style the setting, each once in the legend.
    handles = [Line2D([], [], color=colour, marker="o", markersize=3, linewidth=1.2)
               for colour in figure.legend.values()]
    labels = list(figure.legend)
    handles += [Line2D([], [], color="dimgrey", linestyle=style, linewidth=1.2)
                for style, _ in figure.settings]
    labels += [label for _, label in figure.settings]
    grid.finish(f"{figure.kernel}: latency against workload size (median, p20–p80 band)",
                handles, labels)
    return Chart(slug("latency", figure.kernel), "latency", figure.kernel, LATENCY_CAPTION,
                 grid.fig)


def panel_share(counts: list[int], most: int, total: int) -> int:
    """The panels each figure may draw when figures of ``counts`` panels share ``total``, none
    more than ``most``: the largest share whose panels fit (at least 1 each), so a figure with
    few panels keeps them all and the rest are cut alike."""
    share = most
    while share > 1 and sum(min(c, share) for c in counts) > total:
        share -= 1
    return share


def _latency_panel(panel: pl.DataFrame, title: str, parameter: str | None, palette: Palette,
                   dash: dict[str, str], families: int, legend: dict[str, Any]
                   ) -> tuple[LatencyPanel, list[str]]:
    """The panel ``title`` with its lines (those at the settings in ``dash``), its
    implementations added to the figure's ``legend``, and the settings left out."""
    import polars as pl

    sized = parameter is not None
    order: list[str] = []
    if not sized:
        order = (panel.group_by("workload").agg(m=pl.col("median_us").min())
                 .sort(["m", "workload"])["workload"].to_list())
        position = {w: i for i, w in enumerate(order)}
    left = sorted(o for o in set(panel["others"].to_list()) if o not in dash)
    panel = panel.filter(pl.col("others").is_in(list(dash)))
    if not sized:  # each workload's position, once for the panel's lines
        panel = panel.with_columns(_x=pl.col("workload").replace_strict(position))
    lines = []
    for (implementation, variant, family, others), line in panel.group_by(
            ["implementation", "variant", "family", "others"], maintain_order=True):
        line = line.sort("size" if sized else "_x")
        x = line["size" if sized else "_x"].to_list()
        colour = palette(implementation, variant)
        legend.setdefault(_label(implementation, variant, family, families), colour)
        lines.append(LatencyLine(x, line["median_us"].to_list(), line["p20_us"].to_list(),
                                 line["p80_us"].to_list(), colour, dash[others]))
    return LatencyPanel(title, parameter, order, lines, panel["size"].to_list(),
                        panel["median_us"].to_list()), left


def _draw_latency_panel(ax: Any, panel: LatencyPanel, grid: _Grid) -> None:
    """Draw one panel of a latency figure on ``ax``: its lines, and their p20-p80 bands as
    one collection (``fill_between`` per line made a collection each: a fifth of the
    report's drawing)."""
    from matplotlib.collections import PolyCollection
    from matplotlib.colors import to_rgba

    bands: list[list[tuple[float, float]]] = []
    colours: list[tuple[float, float, float, float]] = []
    for line in panel.lines:
        ax.plot(line.x, line.median, marker="o", markersize=3, linewidth=1.2,
                color=line.colour, linestyle=line.dash)
        band = [(xi, lo, hi) for xi, lo, hi in zip(line.x, line.low, line.high, strict=True)
                if lo is not None and hi is not None]
        if len(band) > 1:
            # The polygon fill_between draws: along the lows, back along the highs.
            bands.append([(x, lo) for x, lo, _ in band] + [(x, hi) for x, _, hi in band[::-1]])
            colours.append(to_rgba(line.colour, 0.2))
        elif band:
            ax.errorbar([band[0][0]], [line.median[0]], color=line.colour, capsize=2,
                        yerr=[[line.median[0] - band[0][1]], [band[0][2] - line.median[0]]])
    if bands:
        ax.add_collection(PolyCollection(bands, facecolors=colours, edgecolors="none",
                                         linewidths=0), autolim=False)
        # The lines' plot() asked for the view to be fitted when drawn: the bands count.
        ax.update_datalim([point for polygon in bands for point in polygon])
    if panel.parameter is not None:
        ax.set_xlabel(panel.parameter)
        if _decades(panel.sizes):
            _log(ax.xaxis, base=2)
    else:
        _categories(ax, panel.order, grid)
        ax.set_xlabel("workload")
    ax.set_ylabel("latency (µs)")
    if _decades(panel.medians):
        _log(ax.yaxis, values=panel.medians)


def _categories(ax: Any, names: list[str], grid: _Grid) -> None:
    """Workload names as x tick labels that do not overlap: level when they fit side by side,
    else turned 45° or upright (wherever turned labels stand closer than a line apart, only
    every k-th is named); the figure's bottom margin grows to hold them."""
    pitch = (PANEL[0] - 1.05) / max(1, len(names))
    widest = max(text_width(n) for n in names)
    step = 1
    if widest + 0.1 <= pitch:
        rotation, depth = 0, LINE
    elif pitch * math.sin(math.radians(45)) >= LINE:
        rotation, depth = 45, widest * math.sin(math.radians(45)) + LINE
    else:
        rotation, depth = 90, widest + 0.05
        step = math.ceil(LINE / pitch)
    ax.set_xticks(range(0, len(names), step), names[::step], rotation=rotation,
                  ha="right" if rotation == 45 else "center",
                  rotation_mode="anchor" if rotation == 45 else "default")
    grid.bottom = max(grid.bottom, depth + 0.45)


def _distinct(settings: list[str]) -> dict[str, str]:
    """Each setting ("B=8, T=2048, dtype=fp32") without the values it shares with every other
    setting of the list, so that the legend shows what tells them apart."""
    split = {o: o.split(", ") if o else [] for o in settings}
    common = set.intersection(*(set(v) for v in split.values())) if len(settings) > 1 else set()
    return {o: ", ".join(v for v in split[o] if v not in common) or o for o in settings}


def _shorten(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


ROLE = data.ROLE  # the role heatmaps compare with (kidata/data/roles.toml)
PASS_ORDER = ("forward", "backward", "full")


def pairs(speedups: data.SpeedupCells, chosen: list[str], positive: bool = False
          ) -> tuple[list[tuple[str, str]], list[str]]:
    """The (candidate, against) pairs to draw (``data.against`` says what a candidate is
    against) and the pairs left out: the two chosen implementations when exactly two are
    chosen, else the pairs with the most comparisons (with a speedup; with a positive one,
    the heatmaps' cells, when ``positive``), one direction each: against the reference role
    first (the reference's own rows against others are the reverse of those), then between
    implementations, the baseline being the side listed in ``REFERENCES`` (else the
    alphabetically later one)."""
    if len(chosen) == 2:
        return [(chosen[0], chosen[1])], []
    counts: dict[tuple[str, str], int] = {}
    for candidate, versus, candidate_role, baseline_role, compared, n in (
            speedups.pairs.iter_rows()):
        if positive and not n:
            continue  # no cell to draw
        if versus != ROLE:
            if candidate_role == ROLE and baseline_role != ROLE:
                continue  # the reverse of a row against the reference
            a_ref, b_ref = candidate in REFERENCES, versus in REFERENCES
            if (a_ref and not b_ref) or (a_ref == b_ref and candidate > versus):
                continue  # keep one direction of each pair
        counts[(candidate, versus)] = counts.get((candidate, versus), 0) + (
            n if positive else compared)
    ranked = sorted(counts, key=lambda p: (-counts[p], p[1] != ROLE, p))
    rest = ranked[MAX_PAIRS:]
    if not rest:
        return ranked, []
    named = ", ".join(f"{c} vs {b} ({counts[c, b]:,})" for c, b in rest[:5])
    more = f" and {len(rest) - 5} more" if len(rest) > 5 else ""
    return ranked[:MAX_PAIRS], [f"speedups: {len(rest)} pairs with fewer comparisons: {named}"
                                f"{more} (draw one with two --implementation options, "
                                "candidate first)"]


def heatmaps(speedups: data.SpeedupCells, chosen: list[str]) -> tuple[list[Chart], list[str]]:
    """Per pair and pass, kernel × GPU grids of the geometric-mean speedup over workloads
    (GPUs that share kernels in one grid: :func:`heatmap_blocks`), each with a last row
    weighting every kernel family the same (as speedup_summary's geomean_speedup), coloured
    on a log scale centred on 1 (one scale for all passes of a pair), each cell naming its
    noise-aware verdicts. Passes are never pooled: 'full' times forward and backward again.
    Returns the charts and the pairs left out."""
    omitted: list[str] = []
    return list(iter_heatmaps(speedups, chosen, omitted)), omitted


def iter_heatmaps(speedups: data.SpeedupCells, chosen: list[str], omitted: list[str]
                  ) -> Iterator[Chart]:
    """:func:`heatmaps` one figure at a time, the pairs left out added to ``omitted`` first."""
    import polars as pl

    chosen_pairs, left = pairs(speedups, chosen, positive=True)
    omitted += left
    for candidate, versus in chosen_pairs:
        cells = speedups.cells.filter((pl.col("candidate") == candidate)
                                      & (pl.col("against") == versus))
        if cells.is_empty():
            continue
        # Each kernel family weighs the same (speedup_summary): the geometric mean of its
        # kernels' geometric means, then of the families'.
        families = cells.group_by(["pass", "gpu", "kernel_family"]).agg(
            geomean=pl.col("geomean").log().mean().exp(), kernels=pl.len(),
            n=pl.col("n").sum(), faster=pl.col("faster").sum(),
            slower=pl.col("slower").sum(), noise=pl.col("noise").sum())
        overall = families.group_by(["pass", "gpu"]).agg(
            geomean=pl.col("geomean").log().mean().exp(), kernels=pl.col("kernels").sum(),
            n=pl.col("n").sum(), faster=pl.col("faster").sum(),
            slower=pl.col("slower").sum(), noise=pl.col("noise").sum())
        values = cells["geomean"].to_list() + overall["geomean"].to_list()
        extreme = max(max(abs(math.log(v)) for v in values), math.log(1.25))
        present = cells["pass"].unique().to_list()
        passes = [p for p in PASS_ORDER if p in present] + sorted(
            p for p in present if p not in PASS_ORDER)
        for pass_ in passes:
            yield _heatmap(candidate, versus, pass_, cells.filter(pl.col("pass") == pass_),
                           overall.filter(pl.col("pass") == pass_), extreme,
                           role=versus == ROLE)


HEATMAP_CAPTION = (
    "One chart per pair and pass (passes are never pooled: 'full' times forward and backward "
    "again), one colour scale for the passes of a pair. Blue: the candidate is faster than "
    "the implementation it is compared with (speedup > 1); red: slower. Against the "
    "reference, each kernel is compared with its own reference implementation (the role "
    "'reference' in kidata/data/roles.toml, named beside the kernel). GPUs that measured the "
    "same kernels share a grid; a grid has a row for each kernel measured on any of its GPUs "
    "and a column for each GPU. Each cell: the geometric mean of baseline/candidate median "
    "latency over the cell's workloads, then the verdicts of the one rule "
    "(docs/statistics.md) — ▲ faster, ▼ slower, ≈ within noise — of its comparisons (the "
    "rest are negligible, under the minimum effect, or lack a noise estimate: no spread, a "
    "single sample). Keys the source stopped measuring (stale) are left out. The last row of "
    "a grid weighs every kernel family the same: the geometric mean of the families' "
    "geometric means (speedup_summary's geomean_speedup), so a kernel that sweeps many "
    "workloads, or one measured as several variants, does not dominate it.")
MIN_FILL = 2 / 3    # least share of a heatmap grid's cells that hold a value
CELL = (1.45, 0.42)  # inches per heatmap cell: its two lines of text at FONT, with room
OVERALL = "all kernel families, each weighing 1"


def heatmap_blocks(cells: list[tuple[str, str]], max_columns: int
                   ) -> list[tuple[list[str], list[str]]]:
    """The (kernels, GPUs) grids that hold the (kernel, GPU) ``cells``: every cell in one grid,
    no grid with an empty row or column. GPUs are joined into one grid, the pair whose union is
    fullest first, while at least ``MIN_FILL`` of its cells hold a value and it has at most
    ``max_columns`` GPUs: a warehouse that measured every kernel on every GPU gets one grid,
    one that measured each kernel on one GPU a grid per GPU. Largest grid first."""
    kernels: dict[str, set[str]] = {}
    for kernel, gpu in cells:
        kernels.setdefault(gpu, set()).add(kernel)

    def fill(gpus: list[str]) -> float:
        rows = set().union(*(kernels[g] for g in gpus))
        return sum(len(kernels[g]) for g in gpus) / (len(rows) * len(gpus))

    groups = [[gpu] for gpu in sorted(kernels)]
    while True:
        best = None
        for i, a in enumerate(groups):
            for j in range(i + 1, len(groups)):
                merged = a + groups[j]
                if len(merged) <= max_columns and fill(merged) >= MIN_FILL and (
                        best is None or fill(merged) > best[0]):
                    best = (fill(merged), i, j)
        if best is None:
            break
        _, i, j = best
        groups[i] = sorted(groups[i] + groups.pop(j))
    blocks = [(sorted(set().union(*(kernels[g] for g in group))), group) for group in groups]
    return sorted(blocks, key=lambda b: (-len(b[0]), b[1]))


def _heatmap(candidate: str, versus: str, pass_: str, cells: pl.DataFrame,
             overall: pl.DataFrame, extreme: float, role: bool) -> Chart:
    from matplotlib.colors import LogNorm
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    value = {(c["kernel"], c["gpu"]): c for c in cells.iter_rows(named=True)}
    total = {c["gpu"]: c for c in overall.iter_rows(named=True)}
    references: dict[str, set[str]] = {}
    for c in value.values():
        references.setdefault(c["kernel"], set()).update(c["references"].split("/"))
    label = {k: f"{k} (vs {'/'.join(sorted(references[k]))})" if role else k
             for k in references}
    left = max(text_width(t) for t in [*label.values(), OVERALL]) + 0.25
    columns = max(1, int((MAX_WIDTH - left - 0.3) // CELL[0]))
    blocks = heatmap_blocks(sorted(value), columns)
    norm = LogNorm(vmin=math.exp(-extreme), vmax=math.exp(extreme))
    name = "reference (per kernel)" if role else versus
    title = f"{candidate} vs {name} · {pass_} pass"
    # Inches from the top: the title, the colour bar (across, so that a grid of one row does
    # not squash it), then the grids, each under its GPU names.
    bar_top, bar_height = 0.55, 0.15
    top = bar_top + bar_height + 2.6 * LINE
    heights = [(len(kernels) + 1) * CELL[1] for kernels, _ in blocks]
    height = top + sum(heights) + len(blocks) * (LINE + 0.4) + 0.1
    widest = max(len(gpus) for _, gpus in blocks)
    width = max(left + widest * CELL[0], left + 3.5, text_width(title) + 0.3) + 0.3
    with style():
        fig = Figure(figsize=(width, height))
        fig.text(0.1 / width, 1 - 0.12 / height, title, fontsize=FONT + 1, ha="left",
                 va="top")
        y = top
        image = None
        for (kernels, gpus), h in zip(blocks, heights, strict=True):
            y += LINE + 0.1  # the GPU names above the grid
            ax = fig.add_axes((left / width, 1 - (y + h) / height,
                               len(gpus) * CELL[0] / width, h / height))
            y += h + 0.3
            grid = [[math.nan] * len(gpus) for _ in range(len(kernels) + 1)]
            notes = {}
            for i, kernel in enumerate(kernels):
                for j, gpu in enumerate(gpus):
                    c = value.get((kernel, gpu))
                    if c:
                        grid[i][j] = c["geomean"]
                        notes[i, j] = f"{c['geomean']:.2f}×\n" + _verdicts(c)
            last = len(kernels)
            for j, gpu in enumerate(gpus):
                c = total.get(gpu)
                if c:
                    grid[last][j] = c["geomean"]
                    notes[last, j] = (f"{c['geomean']:.2f}× · {c['kernels']} kernel"
                                      f"{'s' if c['kernels'] != 1 else ''}\n" + _verdicts(c))
            # Cells as vector rectangles (a raster image was resampled and PNG-encoded into
            # the SVG: a quarter of a heatmap's writing time), an empty cell left blank.
            image = ax.pcolormesh([j - 0.5 for j in range(len(gpus) + 1)],
                                  [i - 0.5 for i in range(last + 2)], grid, cmap="RdBu",
                                  norm=norm)
            ax.set_xlim(-0.5, len(gpus) - 0.5)
            ax.set_ylim(last + 0.5, -0.5)  # the first kernel on top, as in a table
            ax.grid(False)
            ax.xaxis.tick_top()
            ax.set_xticks(range(len(gpus)), gpus)
            ax.tick_params(axis="x", length=0)
            ax.set_yticks(range(last + 1), [label[k] for k in kernels] + [OVERALL])
            ax.get_yticklabels()[-1].set_fontweight("bold")
            ax.axhline(last - 0.5, color="black", linewidth=1.2)
            for (i, j), text in notes.items():
                dark = abs(math.log(grid[i][j])) > 0.6 * extreme
                ax.text(j, i, text, ha="center", va="center",
                        fontweight="bold" if i == last else "normal",
                        color="white" if dark else "black")
        cax = fig.add_axes((left / width, 1 - (bar_top + bar_height) / height,
                            min(4.0, width - left - 0.3) / width, bar_height / height))
        bar = fig.colorbar(image, cax=cax, orientation="horizontal")
        # 1-2-5 steps when the scale spans two decades or less (a range under a decade
        # either side of 1 would show the 1 alone); decades alone beyond, so labels keep apart.
        subs = (1.0, 2.0, 5.0) if extreme <= math.log(10) else (1.0,)
        bar.ax.xaxis.set_major_locator(LogLocator(subs=subs))
        bar.ax.xaxis.set_major_formatter(FuncFormatter(_number))
        bar.ax.xaxis.set_minor_locator(NullLocator())  # each minor tick costs drawing time
        bar.set_label(f"speedup (log scale; blue: {candidate} faster)")
    return Chart(slug("speedup", candidate, "vs", versus, pass_), "speedups",
                 f"{candidate} vs {name} · {pass_}", HEATMAP_CAPTION, fig)


MAX_FOREST_ROWS = 40  # kernels x GPUs in one forest plot; the rest are named as left out


def forest_charts(kernels: pl.DataFrame, chosen_pairs: list[tuple[str, str]]
                  ) -> tuple[list[Chart], list[str]]:
    """Per heatmap pair and pass, a forest plot of ``kernel_speedups``: one row per kernel and
    GPU, its geometric-mean speedup over the kernel's workloads (a point), the 95% interval
    over them as a bar (from 3 workloads), else the range of its workloads' speedups dotted;
    the line at 1 is "as fast". Returns the charts and what was left out."""
    omitted: list[str] = []
    return list(iter_forest_charts(kernels, chosen_pairs, omitted)), omitted


def iter_forest_charts(kernels: pl.DataFrame, chosen_pairs: list[tuple[str, str]],
                       omitted: list[str]) -> Iterator[Chart]:
    """:func:`forest_charts` one figure at a time, what was left out added to ``omitted``."""
    import polars as pl

    for candidate, versus in chosen_pairs:
        baseline = f"role:{ROLE}" if versus == ROLE else versus
        rows = kernels.filter((pl.col("candidate") == candidate)
                              & (pl.col("baseline") == baseline))
        present = rows["pass"].unique().to_list()
        for pass_ in [p for p in PASS_ORDER if p in present] + sorted(
                p for p in present if p not in PASS_ORDER):
            panel = rows.filter(pl.col("pass") == pass_).sort(
                ["geomean_speedup", "kernel", "gpu"])
            if panel.height > MAX_FOREST_ROWS:
                omitted.append(f"forest plot {candidate} vs {versus} · {pass_}: "
                               f"{panel.height - MAX_FOREST_ROWS} of {panel.height} kernel "
                               "rows left out (the middle of the ranking; kidata sql "
                               "'select * from kernel_speedups' lists them all)")
                half = MAX_FOREST_ROWS // 2
                panel = pl.concat([panel.head(half), panel.tail(half)])
            yield _forest(candidate, versus, pass_, panel)


FOREST_CAPTION = (
    "Forest plots, per pair and pass. Each row: one kernel on one GPU (its workloads in "
    "brackets), the geometric mean of its workloads' speedups (kernel_speedups) as a point and "
    "the 95% t-interval over its workloads as a bar, from 3 workloads; with fewer, the dotted "
    "line is the range of its workloads' speedups. A kernel's workloads are the sizes its "
    "benchmark sweeps: the bar says how far the speedup moves across the sweep, not how "
    "precisely each was measured. Stale keys are left out, as in the summaries.")


def _forest(candidate: str, versus: str, pass_: str, panel: pl.DataFrame) -> Chart:
    from matplotlib.figure import Figure

    name = "reference (per kernel)" if versus == ROLE else versus
    labels, points = [], []
    for r in panel.iter_rows(named=True):
        labels.append(f"{_shorten(r['kernel'], 36)} · {r['gpu']} ({r['workloads']})")
        points.append(r)
    with style():
        left = max(text_width(label) for label in labels) + 0.25
        width, height = left + 5.0, 1.3 + 0.28 * len(labels)
        fig = Figure(figsize=(width, height))
        fig.subplots_adjust(left=left / width, right=1 - 0.3 / width, top=1 - 0.45 / height,
                            bottom=0.7 / height)
        ax = fig.add_subplot()
        for i, r in enumerate(points):
            if r["interval_low"] is not None:
                ax.plot([r["interval_low"], r["interval_high"]], [i, i], color="#1f4e79",
                        linewidth=2)
            else:
                ax.plot([r["min_speedup"], r["max_speedup"]], [i, i], color="#7f7f7f",
                        linewidth=1, linestyle=":")
            ax.plot([r["geomean_speedup"]], [i], marker="o", color="#1f4e79", markersize=4)
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_xscale("log")
        _log(ax.xaxis, values=[v for r in points for v in (
            r["geomean_speedup"], r["interval_low"] or r["min_speedup"],
            r["interval_high"] or r["max_speedup"]) if v])
        ax.set_yticks(range(len(labels)), labels)
        ax.set_ylim(-0.7, len(labels) - 0.3)
        ax.set_xlabel("speedup (log scale; right of 1: the candidate is faster)")
        ax.set_title(f"{candidate} vs {name} · {pass_} pass, per kernel", loc="left")
    return Chart(slug("forest", candidate, "vs", versus, pass_), "speedups",
                 f"{candidate} vs {name} · {pass_}, per kernel", FOREST_CAPTION, fig)


def _verdicts(cell: dict[str, Any]) -> str:
    """A heatmap cell's verdict line: "3▲ 1≈ of 4", or "4 without spread"."""
    parts = [f"{cell[k]}{mark}" for k, mark in (("faster", "▲"), ("slower", "▼"),
                                                 ("noise", "≈")) if cell[k]]
    if not parts:
        return f"{cell['n']} without spread"
    return " ".join(parts) + f" of {cell['n']}"


HISTORY_CAPTION = (
    "The series with the most results, a panel each (among series of the same length, those "
    "with regressions first). A series is one kernel, pass, implementation, workload, GPU and "
    "protocol family (the trends view). A point is named with the release of its run where "
    "the release changes (with the package the source names, e.g. 'liger 0.2.1' on a "
    "huggingface series: Liger's benchmark records the Liger release that ran it) and its "
    "change from the point before, where the label has room; the latency axis spans at "
    "least ±10% so that small steps look small. A red ✕ marks a result slower than the one "
    "before it beyond noise (its p20 above the previous p80) and by more than the minimum "
    "effect (the regressions view).")


def history_chart(trends: pl.DataFrame, regressions: pl.DataFrame, palette: Palette,
                  total: int | None = None) -> tuple[Chart | None, list[str]]:
    """Latency over time for the series with the most results (regressed ones first among
    equals), a panel each, with each release named and regressions marked. ``total``: how many
    series there are when ``trends`` holds only those chosen (:func:`data.trend_series`
    chooses them in DuckDB); default the series in ``trends``."""
    import polars as pl

    if trends.is_empty():
        return None, []
    key = ["kernel", "pass", "implementation", "variant", "workload", "gpu", "family"]
    regressed = set(regressions["run_id"].to_list())
    # The longest series first: a 2-point series says little beside a 20-point one.
    ranked = (trends.group_by(key).agg(points=pl.len(),
                                       regressed=pl.col("run_id").is_in(list(regressed)).sum())
              .sort(["points", "regressed", "kernel", "pass", "workload", "implementation",
                     "gpu"], descending=[True, True, False, False, False, False, False],
                    nulls_last=True))
    omitted = []
    total = ranked.height if total is None else total
    if total > MAX_SERIES:
        shortest = ranked["points"][min(MAX_SERIES, ranked.height) - 1]
        omitted.append(f"history: {total - MAX_SERIES} of {total} series, "
                       f"those with {shortest} results or fewer (restrict with --kernel, "
                       "--gpu or --implementation)")
    chosen = ranked.head(MAX_SERIES)
    grid = _figure(chosen.height, title_lines=2)
    for ax, series in zip(grid.axes, chosen.iter_rows(named=True), strict=True):
        steps = trends.join(pl.DataFrame([{k: series[k] for k in key}],
                                         schema={k: trends.schema[k] for k in key}),
                            on=key, nulls_equal=True).sort("step")
        _history_panel(ax, steps, palette(series["implementation"], series["variant"]),
                       regressed)
        workload = _shorten(series["workload"], 44)
        ax.set_title(f"{series['kernel']} {series['pass']} · {series['gpu']}\n"
                     f"{series['implementation']} · {workload}", loc="left")
    grid.finish("History per series: median latency with p20–p80, releases named, "
                "regressions marked ✕")
    return Chart("history", "history", "History", HISTORY_CAPTION, grid.fig), omitted


def _history_panel(ax: Any, steps: pl.DataFrame, colour: Any, regressed: set[str]) -> None:
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter, date2num

    times = steps["observed_at"].to_list()
    medians = steps["median_us"].to_list()
    low = [m - p if p is not None else 0 for m, p in zip(medians, steps["p20_us"], strict=True)]
    high = [p - m if p is not None else 0 for m, p in zip(medians, steps["p80_us"],
                                                             strict=True)]
    ax.errorbar(times, medians, yerr=[low, high], color=colour, marker="o", markersize=3,
                capsize=2, linewidth=1.2)
    # At least ±10% of the middle on the axis: autoscaling alone stretches a 0.5% step
    # across the whole panel, and it reads like a large change.
    tops = [m + h for m, h in zip(medians, high, strict=True)]
    bottoms = [m - lo for m, lo in zip(medians, low, strict=True)]
    middle = (max(tops) + min(bottoms)) / 2
    span = max(max(tops) - min(bottoms), 0.2 * middle) * 1.25
    ax.set_ylim(max(0, middle - span / 2), middle + span / 2)
    ax.set_ylabel("latency (µs)")
    # minticks=2: with the default 3, spans of about two or three years (and of a few hours)
    # found no interval of at most 5 ticks (matplotlib warned, on stderr, at 5M generated
    # runs: 100 weekly results) and 100 days drew 9.
    locator = AutoDateLocator(minticks=2, maxticks=5)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    ax.margins(x=0.2)
    # A label where the release changes (and at each regression), above its point or else
    # below it, left out where it would run into a label already placed or out of the panel
    # (a regression's label is always placed): boxes in inches of the ~3 x 2 inch panel.
    x0, x1 = date2num(min(times)), date2num(max(times))
    per_x = (PANEL[0] - 1.05) / (1.4 * (x1 - x0)) if x1 > x0 else 0.0
    y0, y1 = ax.get_ylim()
    per_y = AXES_HEIGHT / (y1 - y0)
    lift, tall = 6 / 72, FONT * 1.25 / 72
    placed: list[tuple[float, float, float, float]] = []
    before = previous = None
    for i, (t, m, version, run) in enumerate(zip(times, medians, steps["release"],
                                                 steps["run_id"], strict=True)):
        bad = run in regressed
        if bad:
            ax.plot([t], [m], marker="X", markersize=9, color="crimson", linestyle="none")
        change = f" ({m / before - 1:+.1%})" if before else ""
        before, shown, previous = m, previous, version
        if not bad and version == shown:
            continue
        text = ("regression · " if bad else "") + (version or "?") + change
        x = 0.2 / 1.4 * (PANEL[0] - 1.05) + (date2num(t) - x0) * per_x
        y = (m - y0) * per_y
        last = i == len(times) - 1  # the last label reads leftwards, inside the panel
        left = x - text_width(text) - 0.06 if last else x + 0.06
        for bottom, dy, va in ((y + lift, 6, "bottom"), (y - lift - tall, -6, "top")):
            box = (left, bottom, left + text_width(text), bottom + tall)
            if bad or (0 <= box[1] and box[3] <= AXES_HEIGHT and not any(
                    box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3]
                    for b in placed)):
                ax.annotate(text, (t, m), textcoords="offset points", va=va,
                            xytext=(-4 if last else 4, dy), ha="right" if last else "left",
                            color="crimson" if bad else "black")
                placed.append(box)
                break


def efficiency_chart(frame: pl.DataFrame, palette: Palette) -> Chart | None:
    """Per GPU: achieved memory bandwidth against bytes moved, per implementation, with the
    GPU's published peak as a line."""
    import polars as pl

    if frame.is_empty():
        return None
    gpus = sorted(frame["gpu"].unique().to_list())
    grid = _figure(len(gpus))
    legend: dict[str, Any] = {}
    for ax, gpu in zip(grid.axes, gpus, strict=True):
        rows = frame.filter(pl.col("gpu") == gpu)
        bounded = False
        for (implementation,), part in rows.group_by(["implementation"], maintain_order=True):
            y = part["achieved_gbps"].to_list()
            low = [v - lo if lo is not None else 0
                   for v, lo in zip(y, part["achieved_gbps_low"], strict=True)]
            high = [hi - v if hi is not None else 0
                    for v, hi in zip(y, part["achieved_gbps_high"], strict=True)]
            overhead = [b in NOT_BYTES for b in part["bound"].to_list()]
            colour = palette(implementation)
            # Points the bytes do not bound (overhead: launches; fixed cost: something else)
            # are hollow: their rate is no bandwidth figure.
            for hollow in (False, True):
                keep = [i for i, o in enumerate(overhead) if o == hollow]
                if not keep:
                    continue
                ax.errorbar([part["bytes"][i] for i in keep], [y[i] for i in keep],
                            yerr=[[low[i] for i in keep], [high[i] for i in keep]],
                            linestyle="none", marker="o", markersize=3.5 if hollow else 3,
                            capsize=1.5, color=colour,
                            markerfacecolor="white" if hollow else colour,
                            label=None if hollow else implementation)
            if any(overhead):
                bounded = True
            above = part.filter(pl.col("above_peak").fill_null(False))
            if not above.is_empty():
                ax.plot(above["bytes"].to_list(), above["achieved_gbps"].to_list(),
                        marker="X", markersize=8, color="crimson", linestyle="none",
                        label="above peak: not credible")
        if "merged" in rows.columns and rows["merged"].any():
            title = f"{gpu} ({int(rows['runs'].sum()):,} runs in {rows.height:,} medians)"
        else:
            title = gpu
        peak = rows["peak_gbps"].drop_nulls()
        if len(peak):
            ax.axhline(peak[0], color="black", linestyle="--", linewidth=1)
            # Room above the line for its label, inside the panel (not in the title's way).
            top = max(peak[0], max(v for v in rows["achieved_gbps_high"].to_list()
                                   + rows["achieved_gbps"].to_list() if v is not None))
            ax.set_ylim(0, top * 1.15)
            ax.annotate(f"peak {peak[0]:,.0f} GB/s", (0.01, peak[0]),
                        xycoords=("axes fraction", "data"), textcoords="offset points",
                        xytext=(0, 3))
        if bounded:
            ax.plot([], [], linestyle="none", marker="o", markersize=3.5, color="dimgrey",
                    markerfacecolor="white", label="hollow: not bound by bytes")
        _log(ax.xaxis)
        _label_panel(ax, title, "bytes moved (lower bound, byte model)", "achieved GB/s",
                     legend)
    grid.finish("Efficiency: achieved memory bandwidth against the GPU's published peak",
                list(legend.values()), list(legend))
    return Chart("efficiency", "efficiency", "Efficiency", EFFICIENCY_CAPTION, grid.fig)


def _label_panel(ax: Any, gpu: str, xlabel: str, ylabel: str, legend: dict[str, Any]) -> None:
    """A GPU's panel of a rate chart: its axis labels and title; its legend entries join the
    figure's one legend (``legend``, label -> handle, first seen kept)."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(gpu, loc="left")
    for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
        legend.setdefault(label, handle)


EFFICIENCY_CAPTION = (
    "A panel per GPU. Each point is the latest run of a kernel with a byte model at one "
    "workload (the efficiency view): minimum bytes moved / median time, with the rate at p80 "
    "and p20 as the bar. The "
    "dashed line is the GPU's published peak; a point above it is not credible. A hollow point "
    "is not bound by its bytes (the efficiency view's bound: they would move in under 5 µs at "
    "peak, or twice the bytes take hardly longer; 'overhead' under 20 µs, where launches set "
    "the time, else 'fixed cost'): its rate is no bandwidth measurement. Kernels and passes "
    f"share a panel. A GPU with more than {data.MAX_EFFICIENCY_POINTS} points has them merged "
    "(its title says so): a point per implementation, byte count and kind (hollow or not, "
    "above the peak or not), at the median of its runs' rates, the bar from the lowest to the "
    "highest.")


def roofline_chart(frame: pl.DataFrame, palette: Palette) -> Chart | None:
    """Per GPU: achieved TFLOP/s of compute-class runs (the roofline view) against the FLOPs of
    the pass, with the GPU's published dense 16-bit tensor peak as a line."""
    import polars as pl

    if frame.is_empty():
        return None
    from matplotlib.ticker import EngFormatter

    gpus = sorted(frame["gpu"].unique().to_list())
    grid = _figure(len(gpus))
    legend: dict[str, Any] = {}
    for ax, gpu in zip(grid.axes, gpus, strict=True):
        rows = frame.filter(pl.col("gpu") == gpu)
        for (implementation,), part in rows.group_by(["implementation"], maintain_order=True):
            ax.plot(part["flops"].to_list(), part["achieved_tflops"].to_list(), linestyle="none",
                    marker="o", markersize=3, color=palette(implementation),
                    label=implementation)
            overhead = part.filter(pl.col("bound").is_in(list(NOT_BYTES)))
            if not overhead.is_empty():
                ax.plot(overhead["flops"].to_list(), overhead["achieved_tflops"].to_list(),
                        linestyle="none", marker="o", markersize=7, markerfacecolor="none",
                        color="grey", label="under 5 µs of work at peak")
        peak = rows["peak_tflops"].drop_nulls()
        if len(peak):
            ax.axhline(peak[0], color="black", linestyle="--", linewidth=1)
            ax.annotate(f"dense 16-bit peak {peak[0]:,.0f} TFLOP/s", (0.01, peak[0]),
                        xycoords=("axes fraction", "data"), textcoords="offset points",
                        xytext=(0, 3))
            top = max(peak[0], max(rows["achieved_tflops"].drop_nulls().to_list(), default=0))
            ax.set_ylim(0, top * 1.15)  # room for the label above the roof
        if _decades(rows["flops"].to_list()):
            _log(ax.xaxis)
        # FLOPs read as powers of ten (200G, 1T), not as binary sizes; and in each label, not
        # as a "1e12" offset at the axis' end, where it ran into the axis label.
        ax.xaxis.set_major_formatter(EngFormatter(sep=""))
        ax.set_ylim(bottom=0)  # distance to the roof reads as a fraction of the peak
        _label_panel(ax, gpu, "FLOPs of the pass (matrix multiplies, FLOP model)",
                     "achieved TFLOP/s", legend)
    grid.finish("Compute: achieved TFLOP/s against the GPU's published dense tensor peak",
                list(legend.values()), list(legend))
    return Chart("roofline", "roofline", "Compute roofline", ROOFLINE_CAPTION, grid.fig)


ROOFLINE_CAPTION = (
    "A panel per GPU. Each point is the latest run of a kernel with a FLOP model at one "
    "workload (the roofline view): matrix-multiply FLOPs / median time, a lower bound of the "
    "work done. The dashed line is "
    "the GPU's dense 16-bit tensor peak (for bfloat16/float16 workloads); hollow grey circles "
    "mark runs whose work would take under 5 µs at peak, where launches (under 20 µs: "
    "'overhead') or other fixed costs, not the hardware's peaks, set the time.")
