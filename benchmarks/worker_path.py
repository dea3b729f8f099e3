#!/usr/bin/env python3
"""CPU per run of a load's worker path, in one process: one tree or several side by side.

    .venv/bin/python benchmarks/worker_path.py DATA/bundles.ndjson [--runs 30k]
        [--tree LABEL=PATH|git:REV ...] [--rounds 3]

What a worker process does with JSON Lines, without the processes around it: the first
``--runs`` lines of the file, in jobs of ``stage.BATCH_LINES`` lines, each through
``stage_worker.WorkerState.run`` (the fast path or the general one, staging, the Arrow
conversion of the job's ``runs`` and ``measurements``) and pickled as a worker pickles its
result. No start-up, reading, pipes or commit, so a change to the per-record work shows at a
fraction of a µs, where a whole load (``cpu_per_run.py``) varies by a few µs from run to run.
It uses the worker's public entry point (:class:`kidata.ingest.stage_worker.WorkerState`);
trees from before it (kidata 0.2.7 and older) are run through the private functions they had.
``tests/test_benchmarks_smoke.py`` runs it.

Each tree (``measure.trees``: a checkout, ``git:REV`` or empty for the installed kidata) runs
in a process of its own, in turn, ``--rounds`` times (alternating, so a busy machine weighs on
every tree alike); each process takes the best of ``--repeat`` passes over the lines after one
warm-up pass. Prints one line per tree: the best CPU µs per run over its rounds, every round,
and the ratio to the first tree.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def side(src: str, runs: int, repeat: int) -> dict:
    """One process's measurement (``--side``): the best CPU seconds of ``repeat`` passes."""
    import gc
    import pickle
    import tempfile
    import time

    import kidata
    from kidata.ingest import stage
    from kidata.ingest.readers.base import Lines

    try:
        from kidata._imports import tune_gc_for_staging
        from kidata.ingest.stage_worker import WorkerState
    except ImportError:  # a tree from before issue 29
        WorkerState = tune_gc_for_staging = None  # noqa: N806

    with open(src, "rb") as fh:
        lines = [line for _, line in zip(range(runs), fh, strict=False)]
    size = stage.BATCH_LINES
    jobs = [Lines(src, None, data=b"".join(lines[i:i + size]), first=i + 1)
            for i in range(0, len(lines), size)]
    with tempfile.TemporaryDirectory(prefix="kidata-worker-path-") as tmp:
        if WorkerState is not None:
            tune_gc_for_staging()  # as a worker does (stage_worker.serve)
        else:
            gc.freeze()
            gc.set_threshold(*stage.STAGING_GC)
        best, fast = float("inf"), 0
        for attempt in range(repeat + 1):  # the first pass warms up (imports, caches)
            # A new worker state each pass: every pass sees every document anew.
            if WorkerState is not None:
                run = WorkerState(tmp, 10_000, []).run
            else:
                stage._init_worker(tmp, 10_000, [])
                run = stage._work
            start = time.process_time()
            fast = 0
            for number, job in enumerate(jobs):
                events = run(number, number * size + 1, [(job, src)])
                pickle.dumps(events, protocol=5, buffer_callback=lambda _: None)
                fast += events.fast_path
            took = time.process_time() - start
            if attempt:
                best = min(best, took)
    return {"us_per_run": best / len(lines) * 1e6, "runs": len(lines), "fast_path": fast,
            "kidata": str(Path(kidata.__file__).parent)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", help="an NDJSON file of bundles (benchmarks/generate.py's "
                    "bundles.ndjson)")
    ap.add_argument("--runs", default="30k", help="lines measured, from the first (default 30k)")
    ap.add_argument("--tree", action="append", default=[], metavar="LABEL=PATH|git:REV",
                    help="a kidata checkout, or git:REV, to measure (repeatable; none: the "
                    "installed kidata)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3, help="passes per process (best taken)")
    ap.add_argument("--side", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(HERE))
    import generate
    import measure

    runs = generate.parse_count(args.runs)
    if args.side:
        print(json.dumps(side(args.src, runs, args.repeat)))
        return 0
    results: dict[str, list[float]] = {}
    with measure.trees(args.tree or ["installed="]) as trees:
        for _ in range(args.rounds):
            for tree in trees:
                proc = subprocess.run(
                    [sys.executable, str(Path(__file__).resolve()), args.src, "--side",
                     "--runs", str(runs), "--repeat", str(args.repeat)],
                    env={**os.environ, **tree.env}, capture_output=True, text=True)
                if proc.returncode:
                    raise SystemExit(f"{tree.label}: {proc.stderr.strip()[-2000:]}")
                said = json.loads(proc.stdout.strip().splitlines()[-1])
                if said["fast_path"] != said["runs"]:
                    print(f"{tree.label}: {said['runs'] - said['fast_path']} of {said['runs']} "
                          "lines took the general path", file=sys.stderr)
                results.setdefault(tree.label, []).append(said["us_per_run"])
    first = min(next(iter(results.values())))
    for label, rounds in results.items():
        every = ", ".join(f"{r:.2f}" for r in rounds)
        print(f"{label}: {min(rounds):.2f} CPU µs per run (rounds: {every}); "
              f"{min(rounds) / first:.3f}× the first")
    return 0


if __name__ == "__main__":
    sys.exit(main())
