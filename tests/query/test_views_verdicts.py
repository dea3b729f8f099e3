"""The one verdict rule (issue 26, items 1, 2 and 7): effect size, Welch on means with
counts, run-to-run noise calibrated on re-runs, within-run spreads widened by the resolution,
median + stddev spreads; on tests/data/views/verdicts.jsonl (tests/make_view_fixtures.py,
``verdicts()``, says what each run is for) and on real files under ../shared.

Every expected number is worked out here from the fixture's inputs, by the formulas of
docs/statistics.md section 3, not read back from kidata.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from conftest import console, shared

from kidata import Warehouse

VIEWS = Path(__file__).parents[1] / "data" / "views"
sys.path.insert(0, str(Path(__file__).parents[1]))
from make_view_fixtures import RERUN_CHANGES, bundle, jsd_sessions  # noqa: E402
from make_view_fixtures import workload as workload_doc  # noqa: E402


def _loaded(tmp_path: Path, rows: list[dict], name: str) -> Warehouse:
    """A fresh warehouse holding ``rows`` (bundles), loaded from ``<name>.jsonl``."""
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    wh = Warehouse(tmp_path / "wh")
    assert wh.load([str(path)]).ok
    return wh


@pytest.fixture(scope="module")
def wh(tmp_path_factory) -> Warehouse:
    w = Warehouse(tmp_path_factory.mktemp("verdicts") / "wh")
    w.load(VIEWS / "verdicts.jsonl")
    # Welch's inputs in KernelBench's own format (mean, std, num_trials, 3 significant digits),
    # A100; eager is baseline_time_torch, inductor torch_compile_inductor_default:
    #   1_w1  eager 0.002 ms (std 0.0001), inductor 0.001 ms (std 0.00005), 25 trials
    #   2_kb  eager 0.0135 ms (std 0.00001), inductor 0.00511 ms (std 0.000005), 100 trials
    w.load(VIEWS / "kernelbench")
    return w


def pair(w: Warehouse, workload: str, candidate: str) -> dict:
    rel = w.sql("SELECT * FROM speedups WHERE (workload = $w OR kernel = $k) "
                "AND candidate = $c", params={"w": workload, "k": f"level1_{workload}",
                                              "c": candidate})
    rows = [dict(zip(rel.columns, r, strict=True)) for r in rel.fetchall()]
    assert len(rows) == 1, rows
    return rows[0]


def test_welch_on_means_with_counts(wh):
    # 1_w1: inductor mean 1000 ns (sd 50), eager 2000 (sd 100), 25 trials each, each mean
    # rounded to 3 digits (a 10 ns step). Var(LN mean) = (sd/mean)^2/n + (step/mean)^2/12:
    #   inductor 0.05^2/25 + (10/1000)^2/12 = 1.0833e-4;  eager 1e-4 + (10/2000)^2/12 = 1.0208e-4
    # se = sqrt(2.1042e-4) = 0.0145057; Welch-Satterthwaite df = (2.1042e-4)^2 /
    # ((1.0833e-4^2 + 1.0208e-4^2) / 24) = 47.96 -> 47 -> t(40-59) = 2.021 (student_t).
    # Speedup 2, interval 2 x exp(-/+ 2.021 x 0.0145057) = 1.942219 .. 2.059500.
    row = pair(wh, "1_w1", "inductor")
    assert row["noise_basis"] == "welch"
    assert row["noise_df"] == 47
    assert row["speedup"] == pytest.approx(2.0)
    assert row["speedup_low"] == pytest.approx(1.942219, rel=1e-5)
    assert row["speedup_high"] == pytest.approx(2.059500, rel=1e-5)
    assert row["verdict"] == "faster"
    reverse = pair(wh, "1_w1", "eager")
    assert (reverse["verdict"], reverse["noise_basis"]) == ("slower", "welch")
    assert reverse["speedup_low"] == pytest.approx(1 / 2.059500, rel=1e-5)


def test_a_rounding_step_widens_instead_of_vetoing(wh):
    # kb, the KernelBench case: eager 13500 ns (sd 10, published to 3 digits: step 100),
    # inductor 5110 (sd 5, step 10), 100 samples each. eager's mean +/- sd (13490-13510) is
    # narrower than its step: 'below resolution', which 0.2.9 answered with no verdict.
    # Now the step adds step^2 / 12 to each mean's variance:
    #   eager    (10/13500)^2/100 + (100/13500)^2/12 = 4.57796e-6
    #   inductor (5/5110)^2/100 + (10/5110)^2/12     = 3.28711e-7
    # se = sqrt(4.90667e-6) = 0.0022151; df = 113.1 -> 113 -> t(60-119) = 2.000;
    # speedup 13500/5110 = 2.641879, interval x exp(-/+ 2 x 0.0022151) = 2.630201 .. 2.653609.
    row = pair(wh, "2_kb", "inductor")
    assert row["baseline_evidence"] == "below resolution"
    assert (row["noise_basis"], row["noise_df"]) == ("welch", 113)
    assert row["speedup"] == pytest.approx(2.641879, rel=1e-6)
    assert row["speedup_low"] == pytest.approx(2.630201, rel=1e-5)
    assert row["speedup_high"] == pytest.approx(2.653609, rel=1e-5)
    assert row["verdict"] == "faster"


def envelope() -> float:
    """The 95th percentile (linear interpolation, as PERCENTILE_CONT) of the 11 re-run
    |log changes| of verdicts()."""
    logs = sorted(abs(math.log(round(50_000 * (1 + c), 3) / 50_000)) for c in RERUN_CHANGES)
    pos = 0.95 * (len(logs) - 1)  # 9.5: halfway between the 10th and 11th smallest
    low = int(pos)
    return logs[low] + (pos - low) * (logs[low + 1] - logs[low])


def test_the_envelope_is_calibrated_on_same_version_reruns(wh):
    rows = wh.sql("SELECT source, gpu, size_decade, size_class, changes, envelope, "
                  "log_envelope, calibrated FROM noise_envelopes").fetchall()
    # The 11 re-runs of x in v1, 50 µs each: one pool (views-fixture, A100, 10-100 µs). The
    # cmp/cmp2 runs are measured once per implementation: no re-run. 0.053530 = the mean of
    # |LN(1.05)| = 0.048790 and |LN(1.06)| = 0.058269, the 10th and 11th smallest.
    assert envelope() == pytest.approx(0.0535295, rel=1e-5)
    assert rows == [("views-fixture", "a100-sxm4-80gb", 1, "10-100 µs", 11,
                     pytest.approx(math.exp(envelope()) - 1), pytest.approx(envelope()), True)]
    reruns = wh.sql("SELECT rerun, count(*) FROM rerun_changes GROUP BY rerun").fetchall()
    assert reruns == [("same version", 11)]


def test_single_timings_get_a_verdict_beyond_the_envelope(wh):
    # cmp: y 60 µs against x 50 µs, neither with a spread: LN(1.2) = 0.18232 > 0.05353 and
    # +20% > 10%: slower, by run-to-run noise. Interval of the speedup: 50/60 x exp(-/+ e).
    row = pair(wh, "cmp", "y")
    assert (row["candidate_evidence"], row["baseline_evidence"]) == ("no spread", "no spread")
    assert (row["noise_basis"], row["noise_changes"]) == ("run-to-run", 11)
    assert row["speedup_low"] == pytest.approx(50 / 60 * math.exp(-envelope()))
    assert row["speedup_high"] == pytest.approx(50 / 60 * math.exp(envelope()))
    assert row["verdict"] == "slower"
    # cmp2: 51 against 50 µs, LN(1.02) = 0.0198 inside the envelope: within noise.
    assert pair(wh, "cmp2", "y")["verdict"] == "within noise"


def test_median_and_stddev_are_a_spread(wh):
    # FlashInfer's shape: a median and a standard deviation, no mean. a: 1000 +/- 20 ns,
    # b: 1300 +/- 30: ranges 980-1020 and 1270-1330 lie apart; speedup of a 1.3, interval
    # 1270/1020 = 1.245098 .. 1330/980 = 1.357143.
    row = pair(wh, "fi", "a")
    assert row["noise_basis"] == "within-run median-stddev"
    assert row["speedup_low"] == pytest.approx(1270 / 1020)
    assert row["speedup_high"] == pytest.approx(1330 / 980)
    assert row["verdict"] == "faster"


@pytest.fixture(scope="module")
def stats(tmp_path_factory) -> Path:
    w = Warehouse(tmp_path_factory.mktemp("stats") / "wh")
    w.load(VIEWS / "statistics.jsonl")
    return w.path


def test_identical_code_is_never_firm_at_the_default_effect(stats):
    # kto_loss k1: 0.5.3 -> 0.5.3, 100 (99-101) -> 105.6 (104.6-106.6): the ranges lie apart
    # (the within-run basis: no envelope, one re-run), but +5.6% is under the 10% minimum
    # effect: 'negligible', never 'slower'; and a re-run of one version is never a regression.
    wh = Warehouse(stats)
    row = wh.sql("SELECT verdict, noise_basis, change_low, min_effect FROM trends "
                 "WHERE kernel = 'kto_loss' AND step = 2").fetchall()
    assert row == [("negligible", "within-run p20-p80", pytest.approx(104.6 / 101 - 1), 0.10)]
    # With a 5% minimum effect the same step is beyond both: slower. Still not a regression
    # (same version), in the view and in kidata.analysis.regressions.
    low = Warehouse(stats, min_effect=0.05)
    assert low.sql("SELECT verdict FROM trends WHERE kernel = 'kto_loss' AND step = 2"
                   ).fetchall() == [("slower",)]
    assert low.sql("SELECT count(*) FROM regressions WHERE kernel = 'kto_loss'"
                   ).fetchall() == [(0,)]
    assert low.regressions().filter("kernel = 'kto_loss'").fetchall() == []


def test_the_minimum_effect_is_set_per_query_per_call_and_per_environment(stats):
    query = ("SELECT verdict FROM trends WHERE kernel = 'kto_loss' AND step = 2")
    env = {"KIDATA_WAREHOUSE": str(stats), "KIDATA_MIN_EFFECT": None}

    def cli(*args: str, **extra: str) -> str:
        done = console("sql", *args, "-f", "csv", query, env={**env, **extra})
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()[1]

    assert cli() == "negligible"
    # The library's documented default is the view's own value.
    from kidata.analysis import DEFAULT_THRESHOLD
    assert Warehouse(stats).verdict_min_effect() == DEFAULT_THRESHOLD
    assert cli("--min-effect", "0.05") == "slower"
    assert cli(KIDATA_MIN_EFFECT="0.05") == "slower"
    assert cli("--min-effect", "0.2", KIDATA_MIN_EFFECT="0.05") == "negligible"
    # Per query, in a DuckDB session: the views read verdict_settings by name.
    wh = Warehouse(stats)
    con = wh.session.ready()
    con.execute("CREATE OR REPLACE TEMP VIEW verdict_settings AS SELECT 0.05 AS min_effect")
    assert con.sql(query).fetchall() == [("slower",)]
    bad = console("sql", query, env={**env, "KIDATA_MIN_EFFECT": "five"})
    assert bad.returncode == 2 and "KIDATA_MIN_EFFECT" in bad.stderr


def test_compare_judges_as_speedups_does(wh):
    # The pairing of compare (and gate) repeats speedups' noise model in Python-built SQL:
    # on the same latest runs they must give the same verdict, basis and interval.
    compared = wh.compare("implementation=eager", "implementation=inductor")
    got = {r[0]: r[1:] for r in compared.rows.select(
        "kernel, verdict, noise_basis, speedup_low, speedup_high").fetchall()}
    assert set(got) == {"level1_1_w1", "level1_2_kb"}
    for workload in ("1_w1", "2_kb"):
        row = pair(wh, workload, "inductor")
        assert got[f"level1_{workload}"] == (row["verdict"], row["noise_basis"],
                                             pytest.approx(row["speedup_low"]),
                                             pytest.approx(row["speedup_high"]))
    rr = wh.compare("implementation=x", "implementation=y")
    by = {r[0]: r[1:] for r in rr.rows.select("workload, verdict, noise_basis").fetchall()}
    assert by == {"cmp": ("slower", "run-to-run"), "cmp2": ("within noise", "run-to-run")}
    assert (rr.slower, rr.unchanged, rr.threshold) == (1, 1, 0.10)


def test_kernelbench_h100_every_pair_rests_on_welch(tmp_path):
    # KernelBench's H100 eager and inductor files (mean, std, 100 trials, 3 digits). 0.2.9
    # gave 58 of them 'below resolution' and no verdict, and called pairs 'within noise'
    # that Welch's test separates. Now every pair rests on Welch.
    wh = Warehouse(tmp_path / "wh")
    wh.load(shared("external/kernelbench/H100_Modal__baseline_time_torch.json"))
    wh.load(shared("external/kernelbench/"
                   "H100_Modal__baseline_time_torch_compile_inductor_default.json"))
    bases = wh.sql("SELECT DISTINCT noise_basis FROM speedups").fetchall()
    assert bases == [("welch",)]
    # level1_59 conv_standard_3D: inductor 2.89 ms (std 0.0129), eager 2.84 ms (std 0.00974),
    # steps 0.01 ms. Var: inductor (0.0129/2.89)^2/100 + (0.01/2.89)^2/12 = 1.1970e-6, eager
    # (0.00974/2.84)^2/100 + (0.01/2.84)^2/12 = 1.1508e-6; se 0.0015323, df 197 -> t 1.980.
    # LN(2.89/2.84) = 0.017452 +/- 0.003034: above 1, beyond noise, but +1.8% is under the
    # 10% minimum effect: 'negligible' (0.2.9: 'within noise').
    row = wh.sql("SELECT speedup, speedup_low, speedup_high, noise_df, verdict FROM speedups "
                 "WHERE kernel LIKE 'level1_59_conv%' AND candidate = 'inductor'").fetchall()
    assert row == [(pytest.approx(2.84 / 2.89), pytest.approx(0.979722, rel=1e-5),
                    pytest.approx(0.985685, rel=1e-5), 197, "negligible")]


def test_the_report_shows_the_calibration(wh, tmp_path):
    # Through the CLI, with another minimum effect: the report's noise section
    # lists the one calibrated pool (views-fixture, A100, 10-100 µs, 11 re-runs) and says
    # which minimum effect its verdicts use.
    out = tmp_path / "report.html"
    done = console("-w", wh.path, "report", "-o", out, "--min-effect", "0.05")
    assert done.returncode == 0, done.stderr
    page = out.read_text("utf-8")
    section = page.split('<section id="noise">', 1)[1].split("</section>", 1)[0]
    assert "<h2>Run-to-run noise</h2>" in section
    assert "minimum effect (5%)" in section
    assert "<td>views-fixture</td><td>a100-sxm4-80gb</td><td>10-100 µs</td>" in section
    assert '<td class="n">11</td>' in section


def test_keys_the_source_stopped_measuring_are_stale(tmp_path):
    """softmax forward on the A100, one source: workloads old (measured 2024-01-01) and new
    (2024-03-01, 60 days later), liger against torch at each. The newest softmax result is
    2024-03-01, so the old workload's pair is stale: listed, flagged, and left out of the
    summaries. liger 10 vs torch 20 at old (speedup 2), 10 vs 40 at new (speedup 4): with the
    stale pair the kernel's geometric mean would be sqrt(2 x 4) = 2.828; without it, 4."""
    from make_view_fixtures import A100, bundle, workload

    rows = []
    for wl, at, torch in (("old", "2024-01-01T00:00:00Z", 20_000),
                          ("new", "2024-03-01T00:00:00Z", 40_000)):
        work = workload(wl, "softmax")
        rows += [bundle(f"{wl}-liger", "softmax/forward", "liger", A100, 10_000, work, "f",
                        at=at, version="1"),
                 bundle(f"{wl}-torch", "softmax/forward", "torch", A100, torch, work, "f",
                        at=at, version="1")]
    wh = _loaded(tmp_path, rows, "fresh")
    assert dict(wh.sql("SELECT workload, stale FROM speedups WHERE candidate = 'liger'"
                       ).fetchall()) == {"old": True, "new": False}
    assert wh.sql("SELECT workloads, geomean_speedup FROM kernel_speedups "
                  "WHERE candidate = 'liger' AND baseline = 'torch'").fetchall() == [
        (1, pytest.approx(4.0))]
    assert wh.sql("SELECT workloads, geomean_speedup FROM speedup_summary "
                  "WHERE candidate = 'liger' AND baseline = 'torch'").fetchall() == [
        (1, pytest.approx(4.0))]


