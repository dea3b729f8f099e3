"""`kidata report` and the workload_sizes view, through the installed console script."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SEEDS, shared

from kidata import Warehouse

KIDATA = str(Path(sys.executable).parent / "kidata")


def kidata(*args: str, warehouse: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "KIDATA_WAREHOUSE": str(warehouse)}
    return subprocess.run([KIDATA, *map(str, args)], capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("report") / "wh"
    assert Warehouse(path).load([str(SEEDS)]).ok
    return path


@pytest.fixture(scope="module")
def liger(tmp_path_factory) -> Warehouse:
    wh = Warehouse(tmp_path_factory.mktemp("report-liger") / "wh")
    assert wh.load([str(shared("liger/all_benchmark_data.csv")),
                    str(shared("liger/all_benchmark_data_2024-09-03.csv"))]).ok
    return wh


def charts(page: str) -> list[str]:
    return re.findall(r'<figure class="chart" id="([^"]+)"', page)


@pytest.mark.slow
def test_report_on_the_seeds(seeded: Path, tmp_path: Path):
    out = tmp_path / "r" / "report.html"
    done = kidata("report", "-o", out, "--png", tmp_path / "png", "--svg", tmp_path / "svg",
                  warehouse=seeded)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"wrote {out} (4 charts and 8 chart files) in ")
    page = out.read_text("utf-8")
    # Seeds: trainkernel vs inductor (train_step, two GPUs); rms_norm (seed 000, A100) and
    # relu_squared (seed 001, H100) have one implementation each, so no pair.
    assert charts(page) == ["speedup-trainkernel-vs-inductor", "latency-relu_squared",
                            "latency-rms_norm", "latency-train_step"]
    # A100 cell: inductor / trainkernel medians (seed 003): tiny-online 22.85/15.28 = 1.4954,
    # online 24.24/20.32 = 1.1929, small 22.92/66.04 = 0.34706, medium 42.19/255.32 = 0.16524;
    # geometric mean (0.10230)^(1/4) = 0.5656. No p20/p80 in trainkernel's tables.
    assert ">0.57×</text>" in page
    assert ">4 without spread</text>" in page
    # Self-contained: no script, no external resource (only XML namespace URIs remain).
    assert "<script" not in page
    assert not re.search(r'(src|href)="(https?:)?//', page)
    assert "Content-Security-Policy" in page
    # The audit table: 3 of the 8 trainkernel ratios disagree (tests/query/test_views_audit.py).
    assert "3 of 8 published numbers disagree" in page
    pngs = sorted(p.name for p in (tmp_path / "png").iterdir())
    assert pngs == ["latency-relu_squared.png", "latency-rms_norm.png",
                    "latency-train_step.png", "speedup-trainkernel-vs-inductor.png"]
    assert (tmp_path / "png" / pngs[0]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "svg" / "latency-rms_norm.svg").read_text("utf-8").count("<svg") == 1


@pytest.mark.slow
def test_report_restricted(seeded: Path, tmp_path: Path):
    out = tmp_path / "report.html"
    done = kidata("report", "-o", out, "--kernel", "train_step", "--gpu", "h100-sxm5-80gb",
                  warehouse=seeded)
    assert done.returncode == 0, done.stderr
    page = out.read_text("utf-8")
    assert charts(page) == ["speedup-trainkernel-vs-inductor", "latency-train_step"]
    assert "a100-sxm4-80gb</text>" not in page
    assert "kernels: train_step; GPUs: h100-sxm5-80gb" in page
    # Seed 003's train_step runs have no timestamp: a time window leaves nothing to draw.
    done = kidata("report", "-o", out, "--kernel", "train_step", "--since", "2026-01-01",
                  warehouse=seeded)
    assert done.returncode == 0, done.stderr
    assert charts(out.read_text("utf-8")) == []


@pytest.mark.slow
def test_report_warns_of_a_name_no_run_has(seeded: Path, tmp_path: Path):
    done = kidata("report", "-o", tmp_path / "r.html", "--kernel", "rms_nrom", warehouse=seeded)
    assert done.returncode == 0
    assert ("warning: no run has kernel 'rms_nrom' (known: relu_squared, rms_norm, train_step)"
            in done.stderr)


@pytest.mark.slow
def test_report_refuses_a_bad_date(seeded: Path, tmp_path: Path):
    done = kidata("report", "-o", tmp_path / "r.html", "--since", "last tuesday",
                  warehouse=seeded)
    assert done.returncode == 2
    assert "'last tuesday' is not a date or time" in done.stderr


@pytest.mark.shared
def test_workload_sizes_sort_as_numbers(liger: Warehouse):
    rows = liger.sql("SELECT workload, parameter, size, neighbours FROM workload_sizes "
                     "WHERE kernel = 'cross_entropy' ORDER BY size").fetchall()
    # Liger's cross_entropy rows sweep V (x_name) at B = 8, T = 2048: six sizes, each the
    # neighbour of the five others. As text the slugs would sort vocab131072 first.
    assert [r[0] for r in rows] == [f"vocab{v}-batch8-seq2048"
                                    for v in (4096, 8192, 16384, 32768, 65536, 131072)]
    assert {(r[1], r[3]) for r in rows} == {("V", 5)}
    assert [r[2] for r in rows] == [4096.0, 8192.0, 16384.0, 32768.0, 65536.0, 131072.0]
    # rope sweeps H at seq_len 2048 (3 sizes) and T at hidden_size 8192 (5 sizes): the two
    # sweeps have different parameter names, so they stay apart.
    rope = liger.sql("SELECT parameter, count(*), min(size), max(size) FROM workload_sizes "
                     "WHERE kernel = 'rope' GROUP BY parameter ORDER BY parameter").fetchall()
    assert rope == [("H", 3, 512.0, 8192.0), ("T", 5, 1024.0, 16384.0)]


@pytest.mark.slow
@pytest.mark.shared
def test_report_on_liger(liger: Warehouse, tmp_path: Path):
    out = tmp_path / "liger.html"
    done = kidata("report", "-o", out, "--kernel", "fused_linear_cross_entropy",
                  "--kernel", "rms_norm", warehouse=liger.path)
    assert done.returncode == 0, done.stderr
    page = out.read_text("utf-8")
    assert charts(page) == ["speedup-liger-vs-huggingface", "latency-fused_linear_cross_entropy",
                            "latency-rms_norm", "history", "efficiency"]
    # The 2024-09-03 file (Liger 0.2.1) and the current one (0.4.2) give
    # fused_linear_cross_entropy two results per series: each point names its version.
    assert ">0.2.1</text>" in page and ">0.4.2</text>" in page
    # Every step the regressions view lists (the rule is the view's: 3 steps, all 0.2.1 ->
    # 0.4.2, under this branch's p20/p80 rule) is in the table and marked on its series.
    listed = liger.sql("SELECT count(*) FROM regressions WHERE kernel IN "
                       "('fused_linear_cross_entropy', 'rms_norm')").fetchall()[0][0]
    if listed:
        assert f"<h3>Regressions ({listed})</h3>" in page
    else:
        assert "No regressions beyond noise and 5%." in page
    assert page.count(">regression · 0.4.2</text>") == listed


def test_report_without_matplotlib_says_what_to_install(cli, monkeypatch, tmp_path: Path):
    assert cli("load", SEEDS).code == 0
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    result = cli("report", "-o", tmp_path / "r.html")
    assert result.code == 2
    assert result.err == "Error: kidata report needs matplotlib: pip install 'kidata[report]'\n"
    assert not (tmp_path / "r.html").exists()
