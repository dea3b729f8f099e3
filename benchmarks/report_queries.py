#!/usr/bin/env python3
"""Each query of ``kidata report``, timed, with the process's resident set before it and its
peak during it: which query sets the report's peak, and what the process holds under it.

    .venv/bin/python benchmarks/report_queries.py WAREHOUSE [-k KERNEL ...] [-g GPU ...] \
        [--since DATE]

Runs ``Warehouse.report`` in this process with every function of
``kidata.query.present.data`` that reads a frame wrapped, and stops before the first figure
is drawn (the drawing's memory is ``commands.py``'s to measure, with the helper process). The
resident set is sampled every 2 ms by a thread (psutil, the bench extra). Each line: the
function, its seconds, the resident set when it was called and the peak while it ran (MiB).
Run it once per tree to compare (``PYTHONPATH=/path/to/checkout``): the figures of one run
wander with the machine, the ordering of the queries' peaks does not.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

# Every query the report makes, in the order it makes them (kidata.query.present.page._read).
# ``speedups`` is an older tree's (before 0.3.32); a name a tree lacks is skipped.
QUERIES = ("modelled", "efficiency", "roofline", "speedups", "speedup_cells", "kernel_speedups",
           "latency_points", "regressions", "trend_series", "trend_steps", "shifts", "audit",
           "noise_envelopes", "min_effect", "summary")


class _Read(Exception):
    """Every frame read: the figures are not measured here."""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("warehouse", type=Path)
    ap.add_argument("-k", "--kernel", action="append", default=[])
    ap.add_argument("-g", "--gpu", action="append", default=[])
    ap.add_argument("--since", help="the report's window: results measured from then on")
    args = ap.parse_args(argv)

    import psutil

    import kidata
    from kidata.query.present import data, page

    me = psutil.Process()
    peak = [0]

    def sample() -> None:
        while True:
            peak[0] = max(peak[0], me.memory_info().rss)
            time.sleep(0.002)

    threading.Thread(target=sample, daemon=True).start()
    mib = 2 ** 20
    for name in QUERIES:
        query = getattr(data, name, None)
        if query is None:
            continue

        def timed(*a, _query=query, _name=name, **k):
            before = me.memory_info().rss
            peak[0] = before
            start = time.perf_counter()
            out = _query(*a, **k)
            print(f"{_name:16s} {time.perf_counter() - start:6.2f} s  held {before / mib:5.0f}"
                  f" MiB  peak {peak[0] / mib:5.0f} MiB (+{(peak[0] - before) / mib:.0f})",
                  flush=True)
            return out

        setattr(data, name, timed)

    def stop(*a, **k):
        raise _Read

    page._draw_page = stop
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        try:
            kidata.Warehouse(args.warehouse, since=args.since).report(
                Path(folder) / "report.html", kernels=args.kernel, gpus=args.gpu)
        except _Read:
            pass
    print(f"{'all queries':16s} {time.perf_counter() - start:6.2f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
