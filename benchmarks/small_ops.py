#!/usr/bin/env python3
"""The fixed cost of small operations: one load of the three seed files (26 runs) into a fresh
warehouse, and a ``check`` of a warehouse of three small loads, in CPU seconds per operation.

    .venv/bin/python benchmarks/small_ops.py [--repeat 15] [--baseline PATH] [--turns 3]

A CI job loads a few results and checks or compares them; the test suite does that hundreds
of times. On data this small an operation's time is its statements' fixed costs (DuckDB
plans, binds and opens Parquet footers per statement), not its rows.

With ``--baseline PATH`` (a checkout of another version, e.g. ``git worktree add /tmp/old
v0.3.4``), the same measure runs with that checkout's ``kidata`` in a subprocess, in turns
with this one (``--turns``), and the ratios are printed: this version's median CPU per
operation over the baseline's. Each turn is one process per version, each measuring
``--repeat`` operations after one warm-up (imports and first connection are not counted).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SEEDS = Path(__file__).resolve().parents[1] / "tests" / "data" / "seeds"


def cpu() -> float:
    """CPU seconds of this process, all threads (DuckDB's included)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def measure(repeat: int) -> dict[str, float]:
    """Median CPU and wall seconds of a small load and of a check, in this process."""
    from kidata.warehouse import Warehouse

    seeds = sorted(str(p) for p in SEEDS.glob("*.txt"))
    out: dict[str, list[float]] = {"load_cpu": [], "load_wall": [], "check_cpu": [],
                                   "check_wall": []}
    with tempfile.TemporaryDirectory() as tmp:
        checked = Warehouse(Path(tmp) / "checked")
        for seed in seeds:  # three loads: a file per table each
            checked.load([seed])
        for i in range(repeat + 1):
            wh = Warehouse(Path(tmp) / f"w{i}")
            c, w = cpu(), time.perf_counter()
            report = wh.load([str(SEEDS)])
            load = (cpu() - c, time.perf_counter() - w)
            assert report.committed and report.added.get("runs") == 26, report
            c, w = cpu(), time.perf_counter()
            result = checked.check()
            check = (cpu() - c, time.perf_counter() - w)
            assert result.ok, result.problems
            if i:  # the first is the warm-up
                out["load_cpu"].append(load[0])
                out["load_wall"].append(load[1])
                out["check_cpu"].append(check[0])
                out["check_wall"].append(check[1])
    return {k: statistics.median(v) for k, v in out.items()}


def turn(python_path: str | None, repeat: int) -> dict[str, float]:
    env = dict(os.environ)
    if python_path:
        env["PYTHONPATH"] = python_path
    done = subprocess.run([sys.executable, __file__, "--inner", "--repeat", str(repeat)],
                          env=env, capture_output=True, text=True, check=True,
                          cwd=python_path or None)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--baseline", help="a checkout of another kidata version")
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        print(json.dumps(measure(args.repeat)))
        return
    if not args.baseline:
        figures = measure(args.repeat)
        print(json.dumps({k: round(v, 4) for k, v in figures.items()}))
        return
    here = str(Path(__file__).resolve().parents[1])
    for t in range(args.turns):
        mine, theirs = turn(here, args.repeat), turn(args.baseline, args.repeat)
        print(json.dumps({
            "turn": t + 1,
            **{f"{k}_ms": round(mine[k] * 1000, 1) for k in ("load_cpu", "check_cpu")},
            **{f"baseline_{k}_ms": round(theirs[k] * 1000, 1)
               for k in ("load_cpu", "check_cpu")},
            "load_ratio": round(mine["load_cpu"] / theirs["load_cpu"], 2),
            "check_ratio": round(mine["check_cpu"] / theirs["check_cpu"], 2),
        }), flush=True)


if __name__ == "__main__":
    main()
