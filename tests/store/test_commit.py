"""One commit mechanism (kidata/store/commit.py, ``Transaction``): compaction, repair and the
reference tables' refresh make their changes visible through the same journal as loads, so
each survives a kill before its commit point (nothing changed) and after it (the next writer
completes it), and readers see each table whole throughout.

Real processes are killed at named points (``KIDATA_FAULT=<point> KIDATA_FAULT_ACTION=kill``),
one warehouse each, all at once to keep the test short.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from runs_factory import write_runs

from kidata import Warehouse
from kidata.errors import WarehouseError

pytestmark = pytest.mark.slow


def start(wh: Path, *args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "kidata", "-w", str(wh), *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, **(env or {})})


def killed_at(warehouses: dict[str, Path], *args: str) -> None:
    """Run ``kidata <args>`` on each warehouse, killed at the point it is keyed by."""
    procs = {point: start(wh, *args, env={"KIDATA_FAULT": point, "KIDATA_FAULT_ACTION": "kill"})
             for point, wh in warehouses.items()}
    for point, proc in procs.items():
        assert proc.wait(timeout=180) == -signal.SIGKILL, point


def journals(wh: Path) -> list[dict]:
    return [json.loads(p.read_bytes()) for p in sorted((wh / "_kidata" / "journal").glob("*"))]


def files(wh: Path, table: str) -> list[Path]:
    return sorted((wh / table).glob("*.parquet"))


def plain_count(wh: Path, table: str) -> int:
    """Rows of a table for a reader that lists its files (DuckDB on the glob, no kidata)."""
    return duckdb.sql("select count(*) from read_parquet($g)",
                      params={"g": str(wh / table / "*.parquet")}).fetchall()[0][0]


def counts(wh: Path) -> dict[str, int]:
    w = Warehouse(wh)
    return {t: w.sql(f"select count(*) from {t}").fetchall()[0][0]
            for t in ("runs", "measurements", "latest_runs", "loads")}


@pytest.fixture(scope="module")
def three_loads(tmp_path_factory) -> Path:
    """Loads of runs 0-4, 5-9, 10-14 (3 measurements each; the runs of a load share their
    kernel, pass, workload, GPU and implementation: 1 latest_runs row per load)."""
    tmp = tmp_path_factory.mktemp("three")
    wh = Warehouse(tmp / "wh")
    for i in range(3):
        assert wh.load([str(write_runs(tmp / f"l{i}.jsonl", range(5 * i, 5 * i + 5)))]
                       ).runs_added == 5
    return wh.path


COMPLETE = {"runs": 15, "measurements": 45, "latest_runs": 3, "loads": 3}

# The first table compaction merges (COMMIT_ORDER, with more than one file) is measurements:
# the documents tables have one file, as only the first load brought the documents.
COMPACT_POINTS = ["compact-before-journal", "compact-after-journal", "compact-after-swap:runs"]


def test_compaction_killed_before_and_after_its_commit_point(three_loads: Path,
                                                             tmp_path: Path):
    assert counts(three_loads) == COMPLETE
    whs = {p: Path(shutil.copytree(three_loads, tmp_path / p.replace(":", "-")))
           for p in COMPACT_POINTS}
    killed_at(whs, "compact")
    for point, wh in whs.items():
        pending = journals(wh)
        # The journal is the commit point: none before it, the compaction's after it.
        assert [j["what"] for j in pending] == (
            [] if point == "compact-before-journal" else
            ["compaction of measurements"] if point == "compact-after-journal" else
            ["compaction of runs"]), point
        assert all(j["load_id"] is None for j in pending)
        # Readers see every row once: kidata's views and a plain reader of the files.
        assert counts(wh) == COMPLETE, point
        assert plain_count(wh, "measurements") == 45, point
        assert plain_count(wh, "runs") == 15, point
        if point == "compact-after-swap:runs":
            assert len(files(wh, "runs")) == 1  # swapped before the kill
        report = Warehouse(wh).check()
        assert report.problems == [], (point, report.problems)
        if pending:  # a compaction half applied is a note: each table is whole
            assert any(f"{pending[0]['what']} stopped after its commit point" in n
                       for n in report.notes), report.notes
        # The next writer (here a load that adds nothing) completes or removes it.
        again = Warehouse(wh).load([str(write_runs(tmp_path / "again.jsonl", range(3)))])
        assert again.runs_added == 0
        if point == "compact-before-journal":
            assert len(files(wh, "measurements")) == 3  # nothing was changed
        else:
            # Completed, never exchanged back: the exchange already made stays made.
            done = "measurements" if point == "compact-after-journal" else "runs"
            assert len(files(wh, done)) == 1, point
        assert journals(wh) == []
        assert not any((wh / "_kidata" / "compact").iterdir())
        assert counts(wh) == COMPLETE
        Warehouse(wh).compact()
        assert counts(wh) == COMPLETE
        assert all(len(files(wh, t)) == 1 for t in ("runs", "measurements", "loads"))
        assert Warehouse(wh).check().problems == []


@pytest.fixture(scope="module")
def needs_repair(three_loads: Path, tmp_path_factory) -> tuple[Path, str]:
    """:func:`three_loads` with the last load's commit marker deleted (its 5 runs hidden) and
    the first load's latest_runs row made wrong (passed_runs 99 instead of 5)."""
    wh = Path(shutil.copytree(three_loads, tmp_path_factory.mktemp("repair") / "wh"))
    markers = files(wh, "loads")
    hidden = markers[-1].stem.removeprefix("part-")
    markers[-1].unlink()
    latest = files(wh, "latest_runs")[0]
    table = pq.read_table(latest)
    i = table.schema.get_field_index("passed_runs")
    assert table["passed_runs"].to_pylist() == [5]
    pq.write_table(table.set_column(i, table.schema.field(i), pa.array([99], pa.int64())),
                   latest)
    return wh, hidden


