"""Concurrent loads on one warehouse end with every run exactly once, and queries running
meanwhile see a consistent state (kidata's views: whole loads only; a plain Parquet reader:
never a run without its measurements)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from runs_factory import write_runs

from kidata import Warehouse

# The slow lane (runs concurrent writer processes); `pytest -m "not slow"` skips it.
pytestmark = pytest.mark.slow


def start(wh: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "kidata", "-w", str(wh), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ))


def test_overlapping_concurrent_loads_add_every_run_once(tmp_path: Path):
    # Three files of 200 runs: A = runs 0-199, B = 100-299, C = 200-399 plus 0-49 again.
    # Three loads at once: A+B, B+C, C+A. Together they hold runs 0-399: 400 runs, each
    # with 3 measurements = 1,200, whatever order they commit in.
    a = write_runs(tmp_path / "a.jsonl", range(0, 200))
    b = write_runs(tmp_path / "b.jsonl", range(100, 300))
    c = write_runs(tmp_path / "c.jsonl", [*range(200, 400), *range(0, 50)])
    wh_path = tmp_path / "wh"
    procs = [start(wh_path, "load", str(x), str(y)) for x, y in ((a, b), (b, c), (c, a))]

    # Meanwhile, query in a loop: what kidata shows must always be whole loads, and what a
    # plain reader of the files shows must never have a run without its measurements.
    snapshots: list[tuple[int, int, int]] = []
    plain_checks = 0
    while any(p.poll() is None for p in procs):
        if (wh_path / "runs").is_dir():
            wh = Warehouse(wh_path)
            snapshots.append(wh.sql(
                "select (select count(*) from runs), (select count(*) from measurements), "
                "(select count(*) from runs r where (select count(*) from measurements m "
                "where m.run_id = r.run_id) = 3)").fetchall()[0])
            plain_checks += _plain_reader_sees_measurements_of_every_run(wh_path)
        time.sleep(0.05)
    outputs = [p.communicate() for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outputs

    wh = Warehouse(wh_path)
    assert wh.sql("select count(*), count(distinct run_id) from runs").fetchall() == [(400, 400)]
    assert wh.sql("select count(*) from measurements").fetchall() == [(1200,)]
    # The loads split the 400 runs between them, each saying how many it added (C+A alone
    # holds all 400: committed first, it leaves nothing to the others). A load that adds
    # nothing leaves no trace; the others have one row in `loads`.
    added = [int(out.split(" runs added")[0].rsplit(" ", 1)[1].replace(",", ""))
             for out, _ in outputs]
    assert sum(added) == 400
    assert wh.sql("select count(*) from loads").fetchall() == [(sum(1 for n in added if n),)]
    assert wh.check().problems == []
    # Whole loads only: every run seen had its 3 measurements, counts never went back.
    for runs, measurements, complete in snapshots:
        assert measurements == 3 * runs and complete == runs
    assert [s[0] for s in snapshots] == sorted(s[0] for s in snapshots)
    assert snapshots and plain_checks


def _plain_reader_sees_measurements_of_every_run(wh_path: Path) -> int:
    """One query with DuckDB over the table globs (no kidata code): every run it lists has
    its measurements, because a commit renames measurements before runs. Returns 1 when the
    check ran (0 while the warehouse has no files yet)."""
    runs = str(wh_path / "runs" / "*.parquet")
    measurements = str(wh_path / "measurements" / "*.parquet")
    try:
        missing = duckdb.sql(
            "select count(*) from read_parquet($runs) r where not exists (select 1 from "
            "read_parquet($m) m where m.run_id = r.run_id)",
            params={"runs": runs, "m": measurements}).fetchall()[0][0]
    except duckdb.IOException as exc:  # no files yet
        assert "No files found" in str(exc)
        return 0
    assert missing == 0
    return 1


def _killed_mid_commit(tmp_path: Path) -> Path:
    """A warehouse with a committed load of runs 0-9 and a load of runs 10-29 killed after
    renaming its runs file (its commit marker, renamed last, is not in place)."""
    wh_path = tmp_path / "wh"
    first = write_runs(tmp_path / "first.jsonl", range(10))
    second = write_runs(tmp_path / "second.jsonl", range(10, 30))
    assert Warehouse(wh_path).load([str(first)]).committed
    result = subprocess.run(
        [sys.executable, "-m", "kidata", "-w", str(wh_path), "load", str(second)],
        env={**os.environ, "KIDATA_FAULT": "after-move:runs", "KIDATA_FAULT_ACTION": "kill"},
        capture_output=True)
    assert result.returncode < 0
    return wh_path


def test_the_documented_snapshot_recipe_works_without_kidata(tmp_path: Path):
    """docs/guarantees.md's SQL, run by plain DuckDB, sees only whole loads."""
    wh_path = _killed_mid_commit(tmp_path)
    doc = (Path(__file__).parents[2] / "docs" / "guarantees.md").read_text("utf-8")
    recipe = doc.split("```sql\n", 1)[1].split("```", 1)[0]
    con = duckdb.connect()
    con.execute(recipe.replace("<warehouse>", str(wh_path)))
    # The first load only: 10 runs, 3 measurements each.
    assert con.sql("select (select count(*) from runs), (select count(*) from measurements)"
                   ).fetchall() == [(10, 30)]
    # Without step 1, the same engine sees the second load's runs (10 + 20).
    assert con.sql("select count(*) from read_parquet($g)",
                   params={"g": str(wh_path / "runs" / "*.parquet")}).fetchall() == [(30,)]


def test_a_query_during_a_commit_sees_the_state_before_it(tmp_path: Path):
    """Stop a commit between two renames (a killed process): kidata's views show the
    warehouse as before the load, in every table, while the files are half moved."""
    wh_path = _killed_mid_commit(tmp_path)
    second = tmp_path / "second.jsonl"
    wh = Warehouse(wh_path)
    # 10 runs × 3 measurements from the first load; the second load's 20 are not shown.
    assert wh.sql("select (select count(*) from runs), (select count(*) from measurements), "
                  "(select count(*) from loads)").fetchall() == [(10, 30, 1)]
    assert wh.info()["tables"]["runs"]["rows"] == 10
    # The files of the second load are there for a plain reader: its runs and measurements.
    files = duckdb.sql("select count(*) from read_parquet($g)",
                       params={"g": str(wh_path / "runs" / "*.parquet")}).fetchall()
    assert files == [(30,)]
    # The next writer completes it: 30 runs.
    assert Warehouse(wh_path).load([str(second)]).committed
    assert Warehouse(wh_path).sql("select count(*) from runs").fetchall() == [(30,)]
