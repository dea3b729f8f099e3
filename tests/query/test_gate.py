"""kidata gate and kidata ack (issue 28, items 1, 3, 4 and 8), on tests/data/ci/: two CI runs
of Liger-style results on the H100 (ms; median, p20, p80):

    key                main (0.6.0)           PR (0.6.1.dev0)        change   ranges
    rms_norm H 1024    0.100 (0.098-0.102)    0.120 (0.118-0.122)    +20%     apart: slower
    rms_norm H 2048    0.200 (0.196-0.204)    0.202 (0.198-0.206)    +1%      overlap
    rms_norm H 4096    0.400 (0.392-0.408)    0.300 (0.294-0.306)    -25%     apart: faster
    swiglu   T 1024    1.000 (0.980-1.020)    1.060 (1.045-1.075)    +6%      apart: slower
                                                                              at 5%; under
                                                                              the default
                                                                              10%: unchanged

Speedups (main / PR): 0.833333, 0.990099, 1.333333 (rms_norm: geometric mean exp((-0.182322
- 0.009950 + 0.287682) / 3) = 1.032315) and 0.943396 (swiglu: log -0.058269). Over the two
kernel-passes: exp((0.031803 - 0.058269) / 2) = 0.986854. Two kernel-passes give no interval
(t(0.975, df 1) = 12.706 would make it 0.557 .. 1.749: it says nothing).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import console

from kidata import Warehouse
from kidata.core.config import CI_SYSTEMS
from kidata.errors import UsageError

CI = Path(__file__).parents[1] / "data" / "ci"
TRITON = Path(__file__).parents[1] / "data" / "field" / "triton_edge.csv"
KIDATA = Path(sys.executable).parent / "kidata"
MAIN, PR = "liger,branch=main", "liger,commit=bbb222"
W = "within-run p20-p80"  # the basis of every key: the files give p20 and p80, no re-runs


@pytest.fixture
def two_runs(tmp_path: Path, monkeypatch) -> Warehouse:
    """main's results loaded by a push to main, the PR's by the PR's run (--set facts)."""
    for _, flag, _ in CI_SYSTEMS:
        monkeypatch.delenv(flag, raising=False)
    wh = Warehouse(tmp_path / "wh")
    assert wh.load(CI / "main.csv", settings={"branch": "main", "commit": "aaa111"}).ok
    assert wh.load(CI / "pr.csv", settings={"branch": "fast-norm", "commit": "bbb222"}).ok
    return wh


def outcomes(result) -> dict[tuple[str, str], tuple]:
    at = {c: i for i, c in enumerate(result.rows.columns)}
    return {(r[at["kernel"]], r[at["workload"]].split("-")[0]):
            (r[at["outcome"]], r[at["basis"]], r[at["threshold"]]) for r in result.table}


def test_the_gate_judges_every_shared_key(two_runs: Warehouse):
    # At the default threshold, the minimum effect (10%), swiglu's +6% is unchanged.
    default = two_runs.gate(MAIN, PR)
    assert outcomes(default)[("swiglu", "seq1024")] == ("unchanged", W, 0.10)
    assert (default.slower, default.unchanged) == (1, 2)
    result = two_runs.gate(MAIN, PR, threshold=0.05)
    assert outcomes(result) == {
        ("rms_norm", "hidden1024"): ("slower", W, 0.05),
        ("rms_norm", "hidden2048"): ("unchanged", W, 0.05),
        ("rms_norm", "hidden4096"): ("faster", W, 0.05),
        ("swiglu", "seq1024"): ("slower", W, 0.05)}
    assert (result.shared, result.slower, result.faster, result.unchanged,
            result.no_verdict) == (4, 2, 1, 1, 0)
    assert result.exit_code == 1
    assert result.kernels == 2
    assert result.geomean_speedup == pytest.approx(0.986854, rel=1e-5)
    assert result.interval is None
    text = result.markdown("https://example.org/report.html")
    assert text.startswith("## kidata gate: ❌ slower\n\n**2 slower, 1 faster, 1 unchanged, "
                           "0 without a verdict** over 4 shared keys.")
    assert "**0.987×**; above 1, the candidate is faster." in text
    assert "[The report](https://example.org/report.html)" in text
    # The worst first: rms_norm +20.0% before swiglu +6.0%; the full list folded.
    worst = text.index("| rms_norm | forward | hidden1024-rows2048-bf16 | h100-sxm5-80gb | "
                       "liger | 100 | 120 | 0.833× | +20.0% | within-run p20-p80 |")
    assert worst < text.index("| swiglu | forward | seq1024-batch4-bf16 | h100-sxm5-80gb | "
                              "liger | 1000 | 1060 | 0.943× | +6.0% | within-run p20-p80 |")
    assert "<details><summary>All 4 keys</summary>" in text and text.endswith("</details>\n")


