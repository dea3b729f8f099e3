"""A load never loses or doubles what it read (issue 25).

kidata 0.2.5-0.2.7 committed a damaged warehouse when one load held the same runs more than
once and had to copy its kept rows (``finalize.finish`` shifted its mask by the rows kept
instead of the rows read): measurements of added runs were lost, duplicates' rows kept, runs
doubled. These tests load each shape the issue names — duplicates inside one file, across the
files of one load, a file and its prefix (either order), JSON Lines and Liger's CSV, with and
without worker processes — at sizes that cross the commit's copy batches, and count every
table against what the input holds, counted here from the input itself. Then: the load's own
check refuses a commit whose files disagree with what it read, and a warehouse damaged by the
0.2.7 code is found by ``kidata check`` and repaired by ``kidata unload --damaged`` and a
re-load.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import console, shared

from kidata import Warehouse
from kidata.errors import LoadRefused
from kidata.store import finalize, load_commit

ROOT = Path(__file__).resolve().parents[2]
RUNS = 3000  # 9,000 measurements: more than one copy batch (finalize.BATCH, 8,192)


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    """``benchmarks/generate.py``'s 3,000 bundles (one JSON line each, distinct run names)."""
    out = tmp_path_factory.mktemp("generated")
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "generate.py"), "--runs",
                    str(RUNS), "--out", str(out)], check=True, capture_output=True)
    return out / "bundles.ndjson"


def expected_from_lines(lines: list[bytes]) -> tuple[int, int]:
    """Distinct runs and their measurements, counted from the JSON lines themselves: a run's
    measurements are its latency median plus each entry of ``spec.measurements``."""
    runs: dict[str, int] = {}
    for line in lines:
        spec = json.loads(line)["run"]
        name = spec["metadata"]["name"]
        spec = spec["spec"]
        runs[name] = len(spec["measurements"]) + ("median" in spec["timing"]["latencyNs"])
    return len(runs), sum(runs.values())


def counts(wh: Warehouse) -> tuple[int, int, int]:
    [(runs, distinct, measurements)] = wh.sql(
        "select (select count(*) from runs), (select count(distinct run_id) from runs), "
        "(select count(*) from measurements)").fetchall()
    return runs, distinct, measurements


def with_workers(monkeypatch, workers: str, batch_lines: int | None = None) -> None:
    """``KIDATA_WORKERS=workers`` for the loads that follow, and the pool's batch shrunk to
    ``batch_lines`` (a few hundred generated lines start no pool at the default 2,048); the
    tests check with the ``pool_jobs`` fixture that the pool was handed jobs."""
    from kidata.ingest import stage

    monkeypatch.setenv("KIDATA_WORKERS", workers)
    if batch_lines is not None:
        monkeypatch.setattr(stage, "BATCH_LINES", batch_lines)
        monkeypatch.setattr(stage, "POOL_ROWS", batch_lines)


def write(path: Path, lines: list[bytes]) -> str:
    path.write_bytes(b"".join(lines))
    return str(path)


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.parametrize("shape", ["inside-one-file", "across-files", "prefix-first",
                                   "prefix-last"])
