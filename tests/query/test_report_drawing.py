"""The report's latency figures drawn by a helper process (kidata.query.present.drawing): the
same figures, in the same order, with the same "left out" lines, whichever process drew them,
and none lost when the helper fails."""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path

import pytest
from conftest import SEEDS

from kidata import Warehouse
from kidata.core import child
from kidata.query.present import charts, data, drawing


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> Warehouse:
    wh = Warehouse(tmp_path_factory.mktemp("drawing") / "wh")
    assert wh.load([str(SEEDS)]).ok
    return wh


@pytest.fixture(scope="module")
def plan(seeded: Warehouse):
    points = data.latency_points(seeded.session, data.Filters())
    return charts.latency_plan(points), charts.Palette(charts.series_names(points))


def drawn(shared: drawing.SharedDrawing) -> tuple[list[tuple[str, str]], list[str]]:
    omitted: list[str] = []
    with charts.style():
        figures = [(chart.name, chart.svg()) for chart in shared.charts(omitted)]
    return figures, omitted


def here(plan) -> tuple[list[tuple[str, str]], list[str]]:
    return drawn(drawing.SharedDrawing(*plan, helper=False))


def test_the_helper_draws_the_figures_this_process_would(plan):
    """Every latency figure of the seeds drawn by the helper (this process waits for it before
    taking any) is the SVG this process draws, in the plan's order; the seeds' three kernels
    give three figures."""
    shared = drawing.SharedDrawing(*plan, helper=True)
    shared.thread.join()  # the helper takes every figure before this process looks
    by_helper = drawn(shared)
    assert shared.drawn_by_helper == 3
    mine = here(plan)
    assert [name for name, _ in mine[0]] == ["latency-relu_squared", "latency-rms_norm",
                                             "latency-train_step"]
    assert all(svg.startswith("<svg") and "</svg>" in svg for _, svg in mine[0])
    assert by_helper == mine


@pytest.mark.parametrize("helper", [
    "import sys; sys.exit(3)",  # ends before its first figure
    # fails on its first figure, as a bug in drawing would
    "import pickle, sys; pickle.load(sys.stdin.buffer); "
    "pickle.dump(('error', 'Traceback: boom'), sys.stdout.buffer); sys.stdout.flush(); "
    "sys.stdin.buffer.read()",
])
def test_a_failing_helper_loses_no_figure(plan, monkeypatch, helper):
    """What the helper took and did not draw is drawn by this process: the same figures."""
    monkeypatch.setattr(drawing, "HELPER_MAIN", helper)
    shared = drawing.SharedDrawing(*plan, helper=True)
    shared.thread.join()
    got = drawn(shared)
    assert shared.drawn_by_helper == 0
    assert got == here(plan)


def test_a_page_that_fails_ends_its_helper(plan):
    """close() (what the page calls when it fails before its latency figures) hands the
    helper nothing more and ends its process, without waiting for the figure it is drawing
    (the helper is still importing matplotlib when close() is called here)."""
    shared = drawing.SharedDrawing(*plan, helper=True)
    while shared.helper is None:  # started
        time.sleep(0.01)
    shared.close()
    assert not shared.thread.is_alive()
    assert shared.drawn_by_helper == 0 and not shared.jobs
    assert shared.helper.proc.returncode == -signal.SIGKILL


def test_a_helper_is_started_only_for_a_page_worth_it(monkeypatch):
    """From MIN_PANELS latency panels, on more than one core, unless KIDATA_WORKERS is 0."""
    monkeypatch.setattr(child.os, "cpu_count", lambda: 2)
    monkeypatch.delenv("KIDATA_WORKERS", raising=False)
    assert drawing.helper_wanted(drawing.MIN_PANELS)
    assert not drawing.helper_wanted(drawing.MIN_PANELS - 1)
    monkeypatch.setenv("KIDATA_WORKERS", "0")
    assert not drawing.helper_wanted(1000)
    monkeypatch.setenv("KIDATA_WORKERS", "1")
    monkeypatch.setattr(child.os, "cpu_count", lambda: 1)
    assert drawing.helper_wanted(1000)  # asked for
    monkeypatch.delenv("KIDATA_WORKERS")
    assert not drawing.helper_wanted(1000)  # one core: nothing to share the drawing with


def undated(page: str) -> str:
    return re.sub(r"Written \d{4}-\d\d-\d\d \d\d:\d\d UTC", "Written", page)


def test_a_page_drawn_with_the_helper_is_the_page_drawn_alone(seeded, tmp_path: Path,
                                                             monkeypatch):
    """The whole page, the helper drawing every latency figure (this process waiting for it),
    is the page this process draws alone (KIDATA_WORKERS=0), but for the time it was
    written."""
    monkeypatch.setenv("KIDATA_WORKERS", "0")
    seeded.report(tmp_path / "alone.html")
    monkeypatch.setenv("KIDATA_WORKERS", "1")
    monkeypatch.setattr(drawing, "MIN_PANELS", 1)
    helped: list[drawing.SharedDrawing] = []
    charts_of = drawing.SharedDrawing.charts

    def after_the_helper(self, omitted):
        helped.append(self)
        self.thread.join()
        return charts_of(self, omitted)

    monkeypatch.setattr(drawing.SharedDrawing, "charts", after_the_helper)
    seeded.report(tmp_path / "helped.html")
    assert [h.drawn_by_helper for h in helped] == [3]
    alone = (tmp_path / "alone.html").read_text("utf-8")
    assert alone.count("<svg") == 5
    assert undated((tmp_path / "helped.html").read_text("utf-8")) == undated(alone)


