"""Raw samples as the first noise basis (issue 26, item 1): the samples table, each run's
median with its distribution-free interval (sample_medians), and the basis 'samples' in
speedups, compare, trends and rate_speedups; on tests/data/views/samples.jsonl
(tests/make_view_fixtures.py, ``samples()``, says what each run is for) and a real PyTorch v3
file under ../shared.

Every expected number is worked out here from the fixture's samples, by the rule of
docs/statistics.md section 3 (k = floor((n + 1 - 2.2414 sqrt(n)) / 2); the interval of each
median is its k-th smallest and k-th largest sample), not read back from kidata.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import console, shared

from kidata import Warehouse

VIEWS = Path(__file__).parents[1] / "data" / "views"


@pytest.fixture(scope="module")
def wh(tmp_path_factory) -> Warehouse:
    w = Warehouse(tmp_path_factory.mktemp("samples") / "wh")
    report = w.load(VIEWS / "samples.jsonl")
    assert report.ok and report.added["samples"] == 100, report.rejects
    return w


def rows(warehouse: Warehouse, sql: str, **params) -> list[dict]:
    rel = warehouse.sql(sql, params=params or None)
    return [dict(zip(rel.columns, r, strict=True)) for r in rel.fetchall()]


def rank(n: int) -> int:
    return math.floor((n + 1 - 2.2414027276 * math.sqrt(n)) / 2)


def test_the_rank_rule_by_hand():
    # The 97.5% rank of the sign test by its normal approximation: n = 7 is the first with an
    # interval (2 / 2^7 = 1.6% <= 2.5%, where n = 6 gives 3.1%); n = 20 -> k = 5.
    assert [rank(n) for n in (5, 6, 7, 9, 20)] == [0, 0, 1, 1, 5]
    for n in range(7, 200):  # never narrower than the exact binomial interval
        k = rank(n)
        miss = 2 * sum(math.comb(n, j) for j in range(k)) / 2 ** n
        assert miss <= 0.025, n


def test_samples_are_stored_in_the_metric_unit_in_the_order_given(wh):
    got = rows(wh, "SELECT sample, value, unit FROM samples WHERE run_id = 'sa-w1-torch' "
                   "ORDER BY sample")
    # torch's samples are in ms: 0.012 ms = 12000 ns, exactly (as the run's statistics).
    assert [r["value"] for r in got] == [12000, 12400, 11800, 12200, 12100, 11900, 12300,
                                         12000, 12500]
    assert {r["unit"] for r in got} == {"ns"}
    # Rates keep their own unit (tflops is TFLOP/s).
    assert rows(wh, "SELECT DISTINCT metric, unit FROM samples WHERE run_id = 'sa-m1-a'") == [
        {"metric": "throughput", "unit": "TFLOP/s"}]


def test_sample_medians_by_hand(wh):
    got = {r["run_id"]: r for r in rows(wh, "SELECT * FROM sample_medians")}
    # sa-w1-liger sorted (µs): 9.6 9.7 9.8 9.9 10.0 10.0 10.1 10.2 10.3; n = 9, k = 1.
    assert got["sa-w1-liger"] | {} == {
        "run_id": "sa-w1-liger", "metric": "latency", "unit": "ns", "samples": 9,
        "median": 10000, "interval_rank": 1, "low": 9600, "high": 10300}
    # sa-n1: 1..20 µs; median (10 + 11) / 2; k = 5: the 5th and the 16th smallest.
    n1 = got["sa-n1"]
    assert (n1["median"], n1["interval_rank"], n1["low"], n1["high"]) == (10500, 5, 5000, 16000)
    # sa-w3-torch kept 5 samples: a median, no interval.
    w3 = got["sa-w3-torch"]
    assert (w3["samples"], w3["median"], w3["low"], w3["high"]) == (5, 15000, None, None)


def speedup(w: Warehouse, workload: str) -> dict:
    [row] = rows(w, "SELECT * FROM speedups WHERE workload = $name AND candidate = 'liger'",
                 name=workload)
    return row


def test_speedups_rest_on_the_samples_first(wh):
    # w1: liger 9.6..10.3 µs, torch 11.8..12.5 µs: the speedup (torch / liger) lies in
    # [11.8 / 10.3, 12.5 / 9.6], above 1, and 12.1 / 10 = 1.21 is beyond the 10% effect.
    w1 = speedup(wh, "w1")
    assert w1["noise_basis"] == "samples" and w1["verdict"] == "faster"
    assert w1["speedup"] == pytest.approx(1.21, rel=1e-12)
    assert (w1["speedup_low"], w1["speedup_high"]) == pytest.approx((11.8 / 10.3, 12.5 / 9.6),
                                                                    rel=1e-12)


def test_an_outlier_sample_keeps_tight_ranges_from_a_verdict(wh):
    # w2: the p20-p80 ranges (9950-10050 and 11450-11550 ns) do not overlap, so within-run
    # spreads alone would call liger faster (15%). Each side has one outlier sample: liger
    # 9.9..13.0 µs, torch 9.5..11.6 µs, and the speedup's interval [9.5 / 13.0, 11.6 / 9.9]
    # holds 1.
    assert 11450 / 10050 > 1.1  # what the ranges alone would have said
    w2 = speedup(wh, "w2")
    assert (w2["noise_basis"], w2["verdict"]) == ("samples", "within noise")
    assert (w2["speedup_low"], w2["speedup_high"]) == pytest.approx((9.5 / 13.0, 11.6 / 9.9),
                                                                    rel=1e-12)


def test_fewer_than_seven_samples_fall_back_to_the_next_basis(wh):
    # w3: torch kept 5 samples; the p20-p80 ranges decide: [14900 / 10100, 15100 / 9900].
    w3 = speedup(wh, "w3")
    assert (w3["noise_basis"], w3["verdict"]) == ("within-run p20-p80", "faster")
    assert (w3["speedup_low"], w3["speedup_high"]) == pytest.approx(
        (14900 / 10100, 15100 / 9900), rel=1e-12)


def test_compare_gives_the_speedups_answers_through_the_cli(wh):
    proc = console("compare", "torch", "liger", "--warehouse", wh.path, "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    lines = [line.split(",") for line in proc.stdout.strip().splitlines()]
    header, data = lines[0], [dict(zip(lines[0], line, strict=True)) for line in lines[1:]]
    assert "noise_basis" in header
    got = {r["workload"]: (r["noise_basis"], r["verdict"], float(r["speedup_low"]),
                           float(r["speedup_high"])) for r in data if r["kernel"] == "geglu"}
    want = {w: (s["noise_basis"], s["verdict"], s["speedup_low"], s["speedup_high"])
            for w in ("w1", "w2", "w3") for s in [speedup(wh, w)]}
    assert got.keys() == want.keys()
    for w in want:
        assert got[w][:2] == want[w][:2], w
        assert got[w][2:] == pytest.approx(want[w][2:], rel=1e-5), w


def test_a_series_step_rests_on_the_samples(wh):
    # s1: 9.6..10.3 µs (version 1), then 11.8..12.5 µs (version 2): the change 12.1 / 10 - 1
    # lies in [11.8 / 10.3 - 1, 12.5 / 9.6 - 1], above 0 and beyond the 10% effect.
    [step] = rows(wh, "SELECT * FROM trends WHERE kernel = 'softmax' AND step = 2")
    assert (step["noise_basis"], step["verdict"]) == ("samples", "slower")
    assert step["change"] == pytest.approx(0.21, rel=1e-12)
    assert (step["change_low"], step["change_high"]) == pytest.approx(
        (11.8 / 10.3 - 1, 12.5 / 9.6 - 1), rel=1e-12)
    assert [r["run_id"] for r in rows(wh, "SELECT run_id FROM regressions")] == ["sa-s1-2"]


def test_rates_rest_on_the_samples(wh):
    # m1: b 117..123 TFLOP/s, a 97..103: b's speedup (b / a, higher is better) lies in
    # [117 / 103, 123 / 97].
    [row] = rows(wh, "SELECT * FROM rate_speedups WHERE candidate = 'b'")
    assert (row["noise_basis"], row["verdict"]) == ("samples", "faster")
    assert (row["speedup_low"], row["speedup_high"]) == pytest.approx((117 / 103, 123 / 97),
                                                                      rel=1e-12)


def test_pytorch_v3_samples_are_kept_as_given(tmp_path):
    path = shared("external/pytorch-v3/add_loop_eager.json")
    wh = Warehouse(tmp_path / "wh")
    report = wh.load([str(path)], settings={"gpu": "h100-sxm5-80gb"})
    assert report.ok, report.rejects
    records = json.loads(path.read_text())
    values = [v for r in (records if isinstance(records, list) else [records])
              for v in r["metric"]["benchmark_values"]]
    got = [v for (v,) in wh.sql("SELECT value FROM samples ORDER BY sample").fetchall()]
    # The file's metric is an instruction count (unit count): stored as given.
    assert got == [float(v) for v in values] and got
