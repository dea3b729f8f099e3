"""summary_bootstrap (issue 26, item 5): a percentile bootstrap over kernel families, beside
speedup_summary's t-interval.

Checked two ways: on a hand-built case whose interval follows from the resampling itself (with
3 families, 1 replicate in 27 draws the smallest three times, so the 2.5th percentile of 1,000
replicates is the smallest family), and against an independent Python implementation of the
procedure docs/statistics.md and the view's header state, on Liger's real CSV.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from conftest import shared

from kidata import Warehouse

MAPPING = Path(__file__).parents[1] / "data" / "field" / "team_mapping.toml"
HEADER = "op,impl,tokens,hidden,precision,device,when,p50_us,p20_us,p80_us,n\n"
P = 2147483647


@pytest.fixture(scope="module")
def three(tmp_path_factory) -> Warehouse:
    """Three kernels in no family, one workload each: ours is 1x, 2x and 4x torch's speed."""
    folder = tmp_path_factory.mktemp("bootstrap")
    rows = []
    for kernel, ours in (("k_one", 10.0), ("k_two", 5.0), ("k_four", 2.5)):
        for impl, p50 in (("ours", ours), ("torch", 10.0)):
            rows.append(f"{kernel},{impl},4096,8192,bf16,NVIDIA H100 80GB HBM3,"
                        f"2025-01-31 12:00:00,{p50},{p50 * 0.99:.4f},{p50 * 1.01:.4f},200\n")
    (folder / "three.csv").write_text(HEADER + "".join(rows), encoding="utf-8")
    w = Warehouse(folder / "wh")
    assert w.load(folder / "three.csv", mapping=MAPPING).added["runs"] == 6
    return w


def test_three_families_by_hand(three):
    rows = three.sql("select families, geomean_speedup, bootstrap_low, bootstrap_high, "
                     "replicates, min_family_speedup, max_family_speedup from summary_bootstrap "
                     "where candidate = 'ours' and baseline = 'torch'").fetchall()
    assert len(rows) == 1
    families, geomean, low, high, replicates, lowest, highest = rows[0]
    # The geometric mean of 1, 2 and 4 is 2; the speedup_summary row says the same.
    assert (families, replicates) == (3, 1000)
    assert geomean == pytest.approx(2.0)
    assert three.sql("select geomean_speedup from speedup_summary where candidate = 'ours' "
                     "and baseline = 'torch'").fetchall() == [(pytest.approx(2.0),)]
    # A replicate draws one family three times with probability 1/27 (about 37 of 1,000;
    # counted below by the independent implementation of the draws): with 26 or more such
    # replicates of the 1x family, the 2.5th percentile (between the 25th and 26th smallest
    # of 1,000) is 1 exactly, and with 26 of the 4x family the 97.5th is 4 exactly; the
    # bootstrap never leaves the families' range.
    assert (lowest, highest) == (pytest.approx(1.0), pytest.approx(4.0))
    draws = _draws(3)  # families in name order: k_four, k_one, k_two
    assert draws.count((1, 1, 1)) >= 26 and draws.count((0, 0, 0)) >= 26
    assert low == pytest.approx(1.0) and high == pytest.approx(4.0)
    # The t-interval over the same 3 values (mean and sd of the logs both ln 2, t(2) = 4.303)
    # is EXP(ln 2 -/+ 4.303 ln 2 / sqrt 3): wider, as a normal model with 2 df is.
    t_low, t_high = three.sql("select interval_low, interval_high from speedup_summary where "
                              "candidate = 'ours' and baseline = 'torch'").fetchall()[0]
    half = 4.303 * math.log(2) / math.sqrt(3)
    assert t_low == pytest.approx(math.exp(math.log(2) - half), rel=1e-3)
    assert t_high == pytest.approx(math.exp(math.log(2) + half), rel=1e-3)
    # The reverse row is the inverse.
    back = three.sql("select geomean_speedup, bootstrap_low, bootstrap_high from "
                     "summary_bootstrap where candidate = 'torch' and baseline = 'ours'"
                     ).fetchall()
    assert back == [(pytest.approx(0.5), pytest.approx(0.25), pytest.approx(1.0))]


def _draws(k: int) -> list[tuple[int, ...]]:
    """The view's resampling, written from its documented rule: draw j of replicate b picks
    family x mod k (families in name order), x0 = (b - 1) * 1000003 + j * 1009 + k, then
    three times x <- (x * a mod p)^2 mod p with a = 16807, 48271, then 69621."""
    replicates = []
    for b in range(1, 1001):
        picks = []
        for j in range(k):
            x = ((b - 1) * 1000003 + j * 1009 + k) % P
            for a in (16807, 48271, 69621):
                y = x * a % P
                x = y * y % P
            picks.append(x % k)
        replicates.append(tuple(picks))
    return replicates


def _replicate_means(logs: list[float]) -> np.ndarray:
    return np.array([sum(logs[i] for i in picks) / len(logs) for picks in _draws(len(logs))])


@pytest.mark.shared
def test_the_view_is_the_documented_resampling_on_liger(tmp_path):
    liger = shared("liger/all_benchmark_data.csv")
    w = Warehouse(tmp_path / "wh")
    w.load(liger)
    key = ("candidate", "candidate_variant", "baseline", "baseline_variant", "gpu", "pass")
    families: dict[tuple, dict[str, list[float]]] = {}
    for *row, family, log_g in w.sql(
            f"select {', '.join(key)}, kernel_family, ln(geomean_speedup) "
            "from kernel_speedups").fetchall():
        families.setdefault(tuple(row), {}).setdefault(family, []).append(log_g)
    got = {tuple(r[:6]): r[6:] for r in w.sql(
        f"select {', '.join(key)}, families, geomean_speedup, bootstrap_low, bootstrap_high "
        "from summary_bootstrap").fetchall()}
    expected = {}
    for row, by_family in families.items():
        if not 3 <= len(by_family) <= 64:
            continue
        logs = [float(np.mean(by_family[f])) for f in sorted(by_family)]
        means = _replicate_means(logs)
        expected[row] = (len(logs), math.exp(np.mean(logs)),
                         math.exp(np.percentile(means, 2.5)),
                         math.exp(np.percentile(means, 97.5)))
    assert len(expected) >= 10
    assert got.keys() == expected.keys()
    for row, want in expected.items():
        assert got[row][0] == want[0]
        assert got[row][1:] == pytest.approx(want[1:], rel=1e-9), row
