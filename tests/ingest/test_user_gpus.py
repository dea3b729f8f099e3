"""GPUs kidata does not know (issue 28, items 6 and 7).

- ``--set gpu=`` is checked against the catalog: a typo is a usage error (exit 2) naming the
  closest known GPUs, before anything is created; 0.2.8 loaded 196 runs under ``z9000``.
- ``$KIDATA_GPUS`` names a user's GPU file (the packaged ``gpus.toml``'s shape) whose cards join
  the catalog, peaks included; the installed package is never edited.
- A GPU a file names that the catalog lacks is one warning per load, counting its records and
  naming the first, with and without worker processes; 0.2.8 printed one per record and
  pointed at a file inside the installed package.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from kidata import Warehouse
from kidata.errors import UsageError
from kidata.ingest import stage

DATA = Path(__file__).parents[1] / "data"
TRITON = DATA / "field" / "triton_edge.csv"
EDGE = DATA / "liger" / "edge_cases.csv"

Z9000 = """\
[gpus.z9000]
family = "z9000"
vendor = "acme"
product = "Acme Z9000"
form_factor = "PCIe"
memory_bandwidth_gbps = 1000
bf16_dense_tflops = 250.5
aliases = ["Z9000", "Acme Z9000 PCIe"]
"""


def unknown_gpu_csv(path: Path, rows: int) -> Path:
    """A Liger CSV of ``rows`` speed rows on 'NVIDIA Quantum Z9' (a GPU no catalog has): the
    row of tests/data/liger/edge_cases.csv on it, once per hidden size."""
    header, *records = csv.reader(io.StringIO(EDGE.read_text("utf-8-sig")))
    (fields,) = [r for r in records if r[12:13] == ["NVIDIA Quantum Z9"]]
    assert fields[3] == "speed"
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for i in range(rows):
        fields[7] = str(1024 + i)
        writer.writerow(fields)
    path.write_text(out.getvalue(), "utf-8")
    return path


def test_a_misspelled_set_gpu_loads_nothing_and_names_the_closest(tmp_path: Path):
    wh = Warehouse(tmp_path / "wh")
    with pytest.raises(UsageError) as caught:
        wh.load(TRITON, settings={"gpu": "H100 SXN", "unit": "ms"})
    message = str(caught.value)
    assert message.startswith("--set gpu: unknown GPU 'H100 SXN'; did you mean "
                              "'h100-sxm5-80gb'")
    assert "$KIDATA_GPUS" in message and "kidata/data" not in message
    assert not wh.path.exists()
    with pytest.raises(UsageError, match="unknown GPU 'Z9000'; `kidata sql"):
        wh.load(TRITON, settings={"gpu": "Z9000", "unit": "ms"})
    # A library dict is checked as --set pairs are (it was passed through unchecked).
    with pytest.raises(UsageError, match="--set: unknown key 'colour'"):
        wh.load(TRITON, settings={"colour": "red"})
    assert not wh.path.exists()
    # The right name loads: 'H100 SXM' is an alias of h100-sxm5-80gb.
    report = wh.load(TRITON, settings={"gpu": "H100 SXM", "unit": "ms"})
    assert report.runs_added > 0 and report.warned == 0


def test_a_users_gpu_file_adds_cards_with_their_peaks(tmp_path: Path, monkeypatch):
    gpus = tmp_path / "gpus.toml"
    gpus.write_text(Z9000)
    monkeypatch.setenv("KIDATA_GPUS", str(gpus))
    wh = Warehouse(tmp_path / "wh")
    report = wh.load(TRITON, settings={"gpu": "Acme Z9000 PCIe", "unit": "ms"})
    assert report.runs_added > 0 and report.warned == 0
    assert wh.sql("select distinct gpu from runs").fetchall() == [("z9000",)]
    # The gpus table carries the file's card with its peaks, beside the packaged ones.
    assert wh.sql("select vendor, product, memory_bandwidth_gbps, bf16_dense_tflops from gpus "
                  "where gpu = 'z9000'").fetchall() == [("acme", "Acme Z9000", 1000.0, 250.5)]
    assert wh.sql("select count(*) from gpus where gpu = 'h100-sxm5-80gb'").fetchall() == [(1,)]
    assert wh.check().problems == []
    # Without the file, the same name is unknown again.
    monkeypatch.delenv("KIDATA_GPUS")
    with pytest.raises(UsageError, match="unknown GPU 'Acme Z9000 PCIe'"):
        wh.load(TRITON, settings={"gpu": "Acme Z9000 PCIe", "unit": "ms"})


@pytest.mark.parametrize(("text", "message"), [
    ("[gpus.z9000]\nvendor = 'acme'\n", "field gpus.z9000.family: required, a non-empty string"),
    (Z9000.replace("1000", "'fast'"), "field gpus.z9000.memory_bandwidth_gbps: expected a "
                                      "number, got 'fast'"),
    (Z9000.replace("250.5", "-1"), "field gpus.z9000.bf16_dense_tflops: expected a number > 0"),
    (Z9000 + "colour = 'red'\n", "field gpus.z9000.colour: unknown field"),
    (Z9000.replace("[gpus.z9000]", "[gpus.Z9000]"), "field gpus.Z9000: a key is lower case"),
    ("[gpu.z9000]\n", "expected only [gpus.KEY] tables"),
    ("[gpus.z9000\n", "not a TOML file"),
])
def test_a_bad_gpu_file_is_a_usage_error_naming_the_file_and_field(
        tmp_path: Path, monkeypatch, text: str, message: str):
    gpus = tmp_path / "gpus.toml"
    gpus.write_text(text)
    monkeypatch.setenv("KIDATA_GPUS", str(gpus))
    with pytest.raises(UsageError) as caught:
        Warehouse(tmp_path / "wh").load(TRITON, settings={"gpu": "H100 SXM", "unit": "ms"})
    assert str(caught.value).startswith(f"{gpus}")
    assert message in str(caught.value)


@pytest.mark.parametrize("workers", [0, 2])
def test_an_unknown_gpu_is_one_warning_per_load_counting_its_records(
        tmp_path: Path, monkeypatch, pool_jobs, workers: int):
    rows = 600
    path = unknown_gpu_csv(tmp_path / "z9.csv", rows)
    monkeypatch.setenv("KIDATA_WORKERS", str(workers))
    monkeypatch.setattr(stage, "POOL_ROWS", 128)  # 600 rows: 5 jobs
    report = Warehouse(tmp_path / "wh").load(path)
    assert (bool(pool_jobs), report.runs_added, report.rejected) == (workers > 0, rows, 0)
    assert report.warned == 1
    assert report.warnings == [
        f"unknown GPU 'NVIDIA Quantum Z9' in {rows} records (the first: {path}, row 1); "
        "loaded under the derived key 'quantum-z9', without peaks. A typo: `kidata unload` "
        "the load and load it again with the right name. A GPU kidata does not know: add it "
        "to a GPU file named by $KIDATA_GPUS (docs/formats.md, \"GPUs kidata does not know\")"]


def test_the_load_command_prints_an_unknown_gpu_once(tmp_path: Path, cli):
    path = unknown_gpu_csv(tmp_path / "z9.csv", 3)
    result = cli("load", path)
    assert result.code == 0
    lines = [line for line in result.err.splitlines() if line.startswith("warning: ")]
    assert len(lines) == 1 and "unknown GPU 'NVIDIA Quantum Z9' in 3 records" in lines[0]
    assert "1 warnings" in result.out