def test_json_lines_with_repeated_runs_keep_every_run_once_with_its_measurements(
        generated, tmp_path, monkeypatch, pool_jobs, shape, workers):
    with_workers(monkeypatch, workers, batch_lines=128)
    # 600 runs, 1,800 measurements: copied in batches of 500 rows, both tables cross batch
    # boundaries (0.2.7's default of 8,192 needed ~3,000 runs to show the loss).
    monkeypatch.setattr(finalize, "BATCH", 500)
    lines = generated.read_bytes().splitlines(keepends=True)[:600]
    runs, measurements = expected_from_lines(lines)
    assert (runs, measurements) == (600, 1800)  # 3 per run: median, p20, p80
    head = lines[:200]
    if shape == "inside-one-file":  # the issue's repro: repeats, then all
        files = [write(tmp_path / "dup.ndjson", head + lines)]
    elif shape == "across-files":  # two artifact folders sharing every other run
        head = lines[::3]
        files = [write(tmp_path / "a.ndjson", head), write(tmp_path / "b.ndjson", lines)]
    elif shape == "prefix-first":
        files = [write(tmp_path / "a.ndjson", head), write(tmp_path / "b.ndjson", lines)]
    else:  # repeats only after every run they repeat: 0.2.7 got this order right
        files = [write(tmp_path / "b.ndjson", lines), write(tmp_path / "a.ndjson", head)]
    wh = Warehouse(tmp_path / "wh")
    report = wh.load(files)
    repeats = len(head)
    assert (report.runs_added, report.duplicates, report.rejected) == (runs, repeats, 0)
    assert report.added["measurements"] == measurements
    assert counts(wh) == (runs, runs, measurements)
    assert wh.check().problems == []
    assert bool(pool_jobs) == (workers != "0"), pool_jobs  # the pool staged (some of) it, or none


def test_the_issue_repro_at_the_default_batch_size(generated, tmp_path):
    """The issue's own repro, at 0.2.7's sizes: 3,000 runs, their first 1,000 repeated first
    (0.2.7: 8,192 measurements of 9,000, 269 runs without a median)."""
    lines = generated.read_bytes().splitlines(keepends=True)
    wh = Warehouse(tmp_path / "wh")
    report = wh.load([write(tmp_path / "dup.ndjson", lines[:1000] + lines)])
    assert (report.runs_added, report.added["measurements"]) == (RUNS, 3 * RUNS)
    assert counts(wh) == (RUNS, RUNS, 3 * RUNS)
    assert wh.check().problems == []


@pytest.mark.parametrize("workers", ["0", "2"])
def test_small_copy_batches_cross_runs_and_measurements_alike(generated, tmp_path,
                                                             monkeypatch, pool_jobs, workers):
    """With copy batches and row groups far smaller than the load, the runs file is copied
    in many batches too (0.2.7 doubled runs and left measurements without a run here)."""
    with_workers(monkeypatch, workers)
    monkeypatch.setattr(finalize, "BATCH", 97)
    monkeypatch.setattr("kidata.store.pqwrite.ROWS", 500)
    lines = generated.read_bytes().splitlines(keepends=True)
    # Every third run twice, the repeats scattered through the file.
    mixed = [x for i, line in enumerate(lines) for x in ([line, line] if i % 3 == 0 else [line])]
    wh = Warehouse(tmp_path / "wh")
    report = wh.load([write(tmp_path / "mixed.ndjson", mixed)], batch_size=256)
    assert (report.runs_added, report.duplicates) == (3000, 1000)
    assert counts(wh) == (3000, 3000, 9000)
    assert wh.check().problems == []
    assert bool(pool_jobs) == (workers != "0"), pool_jobs


def liger_rows(path: Path) -> tuple[int, int]:
    """Runs and measurements of a Liger CSV counted from its rows: one run per row, one
    measurement per quantile given (y_value_50, _20, _80)."""
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return len(rows), sum(1 for r in rows for k in ("y_value_50", "y_value_20", "y_value_80")
                          if r[k])


@pytest.mark.shared
@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.parametrize("prefix_first", [True, False])
def test_liger_csv_and_its_prefix_in_one_load(tmp_path, monkeypatch, pool_jobs, workers,
                                              prefix_first):
    with_workers(monkeypatch, workers)
    whole = shared("liger/all_benchmark_data.csv")
    runs, measurements = liger_rows(whole)
    assert (runs, measurements) == (2448, 7344)
    text = whole.read_text("utf-8").splitlines(keepends=True)
    prefix = tmp_path / "a.csv"
    prefix.write_text("".join(text[:1201]), encoding="utf-8")  # header + 1,200 rows
    # (0.2.7 lost measurements with the prefix first; the other order is the control.)
    files = [str(prefix), str(whole)] if prefix_first else [str(whole), str(prefix)]
    wh = Warehouse(tmp_path / "wh")
    report = wh.load(files)
    assert (report.runs_added, report.duplicates, report.rejected) == (runs, 1200, 0)
    assert counts(wh) == (runs, runs, measurements)
    assert wh.check().problems == []
    assert bool(pool_jobs) == (workers != "0"), pool_jobs


