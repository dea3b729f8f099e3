"""The report's latency figures, drawn by this process and a helper process at once.

matplotlib builds and writes every axes, tick and label as a Python object, one by one: at 1M
generated runs the report's 12 latency figures (144 panels) took ~8 s of its ~18 s, the
heatmaps and forest plots ~3.5 s more, all on one core of two (docs/benchmarks.md, Run AT).
:class:`SharedDrawing` hands the latency figures of :func:`charts.latency_plan` to a helper
process, which draws them from the front of the plan while this process draws the page's other
figures and then takes the plan from the back; each figure is worked out from its rows in this
process (:func:`prepare`, Polars), then drawn by the same function (:func:`draw`, matplotlib
alone) and written as SVG where it was drawn, so the page is the same byte for byte whichever
process drew a figure. The helper is handed the worked-out figure, plain values, so it never
imports Polars, a third of its memory (docs/benchmarks.md, Run BB); the thread that feeds it
works out the next figure while the helper draws the current one.

The helper is a fresh interpreter (``python -c`` :data:`HELPER_MAIN`, started by
:mod:`kidata.core.child` as the load's staging workers are), reading pickled jobs on its
standard input and writing pickled results on its standard output. It starts after
the report's last query, when DuckDB has given its memory back, so the two processes' memory
does not meet DuckDB's at the report's peak. If the helper cannot start or fails, this process
draws what it left: a figure is never lost to it.
"""

from __future__ import annotations

import collections
import pickle
import threading
import traceback
from typing import TYPE_CHECKING, Any

from kidata.core import child

if TYPE_CHECKING:
    from collections.abc import Iterator

    import polars as pl

    from kidata.query.present.charts import Chart, LatencyFigure, Palette

HELPER_MAIN = "from kidata.query.present.drawing import serve; serve()"
# Latency panels from which a helper is worth starting: its interpreter and matplotlib cost up
# to ~1 CPU s to import, about what 20 panels cost to draw.
MIN_PANELS = 24


class HelperError(Exception):
    """The helper process failed or ended; what it had not drawn is drawn here."""


def prepare(kernel: str, rows: pl.DataFrame, palette: Palette
            ) -> tuple[LatencyFigure, list[str]]:
    """One latency figure of the plan worked out from its rows, not drawn: what
    :func:`draw` draws, and the lines its panels leave out. Done in the report's process, so
    that the helper draws from plain values and never imports Polars."""
    from kidata.query.present import charts

    omitted: list[str] = []
    return charts.latency_figure(kernel, rows, palette, omitted), omitted


def draw(figure: LatencyFigure) -> Chart:
    """A latency figure drawn and written as SVG, its figure freed: the chart (its ``text``
    set, no ``figure``)."""
    from kidata.query.present import charts

    with charts.style():
        return charts.draw_latency(figure).written()


def helper_wanted(panels: int) -> bool:
    """Whether a report of ``panels`` latency panels draws them with a helper: enough panels to
    pay for its start, and worker processes allowed (:func:`kidata.core.child.workers`:
    ``KIDATA_WORKERS`` not 0, and unset, a second core)."""
    return panels >= MIN_PANELS and child.workers() > 0


