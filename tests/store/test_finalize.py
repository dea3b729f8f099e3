"""A load writes its runs and measurements once (kidata/store/finalize.py): they are staged in
their final form, and the staged file *is* the table's new file when the load keeps every row.
Only a load with duplicates or conflicts copies its kept rows, and then keeps none of the
others."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from runs_factory import bundle, write_runs

from kidata import Warehouse
from kidata.ingest import stage
from kidata.store import finalize
from kidata.store.layout import direct_file
from kidata.store.schema import TABLES

NAME = bundle(0)["run"]["metadata"]["name"][:-2]  # the seed's run name, without "-0"


def _spy(monkeypatch) -> dict[str, Any]:
    """Record the inode of each staged final-form file as the commit finishes it, and the
    record numbers it was asked to keep (``keep:<table>``; None: all)."""
    inodes: dict[str, Any] = {}
    real = finalize.finish

    def spy(staging, table, keep, path, before_write=None):
        inodes[table] = os.stat(direct_file(staging, table)).st_ino
        inodes[f"keep:{table}"] = None if keep is None else keep.to_pylist()
        return real(staging, table, keep, path, before_write)

    monkeypatch.setattr(finalize, "finish", spy)
    finalize.finished.clear()
    return inodes


def _rows(path: Path, columns: list[str]) -> list[tuple]:
    table = pq.ParquetFile(path).read(columns=columns)
    return list(zip(*(table[c].to_pylist() for c in columns), strict=True))


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_clean_load_renames_its_staged_files_without_rewriting_them(tmp_path, monkeypatch,
                                                                      workers):
    monkeypatch.setenv("KIDATA_WORKERS", workers)
    monkeypatch.setattr(stage, "BATCH_LINES", 2)  # with workers: 3 batches of 2 lines + 1
    source = write_runs(tmp_path / "a.jsonl", range(7))
    inodes = _spy(monkeypatch)
    wh = Warehouse(tmp_path / "wh")
    report = wh.load([str(source)])
    # 7 new runs, 3 measurements each (runs_factory.bundle: median, p20, p80).
    assert (report.added["runs"], report.added["measurements"], report.rejected) == (7, 21, 0)
    assert finalize.finished == {("runs", "as-staged"): 1, ("run_documents", "as-staged"): 1,
                                 ("measurements", "as-staged"): 1}
    # Every staged run added: the commit knows it from a count and passes no record numbers
    # to look up (at 1M runs a set of 1M numbers probed by 4M rows: ~0.7 CPU s).
    assert (inodes["keep:runs"], inodes["keep:measurements"]) == (None, None)
    for table in ("runs", "measurements"):
        part = wh.layout.part(table, report.load_id)
        # The very file staged, renamed: never read and written again.
        assert os.stat(part).st_ino == inodes[table]
        # Final form: the declared columns only (the staging-only ones stayed in the sidecar).
        assert pq.ParquetFile(part).schema_arrow.names == TABLES[table].names
    # Input order (the workers' rows written by the loading process in order), and within a
    # run its measurements by (metric, statistic): median, p20, p80, with the factory's
    # values for run i: 31072 + i, 30048, 31968 + i.
    runs = _rows(wh.layout.part("runs", report.load_id), ["run_id"])
    assert runs == [(f"{NAME}-{i}",) for i in range(7)]
    measurements = _rows(wh.layout.part("measurements", report.load_id),
                         ["run_id", "statistic", "value"])
    assert measurements == [row for i in range(7) for row in (
        (f"{NAME}-{i}", "median", 31072.0 + i), (f"{NAME}-{i}", "p20", 30048.0),
        (f"{NAME}-{i}", "p80", 31968.0 + i))]
    # loaded_at is the time the load started, as its id says, in every table and the marker.
    started = datetime.strptime(report.load_id[:22], "%Y%m%dT%H%M%S%fZ").replace(tzinfo=UTC)
    for table in ("runs", "environments", "protocols", "loads"):
        times = set(pq.ParquetFile(wh.layout.part(table, report.load_id))
                    .read(columns=["loaded_at"]).column(0).to_pylist())
        assert times == {started}, table


def test_a_load_with_duplicates_and_a_conflict_keeps_none_of_them(tmp_path, monkeypatch):
    monkeypatch.setenv("KIDATA_WORKERS", "0")
    wh = Warehouse(tmp_path / "wh")
    first = wh.load([str(write_runs(tmp_path / "first.jsonl", range(3)))])  # runs 0, 1, 2
    assert first.added["runs"] == 3
    conflict = bundle(1)
    conflict["run"]["spec"]["timing"]["latencyNs"]["median"] = 31500  # run 1, other numbers
    lines = [bundle(2), bundle(3), bundle(3), conflict, bundle(4)]
    second_path = tmp_path / "second.jsonl"
    second_path.write_text("".join(json.dumps(b) + "\n" for b in lines))
    spied = _spy(monkeypatch)
    second = wh.load([str(second_path)])
    # Line 1: run 2 is stored (a duplicate); line 3: run 3 again (a duplicate); line 4: run 1
    # with another median (a conflict, rejected). Added: runs 3 and 4, 3 measurements each.
    assert (second.added["runs"], second.added["measurements"]) == (2, 6)
    assert (second.duplicates, second.rejected) == (2, 1)
    assert [(r.position, r.field) for r in second.rejects] == [("line 4", "run.metadata.name")]
    assert finalize.finished == {("runs", "rewritten"): 1, ("run_documents", "rewritten"): 1,
                                 ("measurements", "rewritten"): 1}
    assert spied["keep:runs"] == spied["keep:measurements"] == [2, 5]  # lines 2 and 5 kept
    runs = _rows(wh.layout.part("runs", second.load_id), ["run_id"])
    assert runs == [(f"{NAME}-3",), (f"{NAME}-4",)]
    measurements = _rows(wh.layout.part("measurements", second.load_id),
                         ["run_id", "statistic", "value"])
    assert measurements == [row for i in (3, 4) for row in (
        (f"{NAME}-{i}", "median", 31072.0 + i), (f"{NAME}-{i}", "p20", 30048.0),
        (f"{NAME}-{i}", "p80", 31968.0 + i))]
    # The warehouse: runs 0-4 once each; run 1 keeps its first numbers (31072 + 1).
    assert wh.sql("SELECT count(*), count(DISTINCT run_id) FROM runs").fetchall() == [(5, 5)]
    assert wh.sql("SELECT value FROM measurements WHERE statistic = 'median' AND "
                  "run_id = $r", {"r": f"{NAME}-1"}).fetchall() == [(31073.0,)]
    assert wh.check().problems == []

    # Every run a duplicate (the first file's lines under another name): nothing added, no
    # file for either table.
    again = tmp_path / "again.jsonl"
    again.write_bytes((tmp_path / "first.jsonl").read_bytes())
    finalize.finished.clear()
    third = wh.load([str(again)])
    assert (sum(third.added.values()), third.duplicates) == (0, 3)
    assert finalize.finished == {("runs", "rewritten"): 1, ("run_documents", "rewritten"): 1,
                                 ("measurements", "rewritten"): 1}
    assert not wh.layout.part("runs", third.load_id).exists()
    assert not wh.layout.part("measurements", third.load_id).exists()


def test_without_hard_links_the_staged_file_is_copied_as_it_is(tmp_path, monkeypatch):
    # A file system that refuses hard links (some network and FUSE file systems): the commit
    # copies the staged file's bytes instead, and the load is the same.
    monkeypatch.setenv("KIDATA_WORKERS", "0")

    def refuse(*args, **kwargs):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", refuse)
    source = write_runs(tmp_path / "a.jsonl", range(4))
    finalize.finished.clear()
    wh = Warehouse(tmp_path / "wh")
    report = wh.load([str(source)])
    assert (report.added["runs"], report.added["measurements"]) == (4, 12)
    assert finalize.finished == {("runs", "as-staged"): 1, ("run_documents", "as-staged"): 1,
                                 ("measurements", "as-staged"): 1}
    assert _rows(wh.layout.part("runs", report.load_id), ["run_id"]) == [
        (f"{NAME}-{i}",) for i in range(4)]
    assert wh.check().problems == []
