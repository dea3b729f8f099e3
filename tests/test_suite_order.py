"""The suite's own scheduling (tests/conftest.py SLOWEST_FIRST): the slowest files are collected
first, so pytest-xdist starts them first and they overlap with the rest."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SLOWEST_FIRST, SPARK_FILES, spark_together

TESTS = Path(__file__).parent


def test_slowest_first_names_existing_files():
    missing = [name for name in SLOWEST_FIRST if not (TESTS / name).is_file()]
    assert not missing, f"tests/conftest.py SLOWEST_FIRST names files that do not exist: {missing}"


@pytest.mark.slow  # pytest collecting the whole suite in a subprocess
def test_the_slowest_files_are_collected_first():
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0",
         "-p", "no:cacheprovider"],
        cwd=TESTS.parent, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    files = []
    for line in proc.stdout.splitlines():
        if "::" in line:
            name = line.split("::", 1)[0].removeprefix("tests/")
            if not files or files[-1] != name:
                files.append(name)
    assert len(files) == len(set(files)), "a file's tests are not collected together"
    assert files[:len(SLOWEST_FIRST)] == list(SLOWEST_FIRST), files[:len(SLOWEST_FIRST)]


def test_the_spark_files_are_one_unit_of_scheduling_and_other_files_stay_apart():
    """Both Spark files go to one worker (one JVM); every other file is its own unit, as
    pytest-xdist's loadfile makes it."""
    scheduler = spark_together()
    bare = object.__new__(scheduler)  # its scope rule reads no state: no run, no config

    def split(nodeid: str) -> str:
        return scheduler._split_scope(bare, nodeid)

    scopes = {split(f"{name}::test_x[1]") for name in SPARK_FILES}
    assert scopes == {"spark"}
    assert split("tests/query/test_report.py::test_y") == "tests/query/test_report.py"
    assert split("tests/store/test_oracle.py::test_z[a-b]") != split(
        "tests/store/test_crash.py::test_z[a-b]")
