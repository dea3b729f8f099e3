"""Change points over the whole history (issue 26, item 4): ``kidata changes`` finds where a
series' level moved from all its results at once (asv's L1 step objective, solved exactly;
docs/statistics.md section 4), on hand-built series whose answers are plain, and the batched
solver against ruptures' PELT on generated ones.

rms_norm forward on the A100, implementation x, one result a day (µs):

    a  100, 100.5, 99.5, 100.2, 99.8, 100.3, 99.7, 100 (v1), then the same x 1.25 (v2):
       one change, +25%, from level 100 (the median of the first eight) to 125
    b  200 x 12 with +-0.5% wiggle, and one 260 at day 6 (v1 throughout): an outlier, no change
    c  100, 101, 102, ... 109 (+1 µs a day): a slow drift; no single step is a change beyond
       the 10% minimum effect
    d  100 x 6, 105 x 6 (v1, v2): +5%, under the 10% minimum effect; listed at 3%
    e  100 x 6, 130 x 6, 100 x 6 (v1, v2, v3): a regression and its fix, +30% then -23.08%
"""

from __future__ import annotations

import json
import math

import pytest
from conftest import console

from kidata import Warehouse

WIGGLE = (1.0, 1.005, 0.995, 1.002, 0.998, 1.003, 0.997, 1.0, 1.004, 0.996, 1.001, 0.999)


def series() -> dict[str, list[tuple[float, str]]]:
    """workload -> [(latency µs, version)] in time order."""
    return {
        "a": [(100 * w, "v1") for w in WIGGLE[:8]] + [(125 * w, "v2") for w in WIGGLE[:8]],
        "b": [(260.0 if i == 6 else 200 * w, "v1") for i, w in enumerate(WIGGLE)],
        "c": [(100.0 + i, "v1") for i in range(10)],
        "d": [(100 * w, "v1") for w in WIGGLE[:6]] + [(105 * w, "v2") for w in WIGGLE[:6]],
        "e": [(100 * w, "v1") for w in WIGGLE[:6]] + [(130 * w, "v2") for w in WIGGLE[:6]]
        + [(100 * w, "v3") for w in WIGGLE[6:12]],
    }


@pytest.fixture(scope="module")
def wh(tmp_path_factory) -> Warehouse:
    from make_view_fixtures import A100, bundle, workload

    rows = []
    for name, points in series().items():
        work = workload(name, "rms_norm")
        for day, (us, version) in enumerate(points):
            rows.append(bundle(f"cp-{name}-{day:02d}", "rms_norm/forward", "x", A100,
                               round(us * 1000, 3), work, "cp", version=version,
                               at=f"2026-01-{day + 1:02d}T00:00:00Z"))
    folder = tmp_path_factory.mktemp("changes")
    path = folder / "series.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    w = Warehouse(folder / "wh")
    assert w.load([str(path)]).ok
    return w


def found(result) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    for workload, before, after, points_before, points_after, change, direction, same in \
            result.rows.select("workload, previous_version, version, points_before, "
                               "points_after, change, direction, same_version").fetchall():
        out.setdefault(workload, []).append(
            (before, after, points_before, points_after, pytest.approx(change, abs=1e-9),
             direction, same))
    return out


def test_levels_moved_beyond_the_minimum_effect(wh):
    result = wh.changes()
    assert (result.series, result.min_effect) == (5, 0.10)
    assert found(result) == {
        # a: medians 100 and 125 (the wiggle's median is 1.0): +25%
        "a": [("v1", "v2", 8, 8, 0.25, "slower", False)],
        # e: 100 -> 130 -> 100. A level is the median of the log latencies: with six results,
        # the geometric mean of the two middle ones. WIGGLE[:6]'s middle two are 1.0 and 1.002,
        # so the first two levels are sqrt(100 x 100.2) and sqrt(130 x 130.26): +30%;
        # WIGGLE[6:12]'s are 0.999 and 1.0: sqrt(99.9 x 100) / sqrt(130 x 130.26) - 1 =
        # -0.231922.
        "e": [("v1", "v2", 6, 6, 0.30, "slower", False),
              ("v2", "v3", 6, 6, math.sqrt(99.9 * 100) / math.sqrt(130 * 130.26) - 1,
               "faster", False)],
    }
    assert (result.found, result.slower) == (3, 2)


def test_a_smaller_minimum_effect_lists_the_small_step(wh):
    # d: 105 / 100 - 1 = +5% (both segments' wiggle is WIGGLE[:6]: the same middle two).
    assert found(wh.changes(min_effect=0.03))["d"] == [("v1", "v2", 6, 6, 0.05, "slower",
                                                         False)]


