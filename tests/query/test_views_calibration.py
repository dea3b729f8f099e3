"""Schedules ranked per workload (view calibration) and one implementation measured in two
tables (view remeasured): trainkernel's seed and tests/data/views/calibration.jsonl.

The fixture (µs), implementation kern, train_step/step:

    family              gpu   workload  variant      median
    tables_calibration  H100  small     selected A   50
                                        B            60
                                        C            60     (a tie with B)
                                        D            45
                                        E            70
                        H100  medium    X            10     (no selected variant)
                                        Y            20
                        H100  tiny      selected A   5      (the only variant)
    tables_held_out     H100  small     (none)       48
                        A100  small     (none)       70     (no calibration on the A100)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kidata import Warehouse

DATA = Path(__file__).parents[1] / "data"
COLUMNS = ("workload, variant, schedule_rank, schedules, median_us, is_selected, "
           "selected_variant, selected_us, relative_to_selected, fastest_us")


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> Warehouse:
    wh = Warehouse(tmp_path_factory.mktemp("wh"))
    assert wh.load([str(DATA / "seeds")]).ok
    return wh


@pytest.fixture(scope="module")
def fixture(tmp_path_factory) -> Warehouse:
    wh = Warehouse(tmp_path_factory.mktemp("wh"))
    assert wh.load([str(DATA / "views" / "calibration.jsonl")]).ok
    return wh


def ranked(wh: Warehouse) -> dict[tuple[str, str], tuple]:
    return {(r[0], r[1]): r[2:] for r in wh.sql(f"SELECT {COLUMNS} FROM calibration").fetchall()}


def test_seed_schedules_ranked_relative_to_selected_wmma(seeds: Warehouse):
    got = ranked(seeds)
    # h100_calibration, small: selected WMMA 56.53, WGMMA shared group 4 92.87,
    # group 1 93.59, register-source A 104.85 -> ranks 1, 2, 3, 4;
    # relative = median / 56.53: 92.87/56.53 = 1.642845, 93.59/56.53 = 1.655581,
    # 104.85/56.53 = 1.854767.
    expected = {
        ("small", "selected WMMA"): (1, 1.0), ("small", "WGMMA shared group 4"): (2, 1.642845),
        ("small", "WGMMA shared group 1"): (3, 1.655581),
        ("small", "WGMMA register-source A"): (4, 1.854767),
        # medium: selected 190.88; group 1 344.73/190.88 = 1.806004;
        # group 4 355.29/190.88 = 1.861326; register-source A 389.76/190.88 = 2.041911.
        ("medium", "selected WMMA"): (1, 1.0), ("medium", "WGMMA shared group 1"): (2, 1.806004),
        ("medium", "WGMMA shared group 4"): (3, 1.861326),
        ("medium", "WGMMA register-source A"): (4, 2.041911),
    }
    assert set(got) == set(expected)
    for key, (rank, relative) in expected.items():
        row = got[key]
        assert row[0] == rank and row[1] == 4, key
        assert row[6] == pytest.approx(relative, abs=1e-6), key
        assert row[4] == "selected WMMA"
    assert got[("small", "selected WMMA")][5] == 56.53
    assert got[("medium", "WGMMA shared group 1")][7] == 190.88  # fastest in the group


def test_ties_share_a_rank_and_the_next_rank_is_skipped(fixture: Warehouse):
    got = ranked(fixture)
    # small: D 45 < selected A 50 < B 60 = C 60 < E 70 -> ranks 1, 2, 3, 3, 5.
    ranks = {v: got[("small", v)][0] for v in ("D", "selected A", "B", "C", "E")}
    assert ranks == {"D": 1, "selected A": 2, "B": 3, "C": 3, "E": 5}
    # relative to selected A (50): D 45/50 = 0.9, B and C 60/50 = 1.2, E 70/50 = 1.4.
    assert {v: got[("small", v)][6] for v in ("D", "B", "C", "E", "selected A")} == \
        pytest.approx({"D": 0.9, "B": 1.2, "C": 1.2, "E": 1.4, "selected A": 1.0})
    assert got[("small", "selected A")][3] is True and got[("small", "B")][3] is False
    assert got[("small", "E")][7] == 45.0  # fastest_us


def test_group_without_a_selected_variant_has_no_relative(fixture: Warehouse):
    got = ranked(fixture)
    # medium: X 10, Y 20 -> ranks 1, 2; no variant starts with 'selected'.
    assert got[("medium", "X")][:2] == (1, 2) and got[("medium", "Y")][:2] == (2, 2)
    assert got[("medium", "Y")][4:7] == (None, None, None)


def test_single_variant_and_runs_without_variant(fixture: Warehouse):
    got = ranked(fixture)
    # tiny has one variant: rank 1 of 1, relative to itself 5/5 = 1.
    assert got[("tiny", "selected A")][:2] == (1, 1)
    assert got[("tiny", "selected A")][6] == 1.0
    # Held-out runs have no variant: they are not schedules.
    assert fixture.sql("SELECT count(*) FROM calibration WHERE family = 'tables_held_out'"
                       ).fetchall() == [(0,)]


def test_seed_held_out_vs_calibration_side_by_side(seeds: Warehouse):
    got = seeds.sql("SELECT workload, family_a, variant_a, median_us_a, family_b, variant_b, "
                    "median_us_b, difference_us, relative_difference FROM remeasured "
                    "ORDER BY workload").fetchall()
    # H100 small: calibration 'selected WMMA' 56.53 vs held-out trainkernel 53.86:
    # difference 53.86 - 56.53 = -2.67, relative 53.86/56.53 - 1 = -0.047232.
    # H100 medium: 190.88 vs 191.09: difference +0.21, relative 191.09/190.88 - 1 = 0.001100.
    # (The A100 held-out runs have no calibration counterpart; inductor has no calibration.)
    assert [r[:3] + r[4:6] for r in got] == [
        ("medium", "trainkernel_h100_calibration", "selected WMMA", "trainkernel_held_out", None),
        ("small", "trainkernel_h100_calibration", "selected WMMA", "trainkernel_held_out", None),
    ]
    medium, small = got
    assert (medium[3], medium[6]) == (190.88, 191.09)
    assert medium[7] == pytest.approx(0.21) and medium[8] == pytest.approx(0.001100, abs=1e-6)
    assert (small[3], small[6]) == (56.53, 53.86)
    assert small[7] == pytest.approx(-2.67) and small[8] == pytest.approx(-0.047232, abs=1e-6)


def test_remeasured_on_one_gpu_only(fixture: Warehouse):
    got = fixture.sql("SELECT gpu, workload, variant_a, median_us_a, variant_b, median_us_b, "
                      "difference_us, relative_difference FROM remeasured").fetchall()
    # Only the H100 small workload is in both tables: 'selected A' 50 vs held-out 48;
    # difference 48 - 50 = -2, relative 48/50 - 1 = -0.04. The A100 held-out run has no
    # calibration counterpart, and variants B..E have no held-out counterpart.
    assert len(got) == 1
    gpu, workload, va, a, vb, b, diff, rel = got[0]
    assert (gpu, workload, va, a, vb, b) == ("h100-sxm5-80gb", "small", "selected A", 50, None, 48)
    assert diff == pytest.approx(-2.0) and rel == pytest.approx(-0.04)