# -- the load's own check ---------------------------------------------------------------------

def finish_0_2_7(staging, table, keep, path, before_write=None):
    """``finalize.finish`` as kidata 0.2.5-0.2.7 had it (the copy loop's offset advanced by
    the rows kept), without the guard the fix added: the defect, to show what catches it."""
    import os

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from kidata.store.layout import direct_file, direct_sidecar
    from kidata.store.pqwrite import GroupedWriter
    from kidata.store.schema import TABLES

    data = direct_file(staging, table)
    if not data.exists():
        return 0
    if keep is None:
        os.link(data, path)
        return pq.ParquetFile(direct_sidecar(staging, table)).metadata.num_rows
    numbers = pq.ParquetFile(direct_sidecar(staging, table)).read(columns=["_seq"]).column(0)
    mask = pc.is_in(numbers, value_set=keep)
    if pc.all(mask).as_py():
        os.link(data, path)
        return len(numbers)
    offset = 0
    with GroupedWriter(path, TABLES[table], before_write=before_write) as writer:
        for batch in pq.ParquetFile(data).iter_batches(batch_size=finalize.BATCH):
            rows = pa.Table.from_batches([batch])
            rows = rows.filter(mask.slice(offset, rows.num_rows))
            writer.write(rows.cast(TABLES[table]))
            offset += rows.num_rows
    return writer.rows


def test_a_load_whose_files_disagree_with_what_it_read_refuses_to_commit(
        generated, tmp_path, monkeypatch, cli):
    monkeypatch.setenv("KIDATA_WORKERS", "0")
    # 1,200 runs, their first 400 repeated first, copied in batches of 1,000 rows (0.2.7's
    # default of 8,192 needed the issue's 3,000 runs to show the loss).
    monkeypatch.setattr(finalize, "BATCH", 1000)
    lines = generated.read_bytes().splitlines(keepends=True)
    dup = write(tmp_path / "dup.ndjson", lines[:400] + lines[:1200])
    wh = Warehouse(tmp_path / "wh")
    wh.load([write(tmp_path / "first.ndjson", lines[:10])])
    before = counts(wh)
    monkeypatch.setattr(finalize, "finish", finish_0_2_7)
    with pytest.raises(LoadRefused) as caught:
        wh.load([dup])
    message = str(caught.value)
    assert "refused to commit, the warehouse is unchanged" in message
    # What disagreed, in numbers the input gives: 1,190 new runs, their 3,570 measurements.
    assert "the added records staged 3,570" in message
    assert "added runs have no measurement" in message
    assert counts(wh) == before
    assert wh.sql("select count(*) from loads").fetchall() == [(1,)]
    assert wh.check().problems == []
    # The command line says so and exits 1.
    result = cli("load", "-w", tmp_path / "wh", dup)
    assert result.code == 1
    assert "Error: load " in result.err and "refused to commit" in result.err
    assert counts(wh) == before


# -- warehouses damaged by 0.2.5-0.2.7 --------------------------------------------------------