def test_staleness_is_judged_per_source_kernel_and_gpu(tmp_path):
    """A key is stale against its own source's newest result for the same kernel on the same
    GPU, not against anything newer elsewhere. softmax forward on the A100 from the fixture's
    source: workload old (2024-01-01) and new (2024-03-01, 60 days later): old is stale. Each
    other pair was measured only on 2024-01-01 and is fresh: rms_norm on the A100 (another
    kernel), softmax on the H100 (another GPU), and softmax on the A100 from another source
    (workload other), though each is 60 days older than the A100's softmax from the first
    source. Liger 10 µs against torch 20 µs everywhere."""
    from make_view_fixtures import A100, H100, bundle, workload

    old, new = "2024-01-01T00:00:00Z", "2024-03-01T00:00:00Z"
    rows = []
    for wl, kernel, gpu, at, source in (("old", "softmax", A100, old, None),
                                        ("new", "softmax", A100, new, None),
                                        ("old", "rms_norm", A100, old, None),
                                        ("old", "softmax", H100, old, None),
                                        ("other", "softmax", A100, old, "other-harness")):
        work = workload(wl, kernel)
        for implementation, ns in (("liger", 10_000), ("torch", 20_000)):
            doc = bundle(f"{wl}-{kernel}-{gpu}-{implementation}", f"{kernel}/forward",
                         implementation, gpu, ns, work, "f", at=at, version="1")
            if source:
                doc["run"]["spec"]["sourceNative"]["source"] = source
            rows.append(doc)
    wh = _loaded(tmp_path, rows, "fresh")
    stale = wh.sql("SELECT s.kernel, s.gpu = g.gpu, s.workload, s.stale FROM speedups s "
                   "CROSS JOIN (SELECT DISTINCT gpu FROM speedups WHERE workload = 'new') g "
                   "WHERE s.candidate = 'liger'").fetchall()
    assert sorted(stale) == [("rms_norm", True, "old", False), ("softmax", False, "old", False),
                             ("softmax", True, "new", False), ("softmax", True, "old", True),
                             ("softmax", True, "other", False)]


