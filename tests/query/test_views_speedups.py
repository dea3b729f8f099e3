"""Noise-aware speedups and their summary, on tests/data/views/speedups.jsonl.

The fixture (µs; written by tests/make_view_fixtures.py), all rms_norm forward, family
views_bench:

    workload  gpu   liger median (p20, p80)   torch median (p20, p80)
    w1        A100  10 (9, 11)                20 (19, 21)
    w2        A100  10 (9, 12)                12 (12, 13)     liger p80 = torch p20: a tie
    w3        A100  10 (none)                 15 (14, 16)
    w4        A100  10 (9, 11)                -               torch w4 only on the H100
    w5        A100  10 (9, 11)                10 (9.5, 10.5)  equal medians
    w1        H100  triton 8 (7, 9) only
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kidata import Warehouse

VIEWS = Path(__file__).parents[1] / "data" / "views"

COLUMNS = ("workload, gpu, candidate, baseline, latency_ratio, speedup, speedup_low, "
           "speedup_high, verdict")


@pytest.fixture(scope="module")
def loaded(tmp_path_factory) -> Warehouse:
    wh = Warehouse(tmp_path_factory.mktemp("wh"))
    assert wh.load([str(VIEWS / "speedups.jsonl")]).ok
    return wh


def rows(wh: Warehouse) -> dict[tuple[str, str], tuple]:
    return {(r[0], r[2]): r for r in wh.sql(
        f"SELECT {COLUMNS} FROM speedups WHERE gpu = 'a100-sxm4-80gb'").fetchall()}


def test_ranges_apart_give_faster_and_slower(loaded: Warehouse):
    got = rows(loaded)
    # w1, liger as candidate: latency_ratio 10/20 = 0.5, speedup 20/10 = 2;
    # speedup_low = baseline p20 / candidate p80 = 19/11 = 1.727272..;
    # speedup_high = baseline p80 / candidate p20 = 21/9 = 2.333333..;
    # liger's p80 11 < torch's p20 19: the ranges are apart, liger below -> faster.
    w, g, c, b, ratio, speedup, low, high, verdict = got[("w1", "liger")]
    assert (c, b, verdict) == ("liger", "torch", "faster")
    assert ratio == pytest.approx(0.5) and speedup == pytest.approx(2.0)
    assert low == pytest.approx(19 / 11) and high == pytest.approx(21 / 9)
    # Reverse direction: speedup 10/20 = 0.5, low 9/21 = 0.428571.., high 11/19 = 0.578947..;
    # torch's p20 19 > liger's p80 11 -> slower.
    *_, speedup, low, high, verdict = got[("w1", "torch")]
    assert speedup == pytest.approx(0.5)
    assert low == pytest.approx(0.4285714, rel=1e-6) and high == pytest.approx(0.5789474, rel=1e-6)
    assert verdict == "slower"


def test_touching_ranges_are_a_tie_within_noise(loaded: Warehouse):
    got = rows(loaded)
    # w2: liger 10 (9, 12) vs torch 12 (12, 13): speedup 12/10 = 1.2, low = 12/12 = 1.0,
    # high = 13/9 = 1.444..; liger's p80 equals torch's p20, the ranges touch: within noise.
    *_, speedup, low, high, verdict = got[("w2", "liger")]
    assert speedup == pytest.approx(1.2) and low == pytest.approx(1.0)
    assert high == pytest.approx(1.4444444, rel=1e-6) and verdict == "within noise"
    # The other way: 10/12 = 0.8333.., low 9/13 = 0.6923.., high 12/12 = 1.0, within noise.
    *_, speedup, low, high, verdict = got[("w2", "torch")]
    assert speedup == pytest.approx(0.8333333, rel=1e-6) and high == pytest.approx(1.0)
    assert verdict == "within noise"


def test_missing_spread_gives_no_spread_and_null_bounds(loaded: Warehouse):
    got = rows(loaded)
    # w3: liger has no p20/p80; the median speedup is still 15/10 = 1.5.
    *_, speedup, low, high, verdict = got[("w3", "liger")]
    assert speedup == pytest.approx(1.5)
    assert (low, high, verdict) == (None, None, "no spread")


def test_implementation_on_one_gpu_only_is_never_paired(loaded: Warehouse):
    # w4: liger only on the A100, torch only on the H100; triton only on the H100 for w1.
    assert loaded.sql("SELECT count(*) FROM speedups WHERE workload = 'w4' "
                      "OR candidate = 'triton' OR baseline = 'triton'").fetchall() == [(0,)]
    # 4 comparable workloads (w1, w2, w3, w5) x 2 directions = 8 rows in all.
    assert loaded.sql("SELECT count(*) FROM speedups").fetchall() == [(8,)]


def test_summary_counts_verdicts(loaded: Warehouse):
    got = {r[0]: r[1:] for r in loaded.sql(
        "SELECT candidate, workloads, geomean_speedup, min_speedup, max_speedup, wins, losses, "
        "faster, slower, within_noise, no_verdict FROM speedup_summary "
        "WHERE baseline NOT LIKE 'role:%'").fetchall()}
    assert set(got) == {"liger", "torch"}
    # liger vs torch on the A100: speedups 2 (w1), 1.2 (w2), 1.5 (w3), 1.0 (w5).
    # geomean = (2 x 1.2 x 1.5 x 1)^(1/4) = 3.6^0.25 = 1.377448..; min 1, max 2;
    # wins (> 1): 3; losses (< 1): 0 (w5's speedup of exactly 1 is neither);
    # verdicts: faster w1; within noise w2, w5; no verdict ('no spread') w3.
    # One kernel (rms_norm), so the kernel-weighted geomean is the pooled one.
    workloads, geomean, lo, hi, wins, losses, faster, slower, noise, no_spread = got["liger"]
    assert workloads == 4 and geomean == pytest.approx(1.377448, rel=1e-6)
    assert (lo, hi) == pytest.approx((1.0, 2.0))
    assert (wins, losses, faster, slower, noise, no_spread) == (3, 0, 1, 0, 2, 1)
    # torch vs liger: geomean 1 / 1.377448 = 0.725979; slower w1; the rest as above.
    workloads, geomean, *_, wins, losses, faster, slower, noise, no_spread = got["torch"]
    assert geomean == pytest.approx(0.725979, rel=1e-5)
    assert (wins, losses, faster, slower, noise, no_spread) == (0, 3, 0, 1, 2, 1)
    # Role rows: torch is rms_norm's reference, so liger vs role:reference is liger vs torch.
    role = loaded.sql("SELECT workloads, geomean_speedup FROM speedup_summary "
                      "WHERE candidate = 'liger' AND baseline = 'role:reference'").fetchall()
    assert role == [(4, pytest.approx(1.377448, rel=1e-6))]


def test_single_run_has_nothing_to_compare(wh: Warehouse, data):
    assert wh.load([str(data / "views" / "single.jsonl")]).ok
    assert wh.sql("SELECT count(*) FROM speedups").fetchall() == [(0,)]
    assert wh.sql("SELECT count(*) FROM speedup_summary").fetchall() == [(0,)]


def test_seed_speedups_have_no_spread(wh: Warehouse, data):
    # trainkernel publishes medians only, so every held-out comparison is 'no spread';
    # A100 small: trainkernel 66.04 vs inductor 22.92 -> speedup 22.92/66.04 = 0.347062.
    wh.load([str(data / "seeds")])
    got = wh.sql("SELECT speedup, verdict FROM speedups WHERE candidate = 'trainkernel' AND "
                 "workload = 'small' AND gpu = 'a100-sxm4-80gb'").fetchall()
    assert got[0][0] == pytest.approx(0.347062, rel=1e-5) and got[0][1] == "no spread"
    assert wh.sql("SELECT DISTINCT verdict FROM speedups").fetchall() == [("no spread",)]


def test_kernel_speedups_per_kernel_geomean_with_an_interval_over_workloads(loaded: Warehouse):
    """rms_norm forward on the A100, liger vs torch: speedups 2 (w1), 1.2 (w2), 1.5 (w3) and
    1.0 (w5) (w4 has no torch side). Logs 0.693147, 0.182322, 0.405465, 0: mean m = 0.320233,
    sample sd s = 0.298830; t(0.975, df 3) = 3.182; half-width 3.182 x 0.298830 / sqrt(4) =
    0.475439. geomean exp(m) = 1.377449, interval exp(m -+ 0.475439) = 0.856239 .. 2.215930.
    Verdicts as in the summary: faster w1; within noise w2, w5; no verdict w3."""
    got = {r[0]: r[1:] for r in loaded.sql(
        "SELECT candidate, workloads, geomean_speedup, interval_low, interval_high, "
        "min_speedup, max_speedup, wins, losses, faster, slower, within_noise, no_verdict "
        "FROM kernel_speedups WHERE kernel = 'rms_norm' AND pass = 'forward' "
        "AND gpu = 'a100-sxm4-80gb' AND baseline NOT LIKE 'role:%'").fetchall()}
    assert set(got) == {"liger", "torch"}
    n, geomean, low, high, lo, hi, *counts = got["liger"]
    assert n == 4 and geomean == pytest.approx(1.377449, rel=1e-6)
    assert (low, high) == (pytest.approx(0.856239, rel=1e-5), pytest.approx(2.215930, rel=1e-5))
    assert (lo, hi) == pytest.approx((1.0, 2.0))
    assert counts == [3, 0, 1, 0, 2, 1]
    # torch vs liger: the inverse, exp(-m -+ 0.475439) = 0.451278 .. 1.167898.
    n, geomean, low, high, *_ = got["torch"]
    assert geomean == pytest.approx(0.725980, rel=1e-5)
    assert (low, high) == (pytest.approx(0.451278, rel=1e-5), pytest.approx(1.167898, rel=1e-5))
    # torch is rms_norm's reference: the role row is the liger vs torch row.
    role = loaded.sql("SELECT workloads, geomean_speedup FROM kernel_speedups "
                      "WHERE candidate = 'liger' AND baseline = 'role:reference'").fetchall()
    assert role == [(4, pytest.approx(1.377449, rel=1e-6))]


def test_speedups_say_when_each_side_was_measured(tmp_path: Path):
    """rms_norm forward on the A100, liger against torch: w1 measured 9 days apart (Jan 1 and
    Jan 10), w2 59 days apart (Jan 1 and Mar 1: over 30, flagged), w3's torch run without a
    time (unknown)."""
    import json

    from make_view_fixtures import A100, bundle, workload

    rows = []
    for name, liger_at, torch_at in (("w1", "2026-01-01T00:00:00Z", "2026-01-10T00:00:00Z"),
                                     ("w2", "2026-01-01T00:00:00Z", "2026-03-01T00:00:00Z"),
                                     ("w3", "2026-01-01T00:00:00Z", None)):
        work = workload(name, "rms_norm", {"H": int(name[1]) * 1024})
        rows += [bundle(f"{name}-liger", "rms_norm/forward", "liger", A100, 10_000, work, "f",
                        at=liger_at),
                 bundle(f"{name}-torch", "rms_norm/forward", "torch", A100, 20_000, work, "f",
                        at=torch_at)]
    path = tmp_path / "apart.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    wh = Warehouse(tmp_path / "wh")
    assert wh.load([str(path)]).ok
    got = {r[0]: r[1:] for r in wh.sql(
        "SELECT workload, strftime(candidate_observed_at, '%Y-%m-%d'), "
        "strftime(baseline_observed_at, '%Y-%m-%d'), measured_apart FROM speedups "
        "WHERE candidate = 'liger'").fetchall()}
    assert got == {"w1": ("2026-01-01", "2026-01-10", False),
                   "w2": ("2026-01-01", "2026-03-01", True),
                   "w3": ("2026-01-01", None, None)}
