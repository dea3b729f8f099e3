"""`kidata report` and the workload_sizes view, through the installed console script."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest
from conftest import SEEDS, console, shared

from kidata import Warehouse

KIDATA = str(Path(sys.executable).parent / "kidata")


def kidata(*args: str, warehouse: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "KIDATA_WAREHOUSE": str(warehouse)}
    return subprocess.run([KIDATA, *map(str, args)], capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.fixture
def run():
    """`kidata` in-process (``conftest.console``), with `kidata`'s result shape: the report's
    work is what these tests check, not the console script, which test_report_on_the_seeds
    runs as a process (and a new process per report re-imports DuckDB and matplotlib)."""

    def invoke(*args: object, warehouse: Path) -> subprocess.CompletedProcess:
        return console(*args, env={"KIDATA_WAREHOUSE": str(warehouse)})

    return invoke


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


@pytest.fixture(scope="module")
def rms_norm_a100(liger: Warehouse, tmp_path_factory) -> tuple[int, str]:
    """`kidata report -k rms_norm -g a100-sxm4-80gb` of the Liger warehouse, in-process, made
    once: its exit code and page (two tests read the same report)."""
    out = tmp_path_factory.mktemp("rms-norm") / "h.html"
    done = console("report", "-o", out, "-k", "rms_norm", "-g", "a100-sxm4-80gb",
                   env={"KIDATA_WAREHOUSE": str(liger.path)})
    return done.returncode, out.read_text("utf-8") if out.exists() else ""


def charts(page: str) -> list[str]:
    return re.findall(r'<figure class="chart" id="([^"]+)"', page)


@pytest.mark.slow
def test_report_on_the_seeds(seeded: Path, tmp_path: Path):
    out = tmp_path / "r" / "report.html"
    # (--parents: the report's folder does not exist yet.)
    done = kidata("report", "-o", out, "--parents", "--png", tmp_path / "png", "--svg",
                  tmp_path / "svg", warehouse=seeded)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"wrote {out} (5 charts and 10 chart files) in ")
    page = out.read_text("utf-8")
    # Seeds: trainkernel vs inductor (train_step, two GPUs); rms_norm (seed 000, A100) and
    # relu_squared (seed 001, H100) have one implementation each, so no pair. The heatmap is
    # followed by its pair's per-kernel forest plot.
    assert charts(page) == ["speedup-trainkernel-vs-inductor-step",
                            "forest-trainkernel-vs-inductor-step", "latency-relu_squared",
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
    assert pngs == ["forest-trainkernel-vs-inductor-step.png", "latency-relu_squared.png",
                    "latency-rms_norm.png", "latency-train_step.png",
                    "speedup-trainkernel-vs-inductor-step.png"]
    assert (tmp_path / "png" / pngs[1]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "svg" / "latency-rms_norm.svg").read_text("utf-8").count("<svg") == 1


@pytest.mark.slow
def test_report_restricted(seeded: Path, tmp_path: Path, run):
    out = tmp_path / "report.html"
    done = run("report", "-o", out, "--kernel", "train_step", "--gpu", "h100-sxm5-80gb",
               warehouse=seeded)
    assert done.returncode == 0, done.stderr
    page = out.read_text("utf-8")
    assert charts(page) == ["speedup-trainkernel-vs-inductor-step",
                            "forest-trainkernel-vs-inductor-step", "latency-train_step"]
    assert "a100-sxm4-80gb</text>" not in page
    assert "kernels: train_step; GPUs: h100-sxm5-80gb" in page
    # Seed 003's train_step runs have no timestamp: a time window leaves nothing to draw.
    done = run("report", "-o", out, "--kernel", "train_step", "--since", "2026-01-01",
               warehouse=seeded)
    assert done.returncode == 0, done.stderr
    assert charts(out.read_text("utf-8")) == []


@pytest.mark.slow
def test_report_refuses_a_name_no_run_has(seeded: Path, tmp_path: Path, run):
    """A typo gave an empty report with a warning (exit 0): it is now exit 2, naming the
    closest known names, and no page is written (issue 30, item 5)."""
    out = tmp_path / "r.html"
    done = run("report", "-o", out, "--kernel", "rms_nrom", "--gpu", "h100-sxm5-80gb",
               warehouse=seeded)
    assert done.returncode == 2
    assert ("--kernel 'rms_nrom': no run has it; did you mean 'rms_norm'? (known: "
            "relu_squared, rms_norm, train_step)") in done.stderr
    assert not out.exists()
    done = run("report", "-o", out, "--gpu", "h100", warehouse=seeded)
    assert done.returncode == 2
    assert "--gpu 'h100': no run has it; did you mean " in done.stderr


@pytest.mark.slow
def test_report_refuses_a_bad_date(seeded: Path, tmp_path: Path, run):
    done = run("report", "-o", tmp_path / "r.html", "--since", "last tuesday",
               warehouse=seeded)
    assert done.returncode == 2
    assert ("--since: expected a date or time such as 2026-03-01 or 2026-03-01T12:00Z (UTC), "
            "or a span back from now such as 30d, 12h or 2w; got 'last tuesday'") in done.stderr


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
def test_report_on_liger(liger: Warehouse, tmp_path: Path, run):
    out = tmp_path / "liger.html"
    done = run("report", "-o", out, "--kernel", "fused_linear_cross_entropy",
               "--kernel", "rms_norm", warehouse=liger.path)
    assert done.returncode == 0, done.stderr
    page = out.read_text("utf-8")
    assert charts(page) == ["speedup-liger-vs-reference-forward",
                            "speedup-liger-vs-reference-backward",
                            "speedup-liger-vs-reference-full",
                            "forest-liger-vs-reference-forward",
                            "forest-liger-vs-reference-backward",
                            "forest-liger-vs-reference-full",
                            "latency-fused_linear_cross_entropy", "latency-rms_norm", "history",
                            "efficiency"]
    # The 2024-09-03 file (Liger 0.2.1) and the current one (0.4.2) give
    # fused_linear_cross_entropy two results per series: each point names its version, as
    # the Liger release it is (the CSV's liger_version column, on huggingface rows too), and
    # its change. huggingface forward, A100, BT = 16384: 76.0440673828125 ms (old file) ->
    # 76.39142608642578 ms (current file): +0.457%, shown +0.5%.
    assert ">liger 0.2.1</text>" in page and ">liger 0.4.2 (+0.5%)</text>" in page
    assert ">0.4.2</text>" not in page
    # Every step the regressions view lists (the rule is the view's: 3 steps, all 0.2.1 ->
    # 0.4.2, under this branch's p20/p80 rule) is in the table and marked on its series.
    listed = liger.sql("SELECT count(*) FROM regressions WHERE kernel IN "
                       "('fused_linear_cross_entropy', 'rms_norm')").fetchall()[0][0]
    if listed:
        assert f"<h3>Regressions ({listed})</h3>" in page
    else:
        assert "No regressions beyond noise and the 10% minimum effect." in page
    assert page.count(">regression · liger 0.4.2") == listed
    # One caption per kind of chart (heatmaps, forest plots, latency, history, efficiency),
    # not the same paragraph under each of the 3 heatmaps.
    assert page.count('<p class="caption">') == 5 and "<figcaption" not in page


@pytest.mark.shared
def test_latency_lines_join_one_sweep_only(liger: Warehouse, tmp_path: Path, run):
    from kidata.query.present import data

    points = data.latency_points(liger, data.Filters(kernels=["embedding"]))
    # Liger's embedding sweeps V (1024 ... 131072, 8 values) at two settings of the other
    # parameters (workload names vocab{V}-batch8-seq2048-dim4096 and
    # vocab{V}-batch32-seq512-dim768): a line per setting, each with the 8 sizes once.
    # Joined into one line, each size would come twice and the line zig-zag.
    settings = {"B=8, D=4096, T=2048", "B=32, D=768, T=512"}
    assert set(points["others"].unique()) == settings
    for (_, _, _, others), line in points.group_by(
            ["implementation", "pass", "gpu", "others"]):
        assert line["size"].to_list() == [2.0**k for k in range(10, 18)], others
    done = run("report", "-o", tmp_path / "e.html", "-k", "embedding", "-g",
               "a100-sxm4-80gb", warehouse=liger.path)
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "e.html").read_text("utf-8")
    # Colour names the implementation, the dash style the setting: each once in the figure's
    # legend, above its panels (forward and full on the A100), not over their lines.
    assert page.count(">B=8, D=4096, T=2048</text>") == 1
    assert page.count(">B=32, D=768, T=512</text>") == 1


@pytest.mark.shared
def test_lines_beyond_the_cap_are_listed(liger: Warehouse, tmp_path: Path, run):
    # fused_neighborhood_attention sweeps dilation (1, 2) at 7 values of seq_len
    # (64 ... 4096): 4 settings are drawn and the other 3 listed as left out.
    done = run("report", "-o", tmp_path / "n.html", "-k", "fused_neighborhood_attention",
               "-g", "rtx-3090", "-i", "liger", warehouse=liger.path)
    assert done.returncode == 0, done.stderr
    left = [line for line in done.stderr.splitlines() if "dilation sweep" in line]
    assert len(left) == 3  # backward, forward, full on the RTX 3090
    assert all(line.count("seq_len=") == 3 for line in left)


@pytest.mark.shared
def test_heatmaps_keep_passes_apart_against_the_reference(rms_norm_a100):
    code, page = rms_norm_a100
    assert code == 0
    # rms_norm's reference is huggingface (roles.toml: the first of torch, huggingface, ...
    # that was measured): one heatmap per pass, "liger vs reference".
    assert [c for c in charts(page) if c.startswith("speedup")] == [
        "speedup-liger-vs-reference-forward", "speedup-liger-vs-reference-backward",
        "speedup-liger-vs-reference-full"]
    assert ">rms_norm (vs huggingface)</text>" in page
    # all_benchmark_data.csv, rms_norm on the A100, H = 1024 ... 32768 (M = 2048), medians
    # huggingface / liger in ms, forward: 0.078208/0.0136, 0.13632/0.02, 0.279904/0.031072,
    # 0.51904/0.051744, 0.985632/0.095264, 1.919072/0.18224 = 5.751, 6.816, 9.008, 10.031,
    # 10.346, 10.530: geometric mean 8.532. Backward (0.195776/0.093728 ... 5.01472/1.056288)
    # 5.122; full (0.317696/0.286016 ... 6.910432/1.231648) 3.562. Pooled over the three
    # passes, as the heatmap did before, it was 5.380.
    for value in ("8.53", "5.12", "3.56"):
        assert f">{value}×</text>" in page
        assert f">{value}× · 1 kernel</text>" in page  # the kernel-weighted row
    assert "5.38×" not in page
    # Every liger p80 is below huggingface's p20 (e.g. H = 1024 forward: 0.016032 < 0.07776).
    assert page.count(">6▲ of 6</text>") == 6


@pytest.mark.shared
def test_heatmap_bottom_row_is_the_summary_view(liger: Warehouse, tmp_path: Path):
    from kidata.query.present import charts as charts_mod
    from kidata.query.present import data

    # The last row weighs each kernel the same, as speedup_summary's geomean_speedup does.
    made, _ = charts_mod.heatmaps(data.speedup_cells(liger, data.Filters()), [])
    forward = next(c for c in made if c.name == "speedup-liger-vs-reference-forward")
    svg = forward.svg()
    for chart in made:
        chart.figure.clear()
    rows = liger.sql("SELECT geomean_speedup, kernels FROM speedup_summary WHERE candidate = "
                     "'liger' AND baseline = 'role:reference' AND pass = 'forward'").fetchall()
    assert rows
    for geomean, kernels in rows:
        assert f">{geomean:.2f}× · {kernels} kernel{'s' if kernels > 1 else ''}</text>" in svg


class _Rows:
    """A Queryable over a DuckDB database of hand-written rows (the report's data functions
    take a warehouse or session; these read tables of the views' names instead)."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con

    def sql(self, query: str, params: dict | None = None) -> duckdb.DuckDBPyRelation:
        return self.con.sql(query, params=params)

    def rows(self, query: str, params: dict | None = None) -> list[tuple]:
        return self.con.execute(query, params).fetchall()


def _speedup_rows(rows: list[tuple]) -> _Rows:
    """``speedups`` rows (candidate, baseline, candidate_role, baseline_role, speedup, and
    optionally kernel, gpu, verdict, stale; by default rms_norm, a100, faster, not stale)
    and a ``kernel_families`` table naming rms_norm's family "norm"."""
    con = duckdb.connect()
    con.execute("CREATE TABLE speedups (candidate VARCHAR, baseline VARCHAR, "
                "candidate_role VARCHAR, baseline_role VARCHAR, speedup DOUBLE, "
                "kernel VARCHAR, gpu VARCHAR, verdict VARCHAR, stale BOOLEAN, pass VARCHAR)")
    for row in rows:
        full = (*row, *("rms_norm", "a100", "faster", False)[len(row) - 5:], "forward")
        con.execute("INSERT INTO speedups VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", full)
    con.execute("CREATE TABLE kernel_families AS SELECT 'rms_norm' AS kernel, 'norm' AS family")
    return _Rows(con)


def test_heatmap_pairs_count_each_comparison_once_in_one_direction():
    """Which pairs the heatmaps draw, worked out by hand on speedups rows: a row against the
    reference role counts for (candidate, 'reference'); the reverse of such a row (its
    candidate in the reference role, its baseline not) is not counted, even where the names
    alone would keep it ('apex' < 'liger'); of two implementations one direction is kept: the
    one whose baseline is in REFERENCES, else whose candidate sorts first; a row without a
    speedup names its pair but adds nothing, and draws no heatmap; a stale row is not counted.
    At most MAX_PAIRS, the most compared first, against the reference before others at a tie,
    then by name."""
    from kidata.query.present import charts as charts_mod
    from kidata.query.present import data

    ref = charts_mod.ROLE
    db = _speedup_rows([  # candidate, baseline, candidate_role, baseline_role, speedup
        ("liger", "torch", None, ref, 1.2),        # (liger, reference)
        ("torch", "liger", ref, None, 0.8),        # its reverse: left out
        ("apex", "liger", ref, None, 0.9),         # a reverse whose names sort the other way
        ("liger", "inductor", None, None, 1.1),    # baseline in REFERENCES: kept
        ("inductor", "liger", None, None, 0.9),    # candidate in REFERENCES: left out
        ("liger", "unsloth", None, None, 1.0),     # liger < unsloth: kept
        ("unsloth", "liger", None, None, 1.0),     # left out
        ("liger", "xformers", None, None, 1.3),
        ("liger", "triton", None, None, None),     # no speedup: the pair counts 0
        ("liger", "xformers", None, None, 2.0, "rms_norm", "a100", "faster", True),  # stale
    ])
    cells = data.speedup_cells(db, data.Filters())
    chosen, left = charts_mod.pairs(cells, [])
    assert charts_mod.MAX_PAIRS == 4
    assert chosen == [("liger", ref), ("liger", "inductor"), ("liger", "unsloth"),
                      ("liger", "xformers")]
    assert len(left) == 1 and "1 pairs with fewer comparisons: liger vs triton (0)" in left[0]
    # The heatmaps draw only pairs with a positive speedup: liger vs triton is not left out.
    assert charts_mod.pairs(cells, [], positive=True) == (chosen, [])
    two = data.speedup_cells(db, data.Filters(implementations=["apex", "liger"]))
    assert charts_mod.pairs(two, ["apex", "liger"]) == ([("apex", "liger")], [])


def test_heatmap_cells_are_worked_out_per_pair_kernel_and_gpu():
    """A heatmap cell, by hand: the geometric mean of its positive speedups, how many, the
    baselines it was compared with (against the reference role, each kernel's own), the
    verdicts counted; rows without a speedup, with a non-positive one or stale left out."""
    from kidata.query.present import data

    ref = data.ROLE
    db = _speedup_rows([
        ("liger", "torch", None, ref, 1.5, "rms_norm", "a100", "faster"),
        ("liger", "huggingface", None, ref, 6.0, "rms_norm", "a100", "within noise"),
        ("liger", "torch", None, ref, 0.5, "rms_norm", "a100", "slower"),
        ("liger", "torch", None, ref, None, "rms_norm", "a100", "faster"),
        ("liger", "torch", None, ref, 0.0, "rms_norm", "a100", "faster"),
        ("liger", "torch", None, ref, 9.0, "rms_norm", "a100", "faster", True),
        ("liger", "torch", None, ref, 2.0, "rms_norm", "h100", "faster"),
        ("liger", "torch", None, None, 4.0, "swiglu", "a100", "slower"),
    ])
    cells = data.speedup_cells(db, data.Filters()).cells.sort("against", "kernel", "gpu")
    rows = cells.select("against", "kernel", "gpu", "geomean", "n", "references",
                        "kernel_family", "faster", "slower", "noise").rows()
    assert [r[:3] for r in rows] == [("reference", "rms_norm", "a100"),
                                     ("reference", "rms_norm", "h100"),
                                     ("torch", "swiglu", "a100")]
    # (1.5 * 6.0 * 0.5) ** (1/3) = 4.5 ** (1/3) = 1.6510
    assert rows[0][3] == pytest.approx(4.5 ** (1 / 3), rel=1e-12)
    assert rows[0][4:] == (3, "huggingface/torch", "norm", 1, 1, 1)
    assert rows[1][3:] == (pytest.approx(2.0), 1, "torch", "norm", 1, 0, 0)
    assert rows[2][3:] == (pytest.approx(4.0), 1, "torch", "swiglu", 0, 1, 0)


def test_forest_plot_rows_are_kernel_speedups(liger: Warehouse):
    """The per-kernel forest plot (issue 26, item 5): one row per kernel and GPU of
    kernel_speedups for the pair, labelled with its workloads, the interval drawn as a bar."""
    from kidata.query.present import charts as charts_mod
    from kidata.query.present import data

    chosen, _ = charts_mod.pairs(data.speedup_cells(liger, data.Filters()), [])
    made, left = charts_mod.forest_charts(data.kernel_speedups(liger, data.Filters()), chosen)
    forward = next(c for c in made if c.name == "forest-liger-vs-reference-forward")
    svg = forward.svg()
    for chart in made:
        chart.figure.clear()
    rows = liger.sql("SELECT kernel, gpu, workloads FROM kernel_speedups WHERE candidate = "
                     "'liger' AND baseline = 'role:reference' AND pass = 'forward' AND "
                     "candidate_variant IS NULL").fetchall()
    assert 0 < len(rows) <= charts_mod.MAX_FOREST_ROWS
    for kernel, gpu, workloads in rows:
        label = f"{charts_mod._shorten(kernel, 36)} · {gpu} ({workloads})"
        assert f">{label}</text>" in svg, label
    assert not [o for o in left if "liger vs reference · forward" in o]


@pytest.mark.shared
def test_efficiency_marks_overhead_bound_points(rms_norm_a100):
    code, page = rms_norm_a100
    assert code == 0
    # rms_norm forward at H = 1024, M = 2048, bf16 moves x and y (2 x 2048 x 1024 x 2 bytes)
    # and the weight (1024 x 2): 8,390,656 bytes, 4.1 µs at the A100's 2,039 GB/s: under the
    # view's 5 µs, so not bound by bytes (overhead or a fixed cost, by its median), drawn
    # hollow and named in the legend.
    assert ">hollow: not bound by bytes</text>" in page


@pytest.mark.shared
def test_compute_roofline_chart_of_swiglu(liger: Warehouse, tmp_path: Path, run):
    out = tmp_path / "c.html"
    svg = tmp_path / "svg"
    done = run("report", "-o", out, "-k", "swiglu", "-g", "a100-sxm4-80gb", "--svg", svg,
               warehouse=liger.path)
    assert done.returncode == 0, done.stderr
    page = out.read_text("utf-8")
    assert "roofline" in charts(page)
    drawn = (svg / "roofline.svg").read_text("utf-8")
    # The A100's dense BF16 peak (gpus.toml: 312 TFLOP/s) is the roof. Liger's swiglu forward
    # at T = 1024 (B 4, hidden 4096, intermediate 11008, 5.06441593170166 ms in the CSV) does
    # 6 x 4 x 1024 x 4096 x 11008 = 1.108e12 FLOPs: 218.8 TFLOP/s, under the roof.
    assert "dense 16-bit peak 312 TFLOP/s" in drawn
    from kidata.query.present import data

    points = data.roofline(liger, data.Filters(kernels=["swiglu"], gpus=["a100-sxm4-80gb"]))
    hit = points.filter((points["flops"] == 1_108_101_562_368)
                        & (points["implementation"] == "liger") & (points["pass"] == "forward"))
    assert any(abs(v - 218.801) < 0.001 for v in hit["achieved_tflops"])


@pytest.mark.shared
def test_efficiency_and_roofline_points_come_in_one_order(liger: Warehouse):
    """The points come sorted by GPU, implementation, kernel, pass and workload: a panel's
    legend lists implementations in the order its points come, so without an order the page
    changed from one run to the next with DuckDB's threads (seen at 1M runs)."""
    from kidata.query.present import data

    keys = ["gpu", "implementation", "kernel", "pass", "workload"]
    for points in (data.efficiency, data.roofline):
        frame = points(liger, data.Filters())
        assert frame.height > 10 and frame["implementation"].n_unique() > 1
        assert frame.equals(frame.sort(keys, maintain_order=True)), points.__name__


@pytest.mark.shared
def test_a_crowded_efficiency_panel_shows_a_median_per_implementation_and_byte_count(
        liger: Warehouse, monkeypatch):
    """A GPU with more points than its panel can show (900 at 1M generated runs, piled on 41
    byte counts) has them merged in SQL: one point per implementation, variant, byte count
    and kind, at the median of its runs' rates, the bar from their lowest to their highest;
    the panel's title says how many runs it stands for. GPUs under the cap keep their runs'
    points as they were. Worked out here from the points unmerged, in Python."""
    from statistics import median

    from kidata.query.present import charts as charts_mod
    from kidata.query.present import data

    whole = data.efficiency(liger, data.Filters(), True)
    assert not whole["merged"].any() and set(whole["runs"]) == {1}
    sizes = dict(whole.group_by("gpu").len().iter_rows())
    cap = min(sizes.values())  # every GPU but the one with the fewest points is crowded
    crowded = {gpu for gpu, n in sizes.items() if n > cap}
    assert 0 < len(crowded) < len(sizes)
    monkeypatch.setattr(data, "MAX_EFFICIENCY_POINTS", cap)
    merged = data.efficiency(liger, data.Filters(), True)
    columns = [c for c in whole.columns if c not in ("merged", "runs")]
    skewed = 0  # merged points whose median is not their mean
    for gpu, n in sizes.items():
        mine = merged.filter(merged["gpu"] == gpu)
        if gpu not in crowded:
            assert not mine["merged"].any()
            assert mine.select(columns).equals(whole.filter(whole["gpu"] == gpu)
                                               .select(columns))
            continue
        assert mine["merged"].all() and mine["runs"].sum() == n and mine.height < n
        groups: dict[tuple, list[float]] = {}
        for row in whole.filter(whole["gpu"] == gpu).iter_rows(named=True):
            key = (row["implementation"], row["variant"], row["bytes"],
                   row["bound"] in data.NOT_BYTES, row["above_peak"])
            groups.setdefault(key, []).append(row["achieved_gbps"])
        assert mine.height == len(groups) and max(map(len, groups.values())) > 1
        for row in mine.iter_rows(named=True):
            rates = groups[(row["implementation"], row["variant"], row["bytes"],
                            row["bound"] in data.NOT_BYTES, row["above_peak"])]
            assert row["runs"] == len(rates)
            assert row["achieved_gbps"] == pytest.approx(median(rates), rel=1e-12)
            skewed += abs(median(rates) - sum(rates) / len(rates)) > 1e-6 * median(rates)
            assert (row["achieved_gbps_low"], row["achieved_gbps_high"]) == (
                pytest.approx(min(rates), rel=1e-12), pytest.approx(max(rates), rel=1e-12))
    assert skewed
    palette = charts_mod.Palette(charts_mod.series_names(merged))
    with charts_mod.style():
        svg = charts_mod.efficiency_chart(merged, palette).svg()
    for gpu, n in sizes.items():
        points = merged.filter(merged["gpu"] == gpu).height
        title = f"{gpu} ({n:,} runs in {points:,} medians)" if gpu in crowded else gpu
        assert f">{title}</text>" in svg, title


@pytest.mark.shared
def test_the_report_reads_the_efficiency_and_roofline_points_before_its_other_queries(
        liger: Warehouse, tmp_path: Path, monkeypatch):
    """Whether any run has a byte or FLOP model costs a pass over every run (~180 MB beside
    DuckDB at 5M runs), and the efficiency points work out every run's latency (~290 MB at 1M
    runs with byte models): beside the frames already read, each set the report's peak
    (docs/benchmarks.md, Run BD). So the report asks and reads them first, while it holds no
    frame, and hands the answers to the efficiency and roofline queries."""
    from kidata.query.present import data

    asked: list[str] = []

    def recorded(name):
        query = getattr(data, name)

        def wrapped(db, *args, **kwargs):
            asked.append(f"{name}({args[0]})" if name == "modelled" else name)
            return query(db, *args, **kwargs)
        monkeypatch.setattr(data, name, wrapped)

    for name in ("modelled", "speedup_cells", "efficiency", "roofline"):
        recorded(name)

    class Read(Exception):
        """Every frame read: the figures are not what this test is about."""

    def no_drawing(*args, **kwargs):
        raise Read

    from kidata.query.present import page

    monkeypatch.setattr(page, "_draw_page", no_drawing)
    with pytest.raises(Read):
        liger.report(tmp_path / "r.html")
    assert asked == ["modelled(run_bytes)", "modelled(run_flops)", "efficiency", "roofline",
                     "speedup_cells"]


def test_report_without_matplotlib_says_what_to_install(cli, monkeypatch, tmp_path: Path):
    assert cli("load", SEEDS).code == 0
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    result = cli("report", "-o", tmp_path / "r.html")
    assert result.code == 2
    assert result.err == "Error: kidata report needs matplotlib: pip install 'kidata[report]'\n"
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize(("cells", "blocks"), [
    # Every kernel on every GPU: one grid.
    ([("a", "g1"), ("a", "g2"), ("b", "g1"), ("b", "g2")], [(["a", "b"], ["g1", "g2"])]),
    # No kernel in common: a grid per GPU, the larger first (no column half empty).
    ([("a", "g1"), ("b", "g1"), ("c", "g2")], [(["a", "b"], ["g1"]), (["c"], ["g2"])]),
    # One kernel in common out of three: 4 of 6 cells hold a value, enough for one grid.
    ([("a", "g1"), ("b", "g1"), ("b", "g2"), ("c", "g2")],
     [(["a", "b", "c"], ["g1", "g2"])]),
    # ... but out of five, 6 of 10 is too sparse.
    ([("a", "g1"), ("b", "g1"), ("e", "g1"), ("b", "g2"), ("c", "g2"), ("d", "g2")],
     [(["a", "b", "e"], ["g1"]), (["b", "c", "d"], ["g2"])]),
    # No more GPUs in a grid than fit across the page.
    ([(k, g) for k in "ab" for g in ("g1", "g2", "g3")],
     [(["a", "b"], ["g1", "g2"]), (["a", "b"], ["g3"])]),
])
def test_heatmap_blocks(cells, blocks):
    from kidata.query.present.charts import heatmap_blocks

    assert heatmap_blocks(cells, max_columns=2) == blocks


@pytest.mark.shared
def test_heatmap_grids_of_liger_have_no_empty_row_or_column(liger: Warehouse):
    """Liger measured most kernels on one GPU: one kernel x GPU grid was 33 x 7 and mostly
    empty. Each grid now holds every cell once, has no empty row or column and is at least
    two-thirds full."""
    import polars as pl

    from kidata.query.present import charts as charts_mod
    from kidata.query.present import data

    frame = data.speedup_cells(liger, data.Filters()).cells
    cells = frame.filter((pl.col("candidate") == "liger") & (pl.col("against") == "reference")
                         & (pl.col("pass") == "forward"))
    pairs = sorted(set(zip(cells["kernel"], cells["gpu"], strict=True)))
    blocks = charts_mod.heatmap_blocks(pairs, max_columns=6)
    assert len(blocks) > 1
    drawn = [(k, g) for kernels, gpus in blocks for k in kernels for g in gpus
             if (k, g) in pairs]
    assert sorted(drawn) == pairs  # every cell, once
    for kernels, gpus in blocks:
        assert all(any((k, g) in pairs for g in gpus) for k in kernels)
        assert all(any((k, g) in pairs for k in kernels) for g in gpus)
        filled = sum((k, g) in pairs for k in kernels for g in gpus)
        assert len(gpus) == 1 or filled >= len(kernels) * len(gpus) * charts_mod.MIN_FILL


def test_history_panels_are_the_longest_series():
    """12 panels at most: the series with the most results, not a 2-point series with a
    regression before 3-point ones (among series of one length, regressed ones first)."""
    import polars as pl

    from kidata.query.present import charts as charts_mod

    rows = []
    for n, points in [(i, 3) for i in range(13)] + [(13, 2), (14, 4)]:
        for step in range(points):
            rows.append({"kernel": f"k{n:02d}", "pass": "forward", "implementation": "x",
                         "variant": None, "workload": "w", "gpu": "g", "family": "f",
                         "step": step, "points": points, "run_id": f"r{n}-{step}",
                         "observed_at": datetime(2026, 1, 1, tzinfo=UTC) + timedelta(weeks=step),
                         "median_us": 10.0 + step, "p20_us": None, "p80_us": None,
                         "release": f"1.{step}"})
    trends = pl.DataFrame(rows)
    regressions = pl.DataFrame({"run_id": ["r13-1", "r5-2"]})
    chart, omitted = charts_mod.history_chart(trends, regressions, charts_mod.Palette(["x"]))
    svg = chart.svg()
    chart.figure.clear()
    shown = re.findall(r">(k\d\d) forward · g</text>", svg)
    assert shown == ["k14", "k05"] + [f"k{i:02d}" for i in range(13) if i != 5][:10]
    assert omitted == ["history: 3 of 15 series, those with 3 results or fewer (restrict "
                       "with --kernel, --gpu or --implementation)"]


@pytest.mark.parametrize("step", [timedelta(minutes=5), timedelta(days=4), timedelta(weeks=1),
                                  timedelta(weeks=2), timedelta(weeks=5)])
def test_a_history_of_any_span_gets_its_dates_without_a_warning(step):
    """30 results from minutes to years apart: the date axis has 2 to 6 labelled ticks and
    matplotlib does not warn (it did, on stderr, for 100 weekly results: the suite's warnings
    are errors)."""
    import polars as pl

    from kidata.query.present import charts as charts_mod

    rows = [{"kernel": "k", "pass": "forward", "implementation": "x", "variant": None,
             "workload": "w", "gpu": "g", "family": "f", "step": i, "points": 100,
             "run_id": f"r{i}", "observed_at": datetime(2024, 1, 1, tzinfo=UTC) + i * step,
             "median_us": 10.0, "p20_us": None, "p80_us": None, "release": "1"}
            for i in range(100)]
    chart, _ = charts_mod.history_chart(pl.DataFrame(rows), pl.DataFrame({"run_id": []}),
                                        charts_mod.Palette(["x"]))
    ax = chart.figure.axes[0]
    chart.svg()
    low, high = ax.get_xlim()
    ticks = [x for x in ax.get_xticks() if low <= x <= high]
    chart.figure.clear()
    assert 2 <= len(ticks) <= 6


def history_steps(db, filters, limit=None, regressed=None):
    """The history's steps and series count as the report reads them: the series chosen in
    one query (data.trend_series), their steps in another (data.trend_steps)."""
    from kidata.query.present import data

    chosen, total = data.trend_series(db, filters, limit, regressed)
    return data.trend_steps(db, filters, chosen), total


@pytest.mark.shared
def test_history_series_are_chosen_in_duckdb_as_the_chart_ranks_them(liger):
    """The history reads only the steps of the 12 series its chart draws (limit=12):
    the same series (by their number of results, then regressions) as ranking every series'
    steps in Python, and the count of all series for the chart's 'omitted' line."""
    import polars as pl

    from kidata.query.present import data

    regressed = set(data.regressions(liger, data.Filters())["run_id"].to_list())
    every, total = history_steps(liger, data.Filters())
    chosen, counted = history_steps(liger, data.Filters(), 12, sorted(regressed))
    assert total == counted == every.select(list(data.SERIES_KEY)).unique().height > 12
    key = list(data.SERIES_KEY)

    def ranked(frame: pl.DataFrame) -> list[tuple[int, int]]:
        return sorted(((len(g), sum(r in regressed for r in g["run_id"]))
                       for _, g in frame.group_by(key)), reverse=True)

    assert chosen.select(key).unique().height == 12
    assert ranked(chosen) == ranked(every)[:12]
    # Restricted in DuckDB: one kernel's series only.
    names = sorted(set(every["implementation"]))
    one, n = history_steps(liger, data.Filters(implementations=[names[0]]), 12)
    assert len(names) > 1 and set(one["implementation"]) == {names[0]} and 0 < n < total


def test_the_history_reads_its_series_whether_or_not_they_have_a_variant(tmp_path):
    """rms_norm forward on the H100, one workload, three results each of the default kernel
    (no variant) and of variant "fast", plus one of torch: data.trend_steps of the two liger
    series gives each one's three results (the lists of values it adds for DuckDB to prune
    with skip a key a chosen series has no value of), and of one series only that one's."""
    import json

    from make_view_fixtures import H100, bundle, workload

    from kidata.query.present import data

    work = workload("w", "rms_norm")
    rows = [bundle(f"{name}-{i}", "rms_norm/forward", impl, H100, ns * (1 + i / 100), work,
                   "f", at=f"2024-01-0{i + 1}T10:00:00Z", variant=variant)
            for name, impl, variant, ns in (("plain", "liger", None, 1000),
                                            ("fast", "liger", "fast", 800),
                                            ("torch", "torch", None, 2000))
            for i in range(3 if impl == "liger" else 1)]
    path = tmp_path / "variants.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    wh = Warehouse(tmp_path / "wh")
    assert wh.load([str(path)]).ok
    chosen, total = data.trend_series(wh.session, data.Filters())
    assert total == 2 and {c[3] for c in chosen} == {None, "fast"}
    steps = data.trend_steps(wh.session, data.Filters(), chosen)
    assert sorted(steps["run_id"].to_list()) == sorted(
        f"{n}-{i}" for n in ("plain", "fast") for i in range(3))
    only = data.trend_steps(wh.session, data.Filters(), [c for c in chosen if c[3] is None])
    assert sorted(only["run_id"].to_list()) == ["plain-0", "plain-1", "plain-2"]


def test_the_history_shows_the_codes_regressions_apart_from_the_sessions_shifts(tmp_path, run):
    """The sessions of tests/query/test_views_verdicts.py's partial shift: torch moved +12% at
    w1-w3 and +40% at w4 between two sessions, liger beside it +1%, +1%, +11%, +1%. The
    report's history section lists one regression, torch w4, with its code's part
    (1.40 / 1.12 - 1 = 0.25), and four shifts: torch w1 and w2 the session's (session_change
    0.12, code_change 0), torch w3 and liger w3 shared with the implementation beside them."""
    import html as html_mod

    from make_view_fixtures import jsd_sessions

    wh = jsd_sessions(tmp_path, [(100, 1.01, 1.12), (200, 1.01, 1.12), (300, 1.11, 1.12),
                                 (400, 1.01, 1.40)])
    out = tmp_path / "report.html"
    done = run("report", "-o", out, warehouse=wh.path)
    assert done.returncode == 0, done.stderr
    page = out.read_text("utf-8")
    tables = {}
    for title, body in re.findall(r"<h3>([^<]+)</h3>(?:<p>.*?</p>)?<table>(.*?)</table>", page):
        head = re.findall(r"<th>([^<]*)</th>", body)
        rows = [dict(zip(head, (html_mod.unescape(c) for c in re.findall(r"<td[^>]*>([^<]*)</td>",
                                                                         row)), strict=True))
                for row in re.findall(r"<tr>(.*?)</tr>", body.split("</thead>", 1)[1])]
        tables[title] = rows
    [regression] = tables["Regressions (1)"]
    assert (regression["implementation"], regression["workload"], regression["change"],
            regression["code_change"]) == ("torch", "w4", "0.4", "0.25")
    shifts = {(r["implementation"], r["workload"]): (r["cause"], r["session_change"],
                                                     r["code_change"])
              for r in tables["Shifts of the session or environment (4)"]}
    assert shifts == {("torch", "w1"): ("session", "0.12", "0"),
                      ("torch", "w2"): ("session", "0.12", "0"),
                      ("torch", "w3"): ("shared", "0.12", "0"),
                      ("liger", "w3"): ("shared", "", "")}


def test_a_kernel_keeps_as_many_latency_panels_as_the_budget_shares_out():
    """Figures of 1, 2, 3 and 12 panels under a budget of 10: a share of 4 fits (1+2+3+4 =
    10), 5 would not (11); 24 figures of 12 under 120: 5 each; a budget too small for one
    panel each still gives each figure one; a budget that fits all keeps the 12 cap."""
    from kidata.query.present.charts import panel_share

    assert panel_share([1, 2, 3, 12], 12, 10) == 4
    assert panel_share([12] * 24, 12, 120) == 5
    assert panel_share([12] * 200, 12, 120) == 1
    assert panel_share([5, 5, 5], 12, 120) == 12


@pytest.mark.shared
def test_latency_panels_are_shared_out_under_the_reports_budget(liger, monkeypatch):
    """With 80 latency panels for the whole page, every kernel keeps min(its panels, share)
    panels (share: the largest whose panels fit in 80) and each cut kernel is named with what
    it lost. (The figures alone, as the report draws them: a whole page of Liger's data takes
    seconds more.)"""
    from kidata.query.present import charts, data

    points = data.latency_points(liger.session, data.Filters())
    panels = {k: g.select("pass", "gpu", "parameter").unique().height
              for (k,), g in points.group_by(["kernel"])}
    share = max(s for s in range(1, 13) if sum(min(c, s) for c in panels.values()) <= 80)
    assert 1 < share < max(panels.values())  # the budget cuts some kernels, not all to one
    monkeypatch.setattr(charts, "MAX_LATENCY_PANELS", 80)
    with charts.style():
        drawn, omitted = charts.latency_charts(points, charts.Palette(
            charts.series_names(points)))
    assert {c.title: len(c.figure.axes) for c in drawn} == {
        k: min(c, share) for k, c in panels.items()}
    cut = sorted(o for o in omitted if " panels (restrict with --kernel" in o)
    assert cut == sorted(f"{k}: {c - share} of {c} panels (restrict with --kernel, --gpu or "
                         "--implementation)" for k, c in panels.items() if c > share)
    for chart in drawn:
        chart.figure.clear()


def test_among_series_of_equal_length_the_history_takes_the_regressed_first(tmp_path):
    """The sessions of test_views_verdicts' partial shift: eight series of two results each
    (torch and liger at w1-w4); the code's one regression is torch w4. With one series to
    draw, the regressed one is chosen; told of no regression, the first by name (liger w1);
    and the count of series is eight either way."""
    from make_view_fixtures import jsd_sessions

    from kidata.query.present import data

    wh = jsd_sessions(tmp_path, [(100, 1.01, 1.12), (200, 1.01, 1.12), (300, 1.11, 1.12),
                                 (400, 1.01, 1.40)])
    regressed = data.regressions(wh.session, data.Filters())["run_id"].to_list()
    assert len(regressed) == 1
    chosen, total = history_steps(wh.session, data.Filters(), 1, regressed)
    assert (set(chosen["implementation"]), set(chosen["workload"]), total) == (
        {"torch"}, {"w4"}, 8)
    plain, total = history_steps(wh.session, data.Filters(), 1)
    assert (set(plain["implementation"]), set(plain["workload"]), total) == (
        {"liger"}, {"w1"}, 8)


def test_efficiency_and_roofline_points_without_a_modelled_run_have_the_same_columns(
        seeded: Path, liger: Warehouse):
    # The seeds' workloads have no parameters, so no run has bytes or FLOPs (run_bytes,
    # run_flops): the report does not work out the views (every run's latency) for nothing,
    # and draws no panel from the empty frames, whose columns are those of Liger's points.
    from kidata.query.present import data

    seeds = Warehouse(seeded)
    assert seeds.sql("SELECT (SELECT count(*) FROM run_bytes), "
                     "(SELECT count(*) FROM run_flops)").fetchall() == [(0, 0)]
    for points in (data.efficiency, data.roofline):
        empty, full = points(seeds, data.Filters()), points(liger, data.Filters())
        assert empty.is_empty() and full.height > 0
        assert empty.schema == full.schema


def test_figures_are_drawn_and_freed_one_at_a_time_after_every_query(liger: Warehouse,
                                                                      tmp_path: Path,
                                                                      monkeypatch):
    """The page holds one figure at a time (each drawn at its turn, written as SVG and cleared
    before the next is drawn: all of Liger's 60 at once were what the report's drawing added
    to its peak), and every query is made before the first figure is drawn, ``release``
    called after each (where ``Warehouse.report`` closes its session: DuckDB's memory given
    back). Rows the figures no longer need are let go as the drawing goes: the latency points
    beyond the plan's once it is made, the speedups once the heatmaps and forest plots are
    drawn (held beside every later figure before), the
    trends, efficiency and roofline points once their figures are."""
    from matplotlib.figure import Figure

    from kidata.query.present import charts, data, drawing, page, write_report

    live: list[Figure] = []
    most = [0]
    made = Figure.__init__
    cleared = Figure.clear
    svg = charts.Chart.svg

    def init(self, *args, **kwargs):
        made(self, *args, **kwargs)
        live.append(self)

    def clear(self, *args, **kwargs):
        if self in live:
            live.remove(self)
        return cleared(self, *args, **kwargs)

    order: list[str] = []  # the charts' SVG asked for, in turn
    at_latency: list[tuple[int, int, int]] = []  # rows held when the first latency SVG is

    def to_svg(self):
        most[0] = max(most[0], len(live))
        if self.section == "latency" and not at_latency:
            f = frames[0]
            at_latency.append((f.trends.height, f.efficiency.height, f.compute.height))
        order.append(self.section)
        return svg(self)

    monkeypatch.setattr(Figure, "__init__", init)
    monkeypatch.setattr(Figure, "clear", clear)
    monkeypatch.setattr(charts.Chart, "svg", to_svg)

    # The frames the page draws from, and which of their rows are still held when each
    # latency figure is worked out and when the efficiency figure is drawn.
    frames = []
    draw = page._draw
    prepare = drawing.prepare
    efficiency_chart = charts.efficiency_chart
    seen: dict[str, list[tuple[int, int, int]]] = {"latency": [], "efficiency": []}

    def keep_frames(f, *args, **kwargs):
        frames.append(f)
        return draw(f, *args, **kwargs)

    def held() -> tuple[int, int, int]:
        return frames[0].points.height, frames[0].speedups.height, frames[0].kernels.height

    def prepared(*args, **kwargs):
        seen["latency"].append(held())
        return prepare(*args, **kwargs)

    def efficiency(*args, **kwargs):
        seen["efficiency"].append(held())
        return efficiency_chart(*args, **kwargs)

    monkeypatch.setattr(page, "_draw", keep_frames)
    monkeypatch.setattr(drawing, "prepare", prepared)
    monkeypatch.setattr(charts, "efficiency_chart", efficiency)

    class Guarded:
        """The warehouse, refusing every query once a figure is drawn."""

        def sql(self, *args, **kwargs):
            assert not live, "a query after the first figure was drawn"
            return liger.sql(*args, **kwargs)

        def rows(self, *args, **kwargs):
            assert not live, "a query after the first figure was drawn"
            return liger.rows(*args, **kwargs)

        def info(self):
            assert not live, "a query after the first figure was drawn"
            return liger.info()

        def keep(self, view: str) -> None:
            raise AssertionError("the report keeps nothing")

    released: list[int] = []

    def release() -> None:
        released.append(len(live))  # the figures drawn when a frame was read

    result = write_report(Guarded(), tmp_path / "r.html", data.Filters(), release=release)
    assert len(result.charts) == 60
    # After each query but min_effect's (the one number), the two questions whose answers
    # the efficiency and roofline queries take included, the last before any figure.
    assert released == [0] * 14
    assert most[0] == 1  # the history, efficiency and roofline figures too
    # Those three are drawn (kept as SVG text) before the latency figures, which a helper
    # shares: drawn after them, they were the page's last 1.5 s on one core at 1M runs. Their
    # rows are let go before the first latency figure.
    assert order.index("history") < order.index("efficiency") < order.index("latency")
    assert at_latency == [(0, 0, 0)]
    # Let go: the heatmaps and forest plots were drawn from the speedups before.
    assert {name.split("-")[0] for name in result.charts} >= {"speedup", "forest", "latency"}
    assert seen["latency"] and all(points == 0 for points, _, _ in seen["latency"])
    assert seen["efficiency"] == [(0, 0, 0)]


def test_a_report_leaves_the_warehouses_own_session_as_it_was(liger: Warehouse,
                                                              tmp_path: Path):
    # The report reads through a session of its own and closes it: a table the caller made
    # on the warehouse's session is still there.
    liger.sql("CREATE TEMP TABLE mine AS SELECT 42 AS answer")
    liger.report(tmp_path / "r.html", kernels=["rms_norm"])
    assert liger.sql("SELECT answer FROM mine").fetchall() == [(42,)]


def test_matplotlib_is_imported_only_after_the_reports_queries(tmp_path: Path):
    """The report's queries run without matplotlib in the process (~33 MB that would sit
    beside DuckDB's working memory at the report's peak); it is imported once they are done,
    and the page is drawn (a fresh interpreter: the test process may have imported it)."""
    wh = tmp_path / "wh"
    assert Warehouse(wh).load([str(SEEDS)]).ok
    script = f"""
import sys
from kidata import Warehouse
from kidata.query.present import data
seen = []
for name in ("speedup_cells", "summary"):  # the first query and the last
    def wrapped(*args, _query=getattr(data, name), **kwargs):
        seen.append("matplotlib" in sys.modules)
        return _query(*args, **kwargs)
    setattr(data, name, wrapped)
result = Warehouse({str(wh)!r}).report({str(tmp_path / "r.html")!r})
print(seen, "matplotlib" in sys.modules, len(result.charts))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["[False,", "False]", "True", "5"]


def test_the_report_keeps_latest_latencies_across_its_connections(seeded: Path, tmp_path,
                                                                   monkeypatch):
    """The report reads latest_latencies on several connections (one per query): past
    KEPT_PAST's number of heads it works the rows out once, and draws the same page."""
    from kidata.query import kept
    from kidata.query import session as session_mod

    wh = Warehouse(seeded)
    plain = wh.report(tmp_path / "plain.html")
    made: list[str] = []
    define = kept.KeptRows.define

    def recorded(self, con, name, state, work):
        def counted(folder):
            made.append(name)
            return work(folder)
        return define(self, con, name, state, counted)

    monkeypatch.setattr(kept.KeptRows, "define", recorded)
    monkeypatch.setattr(session_mod, "KEPT_PAST", {"latest_latencies": ("latest_runs", 0)})
    report = wh.report(tmp_path / "kept.html")
    assert made == ["latest_latencies"]

    def page(name: str) -> str:
        text = (tmp_path / name).read_text()
        return re.sub(r"Written [^<]*", "", text)

    assert report.charts == plain.charts
    assert page("kept.html") == page("plain.html")
    # Under a window past contexts.CHUNK_RUNS runs the session keeps latest_runs too (worked
    # out from the window's runs): first, so that latest_latencies is worked out from those
    # kept rows, each once.
    from kidata.store import contexts

    monkeypatch.setattr(contexts, "CHUNK_RUNS", 0)
    made.clear()
    wh.report(tmp_path / "window.html", since="2000-01-01T00:00:00Z")
    assert [m for m in made if m in ("latest_runs", "latest_latencies")] == [
        "latest_runs", "latest_latencies"]
