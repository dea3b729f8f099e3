#!/usr/bin/env python3
"""One kidata command as two (or more) trees run it, in turns, each a fresh process.

    .venv/bin/python benchmarks/commands.py --tree old=git:351a7cc --tree new= \\
        --rounds 3 --exit 0 --exit 1 -- -w /tmp/wh1m gate liger,version=0.5.0 liger,version=0.5.2

``--wh LABEL=PATH`` gives a tree a warehouse of its own, put where the command says ``@wh``:
a warehouse one version upgraded is refused by an older one, so each reads its own copy of the
same data (Run AQ: ``--tree old=git:3a8adc5 --tree new= --wh old=/tmp/wh1m-old --wh
new=/tmp/wh1m-new -- -w @wh sql "select count(*) from regressions" -f csv``). With ``--copy``
each run reads a fresh copy of its warehouse, made before it and not timed, so that a command
that writes (a load) starts from the same warehouse in every round (Run BK: ``--tree
old=git:f112f74 --tree new= --wh old=/tmp/wh2m --wh new=/tmp/wh2m --copy -- -w @wh load -q
part-00098.ndjson``).

For each round, each tree (``LABEL=PATH``, ``LABEL=git:REV`` or ``LABEL=`` for the installed
kidata, as ``measure.trees`` takes them) runs ``kidata ARGS...`` once, measured by
``measure.py`` (wall and CPU seconds, peak memory of the process tree), from a temporary
folder, so that no tree imports the working tree by accident. The trees alternate, so a busy
machine weighs on each alike. Prints each run, then per tree the medians and their ratio to the
first tree's. A run that exits with a code not given by ``--exit`` (default 0) fails the script,
and so do trees whose standard output differs: the figures would compare different work
(``--any-output`` for a command that prints its own time, as ``report`` does: compare the
files it wrote instead). Peak memory is the sampled sum of the process tree's resident sets,
and with ``--pss`` its proportional set sizes beside it (``measure.py``: a library's pages
counted once for the tree, not once per process; the sampling slows the command).
"""

from __future__ import annotations

import argparse
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", action="append", default=[], metavar="LABEL=PATH|git:REV",
                    help="a kidata to measure (repeatable; the first is the baseline)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pss", action="store_true",
                    help="also sample the tree's proportional set sizes (slows the command: "
                         "measure.run says why)")
    ap.add_argument("--any-output", action="store_true",
                    help="do not require the trees to print the same (a command that prints "
                         "its own time, as report does: compare its files instead)")
    ap.add_argument("--exit", type=int, action="append", default=[], metavar="CODE",
                    help="an exit code that is an answer, not a failure (repeatable; default "
                    "0; `gate` and `regressions` exit 1 when they find a regression)")
    ap.add_argument("--wh", action="append", default=[], metavar="LABEL=PATH",
                    help="the warehouse a tree's command reads where it says @wh (repeatable)")
    ap.add_argument("--copy", action="store_true",
                    help="run each command on a fresh copy of its @wh warehouse (untimed), "
                         "for a command that writes to it")
    ap.add_argument("args", nargs=argparse.REMAINDER,
                    help="the command's arguments, after --")
    args = ap.parse_args(argv)
    command = args.args[1:] if args.args[:1] == ["--"] else args.args
    if not command:
        ap.error("give the command to run after --, e.g. -- -w WAREHOUSE gate A B")
    warehouses = dict(w.split("=", 1) for w in args.wh)
    got: dict[str, list[measure.Measured]] = {}
    with measure.trees(args.tree or ["installed="]) as trees, \
            tempfile.TemporaryDirectory() as tmp:
        for round_ in range(1, args.rounds + 1):
            for tree in trees:
                wh = warehouses.get(tree.label)
                if "@wh" in command and wh is None:
                    raise SystemExit(f"the command says @wh: give --wh {tree.label}=PATH")
                used = wh
                if args.copy and wh is not None:
                    used = str(Path(tmp) / f"wh-{tree.label}")
                    shutil.rmtree(used, ignore_errors=True)
                    shutil.copytree(wh, used)
                argv = [str(BIN / "kidata"), *(used if a == "@wh" else a for a in command)]
                m = measure.run(argv, env={**os.environ, **tree.env}, cwd=tmp, pss=args.pss)
                if used != wh:  # the same answer whichever copy it wrote to
                    m.stdout = m.stdout.replace(used, "@wh")
                    shutil.rmtree(used)
                if m.killed_at_mb is not None or m.returncode not in (args.exit or [0]):
                    raise SystemExit(f"{tree.label}: kidata {' '.join(command)} failed "
                                     f"(exit {m.returncode}): {m.stderr.strip()[-500:]}")
                got.setdefault(tree.label, []).append(m)
                print(f"round {round_} {tree.label}: {m.seconds:.2f} s, {m.cpu_seconds:.2f} "
                      f"CPU s, {m.peak_mb:,.0f} MB"
                      + (f" (PSS {m.pss_mb:,.0f} MB)" if args.pss else "")
                      + f", exit {m.returncode}", flush=True)
        outputs = {label: {m.stdout for m in runs} for label, runs in got.items()}
        for label, runs in got.items():
            later = next((n for n, m in enumerate(runs[1:], 2) if m.stdout != runs[0].stdout),
                         None)
            if later is not None and not args.any_output:
                raise SystemExit(f"{label} printed another answer in round {later} than in "
                                 "round 1: the figures would compare different work (a "
                                 "command that writes to its warehouse: --copy)")
        first = trees[0].label
        for label, seen in outputs.items():
            if seen != outputs[first] and not args.any_output:
                raise SystemExit(f"{label} printed another answer than {first}: the figures "
                                 "would compare different work")
        base = {k: statistics.median(getattr(m, k) for m in got[first])
                for k in ("seconds", "cpu_seconds", "peak_mb", "pss_mb")}
        for label, runs in got.items():
            med = {k: statistics.median(getattr(m, k) for m in runs) for k in base}
            ratio = med["seconds"] / base["seconds"]
            print(f"{label}: median {med['seconds']:.2f} s ({ratio:.2f}x of {first}), "
                  f"{med['cpu_seconds']:.2f} CPU s "
                  f"({med['cpu_seconds'] / base['cpu_seconds']:.2f}x), {med['peak_mb']:,.0f} MB "
                  f"({med['peak_mb'] / base['peak_mb']:.2f}x)"
                  + (f", PSS {med['pss_mb']:,.0f} MB" if args.pss else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
