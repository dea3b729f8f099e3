"""Millions of rejects next to good runs: does the load keep the good runs, and in what memory?

Writes a gzip JSON Lines file of ``--bad`` lines that are JSON but not kernelindex (each one a
reject) followed by ``--good`` valid bundles (seed 000 renamed), loads it with the installed
``kidata`` into a fresh warehouse, and prints wall time, peak memory (the process tree, see
benchmarks/measure.py), what the load reported and what the warehouse holds.

    .venv/bin/python benchmarks/many_rejects.py                 # 4.5M bad lines, 1,000 good
    .venv/bin/python benchmarks/many_rejects.py --bad 100000    # quicker

kidata 0.2.2 ran out of DuckDB memory committing such a load and lost the good runs (issue 17);
a load now keeps its first ``KIDATA_MAX_REJECTS`` (100,000) rejects and counts the rest.

Counting past the cap must cost no memory (issue 27, item 8): give several sizes and the peak
should not grow between them. ``--tree LABEL=PATH|git:REV`` (repeatable) measures other
checkouts of kidata side by side, each size and tree in turn, round after round, so that a busy
machine weighs on each alike (``measure.trees``); ``--pad N`` makes each bad line N bytes
longer (its raw text, kept with the rejects that are kept, weighs more). ``--conflicts`` makes
the bad lines conflicting duplicates instead: one run again and again with other numbers, each
rejected at the commit; ``--max-rejects`` sets ``KIDATA_MAX_REJECTS`` for the load (a
conflict's raw text is its run's document, ~2.5 KB: keep the cap small to measure the count)::

    .venv/bin/python benchmarks/many_rejects.py --bad 1000000 --bad 3000000 \\
        --tree before=git:HEAD --tree after= --rounds 2
    .venv/bin/python benchmarks/many_rejects.py --conflicts --max-rejects 1000 \\
        --bad 200000 --bad 600000 --tree before=git:HEAD --tree after=
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import measure  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "tests" / "data" / "seeds" / "000_ef9e0295e36a82ef.txt"


def write_input(path: Path, bad: int, good: int, pad: int = 0,
                conflicts: bool = False) -> None:
    bundle = json.loads(SEED.read_text("utf-8").split("\n", 2)[2])
    name = bundle["run"]["metadata"]["name"]
    filler = f', "pad": "{"p" * pad}"' if pad else ""
    with gzip.open(path, "wt", compresslevel=6) as out:
        if conflicts:
            # One run, then the same run with other medians (between its p20 and p80).
            timing = bundle["run"]["spec"]["timing"]["latencyNs"]
            first, bundle["run"]["metadata"]["name"] = timing["median"], f"{name}-again"
            for i in range(bad + 1):
                timing["median"] = 31_000 + i / 10_000
                out.write(json.dumps(bundle) + "\n")
            timing["median"] = first
        chunk = 100_000
        for start in range(0, 0 if conflicts else bad, chunk):
            out.write("".join(f'{{"x": {i}{filler}}}\n'
                              for i in range(start, min(bad, start + chunk))))
        for i in range(good):
            bundle["run"]["metadata"]["name"] = f"{name}-{i}"
            out.write(json.dumps(bundle) + "\n")


def load(kidata: str, data: Path, wh: Path, tree: measure.Tree,
         extra: dict[str, str]) -> measure.Measured:
    return measure.run([kidata, "-w", str(wh), "load", "-q", str(data)],
                       env={**os.environ, **tree.env, **extra})


def report(kidata: str, data: Path, wh: Path, bad: int, good: int, m: measure.Measured,
           tree: measure.Tree) -> None:
    """What one load did, in full (a single size and tree)."""
    print(f"input: {bad:,} bad lines + {good:,} good runs, "
          f"{data.stat().st_size / 1e6:.1f} MB gzip")
    print(f"load: exit {m.returncode}, {m.seconds:.1f} s, peak {m.peak_mb:.0f} MB")
    print("summary:", m.stdout.strip().splitlines()[-1] if m.stdout.strip() else "-")
    tail = [line for line in m.stderr.splitlines() if "Traceback" in line or
            line.startswith(("Error", "rejected: …"))]
    print("stderr:", *tail[-3:], sep="\n  ")
    q = measure.run([kidata, "-w", str(wh), "sql", "--format", "csv",
                     "select (select count(*) from runs) as runs, (select count(*) from rejects) "
                     "as rejects_kept, (select max(rejected) from loads) as rejected, "
                     "(select max(rejects_not_kept) from loads) as not_kept"],
                    env={**os.environ, **tree.env})
    print("warehouse:", q.stdout.strip().replace("\n", " -> "))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bad", type=int, action="append",
                        help="bad lines (repeatable: each size is measured; default 4,500,000)")
    parser.add_argument("--good", type=int, default=1_000)
    parser.add_argument("--pad", type=int, default=0, help="bytes added to each bad line")
    parser.add_argument("--conflicts", action="store_true",
                        help="bad lines are conflicting duplicates of one run")
    parser.add_argument("--max-rejects", type=int, help="KIDATA_MAX_REJECTS for the load")
    parser.add_argument("--tree", action="append", default=[], metavar="LABEL=PATH|git:REV",
                        help="a kidata to measure (repeatable; empty PATH: the installed one)")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    sizes = args.bad or [4_500_000]
    kidata = str(Path(sys.executable).parent / "kidata")
    with measure.trees(args.tree or ["installed="], "--tree") as trees, \
            tempfile.TemporaryDirectory() as tmp:
        inputs = {}
        for bad in sizes:
            inputs[bad] = Path(tmp) / f"bad-{bad}.jsonl.gz"
            write_input(inputs[bad], bad, args.good, args.pad, args.conflicts)
        extra = {} if args.max_rejects is None else {"KIDATA_MAX_REJECTS": str(args.max_rejects)}
        if len(sizes) == 1 and len(trees) == 1 and args.rounds == 1:
            wh = Path(tmp) / "wh"
            m = load(kidata, inputs[sizes[0]], wh, trees[0], extra)
            report(kidata, inputs[sizes[0]], wh, sizes[0], args.good, m, trees[0])
            return
        peaks: dict[tuple[str, int], list[float]] = {}
        for r in range(args.rounds):
            for bad in sizes:
                for tree in trees:
                    wh = Path(tmp) / f"wh-{r}-{bad}-{tree.label}"
                    m = load(kidata, inputs[bad], wh, tree, extra)
                    last = m.stdout.strip().splitlines()[-1] if m.stdout.strip() else \
                        m.stderr.strip()[-200:]
                    print(f"round {r + 1}, {bad:,} bad, {tree.label}: exit {m.returncode}, "
                          f"{m.seconds:.1f} s, peak {m.peak_mb:.0f} MB | {last}", flush=True)
                    peaks.setdefault((tree.label, bad), []).append(m.peak_mb)
        print(f"\npeak MB (median of {args.rounds} rounds) by bad lines, each size's ratio to "
              f"the first:")
        for tree in trees:
            first = statistics.median(peaks[(tree.label, sizes[0])])
            cells = [f"{b:,}: {statistics.median(peaks[(tree.label, b)]):.0f} "
                     f"({statistics.median(peaks[(tree.label, b)]) / first:.2f}x)"
                     for b in sizes]
            print(f"  {tree.label}: " + ", ".join(cells))


if __name__ == "__main__":
    main()
