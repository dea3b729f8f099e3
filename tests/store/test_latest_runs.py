"""``latest_runs``: each load's latest passed latency run per key, from which ``speedups``
picks the latest run across loads (kidata/store/derived.py).

- by hand: the latest run and the run counts when the latest run is in an earlier load, when a
  later load brings an older run, and when a run has no timestamp;
- as a property: for any records split into loads in any order, ``speedups`` picks exactly the
  runs (and counts) that ranking every run of ``latencies`` picks;
- loads written by kidata 0.1 (no latest_runs rows) are derived on the fly, in DuckDB and by
  ``kidata check``; Spark's side is in tests/query/test_spark_versions.py;
- each row carries its run's evidence (since 0.2.3), which ``latest_latencies`` reads instead
  of working out statistics for every run; loads written by 0.2.0-0.2.2 (rows without it) are
  derived on the fly and give the same answers.
"""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import SHARED, same_rows
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from runs_factory import bundle
from test_properties import write

from kidata import Warehouse
from kidata.errors import QueryError
from kidata.store.schema import TABLES

LIGER = ("liger-rms-norm-forward-liger-nvidia-a100-sxm4-80gb-hidden4096-rows2048-bf16-"
         "2024-09-03-15-39-30")


def run(name: str, implementation: str, median_ns: float, observed_at: str | None,
        status: str = "passed") -> dict:
    """Seed 000 (Liger RMSNorm forward, A100, hidden 4096) as another run: its own name,
    implementation (label), median, time and status; p20 30048 ns and p80 31968 ns as in the
    seed, widened to hold the median."""
    b = copy.deepcopy(bundle(0))
    r = b["run"]
    r["metadata"]["name"] = name
    r["metadata"]["labels"]["implementation"] = implementation
    r["spec"]["timing"]["latencyNs"]["median"] = median_ns
    r["spec"]["measurements"] = [
        {"unit": "ns", "value": min(30048, median_ns), "metric": "latency", "statistic": "p20"},
        {"unit": "ns", "value": max(31968, median_ns), "metric": "latency", "statistic": "p80"}]
    if observed_at is None:
        del r["spec"]["observedAt"]
    else:
        r["spec"]["observedAt"] = observed_at
    r["spec"]["status"] = status
    return b


def load_all(wh: Warehouse, folder: Path, loads: list[list[dict]]) -> list[str]:
    ids = []
    for i, records in enumerate(loads):
        report = wh.load([str(write(folder / f"load{i}.jsonl", records))])
        assert report.ok, report.rejects
        ids.append(report.load_id)
    return ids


# The latest run per key and the number of passed runs, by ranking every run (the definition
# the view had before latest_runs), for the keys speedups pairs.
REFERENCE = """
    WITH ranked AS (
        SELECT kernel, pass, workload, gpu, family, implementation, variant, run_id,
            median_us,
            ROW_NUMBER() OVER (PARTITION BY kernel, pass, workload, gpu, family, implementation,
                               variant ORDER BY observed_at DESC NULLS LAST, run_id DESC) AS rn,
            COUNT(*) OVER (PARTITION BY kernel, pass, workload, gpu, family, implementation,
                           variant) AS n
        FROM latencies WHERE status = 'passed'
    )
    SELECT c.kernel, c.pass, c.workload, c.gpu, c.family, c.implementation, c.variant,
        c.run_id, c.median_us, c.n
    FROM ranked c
    WHERE c.rn = 1 AND EXISTS (
        SELECT 1 FROM ranked b WHERE b.rn = 1 AND b.kernel = c.kernel AND b.pass = c.pass
        AND b.workload = c.workload AND b.gpu = c.gpu AND b.family = c.family
        AND b.implementation <> c.implementation)
    ORDER BY ALL
"""
PICKED = """
    SELECT DISTINCT kernel, pass, workload, gpu, family, candidate, candidate_variant,
        candidate_run_id, candidate_us, candidate_runs
    FROM speedups ORDER BY ALL
"""


def as_written_by_0_1(wh_path: Path, load_ids: list[str]) -> None:
    """Make loads look as kidata 0.1 wrote them: version 0.1.0 in their commit markers, which
    record no latest_runs rows, and none in the table."""
    for load_id in load_ids:
        marker = wh_path / "loads" / f"part-{load_id}.parquet"
        row = pq.read_table(marker).to_pylist()[0]
        added = json.loads(row["added"])
        added.pop("latest_runs", None)
        row.update(kidata_version="0.1.0", added=json.dumps(added, sort_keys=True))
        pq.write_table(pa.Table.from_pylist([row], schema=TABLES["loads"]), marker)
        (wh_path / "latest_runs" / f"part-{load_id}.parquet").unlink(missing_ok=True)


