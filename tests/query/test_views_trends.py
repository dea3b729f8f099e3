"""Trends and regressions on tests/data/views/trends.jsonl (rms_norm forward, liger).

Series A100 / w1 in time order (µs: median (p20, p80), version):

    tr-1  2024-01  100 (95, 105)   0.1
    tr-2  2024-02  112 (108, 116)  0.2
    tr-failed 2024-02-15  500 ...  status failed: left out
    tr-3  2024-03  113 (110, 116)  0.3
    tr-4  2024-04  100 (98, 102)   0.4
    tr-5  2024-05  104 (103, 105)  0.5
    tr-6  2024-06  120 (none)      0.6
    tr-7  2024-07  130 (128, 132)  0.7
    tr-undated (no timestamp): left out

Other series: H100 / w1 (tr-h100, one point); A100 / w-tie: tr-tie-a 50 (49, 51) v1.0 and
tr-tie-b 60 (58, 62) v1.1 with the same timestamp; A100 / w-one (tr-one, one point).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kidata import Warehouse
from kidata.query.analysis import regressions

DATA = Path(__file__).parents[1] / "data"


@pytest.fixture(scope="module")
def loaded(tmp_path_factory) -> Warehouse:
    wh = Warehouse(tmp_path_factory.mktemp("wh"))
    assert wh.load([str(DATA / "views" / "trends.jsonl")]).ok
    return wh


def steps(wh: Warehouse, workload: str, gpu: str = "a100-sxm4-80gb") -> list[tuple]:
    return wh.sql("SELECT step, points, run_id, previous_run_id, change, beyond_noise, verdict "
                  "FROM trends WHERE workload = $w AND gpu = $g ORDER BY step",
                  params={"w": workload, "g": gpu}).fetchall()


def test_every_step_of_a_series_with_change_and_verdict(loaded: Warehouse):
    got = steps(loaded, "w1")
    assert [r[:4] for r in got] == [
        (1, 7, "tr-1", None), (2, 7, "tr-2", "tr-1"), (3, 7, "tr-3", "tr-2"),
        (4, 7, "tr-4", "tr-3"), (5, 7, "tr-5", "tr-4"), (6, 7, "tr-6", "tr-5"),
        (7, 7, "tr-7", "tr-6")]
    expected = [
        (None, None, None),               # first point: nothing to compare with
        (0.12, True, "slower"),           # 112/100 - 1; p20 108 > previous p80 105
        (0.008929, False, "within noise"),  # 113/112 - 1; 110 <= 116 and 116 >= 108
        (-0.115044, True, "faster"),      # 100/113 - 1; p80 102 < previous p20 110
        # 104/100 - 1; p20 103 > previous p80 102: beyond noise, under the 10% minimum effect
        (0.04, True, "negligible"),
        (0.153846, None, "no spread"),    # 120/104 - 1; tr-6 has no p20/p80
        (0.083333, None, "no spread"),    # 130/120 - 1; the previous result has no spread
    ]
    for row, (change, beyond, verdict) in zip(got, expected, strict=True):
        if change is None:
            assert row[4] is None
        else:
            assert row[4] == pytest.approx(change, abs=1e-6), row
        assert (row[5], row[6]) == (beyond, verdict), row


def test_failed_and_undated_runs_are_left_out(loaded: Warehouse):
    got = loaded.sql("SELECT run_id FROM trends WHERE run_id IN ('tr-failed', 'tr-undated')")
    assert got.fetchall() == []


def test_tie_in_time_is_ordered_by_run_id(loaded: Warehouse):
    # Same timestamp: tr-tie-a before tr-tie-b; change 60/50 - 1 = 0.2; 58 > 51: slower.
    got = steps(loaded, "w-tie")
    assert [r[:4] for r in got] == [(1, 2, "tr-tie-a", None), (2, 2, "tr-tie-b", "tr-tie-a")]
    assert got[1][4] == pytest.approx(0.2) and got[1][5:] == (True, "slower")


def test_series_with_one_point_and_series_per_gpu(loaded: Warehouse):
    assert steps(loaded, "w-one") == [(1, 1, "tr-one", None, None, None, None)]
    # The H100 run of w1 is its own one-point series, never the A100 series' neighbour.
    assert steps(loaded, "w1", "h100-sxm5-80gb") == [(1, 1, "tr-h100", None, None, None, None)]
    assert loaded.sql("SELECT count(*) FROM trends").fetchall() == [(11,)]  # 7 + 2 + 1 + 1


def test_regressions_view_uses_the_minimum_effect(loaded: Warehouse):
    got = loaded.sql("SELECT run_id, previous_run_id, median_us, previous_median_us, p20_us, "
                     "previous_p80_us, change, version, previous_version FROM regressions "
                     "ORDER BY run_id").fetchall()
    # tr-2: +12% with p20 108 > 105; tr-tie-b: +20% with 58 > 51. tr-5 (+4%) is beyond noise
    # but under the 10% minimum effect; tr-6 (+15.4%) and tr-7 (+8.3%) have no spread to judge
    # noise by.
    assert [r[:6] + r[7:] for r in got] == [
        ("tr-2", "tr-1", 112.0, 100.0, 108.0, 105.0, "0.2", "0.1"),
        ("tr-tie-b", "tr-tie-a", 60.0, 50.0, 58.0, 51.0, "1.1", "1.0"),
    ]
    assert [r[6] for r in got] == pytest.approx([0.12, 0.2])


def test_library_threshold(loaded: Warehouse):
    every = {name for name in
             loaded.sql("SELECT * FROM regressions").columns}
    # Same rows and columns as the view at the default threshold.
    default = regressions(loaded, columns=None)
    assert set(default.columns) == every
    assert sorted(default.fetchall(), key=repr) == sorted(
        loaded.sql("SELECT * FROM regressions").fetchall(), key=repr)
    runs = lambda t: sorted(r[-1] for r in regressions(loaded, t).fetchall())  # noqa: E731
    assert runs(0.03) == ["tr-2", "tr-5", "tr-tie-b"]  # 0.04 > 0.03 now counts
    assert runs(0.15) == ["tr-tie-b"]                   # only +20% is above 15%
    assert runs(0.25) == []


def test_cli_prints_versions_and_exits_1(cli, data):
    assert cli("load", data / "views" / "trends.jsonl").code == 0
    result = cli("regressions", "--format", "csv")
    assert result.code == 1
    lines = result.out.splitlines()
    assert lines[0] == ("kernel,pass,implementation,variant,workload,gpu,previous_version,"
                        "version,previous_center_us,center_us,change,previous_run_id,run_id")
    assert [line.split(",")[4:10] for line in lines[1:]] == [
        ["w-tie", "a100-sxm4-80gb", "1.0", "1.1", "50.0", "60.0"],
        ["w1", "a100-sxm4-80gb", "0.1", "0.2", "100.0", "112.0"],
    ]
    assert "2 regressions" in result.err and "10.0%" in result.err
    assert cli("regressions", "--threshold", "0.25").code == 0
    bad = cli("regressions", "--threshold", "-0.1")
    assert bad.code == 2 and "threshold must be a number >= 0" in bad.err


def test_single_run(cli, data, wh: Warehouse):
    # single.jsonl: one rms_norm forward run of liger, variant 'selected default', on the A100,
    # 31.072 µs (30.048, 31.968), M 2048, H 4096, bfloat16.
    assert cli("load", data / "views" / "single.jsonl").code == 0
    result = cli("regressions")
    assert result.code == 0 and result.out == ""
    # A one-point series; nothing to pair, regress or remeasure; a one-variant ranking;
    # bytes 2 x (2 x 2048 x 4096 + 4096) = 33,562,624.
    assert wh.sql("SELECT step, points, previous_run_id, change, verdict FROM trends"
                  ).fetchall() == [(1, 1, None, None, None)]
    counts = {v: wh.sql(f"SELECT count(*) FROM {v}").fetchall()[0][0]
              for v in ("speedups", "speedup_summary", "regressions", "remeasured", "audit")}
    assert counts == dict.fromkeys(counts, 0)
    assert wh.sql("SELECT schedule_rank, schedules, relative_to_selected FROM calibration"
                  ).fetchall() == [(1, 1, 1.0)]
    assert wh.sql("SELECT bytes FROM efficiency").fetchall() == [(33_562_624,)]
