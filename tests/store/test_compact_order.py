"""A compaction (and a load) writes ``runs`` and ``latest_runs`` sorted by GPU, kernel, pass
and time across the whole file, one GPU per row group, in bounded memory, so a filter on one
GPU reads its own row groups only, and one on a kernel a few; no query result changes."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import console
from oracle_model import generate_module
from test_check_compact import SOME_VIEWS, everything

from kidata import Warehouse
from kidata.store import compaction, finalize, pqwrite

LOADS = 6
PER_LOAD = 80
GROUP = 16  # rows per row group of a merged file here (compaction.ROW_GROUP)
ORDER = ["gpu", "kernel", "pass", "observed_at", "run_id"]


@pytest.fixture(scope="module")
def parts(tmp_path_factory) -> list[Path]:
    """480 generated runs (several GPUs, kernels and passes in every file) in 6 files."""
    generate = generate_module()
    gen = generate.Generator(seed=0)
    folder = tmp_path_factory.mktemp("parts")
    files = []
    for n in range(LOADS):
        path = folder / f"part-{n}.ndjson"
        generate.write_ndjson(gen, path, n * PER_LOAD, (n + 1) * PER_LOAD)
        files.append(path)
    return files


def _loaded(path: Path, files: list[Path]) -> Warehouse:
    wh = Warehouse(path)
    for f in files:
        assert wh.load([str(f)]).committed
    return wh


def _only_file(wh: Warehouse, table: str) -> Path:
    [path] = sorted((wh.path / table).glob("*.parquet"))
    return path


def _groups_to_read(path: Path, column: str, value: str) -> int:
    """Row groups whose statistics do not rule out ``column = value``: what any Parquet reader
    (DuckDB, Spark, pyarrow) must read for that filter."""
    meta = pq.ParquetFile(path).metadata
    index = meta.schema.to_arrow_schema().get_field_index(column)
    count = 0
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(index).statistics
        if stats is None or not stats.has_min_max or stats.min <= value <= stats.max:
            count += 1
    return count


def _row_groups(path: Path, columns: list[str]) -> list[list[tuple]]:
    """Each row group's rows, as tuples of ``columns``."""
    f = pq.ParquetFile(path)
    return [[tuple(r[c] for c in columns) for r in f.read_row_group(g, columns).to_pylist()]
            for g in range(f.metadata.num_row_groups)]


def _assert_clustered(path: Path, columns: list[str]) -> list[list[tuple]]:
    """Each row group of ``path`` holds one GPU (its first column), and the whole file is in
    ``columns`` order (no nulls in these columns of generated runs)."""
    groups = _row_groups(path, columns)
    for rows in groups:
        assert len({r[0] for r in rows}) == 1, {r[0] for r in rows}
    every = [r for rows in groups for r in rows]
    assert every == sorted(every)
    return groups


def test_compaction_puts_one_gpu_in_each_row_group_so_a_filter_reads_its_own(
        parts, tmp_path, monkeypatch):
    monkeypatch.setenv("KIDATA_COMPACT_AT", "0")  # the test compacts when it means to
    monkeypatch.setattr(compaction, "ROW_GROUP", GROUP)
    wh = _loaded(tmp_path / "wh", parts)
    stored = sorted(run_id for f in (wh.path / "runs").glob("*.parquet")
                    for run_id in pq.read_table(f, columns=["run_id"]).column(0).to_pylist())
    before = everything(wh.path, SOME_VIEWS)
    report = wh.compact()
    assert report.tables["runs"] == (LOADS, 1)
    assert report.tables["latest_runs"] == (LOADS, 1)
    assert wh.check().ok
    assert everything(wh.path, SOME_VIEWS) == before

    path = _only_file(wh, "runs")
    groups = _assert_clustered(path, ORDER)
    assert sorted(r[-1] for rows in groups for r in rows) == stored
    # A filter on a GPU reads that GPU's row groups and no other (in load order, nearly
    # every row group holds every GPU). Each is a row group's worth (16 rows or a few more:
    # the batch that fills it goes in whole) but the GPU's last.
    sizes: dict[str, list[int]] = {}
    for rows in groups:
        sizes.setdefault(rows[0][0], []).append(len(rows))
    assert len(sizes) >= 3
    for gpu, counts in sizes.items():
        assert _groups_to_read(path, "gpu", gpu) == len(counts), gpu
        assert all(n >= GROUP for n in counts[:-1]), (gpu, counts)
    assert len(groups) < sum(math.ceil(sum(c) / GROUP) for c in sizes.values()) + len(sizes)

    _assert_clustered(_only_file(wh, "latest_runs"), ["gpu", "kernel", "pass", "observed_at"])


