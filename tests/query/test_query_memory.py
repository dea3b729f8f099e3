"""KIDATA_QUERY_MEMORY (kidata/core/engine.py ``reading_settings``): every session that reads the
warehouse runs within DuckDB's memory limit it sets (unset, kidata's default; ``none``, DuckDB's
own) and spills beyond it to a temporary folder of its own, outside the user's working folder;
the answers are the same either way."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import SEEDS, same_rows

from kidata import Warehouse

SCRIPT = Path(sys.executable).parent / "kidata"  # the installed console script
# About 370 MB to group 3M distinct strings of 32 characters with no limit: under 100 MB it must
# spill to answer. A grouping, not count(DISTINCT ...) over a sort: DuckDB's grouped aggregate
# spills by design, while the distinct aggregate ran out of a 64 MB limit on a CI machine.
SPILLS = ("SELECT current_setting('memory_limit') AS memory_limit, "
          "current_setting('temp_directory') AS temp_directory, "
          "(SELECT count(*) FROM (SELECT s FROM (SELECT md5(range::VARCHAR) AS s "
          "FROM range(3000000)) GROUP BY s)) AS grouped")


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> Warehouse:
    wh = Warehouse(tmp_path_factory.mktemp("memory") / "wh")
    assert wh.load([str(SEEDS)]).ok
    return wh


def _sql(wh: Warehouse, query: str, cwd: Path, **env: str) -> list[dict]:
    import os

    run = subprocess.run([str(SCRIPT), "-w", str(wh.path), "sql", query, "-f", "csv"],
                         capture_output=True, text=True, timeout=300, cwd=cwd,
                         env={**os.environ, **env})
    assert run.returncode == 0, run.stderr
    return list(csv.DictReader(io.StringIO(run.stdout)))


def test_a_reading_command_runs_within_the_limit_and_spills_outside_the_working_folder(
        seeded, tmp_path, monkeypatch):
    monkeypatch.delenv("KIDATA_QUERY_MEMORY", raising=False)
    [row] = _sql(seeded, SPILLS, tmp_path, KIDATA_QUERY_MEMORY="100MB")
    assert row["memory_limit"] == "95.3 MiB"  # 100 MB as DuckDB shows it
    folder = Path(row["temp_directory"])
    assert folder.parent == Path(tempfile.gettempdir())
    assert folder.name.startswith("kidata-duckdb-")
    assert row["grouped"] == "3000000"
    assert list(tmp_path.iterdir()) == [] and not folder.exists()  # removed when it closed
    # Unset: kidata's default, 300 MB (75 MB per core on more than four cores); `none`:
    # DuckDB's own (a share of the machine's memory). The answers are the same.
    import os

    default = max(300, 75 * (os.cpu_count() or 1)) * 10**6 / 2**20
    [bounded] = _sql(seeded, SPILLS, tmp_path)
    assert bounded["memory_limit"] == f"{default:.1f} MiB" and bounded["grouped"] == "3000000"
    [free] = _sql(seeded, SPILLS, tmp_path, KIDATA_QUERY_MEMORY="none")
    assert free["memory_limit"] not in ("95.3 MiB", bounded["memory_limit"])
    assert free["grouped"] == "3000000" and free["temp_directory"] != bounded["temp_directory"]


def test_a_limit_too_small_for_a_query_is_an_error_that_names_it(seeded, tmp_path):
    import os

    run = subprocess.run([str(SCRIPT), "-w", str(seeded.path), "sql",
                          "SELECT count(*) FROM speedup_summary"], capture_output=True,
                         text=True, timeout=300, cwd=tmp_path,
                         env={**os.environ, "KIDATA_QUERY_MEMORY": "16MB"})
    assert run.returncode == 1
    assert "Out of Memory" in run.stderr
    assert "KIDATA_QUERY_MEMORY=16MB is too small for this query: raise it" in run.stderr
    assert "SET memory_limit" not in run.stderr  # DuckDB's advice a command cannot follow


def test_the_views_answer_the_same_within_a_small_limit(seeded, monkeypatch):
    query = "SELECT * FROM speedup_summary ORDER BY ALL"
    monkeypatch.delenv("KIDATA_QUERY_MEMORY", raising=False)
    free = Warehouse(seeded.path).sql(query).fetchall()
    monkeypatch.setenv("KIDATA_QUERY_MEMORY", "64MB")
    limited = Warehouse(seeded.path)
    assert limited.sql("SELECT current_setting('memory_limit')").fetchall() == [("61.0 MiB",)]
    assert same_rows(limited.sql(query).fetchall(), free) and free


def test_export_duckdb_within_a_small_limit_copies_every_row(seeded, tmp_path):
    """The tables are copied by the limited reading connection with the file attached to it
    (one limit bounds the copy): the file holds every committed row and its views answer as
    the warehouse's."""
    import os

    import duckdb

    target = tmp_path / "copy.duckdb"
    run = subprocess.run([str(SCRIPT), "-w", str(seeded.path), "export", "--duckdb",
                          str(target)], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path, env={**os.environ, "KIDATA_QUERY_MEMORY": "64MB"})
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.duckdb"]
    query = "SELECT * FROM speedup_summary ORDER BY ALL"
    with duckdb.connect(str(target), read_only=True) as con:
        for table in ("runs", "measurements", "environments", "protocols"):
            assert con.execute(f"SELECT count(*) FROM {table}").fetchall() == \
                seeded.sql(f"SELECT count(*) FROM {table}").fetchall()
        copied = con.execute(query).fetchall()
    here = seeded.sql(query).fetchall()
    assert copied and len(copied) == len(here)
    for a, b in zip(copied, here, strict=True):  # floats to the last bits of a parallel sum's order
        assert [round(v, 9) if isinstance(v, float) else v for v in a] == \
            [round(v, 9) if isinstance(v, float) else v for v in b]


