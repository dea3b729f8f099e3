"""Liger-Kernel's benchmark CSV: the full published file loaded and checked against values
counted or computed by hand from the CSV text (see tests/data/liger/NOTE.md for the files)."""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import shutil
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest
from conftest import SHARED, shared
from hypothesis import given, settings
from hypothesis import strategies as st

from kidata import Warehouse
from kidata.core.catalog import display_name, lookup_gpu
from kidata.errors import RecordError
from kidata.ingest.flatten import Flattener
from kidata.ingest.readers.liger import read as read_liger

DATA = Path(__file__).parents[1] / "data"
LIGER = DATA / "liger"
RECENT = SHARED / "liger" / "all_benchmark_data.csv"
FIRST = SHARED / "liger" / "all_benchmark_data_2024-09-03.csv"
EDGE = LIGER / "edge_cases.csv"
SEEDS = DATA / "seeds"
SEED_000 = next(SEEDS.glob("000_*.txt"))
SEED_001 = next(SEEDS.glob("001_*.txt"))
RMS = ("liger-rms-norm-forward-liger-nvidia-a100-sxm4-80gb-hidden4096-rows2048-bf16-"
       "2024-09-03-15-39-30")
RELU = ("liger-relu-squared-backward-torch-nvidia-h100-80gb-hbm3-hidden4096-rows4096-bf16-"
        "2026-03-27-06-09-46")


def seed(path: Path) -> dict:
    return json.loads(path.read_text("utf-8").split("\n", 2)[2])