def test_the_interval_over_three_kernel_passes(tmp_path: Path):
    """liger version 1 against version 2 on three kernels (A100, one workload each, 1,000 ns
    before): a 500 ns (speedup 2), b 1,000 (1), c 2,000 (0.5). Logs ln 2, 0, -ln 2: mean 0,
    geomean 1; sample sd ln 2 = 0.693147; t(0.975, df 2) = 4.303; half-width 4.303 x
    0.693147 / sqrt 3 = 1.722012: interval exp(-+1.722012) = 0.178706 .. 5.595776."""
    import json

    from make_view_fixtures import A100, bundle, workload

    rows = []
    for kernel, after in (("a", 500), ("b", 1000), ("c", 2000)):
        work = workload("w", kernel, {"N": 1})
        rows += [bundle(f"{kernel}-1", f"{kernel}/forward", "liger", A100, 1000, work, "f",
                        version="1", at="2026-01-01T00:00:00Z"),
                 bundle(f"{kernel}-2", f"{kernel}/forward", "liger", A100, after, work, "f",
                        version="2", at="2026-01-02T00:00:00Z")]
    path = tmp_path / "three.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    wh = Warehouse(tmp_path / "wh")
    assert wh.load([str(path)]).ok
    result = wh.gate("liger,version=1", "liger,version=2")
    assert (result.kernels, result.no_verdict) == (3, 3)  # medians only: no verdicts
    assert result.geomean_speedup == pytest.approx(1.0)
    assert result.interval == (pytest.approx(0.178706, rel=1e-5),
                               pytest.approx(5.595776, rel=1e-6))
    assert "**1×** (95% interval 0.1787-5.596)" in result.markdown()


def test_thresholds_per_kernel_and_gpu_first_rule_wins(two_runs: Warehouse, tmp_path: Path):
    limits = tmp_path / "gate.toml"
    # swiglu may move 10% (its +6% passes); on the H100 family 30% (rms_norm's +20% passes)
    # but rms_norm's own rule comes first: 15%, so its +20% still fails.
    limits.write_text('threshold = 0.05\n\n[[rule]]\nkernel = "swiglu"\nthreshold = 0.10\n\n'
                      '[[rule]]\nkernel = "rms_norm"\ngpu = "h100"\nthreshold = 0.15\n\n'
                      '[[rule]]\ngpu = "h100"\nthreshold = 0.30\n')
    result = two_runs.gate(MAIN, PR, limits)
    got = outcomes(result)
    assert got[("swiglu", "seq1024")] == ("unchanged", W, 0.10)
    assert got[("rms_norm", "hidden1024")] == ("slower", W, 0.15)
    # -25% against 0.15 / 1.15 = 13.0%: still faster.
    assert got[("rms_norm", "hidden4096")] == ("faster", W, 0.15)
    assert result.exit_code == 1 and result.slower == 1
    # -t replaces the file's global threshold only.
    assert outcomes(two_runs.gate(MAIN, PR, limits, threshold=0.5))[
        ("swiglu", "seq1024")][2] == 0.10


@pytest.mark.parametrize(("text", "message"), [
    ("threshold = -1\n", "field threshold: expected a fraction >= 0"),
    ('no_spread = "maybe"\n', "field no_spread: expected 'skip' or 'percent'"),
    ("[[rule]]\nkernel = 'x'\n", "field rule[0]: a rule sets threshold, no_spread or both"),
    ("[[rule]]\ncolour = 'red'\nthreshold = 0.1\n", "field rule[0].colour: unknown key"),
    ("[[rule]]\nmetric = 'memory'\nthreshold = 0.1\n", "field rule[0].metric: the gate "
                                                        "compares latency"),
    ("thresholds = 0.1\n", "unknown key(s) thresholds"),
    ("threshold = \n", "cannot read the thresholds"),
])
def test_a_bad_thresholds_file_names_the_field(two_runs: Warehouse, tmp_path: Path, text,
                                               message):
    limits = tmp_path / "gate.toml"
    limits.write_text(text)
    with pytest.raises(UsageError) as caught:
        two_runs.gate(MAIN, PR, limits)
    assert str(caught.value).startswith(str(limits)) and message in str(caught.value)


