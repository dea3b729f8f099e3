"""trainkernel's results table (seed 003): runs, speedups and the summary, checked by hand."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import pytest

from kidata import Warehouse

SEED = Path(__file__).parents[1] / "data" / "seeds" / "003_55f6fcd9cea2f10a.txt"

# The held_out table as printed in the seed: (gpu key, workload, trainkernel_us, inductor_us).
HELD_OUT = [
    ("a100-sxm4-80gb", "tiny-online", 15.28, 22.85),
    ("a100-sxm4-80gb", "online", 20.32, 24.24),
    ("a100-sxm4-80gb", "small", 66.04, 22.92),
    ("a100-sxm4-80gb", "medium", 255.32, 42.19),
    ("h100-sxm5-80gb", "tiny-online", 12.80, 15.58),
    ("h100-sxm5-80gb", "online", 13.41, 21.76),
    ("h100-sxm5-80gb", "small", 53.86, 18.84),
    ("h100-sxm5-80gb", "medium", 191.09, 30.58),
]


@pytest.fixture
def loaded(wh: Warehouse) -> Warehouse:
    report = wh.load([str(SEED)])
    assert report.ok and report.runs_added == 24  # 8 rows x 2 implementations + 8 schedules
    return wh


def test_every_held_out_pair_gives_the_latency_ratio(loaded: Warehouse):
    rows = loaded.sql(
        "select gpu, workload, candidate_us, baseline_us, latency_ratio, speedup from speedups "
        "where candidate = 'trainkernel' and baseline = 'inductor' order by gpu, workload"
    ).fetchall()
    assert len(rows) == 8
    got = {(r[0], r[1]): r[2:] for r in rows}
    for gpu, workload, t, i in HELD_OUT:
        candidate_us, baseline_us, ratio, speedup = got[(gpu, workload)]
        assert (candidate_us, baseline_us) == pytest.approx((t, i), abs=1e-9)
        assert ratio == pytest.approx(t / i, rel=1e-12)      # latency_ratio = candidate / baseline
        assert speedup == pytest.approx(i / t, rel=1e-12)    # speedup = baseline / candidate
    # One pair by hand: A100 tiny-online 15.28 / 22.85 = 0.66871 (published: 0.669).
    assert got[("a100-sxm4-80gb", "tiny-online")][2] == pytest.approx(0.66871, abs=5e-6)


def test_pairs_never_cross_gpus_workloads_or_tables(loaded: Warehouse):
    # 8 held-out keys x 2 directions. The calibration schedules are trainkernel variants from
    # another table (protocol family): never paired with inductor or with each other.
    assert loaded.sql("select count(*) from speedups").fetchall() == [(16,)]
    crossed = loaded.sql("""
        select count(*) from speedups s
        join runs c on c.run_id = s.candidate_run_id
        join runs b on b.run_id = s.baseline_run_id
        where c.gpu <> b.gpu or c.workload <> b.workload or c.pass <> b.pass
           or c.protocol_id <> b.protocol_id""").fetchall()
    assert crossed == [(0,)]


def test_summary_geometric_mean_for_the_a100(loaded: Warehouse):
    row = loaded.sql(
        "select workloads, geomean_speedup, min_speedup, max_speedup, wins, losses "
        "from speedup_summary where candidate = 'trainkernel' and baseline = 'inductor' "
        "and gpu = 'a100-sxm4-80gb'").fetchall()
    assert len(row) == 1
    workloads, geomean, lo, hi, wins, losses = row[0]
    # speedups = inductor / trainkernel: 22.85/15.28 = 1.49542, 24.24/20.32 = 1.19291,
    # 22.92/66.04 = 0.34706, 42.19/255.32 = 0.16524; product = 0.102306;
    # fourth root = 0.56556 (by hand). Wins: tiny-online, online. Losses: small, medium.
    assert geomean == pytest.approx(0.56556, abs=5e-5)
    assert geomean == pytest.approx(
        math.prod(i / t for g, _, t, i in HELD_OUT if g == "a100-sxm4-80gb") ** 0.25, rel=1e-12)
    assert (workloads, wins, losses) == (4, 2, 2)
    assert lo == pytest.approx(42.19 / 255.32) and hi == pytest.approx(22.85 / 15.28)


def test_published_ratio_is_kept_as_a_claim_not_a_measurement(loaded: Warehouse):
    claims = loaded.sql(
        "select r.gpu, r.workload, p.value, p.resolution, b.implementation from published p "
        "join runs r on r.run_id = p.run_id join runs b on b.run_id = p.baseline_run_id "
        "where p.quantity = 'latency_ratio' order by 1, 2").fetchall()
    assert len(claims) == 8
    assert ("a100-sxm4-80gb", "small", 2.894, 0.001, "inductor") in claims
    assert loaded.sql("select count(*) from measurements where metric <> 'latency'"
                      ).fetchall() == [(0,)]


def test_calibration_rows_are_trainkernel_variants_with_shapes_kept(loaded: Warehouse):
    rows = loaded.sql(
        "select variant, median_us from latencies where variant is not null and "
        "workload = 'small' order by median_us").fetchall()
    assert rows == [("selected WMMA", 56.53), ("WGMMA shared group 4", 92.87),
                    ("WGMMA shared group 1", 93.59), ("WGMMA register-source A", 104.85)]
    shapes = dict(loaded.sql("select name, shape from workloads").fetchall())
    assert shapes["medium"] == "[128,512,1024,256]"
    assert shapes["tiny-online"] == "[4,32,64,16]"


def test_latencies_are_stored_in_ns_with_their_published_resolution(loaded: Warehouse):
    # 15.28 µs published to 0.01 µs -> 15280 ns, resolution 10 ns.
    # The run's id (docs/formats.md, "Identity"): a readable prefix, then 16 hex digits of the
    # SHA-256 of its externalId, the canonical JSON of its exact values.
    external_id = ('{"gpu":"a100-sxm4-80gb","implementation":"trainkernel",'
                   '"source":"trainkernel-results","table":"held_out","workload":"tiny-online"}')
    run_id = ("trainkernel-held-out-a100-sxm4-80gb-tiny-online-trainkernel-"
              + hashlib.sha256(external_id.encode()).hexdigest()[:16])
    assert loaded.sql(
        "select value, unit, resolution from measurements where run_id = ?",
        params=[run_id]).fetchall() == [(15280.0, "ns", 10.0)]
    assert loaded.sql("select external_id from runs where run_id = ?",
                      params=[run_id]).fetchall() == [(external_id,)]


def test_a_one_line_table_of_tens_of_kib_is_told_from_its_first_64_kib(tmp_path):
    """The format is told from the file's head, which was io's 8 KiB buffer, not the 64 KiB
    read for it: a trainkernel table written on one line and longer than 8 KiB could not be
    parsed from it and was read as kernelindex (one reject for the whole file)."""
    import json

    table = json.loads(SEED.read_text("utf-8"))
    table["h100_calibration"] = [dict(row, schedule=f"{row['schedule']} #{i}")
                                 for i in range(25) for row in table["h100_calibration"]]
    source = tmp_path / "results.json"
    source.write_text(json.dumps(table), "utf-8")  # one line
    assert 16_000 < source.stat().st_size < 65_536
    report = Warehouse(tmp_path / "wh").load([str(source)])
    assert report.rejects == []
    assert report.runs_added == 16 + 25 * len(json.loads(SEED.read_text("utf-8"))
                                              ["h100_calibration"])