def test_a_kernel_family_counts_once(tmp_path):
    """kidata/data/families.toml puts fused_linear_grpo_loss_sequence and _token in one
    family. A100 forward, one workload each, liger against torch: sequence speedup 4, token 16,
    rms_norm 2. Family geomean of grpo sqrt(4 x 16) = 8; over the two families sqrt(8 x 2) =
    4 (counting kernels, (4 x 16 x 2)^(1/3) = 5.04 would let one operation weigh twice). Two
    families: no interval."""
    from make_view_fixtures import A100, bundle, workload

    rows = []
    for kernel, torch in (("fused_linear_grpo_loss_sequence", 4_000),
                          ("fused_linear_grpo_loss_token", 16_000), ("rms_norm", 2_000)):
        work = workload(f"w-{kernel}", kernel)
        rows += [bundle(f"{kernel}-liger", f"{kernel}/forward", "liger", A100, 1_000, work, "f",
                        at="2024-01-01T00:00:00Z"),
                 bundle(f"{kernel}-torch", f"{kernel}/forward", "torch", A100, torch, work, "f",
                        at="2024-01-01T00:00:00Z")]
    wh = _loaded(tmp_path, rows, "families")
    assert dict(wh.sql("SELECT kernel, kernel_family FROM kernel_speedups WHERE "
                       "candidate = 'liger' AND baseline = 'torch'").fetchall()) == {
        "fused_linear_grpo_loss_sequence": "fused_linear_grpo_loss",
        "fused_linear_grpo_loss_token": "fused_linear_grpo_loss", "rms_norm": "rms_norm"}
    got = wh.sql("SELECT kernels, families, geomean_speedup, interval_low, min_kernel_speedup, "
                 "max_kernel_speedup FROM speedup_summary WHERE candidate = 'liger' "
                 "AND baseline = 'torch'").fetchall()
    assert got == [(3, 2, pytest.approx(4.0), None, pytest.approx(2.0), pytest.approx(16.0))]


