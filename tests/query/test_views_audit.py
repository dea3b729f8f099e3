"""The audit of published numbers: trainkernel's seed ratios and tests/data/views/audit.jsonl.

Tolerance (sql/audit.sql): with numerator n ± rn/2, denominator d ± rd/2 and a published value
rounded to rp, tolerance = max((n + rn/2)/(d - rd/2) - n/d, n/d - (n - rn/2)/(d + rd/2)) + rp/2.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kidata import Warehouse
from kidata.query.analysis import audit

DATA = Path(__file__).parents[1] / "data"


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> Warehouse:
    wh = Warehouse(tmp_path_factory.mktemp("wh"))
    assert wh.load([str(DATA / "seeds")]).ok
    return wh


@pytest.fixture(scope="module")
def claims(tmp_path_factory) -> Warehouse:
    wh = Warehouse(tmp_path_factory.mktemp("wh"))
    assert wh.load([str(DATA / "views" / "audit.jsonl")]).ok
    return wh


# The seed's held_out table: latencies to 0.01 µs (± 0.005), ratios to 0.001 (± 0.0005).
# hi = (t + 0.005) / (i - 0.005); tolerance = (hi - t/i) + 0.0005 (hi - t/i exceeds the
# downward deviation t/i - (t - 0.005)/(i + 0.005) in every row).
#   gpu   workload     t / i           = t/i       published  |diff|    hi        tolerance
#   a100  tiny-online  15.28 / 22.85   = 0.668709  0.669      0.000291  0.669074  0.000865
#   a100  online       20.32 / 24.24   = 0.838284  0.838      0.000284  0.838663  0.000879
#   a100  small        66.04 / 22.92   = 2.881326  2.894      0.012674  2.882173  0.001347  FLAG
#   a100  medium       255.32 / 42.19  = 6.051671  6.052      0.000329  6.052507  0.001336
#   h100  tiny-online  12.80 / 15.58   = 0.821566  0.824      0.002434  0.822151  0.001085  FLAG
#   h100  online       13.41 / 21.76   = 0.616268  0.616      0.000268  0.616640  0.000871
#   h100  small        53.86 / 18.84   = 2.858811  2.859      0.000189  2.859835  0.001524
#   h100  medium       191.09 / 30.58  = 6.248855  6.257      0.008145  6.250041  0.001685  FLAG
SEED = {
    ("a100-sxm4-80gb", "tiny-online"): (0.669, 0.668709, 0.000865, False),
    ("a100-sxm4-80gb", "online"): (0.838, 0.838284, 0.000879, False),
    ("a100-sxm4-80gb", "small"): (2.894, 2.881326, 0.001347, True),
    ("a100-sxm4-80gb", "medium"): (6.052, 6.051671, 0.001336, False),
    ("h100-sxm5-80gb", "tiny-online"): (0.824, 0.821566, 0.001085, True),
    ("h100-sxm5-80gb", "online"): (0.616, 0.616268, 0.000871, False),
    ("h100-sxm5-80gb", "small"): (2.859, 2.858811, 0.001524, False),
    ("h100-sxm5-80gb", "medium"): (6.257, 6.248855, 0.001685, True),
}


def test_seed_ratios_recomputed_with_rounding_tolerance(seeds: Warehouse):
    got = {(r[0], r[1]): r[2:] for r in seeds.sql(
        "SELECT gpu, workload, published, recomputed, tolerance, flagged, status, quantity "
        "FROM audit").fetchall()}
    assert set(got) == set(SEED)
    for key, (published, recomputed, tolerance, flagged) in SEED.items():
        p, r, t, f, status, quantity = got[key]
        assert quantity == "latency_ratio"
        assert p == published and f is flagged, key
        assert r == pytest.approx(recomputed, abs=1e-6), key
        assert t == pytest.approx(tolerance, abs=1e-6), key
        assert status == ("disagrees" if flagged else "agrees")


def test_seed_audit_cli_prints_the_three_flagged_and_exits_1(cli, data):
    assert cli("load", data / "seeds").code == 0
    result = cli("audit", "--format", "csv")
    assert result.code == 1
    lines = result.out.splitlines()
    assert lines[0] == ("gpu,workload,quantity,published,recomputed,difference,tolerance,status,"
                        "run_id,baseline_run_id")
    assert [line.split(",")[:4] for line in lines[1:]] == [
        ["a100-sxm4-80gb", "small", "latency_ratio", "2.894"],
        ["h100-sxm5-80gb", "medium", "latency_ratio", "6.257"],
        ["h100-sxm5-80gb", "tiny-online", "latency_ratio", "0.824"],
    ]
    assert "3 of 8 published numbers disagree" in result.err
    every = cli("audit", "--all", "--format", "csv")
    assert every.code == 1 and len(every.out.splitlines()) == 1 + 8


def test_fixture_claims(claims: Warehouse):
    got = {r[0]: r[1:] for r in claims.sql(
        "SELECT run_id, quantity, published, recomputed, difference, tolerance, flagged, status "
        "FROM audit").fetchall()}
    assert set(got) == {"au-a", "au-b", "au-c", "au-d", "au-e"}
    # au-a: latency_ratio 12.34 / 56.78 µs (10 ns resolution), published 0.217 to 0.001.
    # 12340/56780 = 0.2173300; high 12345/56775 = 0.2174373 (+0.0001072), low 12335/56785 =
    # 0.2172229 (-0.0001072); tolerance 0.0001072 + 0.0005 = 0.0006072 > |0.217 - 0.2173300|.
    q, p, r, d, t, f, s = got["au-a"]
    assert r == pytest.approx(0.2173300, abs=1e-7) and d == pytest.approx(-0.0003300, abs=1e-7)
    assert t == pytest.approx(0.0006072, abs=1e-7) and (f, s) == (False, "agrees")
    # au-b: a speedup is baseline / run = 30.00 / 20.00 = 1.5; published 1.52 to 0.01.
    # high 30005/19995 = 1.5006252; tolerance 0.0006252 + 0.005 = 0.0056252 < 0.02: flagged.
    q, p, r, d, t, f, s = got["au-b"]
    assert q == "speedup" and r == pytest.approx(1.5) and d == pytest.approx(0.02)
    assert t == pytest.approx(0.0056252, abs=1e-7) and (f, s) == (True, "disagrees")
    # au-c names a baseline run that was never loaded; au-d a quantity kidata cannot recompute.
    assert got["au-c"][2:] == (None, None, None, None, "baseline run not loaded")
    assert got["au-d"][2:] == (None, None, None, None, "unknown quantity")
    # au-e: no resolution anywhere counts as exact: 10 / 40 = 0.25 exactly, tolerance 0.
    assert got["au-e"][2:] == (0.25, 0.0, 0.0, False, "agrees")


def test_library_audit_counts(claims: Warehouse):
    result = audit(claims)
    assert (result.claims, result.flagged, result.unchecked) == (5, 1, 2)
    assert [r[-2] for r in result.rows.fetchall()] == ["au-b"]
    assert len(audit(claims, everything=True).rows.fetchall()) == 5


def test_audit_passes_when_nothing_is_flagged(cli, data):
    assert cli("load", data / "views" / "single.jsonl").code == 0
    result = cli("audit")
    assert result.code == 0 and result.out == ""
    assert result.err.startswith("0 of 0 published numbers disagree")


def test_inputs_too_coarse_to_bound_the_ratio_are_not_judged(tmp_path: Path):
    # Baseline median 10 ns published to 20 ns: its interval 10 ± 10 reaches 0, so the ratio
    # n / d has no upper bound (d - rd/2 = 0). Spark would fail on the division by zero and
    # DuckDB would give inf; the view says it cannot judge instead of agreeing.
    import json

    lines = (DATA / "views" / "audit.jsonl").read_text().splitlines()
    base, cand = json.loads(lines[0]), json.loads(lines[1])
    base["run"]["spec"]["timing"] = {"latencyNs": {"median": 10}, "resolutionNs": 20}
    path = tmp_path / "coarse.jsonl"
    path.write_text(json.dumps(base) + "\n" + json.dumps(cand) + "\n")
    wh = Warehouse(tmp_path / "wh")
    assert wh.load([str(path)]).ok
    rows = wh.sql("select recomputed, recomputed_high, tolerance, flagged, status from audit"
                  ).fetchall()
    # recomputed = 12340 / 10 = 1234.0
    assert rows == [(1234.0, None, None, None, "inputs too coarse")]