def test_a_merge_over_its_memory_budget_spills_and_still_writes_full_sorted_groups(
        parts, tmp_path, monkeypatch):
    """With no room at all (every GPU's rows spilled as they come, sixteen rows at a time),
    the merge goes through many chunks in several passes (at most three chunks at a time):
    the same rows, the file sorted, each row group full but each GPU's last."""
    monkeypatch.setenv("KIDATA_COMPACT_AT", "0")
    monkeypatch.setattr(compaction, "ROW_GROUP", GROUP)
    monkeypatch.setattr(compaction, "BUFFER_BYTES", 1)  # every GPU's rows out as they come
    monkeypatch.setattr(pqwrite, "FAN_IN", 3)
    spilled = []
    real_close = pqwrite.Clustered.close

    def close(self):
        real_close(self)
        spilled.append(self.spilled)

    monkeypatch.setattr(pqwrite.Clustered, "close", close)
    wh = _loaded(tmp_path / "wh", parts)
    stored = sorted(run_id for f in (wh.path / "runs").glob("*.parquet")
                    for run_id in pq.read_table(f, columns=["run_id"]).column(0).to_pylist())
    spilled.clear()
    wh.compact(["runs"])
    # 480 runs, 30 batches of 16 over several GPUs: each batch's part of a GPU a chunk, and
    # the chunks merged three at a time, each merge a chunk more.
    assert spilled and spilled[0] > 2 * 30
    groups = _assert_clustered(_only_file(wh, "runs"), ORDER)
    assert sorted(r[-1] for rows in groups for r in rows) == stored
    sizes: dict[str, list[int]] = {}
    for rows in groups:
        sizes.setdefault(rows[0][0], []).append(len(rows))
    for gpu, counts in sizes.items():
        assert all(n >= GROUP for n in counts[:-1]), (gpu, counts)
    assert not list(wh.path.rglob("*.sort"))  # no spill folder left behind
    assert wh.check().ok


def test_a_merge_cuts_its_runs_row_groups_where_a_loads_own_file_does(
        parts, tmp_path, monkeypatch):
    """A compaction's merge of ``runs`` cuts its row groups at the bytes a load's own file
    does (``finalize.ROW_GROUP_BYTES``: ~100k runs), not at ``pqwrite.MAX_BYTES`` (16 MB,
    ~19k runs, the other tables'): made small here, it is what splits each GPU's rows."""
    monkeypatch.setenv("KIDATA_COMPACT_AT", "0")
    wh = _loaded(tmp_path / "wh", parts)
    monkeypatch.setattr(compaction, "ROW_GROUP", 10**6)  # no cut by rows
    monkeypatch.setattr(finalize, "ROW_GROUP_BYTES", 12_000)
    monkeypatch.setattr(pqwrite, "MERGE_BATCH_BYTES", 1_000)  # slices of a few rows
    monkeypatch.setattr(pqwrite, "MIN_BATCH_ROWS", 1)
    assert wh.compact(["runs"]).tables["runs"] == (LOADS, 1)
    path = _only_file(wh, "runs")
    groups = _assert_clustered(path, ORDER)
    f = pq.ParquetFile(path)
    sizes: dict[str, list[int]] = {}
    for g, rows in enumerate(groups):
        sizes.setdefault(rows[0][0], []).append(f.read_row_group(g).nbytes)
    # 480 runs over a few GPUs: ~60-160 runs (~50-140 KB of Arrow) per GPU, so several row
    # groups each, none far past the limit (a slice of a few rows goes in whole).
    assert len(sizes) >= 3
    for gpu, nbytes in sizes.items():
        assert len(nbytes) >= 3, (gpu, nbytes)
        assert all(n < 3 * 12_000 for n in nbytes), (gpu, nbytes)
    assert wh.check().ok


def test_other_tables_keep_the_order_of_their_files(parts, tmp_path, monkeypatch):
    monkeypatch.setenv("KIDATA_COMPACT_AT", "0")
    wh = _loaded(tmp_path / "wh", parts[:3])
    files = sorted((wh.path / "measurements").glob("*.parquet"))
    expected = [row for f in files for row in pq.read_table(f).to_pylist()]
    wh.compact(["measurements"])
    assert pq.read_table(_only_file(wh, "measurements")).to_pylist() == expected
    # Nothing of the sort's spill folder or the work folder is left behind.
    assert not any((wh.path / "_kidata" / "compact").iterdir())