def test_a_warehouse_damaged_by_0_2_7_is_named_by_check_and_mended_by_unload(
        generated, tmp_path, monkeypatch):
    monkeypatch.setenv("KIDATA_WORKERS", "0")
    lines = generated.read_bytes().splitlines(keepends=True)
    clean = write(tmp_path / "clean.ndjson", lines[2000:2010])  # a good load before it
    dup = write(tmp_path / "dup.ndjson", lines[:200] + lines[:600])
    path = tmp_path / "wh"
    wh = Warehouse(path)
    wh.load([clean])
    # The 0.2.7 load path: its copy loop, no self-check.
    with monkeypatch.context() as m:
        m.setattr(finalize, "finish", finish_0_2_7)
        m.setattr(finalize, "BATCH", 300)  # 1,800 measurements: several copy batches
        m.setattr(load_commit.LoadCommit, "_verify", lambda *a: [])
        m.setattr("kidata.__version__", "0.2.7")  # as its commit marker says
        damaged = wh.load([dup])
    # What 0.2.7 committed: 600 runs and their 1,800 measurements were read.
    assert (damaged.runs_added, damaged.added["measurements"]) != (600, 1800)
    report = wh.check()
    assert list(report.damaged) == [damaged.load_id]  # not the clean load
    assert any(p.startswith("loads: 1 loads hold inconsistent rows") for p in
               report.problems)
    # The way out, through the CLI: take the damaged load out, load again.
    check = console("check", "-w", path)
    assert check.returncode == 1 and damaged.load_id in check.stderr
    assert "kidata unload --damaged" in check.stderr
    out = console("unload", "--damaged", "-w", path)
    assert out.returncode == 0, out.stderr
    assert "took out 1 load(s) (" in out.stdout and damaged.load_id in out.stdout
    assert f"{damaged.runs_added:,} runs" in out.stdout
    assert counts(wh) == (10, 10, 30)  # the clean load's, whole
    assert wh.check().problems == []
    again = wh.load([dup])  # read again: its manifest went with the load
    assert (again.runs_added, again.added["measurements"]) == (600, 1800)
    assert counts(wh) == (610, 610, 1830)
    assert wh.check().problems == []
    assert wh.unload(damaged=True) == ([], {})  # nothing left to take out


def test_unload_takes_a_named_load_out_and_keeps_its_documents(generated, tmp_path, cli):
    lines = generated.read_bytes().splitlines(keepends=True)
    wh = Warehouse(tmp_path / "wh")
    first = wh.load([write(tmp_path / "a.ndjson", lines[:20])])
    second = wh.load([write(tmp_path / "b.ndjson", lines[20:50])])
    documents = wh.sql("select count(*) from environments").fetchall()
    result = cli("unload", first.load_id, "-w", tmp_path / "wh")
    assert result.code == 0, result.err
    assert counts(wh) == (30, 30, 90)
    assert wh.sql("select distinct load_id from runs").fetchall() == [(second.load_id,)]
    # The documents the first load added stay (the second load's runs name them).
    assert wh.sql("select count(*) from environments").fetchall() == documents
    [(added,)] = wh.sql("select added from loads where load_id = $l",
                        params={"l": first.load_id}).fetchall()
    assert "runs" not in json.loads(added) and "environments" in json.loads(added)
    assert wh.check().problems == []
    # Its file is read again: the runs come back.
    assert wh.load([str(tmp_path / "a.ndjson")]).runs_added == 20
    assert counts(wh) == (50, 50, 150)
    # A load id that names no committed load is bad usage, and so is naming none.
    assert cli("unload", "nope", "-w", tmp_path / "wh").code == 2
    assert cli("unload", "-w", tmp_path / "wh").code == 2


def test_every_record_of_a_stored_run_is_judged_against_the_stored_run(tmp_path):
    """Found by the oracle: a load whose first record of a stored run conflicted with it
    judged the run's later records against that rejected record, so the stored run's own
    record was rejected and a second conflict counted as a duplicate."""
    seed = json.loads((ROOT / "tests/data/seeds/000_ef9e0295e36a82ef.txt").read_text(
        "utf-8").split("\n", 2)[2])
    other = json.loads(json.dumps(seed))
    other["run"]["spec"]["timing"]["latencyNs"]["median"] += 1
    wh = Warehouse(tmp_path / "wh")
    assert wh.load([write(tmp_path / "a.ndjson", [json.dumps(seed).encode() + b"\n"])]).ok
    lines = [json.dumps(b).encode() + b"\n" for b in (other, other, seed)]
    report = wh.load([write(tmp_path / "b.ndjson", lines)])
    assert sorted(r.position for r in report.rejects) == ["line 1", "line 2"]
    assert (report.runs_added, report.duplicates, report.rejected) == (0, 1, 2)
    assert wh.sql("select value from measurements where statistic = 'median'"
                  ).fetchall() == [(seed["run"]["spec"]["timing"]["latencyNs"]["median"],)]