def test_check_reads_within_the_limit(seeded, monkeypatch):
    """`kidata check` reads every row of the warehouse: its DuckDB connections take the limit
    as the other reading sessions do (at 1M runs 0.6 GB with 400MB instead of 1.6 GB:
    docs/benchmarks.md, Run AP), and it checks the same."""
    from kidata.core import engine
    from kidata.store import verify

    limits = []
    real = engine.connect

    def connect(config=None):
        con = real(config)
        limits.append(con.sql("SELECT current_setting('memory_limit')").fetchall()[0][0])
        return con

    monkeypatch.setattr(verify.engine, "connect", connect)
    monkeypatch.setenv("KIDATA_QUERY_MEMORY", "64MB")
    report = Warehouse(seeded.path).check()
    assert report.ok, report.problems
    assert limits and set(limits) == {"61.0 MiB"}  # 64 MB as DuckDB shows it


def test_out_of_memory_under_the_default_limit_names_the_default(monkeypatch):
    """Unset, the limit is kidata's default: DuckDB's out-of-memory error says so and how to
    lift it, never DuckDB's own advice (SET memory_limit)."""
    import os

    import duckdb

    from kidata.library import engine_message

    monkeypatch.delenv("KIDATA_QUERY_MEMORY", raising=False)
    default = f"{max(300, 75 * (os.cpu_count() or 1))}MB"
    error = duckdb.OutOfMemoryException("Out of Memory Error: failed to pin block\n\n"
                                        "Possible solutions:\n* SET memory_limit")
    assert engine_message(error) == (
        f"Out of Memory Error: failed to pin block (the default KIDATA_QUERY_MEMORY, {default}, "
        "is too small for this query: raise it, or set it to none for DuckDB's own limit)")
    monkeypatch.setenv("KIDATA_QUERY_MEMORY", "none")
    assert "KIDATA_QUERY_MEMORY" not in engine_message(error)


