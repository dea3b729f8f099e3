"""Crash safety: a load killed or failing at any moment is fully in or fully out, and running
it again completes it exactly.

Real processes (``python -m kidata``) are killed with SIGKILL after varying delays and at
named points of the commit (``KIDATA_FAULT=<point> KIDATA_FAULT_ACTION=kill``); exceptions and
a full disk are raised at the same points in-process. After each: ``kidata check``, what
kidata's views show, what a plain Parquet reader (DuckDB on the globs, no kidata code) shows,
then the same load again and exact counts.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from runs_factory import write_runs

from kidata import Warehouse

# The slow lane (kills loads and compactions at every step); `pytest -m "not slow"` skips it.
pytestmark = pytest.mark.slow

DATA = Path(__file__).parents[1] / "data"
SEEDS = DATA / "seeds"
# Loading the three seeds adds 26 runs (2 Liger seeds + 24 trainkernel runs: 8 held_out rows
# × 2 implementations + 8 calibration rows) with 30 measurements (3 per Liger run: median,
# p20, p80; 1 per trainkernel run: the median) and 8 published ratios.
SEED_RUNS, SEED_MEASUREMENTS = 26, 2 * 3 + 24


def kidata(wh: Path, *args: str, env: dict | None = None, timeout: float = 120, **kw):
    return subprocess.run([sys.executable, "-m", "kidata", "-w", str(wh), *args],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, **kw)


def big_input(path: Path, n: int) -> Path:
    """``n`` runs (3 measurements each), then one line of broken JSON (a reject)."""
    return write_runs(path, range(n), bad_line=True)


def visible(wh_path: Path) -> dict[str, int]:
    """Row counts through kidata's views (the snapshot of committed loads)."""
    wh = Warehouse(wh_path)
    return {t: wh.sql(f"select count(*) from {t}").fetchall()[0][0]
            for t in ("runs", "measurements", "rejects", "loads")}


def plain(wh_path: Path, table: str, column: str) -> set:
    """What another engine sees: the values of one column over the table's Parquet files."""
    files = sorted((wh_path / table).glob("*.parquet"))
    if not files:
        return set()
    return {r[0] for r in duckdb.sql(
        f"select {column} from read_parquet({[str(f) for f in files]})").fetchall()}


def assert_consistent(wh_path: Path, complete: dict[str, int]) -> None:
    """After any interruption: the load is wholly visible or wholly not; for a plain reader
    no run lacks its measurements and no file is half-written; no identity appears twice."""
    seen = visible(wh_path)
    assert seen in ({"runs": 0, "measurements": 0, "rejects": 0, "loads": 0}, complete), seen
    assert plain(wh_path, "runs", "run_id") <= plain(wh_path, "measurements", "run_id")
    report = Warehouse(wh_path).check()
    pending = [p for p in report.problems if "stopped after its commit point" in p]
    assert report.problems == pending, report.problems  # nothing but a commit to complete
    assert len(pending) <= 1


def assert_rerun_completes(wh_path: Path, inputs: list[str], complete: dict[str, int]) -> None:
    report = Warehouse(wh_path).load(inputs)
    assert report.committed
    assert visible(wh_path) == complete
    assert Warehouse(wh_path).check().problems == []
    assert not any((wh_path / "_kidata" / "staging").iterdir())
    assert not any((wh_path / "_kidata" / "journal").iterdir())
    # Every run exactly once, also for a plain reader: 26 seed runs in one file.
    assert len(plain(wh_path, "runs", "run_id")) == complete["runs"]


SEEDS_COMPLETE = {"runs": SEED_RUNS, "measurements": SEED_MEASUREMENTS, "rejects": 0, "loads": 1}
BEFORE = ["after-write:measurements", "after-write:runs", "before-journal"]
AFTER = ["after-journal", "after-move:measurements", "after-move:runs", "after-move:loads"]


def start(wh: Path, *args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "kidata", "-w", str(wh), *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, **(env or {})})


# Killed: between writing two tables' final files; at the commit point; between renaming
# measurements and runs (a plain reader sees the measurements only); after renaming runs (a
# plain reader sees the runs, kidata does not); after the marker. The other points are
# covered in-process by the exception tests below.
KILLED = ["after-write:runs", "after-journal", "after-move:measurements", "after-move:runs",
          "after-move:loads"]


