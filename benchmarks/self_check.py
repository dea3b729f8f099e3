#!/usr/bin/env python3
"""What a load's own check costs (issue 25): the time of ``LoadCommit._verify`` beside the
whole load it is part of, in one process, one load.

    .venv/bin/python benchmarks/self_check.py DATA/bundles.ndjson [--repeat 2] [--duplicates]

Loads the file into a fresh warehouse (``--duplicates``: the file's first tenth, then the
whole file, in one load, so the commit copies its kept rows) with the check wrapped by a timer,
and prints one JSON line per load: the load's wall and CPU seconds (this process and its
workers), the check's wall and CPU seconds, and the check's share of the load. The check runs
in the loading process only (DuckDB over the final files, 2 threads), so its share of the
load's wall time is the figure that matters; ``--repeat`` loads of the same file show the
spread. The issue's bound: under 5% at 1M runs.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path


def cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--duplicates", action="store_true")
    args = parser.parse_args()

    from kidata import Warehouse
    from kidata.store import load_commit

    spent: dict[str, float] = {}
    verify = load_commit.LoadCommit._verify

    def timed(self, *a, **kw):
        wall, used = time.perf_counter(), time.process_time()
        try:
            return verify(self, *a, **kw)
        finally:
            spent["wall"] = time.perf_counter() - wall
            spent["cpu"] = time.process_time() - used

    load_commit.LoadCommit._verify = timed
    for n in range(args.repeat):
        with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
            files = [str(args.data)]
            if args.duplicates:
                head = Path(tmp) / "head.ndjson"
                with open(args.data, "rb") as src, open(head, "wb") as out:
                    lines = sum(1 for _ in src)
                    src.seek(0)
                    for i, line in enumerate(src):
                        if i >= lines // 10:
                            break
                        out.write(line)
                files = [str(head), *files]
            wall, used = time.perf_counter(), cpu()
            report = Warehouse(Path(tmp) / "wh").load(files)
            wall, used = time.perf_counter() - wall, cpu() - used
            print(json.dumps({
                "round": n + 1, "runs_added": report.runs_added,
                "duplicates": report.duplicates, "load_wall_s": round(wall, 4),
                "load_cpu_s": round(used, 4), "check_wall_s": round(spent["wall"], 4),
                "check_cpu_s": round(spent["cpu"], 4),
                "check_share_of_wall": round(spent["wall"] / wall, 4),
                "check_share_of_cpu": round(spent["cpu"] / used, 4)}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