REPAIR_POINTS = ["repair-before-journal", "repair-after-journal",
                 "repair-before-swap:latest_runs", "repair-after-swap:latest_runs"]


def test_repair_killed_before_and_after_its_commit_points(needs_repair, tmp_path: Path, cli,
                                                          monkeypatch):
    template, hidden = needs_repair
    broken = counts(template)
    assert broken["runs"] == 10 and broken["loads"] == 2
    whs = {p: Path(shutil.copytree(template, tmp_path / p.replace(":", "-")))
           for p in REPAIR_POINTS}
    killed_at(whs, "check", "--repair")
    for point, wh in whs.items():
        pending = journals(wh)
        # Markers first (one commit for all), then latest_runs (a folder exchange).
        markers_done = point in ("repair-before-swap:latest_runs",
                                 "repair-after-swap:latest_runs")
        assert [j["what"] for j in pending] == (
            ["repair of the commit markers"] if point == "repair-after-journal" else
            ["repair of latest_runs"] if point == "repair-after-swap:latest_runs" else []
        ), point
        assert counts(wh)["runs"] == (15 if markers_done else 10), point
        assert plain_count(wh, "runs") == 15  # the rows were always there
        # latest_runs, for a plain reader: the old set (3 rows, one wrong) or the new one.
        plain_latest = duckdb.sql("select passed_runs from read_parquet($g) order by 1",
                                  params={"g": str(wh / "latest_runs" / "*.parquet")}
                                  ).fetchall()
        assert plain_latest == ([(5,)] * 3 if point == "repair-after-swap:latest_runs"
                                else [(5,), (5,), (99,)]), point
        monkeypatch.setenv("KIDATA_WAREHOUSE", str(wh))
        fixed = cli("check", "--repair")
        assert fixed.code == 0, fixed.err
        if pending:
            assert (f"repaired: completed the interrupted commit of {pending[0]['what']}"
                    in fixed.out), fixed.out
        assert (f"wrote the missing commit marker of load {hidden}" in fixed.out) == (
            not markers_done and point != "repair-after-journal"), (point, fixed.out)
        assert ("rewrote latest_runs" in fixed.out) == (
            point != "repair-after-swap:latest_runs"), (point, fixed.out)
        assert counts(wh) == COMPLETE
        assert journals(wh) == [] and not any((wh / "_kidata" / "compact").iterdir())
        assert Warehouse(wh).check().problems == []


def test_reference_tables_refresh_killed_after_its_commit_point(tmp_path: Path):
    """A first load commits, then refreshes the reference tables in a commit of their own:
    killed after that one's journal, the load is in, the reference tables are served from
    the packaged data until the next writer completes the refresh."""
    wh = tmp_path / "wh"
    killed_at({"reference-after-journal": wh}, "load",
              str(write_runs(tmp_path / "a.jsonl", range(5))))
    assert [j["what"] for j in journals(wh)] == ["refresh of the reference tables"]
    assert counts(wh)["runs"] == 5
    assert not files(wh, "gpus")
    gpus = Warehouse(wh).sql("select count(*) from gpus").fetchall()[0][0]
    assert gpus > 0  # the packaged catalog
    report = Warehouse(wh).check()
    assert report.problems == []
    Warehouse(wh).compact()  # any writer completes it
    assert journals(wh) == []
    assert [f.name for f in files(wh, "gpus")] == ["reference.parquet"]
    assert Warehouse(wh).sql("select count(*) from gpus").fetchall()[0][0] == gpus


def test_a_journal_written_by_0_2_is_rolled_forward(tmp_path: Path):
    """kidata 0.2 journals list only a load's renames (``load_id``, ``moves``, ``replaces``):
    the next writer still completes them."""
    wh = tmp_path / "wh"
    killed_at({"after-journal": wh}, "load", str(write_runs(tmp_path / "a.jsonl", range(5))))
    [path] = (wh / "_kidata" / "journal").glob("*.json")
    entry = json.loads(path.read_bytes())
    path.write_text(json.dumps({k: entry[k] for k in ("load_id", "moves", "replaces")}))
    assert counts(wh)["runs"] == 0
    report = Warehouse(wh).check(repair=True)
    assert report.repaired[0] == f"completed the interrupted commit of load {entry['load_id']}"
    assert counts(wh)["runs"] == 5 and report.problems == []


def test_compaction_where_folders_cannot_be_swapped_refuses_before_its_commit_point(
        three_loads: Path, tmp_path: Path, monkeypatch):
    from kidata.store import durable

    def no_exchange(a, b):
        raise WarehouseError("this platform has no atomic folder exchange")

    wh = Path(shutil.copytree(three_loads, tmp_path / "wh"))
    monkeypatch.setattr(durable, "exchange", no_exchange)
    with pytest.raises(WarehouseError, match="no atomic folder exchange"):
        Warehouse(wh).compact()
    assert journals(wh) == [] and not any((wh / "_kidata" / "compact").iterdir())
    assert len(files(wh, "measurements")) == 3 and counts(wh) == COMPLETE
