"""Shared fixtures: sample data paths, a fresh warehouse, and an in-process CLI runner."""

from __future__ import annotations

import contextlib
import io
import math
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kidata import Warehouse
from kidata.cli import run as cli_run
from kidata.store.schema import TABLES

DATA = Path(__file__).parent / "data"
SEEDS = DATA / "seeds"
# Other projects' result files (Liger-Kernel's CSV, the field's harnesses) are read where they
# are, beside the project (`../shared/data/`), never copied into the repository. A user's clone
# has no such folder: tests that need it skip with a message, and `.ci/run` refuses to run
# without it (CI always has it).
SHARED = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
SHARED_MISSING = f"needs the upstream sample data in {SHARED} (not in a user's clone)"


def same_rows(a: list[tuple], b: list[tuple]) -> bool:
    """Equal row for row; floats to 12 significant digits. A view's geometric means and
    intervals are sums of logarithms, which DuckDB may add in another order on another
    connection (a table kept by ``views.materialize``, a different scan): the last bits may
    differ, never the answer."""
    def close(x, y) -> bool:
        if isinstance(x, float) and isinstance(y, float):
            return math.isclose(x, y, rel_tol=1e-12)
        return x == y and type(x) is type(y)
    return len(a) == len(b) and all(
        len(r) == len(s) and all(map(close, r, s)) for r, s in zip(a, b, strict=True))


# The test files that take longest (seconds of test time, `pytest --durations=0` of the whole
# suite on this 2-core machine, 2026-12-03, after the Spark files compared views one at a
# time), slowest first. pytest-xdist (--dist loadfile
# --no-loadscope-reorder, in pyproject's addopts) hands files to its workers in collection
# order, whichever worker is free next: a slow file collected last would run alone at the end
# while the other core idles. Started first, the slow files overlap with everything else. A
# file missing here only runs later; a name that no longer exists is an error
# (test_slowest_first_names_existing_files), so the list cannot rot unseen.
SLOWEST_FIRST = (
    "query/test_spark.py",           # 314 s: a Spark session, every view compared
    "query/test_spark_versions.py",  # 46 s: the same session (one unit with the above)
    "test_benchmarks_smoke.py",      # 127 s: the benchmark scripts, each in subprocesses
    "query/test_step_context.py",    # 66 s: stored contexts at three chunk sizes
    "store/test_oracle.py",          # 61 s: the differential oracle's bounded run
    "store/test_check_compact.py",   # 54 s
    "store/test_load_duplicates.py", # 50 s: thousands of runs, workers on and off
    "cli/test_console.py",           # 48 s
    "store/test_crash.py",           # 39 s
    "query/test_report.py",          # 38 s
    "store/test_latest_runs.py",     # 28 s
    "store/test_hostile.py",         # 28 s
    "query/test_views_verdicts.py",  # 27 s
    "ingest/test_bad_input.py",      # 25 s
    "query/test_export_files.py",    # 25 s
)


# Test files that start a Spark session. They share one (tests/spark_compare.py: a JVM costs
# ~10 s and ~400 MB to start, and two JVMs on a busy 2-core machine slowed the suite from ~4 to
# 38 minutes): pytest-xdist sends them to the same worker (pytest_xdist_make_scheduler below).
SPARK_FILES = ("tests/query/test_spark.py", "tests/query/test_spark_versions.py")


def spark_together():
    """pytest-xdist's ``loadfile`` scheduling (a file's tests in one worker, so its module
    fixtures are built once), with the Spark files as one unit. Not ``--dist loadgroup`` with
    ``xdist_group`` marks: with pytest 9.2 its node-id suffix no longer takes effect and every
    test is scheduled alone (pytest-dev/pytest-xdist#1386)."""
    from xdist.scheduler import LoadFileScheduling

    class SparkTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return "spark" if scope in SPARK_FILES else scope

    return SparkTogether


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook (absent under -p no:xdist)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if config.getvalue("dist") == "loadfile":
        return spark_together()(config, log)
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(__file__).parent
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}

    def order(item: pytest.Item) -> int:
        try:
            return rank.get(item.path.relative_to(root).as_posix(), len(rank))
        except ValueError:  # a test outside tests/ (a doctest given by path, say)
            return len(rank)
    items.sort(key=order)  # stable: within a file, and among the rest, collection order


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("shared") and not SHARED.is_dir():
        pytest.skip(SHARED_MISSING)