def csv_rows(path: Path) -> list[list[str]]:
    """The data rows of a CSV, read with Python's csv module (independently of kidata)."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        return list(csv.reader(f))[1:]


def ns(text: str) -> int:
    """ms text -> integer ns, by the documented rule (exact product, halves up)."""
    return int((Decimal(text) * 10**6).to_integral_value(ROUND_HALF_UP))


@pytest.fixture(scope="module")
def recent(tmp_path_factory) -> Warehouse:
    wh = Warehouse(tmp_path_factory.mktemp("liger") / "wh")
    report = wh.load([str(shared("liger/all_benchmark_data.csv"))])
    assert report.ok, report.rejects[:3]
    assert report.warned == 0
    return wh


def test_every_row_is_one_run(recent: Warehouse):
    # `wc -l all_benchmark_data.csv` = 2449 lines = header + 2,448 rows (no field spans lines).
    assert recent.sql("select count(*) from runs where source = 'liger-kernel-bench'"
                      ).fetchall() == [(2448,)]
    # Each run has its three quantiles: 2,448 x 3 = 7,344 measurements.
    assert recent.sql("select count(*) from measurements").fetchall() == [(7344,)]


def test_run_counts_per_metric_and_gpu(recent: Warehouse):
    # Counted with grep over the CSV text, e.g.
    #   grep -c ',speed,.*,NVIDIA H100 80GB HBM3,' all_benchmark_data.csv   -> 691
    # speed: 400 + 691 + 48 + 66 + 324 + 120 = 1,649; memory: 194 + 295 + 24 + 50 + 116 + 120 = 799
    expected = {
        ("latency", "a100-sxm4-80gb"): 400, ("memory", "a100-sxm4-80gb"): 194,
        ("latency", "h100-sxm5-80gb"): 691, ("memory", "h100-sxm5-80gb"): 295,
        ("latency", "h100-pcie-80gb"): 48, ("memory", "h100-pcie-80gb"): 24,
        ("latency", "b200"): 66, ("memory", "b200"): 50,
        ("latency", "rtx-3090"): 324, ("memory", "rtx-3090"): 116,
        ("latency", "rtx-4090"): 120, ("memory", "rtx-4090"): 120,
    }
    got = dict(((m, g), n) for m, g, n in recent.sql(
        "select metric, gpu, count(*) from runs group by metric, gpu").fetchall())
    assert got == expected
    # Modes: grep -c ',forward,' -> 709, ',backward,' -> 509, ',full,' -> 1,230.
    modes = dict(recent.sql("select pass, count(*) from runs group by pass").fetchall())
    assert modes == {"forward": 709, "backward": 509, "full": 1230}


def test_seed_rows_have_the_seeds_identity_digests_and_numbers(recent: Warehouse):
    for path, run_id in ((SEED_000, RMS), (SEED_001, RELU)):
        bundle = seed(path)
        spec = bundle["run"]["spec"]
        row = recent.sql(
            "select external_id, protocol_id, environment_id, observed_at, version, title, "
            "document from runs join run_documents using (run_id) where run_id = $1",
            params=[run_id]).fetchall()
        assert len(row) == 1
        external_id, protocol_id, environment_id, observed_at, version, title, document = row[0]
        assert external_id == spec["sourceNative"]["externalId"]
        assert protocol_id == spec["protocolDigest"]
        assert environment_id == spec["environmentDigest"]
        assert observed_at.isoformat() == spec["observedAt"].replace(".000Z", "+00:00")
        assert version == bundle["run"]["metadata"]["labels"]["liger_version"]
        assert title == bundle["run"]["metadata"]["title"]
        # The run document equals the seed's except the two digests whose documents the
        # seeds do not show (docs/liger.md).
        ours = json.loads(document)
        for key in ("workloadDigest", "implementationDigest"):
            del ours["spec"][key]
            del bundle["run"]["spec"][key]
        assert ours == bundle["run"]
    # Seed 000 by hand: 0.031072000041604042 ms x 10^6 = 31072.00004... ns -> 31072; p20
    # 0.030047999694943428 -> 30047.9997 -> 30048; p80 0.031968001276254654 -> 31968.
    values = dict(recent.sql("select statistic, value from measurements where run_id = $1",
                             params=[RMS]).fetchall())
    assert values == {"median": 31072, "p20": 30048, "p80": 31968}


@pytest.mark.shared
def test_loading_the_seeds_after_or_before_the_csv_gives_one_run_each(recent: Warehouse,
                                                                       tmp_path: Path):
    report = recent.load([str(SEED_000), str(SEED_001)])
    assert report.ok and report.runs_added == 0 and report.duplicates == 2
    other = Warehouse(tmp_path / "wh")
    assert other.load([str(SEED_000), str(SEED_001)]).runs_added == 2
    report = other.load([str(RECENT)])
    assert report.ok and report.runs_added == 2446 and report.duplicates == 2
    for wh in (recent, other):
        assert wh.sql("select count(*) from runs where run_id in ($1, $2)",
                      params=[RMS, RELU]).fetchall() == [(2,)]


def test_liger_vs_torch_speedup(recent: Warehouse):
    # relu_squared, backward, N = 4096, {"M": 4096, bf16}, H100 (CSV lines 1923 and 1931):
    # liger 0.039423998445272446 ms -> 39424 ns, torch 0.1263359934091568 ms -> 126336 ns.
    # speedup = 126336 / 39424 = 987 / 308 (both / 128) = 3.2045...; latency_ratio = 308 / 987.
    rows = recent.sql(
        "select candidate_us, baseline_us, speedup, latency_ratio, baseline_run_id "
        "from speedups where kernel = 'relu_squared' and pass = 'backward' and "
        "workload = 'hidden4096-rows4096-bf16' and gpu = 'h100-sxm5-80gb' and "
        "candidate = 'liger' and baseline = 'torch'").fetchall()
    assert len(rows) == 1
    candidate_us, baseline_us, speedup, ratio, baseline_run = rows[0]
    assert (candidate_us, baseline_us) == (39.424, 126.336)
    assert speedup == pytest.approx(987 / 308, rel=1e-12)
    assert ratio == pytest.approx(308 / 987, rel=1e-12)
    assert baseline_run == RELU


@pytest.mark.shared
def test_timer_step_of_1_024_us_is_the_resolution(recent: Warehouse):
    """A speed row two of whose three quantiles (in integer ns, the documented rounding) are
    multiples of 1,024 ns, to 1 ns, gets resolution 1.024 µs; counted here from the CSV text."""
    stepped: dict[str, int] = {}
    with open(RECENT, newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            if r["metric_name"] == "speed":
                on_grid = sum(ns(r[f"y_value_{q}"]) % 1024 in (0, 1, 1023)
                              for q in ("20", "50", "80"))
                stepped[r["gpu_name"]] = stepped.get(r["gpu_name"], 0) + (on_grid >= 2)
    assert sum(stepped.values()) == 273  # of 1,649 speed rows
    assert stepped["NVIDIA H100 80GB HBM3"] == 0 and stepped["NVIDIA GeForce RTX 3090"] == 180
    got = dict(recent.sql("SELECT gpu, count(resolution_us) FROM latencies GROUP BY gpu"
                          ).fetchall())
    assert got == {"h100-sxm5-80gb": 0, "h100-pcie-80gb": 0, "rtx-3090": 180, "rtx-4090": 65,
                   "a100-sxm4-80gb": 24, "b200": 4}
    assert recent.sql("SELECT DISTINCT resolution_us FROM latencies WHERE resolution_us "
                      "IS NOT NULL").fetchall() == [(1.024,)]
    # CSV line 754, softmax liger forward N 128 fp32, RTX 3090: p20 = p50 = 0.0071680000983 ms
    # -> 7168 ns (7 x 1024), p80 0.0079423999 ms -> 7942 ns: a 0.774 µs range under one step.
    # Line 787, softmax torch forward N 1024: all three 0.014336000196 ms = 14 x 1.024 µs.
    rows = recent.sql(
        "SELECT workload, implementation, low_us, high_us, resolution_us, evidence "
        "FROM latencies WHERE gpu = 'rtx-3090' AND kernel = 'softmax' AND pass = 'forward' "
        "AND workload IN ('hidden128-rows2048-fp32', 'hidden1024-rows2048-bf16') "
        "AND implementation = CASE WHEN workload LIKE 'hidden128-%' THEN 'liger' ELSE 'torch' "
        "END ORDER BY workload").fetchall()
    assert rows == [
        ("hidden1024-rows2048-bf16", "torch", 14.336, 14.336, 1.024, "zero width"),
        ("hidden128-rows2048-fp32", "liger", 7.168, 7.942, 1.024, "below resolution"),
    ]


@pytest.mark.shared
def test_speedup_summary_per_gpu(recent: Warehouse):
    # liger vs torch on the H100 PCIe, recomputed from the CSV text alone: pair the liger and
    # torch speed rows of that GPU on (kernel, mode, x, config); 2 kernels (jsd, kl_div) x 2
    # modes (forward, full) x 6 x values = 24 pairs.
    speed = {}
    for r in csv_rows(RECENT):
        if r[3] == "speed" and r[12] == "NVIDIA H100 PCIe":
            speed[(r[1], r[0], r[2], r[5], r[7], r[11])] = ns(r[8])
    ratios = {tuple(key): speed[("torch", *key)] / liger
              for (provider, *key), liger in speed.items()
              if provider == "liger"}
    assert len(ratios) == 24
    # speedup_summary keeps passes apart and weighs kernels equally: per mode, the geometric
    # mean of each kernel's 6 ratios, then of the 2 kernels' means; pooled_geomean_speedup is
    # the geometric mean of the mode's 12 ratios.
    for mode in ("forward", "full"):
        per_kernel = {k: [s for (kk, m, *_), s in ratios.items() if kk == k and m == mode]
                      for k in ("jsd", "kl_div")}
        assert [len(v) for v in per_kernel.values()] == [6, 6]
        logs = [sum(math.log(s) for s in v) / 6 for v in per_kernel.values()]
        flat = [s for v in per_kernel.values() for s in v]
        row = recent.sql(
            "select kernels, workloads, geomean_speedup, pooled_geomean_speedup, min_speedup, "
            "max_speedup, wins, losses from speedup_summary where gpu = 'h100-pcie-80gb' and "
            "candidate = 'liger' and baseline = 'torch' and pass = $p", params={"p": mode}
        ).fetchall()
        assert row == [(2, 12, pytest.approx(math.exp(sum(logs) / 2), rel=1e-12),
                        pytest.approx(math.exp(sum(math.log(s) for s in flat) / 12),
                                      rel=1e-12),
                        pytest.approx(min(flat)), pytest.approx(max(flat)),
                        sum(s > 1 for s in flat), sum(s < 1 for s in flat))]
    # Every GPU of the file has a summary row for liger against something.
    gpus = {g for (g,) in recent.sql(
        "select distinct gpu from speedup_summary where candidate = 'liger'").fetchall()}
    assert gpus == {"a100-sxm4-80gb", "h100-sxm5-80gb", "h100-pcie-80gb", "b200", "rtx-3090",
                    "rtx-4090"}


@pytest.mark.parametrize("kernel, x_name, x, slug", [
    # The rule by hand (docs/liger.md): swept parameter first, then config keys in order;
    # words from kidata/data/workloads.toml; eps = 1e-06 left out.
    # H=4096 -> hidden4096, M=2048 -> rows2048, dtype torch.bfloat16 -> bf16, eps omitted.
    ("rms_norm", "H", 4096, "hidden4096-rows2048-bf16"),
    # N=4096 -> hidden4096, M=4096 -> rows4096, bf16.
    ("relu_squared", "N", 4096, "hidden4096-rows4096-bf16"),
    # V=4096 -> vocab4096, B=8 -> batch8, T=2048 -> seq2048.
    ("cross_entropy", "V", 4096, "vocab4096-batch8-seq2048"),
    # T=1024 -> seq1024, bsz -> batch8, hidden_size -> hidden4096, intermediate_size ->
    # inter11008, hidden_act gelu_pytorch_tanh -> act-gelu-pytorch-tanh, bf16.
    ("geglu", "T", 1024, "seq1024-batch8-hidden4096-inter11008-act-gelu-pytorch-tanh-bf16"),
    # dim = -1 -> dim-neg1; torch.float32 -> fp32.
    ("sparsemax", "V", 1024, "vocab1024-batch4-seq512-dim-neg1-fp32"),
    # mode "forward" and ignore_index -100 left out; bias false -> nobias; 0.5 -> 0p5.
    ("distill_cosine_loss", "BT", 1024,
     "tokens1024-hidden4096-vocab128256-bf16-nobias-whard0p5-wsoft0p5"),
    # The config's "E": null is the swept E = 8; sweep_dim "E" -> sweep-e; K=8 -> k8.
    ("fused_moe", "E", 8, "experts8-sweep-e-seq8192-hidden2048-inter768-k8-bf16"),
])
def test_workload_slugs(recent: Warehouse, kernel: str, x_name: str, x: int, slug: str):
    rows = recent.sql(
        "select distinct w.name from runs r join workloads w on w.workload_id = r.workload_id "
        "where r.kernel = $1 and json_extract_string(w.document, '$.metadata.labels.x_name') = $2 "
        "and cast(json_extract(w.parameters, '$.' || $2) as bigint) = $3",
        params=[kernel, x_name, x]).fetchall()
    assert rows == [(slug,)]


def test_workload_parameters_are_named(recent: Warehouse):
    (params,), = recent.sql(
        "select distinct w.parameters from workloads w where w.name = $1 and w.kernel = $2",
        params=["experts8-sweep-e-seq8192-hidden2048-inter768-k8-bf16", "fused_moe"]).fetchall()
    assert json.loads(params) == {"E": 8, "sweep_dim": "E", "T": 8192, "H": 2048,
                                  "intermediate_dim": 768, "K": 8, "dtype": "torch.bfloat16"}


@pytest.mark.shared
def test_every_gpu_name_is_in_the_catalog_with_peaks():
    names = {r[12] for r in csv_rows(RECENT) + csv_rows(FIRST)}
    names |= {"A100 SXM4 80 GB", "H100 SXM 80 GB"}  # trainkernel's names (seed 003)
    for name in names:
        gpu = lookup_gpu(name)
        assert gpu.known, name
        assert gpu.vendor and gpu.product and gpu.form_factor and gpu.architecture, name
        assert gpu.memory_bandwidth_gbps and gpu.bf16_dense_tflops, name
    # kernelindex.md §5.
    a100, h100 = lookup_gpu("NVIDIA A100-SXM4-80GB"), lookup_gpu("NVIDIA H100 80GB HBM3")
    assert (a100.memory_bandwidth_gbps, a100.bf16_dense_tflops) == (2039, 312)
    assert (h100.memory_bandwidth_gbps, h100.bf16_dense_tflops) == (3350, 989)
    # NVIDIA's L40S datasheet: 864 GB/s, BF16 tensor 362.05 TFLOP/s dense (733 sparse).
    l40s = lookup_gpu("NVIDIA L40S")
    assert (l40s.memory_bandwidth_gbps, l40s.bf16_dense_tflops) == (864, 362.05)
    assert lookup_gpu("H100 SXM 80 GB").key == h100.key == "h100-sxm5-80gb"
    assert lookup_gpu("NVIDIA H100 PCIe").key == "h100-pcie-80gb"


@pytest.mark.shared
def test_display_names_for_every_kernel_and_provider(recent: Warehouse):
    rows = csv_rows(RECENT) + csv_rows(FIRST)
    # kidata/data/names.toml names every kernel and provider of the files.
    assert [k for k in sorted({r[0] for r in rows}) if display_name("kernels", k) == k] == []
    assert [p for p in sorted({r[1] for r in rows})
            if display_name("implementations", p) == p] == []
    titles = dict(recent.sql("select run_id, title from runs where run_id in ($1, $2)",
                             params=[RMS, RELU]).fetchall())
    assert titles == {RMS: "RMSNorm · liger · forward", RELU: "ReLU squared · torch · backward"}


@pytest.mark.shared
def test_history_versions_in_either_order(tmp_path: Path):
    # Distinct rows across both versions, counted with the csv module alone: a row present in
    # both files is one run. 2,448 + 410 - 386 (rows in both) = 2,472.
    recent_rows = {tuple(r) for r in csv_rows(RECENT)}
    first_rows = {tuple(r) for r in csv_rows(FIRST)}
    assert (len(recent_rows), len(first_rows), len(recent_rows & first_rows)) == (2448, 410, 386)
    distinct = len(recent_rows | first_rows)
    assert distinct == 2472
    for name, order, second_added in (("new-first", [RECENT, FIRST], 410 - 386),
                                      ("old-first", [FIRST, RECENT], 2448 - 386)):
        wh = Warehouse(tmp_path / name)
        assert wh.load([str(order[0])]).ok
        report = wh.load([str(order[1])])
        assert report.ok
        assert (report.runs_added, report.duplicates) == (second_added, 386)
        assert wh.sql("select count(*) from runs").fetchall() == [(distinct,)]


def test_edge_cases_file(cli, wh_path: Path):
    # BOM, CRLF, a quoted field spanning two lines; 10 data rows: 5 good, 5 bad.
    result = cli("load", EDGE)
    assert result.code == 1
    rejected = [line for line in result.err.splitlines() if line.startswith("rejected:")]
    assert rejected == [
        f"rejected: {EDGE}, row 5, field y_value_20: short row: 9 fields, the header has 15",
        f"rejected: {EDGE}, row 6, field y_value_80: expected a number, got 'abc'",
        f"rejected: {EDGE}, row 7, field timestamp: expected a time such as 2024-09-03 "
        "15:39:30, got 'yesterday'",
        f"rejected: {EDGE}, row 8, field extra_benchmark_config_str: expected a JSON object, "
        "got invalid JSON: Expecting property name enclosed in double quotes: line 1 column 2 "
        "(char 1)",
        f"rejected: {EDGE}, row 9, field y_value_50: expected a finite number > 0, got 'nan' "
        "(upstream writes nan when a benchmark produced no result)",
    ]
    assert "5 runs added" in result.out and "5 rejected" in result.out
    warnings = [line for line in result.err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "row 4" in warnings[0] and "'quantum-z9'" in warnings[0]
    wh = Warehouse(wh_path)
    runs = {r[0]: r[1:] for r in wh.sql(
        "select run_id, pass, metric, workload, gpu from runs").fetchall()}
    stamp = "2025-01-02-03-04-05"
    speed = ("liger-rms-norm-no-grad-forward-liger-nvidia-a100-sxm4-80gb-hidden4096-rows2048-"
             f"bf16-{stamp}")
    assert runs[speed] == ("no-grad-forward", "latency", "hidden4096-rows2048-bf16",
                           "a100-sxm4-80gb")
    # Row 2: the same key and timestamp as row 1 but memory: its own run.
    assert runs[speed + "-memory"] == ("no-grad-forward", "memory", "hidden4096-rows2048-bf16",
                                       "a100-sxm4-80gb")
    # Row 3: text x value; the multi-line x label is still row 3 (rows, not lines).
    text_x = f"liger-swiglu-full-liger-nvidia-h200-model-meta-llama-llama-3-8b-batch4-fp32-{stamp}"
    assert runs[text_x] == ("full", "latency", "model-meta-llama-llama-3-8b-batch4-fp32",
                            "h200-sxm-141gb")
    # Row 4: an unknown GPU loads under a derived key.
    assert runs[f"liger-rms-norm-forward-torch-nvidia-quantum-z9-hidden4096-rows2048-bf16-{stamp}"
                ][3] == "quantum-z9"
    values = {(r[0], r[1], r[2]): r[3] for r in wh.sql(
        "select run_id, metric, statistic, value from measurements").fetchall()}
    # Row 2 memory: 64.5 / 64.25 / 65 MB as written.
    assert [values[(speed + "-memory", "memory", s)] for s in ("p20", "median", "p80")] == \
        [64.25, 64.5, 65.0]
    # Row 10: 0.0000125 ms = 12.5 ns -> 13 (halves up), 0.0000124 -> 12.4 -> 12, 0.0000126 -> 13.
    full = f"liger-rms-norm-full-liger-nvidia-h100-pcie-hidden4096-rows2048-bf16-{stamp}"
    assert [values[(full, "latency", s)] for s in ("p20", "median", "p80")] == [12, 13, 13]
    params = wh.sql("select parameters from workloads where name = $1",
                    params=["model-meta-llama-llama-3-8b-batch4-fp32"]).fetchall()
    assert json.loads(params[0][0]) == {"model": "meta-llama/Llama-3-8B", "B": 4,
                                        "dtype": "torch.float32"}
    assert wh.sql("select count(*) from rejects").fetchall() == [(5,)]


def test_missing_column_is_one_file_error(cli):
    result = cli("load", LIGER / "missing_column.csv")
    assert result.code == 1
    assert f"rejected: {LIGER / 'missing_column.csv'}, header, field gpu_name: missing column " \
           "gpu_name; expected the Liger-Kernel benchmark CSV columns" in result.err
    assert "0 runs added" in result.out and "1 rejected" in result.out


def test_gzip_and_format_option(cli, tmp_path: Path):
    gz = tmp_path / "edge.csv.gz"
    with open(EDGE, "rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    result = cli("load", "--format", "liger-csv", gz)
    assert result.code == 1 and "5 runs added" in result.out and "5 rejected" in result.out


def test_bad_bytes_spoil_only_their_row_and_an_empty_mode_is_kept(cli, copy_data, wh_path: Path):
    # edge_cases.csv has 10 rows on lines 2-12 (row 3 spans lines 4-5); append row 11 (line
    # 13) with bytes that are not UTF-8 and row 12 (line 14) with no kernel_operation_mode.
    path = copy_data("liger/edge_cases.csv")
    with open(path, "ab") as f:
        f.write(b"rms_norm,liger,forward,speed,ms,H,\xff\xfe,1024,0.02,0.01,0.03,{},"
                b"NVIDIA B200,2025-01-02 03:04:05,0.5.0\r\n"
                b"rms_norm,liger,,speed,ms,H,hidden size,1024,0.02,0.01,0.03,{},"
                b"NVIDIA B200,2025-01-02 03:04:05,0.5.0\r\n")
    result = cli("load", path)
    assert f"rejected: {path}, row 11: not UTF-8 text (line 13, byte 34: invalid start " \
           "byte)" in result.err
    assert "6 runs added" in result.out and "6 rejected" in result.out
    rows = Warehouse(wh_path).sql(
        "select r.pass, p.name from runs r join protocols p on p.protocol_id = r.protocol_id "
        "where r.gpu = 'b200'").fetchall()
    assert rows == [("unspecified", "liger-bench-do-bench-unspecified")]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from('ab1.-e,"\n\r{}[]:x '), max_size=12),
                min_size=15, max_size=17),
       st.binary(max_size=40))
@pytest.mark.shared
def test_any_row_is_read_or_rejected_never_raises(fields: list[str], tail: bytes):
    # A header, one row built from odd fields, and arbitrary bytes: the reader yields items or
    # RecordErrors, and every item either flattens or fails with a RecordError.
    header = RECENT.read_bytes().split(b"\n", 1)[0] + b"\n"
    data = header + ",".join(fields).encode() + b"\n" + tail
    for item in read_liger(io.BufferedReader(io.BytesIO(data)), "fuzz.csv"):
        if isinstance(item, RecordError):
            assert item.file == "fuzz.csv" and item.position.startswith(("row ", "header"))
            continue
        try:
            Flattener().flatten(item)
        except RecordError:
            pass
