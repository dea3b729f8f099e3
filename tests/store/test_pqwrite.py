"""GroupedWriter: the row groups of the files kidata writes (kidata/store/pqwrite.py).

A 1M-run load used to write one row group per 8,192-row batch (978 groups, a 5.7 MB footer
every query read); the writer now gathers batches into row groups of a given size or bytes.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

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
    writer's byte limit; each row group holds one GPU, each GPU's rows are sorted across its
    row groups, and no row is lost or changed. Held as Arrow arrays, the same budget sent
    every GPU's rows out as they came."""
    from kidata.store.pqwrite import Clustered

    gpus = ["A100", "H100", "L4", None]
    data = [_runs(500 * k, 500, gpus) for k in range(12)]  # 6,000 rows, ~13 MB as Arrow
    max_bytes = 2 * 1024 * 1024
    path, spill = tmp_path / "c.parquet", tmp_path / "spill"
    with GroupedWriter(path, CLUSTER_SCHEMA, rows=100_000, max_bytes=max_bytes) as writer:
        sink = Clustered(writer, ["gpu", "kernel", "observed_at"], budget=max_bytes // 4,
                         spill=spill)
        for table in data:
            sink.write(table)
            assert sink.held <= max_bytes // 4 + 64 * 1024  # at most one part over
        sink.close()
    assert sink.spilled > 0 and not spill.exists()  # it sorted through chunks, then tidied
    written = pq.ParquetFile(path)
    row_bytes = pa.concat_tables(data).nbytes / 6_000
    per_group = []
    keys: list[tuple] = []
    for g in range(written.metadata.num_row_groups):
        group = written.read_row_group(g)
        assert len(set(group.column("gpu").to_pylist())) == 1
        gpu = group.column("gpu")[0].as_py()
        keys += [(gpu is None, gpu or "", k, t) for k, t in zip(
            group.column("kernel").to_pylist(), group.column("observed_at").to_pylist(),
            strict=True)]
        per_group.append((gpu, group.num_rows))
    assert keys == sorted(keys)  # the whole file, GPUs in order and nulls last
    # Every group but each GPU's last reached the byte limit (the writer cuts at it).
    full = math.ceil(max_bytes / row_bytes)
    for gpu in gpus:
        sizes = [n for g, n in per_group if g == gpu]
        assert all(n >= full for n in sizes[:-1]), (gpu, sizes, full)
        assert len(sizes) <= math.ceil(1_500 / full) + 1, (gpu, sizes)
    got = pq.read_table(path).sort_by([("document", "ascending")])
    assert got.equals(pa.concat_tables(data).sort_by([("document", "ascending")]))


SORT_SCHEMA = pa.schema([pa.field("gpu", pa.string()), pa.field("kernel", pa.string()),
                         pa.field("at", pa.timestamp("us", tz="UTC")),
                         pa.field("x", pa.float64()), pa.field("row", pa.int64())])


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.sampled_from(["A100", "H100", "é", None]),
                               st.sampled_from(["", "ab", "ß", "k\x00", None]),
                               st.one_of(st.none(), st.integers(-1, 1)),
                               st.one_of(st.none(), st.sampled_from([-1.5, 0.0, 2.0,
                                                                     float("nan")]))),
                     max_size=600),
       piece=st.integers(1, 80), budget=st.integers(1, 4000), fan_in=st.integers(2, 5),
       batch_bytes=st.integers(1, 3000), group_rows=st.integers(1, 60))
# A chunk of a NaN and one of a null under the same GPU, kernel and time: NaN comes first.
@example(rows=[("A100", "ab", 0, float("nan")), ("A100", "ab", 0, None)], piece=1, budget=1,
         fan_in=2, batch_bytes=1, group_rows=1)