V027 = "8ce921dd5de8"  # main at kidata 0.2.7 (issue 25's "main 8ce921d")


@pytest.mark.slow
def test_a_warehouse_written_by_kidata_0_2_7_itself_is_mended(generated, tmp_path, cli):
    """The issue's repro loaded by the 0.2.7 release itself (extracted from this repository's
    history and run in a subprocess), then found, taken out and reloaded by this version
    (in-process: the console script's check and unload --damaged are run by
    test_a_warehouse_damaged_by_0_2_7_is_named_by_check_and_mended_by_unload)."""
    tree = tmp_path / "v027"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", V027, "kidata", "sql"],
                             capture_output=True)
    if archive.returncode:
        pytest.skip(f"revision {V027} is not in this clone's history (a shallow clone or an "
                    f"export): {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    lines = generated.read_bytes().splitlines(keepends=True)
    dup = write(tmp_path / "dup.ndjson", lines[:1000] + lines)
    path = tmp_path / "wh"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("KIDATA_")},
           "PYTHONPATH": str(tree)}
    old = subprocess.run([sys.executable, "-m", "kidata", "load", "-w", str(path), dup],
                         capture_output=True, text=True, cwd=tree, env=env, timeout=300)
    assert old.returncode == 0, old.stderr
    assert "3,000 runs added (8,192 measurements" in old.stdout  # the loss, as reported
    check = cli("check", "-w", path)
    assert check.code == 1 and "loads: 1 loads hold inconsistent rows" in check.err
    assert cli("unload", "--damaged", "-w", path).code == 0
    again = cli("load", "-w", path, dup)
    assert again.code == 0, again.err
    assert "3,000 runs added (9,000 measurements" in again.out
    assert cli("check", "-w", path).code == 0
    assert counts(Warehouse(path)) == (RUNS, RUNS, 3 * RUNS)


def test_a_richer_record_with_another_protocol_is_not_a_variant_in_one_load_or_two(tmp_path):
    """Records of one run with the same numbers but another protocol are not variants: the
    first loaded is kept (docs/guarantees.md, "Duplicates that carry more", Limits), in one
    load as across loads (found by the oracle: in one load the richer one won)."""
    import hashlib

    from test_properties import with_documents

    def canonical_digest(doc: dict) -> str:  # the kernelindex rule, written out
        body = {k: v for k, v in doc.items() if k != "metadata"}
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()

    bare = with_documents(0, False)
    bare.pop("workload")  # names its workload by digest only: less rich
    richer = with_documents(0, True)  # workload and implementation documents
    richer["protocol"]["spec"]["notes"] = "another harness setting"
    richer["run"]["spec"]["protocolDigest"] = canonical_digest(richer["protocol"])
    lines = [json.dumps(b).encode() + b"\n" for b in (bare, richer)]
    kept = {}
    for how in ("one load", "two loads"):
        wh = Warehouse(tmp_path / how.replace(" ", "-"))
        if how == "one load":
            report = wh.load([write(tmp_path / "both.ndjson", lines)])
            assert (report.runs_added, report.duplicates) == (1, 1)
        else:
            wh.load([write(tmp_path / "first.ndjson", lines[:1])])
            assert wh.load([write(tmp_path / "second.ndjson", lines[1:])]).duplicates == 1
        kept[how] = wh.sql("select protocol_id, implementation_id from runs").fetchall()
    assert kept["one load"] == kept["two loads"]
    assert kept["one load"][0][0] == bare["run"]["spec"]["protocolDigest"]
