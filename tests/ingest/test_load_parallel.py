"""A load staged by worker processes gives exactly what one pass over the input gives: the same
tables, row for row and in order, and the same report (counts, rejects and warnings in input
order), whatever the batch size, including runs whose environment only an earlier record in
another batch names."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import duckdb
import pytest

from kidata import Warehouse
from kidata.ingest import stage
from kidata.store import finalize
from kidata.store.load_commit import LoadCommit
from kidata.store.schema import TABLES

SEEDS = Path(__file__).parents[1] / "data" / "seeds"


def _bundle(name: str) -> dict:
    text = (SEEDS / name).read_text("utf-8")
    return json.loads(text.split("\n", 2)[2])


def _digest(doc: dict) -> str:
    body = {k: v for k, v in doc.items() if k != "metadata"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _renamed(bundle: dict, name: str, median: int | None = None) -> dict:
    out = copy.deepcopy(bundle)
    out["run"]["metadata"]["name"] = name
    if median is not None:
        out["run"]["spec"]["timing"]["latencyNs"]["median"] = median
    return out


@pytest.fixture
def inputs(tmp_path: Path) -> list[str]:
    a100 = _bundle("000_ef9e0295e36a82ef.txt")  # A100 environment, forward protocol
    h100 = _bundle("001_74c4a9a5654eeb33.txt")  # H100 environment, backward protocol
    odd = copy.deepcopy(h100)  # an environment on a GPU the catalog does not know: a warning
    odd["environment"]["spec"]["hardware"]["product"] = "NVIDIA Z9000"
    odd["run"]["spec"]["environmentDigest"] = _digest(odd["environment"])
    bad_digest = _renamed(a100, "bad-digest")
    bad_digest["run"]["spec"]["protocolDigest"] = "sha256:" + "0" * 64
    lines = [
        _renamed(a100, "r1"),
        # A bare run whose environment (H100) comes only later: named from its externalId.
        {"run": _renamed(h100, "bare-early")["run"]},
        "{not json",
        "",
        _renamed(h100, "r2"),
        _renamed(a100, "r1"),  # the same run again: a duplicate
        {"run": _renamed(h100, "bare-late")["run"]},  # its environment is known by now
        _renamed(a100, "r1", median=31000),  # same run, other numbers: a conflict
        bad_digest,
        _renamed(odd, "r3"),
        {"run": _renamed(odd, "bare-odd")["run"]},
    ]
    lines += [_renamed(a100 if i % 2 else h100, f"more-{i}") for i in range(12)]
    lines += [{"run": _renamed(h100, f"bare-{i}")["run"]} for i in range(5)]
    jsonl = tmp_path / "a.jsonl"
    jsonl.write_text("\n".join(line if isinstance(line, str) else json.dumps(line)
                               for line in lines) + "\n")
    more = tmp_path / "b.jsonl"
    more.write_text("\n".join(json.dumps(_renamed(h100, f"b-{i}")) for i in range(9)) + "\n")
    # a.jsonl: 10 + 12 + 5 = 27 records (the blank line is none); b.jsonl: 9; each seed, a
    # whole document after a title line: 1. In all 27 + 9 + 2 = 38.
    return [str(jsonl), str(SEEDS / "000_ef9e0295e36a82ef.txt"), str(more),
            str(SEEDS / "001_74c4a9a5654eeb33.txt")]


def _tables(path: Path) -> dict[str, list]:
    out = {}
    for table, schema in TABLES.items():
        files = sorted((path / table).glob("*.parquet"))
        if not files:
            continue
        cols = ", ".join(f'"{n}"' for n in schema.names if n not in ("load_id", "loaded_at"))
        glob = str(path / table / "*.parquet")
        out[table] = duckdb.sql(f"SELECT {cols} FROM read_parquet('{glob}')").fetchall()
    return out


def _load(path: Path, inputs: list[str]):
    report = Warehouse(path).load(inputs)
    return (report.files, report.records, report.added, report.duplicates, report.rejected,
            [str(r) for r in report.rejects], report.warned, report.warnings)


@pytest.mark.parametrize("batch_lines", [1, 3, 8])
def test_workers_give_the_same_tables_and_report_as_one_pass(tmp_path, monkeypatch, inputs,
                                                            batch_lines):
    monkeypatch.setenv("KIDATA_WORKERS", "0")
    one_pass = _load(tmp_path / "one", inputs)
    monkeypatch.setenv("KIDATA_WORKERS", "2")
    monkeypatch.setattr(stage, "BATCH_LINES", batch_lines)
    parallel = _load(tmp_path / "par", inputs)
    assert parallel == one_pass
    files, records, added, duplicates, rejected, rejects, warned, warnings = one_pass
    assert (files, records) == (4, 38)
    # Rejected while staging: line 3 (not JSON), line 9 (protocol digest); at the commit: line
    # 8 (r1 again with another median).
    assert rejected == 3
    assert [r.split(": ")[0].rsplit(", ", 2)[1:] for r in rejects] == [
        ["line 3"], ["line 9", "field run.spec.protocolDigest"],
        ["line 8", "field run.metadata.name"]]
    # Runs: 38 records - 2 rejected while staging - 1 duplicate (line 6) - 1 conflict = 34.
    assert duplicates == 1 and added["runs"] == 34
    # Warnings: r3 (line 10) and the bare run on its environment (line 11) name one unknown
    # GPU: one warning, counting both, naming the first.
    assert warned == 1 and len(warnings) == 1
    assert warnings[0].startswith("unknown GPU 'NVIDIA Z9000 80GB HBM3' in 2 records (the "
                                  "first: ") and ", line 10); loaded under" in warnings[0]
    assert _tables(tmp_path / "par") == _tables(tmp_path / "one")


def test_runs_named_by_an_earlier_batch_get_its_gpu(tmp_path, monkeypatch, inputs):
    monkeypatch.setenv("KIDATA_WORKERS", "2")
    monkeypatch.setattr(stage, "BATCH_LINES", 1)  # every record in its own batch
    Warehouse(tmp_path / "wh").load(inputs)
    rows = dict(duckdb.sql(
        f"SELECT run_id, gpu FROM read_parquet('{tmp_path / 'wh' / 'runs' / '*.parquet'}') "
        "WHERE run_id LIKE 'bare%'").fetchall())
    # Both bare runs are on the H100: bare-early by its externalId (its environment came
    # later), bare-late by the environment of r2 two lines before it.
    assert rows["bare-early"] == rows["bare-late"] == "h100-sxm5-80gb"
    assert rows["bare-odd"] == "z9000-80gb-hbm3"


@pytest.mark.parametrize("workers,files", [("0", "all"), ("2", "all"), ("2", "jsonl")])
def test_final_files_staged_in_final_form_are_the_ordered_query(tmp_path, monkeypatch, inputs,
                                                                workers, files):
    # Runs and measurements are staged in their final form (kidata/store/finalize.py, the
    # workers' rows written by the loading process in input order, a deferred record's rows
    # at its place); this load has a duplicate and a conflict, so the commit copies the kept
    # rows. DuckDB's ordered query over the staged rows, which the commit used to write them
    # with, is the reference: the same rows in the same order (runs, both ways, one GPU per
    # row group, ordered within: this load is smaller than a buffer, so all of one GPU's
    # runs are one row group).
    monkeypatch.setenv("KIDATA_WORKERS", workers)
    monkeypatch.setattr(stage, "BATCH_LINES", 3)
    if files == "jsonl":
        # No seeds and no bare runs (those are staged by the loading process between the
        # workers' rows).
        inputs = [p for p in inputs if p.endswith(".jsonl")]
        first = Path(inputs[0])
        kept = [line for line in first.read_text().splitlines()
                if not line.startswith("{") or '"environment"' in line]
        first.write_text("\n".join(kept) + "\n")
    finalize.finished.clear()
    streamed = _load(tmp_path / "streamed", inputs)
    assert finalize.finished == {("runs", "rewritten"): 1, ("run_documents", "rewritten"): 1,
                                 ("measurements", "rewritten"): 1}
    monkeypatch.setattr(LoadCommit, "_stream_final", staticmethod(lambda *args: None))
    queried = _load(tmp_path / "queried", inputs)
    assert streamed == queried
    assert _tables(tmp_path / "streamed") == _tables(tmp_path / "queried")
    # All: 34 (see the test above); JSON Lines only: the same without the 8 bare runs and
    # the 2 seeds.
    assert streamed[2]["runs"] == (34 if files == "all" else 24)


def test_the_workers_end_before_the_staged_runs_are_merged_in_order(tmp_path, monkeypatch,
                                                                   inputs):
    """The staged runs are merged in order (``pqwrite.Clustered.close``) once every worker
    process has ended: the workers' memory (~200 MB at 1M runs) would add to the merge's
    (docs/benchmarks.md, Run BC)."""
    from kidata.ingest import stage_worker
    from kidata.store import pqwrite

    events: list[str] = []
    worker_close, sort_close = stage_worker.WorkerProcess.close, pqwrite.Clustered.close

    def closing_worker(self):
        worker_close(self)
        events.append("worker ended")

    def closing_sort(self):
        events.append("runs merged")
        sort_close(self)

    monkeypatch.setattr(stage_worker.WorkerProcess, "close", closing_worker)
    monkeypatch.setattr(pqwrite.Clustered, "close", closing_sort)
    monkeypatch.setenv("KIDATA_WORKERS", "2")
    monkeypatch.setattr(stage, "BATCH_LINES", 1)  # the pool starts at once
    assert Warehouse(tmp_path / "wh").load(inputs).committed
    assert events[:3] == ["worker ended", "worker ended", "runs merged"], events