def as_written_by_0_2_2(wh_path: Path, load_ids: list[str]) -> None:
    """Make loads look as kidata 0.2.2 wrote them: version 0.2.2 in their commit markers and
    latest_runs rows without the columns added in 0.2.3 (derived.STATISTICS) and 0.2.4
    (derived.CENTER)."""
    from kidata.store import derived

    for load_id in load_ids:
        marker = wh_path / "loads" / f"part-{load_id}.parquet"
        row = pq.read_table(marker).to_pylist()[0]
        row.update(kidata_version="0.2.2")
        pq.write_table(pa.Table.from_pylist([row], schema=TABLES["loads"]), marker)
        path = wh_path / "latest_runs" / f"part-{load_id}.parquet"
        pq.write_table(pq.read_table(path).drop_columns([*derived.STATISTICS, *derived.CENTER]),
                       path)


@pytest.fixture(scope="module", params=["fast path", "general path"])
def _by_hand(request, tmp_path_factory) -> tuple[str, Path, list[str]]:
    """Two loads of Liger and PyTorch runs of one key (kernel, pass, workload, GPU, family):

    - load 1: liger -0 (median 31,072 ns) and -1 (31,073 ns), both at the seed's time
      2024-09-03T15:39:30Z; torch t0 (50,000 ns) at 16:39:30Z;
    - load 2: liger -2 (31,000 ns) a day older; liger -3 (20,000 ns) failed; torch t1
      (40,000 ns) with no timestamp.

    The latest passed Liger run is -1 (load 1: same time as -0, greater name) although load 2
    is newer, out of 3 passed runs; the latest torch run is t0 (a run without a time comes
    last), out of 2. Loaded through the fast path for JSON lines and through the general one
    (``KIDATA_SLOW_PATH``), which stage each run's latencies separately. Built once per path;
    each test gets a copy (:func:`by_hand`).
    """
    tmp_path = tmp_path_factory.mktemp("by-hand")
    with pytest.MonkeyPatch.context() as monkeypatch:
        if request.param == "general path":
            monkeypatch.setenv("KIDATA_SLOW_PATH", "1")
        ids = load_all(Warehouse(tmp_path / "wh"), tmp_path, [
            [run(f"{LIGER}-0", "liger", 31072, "2024-09-03T15:39:30Z"),
             run(f"{LIGER}-1", "liger", 31073, "2024-09-03T15:39:30Z"),
             run("torch-t0", "torch", 50000, "2024-09-03T16:39:30Z")],
            [run(f"{LIGER}-2", "liger", 31000, "2024-09-02T15:39:30Z"),
             run(f"{LIGER}-3", "liger", 20000, "2024-09-04T15:39:30Z", status="failed"),
             run("torch-t1", "torch", 40000, None)],
        ])
    return request.param, tmp_path / "wh", ids


@pytest.fixture
def by_hand(_by_hand, tmp_path: Path, monkeypatch) -> tuple[Warehouse, list[str]]:
    """A fresh copy of :func:`_by_hand`'s warehouse, with ``KIDATA_SLOW_PATH`` set for the
    general path (later loads of the test go the same way)."""
    path, built, ids = _by_hand
    if path == "general path":
        monkeypatch.setenv("KIDATA_SLOW_PATH", "1")
    return Warehouse(shutil.copytree(built, tmp_path / "wh")), list(ids)


def test_latest_runs_rows_by_hand(by_hand):
    wh, (first, second) = by_hand
    rows = wh.sql("SELECT load_id, implementation, run_id, median_us, passed_runs "
                  "FROM latest_runs ORDER BY load_id, implementation").fetchall()
    assert rows == [(first, "liger", f"{LIGER}-1", 31.073, 2),
                    (first, "torch", "torch-t0", 50.0, 1),
                    (second, "liger", f"{LIGER}-2", 31.0, 1),  # -3 failed: not counted
                    (second, "torch", "torch-t1", 40.0, 1)]