def test_killed_at_each_step_of_a_commit(tmp_path: Path):
    # One process per point, all at once (each on its own warehouse), to keep the test short.
    procs = {point: start(tmp_path / point.replace(":", "-"), "load", str(SEEDS),
                          env={"KIDATA_FAULT": point, "KIDATA_FAULT_ACTION": "kill"})
             for point in KILLED}
    for point, proc in procs.items():
        assert proc.wait(timeout=120) == -signal.SIGKILL, point
    for point in procs:
        wh = tmp_path / point.replace(":", "-")
        assert_consistent(wh, SEEDS_COMPLETE)
        # kidata's views never show a killed commit before it is completed: its marker (the
        # loads row) is renamed last, after the kill at any of these points.
        assert visible(wh)["runs"] == (SEED_RUNS if point == "after-move:loads" else 0), point
        journal = list((wh / "_kidata" / "journal").glob("*.json"))
        assert len(journal) == (1 if point in AFTER else 0), point
        assert_rerun_completes(wh, [str(SEEDS)], SEEDS_COMPLETE)


def test_check_repair_completes_a_killed_commit(tmp_path: Path, cli, monkeypatch):
    wh = tmp_path / "wh"
    kidata(wh, "load", str(SEEDS), env={"KIDATA_FAULT": "after-move:runs",
                                        "KIDATA_FAULT_ACTION": "kill"})
    # A plain reader sees the runs already (moved before the kill), kidata's views do not.
    assert len(plain(wh, "runs", "run_id")) == SEED_RUNS
    assert visible(wh)["runs"] == 0
    monkeypatch.setenv("KIDATA_WAREHOUSE", str(wh))
    found = cli("check")
    assert found.code == 1
    assert "stopped after its commit point and is not complete yet" in found.err
    fixed = cli("check", "--repair")
    assert fixed.code == 0, fixed.err
    assert "repaired: completed the interrupted commit of load" in fixed.out
    assert visible(wh) == SEEDS_COMPLETE


@pytest.mark.parametrize("point", BEFORE)
def test_an_exception_before_the_commit_point_leaves_nothing(point, cli, wh_path, monkeypatch):
    monkeypatch.setenv("KIDATA_FAULT", point)
    result = cli("load", SEEDS)
    assert result.code == 1
    assert result.err == f"Error: injected fault at {point}\n"
    assert visible(wh_path)["runs"] == 0
    assert not list((wh_path / "runs").glob("*"))
    assert not any((wh_path / "_kidata" / "staging").iterdir())
    monkeypatch.delenv("KIDATA_FAULT")
    assert_rerun_completes(wh_path, [str(SEEDS)], SEEDS_COMPLETE)


@pytest.mark.parametrize("point", AFTER)
def test_an_exception_after_the_commit_point_is_completed_at_once(point, cli, wh_path,
                                                                   monkeypatch):
    monkeypatch.setenv("KIDATA_FAULT", point)
    result = cli("load", SEEDS)
    assert result.code == 0
    assert f"was interrupted (injected fault at {point}) and has been completed" in result.err
    monkeypatch.delenv("KIDATA_FAULT")
    assert visible(wh_path) == SEEDS_COMPLETE
    again = Warehouse(wh_path).load([str(SEEDS)])
    assert sum(again.added.values()) == 0 and again.duplicates == SEED_RUNS  # nothing twice
    assert visible(wh_path) == SEEDS_COMPLETE


def test_a_full_disk_while_writing_the_final_files(cli, wh_path, monkeypatch):
    monkeypatch.setenv("KIDATA_FAULT", "write-final:runs")
    monkeypatch.setenv("KIDATA_FAULT_ACTION", "enospc")
    result = cli("load", SEEDS)
    assert result.code == 1
    assert result.err.startswith("Error: load ")
    assert ("failed and committed nothing: [Errno 28] No space left on device: "
            "'<fault write-final:runs>'") in result.err
    assert visible(wh_path)["runs"] == 0
    assert not any((wh_path / "_kidata" / "staging").iterdir())


def _limit_file_size() -> None:
    # A real write failure from the OS: files may not grow past 16 KiB (EFBIG, like ENOSPC).
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (16 * 1024, 16 * 1024))


def test_a_real_write_failure_while_staging_commits_nothing(tmp_path: Path):
    source = big_input(tmp_path / "big.jsonl", 1000)  # staging files well over 16 KiB
    wh = tmp_path / "wh"
    result = kidata(wh, "load", str(source), preexec_fn=_limit_file_size)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "failed and committed nothing" in result.stderr
    assert "File too large" in result.stderr
    assert visible(wh)["runs"] == 0
    # The same load, with room to write, completes: 1000 runs × 3 measurements, 1 reject.
    assert_rerun_completes(wh, [str(source)], {"runs": 1000, "measurements": 3000,
                                               "rejects": 1, "loads": 1})