@pytest.mark.parametrize("clock", [(10, 0), (23, 58)], ids=["morning", "across midnight"])
def test_a_uniform_baseline_shift_is_the_sessions(tmp_path, clock):
    """jsd forward on the H100 PCIe, two sessions a month apart (releases v1 and v2, as Liger
    labels every provider). torch moved +12% at all four workloads (100 -> 112, 200 -> 224,
    300 -> 336, 400 -> 448 µs, p20/p80 at +-1%); liger, timed a minute before torch each
    time, moved +1% at w1 and w2 and +11% at w3 and w4 (it moved with torch at large sizes).

    torch w1: liger beside it moved +1%, under half of +12%: not 'shared'; but torch's three
    other workloads moved by +12% too (within half of it) and liger moved with it at w3 (+11%
    >= 6%): 'session'. torch w3: liger beside it +11%: 'shared'. No regression; shifts lists
    the four torch steps and liger's two +11% steps (slower: +11% > 10%, ranges apart).

    The same answers when each session straddles midnight (w1 at 23:59, w2-w4 at 00:00-00:02
    of the next day): results an hour apart or less are measured together whatever their
    dates (series_steps pairs steps by day before it compares their times)."""
    wh = jsd_sessions(tmp_path, [(100, 1.01, 1.12), (200, 1.01, 1.12), (300, 1.11, 1.12),
                                 (400, 1.11, 1.12)], clock)
    got = {(r[0], r[1]): r[2:] for r in wh.sql(
        "SELECT implementation, workload, verdict, attribution, session_workloads "
        "FROM trends WHERE step = 2").fetchall()}
    assert got == {
        ("torch", "w1"): ("slower", "session", 3), ("torch", "w2"): ("slower", "session", 3),
        ("torch", "w3"): ("slower", "shared", 3), ("torch", "w4"): ("slower", "shared", 3),
        # liger's +1% at w1 and w2: torch beside it moved the same way, by more: 'shared'.
        ("liger", "w1"): ("within noise", "shared", 3),
        ("liger", "w2"): ("within noise", "shared", 3),
        ("liger", "w3"): ("slower", "shared", 3), ("liger", "w4"): ("slower", "shared", 3)}
    assert wh.sql("SELECT count(*) FROM regressions").fetchall() == [(0,)]
    assert sorted(wh.sql("SELECT implementation, workload, cause FROM shifts").fetchall()) == [
        ("liger", "w3", "shared"), ("liger", "w4", "shared"), ("torch", "w1", "session"),
        ("torch", "w2", "session"), ("torch", "w3", "shared"), ("torch", "w4", "shared")]