def test_speedups_pick_the_latest_run_across_loads_by_hand(by_hand):
    wh, _ = by_hand
    rows = wh.sql("SELECT candidate, candidate_run_id, candidate_runs, baseline_run_id, "
                  "baseline_runs, candidate_us, baseline_us, speedup FROM speedups "
                  "ORDER BY candidate").fetchall()
    assert rows == [
        ("liger", f"{LIGER}-1", 3, "torch-t0", 2, 31.073, 50.0, pytest.approx(50 / 31.073)),
        ("torch", "torch-t0", 2, f"{LIGER}-1", 3, 50.0, 31.073, pytest.approx(31.073 / 50)),
    ]
    assert wh.sql(PICKED).fetchall() == wh.sql(REFERENCE).fetchall()
    assert wh.check().problems == []


def test_loads_of_kidata_0_1_are_derived_on_the_fly(by_hand, cli, monkeypatch):
    wh, (first, second) = by_hand
    before = {name: wh.sql(f"SELECT * FROM {name} ORDER BY ALL").fetchall()
              for name in ("latest_runs", "speedups", "speedup_summary")}
    for old in ([first], [first, second]):  # a mixed warehouse, then an all-old one
        as_written_by_0_1(wh.path, old)
        assert not (wh.path / "latest_runs" / f"part-{first}.parquet").exists()
        again = Warehouse(wh.path)
        for name, rows in before.items():
            assert same_rows(again.sql(f"SELECT * FROM {name} ORDER BY ALL").fetchall(), rows), name
        # kidata check trusts no rows of old loads, so it finds nothing to report.
        assert again.check().problems == []
    # A new load on top of old ones: its rows are derived at commit, the old ones on the fly.
    monkeypatch.setenv("KIDATA_WAREHOUSE", str(wh.path))
    newer = write(wh.path.parent / "newer.jsonl",
                  [run("torch-t2", "torch", 45000, "2024-09-05T00:00:00Z")])
    assert cli("load", newer).code == 0
    rows = Warehouse(wh.path).sql("SELECT candidate, baseline_run_id, baseline_runs, speedup "
                                  "FROM speedups WHERE candidate = 'liger'").fetchall()
    assert rows == [("liger", "torch-t2", 3, pytest.approx(45 / 31.073))]


def test_check_reports_and_repairs_latest_runs_that_do_not_match_the_runs(by_hand, cli,
                                                                          monkeypatch):
    wh, (first, _) = by_hand
    before = wh.sql("SELECT * FROM speedups ORDER BY ALL").fetchall()
    path = wh.path / "latest_runs" / f"part-{first}.parquet"
    table = pq.read_table(path)
    i = table.schema.get_field_index("passed_runs")
    pq.write_table(table.set_column(i, table.schema.field(i),
                                    pa.array([5] * table.num_rows, pa.int64())), path)
    monkeypatch.setenv("KIDATA_WAREHOUSE", str(wh.path))
    result = cli("check")
    assert result.code == 1
    assert (f"problem: latest_runs: 2 rows missing and 2 rows not given by the loads' runs, "
            f"in 1 loads, e.g. '{first}'") in result.err
    assert Warehouse(wh.path).sql("SELECT * FROM speedups ORDER BY ALL").fetchall() != before
    # --repair rewrites the table from the runs: 4 rows (2 per load), and the answers return.
    fixed = cli("check", "--repair")
    assert fixed.code == 0, fixed.err
    assert ("repaired: rewrote latest_runs from the loads' runs: 4 rows (2 were missing, 2 were "
            "not given by the runs)") in fixed.out
    assert Warehouse(wh.path).sql("SELECT * FROM speedups ORDER BY ALL").fetchall() == before
    assert cli("check", "--repair").out.count("repaired:") == 0  # nothing left to do


