#!/usr/bin/env python3
"""Peak memory of a load, beside a baseline measured side by side (issue 16: under 500 MB).

    .venv/bin/python benchmarks/load_memory.py DATA [--layout one,many] [--rounds 2]
        [--case LABEL=PATH|git:REV ...] [--set LABEL:KEY=VALUE ...] [--json OUT]

DATA is a folder written by ``benchmarks/generate.py`` (``bundles.ndjson``, ``many/``). Each
case is the real ``kidata`` CLI loading DATA into an empty warehouse: PATH is a checkout of
kidata imported instead of the installed one (through ``PYTHONPATH``; ``git:REV``: that
revision of this repository, extracted for the run; empty: the installed one), ``--set`` adds
environment variables to a case (``ARROW_DEFAULT_MEMORY_POOL=mimalloc``,
``KIDATA_WORKERS=0``). Without ``--case``: the installed kidata, and the same with Arrow's
default allocator (``mimalloc``), the setting before ``kidata.cli`` chose the system one.

For each layout (``one``: the one NDJSON file; ``many``: the folder of files), round after
round (cases alternating, so a busy machine weighs on each alike), ``measure.py`` gives the
peak memory (the child's high-water mark or the sampled sum of it and its workers), CPU
seconds (user + system, workers included) and wall seconds of each case, and of DuckDB's
``read_json`` → Parquet flatten of the same input (``baselines.py duckdb-ingest``). Prints a
table: each case's figures, its ratio to the first case and its peak over DuckDB's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import measure  # noqa: E402

BIN = Path(sys.executable).parent


def _source(data: Path, layout: str) -> Path:
    return data / "bundles.ndjson" if layout == "one" else data / "many"


def measure_load(src: Path, tree: measure.Tree, extra: dict[str, str], scratch: Path) -> dict:
    env = {**os.environ, **tree.env, **extra}
    wh = scratch / "wh"
    m = measure.run([str(BIN / "kidata"), "-w", str(wh), "load", "-q", str(src)], env=env)
    shutil.rmtree(wh, ignore_errors=True)
    if not m.ok:
        raise SystemExit(f"the load of {src} failed ({m.returncode}): {m.stderr[-2000:]}")
    return {"peak_mb": round(m.peak_mb, 1), "cpu_s": round(m.cpu_seconds, 2),
            "wall_s": round(m.seconds, 2)}


def measure_duckdb(src: Path, scratch: Path) -> dict:
    out = scratch / "duck.parquet"
    m = measure.run([sys.executable, str(HERE / "baselines.py"), "duckdb-ingest", str(src),
                     str(out)])
    out.unlink(missing_ok=True)
    if not m.ok:
        raise SystemExit(f"DuckDB's flatten of {src} failed: {m.stderr[-2000:]}")
    return {"peak_mb": round(m.peak_mb, 1), "cpu_s": round(m.cpu_seconds, 2),
            "wall_s": round(m.seconds, 2)}


def _cases(trees: list[measure.Tree], sets: list[str]
           ) -> list[tuple[str, measure.Tree, dict[str, str]]]:
    """Each case's label, tree and ``--set`` variables."""
    cases = [(tree.label, tree, {}) for tree in trees]
    by_label = {c[0]: c[2] for c in cases}
    for item in sets:
        label, _, assignment = item.partition(":")
        key, _, value = assignment.partition("=")
        if label not in by_label or not key:
            raise SystemExit(f"--set {item!r}: expected LABEL:KEY=VALUE of a --case label")
        by_label[label][key] = value
    return cases


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("--layout", default="one,many", help="one, many or both (one,many)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--case", action="append", default=[],
                    metavar="LABEL=PATH|git:REV", help="a kidata checkout, or git:REV, "
                    "that revision of this repository (empty: the installed one)")
    ap.add_argument("--set", action="append", default=[],
                    help="LABEL:KEY=VALUE: an environment variable for a case")
    ap.add_argument("--no-duckdb", action="store_true", help="leave out DuckDB's flatten")
    ap.add_argument("--json", type=Path, help="write every measurement here")
    args = ap.parse_args(argv)
    specs, sets = args.case, args.set
    if not specs:
        specs = ["kidata=", "mimalloc="]
        sets = ["mimalloc:ARROW_DEFAULT_MEMORY_POOL=mimalloc", *sets]
    layouts = [x for x in args.layout.split(",") if x]
    raw: dict[str, list[dict]] = {}
    with measure.trees(specs, "--case") as trees, tempfile.TemporaryDirectory() as tmp:
        cases = _cases(trees, sets)
        scratch = Path(tmp)
        for layout in layouts:
            src = _source(args.data, layout)
            runs = measure.records(src)
            for round_ in range(1, args.rounds + 1):
                for label, tree, extra in cases:
                    m = measure_load(src, tree, extra, scratch)
                    m.update(layout=layout, runs=runs, round=round_, case=label)
                    raw.setdefault(f"{layout}/{label}", []).append(m)
                    print(json.dumps(m), file=sys.stderr, flush=True)
                if not args.no_duckdb:
                    m = measure_duckdb(src, scratch)
                    m.update(layout=layout, runs=runs, round=round_, case="duckdb")
                    raw.setdefault(f"{layout}/duckdb", []).append(m)
                    print(json.dumps(m), file=sys.stderr, flush=True)
    print("| layout | case | runs | peak MB (each round) | CPU s (each round) | wall s | "
          "peak / first | CPU / first | peak / DuckDB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for layout in layouts:
        first = raw[f"{layout}/{cases[0][0]}"]
        duck = raw.get(f"{layout}/duckdb")
        for label in [c[0] for c in cases] + (["duckdb"] if duck else []):
            got = raw[f"{layout}/{label}"]
            peak = statistics.median(m["peak_mb"] for m in got)
            cpu = statistics.median(m["cpu_s"] for m in got)
            wall = statistics.median(m["wall_s"] for m in got)
            first_peak = statistics.median(m["peak_mb"] for m in first)
            first_cpu = statistics.median(m["cpu_s"] for m in first)
            vs_duck = (f"{peak / statistics.median(m['peak_mb'] for m in duck):.2f}×"
                       if duck else "n/a")
            peaks = " / ".join(f"{m['peak_mb']:.0f}" for m in got)
            cpus = " / ".join(f"{m['cpu_s']:.1f}" for m in got)
            print(f"| {layout} | {label} | {got[0]['runs']:,} | {peaks} | {cpus} | {wall:.1f} | "
                  f"{peak / first_peak:.2f}× | {cpu / first_cpu:.2f}× | {vs_duck} |")
    if args.json:
        args.json.write_text(json.dumps(raw, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