def test_one_stray_workload_does_not_hide_a_shift_of_the_session(tmp_path):
    """The shape above with a fifth workload that did not move with the session: torch w5
    500 -> 495 µs (-1%), liger beside it 250 -> 252.5 µs (+1%); p20/p80 at +-1% as before.

    torch's five workloads moved +12%, +12%, +12%, +12%, -1%: the session's fitted effect is
    their median, +12%, which w5 cannot move. torch w1 is +12%: nothing is left for its code
    (code_change 0, within the 10% minimum effect), and liger moved with the session at w3
    (+11% >= half of 12%): 'session', as w2. Under a rule that needs every other workload to
    agree, w5 vetoes it and both +12% steps read as torch's own regressions. torch w5: -1%,
    against the session's +12%, liger beside it +1% (the other way): 'own', within noise,
    code_change 0.99 / 1.12 - 1. liger's five moved +1%, +1%, +11%, +11%, +1%: its fitted
    effect, +1%, is under the 10% minimum effect, so no shift of the session is taken out of
    liger's steps (session_change null: taking the median of noise out would move each step
    by noise); liger w5 (+1%, torch beside it the other way) is 'own', within noise."""
    wh = jsd_sessions(tmp_path, [(100, 1.01, 1.12), (200, 1.01, 1.12), (300, 1.11, 1.12),
                                 (400, 1.11, 1.12), (500, 1.01, 0.99)])
    got = {(r[0], r[1]): r[2:] for r in wh.sql(
        "SELECT implementation, workload, verdict, attribution, session_workloads "
        "FROM trends WHERE step = 2").fetchall()}
    assert got == {
        ("torch", "w1"): ("slower", "session", 4), ("torch", "w2"): ("slower", "session", 4),
        ("torch", "w3"): ("slower", "shared", 4), ("torch", "w4"): ("slower", "shared", 4),
        ("torch", "w5"): ("within noise", "own", 4),
        ("liger", "w1"): ("within noise", "shared", 4),
        ("liger", "w2"): ("within noise", "shared", 4),
        ("liger", "w3"): ("slower", "shared", 4), ("liger", "w4"): ("slower", "shared", 4),
        ("liger", "w5"): ("within noise", "own", 4)}
    assert wh.sql("SELECT count(*) FROM regressions").fetchall() == [(0,)]
    got = dict(((r[0], r[1]), r[2:]) for r in wh.sql(
        "SELECT implementation, workload, session_change, code_change FROM trends "
        "WHERE step = 2 AND workload IN ('w1', 'w5')").fetchall())
    assert got[("torch", "w1")] == (pytest.approx(0.12, rel=1e-9), pytest.approx(0, abs=1e-9))
    assert got[("torch", "w5")] == (pytest.approx(0.12, rel=1e-9),
                                    pytest.approx(0.99 / 1.12 - 1, rel=1e-9))
    assert got[("liger", "w5")] == (None, None)