def test_the_cli_prints_the_changes(wh):
    done = console("-w", wh.path, "changes", "-f", "csv")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("kernel,pass,implementation,variant,workload,gpu,family,run_id,")
    assert [line.split(",")[4] for line in lines[1:]] == ["a", "e", "e"]
    assert ("3 change points in 5 series (2 slower, 2 of them the code's) beyond the 10.0% "
            "minimum effect") in done.stderr
    bad = console("-w", wh.path, "changes", "--min-points", "2")
    assert bad.returncode == 2 and "--min-points must be a whole number >= 4" in bad.stderr


def test_each_change_point_names_its_cause(tmp_path):
    """jsd forward on the H100 PCIe, torch and liger at four workloads, one session a day for
    12 days (v1 for days 1-6, v2 after; liger timed a second before torch, workload i at
    i minutes past ten), each series' days 1-6 and 7-12 scaled by WIGGLE[:6]. On day 7 torch
    moved +50% at w1 and +20% at w2-w4; liger +20% at w4 only.

    Each change point is from level 100 x base to its factor (both segments' middle two are
    WIGGLE[:6]'s, so the change is the factor exactly), and is attributed by the trends step
    from day 6 to day 7, where every series moved by its factor / 1.003 (WIGGLE[5] -> [0]):
    - torch w4 and liger w4 moved together: 'shared';
    - torch's session effect is the median of its four steps, ln(1.2 / 1.003) (echoed by
      liger w4): w2 and w3 are the session's (nothing left), 'session';
    - torch w1: 1.5 / 1.2 - 1 = +25% is left, beyond the 10% minimum effect: 'code'.
    liger w1-w3 never moved: no change point."""
    from make_view_fixtures import bundle, workload

    factors = {"torch": (1.5, 1.2, 1.2, 1.2), "liger": (1.0, 1.0, 1.0, 1.2)}
    rows = []
    for day in range(12):
        for i in range(4):
            for second, impl in enumerate(("liger", "torch")):
                base = (i + 1) * 100.0 * (0.5 if impl == "liger" else 1.0)
                us = base * (factors[impl][i] if day >= 6 else 1.0) * WIGGLE[day % 6]
                rows.append(bundle(
                    f"{impl}-w{i + 1}-{day:02d}", "jsd/forward", impl, "NVIDIA H100 PCIe",
                    round(us * 1000, 3), workload(f"w{i + 1}", "jsd"), "s",
                    version="v1" if day < 6 else "v2",
                    at=f"2026-02-{day + 1:02d}T10:{i + 1:02d}:{second:02d}Z"))
    path = tmp_path / "sessions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    w = Warehouse(tmp_path / "wh")
    assert w.load([str(path)]).ok

    result = w.changes()
    got = {(impl, work): (pytest.approx(change, abs=1e-9), cause, facts)
           for impl, work, change, cause, facts in result.rows.select(
               "implementation, workload, change, cause, changed_facts").fetchall()}
    assert got == {("torch", "w1"): (0.5, "code", None), ("torch", "w2"): (0.2, "session", None),
                   ("torch", "w3"): (0.2, "session", None), ("torch", "w4"): (0.2, "shared", None),
                   ("liger", "w4"): (0.2, "shared", None)}
    assert (result.series, result.found, result.slower, result.code_slower) == (8, 5, 5, 1)
    done = console("-w", w.path, "changes", "-f", "csv")
    assert done.returncode == 0, done.stderr
    assert "5 change points in 8 series (5 slower, 1 of them the code's)" in done.stderr


