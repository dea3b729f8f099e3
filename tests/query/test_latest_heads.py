"""latest_latencies when a key has heads in several loads (each load keeps one latest run per
key in latest_runs; the view picks among those loads' heads). The view ranks each key's heads
(newest first) and sums their runs; these cases have keys with several heads, where the ranking
and the sum decide the answer.

Every record is tests/data/views/single.jsonl's run (rms_norm forward, rms-M2048-H4096,
NVIDIA A100-SXM4-80GB, family views_bench) with its name, implementation, variant, timestamp
and median changed (its p20 and p80 set 1000 ns either side); each list below is one load."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from kidata import Warehouse

SINGLE = Path(__file__).resolve().parents[1] / "data" / "views" / "single.jsonl"


def record(name: str, implementation: str, observed_at: str | None, median_ns: int,
           variant: str | None = None) -> dict:
    rec = copy.deepcopy(json.loads(SINGLE.read_text("utf-8")))
    labels = rec["run"]["metadata"]["labels"]
    rec["run"]["metadata"]["name"] = name
    labels["implementation"] = implementation
    if variant is None:
        labels.pop("variant")
    else:
        labels["variant"] = variant
    spec = rec["run"]["spec"]
    if observed_at is None:
        spec.pop("observedAt")
    else:
        spec["observedAt"] = observed_at
    spec["timing"]["latencyNs"]["median"] = median_ns
    # p20 and p80 1000 ns either side of the median (a median outside them is rejected).
    spec["measurements"] = [
        {"metric": "latency", "statistic": "p20", "unit": "ns", "value": median_ns - 1000},
        {"metric": "latency", "statistic": "p80", "unit": "ns", "value": median_ns + 1000}]
    return rec


LOADS = [
    [  # load 1
        record("a1", "liger", "2024-09-03T10:00:00Z", 31072, "selected default"),
        record("a2", "liger", "2024-09-03T09:00:00Z", 35000, "selected default"),
        record("t-untimed", "torch", None, 50000),
        record("x-1", "triton", "2024-09-04T12:00:00Z", 42000),
    ],
    [  # load 2
        record("b1", "liger", "2024-09-02T00:00:00Z", 40000, "selected default"),
        record("t-timed", "torch", "2024-01-01T00:00:00Z", 60000),
        record("x-2", "triton", "2024-09-04T12:00:00Z", 43000),
    ],
]


@pytest.fixture(scope="module")
def wh(tmp_path_factory) -> Warehouse:
    folder = tmp_path_factory.mktemp("heads")
    wh = Warehouse(folder / "wh")
    for i, records in enumerate(LOADS):
        path = folder / f"load{i}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records), "utf-8")
        assert wh.load([str(path)]).ok
    return wh


def test_each_key_has_one_head_per_load(wh: Warehouse):
    # Load 1's liger key keeps a1 (10:00 after a2's 09:00) of its 2 passed runs; load 2 b1.
    assert sorted(wh.sql("SELECT run_id, passed_runs FROM latest_runs").fetchall()) == [
        ("a1", 2), ("b1", 1), ("t-timed", 1), ("t-untimed", 1), ("x-1", 1), ("x-2", 1)]


def test_the_latest_head_across_loads(wh: Warehouse):
    got = sorted(wh.sql(
        "SELECT implementation, variant, run_id, runs, center_us FROM latest_latencies"
    ).fetchall())
    assert got == [
        # a1 (2024-09-03 10:00) is newer than load 2's b1 (2024-09-02), though loaded first;
        # runs 2 + 1 = 3; median 31072 ns = 31.072 µs.
        ("liger", "selected default", "a1", 3, pytest.approx(31.072)),
        # A run without a timestamp comes after any timestamped one: t-timed, 60000 ns.
        ("torch", None, "t-timed", 2, pytest.approx(60.0)),
        # Same timestamp: the greater run_id, x-2 (43000 ns).
        ("triton", None, "x-2", 2, pytest.approx(43.0)),
    ]


def test_speedups_read_those_heads(wh: Warehouse):
    # liger vs torch: 60.0 / 31.072 = 1.93100...; triton vs torch: 60.0 / 43.0.
    got = dict(((r[0], r[1]), r[2]) for r in wh.sql(
        "SELECT candidate, baseline, speedup FROM speedups").fetchall())
    assert got[("liger", "torch")] == pytest.approx(60.0 / 31.072)
    assert got[("triton", "torch")] == pytest.approx(60.0 / 43.0)
    assert len(got) == 6
