#!/usr/bin/env python3
"""CPU per run of a load, for one tree or two side by side (the figures of issue 16).

    .venv/bin/python benchmarks/cpu_per_run.py DATA [--tree LABEL=PATH|git:REV ...] [--rounds 2]

DATA is a folder written by ``benchmarks/generate.py`` (``bundles.ndjson``, ``liger.csv``). For
each tree (a checkout of kidata, or ``git:REV``: that revision of this repository, extracted
for the run; its package is imported instead of the installed one, through ``PYTHONPATH``;
none given: the installed one), in turn and ``--rounds`` times (alternating, so a
busy shared machine weighs on every tree alike), it measures with ``measure.py``: the JSON Lines
load (default workers), the same without workers, the Liger CSV load and DuckDB's ``read_json``
flatten of the same file (the baseline). Prints one JSON line per tree and round.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import measure  # noqa: E402

BIN = Path(sys.executable).parent


def measure_tree(data: Path, tree: measure.Tree, runs: int, rows: int) -> dict:
    env = {**os.environ, **tree.env}
    out: dict = {"tree": tree.label}
    with tempfile.TemporaryDirectory() as tmp:
        for name, src, extra, n in (
                ("jsonl", data / "bundles.ndjson", {}, runs),
                ("jsonl_no_workers", data / "bundles.ndjson", {"KIDATA_WORKERS": "0"}, runs),
                ("liger", data / "liger.csv", {}, rows)):
            wh = Path(tmp) / name
            m = measure.run([str(BIN / "kidata"), "-w", str(wh), "load", "-q", str(src)],
                            env={**env, **extra})
            if m.returncode:
                raise SystemExit(f"{tree.label}: load of {src} failed: {m.stderr}")
            shutil.rmtree(wh, ignore_errors=True)
            out[name] = {"cpu_us_per_run": round(m.cpu_seconds / n * 1e6, 1),
                         "wall_us_per_run": round(m.seconds / n * 1e6, 1),
                         "wall_s": round(m.seconds, 2), "peak_mb": round(m.peak_mb)}
        m = measure.run([sys.executable, str(HERE / "baselines.py"), "duckdb-ingest",
                         str(data / "bundles.ndjson"), str(Path(tmp) / "duck.parquet")],
                        env=env)
        # Issue 16: a Liger CSV within 2x of the JSON Lines load, per run.
        out["liger_over_jsonl"] = {
            k: round(out["liger"][f"{k}_us_per_run"] / out["jsonl"][f"{k}_us_per_run"], 2)
            for k in ("cpu", "wall")}
        out["duckdb"] = {"cpu_us_per_run": round(m.cpu_seconds / runs * 1e6, 1),
                         "wall_s": round(m.seconds, 2)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("--tree", action="append", default=[],
                    metavar="LABEL=PATH|git:REV", help="a kidata checkout to measure, or "
                    "git:REV, that revision of this repository (repeatable)")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args(argv)
    with measure.trees(args.tree or ["installed="]) as trees:
        runs = measure.records(args.data / "bundles.ndjson")
        rows = measure.records(args.data / "liger.csv") - 1  # its header
        for round_ in range(1, args.rounds + 1):
            for tree in trees:
                result = measure_tree(args.data, tree, runs, rows)
                print(json.dumps({"round": round_, **result}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
