"""GroupedWriter: the row groups of the files kidata writes (kidata/store/pqwrite.py).

A 1M-run load used to write one row group per 8,192-row batch (978 groups, a 5.7 MB footer
every query read); the writer now gathers batches into row groups of a given size or bytes.
"""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kidata.store.pqwrite import GroupedWriter

SCHEMA = pa.schema([pa.field("i", pa.int64(), nullable=False), pa.field("text", pa.string())])


def batch(start: int, n: int, width: int = 10) -> pa.Table:
    return pa.table({"i": pa.array(range(start, start + n), pa.int64()),
                     "text": ["x" * width] * n}, schema=SCHEMA)


def groups(path: Path) -> list[int]:
    meta = pq.ParquetFile(path).metadata
    return [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]


def test_small_batches_are_gathered_into_row_groups_of_the_given_size(tmp_path: Path):
    path = tmp_path / "t.parquet"
    with GroupedWriter(path, SCHEMA, rows=10_000) as writer:
        for k in range(50):  # 50 batches of 1,000 rows
            writer.write(batch(1000 * k, 1000))
    assert writer.rows == 50_000
    assert groups(path) == [10_000] * 5
    assert pq.read_table(path).column("i").to_pylist() == list(range(50_000))  # in order


def test_wide_rows_cut_a_row_group_at_the_byte_limit(tmp_path: Path):
    path = tmp_path / "t.parquet"
    # 1,000 rows of ~1 KB per batch: ~1 MB each; a 3 MB limit cuts after 3 batches.
    with GroupedWriter(path, SCHEMA, rows=1_000_000, max_bytes=3 * 1024 * 1024) as writer:
        for k in range(7):
            writer.write(batch(1000 * k, 1000, width=1024))
    assert groups(path) == [4000, 3000]  # the 4th batch crosses 3 MB; the rest at close


def test_no_rows_no_file_unless_asked(tmp_path: Path):
    with GroupedWriter(tmp_path / "none.parquet", SCHEMA) as writer:
        writer.write(batch(0, 0))
    assert writer.rows == 0 and not (tmp_path / "none.parquet").exists()
    with GroupedWriter(tmp_path / "empty.parquet", SCHEMA, create_empty=True):
        pass
    assert pq.read_table(tmp_path / "empty.parquet").num_rows == 0


def test_the_hook_runs_before_each_row_group_and_a_failure_writes_no_more(tmp_path: Path):
    calls = []

    def hook() -> None:
        calls.append(len(calls))
        if len(calls) == 2:
            raise RuntimeError("fault")

    with pytest.raises(RuntimeError, match="fault"), \
            GroupedWriter(tmp_path / "t.parquet", SCHEMA, rows=1000, before_write=hook) as w:
        for k in range(5):
            w.write(batch(1000 * k, 1000))
    assert calls == [0, 1]
    assert groups(tmp_path / "t.parquet") == [1000]  # the first group only


CLUSTER_SCHEMA = pa.schema([pa.field("gpu", pa.string()), pa.field("kernel", pa.string()),
                            pa.field("observed_at", pa.timestamp("us", tz="UTC")),
                            pa.field("document", pa.string())])


def _runs(start: int, n: int, gpus: list[str | None]) -> pa.Table:
    """``n`` rows spread over ``gpus`` in turn, each with a ~2 KB JSON-like document (as run
    documents: repetitive text that compresses several times)."""
    rows = range(start, start + n)
    return pa.table({
        "gpu": [gpus[i % len(gpus)] for i in rows],
        "kernel": [f"k{(i * 7) % 5}" for i in rows],
        "observed_at": pa.array([1_700_000_000_000_000 + ((i * 13) % 97) * 1_000_000
                                 for i in rows], pa.int64()).cast(CLUSTER_SCHEMA[2].type),
        "document": ['{"kind": "BenchmarkRun", "metadata": {"name": "run-' + str(i)
                     + '"}, "spec": [' + ", ".join(['{"value": 1.5, "unit": "us"}'] * 60) + "]}"
                     for i in rows]},
        schema=CLUSTER_SCHEMA)


def test_clustered_rows_wait_compressed_so_row_groups_are_not_cut_for_room(tmp_path: Path):
    """Rows waiting for their GPU's row group are held compressed: a budget under the rows'
    Arrow size (here a quarter of one row group's) still lets every GPU's group fill to the
    writer's byte limit; each row group holds one GPU, sorted, and no row is lost or
    changed. Held as Arrow arrays, the same budget sent every GPU's rows out as they came."""
    from kidata.store.pqwrite import Clustered

    gpus = ["A100", "H100", "L4", None]
    data = [_runs(500 * k, 500, gpus) for k in range(12)]  # 6,000 rows, ~13 MB as Arrow
    max_bytes = 2 * 1024 * 1024
    path = tmp_path / "c.parquet"
    with GroupedWriter(path, CLUSTER_SCHEMA, rows=100_000, max_bytes=max_bytes) as writer:
        sink = Clustered(writer, ["gpu", "kernel", "observed_at"], budget=max_bytes // 4)
        for table in data:
            sink.write(table)
            assert sink.held <= max_bytes // 4 + 64 * 1024  # at most one part over
        sink.close()
    written = pq.ParquetFile(path)
    row_bytes = pa.concat_tables(data).nbytes / 6_000
    per_group = []
    for g in range(written.metadata.num_row_groups):
        group = written.read_row_group(g)
        assert len(set(group.column("gpu").to_pylist())) == 1
        keys = [(k, t) for k, t in zip(group.column("kernel").to_pylist(),
                                       group.column("observed_at").to_pylist(), strict=True)]
        assert keys == sorted(keys)
        per_group.append((group.column("gpu")[0].as_py(), group.num_rows))
    # Every group but each GPU's last reached the byte limit (the writer cuts at it).
    full = math.ceil(max_bytes / row_bytes)
    for gpu in gpus:
        sizes = [n for g, n in per_group if g == gpu]
        assert all(n >= full for n in sizes[:-1]), (gpu, sizes, full)
        assert len(sizes) <= math.ceil(1_500 / full) + 1, (gpu, sizes)
    # The GPUs in order, nulls last, after close.
    assert [g for g, _ in per_group][-1] is None
    got = pq.read_table(path).sort_by([("document", "ascending")])
    assert got.equals(pa.concat_tables(data).sort_by([("document", "ascending")]))