def test_a_killed_processs_scratch_folders_are_removed_by_the_next(seeded, tmp_path):
    # A killed process leaves its spill folder and kept rows (DuckDB and the session remove
    # them only when they close): the next kidata process that makes one removes those of
    # processes that are gone, and nothing else.
    import os

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = int(gone.stdout)
    temp = tmp_path / "tmp"
    temp.mkdir()
    leftovers = [temp / f"kidata-reading-{dead}-0123abcd", temp / f"kidata-kept-{dead}-x1_y",
                 temp / f"kidata-duckdb-{dead}-4567ef01"]
    kept = [temp / f"kidata-kept-{os.getpid()}-alive",  # a process that runs
            temp / f"kidata-tree-{dead}-other",  # not a scratch folder of kidata's
            temp / f"kidata-reading-{dead}"]  # not of the form
    for folder in leftovers + kept:
        folder.mkdir()
        (folder / "block.bin").write_bytes(b"x" * 10)
    [row] = _sql(seeded, "SELECT current_setting('temp_directory') AS t", tmp_path,
                 TMPDIR=str(temp))
    assert Path(row["t"]).parent == temp  # the command's own scratch folder is there too
    assert not any(f.exists() for f in leftovers)
    assert all((f / "block.bin").exists() for f in kept)


def test_writers_spill_into_scratch_folders_not_the_working_folder(tmp_path, monkeypatch):
    """A connection that writes spills beyond its limit too (storing every step of 1M runs does,
    under KIDATA_COMMIT_MEMORY): into a folder of its own under the system's temporary
    directory (a load's commit: its staging folder), never DuckDB's default, ``.tmp`` in the
    working folder. Here that name is a file, as a read-only working folder would make it
    impossible: storing a load's steps failed with "Failed to create directory"."""
    import tempfile

    from kidata.core import engine

    work = tmp_path / "work"
    work.mkdir()
    (work / ".tmp").write_text("not a folder")
    monkeypatch.chdir(work)
    temp = Path(tempfile.gettempdir())
    # A connection kidata opens spills, and answers.
    with engine.connect({"memory_limit": "64MB", "threads": 1}) as con:
        [(limit, folder, grouped)] = con.sql(SPILLS).fetchall()
    assert Path(folder).parent == temp and Path(folder).name.startswith("kidata-duckdb-")
    assert grouped == 3_000_000
    # Every connection of a load that stores its steps, a check, a compaction and an unload.
    folders: list[str] = []
    real = engine.connect

    def connect(config=None):
        con = real(config)
        folders.append(con.sql("SELECT current_setting('temp_directory')").fetchall()[0][0])
        return con

    monkeypatch.setattr(engine, "connect", connect)
    monkeypatch.setenv("KIDATA_CONTEXTS_AT", "0")  # store steps however few the runs
    wh = Warehouse(tmp_path / "wh")
    first = wh.load([str(SEEDS)])
    assert first.ok and first.added.get("step_context")  # the steps were stored
    assert wh.check().ok
    wh.compact()
    wh.unload([first.load_id])
    assert len(folders) > 5
    for name in folders:
        path = Path(name)
        assert path.is_absolute(), name
        assert (path.parent == temp and path.name.startswith("kidata-")) or \
            path.is_relative_to(wh.path / "_kidata" / "staging"), name
    assert [p.name for p in work.iterdir()] == [".tmp"]


def test_release_keeps_the_sessions_limit_and_what_it_kept(seeded, monkeypatch):
    """``Warehouse.release`` flushes DuckDB's allocator by setting the memory limit again
    (compare and gate call it between their steps: docs/benchmarks.md, Run AZ): the limit must
    stay the session's own, and the connection, with the views it kept, must stay usable."""
    monkeypatch.setenv("KIDATA_QUERY_MEMORY", "100MB")
    wh = Warehouse(seeded.path)
    wh.keep("latencies")
    before = wh.sql("SELECT count(*), sum(center_us) FROM latencies").fetchall()
    kept = wh.sql("SELECT count(*) FROM duckdb_tables() WHERE temporary").fetchall()
    assert kept[0][0] >= 1
    wh.sql("CREATE TEMP TABLE mine AS SELECT 42 AS answer")
    wh.release()
    assert wh.sql("SELECT current_setting('memory_limit')").fetchall() == [("95.3 MiB",)]
    assert wh.sql("SELECT count(*) FROM duckdb_tables() WHERE temporary").fetchall() == \
        [(kept[0][0] + 1,)]
    assert wh.sql("SELECT answer FROM mine").fetchall() == [(42,)]
    assert wh.sql("SELECT count(*), sum(center_us) FROM latencies").fetchall() == before
    # Before any query there is no connection to release: nothing happens, nothing fails.
    Warehouse(seeded.path).release()