@pytest.mark.parametrize("batch_rows", [1, 6], ids=["a load a batch", "two loads a batch"])
def test_check_compares_and_repairs_latest_runs_a_batch_of_loads_at_a_time(
        tmp_path: Path, cli, monkeypatch, batch_rows):
    """Past verify.DERIVED_BATCH_ROWS rows of runs or latest_runs, kidata check compares the
    stored rows with what the runs give a batch of loads at a time (a batch's rows within
    it, a load with more on its own): a million heads at once needed more than the default
    memory limit. Damage in two loads of four is found in both, counted by hand, and repaired
    to the rows the commits wrote."""
    from kidata.store import verify

    wh = Warehouse(tmp_path / "wh")
    ids = load_all(wh, tmp_path, [  # three passed runs a load: two keys (liger, torch)
        [run(f"{LIGER}-{i}0", "liger", 31000 + i, f"2024-09-0{i + 1}T15:39:30Z"),
         run(f"{LIGER}-{i}1", "liger", 32000 + i, f"2024-09-0{i + 1}T16:39:30Z"),
         run(f"torch-t{i}", "torch", 50000 + i, f"2024-09-0{i + 1}T15:39:30Z")]
        for i in range(4)])
    written = wh.sql("SELECT * FROM latest_runs ORDER BY ALL").fetchall()
    assert len(written) == 8
    monkeypatch.setattr(verify, "DERIVED_BATCH_ROWS", batch_rows)
    batches: list[list[str]] = []
    id_table = verify.id_table

    def recorded(con, name, ids):
        if name == "_derived_batch":
            batches.append(list(ids))
        return id_table(con, name, ids)

    monkeypatch.setattr(verify, "id_table", recorded)
    assert wh.check().problems == []
    # Each load weighs its 3 runs: a batch of one load each, or of two (in load id order).
    loads = sorted(ids)
    assert batches == ([[x] for x in loads] if batch_rows == 1
                       else [loads[:2], loads[2:]])
    # Load 1: its liger row counts 7 runs (1 missing, 1 not given); load 3: its torch row gone
    # (1 missing).
    for load_id, damage in ((ids[1], "liger"), (ids[3], "torch")):
        path = wh.path / "latest_runs" / f"part-{load_id}.parquet"
        table = pq.read_table(path)
        if damage == "liger":
            i = table.schema.get_field_index("passed_runs")
            runs = [7 if impl == "liger" else n for impl, n in zip(
                table["implementation"].to_pylist(), table["passed_runs"].to_pylist(),
                strict=True)]
            table = table.set_column(i, table.schema.field(i), pa.array(runs, pa.int64()))
        else:
            table = table.filter(pa.compute.not_equal(table["implementation"], "torch"))
        pq.write_table(table, path)
    result = cli("check")
    assert result.code == 1
    assert ("problem: latest_runs: 2 rows missing and 1 rows not given by the loads' runs, in "
            f"2 loads, e.g. {', '.join(repr(x) for x in sorted([ids[1], ids[3]]))}") in result.err
    fixed = cli("check", "--repair")
    assert fixed.code == 0, fixed.err
    assert ("repaired: rewrote latest_runs from the loads' runs: 8 rows (2 were missing, 1 were "
            "not given by the runs)") in fixed.out
    assert Warehouse(wh.path).sql("SELECT * FROM latest_runs ORDER BY ALL").fetchall() == written
    assert Warehouse(wh.path).check().problems == []


@pytest.mark.shared
def test_speedups_at_the_sample_data_match_ranking_every_run(tmp_path: Path):
    """The Liger CSV (2,448 runs, many versions of each key) and the seeds, in two loads."""
    data = Path(__file__).parents[1] / "data"
    wh = Warehouse(tmp_path / "wh")
    assert wh.load([str(SHARED / "liger" / "all_benchmark_data_2024-09-03.csv")]).ok
    assert wh.load([str(data / "seeds"), str(SHARED / "liger" / "all_benchmark_data.csv")]).ok
    picked = wh.sql(PICKED).fetchall()
    assert len(picked) > 500
    # Some keys have runs in both loads: the counts add up across them.
    assert wh.sql("SELECT count(*) FROM (SELECT 1 FROM latest_runs GROUP BY kernel, pass, "
                  "workload, gpu, protocol_id, implementation, variant "
                  "HAVING count(*) > 1)").fetchall()[0][0] > 0
    assert picked == wh.sql(REFERENCE).fetchall()


# -- property ----------------------------------------------------------------------------------

TIMES = [None, "2024-09-01T00:00:00Z", "2024-09-02T00:00:00Z", "2024-09-02T00:00:00Z"]


@st.composite
def scenario(draw) -> tuple[list[dict], list[int]]:
    """Up to 10 runs of one key for 3 implementations with colliding or missing times, some
    failed, split into up to 3 loads."""
    runs = []
    for i in range(draw(st.integers(2, 10))):
        runs.append(run(f"run-{draw(st.sampled_from('abc'))}{i}",
                        draw(st.sampled_from(["liger", "torch", "triton"])),
                        draw(st.integers(10_000, 90_000)),
                        draw(st.sampled_from(TIMES)),
                        draw(st.sampled_from(["passed", "passed", "failed"]))))
    loads = draw(st.lists(st.integers(0, 2), min_size=len(runs), max_size=len(runs)))
    return runs, loads