def generated_series(count: int, seed: int) -> list[list[float]]:
    """Log latencies of 4-40 results: noise of three sizes, up to two steps, outliers, and a
    third of them on a coarse grid, so that segment costs tie."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        n = int(rng.integers(4, 41))
        y = rng.normal(0.0, float(rng.choice([0.002, 0.02, 0.1])), n)
        for _ in range(int(rng.integers(0, 3))):
            y[int(rng.integers(1, n)):] += float(rng.choice([-0.3, -0.1, 0.1, 0.3]))
        if i % 3 == 0:
            y = np.round(y * 50) / 50
        if i % 5 == 0:
            y[int(rng.integers(0, n))] += 0.5
        out.append([float(v) for v in y])
    return out


@pytest.mark.slow  # 800 generated series solved three ways, against ruptures
def test_the_batched_solver_finds_what_ruptures_pelt_finds(monkeypatch):
    """Series up to BATCH_MAX_POINTS results are solved by the batched optimal partitioning,
    longer ones by ruptures' PELT (the method's reference implementation): on 800 generated
    series both give the same change points, ties included."""
    import numpy as np
    import ruptures

    from kidata.query import changes as ch

    series = generated_series(800, seed=20261203)

    def reference(y: list[float]) -> list[int]:
        penalty = ch.PENALTY_FACTOR * ch.robust_sigma(y) * math.log(len(y))
        algo = ruptures.Pelt(model="l1", min_size=ch.MIN_SEGMENT, jump=1).fit(np.asarray(y))
        return [b for b in algo.predict(pen=penalty) if b < len(y)]

    expected = [reference(y) for y in series]
    assert sum(map(len, expected)) > 300  # change points to agree on, not empty lists
    with monkeypatch.context() as patch:
        # Every one of these series is solved batched: none reaches ruptures.
        patch.setattr(ch, "_pelt", lambda y: pytest.fail(f"a series of {len(y)} went to PELT"))
        assert ch.all_breakpoints(series) == expected
        # Several chunks of one length (the solver holds a bounded number of segment costs).
        patch.setattr(ch, "_BATCH_CELLS", 5_000)
        assert ch.all_breakpoints(series) == expected
    # Longer series go to ruptures (here, every series over 20 results).
    monkeypatch.setattr(ch, "BATCH_MAX_POINTS", 20)
    assert ch.all_breakpoints(series) == expected


def test_streamed_in_small_batches_and_chunks_the_answers_are_the_same(wh, monkeypatch):
    """The series stream from DuckDB in Arrow batches and are solved a chunk at a time
    (kidata/query/changes.py): with 5-row batches (every series spans several) and chunks of
    one series each, every change point and its row are as with one batch and one chunk."""
    import kidata.query.changes as ch

    def rows():
        return wh.changes(min_effect=0.03).rows.order("ALL").fetchall()

    whole = rows()
    monkeypatch.setattr(ch, "READ_BATCH_ROWS", 5)
    monkeypatch.setattr(ch, "CHUNK_POINTS", 1)
    assert rows() == whole
    assert {r[4] for r in whole} >= {"a", "d", "e"}  # d's +5% is listed at 3%
    # Batches of 5 rows and groupby across them: no series is cut (a cut would add a series
    # and lose or move change points).
    assert wh.changes(min_effect=0.03).series == 5
    # A series is searched when it has min_points results, counted as it streams by across
    # the batches: a has 16, b 12, c 10, d 12, e 18.
    assert [wh.changes(min_points=n).series for n in (10, 11, 13, 17, 18, 19)] == \
        [5, 4, 2, 1, 1, 0]
    assert {r[4] for r in wh.changes(min_effect=0.03, min_points=17).rows.fetchall()} == {"e"}


def test_the_reports_regressions_table_comes_in_the_order_kidata_regressions_prints(wh):
    """The regressions view has no order: the report's table asks for `kidata regressions`'
    (at 1M runs two reports of one warehouse listed the same 221 rows in different orders).
    Here a and e each step +25-30% from v1 to v2: two regressions, a's first."""
    from kidata.query import analysis
    from kidata.query.present import data

    table = data.regressions(wh, data.Filters())
    printed = analysis.regressions(wh, columns=("workload", "run_id")).fetchall()
    assert list(zip(table["workload"], table["run_id"], strict=True)) == printed
    assert [w for w, _ in printed] == ["a", "e"]


@pytest.mark.parametrize("limit", ["300MB", "none"])
def test_the_sort_runs_under_a_share_of_the_sessions_memory_limit(wh, monkeypatch, limit):
    """DuckDB sorts every timed latency for the search while Python holds its own beside it:
    the sort runs under changes.SORT_MEMORY_SHARE of the session's limit (300MB: DuckDB shows
    286.1 MiB, two thirds of it 190.7 MiB), which is set back after it; under
    KIDATA_QUERY_MEMORY=none (DuckDB's own limit) nothing is lowered. The same answers."""
    from kidata.query import changes

    monkeypatch.setenv("KIDATA_QUERY_MEMORY", limit)
    w = Warehouse(wh.path)

    def shown() -> str:
        return w.sql("SELECT current_setting('memory_limit')").fetchall()[0][0]

    full = shown()
    expected = found(wh.changes())
    during = []
    series_of = changes._series

    def recording(db, min_points):
        during.append(shown())  # before the sorted rows stream: a query of its own
        yield from series_of(db, min_points)

    monkeypatch.setattr(changes, "_series", recording)
    assert found(w.changes()) == expected
    assert during == (["190.7 MiB"] if limit == "300MB" else [full])
    assert shown() == full == ("286.1 MiB" if limit == "300MB" else full)
