"""`kidata check` finds what breaks a guarantee; `kidata compact` merges files without changing
any query result, also when killed midway, and readers never see duplicates or lose rows."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from runs_factory import write_runs

from kidata import Warehouse
from kidata.core.viewfiles import load_views
from kidata.errors import QueryError
from kidata.store.schema import AFTER_COMMIT, TABLES

DATA = Path(__file__).parents[1] / "data"
SEEDS = sorted((DATA / "seeds").glob("*.txt"))


@pytest.fixture(scope="module")
def _several_loads(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("several")
    wh = Warehouse(tmp / "wh")
    for seed in SEEDS:
        assert wh.load([str(seed)]).committed
    wh.load([str(write_runs(tmp / "a.jsonl", range(10), bad_line=True))])
    wh.load([str(write_runs(tmp / "b.jsonl", range(10, 20)))])
    return wh.path


@pytest.fixture
def several_loads(_several_loads: Path, tmp_path: Path) -> Path:
    """A warehouse built by five loads: the three seeds one by one, a file with a rejected
    line (runs 0-9 of the generated set) and runs 10-19. A fresh copy for each test."""
    return Path(shutil.copytree(_several_loads, tmp_path / "wh"))


@pytest.fixture(scope="module")
def _many_loads(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("many")
    wh = Warehouse(tmp / "wh")
    for i in range(12):  # load i adds runs 5i .. 5i+4
        wh.load([str(write_runs(tmp / f"l{i}.jsonl", range(5 * i, 5 * i + 5)))])
    return wh.path


@pytest.fixture
def many_loads(_many_loads: Path, tmp_path: Path) -> Path:
    """12 loads of 5 runs: 60 runs, 180 measurements, 12 files per table. A fresh copy."""
    return Path(shutil.copytree(_many_loads, tmp_path / "many"))


def everything(wh_path: Path, views: list[str] | None = None) -> dict[str, list]:
    """Every table and view (or the views named), sorted: what queries can see. Floats are
    compared to 12 significant digits: DuckDB's parallel sums (the geometric means of
    speedup_summary) can differ in the last bit from one run of a query to the next."""
    wh = Warehouse(wh_path)
    # The stored steps depend on the history of the loads (which load stored or voided which
    # step): the views reading them are compared.
    return {name: sorted((tuple(float(f"{v:.12g}") if isinstance(v, float) else v for v in row)
                          for row in wh.sql(f'select * from "{name}"').fetchall()), key=repr)
            for name in [*(t for t in TABLES if t not in AFTER_COMMIT),
                         *(load_views() if views is None else views)]}


# The views are functions of the tables; the tests that compare many states check the tables
# and these views (every view is compared in test_compact_merges_files_and_changes_no_result).
SOME_VIEWS = ["latencies", "speedups", "speedup_summary"]


def test_check_passes_on_a_sound_warehouse(several_loads: Path, cli, monkeypatch):
    monkeypatch.setenv("KIDATA_WAREHOUSE", str(several_loads))
    result = cli("check")
    assert result.code == 0, result.err
    assert result.err == ""
    assert result.out.rstrip().endswith(f"rows checked in {several_loads}: ok")


def _first(folder: Path) -> Path:
    return sorted(folder.glob("*.parquet"))[0]


def _seed_runs_file(wh_path: Path) -> Path:
    """The runs file of the first load (seed 000: one run)."""
    return _first(wh_path / "runs")


def test_check_finds_a_duplicated_file(several_loads: Path, cli, monkeypatch):
    monkeypatch.setenv("KIDATA_WAREHOUSE", str(several_loads))
    source = _seed_runs_file(several_loads)
    shutil.copy(source, source.with_name("part-copy.parquet"))
    result = cli("check")
    assert result.code == 1
    run0 = ("liger-rms-norm-forward-liger-nvidia-a100-sxm4-80gb-hidden4096-rows2048-bf16-"
            "2024-09-03-15-39-30")
    assert (f"problem: runs: 1 identities (run_id) appear more than once, e.g. '{run0}'"
            ) in result.err
    # The first load recorded 1 run and now has 2 rows.
    load_id = source.stem.removeprefix("part-")
    assert (f"problem: runs: 1 loads have another number of rows than they recorded "
            f"(load_id, recorded, found): ('{load_id}', 1, 2)") in result.err
    # The doubled run now counts twice in its key: 1 row missing (passed_runs 2), 1 extra (1).
    assert (f"problem: latest_runs: 1 rows missing and 1 rows not given by the loads' runs, "
            f"in 1 loads, e.g. '{load_id}'") in result.err
    # And the load is named as one to take out and load again.
    assert (f"problem: loads: 1 loads hold inconsistent rows: {load_id} (1 runs stored more "
            "than once)") in result.err
    assert "4 problem(s)" in result.out


def test_check_finds_measurements_without_their_run(several_loads: Path, cli, monkeypatch):
    monkeypatch.setenv("KIDATA_WAREHOUSE", str(several_loads))
    _seed_runs_file(several_loads).unlink()
    result = cli("check")
    assert result.code == 1
    assert ("problem: measurements: rows for 1 run_ids that are not in runs (every measurement "
            "belongs to a run), e.g. 'liger-rms-norm-forward") in result.err


def test_check_finds_a_required_value_missing(several_loads: Path, cli, monkeypatch):
    monkeypatch.setenv("KIDATA_WAREHOUSE", str(several_loads))
    path = _seed_runs_file(several_loads)  # one run
    table = pq.read_table(path)
    at = table.schema.get_field_index("kernel")
    pq.write_table(table.set_column(at, table.schema.field("kernel").with_nullable(True),
                                    pa.array([None], pa.string())), path)
    result = cli("check")
    assert result.code == 1
    assert "problem: runs: 1 rows have no kernel, which is required" in result.err


def test_check_finds_a_run_without_its_median(several_loads: Path, cli, monkeypatch):
    monkeypatch.setenv("KIDATA_WAREHOUSE", str(several_loads))
    path = _first(several_loads / "measurements")  # seed 000's run: median, mean, ...
    table = pq.read_table(path)
    kept = table.filter(pc.not_equal(table["statistic"], "median"))
    assert 0 < kept.num_rows < table.num_rows
    pq.write_table(kept, path)
    result = cli("check")
    assert result.code == 1
    run0 = ("liger-rms-norm-forward-liger-nvidia-a100-sxm4-80gb-hidden4096-rows2048-bf16-"
            "2024-09-03-15-39-30")
    assert ("problem: runs: 1 runs have no median (or primary statistic) measurement of their "
            f"metric (never a run without its measurements), e.g. '{run0}'") in result.err
    # and the load that holds it is named, with why
    load_id = path.stem.removeprefix("part-")
    assert (f"problem: loads: 1 loads hold inconsistent rows: {load_id} (1 runs without their "
            "median measurement)") in result.err


def test_check_finds_a_run_document_that_names_another_run(several_loads: Path, cli,
                                                          monkeypatch):
    monkeypatch.setenv("KIDATA_WAREHOUSE", str(several_loads))
    path = _first(several_loads / "run_documents")  # seed 000's one run
    table = pq.read_table(path)
    run_id = table["run_id"][0].as_py()
    doc = json.loads(table["document"][0].as_py())
    doc["metadata"]["name"] = "someone-else"
    column = table.schema.get_field_index("document")
    pq.write_table(table.set_column(column, table.schema.field("document"),
                                    pa.array([json.dumps(doc)])), path)
    result = cli("check")
    assert result.code == 1
    assert (f"problem: runs: 1 run documents disagree with their row: ('{run_id}', "
            "\"document names run 'someone-else'\")") in result.err


def test_check_counts_every_disagreeing_run_document_and_shows_the_first_by_run_id(
        several_loads: Path, cli, monkeypatch):
    """Documents are checked in no order: the count is of all of them and the examples are
    the smallest run ids, as if sorted."""
    monkeypatch.setenv("KIDATA_WAREHOUSE", str(several_loads))
    path = sorted((several_loads / "run_documents").glob("*.parquet"))[-1]  # runs 10-19
    table = pq.read_table(path)
    # Both files of the load in descending run id order: the check reads them in no order of
    # its own, so the examples must be sorted, not the first read.
    for folder in ("runs", "run_documents"):
        other = sorted((several_loads / folder).glob("*.parquet"))[-1]
        rows = pq.read_table(other)
        pq.write_table(rows.sort_by([("run_id", "descending")]), other)
    table = pq.read_table(path)
    docs = [json.loads(d) for d in table["document"].to_pylist()]
    for doc in docs:
        doc["metadata"]["name"] = "x"
    column = table.schema.get_field_index("document")
    pq.write_table(table.set_column(column, table.schema.field("document"),
                                    pa.array([json.dumps(d) for d in docs])), path)
    first = sorted(table["run_id"].to_pylist())[:5]
    result = cli("check")
    assert result.code == 1
    shown = ", ".join(f"('{r}', \"document names run 'x'\")" for r in first)
    assert (f"problem: runs: {table.num_rows} run documents disagree with their row: "
            f"{shown}, …") in result.err


ZEROS = "sha256:" + "0" * 64


def _spec(key, value):
    def edit(doc):
        doc["spec"][key] = value
        return json.dumps(doc)
    return edit


def _undeclared(doc):
    del doc["spec"]["protocolDigest"]
    doc["spec"]["workloadDigest"] = None
    return json.dumps(doc)


def _metadata_list(doc):
    doc["metadata"] = [doc["metadata"]]
    return json.dumps(doc)


@pytest.mark.parametrize(("edit", "why"), [
    (_spec("protocolDigest", ZEROS), f"protocolDigest {ZEROS} but protocol_id {{protocol_id}}"),
    (_spec("environmentDigest", 7), "environmentDigest 7 but environment_id {environment_id}"),
    (lambda doc: json.dumps(doc)[:-1], "document is not a JSON object"),  # cut short
    (lambda doc: json.dumps([doc]), "document is not a JSON object"),
    (_metadata_list, "document names run None"),
    # What a document leaves out (or declares null) is not checked, and a spec that is no
    # object declares nothing: the check passes.
    (_undeclared, None),
    (lambda doc: json.dumps({**doc, "spec": [doc["spec"]]}), None),
], ids=["another digest", "a number", "cut short", "an array", "metadata a list",
        "undeclared", "spec a list"])
def test_check_reads_what_each_run_document_declares_against_its_row(
        several_loads: Path, cli, monkeypatch, edit, why):
    """The run documents are read in SQL (kidata.store.verify._run_disagreements), each
    field as :func:`kidata.store.verify._run_disagreement` words it: a declared digest that
    is not the row's, a document that is no JSON object or names no run, and nothing for a
    digest the document does not declare."""
    monkeypatch.setenv("KIDATA_WAREHOUSE", str(several_loads))
    path = sorted((several_loads / "run_documents").glob("*.parquet"))[-1]  # runs 10-19
    table = pq.read_table(path)
    docs = table["document"].to_pylist()
    run_id = min(table["run_id"].to_pylist())
    at = table["run_id"].to_pylist().index(run_id)
    docs[at] = edit(json.loads(docs[at]))
    column = table.schema.get_field_index("document")
    pq.write_table(table.set_column(column, table.schema.field("document"), pa.array(docs)),
                   path)
    result = cli("check")
    if why is None:
        assert result.code == 0, result.err
        return
    [row] = duckdb.sql(f"SELECT * FROM read_parquet('{several_loads}/runs/*.parquet') "
                       f"WHERE run_id = '{run_id}'").pl().to_dicts()
    assert result.code == 1
    assert (f"problem: runs: 1 run documents disagree with their row: ('{run_id}', "
            f"{why.format(**row)!r})") in result.err


def test_check_finds_a_run_without_its_document_and_a_document_without_its_run(
        several_loads: Path, cli, monkeypatch):
    """run_documents holds one document per run: a lost file leaves runs without theirs, and
    a document whose run is gone is an orphan."""
    monkeypatch.setenv("KIDATA_WAREHOUSE", str(several_loads))
    documents = _first(several_loads / "run_documents")  # seed 000's one run
    [run_id] = pq.read_table(documents)["run_id"].to_pylist()
    documents.unlink()
    orphan = pq.read_table(_first(several_loads / "run_documents")).slice(0, 1)
    orphan = orphan.set_column(0, orphan.schema.field("run_id"), pa.array(["no-such-run"]))
    pq.write_table(orphan, several_loads / "run_documents" / "part-orphan.parquet")
    result = cli("check")
    assert result.code == 1
    assert ("problem: runs: rows for 1 run_ids that are not in run_documents (every run keeps "
            f"its document), e.g. '{run_id}'") in result.err
    assert ("problem: run_documents: rows for 1 run_ids that are not in runs (every run "
            "document belongs to a run), e.g. 'no-such-run'") in result.err
    # The lost file is a load with fewer documents than it recorded, the orphan (a copy of
    # the next load's row) one with more.
    assert "problem: run_documents: 2 loads have another number of rows than they recorded" \
        in result.err


def test_check_finds_half_written_stray_and_misshapen_files(several_loads: Path, cli,
                                                            monkeypatch):
    monkeypatch.setenv("KIDATA_WAREHOUSE", str(several_loads))
    runs = several_loads / "runs"
    whole = _seed_runs_file(several_loads).read_bytes()
    (runs / "part-half.parquet").write_bytes(whole[: len(whole) // 2])
    (runs / "notes.txt").write_text("hello")
    pq.write_table(pa.table({"run_id": [1]}), runs / "part-int.parquet")
    result = cli("check")
    assert result.code == 1
    assert "problem: runs/part-half.parquet: unreadable Parquet (" in result.err
    assert ("problem: runs/notes.txt: not a Parquet file; a table folder holds only *.parquet "
            "files") in result.err
    assert ("problem: runs/part-int.parquet: schema differs from kidata/store/schema.py: column "
            "run_id is int64, expected string; required column kernel is missing") in result.err


def test_check_finds_a_document_that_does_not_match_its_digest(several_loads: Path, cli,
                                                               monkeypatch):
    monkeypatch.setenv("KIDATA_WAREHOUSE", str(several_loads))
    path = _first(several_loads / "environments")  # seed 000's A100 environment
    table = pq.read_table(path)
    doc = json.loads(table["document"][0].as_py())
    doc["spec"]["hardware"]["architecture"] = "sm_90"
    column = table.schema.get_field_index("document")
    pq.write_table(table.set_column(column, table.schema.field("document"),
                                    pa.array([json.dumps(doc)])), path)
    result = cli("check")
    assert result.code == 1
    declared = table["environment_id"][0].as_py()
    assert (f"problem: environments: 1 documents do not hash to their environment_id "
            f"(declared, actual): ('{declared}', 'sha256:") in result.err


def test_check_finds_rows_without_a_commit_marker(several_loads: Path, cli, monkeypatch):
    monkeypatch.setenv("KIDATA_WAREHOUSE", str(several_loads))
    marker = sorted((several_loads / "loads").glob("*.parquet"))[-1]  # runs 10-19
    load_id = marker.stem.removeprefix("part-")
    marker.unlink()
    result = cli("check")
    assert result.code == 1
    assert (f"problem: runs: rows of 1 loads that have no commit marker in loads (a partial "
            f"commit), e.g. '{load_id}'") in result.err
    # kidata's views leave that load out: 26 seed runs + runs 0-9.
    assert Warehouse(several_loads).sql("select count(*) from runs").fetchall() == [(36,)]
    # --repair gives it a marker again (10 runs with 3 measurements each): all 46 runs.
    fixed = cli("check", "--repair")
    assert fixed.code == 0, fixed.err
    # The 10 runs share one kernel, pass, workload, GPU and implementation: 1 latest_runs row.
    assert (f"repaired: wrote the missing commit marker of load {load_id} (1 latest_runs, "
            "30 measurements, 10 run_documents, 10 runs)") in fixed.out
    assert Warehouse(several_loads).sql("select count(*) from runs").fetchall() == [(46,)]


def test_compact_merges_files_and_changes_no_result(several_loads: Path, cli, monkeypatch):
    monkeypatch.setenv("KIDATA_WAREHOUSE", str(several_loads))
    before = everything(several_loads)
    # Five loads: runs, measurements and loads have 5 files. Environments 2: seeds 000 and
    # 001 bring the A100 and the H100; trainkernel's documents for those cards hash the same
    # and the generated runs reuse seed 000's. Protocols 3 (forward, backward, trainkernel's
    # two in one load); published and rejects 1 each (left alone).
    assert len(list((several_loads / "runs").glob("*.parquet"))) == 5
    result = cli("compact")
    assert result.code == 0, result.err
    *lines, summary = result.out.splitlines()
    merged = {line.split(":")[0]: line.split(": ")[1] for line in lines}
    assert {t: merged[t] for t in ("environments", "protocols", "workloads", "measurements",
                                   "runs", "loads")} == {
        "environments": "2 files -> 1", "protocols": "3 files -> 1",
        "workloads": "3 files -> 1", "measurements": "5 files -> 1", "runs": "5 files -> 1",
        "loads": "5 files -> 1"}
    assert "published" not in merged and "rejects" not in merged
    # Those tables: 2+3+3+5+5+5 = 23 files became 6: 17 fewer. Rows: 2 environments,
    # 4 protocols, 6 workloads (seeds 000 and 001: 1 each; trainkernel: 4), 30 + 20 × 3 = 90
    # measurements, 26 + 20 = 46 runs, 5 loads: 2 + 4 + 6 + 90 + 46 + 5 = 153. (Tables
    # other helpers add, if any, come on top.)
    others = [t for t in merged if t not in ("environments", "protocols", "workloads",
                                             "measurements", "runs", "loads")]
    fewer = 17 + sum(int(merged[t].split()[0]) - 1 for t in others)
    rows = 153 + sum(len(before[t]) for t in others)
    assert summary == f"compacted: {fewer} fewer files, {rows} rows rewritten"
    for table in TABLES:
        assert len(list((several_loads / table).glob("*.parquet"))) <= 1, table
    assert everything(several_loads) == before
    assert cli("check").code == 0
    assert not any((several_loads / "_kidata" / "compact").iterdir())
    again = cli("compact")
    assert again.out == "compacted: 0 fewer files, 0 rows rewritten\n"
    # Loading after compaction still deduplicates against the merged files.
    report = Warehouse(several_loads).load([str(s) for s in SEEDS])
    assert report.duplicates == 26 and report.runs_added == 0


def _compact(wh: Path, env: dict | None = None, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "kidata", "-w", str(wh), "compact"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, **(env or {})}, **kw)


@pytest.mark.slow
@pytest.mark.parametrize("point", ["compact-before-swap:measurements",
                                   "compact-after-swap:loads"])
def test_compaction_killed_midway_changes_nothing_and_completes(point, several_loads: Path):
    before = everything(several_loads, SOME_VIEWS)
    proc = _compact(several_loads, {"KIDATA_FAULT": point, "KIDATA_FAULT_ACTION": "kill"})
    assert proc.wait(timeout=120) == -signal.SIGKILL
    assert everything(several_loads, SOME_VIEWS) == before
    report = Warehouse(several_loads).check()
    assert report.problems == []
    assert any("leftovers of commit" in n for n in report.notes)
    # The next compaction removes the leftovers and finishes the job.
    Warehouse(several_loads).compact()
    assert everything(several_loads, SOME_VIEWS) == before
    assert not any((several_loads / "_kidata" / "compact").iterdir())
    assert len(list((several_loads / "measurements").glob("*.parquet"))) == 1


@pytest.mark.slow
def test_readers_during_compaction_never_see_duplicates_or_lose_rows(many_loads: Path):
    """A plain reader (DuckDB over the globs) and kidata's views, queried in a loop while a
    real compaction runs: always 60 runs and 180 measurements, or a query that fails because
    a file it listed was merged away (then it is run again), never another number."""
    wh_path = many_loads  # 12 loads × 5 runs = 60 runs, 180 measurements
    proc = _compact(wh_path)
    answers, failures = [], 0
    globs = {t: str(wh_path / t / "*.parquet") for t in ("runs", "measurements")}
    while proc.poll() is None or not answers:
        try:
            plain = duckdb.sql("select (select count(*) from read_parquet($r)), "
                               "(select count(*) from read_parquet($m))",
                               params={"r": globs["runs"], "m": globs["measurements"]}
                               ).fetchall()[0]
            kidata_view = Warehouse(wh_path).sql(
                "select (select count(*) from runs), (select count(*) from measurements)"
            ).fetchall()[0]
            answers += [plain, kidata_view]
        except (duckdb.IOException, duckdb.InvalidInputException, QueryError) as exc:
            assert "No such file" in str(exc) or "No files found" in str(exc) or \
                "not found" in str(exc).lower(), exc
            failures += 1
        time.sleep(0.01)
    assert proc.wait() == 0
    assert set(answers) == {(60, 180)}
    assert len(list((wh_path / "runs").glob("*.parquet"))) == 1


def _started(wh: Path, proc: subprocess.Popen) -> float:
    """Wait until the compaction has begun its first table (past Python's start-up)."""
    work = wh / "_kidata" / "compact"
    while proc.poll() is None and not (work.is_dir() and any(work.iterdir())):
        time.sleep(0.002)
    return time.monotonic()


@pytest.mark.slow
def test_compaction_killed_after_varying_delays(many_loads: Path, tmp_path: Path):
    wh_path = many_loads
    before = everything(wh_path, SOME_VIEWS)
    trial = shutil.copytree(wh_path, tmp_path / "trial")
    proc = _compact(trial)
    began = _started(trial, proc)
    assert proc.wait(timeout=120) == 0
    duration = time.monotonic() - began
    for i, fraction in enumerate((0.35, 0.8)):
        copy = shutil.copytree(wh_path, tmp_path / f"copy{i}")
        proc = _compact(copy)
        began = _started(copy, proc)
        time.sleep(max(0.0, began + duration * fraction - time.monotonic()))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        assert everything(copy, SOME_VIEWS) == before
        assert Warehouse(copy).check().problems == []
        Warehouse(copy).compact()
        assert everything(copy, SOME_VIEWS) == before


def test_a_temporary_file_left_by_a_killed_write_is_a_note_and_repair_removes_it(
        several_loads: Path, cli, monkeypatch):
    """A load killed while it rewrote a reference table (after its commit) leaves the
    temporary file of that atomic write in the table folder: not a problem, and the next
    writer's recovery removes it. (Seen once when a SIGKILL in test_crash.py landed there.)"""
    monkeypatch.setenv("KIDATA_WAREHOUSE", str(several_loads))
    leftover = several_loads / "gpus" / ".reference.parquet.tmp"
    leftover.write_bytes(b"PAR1 half a file")
    result = cli("check")
    assert result.code == 0, result.err
    assert ("note: gpus/.reference.parquet.tmp: a temporary file left by an interrupted write"
            ) in result.out + result.err
    fixed = cli("check", "--repair")
    assert fixed.code == 0
    assert ("repaired: removed gpus/.reference.parquet.tmp, left by an interrupted write"
            ) in fixed.out
    assert not leftover.exists()


def test_atomic_writes_use_a_hidden_temporary_name(tmp_path: Path, monkeypatch):
    """The name check and recovery recognise (``.<name>.tmp``), never ``*.parquet``."""
    import os

    from kidata.store import durable

    renamed = []
    real = os.replace
    monkeypatch.setattr(durable.os, "replace",
                        lambda a, b: renamed.append(Path(a).name) or real(a, b))
    durable.write_atomic(tmp_path / "reference.parquet", b"data")
    assert renamed == [".reference.parquet.tmp"]
    assert (tmp_path / "reference.parquet").read_bytes() == b"data"


def _by_load_order(wh_path: Path) -> dict[str, list]:
    """:func:`everything`, with each load's id and time replaced by its place in load order
    (two warehouses loaded alike differ only in those)."""
    got = everything(wh_path)
    loads = sorted(got["loads"], key=lambda row: row[1])  # (load_id, loaded_at, ...)
    place = {v: f"load {i}" for i, row in enumerate(loads) for v in row[:2]}
    return {name: sorted((tuple(place.get(v, v) for v in row) for row in rows), key=repr)
            for name, rows in got.items()}


def test_loads_merge_a_tables_small_files_once_it_has_many(tmp_path: Path, monkeypatch):
    # Each load adds a file per table, and queries and loads plan over every file: from
    # KIDATA_COMPACT_AT small files in a table, the load merges them after its commit.
    # (3, not the default: the merge happens after loads 3 and 5, so six loads show two
    # merges, the merged file counted among the small ones, and loads in between that do
    # not merge.)
    monkeypatch.setenv("KIDATA_COMPACT_AT", "3")
    auto, plain = Warehouse(tmp_path / "auto"), Warehouse(tmp_path / "plain")
    files, merged = [], []
    for i in range(6):  # load i adds runs 5i .. 5i+4
        path = write_runs(tmp_path / f"l{i}.jsonl", range(5 * i, 5 * i + 5))
        report = auto.load([str(path)])
        assert report.runs_added == 5 and report.warnings == []
        files.append(len(list((auto.path / "runs").glob("*.parquet"))))
        merged.append(report.compacted.get("runs"))
        monkeypatch.setenv("KIDATA_COMPACT_AT", "0")  # never, for the one to compare with
        assert plain.load([str(path)]).compacted == {}
        monkeypatch.setenv("KIDATA_COMPACT_AT", "3")
    # The 3rd small file is merged with the two before it, then again two loads later (the
    # merged file and two new ones).
    assert files == [1, 2, 1, 2, 1, 2]
    assert merged == [None, None, (3, 1), None, (3, 1), None]
    assert len(list((plain.path / "runs").glob("*.parquet"))) == 6
    assert _by_load_order(auto.path) == _by_load_order(plain.path)
    assert auto.check().problems == []
    assert not any((auto.path / "_kidata" / "compact").iterdir())


def test_a_failed_merge_after_a_load_leaves_the_load_committed(tmp_path: Path, monkeypatch):
    from kidata.store import compaction as compact

    monkeypatch.setenv("KIDATA_COMPACT_AT", "2")
    wh = Warehouse(tmp_path / "wh")
    assert wh.load([str(write_runs(tmp_path / "a.jsonl", range(5)))]).runs_added == 5

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(compact, "merge", full_disk)
    report = wh.load([str(write_runs(tmp_path / "b.jsonl", range(5, 10)))])
    assert report.committed and report.runs_added == 5 and report.compacted == {}
    assert len(report.warnings) == 1
    assert "is committed, but merging the tables' small files failed" in report.warnings[0]
    assert "No space left on device" in report.warnings[0]
    assert wh.sql("select count(*) from runs").fetchall() == [(10,)]
    assert len(list((wh.path / "runs").glob("*.parquet"))) == 2  # nothing swapped
    assert wh.check().problems == []


def test_loads_do_not_merge_where_folders_cannot_be_swapped(tmp_path: Path, monkeypatch):
    # Compaction needs an atomic folder exchange; where there is none, loads skip the merge
    # without a warning on every load (`kidata compact` says why when asked).
    from kidata.errors import WarehouseError
    from kidata.store import durable

    def no_exchange(a, b):
        raise WarehouseError("this platform has no atomic folder exchange")

    monkeypatch.setattr(durable, "exchange", no_exchange)
    monkeypatch.setenv("KIDATA_COMPACT_AT", "2")
    wh = Warehouse(tmp_path / "wh")
    for i in range(3):
        report = wh.load([str(write_runs(tmp_path / f"l{i}.jsonl", range(5 * i, 5 * i + 5)))])
        assert report.runs_added == 5 and report.compacted == {} and report.warnings == []
    assert len(list((wh.path / "runs").glob("*.parquet"))) == 3
    assert not any((wh.path / "_kidata" / "compact").iterdir())


def test_a_large_warehouses_check_asks_one_question_at_a_time_with_the_same_answers(
        several_loads: Path, monkeypatch):
    """Past verify.APART_RUNS runs each check asks its questions one statement each (at 10M
    runs its reference anti-joins ran out of memory side by side): the same problems found."""
    from kidata.store import verify

    source = _seed_runs_file(several_loads)
    shutil.copy(source, source.with_name("part-copy.parquet"))  # identities, loads
    _first(several_loads / "measurements").unlink()  # a run without its median
    path = sorted((several_loads / "runs").glob("*.parquet"))[2]
    _first(several_loads / "run_documents").unlink()  # a run without its document
    table = pq.read_table(path)
    at = table.schema.get_field_index("kernel")
    pq.write_table(table.set_column(at, table.schema.field("kernel").with_nullable(True),
                                    pa.nulls(table.num_rows, pa.string())), path)  # nulls
    together = Warehouse(several_loads).check().problems
    monkeypatch.setattr(verify, "APART_RUNS", 0)
    apart = Warehouse(several_loads).check().problems
    assert apart == together
    found = "\n".join(apart)
    for what in ("appear more than once", "have no kernel", "have no median",
                 "that are not in run_documents"):
        assert what in found, what
