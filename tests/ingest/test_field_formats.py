"""The field's result formats (issue 14), read in place from ../shared/data/external/.

Every expected number was read from the file by hand; each assertion says how.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SHARED

from kidata import Warehouse
from kidata.errors import RecordError, UsageError
from kidata.ingest.dtypes import normalise_dtype
from kidata.ingest.readers import detect, read_file
from kidata.ingest.readers.builder import Settings

EXT = SHARED / "external"
FIELD = Path(__file__).parents[1] / "data" / "field"
KIDATA = Path(sys.executable).parent / "kidata"

# What each real file needs that it does not say (--set), per file.
LOADS = [
    ("flashinfer/sample_testlist_output.csv", {}),  # GPU from the .txt beside it
    ("kernelbench/H100_Modal__baseline_time_torch.json", {}),
    ("kernelbench/H100_Modal__baseline_time_torch_compile_inductor_default.json", {}),
    ("kernelbench/B200_together__baseline_time_torch.json", {}),
    ("nvbench/nvbench_test_ref.json", {}),
    ("nvbench/array_add_BenchResults3080.csv", {"implementation": "array_add"}),
    ("triton-perf-report/JongseoKang_group-gemm-performance-w-CTA.csv",
     {"gpu": "H100 SXM", "unit": "ms"}),
    ("triton-perf-report/JongseoKang_matmul-performance-fp16.csv",
     {"gpu": "H100 SXM", "unit": "TFLOPS"}),
    ("triton-perf-report/Jokeren_small-k_matmul-performance.csv",
     {"gpu": "A100 SXM4 80GB", "unit": "TFLOPS"}),
    ("pytorch-v3/json-each-row.json", {"gpu": "H100 SXM"}),
    ("pytorch-v3/do_not_overwrite_runners_info.json", {}),
    ("pytorch-dynamo/expected_ci_perf_inductor_torchbench.csv", {"gpu": "A100 SXM4 40GB"}),
    ("google-benchmark/gbench_test1_run1.json", {"gpu": "H100 SXM"}),
    ("google-benchmark/gbench_test3_run0.json", {"gpu": "H100 SXM"}),
    ("github-action-benchmark/blade_data.js.033c5dd.js", {"gpu": "RTX 3090"}),
]


@pytest.fixture(scope="module")
def loaded(tmp_path_factory) -> tuple[Warehouse, dict]:
    if not EXT.is_dir():
        pytest.skip(f"needs {EXT}")
    wh = Warehouse(tmp_path_factory.mktemp("field") / "wh")
    reports = {}
    for name, settings in LOADS:
        reports[name] = wh.load([str(EXT / name)], settings=settings)
    return wh, reports


def _one(wh: Warehouse, query: str, params: list | None = None):
    return wh.connect().execute(query, params or []).fetchall()


def _runs(wh: Warehouse, source: str) -> int:
    return _one(wh, "select count(*) from runs where source = ?", [source])[0][0]


def _value(wh: Warehouse, run_id: str, statistic: str, metric: str = "latency") -> float:
    rows = _one(wh, "select value from measurements where run_id = ? and statistic = ? "
                    "and metric = ?", [run_id, statistic, metric])
    assert len(rows) == 1, (run_id, statistic, rows)
    return rows[0][0]


def _run(wh: Warehouse, where: str, params: list) -> str:
    rows = _one(wh, f"select run_id from runs where {where}", params)
    assert len(rows) == 1, rows
    return rows[0][0]


@pytest.mark.shared
def test_detection_from_content():
    expected = {
        "flashinfer/sample_testlist_output.csv": "flashinfer-csv",
        "nvbench/nvbench_test_ref.json": "nvbench-json",
        "nvbench/histogram_BenchResults2060.csv": "nvbench-csv",
        "kernelbench/B200_together__baseline_time_torch.json": "kernelbench-json",
        "triton-perf-report/JongseoKang_layer-norm-backward.csv": "triton-perf-report",
        "pytorch-v3/json-each-row.json": "pytorch-v3",
        "pytorch-v3/do_not_overwrite_runners_info.json": "pytorch-v3",
        "pytorch-dynamo/expected_ci_perf_inductor_torchbench.csv": "dynamo-csv",
        "google-benchmark/gbench_test3_run0.json": "google-benchmark-json",
        "github-action-benchmark/blade_data.js.033c5dd.js": "github-action-benchmark",
    }
    for name, fmt in expected.items():
        assert detect((EXT / name).read_bytes()[:65536]) == fmt, name


@pytest.mark.shared
def test_flashinfer(loaded):
    wh, reports = loaded
    report = reports["flashinfer/sample_testlist_output.csv"]
    # `grep -c '' sample_testlist_output.csv` = 112 lines: a header and 111 rows, all loaded.
    assert (report.records, report.rejected) == (111, 0)
    assert _runs(wh, "flashinfer") == 111
    # The GPU comes from the stdout beside the CSV: `gpu_name = 'NVIDIA_B200'`.
    assert _one(wh, "select distinct gpu, gpu_name from runs where source = 'flashinfer'") \
        == [("b200", "NVIDIA_B200")]  # the source's spelling is kept
    # Version from the same stdout: "[INFO] FlashInfer version: 0.6.2".
    assert _one(wh, "select distinct version from runs where source='flashinfer'") == [("0.6.2",)]
    # Rows 1 and 3: BatchPrefillWithPagedKVCacheWrapper, case Llama-3.1-70B, fa2 median
    # 0.011616 ms and trtllm-gen 0.010416 ms -> 11616 ns and 10416 ns; fa2 std_time
    # 0.007307573782194897 ms -> 7307.573782 ns; tflops 14.963658402203857.
    key = "kernel = 'BatchPrefillWithPagedKVCacheWrapper' and workload like '%llama-3-1-70b' " \
          "and implementation = ?"
    fa2 = _run(wh, key, ["fa2"])
    trt = _run(wh, key, ["trtllm-gen"])
    assert _value(wh, fa2, "median") == 11616
    assert _value(wh, trt, "median") == 10416
    assert _value(wh, fa2, "stddev") == pytest.approx(7307.573782)
    assert _value(wh, fa2, "median", "throughput") == pytest.approx(14.963658)
    # tb_per_sec 0.32687603305785123 TB/s -> 326.876 GB/s.
    assert _value(wh, fa2, "median", "bandwidth") == pytest.approx(326.876, abs=1e-3)
    # tflops 0 means "not computed": row 111 (rope_quantize_fp8_append_paged_kv_cache, HND)
    # has no throughput row at all.
    last = _run(wh, "kernel = 'rope_quantize_fp8_append_paged_kv_cache' and "
                    "workload like '%hnd%'", [])
    assert not _one(wh, "select 1 from measurements where run_id = ? and metric = "
                        "'throughput'", [last])
    # The speedup the file shows: trtllm-gen over fa2 on that case, 0.011616 / 0.010416.
    speedup = _one(wh, "select speedup from speedups where candidate = 'trtllm-gen' and "
                       "baseline = 'fa2' and kernel = 'BatchPrefillWithPagedKVCacheWrapper' "
                       "and workload like '%llama-3-1-70b'")
    assert speedup[0][0] == pytest.approx(0.011616 / 0.010416)
    # One dtype spelling: row 1 writes torch.bfloat16, the rope rows write bfloat16.
    spellings = _one(wh, "select distinct text from workload_parameters where name in "
                         "('q_dtype', 'input_dtype') and text like '%bf%'")
    assert spellings == [("bf16",)]


@pytest.mark.shared
def test_kernelbench(loaded):
    wh, reports = loaded
    # python -c "json.load(...)": level1 100, level2 100, level3 50 problems per file.
    for name in ("kernelbench/H100_Modal__baseline_time_torch.json",
                 "kernelbench/H100_Modal__baseline_time_torch_compile_inductor_default.json",
                 "kernelbench/B200_together__baseline_time_torch.json"):
        assert (reports[name].records, reports[name].rejected) == (250, 0)
    assert _runs(wh, "kernelbench") == 750
    # level1 1_Square_matrix_multiplication_.py on the H100: eager mean 2.66 ms, std 0.0199,
    # min 2.65, max 2.86, 100 trials; inductor (compile file) mean 2.67 ms.
    key = "kernel = 'level1_1_Square_matrix_multiplication_' and gpu = 'h100-sxm5-80gb' " \
          "and implementation = ?"
    eager, inductor = _run(wh, key, ["eager"]), _run(wh, key, ["inductor"])
    assert _value(wh, eager, "mean") == 2_660_000
    assert _value(wh, eager, "stddev") == 19_900
    assert (_value(wh, eager, "min"), _value(wh, eager, "max")) == (2_650_000, 2_860_000)
    assert _value(wh, eager, "samples") == 100
    assert _value(wh, inductor, "mean") == 2_670_000
    # No median: the mean is primary, in the run and its protocol; 3 significant digits
    # -> a 0.01 ms = 10,000 ns rounding step on 2.66.
    assert _one(wh, "select p.primary_statistic, r.variant from runs r join protocols p "
                    "using (protocol_id) where run_id = ?", [inductor]) == [("mean", "default")]
    assert _one(wh, "select resolution from measurements where run_id = ? and statistic = "
                    "'mean'", [eager]) == [(10_000.0,)]
    # The speedup the files show, eager vs inductor on the same problem and GPU: 2.66 / 2.67.
    # (The views read medians; a mean-primary pair is compared here on its means.)
    ratio = _one(wh, """
        select e.value / i.value from measurements e, measurements i
        where e.run_id = ? and i.run_id = ? and e.statistic = 'mean' and i.statistic = 'mean'
    """, [eager, inductor])[0][0]
    assert ratio == pytest.approx(2.66 / 2.67)
    # The B200 file names its GPU "NVIDIA B200".
    assert _one(wh, "select distinct gpu from runs where source = 'kernelbench' and "
                    "gpu_name = 'NVIDIA B200'") == [("b200",)]


LAST_3080 = ("axis-size8192", 0.002128075978096496, 0.0011515715393526798)


@pytest.mark.shared
def test_nvbench(loaded):
    wh, reports = loaded
    report = reports["nvbench/nvbench_test_ref.json"]
    # states: simple 2, single_float64_axis 22, copy_sweep_grid_shape 18, copy_type_sweep 12,
    # copy_type_conversion_sweep 72 = 126; `grep -c '"is_skipped": true'` = 38 skipped.
    assert (report.records, report.rejected) == (126, 38)
    # `grep -o '"skip_reason": "[^"]*"' | sort | uniq -c`: 26 narrowing, 12 not a conversion.
    reasons = _one(wh, "select reason, count(*) from rejects where source_file like "
                       "'%nvbench_test_ref.json' group by all order by all")
    assert reasons == [
        ("skipped by nvbench: Narrowing conversion: sizeof(InputType) > sizeof(OutputType). "
         "(nothing was measured)", 26),
        ("skipped by nvbench: Not a conversion: InputType == OutputType. "
         "(nothing was measured)", 12)]
    # benchmarks[1].states[0] (single_float64_axis, Device=0 Duration=0, Quadro GV100):
    # nv/cold/time/gpu/mean "3.9224058844425625e-06" s -> 3922.405884 ns; relative stdev
    # "0.14064817853323436" -> 551.68 ns; nv/cold/sample_size "127488".
    run = _run(wh, "kernel = 'single_float64_axis' and gpu = 'quadro-gv100' and "
                   "workload = 'duration0'", [])
    assert _value(wh, run, "mean") == pytest.approx(3922.405884)
    assert _value(wh, run, "stddev") == pytest.approx(3922.4058844 * 0.14064817853, rel=1e-6)
    assert _value(wh, run, "samples") == 127488
    # implementation: the executable, meta.argv[0] = bin/nvbench.example.axes
    assert _one(wh, "select implementation from runs where run_id = ?", [run]) \
        == [("nvbench.example.axes",)]
    # CSV: `wc -l` = 27 lines, 26 rows; row 1: RTX 3080, Axis Size 2, GPU Time
    # 3.303134385350993e-06 s -> 3303.134385 ns, first Samples column 151372.
    csv_report = reports["nvbench/array_add_BenchResults3080.csv"]
    assert (csv_report.records, csv_report.rejected) == (26, 0)
    row1 = _run(wh, "implementation = 'array_add' and gpu = 'rtx-3080' and workload = "
                    "'axis-size2' and kernel = 'Not Coalesced (Different Array Sizes)'", [])
    assert _value(wh, row1, "mean") == pytest.approx(3303.134385)
    assert _value(wh, row1, "samples") == 151372
    # What the file shows: not coalesced vs coalesced access at the largest size (file lines
    # 14 and 27, `sed -n '14p;27p'`: Axis Size 8192, GPU Time 0.002128075978096496 s and
    # 0.0011515715393526798 s): the same array add as two benchmarks, compared on their means
    # (nvbench's cold mean is primary), 1.85x.
    slow, fast = (_run(wh, "gpu = 'rtx-3080' and kernel = ? and workload = ?", [k, w])
                  for k, w in (("Not Coalesced (Different Array Sizes)", LAST_3080[0]),
                               ("Coalesced (Different Array Sizes)", LAST_3080[0])))
    assert _value(wh, slow, "mean") / _value(wh, fast, "mean") == pytest.approx(
        LAST_3080[1] / LAST_3080[2], rel=1e-6)


@pytest.mark.shared
def test_nvbench_csv_needs_an_implementation(tmp_path):
    items = list(read_file(str(EXT / "nvbench/histogram_BenchResults2060.csv")))
    # `wc -l` = 65: 64 rows, each rejected naming the option that supplies it.
    assert len(items) == 64 and all(isinstance(i, RecordError) for i in items)
    assert str(items[0]).endswith("row 1, field implementation: the file does not say the "
                                  "implementation; supply it with --set implementation=...")


@pytest.mark.shared
def test_triton_perf_report(loaded):
    wh, reports = loaded
    # group-gemm: 4 rows x 2 providers; matmul-fp16: `wc -l` 32 -> 31 rows x 2.
    assert reports["triton-perf-report/JongseoKang_group-gemm-performance-w-CTA.csv"].records == 8
    assert reports["triton-perf-report/JongseoKang_matmul-performance-fp16.csv"].records == 62
    # Row 1 of group-gemm: N=128, cuBLAS 0.013312 ms, Triton 0.007168 ms.
    key = "source = 'triton-perf-report' and kernel = 'JongseoKang_group-gemm-performance-w-CTA'" \
          " and workload = 'n128' and implementation = ?"
    cublas, triton = _run(wh, key, ["cuBLAS"]), _run(wh, key, ["Triton"])
    assert (_value(wh, cublas, "median"), _value(wh, triton, "median")) == (13312, 7168)
    speedup = _one(wh, "select speedup from speedups where candidate = 'Triton' and baseline "
                       "= 'cuBLAS' and workload = 'n128'")
    assert speedup[0][0] == pytest.approx(0.013312 / 0.007168)
    # TFLOPS files are throughput runs, never latencies: matmul-fp16 row 1 (M=N=K=256) cuBLAS
    # 5.461333 TFLOP/s.
    run = _run(wh, "kernel = 'JongseoKang_matmul-performance-fp16' and workload = "
                   "'m256-n256-k256' and implementation = 'cuBLAS'", [])
    assert _one(wh, "select metric from runs where run_id = ?", [run]) == [("throughput",)]
    assert _value(wh, run, "median", "throughput") == pytest.approx(5.461333)
    # Jokeren: 3 rows of M=N=K=4096 (cuBLAS 17.1, 16.8, 15.8): 3 runs per provider, not one.
    jok = _one(wh, "select count(*) from runs where kernel = 'Jokeren_small-k_matmul-"
                   "performance' and implementation = 'cuBLAS'")
    assert jok == [(3,)]


@pytest.mark.shared
def test_pytorch_v3(loaded):
    wh, reports = loaded
    # json-each-row.json: 2 JSON Lines objects, then a line holding a 1-element array.
    assert (reports["pytorch-v3/json-each-row.json"].records,
            reports["pytorch-v3/json-each-row.json"].rejected) == (3, 0)
    # add_loop_eager: compile_time_instruction_count [3086359081]: a count, never a latency.
    run = _run(wh, "source = 'pytorch-v3' and kernel = 'add_loop_eager'", [])
    assert _one(wh, "select metric from runs where run_id = ?", [run]) == [("instructions",)]
    assert _value(wh, run, "median", "instructions") == 3086359081
    # iPhone memory: peak_inference_mem_usage(mb) [333.2014794921875], runner Apple iPhone 15.
    mem = _run(wh, "source = 'pytorch-v3' and kernel = 'edsr'", [])
    assert _value(wh, mem, "median", "memory") == pytest.approx(333.2014794921875)
    assert _one(wh, "select gpu_name, pass from runs where run_id = ?", [mem]) \
        == [("Apple iPhone 15", "forward")]
    # eager vs inductor: the v3 files hold different models (add_loop_eager on cpu,
    # add_loop_inductor_dynamic_gpu on cuda), so the source shows no speedup to check.


@pytest.mark.shared
def test_dynamo(loaded):
    wh, reports = loaded
    report = reports["pytorch-dynamo/expected_ci_perf_inductor_torchbench.csv"]
    # `wc -l` = 36: 35 models.
    assert (report.records, report.rejected) == (35, 0)
    # Row 1: cuda,BERT_pytorch,16,2.6028,22.2879 -> inductor latency 22.2879 ms, published
    # speedup over eager 2.6028 (the eager latency is not in the file: no eager run).
    run = _run(wh, "source = 'pytorch-dynamo' and kernel = 'BERT_pytorch'", [])
    assert _one(wh, "select implementation, workload from runs where run_id = ?", [run]) \
        == [("inductor", "batch-size16")]
    assert _value(wh, run, "median") == 22_287_900
    assert _one(wh, "select quantity, value from published where run_id = ?", [run]) \
        == [("speedup", 2.6028)]
    assert _one(wh, "select count(*) from runs where source = 'pytorch-dynamo' and "
                    "implementation <> 'inductor'") == [(0,)]


@pytest.mark.shared
def test_google_benchmark_and_data_js(loaded):
    wh, reports = loaded
    # test1_run1: 16 rows; MyComplexityTest_BigO and _RMS share run_name MyComplexityTest
    # (a complexity fit, no time): 1 reject; 14 other names: 14 runs.
    report = reports["google-benchmark/gbench_test1_run1.json"]
    assert (report.records, report.rejected) == (15, 1)
    # BM_NotBadTimeUnit: real_time 0.4 with time_unit "s" -> 400,000,000 ns (one row: a mean).
    run = _run(wh, "kernel = 'BM_NotBadTimeUnit'", [])
    assert _value(wh, run, "mean") == 400_000_000
    # test3_run0: BM_Two has two repetitions, real_time 9 and 8 ns -> median 8.5, 2 samples;
    # BM_One and short are aggregate rows without an aggregate_name: rejected.
    report3 = reports["google-benchmark/gbench_test3_run0.json"]
    assert (report3.records, report3.rejected) == (4, 2)
    two = _run(wh, "kernel = 'BM_Two'", [])
    assert (_value(wh, two, "median"), _value(wh, two, "samples")) == (8.5, 2)
    # data.js: 2 commits x 34 benches = 68 runs; the first bench of the first commit
    # (82fa0599..., date 1703108742447 ms = 2023-12-20 21:45:42.447 UTC; both commits carry the
    # same commit timestamp 2023-12-10T14:45:40Z): OpsComplexKernelBenchmark<F16,
    # ArithmeticOp::NOOP>/1048576/manual_time = 5955.562298798582 ns/iter.
    assert _runs(wh, "github-action-benchmark") == 68
    first = _run(wh, "source = 'github-action-benchmark' and implementation = "
                     "'OpsComplexKernelBenchmark' and kernel = 'noop' and workload = "
                     "'dtype-fp16-arithmeticop-noop-arg01048576' and observed_at = "
                     "timestamp '2023-12-20 21:45:42.447'", [])
    assert _value(wh, first, "mean") == pytest.approx(5955.562299)
    assert _one(wh, "select version from runs where run_id = ?", [first]) == [("82fa0599bce1",)]
    # A series over commits: the same benchmark at both commits, as two runs.
    assert _one(wh, "select count(distinct observed_at) from runs where source = "
                    "'github-action-benchmark'") == [(2,)]
    # What the store shows: that benchmark from commit 82fa0599 to b7520474, 5955.562298798582
    # -> 5982.407122758742 ns/iter (the second entry's first bench).
    later = _run(wh, "source = 'github-action-benchmark' and kernel = 'noop' and workload = "
                     "'dtype-fp16-arithmeticop-noop-arg01048576' and version = "
                     "'b7520474578b'", [])
    assert _value(wh, later, "mean") / _value(wh, first, "mean") == pytest.approx(
        5982.407122758742 / 5955.562298798582)


@pytest.mark.shared
def test_reloading_adds_nothing(loaded):
    wh, _ = loaded
    before = _one(wh, "select count(*) from runs")[0][0]
    for name, settings in LOADS[:3] + LOADS[6:8]:
        report = wh.load([str(EXT / name)], settings=settings)
        assert report.added.get("runs", 0) == 0, name
    assert _one(wh, "select count(*) from runs")[0][0] == before
    # Every format's runs pass the warehouse check (mean-primary runs included).
    report = wh.check()
    assert report.ok, report.problems


@pytest.mark.slow
@pytest.mark.shared
def test_convert_round_trip_through_the_console_script(loaded, tmp_path):
    wh, _ = loaded
    out = tmp_path / "bundles"
    files = [str(EXT / n) for n in ("flashinfer/sample_testlist_output.csv",
                                    "kernelbench/H100_Modal__baseline_time_torch.json",
                                    "nvbench/nvbench_test_ref.json")]
    done = subprocess.run([str(KIDATA), "convert", *files, "-o", str(out)],
                          capture_output=True, text=True)
    # nvbench's 38 skipped states are the only rejects: exit 1, everything else written.
    assert done.returncode == 1, done.stderr
    assert f"{111 + 250 + 88:,} bundles written" in done.stdout
    again = Warehouse(tmp_path / "again")
    again.load([str(out)])
    ids = [r[0] for r in _one(again, "select run_id from runs")]
    assert len(ids) == 111 + 250 + 88
    query = ("select r.run_id, kernel, implementation, workload, gpu, observed_at, m.metric, "
             "statistic, unit, value, resolution from runs r join measurements m using (run_id) "
             "where list_contains(?, r.run_id) order by all")
    assert _one(again, query, [ids]) == _one(wh, query, [ids])


@pytest.mark.slow
@pytest.mark.shared
def test_set_option_and_formats_command(tmp_path):
    wh = tmp_path / "wh"
    csv = str(EXT / "triton-perf-report/JongseoKang_group-gemm-performance-w-CTA.csv")
    missing = subprocess.run([str(KIDATA), "-w", str(wh), "load", csv], capture_output=True,
                             text=True)
    assert missing.returncode == 1
    assert "field gpu: the file does not say the gpu; supply it with --set gpu=..." \
        in missing.stderr
    done = subprocess.run([str(KIDATA), "-w", str(wh), "load", csv, "--set", "gpu=H100 SXM",
                           "--set", "unit=ms"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "8 runs added" in done.stdout
    bad = subprocess.run([str(KIDATA), "-w", str(wh), "load", csv, "--set", "colour=red"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "--set: unknown key 'colour'" in bad.stderr
    # A misspelled GPU is refused with the closest names; nothing more is loaded.
    typo = subprocess.run([str(KIDATA), "-w", str(wh), "load", csv, "--set", "gpu=H100 SXN",
                           "--set", "unit=ms"], capture_output=True, text=True)
    assert typo.returncode == 2
    assert "--set gpu: unknown GPU 'H100 SXN'; did you mean 'h100-sxm5-80gb'" in typo.stderr
    assert Warehouse(wh).sql("select count(*) from runs").fetchall() == [(8,)]
    out = tmp_path / "bundles"
    converted = subprocess.run([str(KIDATA), "convert", csv, "-o", str(out), "--set",
                                "gpu=H100 SXM", "--set", "unit=ms"], capture_output=True,
                               text=True)
    assert converted.returncode == 0, converted.stderr
    assert "8 bundles written" in converted.stdout and len(list(out.iterdir())) == 8
    listing = subprocess.run([str(KIDATA), "formats"], capture_output=True, text=True)
    assert listing.returncode == 0
    assert "triton-perf-report: triton.testing.perf_report save_path CSV" in listing.stdout
    assert "  lacks: unit and GPU (--set unit= --set gpu=, required)" in listing.stdout


# -- small fixtures of our own ------------------------------------------------------------


def test_kernelbench_failure_is_a_reject_and_zero_std_loads():
    items = list(read_file(str(FIELD / "H100_test__baseline_time_torch.json")))
    ok, failed, untimed = items
    assert str(failed).endswith("level1.2_failed.py, field mean: -1 means the problem failed "
                                "(KernelBench writes -1.0 when it could not time it): not a "
                                "latency")
    # A null entry (a problem KernelBench could not time) says so; it said "expected an
    # object".
    assert str(untimed).endswith("level1.3_untimed.py: null: KernelBench wrote no timing for "
                                 "this problem (it did not compile, run or pass its check): "
                                 "not a latency")
    measurements = {m["statistic"]: m["value"] for m in ok.docs["run"]["spec"]["measurements"]}
    # mean 1.25 ms, std 0.0 (a zero spread is a value), 10 trials.
    assert measurements == {"mean": 1_250_000, "stddev": 0, "min": 1_200_000,
                            "max": 1_500_000, "samples": 10}


def test_flashinfer_repeated_header_and_failures():
    items = list(read_file(str(FIELD / "flashinfer_edge.csv"), settings={"gpu": "B200"}))
    first, conflict, nan = items
    assert first.docs["workload"]["spec"]["parameters"] == {"num_tokens": 128,
                                                            "q_dtype": "bf16"}
    assert str(conflict).endswith("row 2, field num_tokens: the header repeats 'num_tokens' "
                                  "and this row gives it two values ('128' and '256')")
    assert "row 3, field median" in str(nan) and "nan" in str(nan)


def test_pytorch_v3_raw_samples_failures_and_unknown_metrics():
    items = list(read_file(str(FIELD / "v3_edge.json")))
    ok, zero, unknown = items
    measurements = {m["statistic"]: m["value"] for m in ok.docs["run"]["spec"]["measurements"]}
    # benchmark_values [2.0, 4.0, 3.0] ms: median 3, mean 3, min 2, max 4, sample stddev 1.
    assert measurements == {"median": 3_000_000, "mean": 3_000_000, "min": 2_000_000,
                            "max": 4_000_000, "stddev": 1_000_000, "samples": 3}
    assert ok.docs["run"]["spec"]["sourceNative"]["samples"] == [2.0, 4.0, 3.0]
    assert "line 2[0], field metric.benchmark_values[0]: 0.0 is not a measurement" in str(zero)
    assert "cannot tell the unit of metric 'accuracy'" in str(unknown)


def test_triton_nan_is_rejected_and_the_other_provider_loads():
    items = list(read_file(str(FIELD / "triton_edge.csv"),
                           settings={"gpu": "H100 SXM", "unit": "ms"}))
    ok, bad = items
    assert ok.docs["run"]["spec"]["timing"]["latencyNs"]["median"] == 500_000
    assert "row 1, column Triton, field median: expected a finite number" in str(bad)


def test_dtype_spellings():
    assert {normalise_dtype(t) for t in ("torch.bfloat16", "bfloat16", "bf16", "BF16")} \
        == {"bf16"}
    assert normalise_dtype("torch.float8_e4m3fn") == normalise_dtype("fp8_e4m3") == "fp8_e4m3"
    assert normalise_dtype("F32") == "fp32" and normalise_dtype("mxfp4") == "mxfp4"


def test_settings_are_checked():
    assert Settings.parse(["gpu=B200", "unit=ms"]) == {"gpu": "B200", "unit": "ms"}
    for bad, message in ((["gpu"], "--set expects key=value"),
                         (["unit=furlongs"], "--set unit: unknown unit 'furlongs'"),
                         (["observed_at=yesterday"], "--set observed_at: expected an ISO"),
                         # Typed once, they label a whole file: a typo is refused (issue 27,
                         # item 12), never stored.
                         (["statistic=p99"], "--set statistic: unknown statistic 'p99'; "
                                             "expected one of median, p20, p80"),
                         (["pass=sideways"], "--set pass: unknown pass 'sideways'; expected "
                                             "one of forward, backward, full, no-grad-forward, "
                                             "step")):
        with pytest.raises(UsageError, match=message):
            Settings.parse(bad)
    assert Settings.parse(["statistic=mean", "pass=backward"]) == {
        "statistic": "mean", "pass": "backward"}


@pytest.mark.slow
def test_a_mistyped_setting_is_bad_usage_and_loads_nothing(tmp_path):
    csv_file = FIELD / "team_results.csv"
    for setting in ("statistic=p99", "pass=sideways"):
        done = subprocess.run([str(KIDATA), "-w", str(tmp_path / "wh"), "load", "--mapping",
                               str(FIELD / "team_mapping.toml"), str(csv_file), "--set",
                               setting], capture_output=True, text=True)
        assert done.returncode == 2, done.stderr
        assert f"--set {setting.split('=')[0]}: unknown" in done.stderr
    assert not (tmp_path / "wh" / "runs").exists() or not any((tmp_path / "wh" / "runs").iterdir())


# -- declarative mappings ----------------------------------------------------------------------


@pytest.mark.slow
def test_a_team_csv_loads_by_a_mapping_through_the_console_script(tmp_path):
    wh = tmp_path / "wh"
    args = [str(KIDATA), "-w", str(wh), "load", "--mapping",
            str(FIELD / "team_mapping.toml"), str(FIELD / "team_results.csv")]
    done = subprocess.run(args, capture_output=True, text=True)
    # Row 3 writes -1 (a crash): rejected with the mapping's message; rows 1-2 load.
    assert done.returncode == 1
    assert "team_results.csv, row 3, field p50_us: '-1': our script writes -1 when a case " \
           "crashed" in done.stderr
    assert "2 runs added" in done.stdout
    again = subprocess.run(args, capture_output=True, text=True)
    assert "0 runs added" in again.stdout  # identity is stable: re-loading adds nothing
    w = Warehouse(wh)
    # Row 1: ours, p50 12.5 µs -> 12500 ns, p20 12.1 -> 12100, 200 samples, at 2025-01-31
    # 12:00 UTC; the two rows spell bf16 two ways and share one workload.
    rows = _one(w, "select implementation, workload, gpu, observed_at::varchar from runs "
                   "order by implementation")
    assert rows == [("ours", "tokens4096-hidden8192-precision-bf16", "h100-sxm5-80gb",
                     "2025-01-31 12:00:00+00"),
                    ("torch", "tokens4096-hidden8192-precision-bf16", "h100-sxm5-80gb",
                     "2025-01-31 12:00:00+00")]
    ours = _run(w, "implementation = 'ours'", [])
    assert (_value(w, ours, "median"), _value(w, ours, "p20"), _value(w, ours, "samples")) \
        == (12500, 12100, 200)
    # The speedup the file shows: torch 25.0 µs / ours 12.5 µs = 2.
    assert _one(w, "select speedup from speedups where candidate = 'ours'") == [(2.0,)]


def test_a_json_mapping_and_mean_primary_runs():
    items = list(read_file(str(FIELD / "team_results.json"),
                           mapping=str(FIELD / "team_json_mapping.toml"),
                           settings={"gpu": "H100 SXM"}))
    assert [i.docs["workload"]["spec"]["parameters"] for i in items] \
        == [{"rows": 1024, "dtype": "fp16"}] * 2  # float16 and fp16: one spelling
    first = items[0].docs
    # mean 0.05 ms -> 50000 ns, std 0.001 ms -> 1000 ns; no median: the mean is primary.
    assert {m["statistic"]: m["value"] for m in first["run"]["spec"]["measurements"]} \
        == {"mean": 50000, "stddev": 1000}
    assert first["protocol"]["spec"]["measurement"]["primaryStatistic"] == "mean"


@pytest.mark.slow
def test_bad_mappings_are_usage_errors(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[harness]\nsource = "x"\nname = "y"\n[statistics]\nmedain = "{a}"\n')
    done = subprocess.run([str(KIDATA), "-w", str(tmp_path / "wh"), "load", "--mapping",
                           str(bad), str(FIELD / "team_results.csv")],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert f"mapping {bad}, key statistics.medain: unknown key; expected one of median" \
        in done.stderr
    bad.write_text("[harness]\nsource = 'x'\n")
    with pytest.raises(UsageError, match="key harness.name: required"):
        list(read_file(str(FIELD / "team_results.csv"), mapping=str(bad)))


@pytest.mark.shared
def test_a_smaller_column_set_gives_the_same_run(tmp_path):
    """FlashInfer's column set grows between versions: an older file without the columns a
    row leaves empty names the same run (workload parameters come from non-empty cells)."""
    import csv

    source = EXT / "flashinfer/sample_testlist_output.csv"
    header, row1 = list(csv.reader(source.read_text().splitlines()))[:2]
    kept = [i for i, v in enumerate(row1) if v]
    older = tmp_path / "older.csv"
    older.write_text(",".join(header[i] for i in kept) + "\n"
                     + ",".join(row1[i] for i in kept) + "\n")
    (tmp_path / "older.txt").write_text((EXT / "flashinfer/sample_testlist_output.txt")
                                        .read_text())
    full = list(read_file(str(source)))[0]
    small = list(read_file(str(older)))[0]
    assert small.docs["run"]["metadata"]["name"] == full.docs["run"]["metadata"]["name"]
    assert small.docs["run"]["spec"]["measurements"] == full.docs["run"]["spec"]["measurements"]


@pytest.mark.shared
def test_other_settings_read_the_file_again(tmp_path):
    wh = Warehouse(tmp_path / "wh")
    csv = str(EXT / "triton-perf-report/JongseoKang_group-gemm-performance-w-CTA.csv")
    first = wh.load([csv], settings={"gpu": "H100 SXM", "unit": "ms"})
    again = wh.load([csv], settings={"gpu": "H100 SXM", "unit": "ms"})
    other = wh.load([csv], settings={"gpu": "A100 SXM4 80GB", "unit": "ms"})
    # 4 rows x 2 providers; the same settings add nothing, another GPU is another 8 runs.
    assert [r.added.get("runs", 0) for r in (first, again, other)] == [8, 0, 8]


def test_newer_nvbench_has_a_median_and_quartiles():
    (item,) = read_file(str(FIELD / "nvbench_new.json"))
    spec = item.docs["run"]["spec"]
    # median 2.0e-06 s -> 2000 ns (primary), q1/q3 -> p25/p75 1900/2200, min 1500, max 9000,
    # stdev/absolute 3.0e-07 s -> 300 ns, mean 2100, 500 samples.
    assert {m["statistic"]: m["value"] for m in spec["measurements"]} == {
        "mean": 2100, "median": 2000, "p25": 1900, "p75": 2200, "min": 1500, "max": 9000,
        "stddev": 300, "samples": 500}
    assert spec["timing"] == {"primaryStatistic": "median", "latencyNs": {"median": 2000}}
    # Axis T=F32 is a dtype in one spelling; the implementation is the executable.
    assert item.docs["workload"]["spec"]["parameters"] == {"T": "fp32", "Elements": 1024}
    assert item.docs["run"]["metadata"]["labels"]["implementation"] == "my_reduce"


def test_google_benchmark_aggregates_win_over_repetitions():
    (item,) = read_file(str(FIELD / "gbench_aggregates.json"), settings={"gpu": "H100 SXM"})
    spec = item.docs["run"]["spec"]
    # Aggregates mean 11, median 11, stddev 1 (us) -> ns, over the 3 repetitions; cv is not
    # a time (sourceNative).
    assert {m["statistic"]: m["value"] for m in spec["measurements"]} == {
        "mean": 11000, "median": 11000, "stddev": 1000, "samples": 3}
    assert spec["sourceNative"]["repetitions"] == [10.0, 12.0, 11.0]
    assert spec["observedAt"] == "2025-02-01T10:00:00.000Z"
    assert item.docs["workload"]["spec"]["parameters"] == {"dtype": "fp32", "arg0": 4096}


def test_huge_numbers_are_text_or_rejects_never_a_crash_or_a_hang():
    items = list(read_file(str(FIELD / "triton_huge.csv"),
                           settings={"gpu": "H100 SXM", "unit": "ms"}))
    ok, bad = items
    # A 26-digit x value is beyond 64-bit integers: kept as text, and the run still flattens.
    assert ok.docs["workload"]["spec"]["parameters"] == {"N": "99999999999999999999999999"}
    from kidata.ingest.flatten import Flattener

    assert Flattener().flatten(ok).runs[0]["implementation"] == "cuBLAS"
    assert str(bad).endswith("field median: expected a number between 1e-30 and 1e30, got "
                             "'1e999999999'")