def test_a_step_made_partly_by_the_session_keeps_its_codes_part(tmp_path):
    """Two sessions as above. torch moved +12% at w1-w3 and +40% at w4 (400 -> 560 µs); liger
    beside it moved +1% at w1, w2, w4 and +11% at w3.

    The two-way model's session effect for torch is the median of its four log changes,
    ln 1.12 (the middle two are both ln 1.12), echoed by liger at w3 (+11% >= half of 12%).
    torch w4: liger beside it moved +1%, under half of +40%: not 'shared'; what the session
    leaves of the step is 1.40 / 1.12 - 1 = +25% (code_change), beyond the 10% minimum
    effect: the code's, 'own', and a regression (slower: ranges at +-1% far apart; relative
    change 1.40 / 1.01 - 1 = +38.6%). torch w1 and w2: +12%, nothing left: 'session', in
    shifts. torch w3: liger beside it +11%: 'shared'.

    A vote of the other workloads could not say this: at +25% (not +40%) torch's +12% others
    are within half of the step (ln 1.25 - ln 1.12 = 0.110 <= ln 1.25 / 2 = 0.112), so all
    three agree and the step would be the session's, hiding the code's +11.6%. The model
    keeps it: 1.25 / 1.12 - 1 = 11.6% > 10%, a regression."""
    wh = jsd_sessions(tmp_path, [(100, 1.01, 1.12), (200, 1.01, 1.12), (300, 1.11, 1.12),
                                 (400, 1.01, 1.40)])
    got = {r[0]: r[1:] for r in wh.sql(
        "SELECT workload, verdict, attribution, session_change, code_change, cause FROM trends "
        "WHERE step = 2 AND implementation = 'torch'").fetchall()}
    approx = pytest.approx
    # cause: the one statement of what regressions, shifts and kidata changes put a step down
    # to ('code' for w4, the attribution for the shifts); null at step 1.
    assert got == {
        "w1": ("slower", "session", approx(0.12, rel=1e-9), approx(0, abs=1e-9), "session"),
        "w2": ("slower", "session", approx(0.12, rel=1e-9), approx(0, abs=1e-9), "session"),
        "w3": ("slower", "shared", approx(0.12, rel=1e-9), approx(0, abs=1e-9), "shared"),
        "w4": ("slower", "own", approx(0.12, rel=1e-9), approx(0.25, rel=1e-9), "code")}
    assert wh.sql("SELECT count(*) FROM trends WHERE step = 1 AND cause IS NOT NULL"
                  ).fetchall() == [(0,)]
    assert [(r[0], r[1], approx(r[2], rel=1e-9), approx(r[3], rel=1e-9)) for r in wh.sql(
        "SELECT implementation, workload, relative_change, code_change FROM regressions"
    ).fetchall()] == [("torch", "w4", 1.40 / 1.01 - 1, 0.25)]
    assert sorted(wh.sql("SELECT implementation, workload, cause FROM shifts").fetchall()) == [
        ("liger", "w3", "shared"), ("torch", "w1", "session"), ("torch", "w2", "session"),
        ("torch", "w3", "shared")]
    # kidata regressions lists the code's one and counts the four it left out as shifts.
    done = console("-w", wh.path, "regressions", "-f", "csv")
    assert done.returncode == 1, done.stderr
    assert [line.split(",")[4] for line in done.stdout.splitlines()[1:]] == ["w4"]
    assert ("1 regressions slower beyond noise and by more than 10.0%; 4 slower steps left out "
            "as shifts of the session, the environment or a re-run") in done.stderr

    (tmp_path / "at 25%").mkdir()
    wh = jsd_sessions(tmp_path / "at 25%", [(100, 1.01, 1.12), (200, 1.01, 1.12),
                                             (300, 1.11, 1.12), (400, 1.01, 1.25)])
    assert [(r[0], r[1], approx(r[2], rel=1e-9)) for r in wh.sql(
        "SELECT implementation, workload, code_change FROM regressions").fetchall()] == [
        ("torch", "w4", 1.25 / 1.12 - 1)]
    # The CLI's threshold applies to the code's part too: at 12% the +11.6% is not listed.
    assert wh.regressions(0.12).fetchall() == []
    assert len(wh.regressions(0.11).fetchall()) == 1

    # A step that moved less than its session: torch +30% at w1-w3 (liger +16% beside it at
    # w3 echoes the session) and +15% at w4 (liger beside it +1%). The session's effect is
    # ln 1.30 (median of 15, 30, 30, 30); w4 is slower (+15%, ranges apart) and its own (not
    # shared; 1.15 / 1.30 = -11.5% is left, beyond the minimum effect), but the code's part
    # is faster: no regression, in the view or through the CLI's function.
    (tmp_path / "less").mkdir()
    wh = jsd_sessions(tmp_path / "less", [(100, 1.01, 1.30), (200, 1.01, 1.30),
                                          (300, 1.16, 1.30), (400, 1.01, 1.15)])
    ((verdict, attribution, code),) = wh.sql(
        "SELECT verdict, attribution, code_change FROM trends WHERE step = 2 AND "
        "implementation = 'torch' AND workload = 'w4'").fetchall()
    assert (verdict, attribution, code) == ("slower", "own", approx(1.15 / 1.30 - 1, rel=1e-9))
    assert wh.sql("SELECT count(*) FROM regressions").fetchall() == [(0,)]
    assert wh.regressions().fetchall() == []

    # The fit is over every workload of the session, this one included: torch +12% at w1
    # and w2, +30% at w3 and w4 (liger beside it +1%, +11%, +1%, +1%). The median of the four
    # log changes is the mean of ln 1.12 and ln 1.30: sqrt(1.12 x 1.30) - 1 = +20.67%, echoed
    # by liger's +11% (>= half of it). w3 and w4 leave 1.30 / 1.2067 - 1 = +7.7%, w1 leaves
    # -7.2%: all within 10%, all the session's (w2: shared with liger). Without w3 itself,
    # w3's others (12, 12, 30) would give +12% and leave +16%: a regression the model does
    # not see.
    (tmp_path / "halves").mkdir()
    wh = jsd_sessions(tmp_path / "halves", [(100, 1.01, 1.12), (200, 1.11, 1.12),
                                            (300, 1.01, 1.30), (400, 1.01, 1.30)])
    effect = math.sqrt(1.12 * 1.30) - 1
    got = {r[0]: r[1:] for r in wh.sql(
        "SELECT workload, attribution, session_change, code_change FROM trends "
        "WHERE step = 2 AND implementation = 'torch'").fetchall()}
    assert got == {
        "w1": ("session", approx(effect, rel=1e-9), approx(1.12 / (1 + effect) - 1, rel=1e-9)),
        "w2": ("shared", approx(effect, rel=1e-9), approx(1.12 / (1 + effect) - 1, rel=1e-9)),
        "w3": ("session", approx(effect, rel=1e-9), approx(1.30 / (1 + effect) - 1, rel=1e-9)),
        "w4": ("session", approx(effect, rel=1e-9), approx(1.30 / (1 + effect) - 1, rel=1e-9))}
    assert wh.sql("SELECT count(*) FROM regressions").fetchall() == [(0,)]


