"""Liger CSV rows converted by worker processes (kidata/ingest/stage.py, readers/liger.py's
convert_rows) give exactly what one pass over the file in the loading process gives: the same
tables, row for row and in order, and the same report (counts, rejects and warnings in
input order), whatever the worker count and batch size, including rows whose Workload
document an earlier row built (the same parameters in another key order or under another x
name), which a worker hands back to the loading process."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import duckdb
import pytest
from conftest import shared

from kidata import Warehouse
from kidata.ingest import stage, stage_worker
from kidata.ingest.readers.base import Rows
from kidata.ingest.readers.liger import COLUMNS
from kidata.store.schema import TABLES


def _tables(path: Path) -> dict[str, list]:
    """Every table's rows in the order of its files (one DuckDB thread: file order)."""
    con = duckdb.connect()
    con.execute("SET threads = 1")
    out = {}
    for table, schema in TABLES.items():
        if not list((path / table).glob("*.parquet")):
            continue
        cols = ", ".join(f'"{n}"' for n in schema.names if n not in ("load_id", "loaded_at"))
        out[table] = con.sql(f"SELECT {cols} FROM read_parquet('{path / table}/*.parquet')"
                             ).fetchall()
    return out


def _load(path: Path, inputs: list[str]):
    report = Warehouse(path).load(inputs)
    return (report.files, report.records, report.added, report.duplicates, report.rejected,
            [str(r) for r in report.rejects], report.warned, report.warnings)


@pytest.fixture
def sent(monkeypatch) -> list[int]:
    """The CSV rows in each job given to a worker process, and the rows handed back."""
    counts: list[int] = []
    submit = stage_worker.WorkerProcess.submit

    def counting(self, job, first_seq, segments):
        counts.append(sum(unit.count for unit, _ in segments if isinstance(unit, Rows)))
        return submit(self, job, first_seq, segments)

    monkeypatch.setattr(stage_worker.WorkerProcess, "submit", counting)
    return counts


@pytest.fixture(scope="module")
def one_passes(tmp_path_factory) -> dict:
    """The one pass in the loading process (KIDATA_WORKERS=0) of each list of inputs, made
    once per module: every worker count and batch size is compared with the same one."""
    return {"dir": tmp_path_factory.mktemp("one-pass")}


def _one_pass(one_passes: dict, monkeypatch, inputs: list[str], sent: list[int]):
    key = tuple(inputs)
    if key not in one_passes:
        path = one_passes["dir"] / str(len(one_passes))
        monkeypatch.setenv("KIDATA_WORKERS", "0")
        report = _load(path, inputs)
        assert not sent
        one_passes[key] = (report, _tables(path), path)
    return one_passes[key]


def _compare(tmp_path: Path, monkeypatch, inputs: list[str], workers: str, rows: int,
             sent: list[int], one_passes: dict):
    one_pass, one_tables, _ = _one_pass(one_passes, monkeypatch, inputs, sent)
    monkeypatch.setenv("KIDATA_WORKERS", workers)
    monkeypatch.setattr(stage, "POOL_ROWS", rows)
    parallel = _load(tmp_path / f"w{workers}", inputs)
    assert parallel == one_pass
    assert _tables(tmp_path / f"w{workers}") == one_tables
    return one_pass


@pytest.mark.shared
@pytest.mark.parametrize("workers,rows", [("1", 500), ("2", 300), ("2", 8192)])
def test_liger_files_through_workers_give_the_same_tables(tmp_path, monkeypatch, sent,
                                                          one_passes, workers, rows):
    recent = str(shared("liger/all_benchmark_data.csv"))
    first = str(shared("liger/all_benchmark_data_2024-09-03.csv"))
    inputs = [recent, first, recent]  # a file read twice is converted apart each time
    report = _compare(tmp_path, monkeypatch, inputs, workers, rows, sent, one_passes)
    files, records = report[:2]
    assert files == 3 and records == 2 * 2448 + 410
    if rows < 2448:
        # Every row went to a worker (none depends on an earlier one in these files), in
        # jobs of POOL_ROWS rows (a file's last rows join the next file's first ones).
        assert sum(sent) == records and max(sent) < 2 * rows
    else:
        assert sent == []  # less than a batch per file: converted here


