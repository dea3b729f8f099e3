"""The commit, branch and CI run a load measured (issue 28, item 2): from ``--set``, else from
the CI's variables (GitHub Actions, GitLab CI, Buildkite), kept in the load's marker
(``loads.commit``, ``branch``, ``ci_run``), and selectable by ``compare``."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kidata import Warehouse
from kidata.core.config import CI_SYSTEMS, ci_facts
from kidata.errors import UsageError

TRITON = Path(__file__).parents[1] / "data" / "field" / "triton_edge.csv"
# triton_edge.csv: N 128, cuBLAS 0.5 ms, Triton nan (rejected). The same plot 20% slower:
SLOWER = "N,cuBLAS,Triton\n128.000000,0.6,nan\n"
TRITON_SET = {"gpu": "B200", "unit": "ms", "kernel": "gemm"}

GITHUB = {"GITHUB_ACTIONS": "true", "GITHUB_SHA": "9f3c2a1", "GITHUB_REF_NAME": "12/merge",
          "GITHUB_HEAD_REF": "fast-norm", "GITHUB_SERVER_URL": "https://github.com",
          "GITHUB_REPOSITORY": "acme/kernels", "GITHUB_RUN_ID": "4242"}


@pytest.fixture
def outside_ci(monkeypatch):
    """No CI variable of this machine (CI may run the suite in one) reaches a load."""
    for _, flag, _ in CI_SYSTEMS:
        monkeypatch.delenv(flag, raising=False)
    return monkeypatch


def facts(wh: Warehouse) -> list[tuple]:
    return wh.sql("select commit, branch, ci_run from loads order by loaded_at").fetchall()


def test_each_ci_names_its_commit_branch_and_run():
    # A pull request's branch is its head branch (GITHUB_HEAD_REF), not the merge ref.
    assert ci_facts(GITHUB) == {"commit": "9f3c2a1", "branch": "fast-norm",
                                "ci_run": "https://github.com/acme/kernels/actions/runs/4242"}
    # A push has no head ref: the branch is GITHUB_REF_NAME.
    assert ci_facts({**GITHUB, "GITHUB_HEAD_REF": ""})["branch"] == "12/merge"
    assert ci_facts({"GITLAB_CI": "true", "CI_COMMIT_SHA": "abc", "CI_COMMIT_REF_NAME": "main",
                     "CI_PIPELINE_URL": "https://gitlab.com/a/b/-/pipelines/7"}) == {
        "commit": "abc", "branch": "main", "ci_run": "https://gitlab.com/a/b/-/pipelines/7"}
    assert ci_facts({"BUILDKITE": "true", "BUILDKITE_COMMIT": "def",
                     "BUILDKITE_BRANCH": "dev"}) == {"commit": "def", "branch": "dev"}
    # Outside CI (the flag unset or not "true") nothing is said, whatever else is set.
    assert ci_facts({**GITHUB, "GITHUB_ACTIONS": ""}) == {}
    assert ci_facts({}) == {}


def test_a_load_keeps_its_facts_from_ci_or_set(tmp_path: Path, outside_ci):
    wh = Warehouse(tmp_path / "wh")
    wh.load(TRITON, settings=TRITON_SET)  # outside CI: no facts
    for name, value in GITHUB.items():
        outside_ci.setenv(name, value)
    slower = tmp_path / "gemm.csv"
    slower.write_text(SLOWER)
    wh.load(slower, settings=TRITON_SET)
    # --set wins over the CI's variables, fact by fact.
    slower.write_text(SLOWER.replace("0.6", "0.7"))
    wh.load(slower, settings={**TRITON_SET, "branch": "main", "commit": "c0ffee"})
    run = "https://github.com/acme/kernels/actions/runs/4242"
    assert facts(wh) == [(None, None, None), ("9f3c2a1", "fast-norm", run),
                         ("c0ffee", "main", run)]
    # A fact is of the load, not of its records: the runs are those of the settings alone.
    assert wh.sql("select distinct kernel, gpu from runs").fetchall() == [("gemm", "b200")]
    assert wh.check().problems == []


def test_compare_selects_by_branch_and_commit(tmp_path: Path, outside_ci):
    """main measured cuBLAS at 0.5 ms, the branch at 0.6: latency ratio 0.6 / 0.5 = 1.2,
    speedup 0.5 / 0.6 = 0.833333 (no spread: no verdict)."""
    wh = Warehouse(tmp_path / "wh")
    wh.load(TRITON, settings={**TRITON_SET, "branch": "main", "commit": "a1"})
    slower = tmp_path / "gemm.csv"
    slower.write_text(SLOWER)
    wh.load(slower, settings={**TRITON_SET, "branch": "fast-norm", "commit": "b2"})
    for baseline, candidate in (("cuBLAS,branch=main", "cuBLAS,branch=fast-norm"),
                                ("cuBLAS,commit=a1", "cuBLAS,commit=b2")):
        result = wh.compare(baseline, candidate)
        [row] = result.rows.fetchall()
        assert (row[0], row[6], row[7]) == ("gemm", 500.0, 600.0)
        assert (row[8], row[9]) == (pytest.approx(1.2), pytest.approx(0.833333, rel=1e-6))
    assert wh.compare("cuBLAS,branch=main", "cuBLAS,branch=nowhere").shared == 0


def test_markers_written_before_the_facts_read_as_null(tmp_path: Path, outside_ci):
    """A warehouse whose every marker predates the columns (0.2.8): loads shows them null and
    a selector on them finds nothing, instead of failing to bind."""
    wh = Warehouse(tmp_path / "wh")
    wh.load(TRITON, settings=TRITON_SET)
    [marker] = (wh.path / "loads").glob("*.parquet")
    table = pq.read_table(marker)
    old = table.drop_columns(["commit", "branch", "ci_run"])
    pq.write_table(old, marker)
    again = Warehouse(wh.path)
    assert facts(again) == [(None, None, None)]
    assert again.compare("cuBLAS,branch=main", "cuBLAS").shared == 0
    assert again.check().problems == []


def test_a_fact_is_one_line_and_not_a_folder_entry(tmp_path: Path, outside_ci):
    with pytest.raises(UsageError, match="--set commit: expected one line"):
        Warehouse(tmp_path / "wh").load(TRITON, settings={**TRITON_SET, "commit": "a\nb"})
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "kidata.toml").write_text('[[files]]\nglob = "*.csv"\nset = { branch = "x" }\n')
    with pytest.raises(UsageError, match=r"field files\[0\].set.branch: a fact of the whole "
                                         "load"):
        Warehouse(tmp_path / "wh").load(folder)


def test_set_overrides_a_kernel_guessed_from_the_file_name(tmp_path: Path):
    """docs/formats.md: --set overrides a guess from a file name (Triton's kernel is the
    plot's file name). 0.2.8 kept the file's name: triton_edge."""
    wh = Warehouse(tmp_path / "wh")
    wh.load(TRITON, settings={"gpu": "B200", "unit": "ms"})
    wh.load(TRITON, settings=TRITON_SET)
    assert sorted(wh.sql("select distinct kernel from runs").fetchall()) == [
        ("gemm",), ("triton_edge",)]


@pytest.mark.shared
def test_a_sources_own_commit_is_the_runs_commit(tmp_path: Path, outside_ci):
    """github-action-benchmark's data.js names the commit of each entry: blade's two commits
    82fa0599 and b7520474, 34 benches each. `commit=` selects the runs of a commit however
    they were loaded (one load here, without --set commit)."""
    shared = Path(__file__).parents[3] / "shared" / "data" / "external"
    if not shared.is_dir():
        pytest.skip(f"needs {shared}")
    wh = Warehouse(tmp_path / "wh")
    wh.load(shared / "github-action-benchmark", settings={"gpu": "RTX 3090"})
    first = "82fa0599bce126b499f0052318ecedc73f06134f"
    second = "b7520474578bbe390bbeacdd17cd14b97aa995fc"
    result = wh.compare(f"commit={first}", f"commit={second}")
    assert result.shared == 34
    # OpsComplexKernelBenchmark<F16, ArithmeticOp::ADD>/1048576: 37818.244 ns/iter, then
    # 37837.052 (the file's values).
    [row] = [r for r in result.rows.fetchall()
             if r[0] == "add" and r[4] == "OpsComplexKernelBenchmark"
             and r[2] == "dtype-fp16-arithmeticop-add-arg01048576"]
    assert (row[6], row[7]) == (pytest.approx(37.818244, rel=1e-6),
                                pytest.approx(37.837052, rel=1e-6))
    # A load's own commit does not hide the source's: the runs say theirs.
    assert facts(wh) == [(None, None, None)]
