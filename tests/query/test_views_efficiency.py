"""Efficiency against the hardware: workload parameters, reference tables and the efficiency
view, on tests/data/views/efficiency.jsonl.

bytes = sum of coefficient x size(dtype) x factors (kidata/data/byte_models.toml); a GB/s is a
byte per ns, so achieved_gbps = bytes / median_ns.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kidata import Warehouse
from kidata.errors import KidataError
from kidata.store import reference

DATA = Path(__file__).parents[1] / "data"


@pytest.fixture(scope="module")
def loaded(tmp_path_factory) -> Warehouse:
    wh = Warehouse(tmp_path_factory.mktemp("wh"))
    report = wh.load([str(DATA / "views" / "efficiency.jsonl")])
    assert report.ok and report.runs_added == 11
    return wh


def test_efficiency_numbers(loaded: Warehouse):
    got = {r[0]: r[1:] for r in loaded.sql(
        "SELECT run_id, bytes, median_us, achieved_gbps, achieved_gbps_low, achieved_gbps_high, "
        "peak_gbps, peak_fraction, above_peak FROM efficiency").fetchall()}
    assert set(got) == {"ef-rms", "ef-ln-bwd", "ef-mswiglu", "ef-unknown-gpu", "ef-above-peak"}
    # rms_norm forward, M 2048, H 4096, bfloat16 (2 bytes), A100 (2039 GB/s):
    # bytes = 2 x (2 x 2048 x 4096 + 4096) = 2 x 16,781,312 = 33,562,624;
    # achieved = 33,562,624 / 31,072 ns = 1080.1565 GB/s; at p80 / 31,968 = 1049.8819;
    # at p20 / 30,048 = 1116.9670; fraction 1080.1565 / 2039 = 0.529748.
    b, med, gbps, low, high, peak, frac, above = got["ef-rms"]
    assert b == 33_562_624 and med == 31.072 and peak == 2039
    assert (gbps, low, high) == pytest.approx((1080.1565, 1049.8819, 1116.9670), abs=1e-4)
    assert frac == pytest.approx(0.529748, abs=1e-6) and above is False
    # layer_norm backward, M 4, N 8, float32 (4 bytes), H100 (3350 GB/s):
    # 4 x (3 x 4 x 8 + 3 x 8) = 4 x 120 = 480 bytes in 480 ns = 1 GB/s; 1/3350 = 0.000298507;
    # no p20/p80, so no range.
    assert got["ef-ln-bwd"][:6] == (480, 0.48, 1.0, None, None, 3350)
    assert got["ef-ln-bwd"][6] == pytest.approx(0.000298507, abs=1e-9)
    assert got["ef-ln-bwd"][7] is False
    # megatron_swiglu forward, S 2, B 3, ffn_local 5, always bfloat16:
    # 2 x (2 x 30 + 30) = 180 bytes in 90 ns = 2 GB/s; 180/100 = 1.8; 180/80 = 2.25.
    assert got["ef-mswiglu"][:6] == pytest.approx((180, 0.09, 2.0, 1.8, 2.25, 3350))
    # softmax forward, M 2, N 4, float32 on a GPU the catalog does not know:
    # 4 x 2 x 8 = 64 bytes in 64 ns = 1 GB/s (64/80 = 0.8, 64/50 = 1.28); no peak, no fraction.
    assert got["ef-unknown-gpu"] == pytest.approx((64, 0.064, 1.0, 0.8, 1.28, None, None, None))
    # relu_squared forward, M 1000, N 1000, bfloat16: 2 x 2 x 10^6 = 4,000,000 bytes in 1000 ns
    # = 4000 GB/s, above the A100's 2039: 4000 / 2039 = 1.961746, flagged above_peak.
    b, med, gbps, low, high, peak, frac, above = got["ef-above-peak"]
    assert (b, gbps, above) == (4_000_000, 4000.0, True)
    assert frac == pytest.approx(1.961746, abs=1e-6)


def test_runs_without_a_model_or_parameters_are_absent(loaded: Warehouse):
    # cross_entropy and swiglu have no byte model; the rms_norm runs lack H, give H as text,
    # name an unknown dtype, or have no parameters at all: none is guessed.
    absent = loaded.sql("SELECT run_id FROM runs WHERE run_id NOT IN "
                        "(SELECT run_id FROM efficiency) ORDER BY run_id").fetchall()
    assert [r[0] for r in absent] == ["ef-missing-param", "ef-no-model", "ef-no-params",
                                      "ef-swiglu", "ef-text-param", "ef-unknown-dtype"]


def test_workload_parameters_are_numbers_or_text(loaded: Warehouse):
    rows = loaded.sql(
        "SELECT w.name, p.name, p.value, p.text FROM workload_parameters p "
        "JOIN workloads w ON w.workload_id = p.workload_id "
        "WHERE w.name IN ('rms-M2048-H4096', 'rms-H-text', 'swiglu-T1024', 'ce-B8-T2048-V4096') "
        "ORDER BY 1, 2").fetchall()
    got = {(w, n): (v, t) for w, n, v, t in rows}
    assert got[("rms-M2048-H4096", "M")] == (2048.0, None)
    assert got[("rms-M2048-H4096", "eps")] == (1e-06, None)
    assert got[("rms-M2048-H4096", "dtype")] == (None, "torch.bfloat16")
    assert got[("rms-H-text", "H")] == (None, "4096")
    assert got[("swiglu-T1024", "bias")] == (None, "false")  # booleans are not numbers
    assert got[("ce-B8-T2048-V4096", "sizes")] == (None, "[8,2048]")
    assert len([k for k in got if k[0] == "rms-M2048-H4096"]) == 4


def test_parameters_load_once(tmp_path):
    wh = Warehouse(tmp_path / "wh")
    wh.load([str(DATA / "views" / "single.jsonl")])
    # single.jsonl's workload is also in efficiency.jsonl (same document, same digest).
    wh.load([str(DATA / "views" / "efficiency.jsonl")])
    assert wh.sql("SELECT count(*) FROM workload_parameters p JOIN workloads w "
                  "ON w.workload_id = p.workload_id WHERE w.name = 'rms-M2048-H4096'"
                  ).fetchall() == [(4,)]


def test_seed_runs_have_no_parameters_so_no_efficiency(tmp_path):
    # The seeds carry only workload digests: no parameters, so no bytes and no rows.
    wh = Warehouse(tmp_path / "wh")
    wh.load([str(DATA / "seeds")])
    assert wh.sql("SELECT count(*) FROM efficiency").fetchall() == [(0,)]


def test_reference_tables_are_written_and_refreshed(tmp_path):
    wh = Warehouse(tmp_path / "wh")
    wh.load([str(DATA / "views" / "single.jsonl")])
    files = {name: tmp_path / "wh" / name / "reference.parquet" for name in reference.tables()}
    assert all(f.exists() for f in files.values())
    assert wh.sql("SELECT memory_bandwidth_gbps FROM gpus WHERE gpu = 'a100-sxm4-80gb'"
                  ).fetchall() == [(2039.0,)]
    assert wh.sql("SELECT bytes FROM dtypes WHERE name = 'torch.bfloat16'").fetchall() == [(2,)]
    # A warehouse written before these tables existed, or with outdated files, still answers
    # from the packaged data, without writing...
    files["dtypes"].unlink()
    outdated = reference.tables()["gpus"].to_pylist()
    for row in outdated:
        row["memory_bandwidth_gbps"] = 1.0
    pq.write_table(pa.Table.from_pylist(outdated, schema=reference.tables()["gpus"].schema),
                   files["gpus"])
    pq.write_table(reference.tables()["byte_models"].slice(0, 1), files["byte_models"])
    fresh = Warehouse(tmp_path / "wh")
    assert fresh.sql("SELECT peak_gbps, bytes FROM efficiency").fetchall() == [
        (2039.0, 33_562_624)]
    assert not files["dtypes"].exists()
    # ...and the next load writes them back.
    fresh.load([str(DATA / "views" / "single.jsonl")])
    for name, table in reference.tables().items():
        assert pq.read_table(files[name]).equals(table), name


def test_reference_tables_in_a_copied_warehouse(tmp_path):
    # The files are ordinary Parquet: a copy of the warehouse folder carries them along.
    wh = Warehouse(tmp_path / "wh")
    wh.load([str(DATA / "views" / "single.jsonl")])
    shutil.copytree(tmp_path / "wh", tmp_path / "copy")
    assert Warehouse(tmp_path / "copy").sql("SELECT count(*) FROM gpus").fetchall()[0][0] >= 4


BASE = {"dtypes": {"torch.float32": 4},
        "model": [{"kernel": "k", "pass": "forward", "benchmark": "b",
                   "terms": [{"term": "read X", "dtype_parameter": "dtype",
                              "factors": ["M", "N"]}]}]}


def _with(path: str, value) -> dict:
    import copy

    data = copy.deepcopy(BASE)
    target = data
    keys = path.split(".")
    for key in keys[:-1]:
        target = target[int(key)] if key.isdigit() else target[key]
    last = keys[-1]
    target[int(last) if last.isdigit() else last] = value
    return data


@pytest.mark.parametrize(("data", "message"), [
    (_with("dtypes", {}), "field dtypes: expected a table of dtype = bytes per element"),
    (_with("dtypes", {"x": 0}), "field dtypes.x: expected a positive whole number, got 0"),
    (_with("model.0.terms", []), "field model[0].terms: expected a non-empty list of terms"),
    (_with("model.0.terms.0.coefficient", -1),
     "field model[0].terms[0].coefficient: expected a number > 0, got -1"),
    (_with("model.0.terms.0.dtype", "torch.float32"),
     "field model[0].terms[0]: expected exactly one of dtype_parameter"),
    (_with("model.0.terms.0.factors", ["A", "B", "C", "D"]),
     "field model[0].terms[0].factors: expected up to 3 parameter names"),
    (_with("model.0.kernel", ""), "field model[0].kernel: expected a non-empty string"),
])
def test_byte_model_data_errors_name_the_field(data, message):
    with pytest.raises(KidataError) as err:
        reference.parse_byte_models(data)
    assert str(err.value).startswith("kidata/data/byte_models.toml, " + message)


def test_unknown_fixed_dtype_and_duplicate_models_are_refused():
    data = _with("model.0.terms.0", {"term": "t", "dtype": "torch.int3"})
    with pytest.raises(KidataError, match=r"unknown dtype 'torch.int3'; add it to \[dtypes\]"):
        reference.parse_byte_models(data)
    data = _with("model", BASE["model"] * 2)
    with pytest.raises(KidataError, match="a second model for k forward"):
        reference.parse_byte_models(data)


def test_packaged_byte_models_parse():
    sizes, models = reference.byte_models()
    assert sizes["torch.bfloat16"] == 2 and sizes["torch.float32"] == 4
    kernels = {(m.kernel, m.pass_) for m in models}
    assert ("rms_norm", "forward") in kernels and ("swiglu", "forward") not in kernels


# -- size_growth against a plain reference --------------------------------------------------------

_SIZES = (1024, 1536, 2048, 3072, 4096, 6144, 8192)  # rms_norm bytes are H x (4M + 2): 2x, 1.5x, 3x


def _growth_reference(points: list[tuple]) -> dict[str, float | None]:
    """size_growth by its definition, pair by pair: per run, the least median ratio (larger
    point / this point) over the runs of its sweep (kernel, pass, implementation, variant,
    GPU, family and version, nulls matching nulls) with at least twice its bytes."""
    out: dict[str, float | None] = {}
    for run, sweep, bytes_, median in points:
        ratios = [m / median for _, s, b, m in points if s == sweep and b >= 2 * bytes_]
        out[run] = min(ratios) if ratios else None
    return out


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# liger's 1024 has three points at 2x or more (the least is not the nearest); its 2048 one at
# exactly 2x; torch's sweeps differ by version only, with a variant.
@example([(1024, "liger", None, None, False, 20_000), (2048, "liger", None, None, False, 40_000),
          (3072, "liger", None, None, False, 80_000), (4096, "liger", None, None, False, 31_000),
          (1024, "torch", "fast", "v1", True, 62_000), (2048, "torch", "fast", "v1", True, 124_000),
          (2048, "torch", "fast", "v2", True, 20_000)])
@given(st.lists(st.tuples(st.sampled_from(_SIZES), st.sampled_from(["liger", "torch"]),
                          st.sampled_from([None, "fast"]), st.sampled_from([None, "v1", "v2"]),
                          st.booleans(), st.sampled_from([20_000, 31_000, 40_000, 62_000,
                                                          80_000, 124_000])),
                min_size=1, max_size=40))
def test_size_growth_is_the_least_ratio_over_the_sweeps_points_with_twice_the_bytes(
        tmp_path_factory, runs):
    """Sweeps of rms_norm forward (M 2048, bf16) at H in 1024..8192 (bytes 1.5x, 2x and 3x
    apart), two implementations, with and without a variant and a version, on two GPUs,
    several runs of a point and ties in bytes and in medians: the view's size_growth is, run
    for run, the pairwise definition worked out in Python (the view works it out per byte count
    of each sweep instead of per pair of runs, whose number grows as the square of a sweep's
    runs)."""
    import json

    from make_view_fixtures import A100, H100, bundle, workload

    rows = []
    for i, (h, implementation, variant, version, on_h100, median_ns) in enumerate(runs):
        work = workload(f"rms-M2048-H{h}", "rms_norm", {"M": 2048, "H": h,
                                                        "dtype": "torch.bfloat16"})
        rows.append(bundle(f"g{i}", "rms_norm/forward", implementation,
                           H100 if on_h100 else A100, median_ns, work, "v",
                           at=f"2026-01-01T00:{i:02d}:00Z", version=version, variant=variant))
    folder = tmp_path_factory.mktemp("growth")
    (folder / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    wh = Warehouse(folder / "wh")
    assert wh.load([str(folder / "runs.jsonl")]).ok
    points = [(run, tuple(sweep), bytes_, median) for run, *sweep, bytes_, median in wh.sql(
        "SELECT l.run_id, l.kernel, l.pass, l.implementation, l.variant, l.gpu, l.family, "
        "l.version, s.bytes, l.median_us FROM run_bytes s JOIN latencies l USING (run_id) "
        "WHERE l.status = 'passed' AND l.median_us IS NOT NULL").fetchall()]
    assert len(points) == len(runs)
    got = dict(wh.sql("SELECT run_id, size_growth FROM efficiency").fetchall())
    assert got == _growth_reference(points)
