"""Re-loading costs little: a file byte-identical to one the warehouse already loaded in full,
cleanly, is not read again, and the outcome is what reading it again would give (nothing
added, its runs counted as duplicates). Anything else is read again."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb

from kidata import Warehouse

SEEDS = Path(__file__).parents[1] / "data" / "seeds"
# Seeds: 000 and 001 hold one Liger run each, 003 (trainkernel) holds 24 runs: 26 in all.


def _count(wh: Path, table: str) -> int:
    files = list((wh / table).glob("*.parquet"))
    if not files:
        return 0
    return duckdb.sql(f"SELECT count(*) FROM read_parquet('{wh / table}/*.parquet')"
                      ).fetchall()[0][0]


def test_unchanged_clean_files_are_not_read_again(tmp_path):
    wh = Warehouse(tmp_path / "wh")
    first = wh.load([str(SEEDS)])
    assert first.runs_added == 26 and first.unchanged == []
    loads = _count(tmp_path / "wh", "loads")
    again = wh.load([str(SEEDS)])
    assert sorted(Path(p).name for p in again.unchanged) == [
        "000_ef9e0295e36a82ef.txt", "001_74c4a9a5654eeb33.txt", "003_55f6fcd9cea2f10a.txt"]
    # As if read: 3 files, 26 records, 26 duplicate runs, nothing added or rejected.
    assert (again.files, again.records, again.duplicates, again.runs_added, again.rejected) == \
        (3, 26, 26, 0, 0)
    assert sum(again.added.values()) == 0
    assert _count(tmp_path / "wh", "loads") == loads  # nothing committed
    assert _count(tmp_path / "wh", "runs") == 26
    # A file list mixing an unchanged file and a new one reads only the new one.
    new = tmp_path / "new.jsonl"
    seed = json.loads((SEEDS / "001_74c4a9a5654eeb33.txt").read_text().split("\n", 2)[2])
    seed["run"]["metadata"]["name"] = "new-run"
    new.write_text(json.dumps(seed) + "\n")
    mixed = wh.load([str(SEEDS / "003_55f6fcd9cea2f10a.txt"), str(new)])
    assert [Path(p).name for p in mixed.unchanged] == ["003_55f6fcd9cea2f10a.txt"]
    # 24 records of 003 (duplicates, not read) + 1 new run.
    assert (mixed.records, mixed.duplicates, mixed.runs_added) == (25, 24, 1)


def test_a_file_of_duplicates_only_is_not_read_again(tmp_path):
    # Its load adds nothing and commits no marker (no row in `loads`), but the file is
    # remembered all the same: re-loading it is not a full read each time.
    wh = Warehouse(tmp_path / "wh")
    assert wh.load([str(SEEDS)]).runs_added == 26
    seed = json.loads((SEEDS / "000_ef9e0295e36a82ef.txt").read_text().split("\n", 2)[2])
    copy = tmp_path / "copy.jsonl"  # seed 000 again, as JSON Lines under another name
    copy.write_text(json.dumps(seed) + "\n")
    loads = _count(tmp_path / "wh", "loads")
    first = wh.load([str(copy)])
    assert first.unchanged == [] and (first.records, first.duplicates, first.runs_added) == \
        (1, 1, 0)
    again = wh.load([str(copy)])
    assert again.unchanged == [str(copy)]
    assert (again.files, again.records, again.duplicates, again.runs_added, again.rejected) \
        == (1, 1, 1, 0, 0)
    assert _count(tmp_path / "wh", "loads") == loads  # neither load left a row
    # Changed, it is read again: its new run is added.
    seed["run"]["metadata"]["name"] = "new-run"
    with open(copy, "a") as fh:
        fh.write(json.dumps(seed) + "\n")
    changed = wh.load([str(copy)])
    assert changed.unchanged == [] and (changed.duplicates, changed.runs_added) == (1, 1)


def test_a_changed_file_is_read_again(tmp_path):
    data = tmp_path / "in.jsonl"
    seed = json.loads((SEEDS / "000_ef9e0295e36a82ef.txt").read_text().split("\n", 2)[2])
    data.write_text(json.dumps(seed) + "\n")
    wh = Warehouse(tmp_path / "wh")
    assert wh.load([str(data)]).runs_added == 1
    seed["run"]["metadata"]["name"] = "another-run"
    with open(data, "a") as fh:
        fh.write(json.dumps(seed) + "\n")
    again = wh.load([str(data)])
    # Read again: the first record is a duplicate, the new one is added.
    assert again.unchanged == [] and (again.records, again.duplicates, again.runs_added) == \
        (2, 1, 1)
    # The same file under another name is read too (its rows would name that file).
    copy = tmp_path / "copy.jsonl"
    shutil.copy(data, copy)
    third = wh.load([str(copy)])
    assert third.unchanged == [] and (third.duplicates, third.runs_added) == (2, 0)
    # With another --format it is read again as well.
    fourth = wh.load([str(copy)], format="kernelindex")
    assert fourth.unchanged == [] and fourth.duplicates == 2


def test_files_with_rejects_are_always_read_again(tmp_path):
    data = tmp_path / "in.jsonl"
    seed = json.loads((SEEDS / "000_ef9e0295e36a82ef.txt").read_text().split("\n", 2)[2])
    data.write_text(json.dumps(seed) + "\n{not json\n")
    wh = Warehouse(tmp_path / "wh")
    first = wh.load([str(data)])
    assert (first.runs_added, first.rejected) == (1, 1)
    again = wh.load([str(data)])
    # The reject is reported again (and kept once in the rejects table).
    assert again.unchanged == [] and (again.duplicates, again.rejected) == (1, 1)
    assert again.rejects[0].position == "line 2"


def test_a_file_whose_runs_are_gone_is_read_again(tmp_path):
    wh = Warehouse(tmp_path / "wh")
    wh.load([str(SEEDS / "003_55f6fcd9cea2f10a.txt")])
    wh.load([str(SEEDS / "000_ef9e0295e36a82ef.txt")])
    # Lose the runs file of the first load (as a repair of a damaged file might).
    first_runs = sorted((tmp_path / "wh" / "runs").glob("*.parquet"))[0]
    first_runs.unlink()
    again = wh.load([str(SEEDS / "003_55f6fcd9cea2f10a.txt")])
    assert again.unchanged == [] and again.runs_added == 24


def test_unchanged_size_and_old_mtime_skip_the_hash(tmp_path, monkeypatch):
    import hashlib
    import os
    import time

    data = tmp_path / "in.jsonl"
    seed = json.loads((SEEDS / "000_ef9e0295e36a82ef.txt").read_text().split("\n", 2)[2])
    data.write_text(json.dumps(seed) + "\n")
    hour_ago = time.time_ns() - 3600 * 10**9
    os.utime(data, ns=(hour_ago, hour_ago))
    wh = Warehouse(tmp_path / "wh")
    assert wh.load([str(data)]).runs_added == 1
    # Same size and modification time, hashed long after it: not even hashed again.
    def no_hash(*args, **kwargs):
        raise AssertionError("hashed an unchanged file")

    monkeypatch.setattr(hashlib, "file_digest", no_hash)
    assert wh.load([str(data)]).unchanged == [str(data)]
    monkeypatch.undo()
    # Same size, new content, new modification time: hashed, found changed, read.
    seed["run"]["metadata"]["name"] = seed["run"]["metadata"]["name"][:-1] + "X"
    data.write_text(json.dumps(seed) + "\n")
    again = wh.load([str(data)])
    assert again.unchanged == [] and again.runs_added == 1
