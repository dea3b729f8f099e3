"""CPU and wall time per run of `kidata load` of a Liger CSV beside the JSON Lines file of the
same runs (both written by benchmarks/generate.py), for one or more kidata source trees, each
load into a fresh warehouse, the trees and files interleaved, best of ``--repeat``.

    python benchmarks/liger_ratio.py --data /tmp/x/d150k --tree main=/work/main --tree new=.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import measure  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="a benchmarks/generate.py folder")
    ap.add_argument("--tree", action="append", required=True,
                    help="NAME=PATH of a kidata source tree (its kidata package is loaded)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--workers", default=None, help="KIDATA_WORKERS (default: kidata's)")
    args = ap.parse_args()
    meta = json.loads((args.data / "generated.json").read_text())
    files = {"liger": (args.data / "liger.csv", meta["csv_rows"]),
             "jsonl": (args.data / "bundles.ndjson", meta["runs"])}
    trees = dict(t.split("=", 1) for t in args.tree)
    best: dict[tuple[str, str], measure.Measured] = {}
    scratch = Path(tempfile.mkdtemp(prefix="liger-ratio-"))
    try:
        for _ in range(args.repeat):
            for name, tree in trees.items():
                for kind, (path, _) in files.items():
                    env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
                    if args.workers is not None:
                        env["KIDATA_WORKERS"] = args.workers
                    wh = scratch / f"{name}-{kind}"
                    m = measure.run([sys.executable, "-P", "-m", "kidata", "-w", str(wh),
                                     "load", "-q", str(path)], env=env)
                    shutil.rmtree(wh, ignore_errors=True)
                    if not m.ok:
                        raise SystemExit(f"{name} {kind} failed:\n{m.stderr}{m.stdout}")
                    old = best.get((name, kind))
                    if old is None or m.cpu_seconds < old.cpu_seconds:
                        best[(name, kind)] = m
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for name in trees:
        cells = []
        for kind, (_, runs) in files.items():
            m = best[(name, kind)]
            cells.append((m.cpu_seconds / runs * 1e6, m.seconds / runs * 1e6, m.peak_mb))
        (lc, lw, lp), (jc, jw, jp) = cells
        print(f"{name}: liger {lc:.1f} CPU µs/run, {lw:.1f} wall µs/run, {lp:.0f} MB; "
              f"jsonl {jc:.1f} CPU µs/run, {jw:.1f} wall µs/run, {jp:.0f} MB; "
              f"liger/jsonl {lc / jc:.2f}× CPU, {lw / jw:.2f}× wall")


if __name__ == "__main__":
    main()
