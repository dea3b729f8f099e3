"""What one input may cost a load (issue 27, items 7 and 8).

Item 7: a 2.3 MB Triton perf_report CSV of 200,000 columns made 200,000 runs and failed the
whole load after two minutes (DuckDB "Out of Memory", nothing committed). A CSV past
``tabular.MAX_COLUMNS``, ``MAX_HEADER_BYTES``, ``MAX_LINE_BYTES`` or ``MAX_CELLS`` is now one
reject naming the bound, and the other files load.

Item 8: counting rejects past the cap (``KIDATA_MAX_REJECTS``) must hold nothing per reject.
Checked by structure, not by measuring memory (that is ``benchmarks/many_rejects.py``): how
many reject objects the loading process builds.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SHARED

from kidata import Warehouse
from kidata.core.load_report import MAX_REPORTED
from kidata.ingest.readers import read_file, tabular
from kidata.store import load_commit

KIDATA = Path(sys.executable).parent / "kidata"
SEED0 = Path(__file__).parents[1] / "data" / "seeds" / "000_ef9e0295e36a82ef.txt"
TRITON = {"unit": "ms", "gpu": "H100 SXM"}


def triton(path: Path, columns: int, rows: int = 1) -> Path:
    """A Triton perf_report CSV: an x column, then ``columns - 1`` providers."""
    with open(path, "w", encoding="utf-8") as out:
        out.write(",".join(["N", *(f"provider{i}" for i in range(columns - 1))]) + "\n")
        for r in range(rows):
            out.write(",".join([str(128 * (r + 1)), *(f"{1 + i % 7}.25"
                                                      for i in range(columns - 1))]) + "\n")
    return path


def good_triton(path: Path) -> Path:
    path.write_text("N,cuBLAS,Triton\n256,5.5,5.25\n512,29.125,26.25\n")
    return path


def load(wh: Path, *files: Path):
    return Warehouse(wh).load([str(f) for f in files], format="triton-perf-report",
                              settings=TRITON)


# -- item 7: a file past a bound is one reject; the others load -----------------------------

def test_a_file_wider_than_the_column_bound_is_one_reject_and_the_other_file_loads(tmp_path):
    wide = triton(tmp_path / "wide.csv", 2_000, rows=3)  # 6,000 runs on 0.2.7
    good = good_triton(tmp_path / "good.csv")
    report = load(tmp_path / "wh", wide, good)
    assert report.runs_added == 4 and report.rejected == 1
    [reject] = report.rejects
    assert (reject.file, reject.position, reject.field) == (str(wide), "header", None)
    assert reject.reason == ("2,000 columns; kidata reads at most 1,024 (the file is not "
                             "read)")
    w = Warehouse(tmp_path / "wh")
    assert w.sql("select distinct source_file from runs").fetchall() == [(str(good),)]
    assert w.sql("select source_file, position, reason from rejects").fetchall() == [
        (str(wide), "header", reject.reason)]


def test_a_header_longer_than_its_bound_is_refused_before_it_is_parsed(tmp_path):
    # 20,000 names of 10 bytes: 200 KB, past 64 KiB; its columns are counted from the commas.
    wide = triton(tmp_path / "long_header.csv", 20_000)
    [reject] = list(read_file(str(wide), "triton-perf-report", settings=TRITON))
    assert (reject.position, str(reject).split(": ", 1)[1]) == (
        "header", "a header longer than 64 KiB (about 20,000 columns); kidata reads at most "
                  "64 KiB and 1,024 columns (the file is not read)")


def test_a_file_past_the_cell_bound_is_rejected_whole_not_loaded_in_part(tmp_path,
                                                                        monkeypatch):
    monkeypatch.setattr(tabular, "MAX_CELLS", 100)
    big = triton(tmp_path / "cells.csv", 10, rows=11)  # 110 cells: row 10 reaches 100
    items = list(read_file(str(big), "triton-perf-report", settings=TRITON))
    assert [str(i) for i in items] == [
        f"{big}, document: more than 100 cells (row 11 passes it, 10 columns); kidata reads "
        "at most 100 (the file is not read)"]
    assert len(list(read_file(str(triton(tmp_path / "ok.csv", 10, rows=10)),
                              "triton-perf-report", settings=TRITON))) == 90


def test_a_line_longer_than_its_bound_is_refused_before_the_csv_parser_sees_it(tmp_path,
                                                                               monkeypatch):
    monkeypatch.setattr(tabular, "MAX_LINE_BYTES", 1000)
    path = tmp_path / "long_line.csv"
    path.write_text("N,cuBLAS\n256,5.5\n512," + "9" * 2000 + "\n")
    [reject] = list(read_file(str(path), "triton-perf-report", settings=TRITON))
    assert str(reject) == (f"{path}, document: line 3 is longer than 1,000 bytes; kidata reads "
                           "CSV lines of at most 1,000 bytes (the file is not read)")


def test_nvbench_csv_is_bounded_by_the_same_reader(tmp_path):
    path = tmp_path / "nvbench.csv"
    names = ["Benchmark", "Device", "Device Name", *(f"axis{i}" for i in range(1_100))]
    path.write_text(",".join(names) + "\n")
    [reject] = list(read_file(str(path), "nvbench-csv", settings={"implementation": "x"}))
    assert str(reject).endswith("header: 1,103 columns; kidata reads at most 1,024 (the file "
                                "is not read)")


@pytest.mark.shared
def test_the_bounds_are_far_above_every_real_csv():
    """The real CSVs these readers take (../shared/data/external: FlashInfer, nvbench, Triton,
    dynamo) use a tenth of each bound or less. (Liger's CSV has its own streaming reader.)"""
    files = sorted((SHARED / "external").rglob("*.csv"))
    assert len(files) >= 8
    for path in files:
        raw = path.read_bytes()
        rows = list(csv.reader(raw.decode("utf-8").splitlines()))
        assert len(rows[0]) * 10 <= tabular.MAX_COLUMNS, path
        assert len(raw.split(b"\n", 1)[0]) * 10 <= tabular.MAX_HEADER_BYTES, path
        assert max(map(len, raw.split(b"\n"))) * 10 <= tabular.MAX_LINE_BYTES, path
        assert sum(map(len, rows)) * 10 <= tabular.MAX_CELLS, path


@pytest.mark.slow
def test_the_issue_file_is_one_reject_from_the_installed_cli_in_seconds(tmp_path):
    """A file like the issue's (200,000 columns, 2.7 MB) and a good one, with the installed
    console script. 0.2.7 spent 45 s to 3.5 min on such a file: 200,000 runs, or, as often,
    the whole load lost to DuckDB "Out of Memory"."""
    wide = tmp_path / "matmul-performance.csv"
    with open(wide, "w", encoding="utf-8") as out:
        out.write("N," + ",".join(f"p{i}" for i in range(199_999)) + "\n")
        out.write("4096," + ",".join(f"{1 + i % 997 / 1000:.3f}" for i in range(199_999))
                  + "\n")
    assert 2.0e6 < wide.stat().st_size < 2.8e6
    good = good_triton(tmp_path / "good.csv")
    result = subprocess.run(
        [str(KIDATA), "-w", str(tmp_path / "wh"), "load", "--format", "triton-perf-report",
         "--set", "unit=ms", "--set", "gpu=H100 SXM", str(wide), str(good)],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "Out of Memory" not in result.stderr
    assert (f"rejected: {wide}, header: a header longer than 64 KiB (about 200,000 columns); "
            "kidata reads at most 64 KiB and 1,024 columns (the file is not read)"
            ) in result.stderr
    assert "4 runs added" in result.stdout and ", 1 rejected, " in result.stdout


# -- item 8: rejects past the cap are counted, not held ---------------------------------------

def _conflicts(path: Path, count: int) -> Path:
    """One run, then ``count`` conflicting duplicates of it (other medians, same run id)."""
    bundle = json.loads(SEED0.read_text("utf-8").split("\n", 2)[2])
    timing = bundle["run"]["spec"]["timing"]["latencyNs"]
    with open(path, "w", encoding="utf-8") as out:
        for i in range(count + 1):
            timing["median"] = 31_000 + i / 1000  # between its p20 and p80
            out.write(json.dumps(bundle) + "\n")
    return path


@pytest.mark.parametrize("conflicts", [1_500, 3_000])
def test_conflicts_past_the_cap_are_counted_without_an_object_each(tmp_path, monkeypatch,
                                                                   conflicts):
    """A load of one run and thousands of conflicting duplicates (rejected at the commit),
    with KIDATA_MAX_REJECTS=5: the counts are exact and the first 5 are kept, and the
    commit builds at most MAX_REPORTED reject objects (the ones a report lists), however many
    conflicts there are. 0.2.7 fetched and built one per conflict."""
    monkeypatch.setenv("KIDATA_MAX_REJECTS", "5")
    monkeypatch.setenv("KIDATA_WORKERS", "0")
    built = []

    class Counted(load_commit.Reject):
        def __init__(self, *args):
            super().__init__(*args)
            built.append(1)

    monkeypatch.setattr(load_commit, "Reject", Counted)
    path = _conflicts(tmp_path / "conflicts.jsonl", conflicts)
    report = Warehouse(tmp_path / "wh").load([str(path)])
    assert (report.runs_added, report.rejected, report.rejects_not_kept) == (
        1, conflicts, conflicts - 5)
    assert len(report.rejects) == MAX_REPORTED
    assert [r.position for r in report.rejects[:3]] == ["line 2", "line 3", "line 4"]
    assert Warehouse(tmp_path / "wh").sql(
        "select position from rejects order by cast(split_part(position, ' ', 2) as int)"
    ).fetchall() == [(f"line {n}",) for n in range(2, 7)]
    assert len(built) <= MAX_REPORTED


def test_rejects_past_the_cap_reach_the_loading_process_as_counts_not_objects(
        tmp_path, monkeypatch):
    """Bad lines staged by worker processes: the loading process receives at most 1,000
    reject events per job (the rest as a count) and lists at most MAX_REPORTED, whatever
    the number of rejects; the counts and the kept rejects (the first 7) are exact."""
    from kidata.ingest import stage

    monkeypatch.setenv("KIDATA_MAX_REJECTS", "7")
    monkeypatch.setenv("KIDATA_WORKERS", "2")
    events = []
    merge = stage.Stage._merge

    def counting(self, result):
        events.append(sum(1 for e in result.events if e[1] == "reject"))
        return merge(self, result)

    monkeypatch.setattr(stage.Stage, "_merge", counting)
    path = tmp_path / "bad.jsonl"
    bad = 4 * stage.BATCH_LINES
    path.write_text("".join(f'{{"x": {i}}}\n' for i in range(bad)))
    report = Warehouse(tmp_path / "wh").load([str(path)])
    assert (report.rejected, report.rejects_not_kept) == (bad, bad - 7)
    assert len(events) >= 2 and max(events) <= 1000 and sum(events) < bad
    assert len(report.rejects) == MAX_REPORTED
    assert Warehouse(tmp_path / "wh").sql(
        "select count(*), max(cast(split_part(position, ' ', 2) as int)) from rejects"
    ).fetchall() == [(7, 7)]