@pytest.mark.slow  # generated loads in any split and order (the slow lane's property tests)
@settings(max_examples=8, deadline=None, derandomize=True,
          phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow])
@given(case=scenario())
def test_speedups_match_ranking_every_run_for_any_split(case):
    runs, loads = case
    with tempfile.TemporaryDirectory() as tmp:
        wh = Warehouse(Path(tmp) / "wh")
        load_all(wh, Path(tmp), [[r for r, b in zip(runs, loads, strict=True) if b == n]
                                 for n in sorted(set(loads))])
        assert wh.sql(PICKED).fetchall() == wh.sql(REFERENCE).fetchall()
        assert wh.check().problems == []
        shutil.rmtree(wh.path / "latest_runs")
        (wh.path / "latest_runs").mkdir()
        # Without its rows, check finds every load's rows missing.
        if wh.sql("SELECT count(*) FROM latencies WHERE status = 'passed'").fetchall()[0][0]:
            assert any(p.startswith("latest_runs:") for p in wh.check().problems)



VIEWS_DATA = Path(__file__).parent.parent / "data" / "views"


def test_latest_runs_carry_the_evidence_and_0_2_2_loads_are_derived_on_the_fly(tmp_path):
    """tests/data/views/statistics.jsonl, one load: run ev-res-liger has p20 9,990 ns and p80
    10,005 ns, timing.resolutionNs 1,024 and no sample count: spread p20-p80 from 9.99 to
    10.005 µs, 0.015 µs wide, under the 1.024 µs resolution; ev-quart-liger has only p25
    9,500 / p75 10,500 ns: spread p25-p75, 9.5-10.5 µs, 'measured'. The commit writes these
    into latest_runs; a load that looks written by 0.2.2 (rows without them) is derived when
    read, with every view answering as before."""
    wh = Warehouse(tmp_path / "wh")
    assert wh.load([str(VIEWS_DATA / "statistics.jsonl")]).ok
    got = {r[0]: r[1:] for r in wh.sql(
        "SELECT run_id, version, samples, resolution_us, spread, low_us, high_us, evidence "
        "FROM latest_runs WHERE run_id IN ('ev-res-liger', 'ev-quart-liger')").fetchall()}
    assert got == {
        "ev-res-liger": (None, None, 1.024, "p20-p80", 9.99, 10.005, "below resolution"),
        "ev-quart-liger": (None, None, None, "p25-p75", 9.5, 10.5, "measured"),
    }
    names = ("latest_runs", "latest_latencies", "speedups", "speedup_summary", "calibration",
             "remeasured")
    before = {n: wh.sql(f"SELECT * FROM {n} ORDER BY ALL").fetchall() for n in names}
    assert all(before[n] for n in names[:4])
    ((load_id,),) = wh.sql("SELECT load_id FROM loads").fetchall()
    as_written_by_0_2_2(wh.path, [load_id])
    assert "evidence" not in pq.read_schema(wh.path / "latest_runs" / f"part-{load_id}.parquet"
                                            ).names
    again = Warehouse(wh.path)
    for name, rows in before.items():
        assert same_rows(again.sql(f"SELECT * FROM {name} ORDER BY ALL").fetchall(), rows), name
    assert again.check().problems == []
    # A lost marker: --repair writes one saying 'unknown' (the rows lack their evidence), so
    # readers still derive the rows.
    marker = wh.path / "loads" / f"part-{load_id}.parquet"
    marker.unlink()
    assert Warehouse(wh.path).check(repair=True).problems == []
    assert pq.read_table(marker).column("kidata_version").to_pylist() == ["unknown"]
    for name, rows in before.items():
        assert same_rows(
            Warehouse(wh.path).sql(f"SELECT * FROM {name} ORDER BY ALL").fetchall(), rows), name
    # The version is what tells: the same files under a 0.3.0 marker are trusted, and the
    # columns they lack are missing.
    row = pq.read_table(marker).to_pylist()[0]
    row.update(kidata_version="0.3.0")
    pq.write_table(pa.Table.from_pylist([row], schema=TABLES["loads"]), marker)
    with pytest.raises(QueryError, match="version"):
        Warehouse(wh.path).sql("SELECT * FROM latest_latencies").fetchall()