def test_rates_compare_higher_is_better(tmp_path):
    """rate_speedups (issue 26, item 7): gemm forward on the A100 in TFLOP/s. triton 200
    (p20 195, p80 205), cublas 160 (158-162): triton's speedup is 200 / 160 = 1.25, its
    interval 195 / 162 = 1.203704 .. 205 / 158 = 1.297468, above 1 and beyond 10%: faster.
    As latencies the same pair would read cublas / triton; a rate reads the other way up."""
    from make_view_fixtures import A100, bundle, workload

    rows = []
    for impl, rate, low, high in (("triton", 200, 195, 205), ("cublas", 160, 158, 162)):
        b = bundle(f"gemm-{impl}", "gemm/forward", impl, A100, 1_000_000, workload("w", "gemm"),
                   "f", at="2024-01-01T00:00:00Z")
        b["run"]["spec"]["measurements"] += [
            {"metric": "throughput", "statistic": s, "unit": "TFLOP/s", "value": v}
            for s, v in (("median", rate), ("p20", low), ("p80", high))]
        rows.append(b)
    wh = _loaded(tmp_path, rows, "rates")
    got = wh.sql("SELECT candidate, unit, speedup, speedup_low, speedup_high, verdict, "
                 "noise_basis FROM rate_speedups ORDER BY candidate").fetchall()
    assert got == [
        ("cublas", "TFLOP/s", pytest.approx(0.8), pytest.approx(158 / 205),
         pytest.approx(162 / 195), "slower", "within-run p20-p80"),
        ("triton", "TFLOP/s", pytest.approx(1.25), pytest.approx(195 / 162),
         pytest.approx(205 / 158), "faster", "within-run p20-p80")]


def test_a_triton_bandwidth_report_compares_higher_is_better(tmp_path):
    # JongseoKang's layer-norm-backward perf_report (GB/s): at N = 1024, Triton 446.836360
    # and Torch 384.000001: Triton's speedup 446.836360 / 384.000001 = 1.163636; medians only,
    # so no verdict.
    wh = Warehouse(tmp_path / "wh")
    report = wh.load(shared("external/triton-perf-report/JongseoKang_layer-norm-backward.csv"),
                     settings={"gpu": "a100-sxm4-80gb", "unit": "GB/s", "kernel": "layer_norm",
                               "pass": "backward"})
    assert report.ok
    got = wh.sql("SELECT metric, speedup, verdict FROM rate_speedups WHERE candidate = "
                 "'Triton' AND workload = 'n1024'").fetchall()
    assert got == [("bandwidth", pytest.approx(446.836360 / 384.000001), "no spread")]
    assert wh.sql("SELECT count(*) FROM speedups").fetchall() == [(0,)]  # no latencies


def test_compare_of_two_sessions_leaves_the_sessions_shift_out(tmp_path):
    """The issue's symptom: `kidata compare` of one implementation's two versions exited 1 when
    the session moved every key. Two sessions as in the tests above, torch +12% at w1-w4,
    liger beside it +1%, +1%, +11%, +11%: compare torch v1 -> v2 pairs the four keys, each
    slower by the verdict rule (+12%, ranges +-1% apart); the session's effect over them is
    their median, +12%, shared by 3 others and echoed by liger (+11% >= 6%), beyond 10%:
    each key is the session's (code_change 0), counted as shifted, and compare exits 0.
    With +40% at w4 the effect stays +12% and w4's code's part, 1.40 / 1.12 - 1 = 25%, is
    slower: exit 1, one key slower, three shifted. liger vs torch (two implementations)
    is not read as sessions."""
    wh = jsd_sessions(tmp_path, [(100, 1.01, 1.12), (200, 1.01, 1.12), (300, 1.11, 1.12),
                                 (400, 1.11, 1.12)])
    result = wh.compare("torch,version=v1", "torch,version=v2")
    assert (result.shared, result.slower, result.shifted) == (4, 0, 4)
    rows = result.rows.select("workload, verdict, session_change, code_change, session_shift"
                              ).fetchall()
    assert [(w, v, s) for w, v, _, _, s in rows] == [(f"w{i}", "slower", True)
                                                     for i in range(1, 5)]
    assert all(sc == pytest.approx(0.12, rel=1e-9) and cc == pytest.approx(0, abs=1e-9)
               for _, _, sc, cc, _ in rows)
    done = console("-w", wh.path, "compare", "torch,version=v1", "torch,version=v2", "-f", "csv")
    assert done.returncode == 0, done.stderr
    assert "4 shared keys: 0 slower" in done.stderr
    assert "4 slower with their session (session_shift, code_change)" in done.stderr

    (tmp_path / "partial").mkdir()
    wh = jsd_sessions(tmp_path / "partial", [(100, 1.01, 1.12), (200, 1.01, 1.12),
                                             (300, 1.11, 1.12), (400, 1.01, 1.40)])
    result = wh.compare("torch,version=v1", "torch,version=v2")
    assert (result.shared, result.slower, result.shifted, result.regressed) == (4, 1, 3, True)
    ((code,),) = result.rows.filter("workload = 'w4'").select("code_change").fetchall()
    assert code == pytest.approx(0.25, rel=1e-9)
    done = console("-w", wh.path, "compare", "torch,version=v1", "torch,version=v2")
    assert done.returncode == 1, done.stderr
    across = wh.compare("torch", "liger")
    assert across.shifted == 0
    assert across.rows.filter("session_change IS NOT NULL OR session_shift").fetchall() == []


