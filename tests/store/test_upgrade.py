"""Layouts 2 and 3: a run's document lives in ``run_documents``, not in its ``runs`` row
(layout 2, issue 30 item 3), ``step_context`` holds whole steps (layout 3, issue 30 item 1);
a warehouse of an older layout is read as it is and upgraded by its next writer.

The layout-1 warehouse is ``tests/data/layout1/warehouse``, written by kidata 0.3.13 itself
(see its README): the seeds, then Liger's edge-case CSV, two loads. What it held is read here
from its Parquet files with pyarrow, not through kidata, and compared with what kidata gives
before and after the upgrade. The layout-2 warehouse is ``tests/data/layout2/warehouse``,
written by kidata 0.3.14 with every step's context stored (its README). The commands run the
CLI in this process (``conftest.console``), the killed ones through the installed console
script.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import console, same_rows

import kidata
from kidata import Warehouse
from kidata.store import commit, upgrade

DATA = Path(__file__).parents[1] / "data"
LAYOUT1 = DATA / "layout1" / "warehouse"
LAYOUT2 = DATA / "layout2" / "warehouse"
SEEDS = DATA / "seeds"
KIDATA = str(Path(sys.executable).parent / "kidata")
PACKAGE_ROOT = str(Path(kidata.__file__).resolve().parents[1])
# The two loads of the fixture: 26 seed runs, then 5 Liger runs.
RUNS = 31


def cli(wh: Path, *args: object) -> subprocess.CompletedProcess:
    """``kidata -w wh *args``, in this process (conftest.console)."""
    return console("-w", wh, *args, env={"KIDATA_COMPACT_AT": "0"})


def script(wh: Path, *args: object, **env: str) -> subprocess.CompletedProcess:
    """``kidata -w wh *args`` through the installed console script: a process a fault point
    can kill."""
    env = {**os.environ, "PYTHONPATH": PACKAGE_ROOT, "KIDATA_COMPACT_AT": "0", **env}
    return subprocess.run([KIDATA, "-w", str(wh), *map(str, args)], capture_output=True,
                          text=True, timeout=180, env=env)


def copy_of(fixture: Path, wh: Path) -> Path:
    """A copy of a fixture warehouse at ``wh``, for a test to upgrade."""
    shutil.copytree(fixture, wh)
    return wh


@pytest.fixture
def old(tmp_path: Path) -> Path:
    return copy_of(LAYOUT1, tmp_path / "wh")


def stored_documents(wh: Path) -> set[tuple]:
    """(run_id, document, load_id, loaded_at) of every run, read from the layout-1 runs files."""
    out = set()
    for path in sorted((wh / "runs").glob("*.parquet")):
        table = pq.read_table(path, columns=["run_id", "document", "load_id", "loaded_at"])
        out |= set(zip(*(table[c].to_pylist() for c in table.column_names), strict=True))
    return out


def layout_number(wh: Path) -> int:
    return json.loads((wh / "_kidata" / "layout.json").read_text())["layout"]


def answers(wh: Path) -> dict[str, list]:
    db = Warehouse(wh)
    return {
        "runs": db.sql("select * exclude (load_id, loaded_at) from runs "
                       "order by run_id").fetchall(),
        "documents": db.sql("select run_id, document, load_id, loaded_at "
                            "from run_documents order by run_id").fetchall(),
        "speedups": db.sql("select * from speedups order by all").fetchall(),
        "summary": db.sql("select * from speedup_summary order by all").fetchall(),
    }


def same_answers(a: dict[str, list], b: dict[str, list]) -> bool:
    """The same rows for every question, floats to 12 significant digits (a summary's means are
    sums DuckDB may add in another order from one session to the next: conftest.same_rows)."""
    return a.keys() == b.keys() and all(same_rows(a[k], b[k]) for k in a)


def test_the_fixture_is_a_layout_1_warehouse_with_documents_in_its_runs():
    assert layout_number(LAYOUT1) == 1
    documents = stored_documents(LAYOUT1)
    assert len(documents) == RUNS
    for run_id, document, _, _ in documents:
        assert json.loads(document)["metadata"]["name"] == run_id


def test_a_layout_1_warehouse_is_read_as_it_is_without_a_write(old: Path):
    before = {p: p.read_bytes() for p in old.rglob("*") if p.is_file()}
    got = answers(old)
    # runs without the column, run_documents from the runs files: exactly what they hold.
    assert "document" not in Warehouse(old).sql("select * from runs").columns
    assert set(got["documents"]) == stored_documents(LAYOUT1)
    assert len(got["runs"]) == RUNS and got["speedups"]
    # A check reads it too (a check takes the lock but writes nothing).
    done = cli(old, "check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert ": ok" in done.stdout
    assert {p: p.read_bytes() for p in old.rglob("*") if p.is_file() and p.name != "lock"} \
        == {p: b for p, b in before.items() if p.name != "lock"}
    assert layout_number(old) == 1


def test_a_load_upgrades_it_first_and_every_answer_stays(old: Path, tmp_path: Path):
    expected = answers(old)
    bundles_before = tmp_path / "before.jsonl"
    assert cli(old, "export", "runs", "--format", "kernelindex", "-o", bundles_before
               ).returncode == 0
    # The seeds again, from another folder (not skipped as unchanged): all duplicates.
    seeds = tmp_path / "seeds"
    shutil.copytree(SEEDS, seeds)
    done = cli(old, "load", seeds)
    assert done.returncode == 0, done.stderr
    assert (f"warning: upgraded the warehouse from layout 1 to 2: the documents of {RUNS} runs "
            "(2 runs files) moved to run_documents") in done.stderr
    assert "warning: upgraded the warehouse from layout 2 to 3: step_context emptied" \
        in done.stderr
    assert "0 runs added" in done.stdout and "26 duplicates skipped" in done.stdout
    assert layout_number(old) == 3
    # Each runs file is narrow now, and its documents are in run_documents under its name.
    runs_files = sorted(p.name for p in (old / "runs").glob("*.parquet"))
    assert runs_files == sorted(p.name for p in (old / "run_documents").glob("*.parquet"))
    for name in runs_files:
        assert "document" not in pq.read_schema(old / "runs" / name).names
        narrow = pq.read_table(old / "runs" / name, columns=["run_id", "load_id"])
        docs = pq.read_table(old / "run_documents" / name, columns=["run_id", "load_id"])
        assert sorted(narrow.to_pylist(), key=str) == sorted(docs.to_pylist(), key=str)
    assert same_answers(answers(old), expected)
    bundles_after = tmp_path / "after.jsonl"
    assert cli(old, "export", "runs", "--format", "kernelindex", "-o", bundles_after
               ).returncode == 0
    assert bundles_after.read_bytes() == bundles_before.read_bytes()
    done = cli(old, "check")
    assert done.returncode == 0, done.stdout + done.stderr
    # The next writer has nothing to upgrade.
    again = cli(old, "load", seeds)
    assert again.returncode == 0 and "upgraded" not in again.stderr


def test_compact_upgrades_it_and_says_so(old: Path):
    expected = answers(old)
    done = cli(old, "compact")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("upgraded the warehouse from layout 1 to 2")
    assert "upgraded the warehouse from layout 2 to 3" in done.stdout
    assert layout_number(old) == 3
    assert same_answers(answers(old), expected)
    assert cli(old, "check").returncode == 0


def test_a_layout_1_warehouse_without_its_file_is_upgraded_too(old: Path):
    """kidata 0.1-0.2.7 wrote no layout file: such a warehouse holding runs is layout 1."""
    (old / "_kidata" / "layout.json").unlink()
    expected = answers(old)
    assert not (old / "_kidata" / "layout.json").exists()  # reading wrote nothing
    assert cli(old, "compact").returncode == 0
    assert layout_number(old) == 3
    assert same_answers(answers(old), expected)


def test_a_new_warehouse_is_layout_3_and_documents_are_apart(tmp_path: Path):
    wh = tmp_path / "wh"
    assert cli(wh, "load", SEEDS).returncode == 0
    assert layout_number(wh) == commit.CURRENT_LAYOUT == 3
    [runs] = (wh / "runs").glob("*.parquet")
    [documents] = (wh / "run_documents").glob("*.parquet")
    assert "document" not in pq.read_schema(runs).names
    table = pq.read_table(documents)
    assert table.num_rows == 26
    for run_id, document in zip(table["run_id"].to_pylist(), table["document"].to_pylist(),
                                strict=True):
        assert json.loads(document)["metadata"]["name"] == run_id


@pytest.mark.slow  # a killed process
@pytest.mark.parametrize("point", ["upgrade:before-journal", "upgrade:after-journal"])
def test_an_upgrade_killed_is_all_or_nothing(old: Path, point: str):
    """A writer killed (SIGKILL) before the upgrade's journal leaves layout 1 as it was; after
    it, the journal, which the next writer completes. Readers meanwhile see the same answers."""
    expected = answers(old)
    killed = script(old, "compact", KIDATA_FAULT=point, KIDATA_FAULT_ACTION="kill")
    assert killed.returncode == -9, killed.stderr
    journals = list((old / "_kidata" / "journal").glob("*.json"))
    assert len(journals) == (1 if point.endswith("after-journal") else 0)
    assert layout_number(old) == 1
    assert same_answers(answers(old), expected)
    done = cli(old, "check", "--repair")
    assert done.returncode == 0, done.stdout + done.stderr
    assert layout_number(old) == 3
    assert same_answers(answers(old), expected)
    assert not list((old / "_kidata" / "journal").glob("*.json"))


def test_an_unreadable_runs_file_stops_the_upgrade_with_an_error_naming_it(old: Path,
                                                                            tmp_path: Path):
    """A warehouse's files are input: a damaged runs file is an error line naming it, not a
    traceback, and nothing changes; moved out of the way, the upgrade goes ahead."""
    damaged = sorted((old / "runs").glob("*.parquet"))[0]
    damaged.write_bytes(damaged.read_bytes()[:3000])
    before = {p: p.read_bytes() for p in old.rglob("*") if p.is_file() and p.name != "lock"}
    seeds = tmp_path / "seeds"
    shutil.copytree(SEEDS, seeds)
    for args in (("load", seeds), ("compact",), ("check", "--repair")):
        done = cli(old, *args)
        assert done.returncode == 1, (args, done.stderr)
        assert done.stderr.startswith(
            f"Error: cannot upgrade the warehouse {old} from layout 1 to 2: "
            f"runs/{damaged.name} cannot be read as a runs file ("), done.stderr
        assert "nothing was changed" in done.stderr and "Traceback" not in done.stderr
    assert {p: p.read_bytes() for p in old.rglob("*") if p.is_file() and p.name != "lock"
            and "compact" not in p.parts} == before
    assert layout_number(old) == 1
    damaged.rename(tmp_path / damaged.name)
    done = cli(old, "compact")
    assert done.returncode == 0, done.stderr
    assert "the documents of 5 runs (1 runs files)" in done.stdout
    assert layout_number(old) == 3


def test_a_run_stored_without_its_document_is_carried_over_and_still_reported(old: Path):
    """Damage the upgrade does not make worse: the run keeps its row, has no document to
    move, and kidata check reports it before and after."""
    import pyarrow as pa

    path = sorted((old / "runs").glob("*.parquet"))[0]
    table = pq.read_table(path)
    run_id = table["run_id"][0].as_py()
    documents = table["document"].to_pylist()
    documents[0] = None
    at = table.schema.get_field_index("document")
    pq.write_table(table.set_column(at, pa.field("document", pa.string()),
                                    pa.array(documents)), path)
    before = cli(old, "check")
    assert before.returncode == 1
    assert "problem: run_documents: 1 rows have no document, which is required" in before.stderr
    done = cli(old, "compact")
    assert done.returncode == 0, done.stderr
    assert f"the documents of {RUNS - 1} runs (2 runs files)" in done.stdout
    assert layout_number(old) == 3
    after = cli(old, "check")
    assert after.returncode == 1
    assert ("problem: runs: rows for 1 run_ids that are not in run_documents (every run keeps "
            f"its document), e.g. '{run_id}'") in after.stderr
    assert Warehouse(old).sql("select count(*) from runs").fetchall() == [(RUNS,)]


def test_files_in_run_documents_of_a_layout_1_warehouse_stop_the_upgrade(old: Path):
    """Layout 1 has no run_documents files: an upgrade would rename over them, so it refuses."""
    stray = old / "run_documents"
    stray.mkdir()
    shutil.copyfile(sorted((old / "runs").glob("*.parquet"))[0], stray / "part-copied.parquet")
    done = cli(old, "compact")
    assert done.returncode == 1
    assert done.stderr == (
        f"Error: cannot upgrade the warehouse {old} from layout 1 to 2: its run_documents/ "
        "folder holds files, which no kidata of layout 1 writes; nothing was changed. Move "
        "them out of the warehouse and run again\n")
    assert layout_number(old) == 1


def test_upgrade_of_a_current_warehouse_does_nothing(tmp_path: Path):
    wh = tmp_path / "wh"
    assert cli(wh, "load", SEEDS).returncode == 0
    before = sorted(p.stat().st_mtime_ns for p in wh.rglob("*.parquet"))
    with Warehouse(wh).writer_lock() as done:
        assert done == []
    assert upgrade.upgrade(wh) == []
    assert sorted(p.stat().st_mtime_ns for p in wh.rglob("*.parquet")) == before


# -- layout 2 (kidata 0.3.14): step contexts with fingerprints ------------------------------

@pytest.fixture
def layout2(tmp_path: Path) -> Path:
    return copy_of(LAYOUT2, tmp_path / "wh2")


def series(wh: Path) -> list[tuple]:
    """Every series step, floats to 12 digits."""
    rows = Warehouse(wh).sql("select * from series_steps").fetchall()
    return sorted(tuple(float(f"{v:.12g}") if isinstance(v, float) else v for v in row)
                  for row in rows)


def test_the_layout_2_fixture_holds_contexts_with_fingerprints():
    assert layout_number(LAYOUT2) == 2
    files = sorted((LAYOUT2 / "step_context").glob("*.parquet"))
    assert files and all("context_key" in pq.read_schema(f).names for f in files)
    assert sum(pq.read_metadata(f).num_rows for f in files) > 0


def test_a_layout_2_warehouse_is_read_as_it_is_its_contexts_unread(layout2: Path,
                                                                  tmp_path: Path):
    """Its stored contexts are in a format this kidata does not read: every step is computed,
    the same rows as a copy without them; nothing is written."""
    before = {p: p.read_bytes() for p in layout2.rglob("*") if p.is_file()}
    bare = tmp_path / "bare"
    shutil.copytree(layout2, bare)
    shutil.rmtree(bare / "step_context")
    got = series(layout2)
    assert got and got == series(bare)
    assert Warehouse(layout2).sql("select count(*) from step_context").fetchall() == [(0,)]
    done = cli(layout2, "check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert {p: p.read_bytes() for p in layout2.rglob("*") if p.is_file() and p.name != "lock"} \
        == {p: b for p, b in before.items() if p.name != "lock"}
    assert layout_number(layout2) == 2


def test_compact_upgrades_layout_2_and_stores_every_step(layout2: Path):
    expected = series(layout2)
    done = cli(layout2, "compact")
    assert done.returncode == 0, done.stderr
    assert ("upgraded the warehouse from layout 2 to 3: step_context emptied (2 files "
            "of steps' contexts in the format of kidata 0.3.7-0.3.14)") in done.stdout
    assert "from layout 1" not in done.stdout
    assert layout_number(layout2) == 3
    # It stored every step (the warehouse had none in this format); sessions read them.
    [file] = sorted((layout2 / "step_context").glob("*.parquet"))
    assert "context_key" not in pq.read_schema(file).names
    db = Warehouse(layout2)
    [(covered, steps)] = db.sql(
        "select (select count(*) from step_edits where kind = 'covered'), "
        "(select count(*) from step_context)").fetchall()
    assert covered == 3 and steps == len(expected)
    assert series(layout2) == expected
    assert cli(layout2, "check").returncode == 0


@pytest.mark.slow  # a killed process
@pytest.mark.parametrize("point", ["upgrade:before-journal", "upgrade:after-journal"])
def test_an_upgrade_of_layout_2_killed_is_all_or_nothing(layout2: Path, point: str):
    expected = series(layout2)
    killed = script(layout2, "compact", KIDATA_FAULT=point, KIDATA_FAULT_ACTION="kill")
    assert killed.returncode == -9, killed.stderr
    assert layout_number(layout2) == 2
    assert series(layout2) == expected
    done = cli(layout2, "check", "--repair")
    assert done.returncode == 0, done.stdout + done.stderr
    assert layout_number(layout2) == 3
    assert series(layout2) == expected
    assert not list((layout2 / "_kidata" / "journal").glob("*.json"))