def test_the_helper_draws_from_plain_values_without_polars(plan, tmp_path: Path):
    """What the helper is handed (drawing.prepare) is drawn in a fresh interpreter that never
    imports Polars (~24 MB of the helper's ~130 MB at 1M runs), into the SVG this process
    draws from the rows."""
    import pickle
    import subprocess
    import sys

    points, palette = plan
    kernel, rows, _ = points[1]
    figure, omitted = drawing.prepare(kernel, rows, palette)
    job = tmp_path / "job.pickle"
    job.write_bytes(pickle.dumps(figure))
    script = ("import pickle, sys; from kidata.query.present.drawing import draw; "
              f"chart = draw(pickle.load(open({str(job)!r}, 'rb'))); "
              "assert 'polars' not in sys.modules, 'polars imported'; "
              "sys.stdout.write(chart.svg())")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    with charts.style():
        mine = charts.latency_chart(kernel, rows, palette, []).svg()
    assert proc.stdout == mine and mine.startswith("<svg")
    assert omitted == []


def test_a_figure_that_cannot_be_worked_out_fails_the_page_with_its_own_error(plan,
                                                                              monkeypatch):
    """A figure whose rows fail to be worked out in the thread that feeds the helper is given
    back: this process works it out again and raises that error (not a missing figure)."""
    latency_figure = charts.latency_figure

    def failing(kernel, *args):
        if kernel == "rms_norm":
            raise ValueError("boom: rms_norm")
        return latency_figure(kernel, *args)

    monkeypatch.setattr(charts, "latency_figure", failing)
    shared = drawing.SharedDrawing(*plan, helper=True)
    shared.thread.join()  # the feeding thread met the failure first
    # It had sent relu_squared (0) and was working out rms_norm (1): both are given back.
    assert list(shared.jobs) == [0, 1, 2] and shared.drawn_by_helper == 0
    with pytest.raises(ValueError, match="boom: rms_norm"):
        drawn(shared)
    shared.close()


def test_a_latency_panel_shades_each_lines_p20_p80_band_and_fits_its_axes_to_them():
    """Worked by hand: a panel of three lines over sizes 1, 10, 100. Line A has p20/p80 at
    every size: one band, the polygon along the lows (1, 8) (10, 18) (100, 90) and back along
    the highs (100, 400) (10, 22) (1, 12), shaded in A's colour at alpha 0.2. Line B has them
    at one size only: an error bar, no band. Line C has none: no band. Medians reach 100 at
    most, A's p80 400 (and its p20 8, under every median): the y axis must reach both."""
    panel = charts.LatencyPanel(
        "forward · h100", "size", [],
        [charts.LatencyLine([1, 10, 100], [10.0, 20.0, 100.0], [8.0, 18.0, 90.0],
                            [12.0, 22.0, 400.0], "#1f77b4", "-"),
         charts.LatencyLine([1, 10, 100], [11.0, 21.0, 50.0], [9.0, None, None],
                            [13.0, None, None], "#ff7f0e", "-"),
         charts.LatencyLine([1, 10, 100], [12.0, 23.0, 60.0], [None] * 3, [None] * 3,
                            "#2ca02c", "--")],
        [1, 10, 100] * 3, [10.0, 20.0, 100.0, 11.0, 21.0, 50.0, 12.0, 23.0, 60.0])
    figure = charts.LatencyFigure("k", [panel], {"a": "#1f77b4", "b": "#ff7f0e",
                                                 "c": "#2ca02c"}, [])
    with charts.style():
        chart = charts.draw_latency(figure)
        svg = chart.svg()
    ax = chart.figure.axes[0]
    shaded = [c for c in ax.collections if c.get_facecolor().size and
              c.get_facecolor()[0][3] == pytest.approx(0.2)]
    assert len(shaded) == 1
    [path] = shaded[0].get_paths()
    corners: list[tuple[float, float]] = []
    for vertex in map(tuple, path.vertices):  # without repeated and closing points
        if vertex not in corners:
            corners.append(vertex)
    start = corners.index((1, 8))
    assert corners[start:] + corners[:start] == [(1, 8), (10, 18), (100, 90), (100, 400),
                                                 (10, 22), (1, 12)]
    assert tuple(shaded[0].get_facecolor()[0]) == pytest.approx((0x1f / 255, 0x77 / 255,
                                                                 0xb4 / 255, 0.2))
    low, high = ax.get_ylim()
    assert low <= 8 and high >= 400
    assert svg.count("fill: #1f77b4; fill-opacity: 0.2") == 1
    assert "fill: #ff7f0e; fill-opacity" not in svg and "fill: #2ca02c; fill-opacity" not in svg