def _started_staging(wh: Path, proc: subprocess.Popen) -> float:
    """Wait until the load has created its staging folder (it is past starting Python and
    reading its arguments); returns that moment."""
    staging = wh / "_kidata" / "staging"
    while proc.poll() is None:
        if staging.is_dir() and any(staging.iterdir()):
            break
        time.sleep(0.005)
    return time.monotonic()


def test_loads_killed_after_varying_delays(tmp_path: Path):
    """SIGKILL at spread-out moments of real loads: whatever the moment, the warehouse is
    consistent, and the same load run again gives exact counts."""
    n = 600
    source = big_input(tmp_path / "big.jsonl", n)
    complete = {"runs": n, "measurements": 3 * n, "rejects": 1, "loads": 1}
    # How long a load takes once it has started staging (startup time varies too much).
    proc = start(tmp_path / "timing", "load", str(source))
    began = _started_staging(tmp_path / "timing", proc)
    assert proc.wait(timeout=120) == 1  # one reject
    duration = time.monotonic() - began
    killed = []
    for i, fraction in enumerate((0.1, 0.4, 0.7, 0.95)):
        wh = tmp_path / f"wh{i}"
        proc = start(wh, "load", str(source))
        began = _started_staging(wh, proc)
        time.sleep(max(0.0, began + duration * fraction - time.monotonic()))
        proc.send_signal(signal.SIGKILL)
        killed.append(proc.wait(timeout=60) == -signal.SIGKILL)
        assert_consistent(wh, complete)
        assert_rerun_completes(wh, [str(source)], complete)
    print(f"load took {duration:.2f} s after staging began; killed: {killed}")
    assert sum(killed) >= 2  # most kills landed while the load was running


def test_a_commit_whose_staged_file_was_deleted_is_undone(tmp_path: Path, cli, monkeypatch):
    """Recovery cannot finish a commit whose staged files someone deleted: it undoes it
    instead (removes what was already renamed), so the load is still all or nothing."""
    wh = tmp_path / "wh"
    kidata(wh, "load", str(SEEDS), env={"KIDATA_FAULT": "after-move:measurements",
                                        "KIDATA_FAULT_ACTION": "kill"})
    [staging] = [p for p in (wh / "_kidata" / "staging").iterdir() if p.is_dir()]
    assert len(list((wh / "measurements").glob("*.parquet"))) == 1  # already renamed
    for leftover in (staging / "final").iterdir():
        leftover.unlink()  # runs, published, loads: gone before they were renamed
    monkeypatch.setenv("KIDATA_WAREHOUSE", str(wh))
    fixed = cli("check", "--repair")
    assert fixed.code == 0, fixed.err
    assert (f"repaired: undid load {staging.name}: its staged file "
            f"_kidata/staging/{staging.name}/final/") in fixed.out
    for table in ("environments", "protocols", "workloads", "measurements", "runs", "loads"):
        assert not list((wh / table).glob("*.parquet")), table
    assert_rerun_completes(wh, [str(SEEDS)], SEEDS_COMPLETE)


def test_a_commit_that_enriches_stored_runs_killed_after_its_marker(tmp_path: Path):
    """A load whose duplicate carries more documents replaces the stored run's file after its
    commit marker (docs/guarantees.md). Killed between the two, readers see the stored run
    (whole and consistent) and the next writer completes the replacement."""
    import json

    from runs_factory import bundle
    from test_properties import with_documents

    wh = tmp_path / "wh"
    poor, rich = tmp_path / "poor.jsonl", tmp_path / "rich.jsonl"
    poor.write_text(json.dumps(bundle(0)) + "\n")
    rich.write_text(json.dumps(with_documents(0, True)) + "\n")
    assert Warehouse(wh).load([str(poor)]).ok
    stored = Warehouse(wh).sql("SELECT workload_id FROM runs").fetchall()
    proc = kidata(wh, "load", str(rich), env={"KIDATA_FAULT": "after-move:loads",
                                               "KIDATA_FAULT_ACTION": "kill"})
    assert proc.returncode == -signal.SIGKILL
    # Its marker is in place, the replacement of the stored runs file not yet.
    assert Warehouse(wh).sql("SELECT count(*) FROM loads").fetchall() == [(2,)]
    assert Warehouse(wh).sql("SELECT workload_id FROM runs").fetchall() == stored
    report = Warehouse(wh).check(repair=True)
    assert any("completed the interrupted commit" in line for line in report.repaired)
    assert report.problems == []
    [(workload, implementation)] = Warehouse(wh).sql(
        "SELECT workload_id, implementation_id FROM runs").fetchall()
    assert workload == with_documents(0, True)["run"]["spec"]["workloadDigest"]
    assert implementation == with_documents(0, True)["run"]["spec"]["implementationDigest"]
    assert len(plain(wh, "runs", "run_id")) == 1  # still one run, for a plain reader too