class Helper:
    """The helper process: :meth:`send` hands it one job, :meth:`receive` waits for its
    figure (one job at a time)."""

    def __init__(self) -> None:
        self.proc = child.start(HELPER_MAIN)

    def send(self, job: LatencyFigure) -> None:
        try:
            pickle.dump(job, self.proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self.proc.stdin.flush()
        except OSError as exc:
            raise HelperError(f"the drawing helper ended: {exc}") from exc

    def receive(self) -> Chart:
        try:
            status, result = pickle.load(self.proc.stdout)
        except (OSError, EOFError, pickle.UnpicklingError) as exc:
            raise HelperError(f"the drawing helper ended: {exc}") from exc
        if status != "ok":
            raise HelperError(f"the drawing helper failed:\n{result}")
        return result

    def close(self) -> None:
        child.end(self.proc, timeout=30)
        self.proc.stdout.close()


def serve() -> None:
    """The helper process: draw each job read from stdin (pickled), write the result to stdout
    (pickled), until stdin ends. Changes this process's signal handling: call it only in a
    process of its own."""
    inp, out = child.serving()
    for job in child.jobs(inp):
        try:
            result: Any = ("ok", draw(job))
        except Exception:  # noqa: BLE001 - the report's process draws it again and reports
            result = ("error", traceback.format_exc())
        try:
            pickle.dump(result, out, protocol=pickle.HIGHEST_PROTOCOL)
            out.flush()
        except OSError:
            return  # the report's process is gone
        del job, result


class SharedDrawing:
    """The latency figures of ``plan`` (:func:`charts.latency_plan`), drawn by a helper from the
    front of the plan, from when this object is made, and by this process from the back when
    :meth:`charts` is read. With ``helper`` false, this process draws them all, in order."""

    def __init__(self, plan: list[tuple[str, pl.DataFrame, list[str]]], palette: Palette,
                 helper: bool) -> None:
        self.plan = plan
        self.palette = palette
        self.jobs = collections.deque(range(len(plan)))
        self.done: dict[int, tuple[Chart, list[str]]] = {}
        self.lock = threading.Lock()
        self.drawn_by_helper = 0
        self.helper: Helper | None = None
        self.thread: threading.Thread | None = None
        if helper and len(plan) > 1:
            self.thread = threading.Thread(target=self._feed, daemon=True)
            self.thread.start()

    def _take(self, front: bool) -> int | None:
        with self.lock:
            if not self.jobs:
                return None
            return self.jobs.popleft() if front else self.jobs.pop()

    def _feed(self) -> None:
        try:
            helper = Helper()
        except OSError:
            return  # this process draws them all
        with self.lock:
            self.helper = helper
        try:
            job = self._prepared()
            while job is not None:
                i, figure, omitted = job
                following = None
                try:
                    helper.send(figure)
                    # The next figure is worked out here while the helper draws this one.
                    following = self._prepared()
                    self.done[i] = helper.receive(), omitted
                except Exception:  # noqa: BLE001 - this process draws (or fails on) it again
                    self._give_back(i, *(following or ())[:1])
                    return
                self.drawn_by_helper += 1
                job = following
        except Exception:  # noqa: BLE001 - _prepared gave its job back
            return
        finally:
            helper.close()

    def _prepared(self) -> tuple[int, LatencyFigure, list[str]] | None:
        """The next job from the front of the plan, worked out (:func:`prepare`); None when
        none is left. A job that fails to be worked out is given back first."""
        i = self._take(front=True)
        if i is None:
            return None
        kernel, rows, _ = self.plan[i]
        try:
            return (i, *prepare(kernel, rows, self.palette))
        except Exception:
            self._give_back(i)
            raise

    def _give_back(self, *jobs: int) -> None:
        """Jobs the helper will not draw, back to the front of the plan in their order: this
        process draws them (and, if they fail, reports their error)."""
        with self.lock:
            self.jobs.extendleft(reversed(jobs))

    def close(self) -> None:
        """End the helper: a page that failed (or was interrupted) before its latency figures
        were all drawn leaves no helper drawing them; what it was drawing is not waited for."""
        with self.lock:
            self.jobs.clear()
            helper = self.helper
        if self.thread is None:
            return
        if self.thread.is_alive() and helper is not None:
            helper.proc.kill()
        self.thread.join()
        self.jobs.clear()  # the figure the helper was drawing, given back as it ended

    def charts(self, omitted: list[str]) -> Iterator[Chart]:
        """The figures in the plan's order, what was left out added to ``omitted`` in that
        order; this process draws what the helper has not taken, then waits for the helper."""
        if self.thread is None:  # one by one, in order: one figure held at a time
            for kernel, rows, cut in self.plan:
                figure, left = prepare(kernel, rows, self.palette)
                omitted += cut + left
                yield draw(figure)
            return
        while True:
            while (i := self._take(front=False)) is not None:
                kernel, rows, _ = self.plan[i]
                figure, left = prepare(kernel, rows, self.palette)
                self.done[i] = draw(figure), left
            self.thread.join()
            if not self.jobs:  # else the helper failed and gave its job back
                break
        for i, (_, _, cut) in enumerate(self.plan):
            chart, left = self.done.pop(i)
            omitted += cut + left
            yield chart
