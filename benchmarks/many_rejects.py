"""Millions of rejects next to good runs: does the load keep the good runs, and in what memory?

Writes a gzip JSON Lines file of ``--bad`` lines that are JSON but not kernelindex (each one a
reject) followed by ``--good`` valid bundles (seed 000 renamed), loads it with the installed
``kidata`` into a fresh warehouse, and prints wall time, peak memory (the process tree, see
benchmarks/measure.py), what the load reported and what the warehouse holds.

    .venv/bin/python benchmarks/many_rejects.py                 # 4.5M bad lines, 1,000 good
    .venv/bin/python benchmarks/many_rejects.py --bad 100000    # quicker

kidata 0.2.2 ran out of DuckDB memory committing such a load and lost the good runs (issue 17);
a load now keeps its first ``KIDATA_MAX_REJECTS`` (100,000) rejects and counts the rest.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from measure import run  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "tests" / "data" / "seeds" / "000_ef9e0295e36a82ef.txt"


def write_input(path: Path, bad: int, good: int) -> None:
    bundle = json.loads(SEED.read_text("utf-8").split("\n", 2)[2])
    name = bundle["run"]["metadata"]["name"]
    with gzip.open(path, "wt", compresslevel=6) as out:
        chunk = 100_000
        for start in range(0, bad, chunk):
            out.write("".join(f'{{"x": {i}}}\n' for i in range(start, min(bad, start + chunk))))
        for i in range(good):
            bundle["run"]["metadata"]["name"] = f"{name}-{i}"
            out.write(json.dumps(bundle) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bad", type=int, default=4_500_000)
    parser.add_argument("--good", type=int, default=1_000)
    args = parser.parse_args()
    kidata = str(Path(sys.executable).parent / "kidata")
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "bad.jsonl.gz"
        write_input(data, args.bad, args.good)
        wh = Path(tmp) / "wh"
        m = run([kidata, "-w", str(wh), "load", "-q", str(data)])
        print(f"input: {args.bad:,} bad lines + {args.good:,} good runs, "
              f"{data.stat().st_size / 1e6:.1f} MB gzip")
        print(f"load: exit {m.returncode}, {m.seconds:.1f} s, peak {m.peak_mb:.0f} MB")
        print("summary:", m.stdout.strip().splitlines()[-1] if m.stdout.strip() else "-")
        tail = [line for line in m.stderr.splitlines() if "Traceback" in line or
                line.startswith(("Error", "rejected: …", "rejected: " + "0123456789"[:0]))]
        print("stderr:", *tail[-3:], sep="\n  ")
        q = run([kidata, "-w", str(wh), "sql", "--format", "csv",
                 "select (select count(*) from runs) as runs, (select count(*) from rejects) "
                 "as rejects_kept, (select max(rejected) from loads) as rejected, "
                 "(select max(rejects_not_kept) from loads) as not_kept"])
        print("warehouse:", q.stdout.strip().replace("\n", " -> "))


if __name__ == "__main__":
    main()
