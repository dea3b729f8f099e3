"""Generated inputs for the crash, concurrency and compaction tests: copies of seed 000 with
their own run names and numbers, so any number of distinct runs can be loaded."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from pathlib import Path

SEED0 = Path(__file__).parent / "data" / "seeds" / "000_ef9e0295e36a82ef.txt"
BASE = json.loads(SEED0.read_text("utf-8").split("\n", 2)[2])


def bundle(i: int) -> dict:
    """Run i: seed 000 named ``<seed name>-i``, median 31072 + i ns, p20 30048 ns (as in the
    seed), p80 31968 + i ns; 3 measurements each."""
    b = copy.deepcopy(BASE)
    b["run"]["metadata"]["name"] += f"-{i}"
    b["run"]["spec"]["timing"]["latencyNs"]["median"] = 31072 + i
    b["run"]["spec"]["measurements"][1]["value"] = 31968 + i
    return b


def write_runs(path: Path, indices: Iterable[int], bad_line: bool = False) -> Path:
    """Runs ``indices`` as JSON Lines; with ``bad_line``, then one line of broken JSON."""
    with open(path, "w", encoding="utf-8") as fh:
        for i in indices:
            fh.write(json.dumps(bundle(i)) + "\n")
        if bad_line:
            fh.write('{"run": \n')
    return path
