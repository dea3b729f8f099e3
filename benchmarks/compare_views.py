#!/usr/bin/env python3
"""Warm query time of ``speedups`` and ``speedup_summary`` as the code of another commit writes
them, beside the current views, alternating in one process (so a busy machine moves both).

    python benchmarks/compare_views.py WAREHOUSE [--old cd06d8b] [--repeat 5]
                                       [--view series_steps ...]

The queries are the benchmark's (``baselines.KIDATA_QUERIES``); the old views are the old
commit's ``sql/speedups.sql`` and ``sql/speedup_summary.sql`` (``git show``), defined as
``old_speedups`` and ``old_speedup_summary`` on the current connection. Each ``--view`` adds
``select count(*)`` of that view beside the old commit's text of it (reading the current
views it depends on). Prints the minimum and median seconds of each side, wall and CPU, and
the rows each gives.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from baselines import KIDATA_QUERIES  # noqa: E402

from kidata.warehouse import Warehouse  # noqa: E402


def old_view(rev: str, name: str) -> str:
    text = subprocess.run(["git", "-C", str(HERE), "show", f"{rev}:sql/{name}.sql"],
                          capture_output=True, text=True, check=True).stdout
    return re.sub(r"--[^\n]*", "", text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("warehouse")
    ap.add_argument("--old", default="cd06d8b", help="commit whose views to compare with")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--view", action="append", default=[],
                    help="also time select count(*) of this view, old and new (repeatable)")
    args = ap.parse_args(argv)
    con = Warehouse(args.warehouse).connect()
    con.execute("CREATE OR REPLACE TEMP VIEW old_speedups AS "
                + old_view(args.old, "speedups"))
    con.execute("CREATE OR REPLACE TEMP VIEW old_speedup_summary AS " + re.sub(
        r"\bFROM speedups\b", "FROM old_speedups", old_view(args.old, "speedup_summary")))
    questions = {}
    for name in ("speedups", "speedup_summary"):
        new = KIDATA_QUERIES[name]
        questions[name] = {"old": re.sub(rf"FROM {name}\b", f"FROM old_{name}", new),
                           "new": new}
    for name in args.view:
        con.execute(f"CREATE OR REPLACE TEMP VIEW old_{name} AS " + old_view(args.old, name))
        questions[name] = {"old": f"SELECT count(*) FROM old_{name}",
                           "new": f"SELECT count(*) FROM {name}"}
    for name, sides in questions.items():
        times: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
        rows = {side: len(con.execute(q).fetchall()) for side, q in sides.items()}  # warm-up
        for _ in range(args.repeat):
            for side, query in sides.items():
                start, cpu = time.perf_counter(), time.process_time()
                con.execute(query).fetchall()
                times[side].append((time.perf_counter() - start, time.process_time() - cpu))
        print(name, "  ".join(
            f"{side}: min {min(w for w, _ in t):.3f} s, median "
            f"{statistics.median(w for w, _ in t):.3f} s, CPU median "
            f"{statistics.median(c for _, c in t):.3f} s, {rows[side]:,} rows"
            for side, t in times.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
