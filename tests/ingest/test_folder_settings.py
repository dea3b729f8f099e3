"""A folder's ``kidata.toml`` (issue 28, item 6): a folder of mixed sources loads in one
command, each file read with its own ``--format``, ``--set`` and ``--mapping``, and gives the
same warehouse as one load per kind of file with those options on the command line."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from kidata import Warehouse
from kidata.errors import UsageError

DATA = Path(__file__).parents[1] / "data"
TRITON = DATA / "field" / "triton_edge.csv"
EXTERNAL = Path(__file__).parents[3] / "shared" / "data" / "external"

# The settings of the field's files as one load per kind needs them (tests/ingest/
# test_field_formats.py's LOADS), said once per glob; sidecars and notes are not inputs.
MIXED = """\
[[files]]
glob = "external/SOURCES.md"
skip = true

[[files]]
glob = "external/flashinfer/*.txt"   # FlashInfer's stdout, read beside its CSV
skip = true

[[files]]
glob = "external/nvbench/array_add_*.csv"
set = { implementation = "array_add" }

[[files]]
glob = "external/nvbench/histogram_*.csv"
set = { implementation = "histogram" }

[[files]]
glob = "external/triton-perf-report/JongseoKang_group-gemm-performance-w-CTA.csv"
set = { gpu = "H100 SXM", unit = "ms" }

[[files]]
glob = "external/triton-perf-report/JongseoKang_layer-norm-backward.csv"
set = { gpu = "H100 SXM", unit = "GB/s" }

[[files]]
glob = "external/triton-perf-report/*matmul-performance*.csv"
set = { gpu = "H100 SXM", unit = "TFLOPS" }

[[files]]
glob = "external/pytorch-dynamo/*.csv"
set = { gpu = "A100 SXM4 40GB" }

[[files]]
glob = "external/**/*.json"
set = { gpu = "H100 SXM" }

