"""Run the load mutation fuzzer (tests/fuzzing.py) for a while: rounds from successive seeds
until the time is up; stops at the first failure and prints its seed and round folder.
``--field``: the field's harness files (``fuzz_field``: google-benchmark, nvbench, pytorch-v3,
KernelBench samples in ../shared/data/external) instead of bundles, Liger rows and tables.

    .venv/bin/python benchmarks/fuzz.py --seconds 600
    .venv/bin/python benchmarks/fuzz.py --field --seconds 600
    .venv/bin/python benchmarks/fuzz.py --seed 1234 --rounds 1 --keep   # replay one failure
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from fuzzing import fuzz, fuzz_field  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per seed")
    parser.add_argument("--keep", action="store_true", help="keep the round folders")
    parser.add_argument("--field", action="store_true",
                        help="mutate the field's harness files (fuzz_field)")
    args = parser.parse_args()
    end = time.monotonic() + args.seconds
    seed, records = args.seed, 0
    while True:
        root = Path(tempfile.mkdtemp(prefix=f"kidata-fuzz-{seed}-"))
        try:
            records += (fuzz_field if args.field else fuzz)(root, seed, args.rounds)
        except BaseException:
            traceback.print_exc()
            print(f"FAILED at seed {seed} (rounds of {args.rounds}); inputs in {root}")
            return 1
        if not args.keep:
            import shutil

            shutil.rmtree(root, ignore_errors=True)
        seed += 1
        if time.monotonic() >= end:
            break
    print(f"ok: seeds {args.seed}..{seed - 1}, {seed - args.seed} x {args.rounds} rounds, "
          + (f"{records:,} mutated harness files, " if args.field else
             f"{records:,} JSON records (and their CSV rows and tables), ")
          +
          f"{args.seconds:.0f} s budget")
    return 0


if __name__ == "__main__":
    sys.exit(main())