def test_clustered_sorts_the_whole_file_through_any_number_of_chunks_and_passes(
        tmp_path: Path, monkeypatch, rows, piece, budget, fan_in, batch_bytes, group_rows):
    """Differential: whatever the pieces, the memory budget (so the chunks spilled), the merge's
    fan-in (so its passes) and its batch size, the file holds exactly the rows given, in the
    order ``pc.sort_indices`` gives (ascending; NaN after numbers; nulls last; ties in any
    order), one GPU per row group, full row groups but each GPU's last."""
    import pyarrow.compute as pc

    from kidata.store import pqwrite

    monkeypatch.setattr(pqwrite, "FAN_IN", fan_in)
    monkeypatch.setattr(pqwrite, "MERGE_BATCH_BYTES", batch_bytes)
    monkeypatch.setattr(pqwrite, "MIN_BATCH_ROWS", 1)  # batches of a few rows: many rounds
    monkeypatch.setattr(pqwrite, "PACK_BYTES", 512)  # some parts wait packed
    table = pa.table({"gpu": [r[0] for r in rows], "kernel": [r[1] for r in rows],
                      "at": pa.array([r[2] for r in rows], pa.int64()).cast(SORT_SCHEMA[2].type),
                      "x": [r[3] for r in rows], "row": list(range(len(rows)))},
                     schema=SORT_SCHEMA)
    opened = [0, 0]  # streams open now, the most open at once
    real_stream = pqwrite._Stream

    class Counted(real_stream):  # type: ignore[misc, valid-type]
        def __init__(self, *args):
            super().__init__(*args)
            opened[0] += 1
            opened[1] = max(opened)

        def close(self):
            super().close()
            opened[0] -= 1

    monkeypatch.setattr(pqwrite, "_Stream", Counted)
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    path, spill = folder / "s.parquet", folder / "spill"
    keys = ["gpu", "kernel", "at", "x"]
    with GroupedWriter(path, SORT_SCHEMA, rows=group_rows, max_bytes=1 << 30) as writer:
        sink = pqwrite.Clustered(writer, keys, budget=budget, spill=spill)
        for start in range(0, len(rows), piece):
            sink.write(table.slice(start, piece))
        sink.close()
    assert not spill.exists()
    assert opened[0] == 0 and opened[1] <= fan_in  # the merge's memory: fan_in batches
    if not rows:
        assert not path.exists()
        return
    got = pq.read_table(path)
    assert sorted(got.column("row").to_pylist()) == list(range(len(rows)))  # none lost, once
    expected = table.take(pc.sort_indices(table, sort_keys=[(k, "ascending", "at_end")
                                                              for k in keys]))

    def key_rows(t: pa.Table) -> list[tuple]:  # NaN made comparable: != itself
        return [tuple("nan" if isinstance(v, float) and v != v else v for v in r)
                for r in zip(*(t.column(k).to_pylist() for k in keys), strict=True)]

    assert key_rows(got) == key_rows(expected)
    meta = pq.ParquetFile(path).metadata
    leads = []
    for g in range(meta.num_row_groups):
        gpus = set(pq.ParquetFile(path).read_row_group(g, ["gpu"]).column(0).to_pylist())
        assert len(gpus) == 1
        leads.append((gpus.pop(), meta.row_group(g).num_rows))
    for (gpu, n), (following, _) in zip(leads, leads[1:], strict=False):
        assert n >= group_rows or gpu != following, leads


def test_rows_given_in_order_are_cut_at_each_gpu_and_out_of_order_rows_refused(tmp_path):
    """InOrder (a commit's copy of the kept rows of a sorted staged file): each row group
    holds one GPU; a GPU that comes back, or comes before the last, is an error, not a file
    whose row groups mix GPUs."""
    from kidata.errors import WarehouseError
    from kidata.store.pqwrite import InOrder

    schema = pa.schema([pa.field("gpu", pa.string()), pa.field("i", pa.int64())])
    gpus = ["A"] * 5 + ["B"] * 3 + [None] * 4
    table = pa.table({"gpu": gpus, "i": range(12)}, schema=schema)
    path = tmp_path / "o.parquet"
    with GroupedWriter(path, schema, rows=1000) as writer:
        sink = InOrder(writer, "gpu")
        for start in range(0, 12, 5):  # batches that straddle the GPUs' boundaries
            sink.write(table.slice(start, 5))
        sink.close()
    f = pq.ParquetFile(path)
    assert [f.read_row_group(g).column("gpu").to_pylist() for g in range(3)] == \
        [["A"] * 5, ["B"] * 3, [None] * 4]
    assert f.read().column("i").to_pylist() == list(range(12))
    for bad in (["A", "B", "A"], ["B", "A"], [None, "A"]):
        with GroupedWriter(tmp_path / "bad.parquet", schema) as writer:
            sink = InOrder(writer, "gpu")
            with pytest.raises(WarehouseError, match="out of order"):
                sink.write(pa.table({"gpu": bad, "i": range(len(bad))}, schema=schema))