def test_a_load_writes_its_runs_one_gpu_per_row_group_so_compact_leaves_them(
        parts, tmp_path, monkeypatch):
    """A load's own ``runs`` and ``latest_runs`` files hold one GPU per row group (finalize's
    DirectWriter, the commit's copy and derived.write_latest_runs cluster as a compaction
    does), so a filter on one GPU skips the others before any compaction, and ``kidata
    compact`` finds nothing to recluster."""
    monkeypatch.setenv("KIDATA_COMPACT_AT", "0")
    monkeypatch.setattr(pqwrite, "ROWS", GROUP)  # row groups of 16 rows: many per load
    wh = Warehouse(tmp_path / "wh")
    assert wh.load([str(p) for p in parts[:3]]).committed  # one load of 240 runs
    path = _only_file(wh, "runs")
    groups = _assert_clustered(path, ORDER)
    stored = sorted(r[-1] for rows in groups for r in rows)
    assert len(stored) == 3 * PER_LOAD and len(set(stored)) == len(stored)
    gpus = {rows[0][0] for rows in groups}
    assert len(gpus) >= 3
    for gpu in gpus:
        mine = sum(rows[0][0] == gpu for rows in groups)
        assert _groups_to_read(path, "gpu", gpu) == mine < len(groups)
    assert compaction.is_sorted(path)
    _assert_clustered(_only_file(wh, "latest_runs"), ["gpu", "kernel", "pass", "observed_at"])
    before = everything(wh.path, SOME_VIEWS)
    # Nothing to merge (one file per table) and nothing to recluster.
    report = wh.compact()
    assert report.reclustered == {} and report.rows == 0
    assert _only_file(wh, "runs") == path
    assert wh.check().ok
    assert everything(wh.path, SOME_VIEWS) == before