def test_no_spread_keys_fail_only_in_percent_mode(tmp_path: Path, monkeypatch):
    """A Triton report has medians only: +20% (0.5 -> 0.6 ms) gets no verdict, so by default
    nothing fails; with no_spread = "percent" the change alone is judged, and said."""
    for _, flag, _ in CI_SYSTEMS:
        monkeypatch.delenv(flag, raising=False)
    wh = Warehouse(tmp_path / "wh")
    context = {"gpu": "B200", "unit": "ms", "kernel": "gemm"}
    wh.load(TRITON, settings={**context, "branch": "main"})
    slower = tmp_path / "gemm.csv"
    slower.write_text("N,cuBLAS,Triton\n128.000000,0.6,nan\n")
    wh.load(slower, settings={**context, "branch": "pr"})
    quiet = wh.gate("cuBLAS,branch=main", "cuBLAS,branch=pr")
    assert (quiet.no_verdict, quiet.slower, quiet.exit_code) == (1, 0, 0)
    limits = tmp_path / "gate.toml"
    limits.write_text('no_spread = "percent"\n')
    loud = wh.gate("cuBLAS,branch=main", "cuBLAS,branch=pr", limits)
    assert list(outcomes(loud).values()) == [("slower", "percent", 0.10)]
    assert (loud.by_percent, loud.exit_code) == (1, 1)
    assert ("1 keys have no measured spread and were judged by their change alone"
            in loud.markdown())


def test_an_acknowledged_slowdown_is_left_out_and_counted(two_runs: Warehouse):
    # Before, at 5%: both steps main -> PR are regressions (+20%, +6%, beyond noise); at the
    # default 10% only the +20%.
    assert len(two_runs.regressions(0.05).fetchall()) == 2
    assert len(two_runs.regressions().fetchall()) == 1
    before = two_runs.regression_scan(0.05)
    assert (before.found, before.acknowledged, before.shifted) == (2, 0, 0)
    assert before.rows.fetchall() == two_runs.regressions(0.05).fetchall()
    added = two_runs.ack("the new tiling trades small sizes for large", author="alice",
                         baseline=MAIN, candidate=PR, threshold=0.05)
    assert sorted((r["kernel"], r["change"]) for r in added) == [
        ("rms_norm", pytest.approx(0.2)), ("swiglu", pytest.approx(0.06))]
    result = two_runs.gate(MAIN, PR, threshold=0.05)
    assert (result.slower, result.acknowledged, result.exit_code) == (0, 2, 0)
    assert "(2 acknowledged slower left out)" in result.markdown()
    assert two_runs.regressions(0.05).fetchall() == []
    assert two_runs.acknowledged_regressions(0.05) == 2
    # kidata regressions' one pass over trends counts them as the two queries do.
    after = two_runs.regression_scan(0.05)
    assert (after.found, after.acknowledged, after.rows.fetchall()) == (0, 2, [])
    done = console("-w", two_runs.path, "regressions", "-t", "0.05")
    assert done.returncode == 0, done.stderr
    assert ("0 regressions slower beyond noise and by more than 5.0% (2 acknowledged left out"
            in done.stderr)
    assert two_runs.sql("select author, reason from acknowledgements").fetchall() == [
        ("alice", "the new tiling trades small sizes for large")] * 2
    assert two_runs.check().problems == []
    # By run: an unknown run, or no reason, is refused and adds nothing.
    with pytest.raises(UsageError, match="no run 'nope' in the warehouse"):
        two_runs.ack("why", runs=["nope"])
    with pytest.raises(UsageError, match="needs a reason"):
        two_runs.ack("  ", runs=[added[0]["run_id"]])
    assert len(two_runs.sql("select * from acknowledgements").fetchall()) == 2


def test_the_start_point_and_nothing_comparable(two_runs: Warehouse):
    # A branch with no results yet is compared with its start point.
    first = two_runs.gate("liger,branch=new-idea", PR, start_point=MAIN)
    assert (first.start_point, first.shared, first.slower) == (MAIN, 4, 1)
    assert "the start point: `liger,branch=new-idea` had no results" in first.markdown()
    nothing = two_runs.gate("liger,branch=new-idea", PR)
    assert (nothing.shared, nothing.exit_code) == (0, 3)
    assert nothing.markdown().startswith("## kidata gate: ⚠️ nothing comparable")


def test_the_result_holds_the_rows_it_judged(two_runs: Warehouse):
    # The rows, the counts and the exit code come from one judgement: reading result.rows
    # (as the CLI prints or exports it) neither judges again nor depends on the session, so
    # a later commit (a new connection, the old one closed) leaves the result as it was.
    result = two_runs.gate(MAIN, PR, threshold=0.05)
    assert two_runs.load(Path(__file__).parents[1] / "data" / "seeds").ok
    assert two_runs.sql("SELECT count(*) FROM loads").fetchall() == [(3,)]  # a new snapshot
    assert result.rows.fetchall() == result.table
    assert len(result.table) == 4
    slower = result.rows.filter("outcome = 'slower'").fetchall()
    assert sorted(r[0] for r in slower) == ["rms_norm", "swiglu"]