[[files]]
glob = "external/github-action-benchmark/*"
set = { gpu = "RTX 3090" }
"""

# The same, as one load per group of files (relative to the folder) with --set values.
GROUPS = [
    (["external/nvbench/array_add_BenchResults1650.csv",
      "external/nvbench/array_add_BenchResults3080.csv"], {"implementation": "array_add"}),
    (["external/nvbench/histogram_BenchResults2060.csv"], {"implementation": "histogram"}),
    (["external/triton-perf-report/JongseoKang_group-gemm-performance-w-CTA.csv"],
     {"gpu": "H100 SXM", "unit": "ms"}),
    (["external/triton-perf-report/JongseoKang_layer-norm-backward.csv"],
     {"gpu": "H100 SXM", "unit": "GB/s"}),
    (["external/triton-perf-report/JongseoKang_matmul-performance-fp16.csv",
      "external/triton-perf-report/Jokeren_small-k_matmul-performance.csv"],
     {"gpu": "H100 SXM", "unit": "TFLOPS"}),
    (["external/pytorch-dynamo/expected_ci_perf_inductor_torchbench.csv"],
     {"gpu": "A100 SXM4 40GB"}),
    ([f"external/{name}" for name in (
        "google-benchmark/gbench_test1_run1.json", "google-benchmark/gbench_test3_run0.json",
        "kernelbench/B200_together__baseline_time_torch.json",
        "kernelbench/H100_Modal__baseline_time_torch.json",
        "kernelbench/H100_Modal__baseline_time_torch_compile_inductor_default.json",
        "nvbench/nvbench_test_ref.json", "pytorch-v3/add_loop_eager.json",
        "pytorch-v3/add_loop_inductor_dynamic_gpu.json",
        "pytorch-v3/do_not_overwrite_runners_info.json", "pytorch-v3/json-each-row.json")],
     {"gpu": "H100 SXM"}),
    (["external/github-action-benchmark/blade_data.js.033c5dd.js"], {"gpu": "RTX 3090"}),
    (["external/flashinfer/sample_testlist_output.csv"], {}),
]


def runs_and_rejects(wh: Warehouse) -> tuple[list[tuple], list[tuple], int]:
    runs = wh.sql("select run_id, gpu, kernel, implementation, metric, content_hash "
                  "from runs order by run_id").fetchall()
    rejects = wh.sql("select source_file, position, field, reason from rejects "
                     "order by all").fetchall()
    measurements = wh.sql("select count(*) from measurements").fetchall()[0][0]
    return runs, rejects, measurements


@pytest.mark.shared
def test_a_mixed_folder_loads_in_one_command_as_one_load_per_kind(tmp_path: Path, monkeypatch):
    if not EXTERNAL.is_dir():
        pytest.skip(f"needs {EXTERNAL}")
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "external").symlink_to(EXTERNAL)  # read where they are, never copied
    (folder / "kidata.toml").write_text(MIXED)
    monkeypatch.chdir(tmp_path)  # paths as a user types them, the same in both warehouses
    one = Warehouse(tmp_path / "one")
    report = one.load("results")
    # Every file of the folder is read once but the toml and the 3 skipped (SOURCES.md and
    # FlashInfer's two .txt files): the 20 files of GROUPS.
    listed = sorted(f for files, _ in GROUPS for f in files)
    assert report.files == len(listed) == 20
    per_kind = Warehouse(tmp_path / "per-kind")
    for files, settings in GROUPS:
        per_kind.load([f"results/{f}" for f in files], settings=settings or None)
    runs, rejects, measurements = runs_and_rejects(one)
    assert (runs, rejects, measurements) == runs_and_rejects(per_kind)
    assert len(runs) == report.runs_added == 1324 and len(rejects) == report.rejected
    # No record was read as the wrong thing: the rejects are the harnesses' own failures
    # (nvbench's skipped states, google-benchmark's complexity rows), none from a sidecar.
    assert {r[0].split("/")[2] for r in rejects} == {"nvbench", "google-benchmark"}
    # The GPUs came from the entries: the Triton GEMM file on the H100 SXM, dynamo's on the
    # A100 40GB.
    assert one.sql("select distinct gpu from runs where source_file like '%group-gemm%'"
                   ).fetchall() == [("h100-sxm5-80gb",)]
    assert one.sql("select distinct gpu from runs where source_file like '%dynamo%'"
                   ).fetchall() == [("a100-sxm4-40gb",)]
    assert one.check().problems == []


def folder_of(tmp_path: Path, toml: str) -> Path:
    folder = tmp_path / "results"
    folder.mkdir()
    shutil.copy(TRITON, folder / "triton.csv")  # a file of our own (tests/data)
    (folder / "kidata.toml").write_text(toml)
    return folder


def test_the_command_line_wins_key_by_key(tmp_path: Path, cli):
    folder = folder_of(tmp_path, '[[files]]\nglob = "*.csv"\n'
                                 'set = { gpu = "H100 SXM", unit = "ms" }\n')
    # triton_edge.csv: N 128, cuBLAS 0.5 and Triton nan: one run, one reject (the nan).
    result = cli("load", folder)
    assert result.code == 1 and "1 runs added" in result.out, result.err
    assert "field median: expected a finite number, got 'nan'" in result.err
    wh = Warehouse(os.environ["KIDATA_WAREHOUSE"])
    assert wh.sql("select distinct gpu from runs").fetchall() == [("h100-sxm5-80gb",)]
    # The toml is not an input: one file read.
    assert wh.sql("select files from loads").fetchall() == [(1,)]
    # --set gpu overrides the entry's gpu; its unit still applies.
    other = tmp_path / "wh2"
    result = cli("-w", other, "load", folder, "--set", "gpu=B200")
    assert result.code == 1 and "1 runs added" in result.out, result.err
    assert Warehouse(other).sql("select distinct gpu from runs").fetchall() == [("b200",)]
    # Without the toml the file lacks its GPU and unit: every record is rejected.
    (folder / "kidata.toml").unlink()
    result = cli("-w", tmp_path / "wh3", "load", folder)
    assert result.code == 1 and "0 runs added" in result.out
    assert "supply it with --set gpu=" in result.err


@pytest.mark.parametrize(("toml", "message"), [
    ('[[files]]\nglob = "*.csv"\nset = { gpu = "H100 SXN" }\n',
     "field files[0].set: --set gpu: unknown GPU 'H100 SXN'"),
    ('[[files]]\nglob = "*.csv"\nformat = "excel"\n', "field files[0].format: unknown format"),
    ('[[files]]\nglob = "../*.csv"\n', "field files[0].glob: expected a glob relative to"),
    ('[[files]]\nglob = "*.csv"\ncolour = "red"\n', "field files[0].colour: unknown key"),
    ('[[files]]\nglob = "*.csv"\nmapping = "nope.toml"\n', "field files[0].mapping: "),
    ('[[files]]\nglob = "*.csv"\nskip = "yes"\n', "field files[0].skip: expected true or false"),
    ('[[files]]\nglob = "*.csv"\nskip = true\nformat = "liger"\n',
     "files[0]: an entry with skip = true reads no file, so it takes no format"),
    ('[files]\nglob = "*.csv"\n', "field files: expected [[files]] entries"),
    ('[[file]]\nglob = "*.csv"\n', "unknown key(s) file"),
    ('[[files]\n', "cannot read the folder's settings"),
])
def test_a_bad_kidata_toml_loads_nothing_and_names_the_field(tmp_path: Path, toml, message):
    folder = folder_of(tmp_path, toml)
    wh = Warehouse(tmp_path / "wh")
    with pytest.raises(UsageError) as caught:
        wh.load(folder)
    assert str(caught.value).startswith(str(folder / "kidata.toml"))
    assert message in str(caught.value)
    assert not wh.path.exists()


def test_skip_leaves_files_out_and_a_file_no_entry_matches_is_read_as_usual(tmp_path: Path):
    folder = folder_of(tmp_path, '[[files]]\nglob = "notes/**"\nskip = true\n\n'
                                 '[[files]]\nglob = "*.csv"\nset = { unit = "ms" }\n')
    (folder / "notes").mkdir()
    (folder / "notes" / "README.txt").write_text("not a benchmark file\n")
    shutil.copytree(DATA / "seeds", folder / "seeds")  # no entry: format detected, no --set
    report = Warehouse(tmp_path / "wh").load(folder, settings={"gpu": "H100 SXM"})
    # triton.csv (gpu from the command line, unit from the entry: 1 run, its nan rejected)
    # and the 3 seed files (26 runs); the notes are not read.
    assert (report.files, report.rejected, report.runs_added) == (4, 1, 27)