def test_compare_reads_the_echo_in_the_hour_beside_the_pairs(tmp_path):
    """compare reads the session model's results in the hours of the pairs' runs and the
    hours beside them only (analysis.sessions: every passed result of the warehouse ran it out
    of memory at 10M runs). The test above with liger timed 45 minutes after torch: torch at
    10:41-10:44, liger at 11:26-11:29, each within the hour of its workload's pair, in an hour
    no pair is in. Its echo (+11%) still makes the four keys the session's."""
    wh = jsd_sessions(tmp_path, [(100, 1.01, 1.12), (200, 1.01, 1.12), (300, 1.11, 1.12),
                                 (400, 1.11, 1.12)], clock=(10, 40), liger_later=45 * 60)
    assert wh.sql("SELECT DISTINCT implementation, hour(observed_at) FROM runs ORDER BY 1"
                  ).fetchall() == [("liger", 11), ("torch", 10)]
    result = wh.compare("torch,version=v1", "torch,version=v2")
    assert (result.shared, result.slower, result.shifted) == (4, 0, 4)
    result = wh.gate("torch,version=v1", "torch,version=v2", sessions=True)
    assert (result.shared, result.slower, result.shifted) == (4, 0, 4)


def test_compare_and_gate_pair_each_sides_latest_run_with_a_latency(tmp_path):
    """Each side's run of a key is its latest passed run with a latency center (greatest
    observed_at, none last, then the greatest run id, as latest_latencies), chosen from the runs
    before any statistics are worked out (analysis.pairs). liger on jsd w1, version v2: a and b
    at 10:00 (b wins the tie on its run id), c with no time (last), d later but failed, e
    latest but a memory run (no latency). v1: one run at 100 µs. So b, 120 µs: 1.2."""
    import json

    work = workload_doc("w1", "jsd")

    def run(name, us, at, version, status="passed"):
        return bundle(name, "jsd/forward", "liger", "NVIDIA H100 PCIe", us * 1000, work, "f",
                      p20=us * 990, p80=us * 1010, at=at, version=version, status=status)

    memory = run("k-v2-e", 700, "2024-02-01T12:00:00Z", "v2")
    memory["run"]["spec"]["timing"] = {}
    memory["run"]["spec"]["measurements"] = [
        {"metric": "memory", "statistic": "median", "unit": "MB", "value": 700.0}]
    rows = [run("k-v1", 100, "2024-01-01T09:00:00Z", "v1"),
            run("k-v2-a", 110, "2024-02-01T10:00:00Z", "v2"),
            run("k-v2-b", 120, "2024-02-01T10:00:00Z", "v2"),
            run("k-v2-c", 300, None, "v2"),
            run("k-v2-d", 500, "2024-02-01T11:00:00Z", "v2", status="failed"), memory]
    # a and b in two loads, in either order: the same answer (a tie is not settled by the
    # order the runs are read in).
    b_run = rows.pop(2)
    for order, loads in (("b first", [[b_run], rows]), ("b last", [rows, [b_run]])):
        wh = Warehouse(tmp_path / order)
        for i, runs in enumerate(loads):
            path = tmp_path / f"{order}-{i}.jsonl"
            path.write_text("".join(json.dumps(r) + "\n" for r in runs))
            assert wh.load([str(path)]).ok
        assert wh.sql("SELECT count(*) FROM runs").fetchall() == [(6,)]
        result = wh.compare("liger,version=v1", "liger,version=v2")
        assert [r[6:9] + r[13:15] for r in result.rows.fetchall()] == [
            (100.0, 120.0, pytest.approx(1.2), "k-v1", "k-v2-b")], order
        # The other way round too (each side is chosen alone), and by the gate.
        back = wh.compare("liger,version=v2", "liger,version=v1")
        assert [r[13:15] for r in back.rows.fetchall()] == [("k-v2-b", "k-v1")], order
        gate = wh.gate("liger,version=v1", "liger,version=v2")
        assert gate.rows.select("baseline_run_id, candidate_run_id").fetchall() == [
            ("k-v1", "k-v2-b")], order


def test_the_gate_leaves_a_sessions_shift_out_when_asked(tmp_path):
    """`kidata gate --sessions` applies compare's session model (the test above): torch +12%
    at four workloads with liger beside it moving +1%, +1%, +11%, +11% fails the plain gate
    (4 slower, exit 1) and passes with --sessions (4 'session shift', listed, exit 0); with
    +40% at w4 the gate still fails on w4 (its code's part is +25%), three shifts left out."""
    wh = jsd_sessions(tmp_path, [(100, 1.01, 1.12), (200, 1.01, 1.12), (300, 1.11, 1.12),
                                 (400, 1.11, 1.12)])
    plain = wh.gate("torch,version=v1", "torch,version=v2")
    assert (plain.slower, plain.shifted, plain.exit_code) == (4, 0, 1)
    done = console("-w", wh.path, "gate", "torch,version=v1", "torch,version=v2", "--sessions",
                   "-f", "csv")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    outcome = lines[0].split(",").index("outcome")
    assert [line.split(",")[outcome] for line in lines[1:]] == ["session shift"] * 4
    assert "0 slower, 0 faster, 0 unchanged, 0 without a verdict (4 slower with their " \
           "session left out)" in done.stderr

    (tmp_path / "partial").mkdir()
    wh = jsd_sessions(tmp_path / "partial", [(100, 1.01, 1.12), (200, 1.01, 1.12),
                                             (300, 1.11, 1.12), (400, 1.01, 1.40)])
    result = wh.gate("torch,version=v1", "torch,version=v2", sessions=True)
    assert (result.slower, result.shifted, result.exit_code) == (1, 3, 1)
    assert result.rows.filter("outcome = 'slower'").select("workload").fetchall() == [("w4",)]
    assert "3 slower with their session left out" in result.markdown()