def kidata(*args: object, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(KIDATA), *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.mark.slow
def test_two_ci_runs_as_docs_ci_md_plays_them(tmp_path: Path):
    """The workflow of docs/ci.md through the installed script, as GitHub Actions runs it:
    a push to main loads its results, a pull request loads its own and gates them against
    main, writing the step summary; the author acknowledges the trade-off and the gate
    passes."""
    base = {k: v for k, v in os.environ.items()
            if k not in {flag for _, flag, _ in CI_SYSTEMS} and not k.startswith("GITHUB_")}
    github = {**base, "GITHUB_ACTIONS": "true", "GITHUB_SERVER_URL": "https://github.com",
              "GITHUB_REPOSITORY": "acme/kernels", "KIDATA_WAREHOUSE": str(tmp_path / "wh")}
    push = {**github, "GITHUB_SHA": "aaa111", "GITHUB_REF_NAME": "main", "GITHUB_RUN_ID": "1"}
    summary = tmp_path / "summary.md"
    pull = {**github, "GITHUB_SHA": "bbb222", "GITHUB_REF_NAME": "7/merge",
            "GITHUB_HEAD_REF": "fast-norm", "GITHUB_RUN_ID": "2", "GITHUB_ACTOR": "alice",
            "GITHUB_STEP_SUMMARY": str(summary)}
    assert kidata("load", CI / "main.csv", env=push).returncode == 0
    assert kidata("load", CI / "pr.csv", env=pull).returncode == 0
    gate = kidata("gate", "liger,branch=main", "liger,commit=bbb222", env=pull)
    assert gate.returncode == 1, gate.stderr
    # The default threshold is the minimum effect, 10%: swiglu's +6% is unchanged.
    assert "4 shared keys: 1 slower, 1 faster, 2 unchanged" in gate.stderr
    assert "threshold 10.0%" in gate.stderr
    text = summary.read_text()
    assert text.startswith("## kidata gate: ❌ slower")
    assert "| rms_norm | forward | hidden1024-rows2048-bf16 |" in text
    # The loads carry the CI's facts: the PR's branch is its head branch.
    facts = kidata("sql", "select branch, commit, ci_run from loads order by loaded_at",
                   "--format", "csv", env=pull).stdout.splitlines()
    assert facts[1:] == ["main,aaa111,https://github.com/acme/kernels/actions/runs/1",
                         "fast-norm,bbb222,https://github.com/acme/kernels/actions/runs/2"]
    acked = kidata("ack", "--baseline", "liger,branch=main", "--candidate",
                   "liger,commit=bbb222", "-m", "tiling trade-off", env=pull)
    assert acked.returncode == 0 and "1 slowdown acknowledged" in acked.stderr
    again = kidata("gate", "liger,branch=main", "liger,commit=bbb222", env=pull)
    assert again.returncode == 0 and "(1 acknowledged slower left out)" in again.stderr
    assert "nothing to compare" not in again.stderr  # 4 keys compared, none slower or faster
    author = kidata("sql", "select distinct author from acknowledgements", "--format", "csv",
                    env=pull)
    assert author.stdout.splitlines()[1:] == ["alice"]
    # Usage errors are 2; nothing comparable is 3.
    bad = tmp_path / "gate.toml"
    bad.write_text("threshold = 'five'\n")
    assert kidata("gate", "liger,branch=main", "liger,commit=bbb222", "--thresholds", bad,
                  env=pull).returncode == 2
    assert kidata("gate", "liger,branch=nope", "liger,commit=bbb222",
                  env=pull).returncode == 3


def test_docs_ci_md_shows_the_commands_the_ci_test_plays():
    """docs/ci.md's workflow runs the commands test_two_ci_runs_as_docs_ci_md_plays_them plays:
    the same sides, the summary file, the ack before the gate."""
    doc = (Path(__file__).parents[2] / "docs" / "ci.md").read_text("utf-8")
    workflow = doc.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert 'kidata gate "liger,branch=main" "liger,commit=${{ github.sha }}"' in workflow
    assert 'kidata ack --baseline "liger,branch=main" --candidate "liger,commit=${{ ' \
           'github.sha }}"' in workflow
    assert workflow.index("kidata load results/") < workflow.index("kidata ack") \
        < workflow.index("kidata gate")
    assert "--summary gate.md" in workflow and "--body-file gate.md" in workflow
