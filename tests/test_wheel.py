"""The installed wheel, not just the source tree, can load and query (SQL files included)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

# The slow lane (builds the wheel and installs it in a fresh environment); `pytest -m "not
# slow"` skips it.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).parent.parent
SEEDS = Path(__file__).parent / "data" / "seeds"


def test_wheel_loads_and_queries(tmp_path: Path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir",
                    str(dist), str(ROOT)], check=True, capture_output=True)
    wheel = next(dist.glob("kidata-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("kidata/sql/speedups.sql", "kidata/sql/latencies.sql",
                   "kidata/data/gpus.toml", "kidata/data/names.toml"):
        assert needed in names
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    # Run from an empty folder with only the unpacked wheel ahead of the dependencies, so the
    # source tree cannot be imported by accident.
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONSAFEPATH": "1",
           "KIDATA_WAREHOUSE": str(tmp_path / "wh")}
    work = tmp_path / "work"
    work.mkdir()

    def kidata(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "kidata", *args], cwd=work, env=env,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout

    where = subprocess.run(
        [sys.executable, "-c", "import kidata.query.views as v; print(v.sql_dir())"], cwd=work,
        env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert where == str(site / "kidata" / "sql")
    assert "26 runs added" in kidata("load", str(SEEDS))
    out = kidata("sql", "select count(*) as n from speedups where candidate = 'trainkernel'",
                 "--format", "csv")
    assert out == "n\n8\n"
