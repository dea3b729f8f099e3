"""GroupedWriter: the row groups of the files kidata writes (kidata/store/pqwrite.py).

A 1M-run load used to write one row group per 8,192-row batch (978 groups, a 5.7 MB footer
every query read); the writer now gathers batches into row groups of a given size or bytes.
"""

from __future__ import annotations

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