def shared(relative: str) -> Path:
    """A file under ``../shared/data/``; skips the calling test when the folder is absent."""
    path = SHARED / relative
    if not path.exists():
        pytest.skip(SHARED_MISSING if not SHARED.is_dir() else f"{path} is missing")
    return path


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def pool_jobs(monkeypatch) -> list[int]:
    """The jobs a load's worker pool is handed (their numbers, in order), recorded: a test of
    a load "with workers" asserts the pool staged something, so it cannot quietly test the
    loading process alone (a small input never starts the pool)."""
    from kidata.ingest import stage_worker

    jobs: list[int] = []
    submit = stage_worker.WorkerProcess.submit

    def counting(self, job, first_seq, segments):
        jobs.append(job)
        return submit(self, job, first_seq, segments)

    monkeypatch.setattr(stage_worker.WorkerProcess, "submit", counting)
    return jobs


@pytest.fixture
def data() -> Path:
    return DATA


@pytest.fixture
def wh_path(tmp_path: Path) -> Path:
    return tmp_path / "wh"


@pytest.fixture
def wh(wh_path: Path) -> Warehouse:
    return Warehouse(wh_path)


@pytest.fixture
def cli(capsys, wh_path: Path, monkeypatch):
    """Run ``kidata`` in-process against the test warehouse; returns code, stdout, stderr."""
    monkeypatch.setenv("KIDATA_WAREHOUSE", str(wh_path))

    def invoke(*args: str) -> Result:
        capsys.readouterr()
        code = cli_run([str(a) for a in args])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return invoke


def console(*args: object, env: dict[str, str | None] | None = None, cwd: Path | None = None,
            input: str | None = None) -> subprocess.CompletedProcess:
    """``kidata *args`` run in this process as the console script runs it (:func:`kidata.cli.run`,
    its exit code, its standard output and error), returned as ``subprocess.run`` returns the
    script's: for tests of a command's answers, where a process per command (~0.7 s of
    start-up) would be most of the test. ``env`` is set in the environment (None: unset),
    ``cwd`` is the working folder and ``input`` is standard input, each for the command only;
    the environment is put back whole afterwards (``--debug`` sets a variable). What only a
    process shows (the console script's start-up, a killed command, a process's memory) is
    tried through the installed script in a subprocess (tests/cli/test_console.py and the slow
    lane)."""
    argv = [str(a) for a in args]
    saved_env, saved_cwd, saved_in = dict(os.environ), os.getcwd(), sys.stdin
    out, err = io.StringIO(), io.StringIO()
    try:
        for name, value in (env or {}).items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if cwd is not None:
            os.chdir(cwd)
        sys.stdin = io.StringIO(input or "")
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli_run(argv)
    finally:
        sys.stdin = saved_in
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["kidata", *argv], code, out.getvalue(), err.getvalue())


@pytest.fixture
def copy_data(tmp_path: Path):
    """Copy a file from tests/data to a scratch folder (for tests that edit inputs)."""

    def copy(relative: str) -> Path:
        target = tmp_path / "input" / Path(relative).name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(DATA / relative, target)
        return target

    return copy


def add_measurements(wh: Warehouse, rows: list[tuple[str, str, str, str, float]]) -> None:
    """Append (run_id, metric, statistic, unit, value) rows to the measurements table, in the
    load that added the runs: statistics the kernelindex reader does not take yet (a sample
    count), written in the measurement model's convention."""
    load_id = wh.sql("SELECT DISTINCT load_id FROM runs").fetchall()[0][0]
    table = pa.Table.from_pylist(
        [{"run_id": r, "metric": m, "statistic": s, "unit": u, "value": v, "resolution": None,
          "load_id": load_id} for r, m, s, u, v in rows], schema=TABLES["measurements"])
    pq.write_table(table, wh.path / "measurements" / "part-extra-statistics.parquet")