def _row(kernel="rms_norm", provider="liger", x_name="H", x_value="1024",
         config='{"M": 2048, "dtype": "torch.float32"}', median="0.5",
         gpu="NVIDIA H100 80GB HBM3", stamp="2025-01-02 03:04:05") -> list[str]:
    return [kernel, provider, "forward", "speed", "ms", x_name, "hidden size", x_value, median,
            "0.4", "0.6", config, gpu, stamp, "0.5.0"]


REORDERED = '{"dtype": "torch.float32", "M": 2048}'  # the same parameters, another order
SWAPPED = ("M", "2048", '{"H": 1024, "dtype": "torch.float32"}')  # another x name


def _variants_csv(path: Path) -> Path:
    """Rows of one workload key in several variants, spread over batches of two rows, with
    rejects among them: which variant builds the key's Workload document depends on which
    row reaches it first."""
    rows = [
        _row(x_value="4096", median="nan"),  # rejected before its workload is built
        _row(x_value="4096", config=REORDERED),  # builds (H=4096) with the reordered config
        _row(provider="torch"),  # builds (H=1024) in the first order
        _row(provider="triton", x_value="4096"),  # takes the reordered document
        _row(provider="triton", config=REORDERED),  # takes the first order's document
        _row(provider="triton", median="-1", config=REORDERED),  # rejected
        ["rms_norm", "short row"],  # rejected
        _row(provider="torch_compile", x_name=SWAPPED[0], x_value=SWAPPED[1],
             config=SWAPPED[2]),  # takes the first order's document
        _row(kernel="swiglu", config=REORDERED),  # a new key: builds
        _row(kernel="swiglu", provider="torch", x_name=SWAPPED[0], x_value=SWAPPED[1],
             config=SWAPPED[2]),
        _row(kernel="swiglu", provider="triton"),
        _row(kernel="swiglu", provider="huggingface", stamp="not a time"),  # rejected
    ]
    rows += [_row(provider=f"p{i}", x_value=str(512 * (i % 3 + 1)),
                  config=REORDERED if i % 2 else '{"M": 2048, "dtype": "torch.float32"}')
             for i in range(12)]
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(COLUMNS)
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def variants(tmp_path_factory) -> Path:
    """One variants file for the module (its path is in the rejects the loads report)."""
    return _variants_csv(tmp_path_factory.mktemp("variants") / "variants.csv")


@pytest.mark.parametrize("workers,rows", [("1", 1), ("2", 2), ("2", 3)])
def test_rows_depending_on_earlier_rows_keep_their_documents(tmp_path, monkeypatch, sent,
                                                             one_passes, variants, workers,
                                                             rows):
    path = str(variants)
    report = _compare(tmp_path, monkeypatch, [path, path], workers, rows, sent, one_passes)
    assert report[1] == 48 and report[4] == 8  # records, rejects (4 per read)
    assert sum(sent) == 48
    # The documents the rows above name: the first row of each key that reaches it built
    # it, whatever its own variant.
    names = duckdb.sql(
        f"SELECT kernel, name FROM read_parquet('{one_passes[(path, path)][2]}/workloads/"
        "*.parquet') "
        "ORDER BY ALL").fetchall()
    assert names == [
        ("rms_norm", "hidden1024-rows2048-fp32"), ("rms_norm", "hidden1536-rows2048-fp32"),
        ("rms_norm", "hidden4096-fp32-rows2048"), ("rms_norm", "hidden512-rows2048-fp32"),
        ("swiglu", "hidden1024-fp32-rows2048")]


def test_rows_come_from_the_reader_in_batches(tmp_path):
    from kidata.ingest.readers import read_file
    from kidata.ingest.readers.liger import convert_rows, new_docs

    path = str(_variants_csv(tmp_path / "variants.csv"))
    items = list(read_file(path))
    batches = list(read_file(path, batch_rows=5))
    assert [b.count for b in batches] == [5, 5, 5, 5, 4]
    docs = new_docs()
    converted = [item for b in batches for _, item in convert_rows(b, docs)]
    assert [(type(a), a.__dict__) for a in converted] == [(type(a), a.__dict__) for a in items]
    # The rows a worker would hand back: those of a key seen in two or more variants.
    assert [e[0] for b in batches for e in b.rows if e[4]] == [
        2, 4, 5, 6, 8, 10, 11, 12, 14, *range(16, 25)]
    assert json.loads(REORDERED) == {"M": 2048, "dtype": "torch.float32"}
