"""Shared fixtures: sample data paths, a fresh warehouse, and an in-process CLI runner."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from kidata import Warehouse
from kidata.cli import run as cli_run

DATA = Path(__file__).parent / "data"
SEEDS = DATA / "seeds"


@dataclass
class Result:
    code: int
    out: str
    err: str


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


@pytest.fixture
def copy_data(tmp_path: Path):
    """Copy a file from tests/data to a scratch folder (for tests that edit inputs)."""

    def copy(relative: str) -> Path:
        target = tmp_path / "input" / Path(relative).name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(DATA / relative, target)
        return target

    return copy