def _copied(parts: list[Path], tmp_path: Path, monkeypatch) -> Warehouse:
    """A warehouse of one load given half of its runs twice, so that the commit copies the
    kept rows (the staged file is not linked as it is), in row groups of 16 rows read 7 at a
    time."""
    monkeypatch.setenv("KIDATA_COMPACT_AT", "0")
    monkeypatch.setattr(pqwrite, "ROWS", GROUP)
    monkeypatch.setattr(finalize, "BATCH", 7)  # the copy reads 7 rows at a time
    twice = tmp_path / "twice.ndjson"
    lines = parts[0].read_text().splitlines(keepends=True)
    twice.write_text("".join(lines) + parts[1].read_text() + "".join(lines[:PER_LOAD // 2]))
    wh = Warehouse(tmp_path / "wh")
    rewritten = finalize.finished[("runs", "rewritten")]
    assert wh.load([str(twice)]).committed
    assert finalize.finished[("runs", "rewritten")] == rewritten + 1  # copied, not linked
    return wh


def test_a_load_that_drops_duplicates_keeps_its_runs_clustered(parts, tmp_path, monkeypatch):
    """When the commit copies the kept rows (a run given twice in one load: the staged file
    is not linked as it is), the copy holds one GPU per row group too, every run once."""
    wh = _copied(parts, tmp_path, monkeypatch)
    groups = _assert_clustered(_only_file(wh, "runs"), ORDER)
    stored = [r[-1] for rows in groups for r in rows]
    assert len(stored) == 2 * PER_LOAD and len(set(stored)) == len(stored)
    assert len({rows[0][0] for rows in groups}) >= 3
    assert wh.check().ok


def test_compact_prints_the_reclustered_files(parts, tmp_path, monkeypatch):
    """Through the CLI, as a user runs it."""
    monkeypatch.setenv("KIDATA_COMPACT_AT", "0")
    wh = Warehouse(tmp_path / "wh")
    assert wh.load([str(p) for p in parts[:2]]).committed
    # A runs file whose row groups mix GPUs (as a file written before 0.3.12 by a load, or
    # before 0.3.4 by a compaction: rows in input order), with row groups of 16 rows.
    path = _only_file(wh, "runs")
    pq.write_table(pq.read_table(path).sort_by("run_id"), path, row_group_size=GROUP)
    assert not compaction.is_sorted(path)
    result = console("-w", wh.path, "compact", "runs")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "runs: 1 files -> 1 (1 file rewritten sorted by GPU, kernel, pass and time)",
        f"compacted: 0 fewer files, {2 * PER_LOAD:,} rows rewritten"]
    assert compaction.is_sorted(_only_file(wh, "runs"))
    assert wh.check().ok


def test_compact_regroups_a_sorted_file_cut_into_small_row_groups(parts, tmp_path,
                                                                   monkeypatch):
    """A commit's copy of a load's kept runs is cut into small row groups (8 MB of Arrow,
    stamped in the file's metadata): ``kidata compact`` rewrites it in row groups of a
    load's own size, the same rows and answers, and leaves it alone the second time; a load's
    own file, stamped with that size, is left as it is however many row groups it has."""

    wh = _copied(parts, tmp_path, monkeypatch)  # many row groups per GPU
    path = _only_file(wh, "runs")
    groups = _assert_clustered(path, ORDER)
    gpus = {rows[0][0] for rows in groups}
    assert len(groups) > len(gpus) >= 3
    assert compaction.is_sorted(path) and not compaction.is_coarse(path)
    before = everything(wh.path, SOME_VIEWS)

    result = console("-w", wh.path, "compact", "runs")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "runs: 1 files -> 1 (1 file rewritten in larger row groups)",
        f"compacted: 0 fewer files, {2 * PER_LOAD:,} rows rewritten"]
    path = _only_file(wh, "runs")
    groups = _assert_clustered(path, ORDER)
    assert len(groups) == len(gpus)  # 2 x 80 runs: one row group per GPU
    assert compaction.is_coarse(path)
    assert everything(wh.path, SOME_VIEWS) == before
    assert wh.check().ok
    again = wh.compact(["runs"])
    assert (again.tables["runs"], again.regrouped, again.rows) == ((1, 1), {}, 0)

    # A load's own file, its GPUs' rows merged from sorted chunks in slices of a few rows: as
    # many row groups, not rewritten.
    monkeypatch.setattr(pqwrite, "MERGE_BATCH_BYTES", 1_000)
    monkeypatch.setattr(pqwrite, "MIN_BATCH_ROWS", 1)
    own = Warehouse(tmp_path / "own")
    assert own.load([str(parts[0]), str(parts[1])]).committed
    path = _only_file(own, "runs")
    assert pq.ParquetFile(path).metadata.num_row_groups > len(gpus)
    assert compaction.is_coarse(path)
    report = own.compact(["runs"])
    assert (report.tables["runs"], report.regrouped, report.rows) == ((1, 1), {}, 0)
    # The same file with its stamp damaged counts as unstamped: regrouped, not a crash.
    table = pq.read_table(path)
    groups = [g.num_rows for g in map(pq.ParquetFile(path).metadata.row_group,
                                      range(pq.ParquetFile(path).metadata.num_row_groups))]
    damaged = table.replace_schema_metadata({**table.schema.metadata,
                                             pqwrite.GROUP_BYTES_KEY: b"lots"})
    with pq.ParquetWriter(path, damaged.schema) as writer:
        start = 0
        for n in groups:
            writer.write_table(damaged.slice(start, n))
            start += n
    assert compaction.is_sorted(path) and not compaction.is_coarse(path)
    assert own.compact(["runs"]).regrouped == {"runs": 1}
    assert own.check().ok


def test_compact_sorts_a_file_sorted_only_within_each_row_group(parts, tmp_path, monkeypatch):
    """A ``runs`` file as 0.3.12-0.3.25 wrote it (one GPU per row group, each row group sorted
    on its own, so every row group of a GPU spans its kernels) is not sorted for
    ``is_sorted``; ``kidata compact`` rewrites it sorted, and a filter on one kernel then
    reads fewer row groups; no query result changes."""
    import pyarrow as pa
    import pyarrow.compute as pc

    monkeypatch.setenv("KIDATA_COMPACT_AT", "0")
    monkeypatch.setattr(compaction, "ROW_GROUP", GROUP)
    wh = Warehouse(tmp_path / "wh")
    assert wh.load([str(p) for p in parts[:2]]).committed
    path = _only_file(wh, "runs")
    table = pq.read_table(path)
    schema = pq.ParquetFile(path).schema_arrow
    with pq.ParquetWriter(path, schema) as writer:
        for gpu in sorted(set(table.column("gpu").to_pylist())):
            mine = table.filter(pc.equal(table["gpu"], gpu))
            for half in range(4):  # a GPU's runs in four row groups, each sorted by itself
                rows = mine.take(pa.array(range(half, mine.num_rows, 4)))
                writer.write_table(rows.sort_by([(c, "ascending") for c in ORDER]))
    assert not compaction.is_sorted(path)
    kernel = table.column("kernel")[0].as_py()
    reads_before = _groups_to_read(path, "kernel", kernel)
    before = everything(wh.path, SOME_VIEWS)
    report = wh.compact(["runs"])
    assert report.reclustered == {"runs": 1}
    path = _only_file(wh, "runs")
    groups = _assert_clustered(path, ORDER)
    assert sorted(r[-1] for rows in groups for r in rows) == sorted(table["run_id"].to_pylist())
    assert compaction.is_sorted(path)
    assert _groups_to_read(path, "kernel", kernel) < reads_before
    assert wh.check().ok
    assert everything(wh.path, SOME_VIEWS) == before
