"""Spark over warehouses that are not simply current: loads written by kidata 0.1 and 0.2.2
(their latest_runs rows derived on read), a load killed before its commit marker, and runs
with only a mean. Each gives DuckDB's rows. (A module apart from test_spark.py so that
pytest-xdist runs the two side by side; both share tests/spark_compare.py.)"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from spark_compare import (  # noqa: F401 (fixtures)
    SEEDS,
    Stepwise,
    assert_same_rows,
    seeded,
    spark,
)

from kidata import Warehouse
from kidata.query.spark import register
from kidata.store.schema import TABLES

pytestmark = [
    # The slow lane (a Spark session); `pytest -m "not slow"` skips it.
    pytest.mark.slow,
    # PySpark warns when the pandas it finds is newer than it knows; kidata does not use it.
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]


def test_loads_of_kidata_0_1_are_derived_in_spark(spark, seeded, tmp_path):
    """A warehouse whose load was written by kidata 0.1 (no latest_runs rows): Spark derives
    them with the commit's SQL and gives DuckDB's answers on the current warehouse."""
    from test_latest_runs import as_written_by_0_1

    old = Path(shutil.copytree(seeded.path, tmp_path / "old", ignore=shutil.ignore_patterns(
        "_kidata")))
    as_written_by_0_1(old, [p.stem.removeprefix("part-") for p in (old / "loads").iterdir()])
    assert not any((old / "latest_runs").iterdir())
    session = spark.newSession()
    step = Stepwise(session, old)  # register's tables; speedups over its inputs' rows
    for name in ("latest_runs", "speedups"):
        assert assert_same_rows(session, seeded, step.define(name)) > 0


def test_a_half_committed_load_is_hidden_as_in_duckdb(spark, tmp_path):
    """A load killed after renaming its runs but before its commit marker: a plain reader of
    the Parquet files sees its runs; kidata's snapshot rule hides them in Spark as in DuckDB."""
    import signal
    import subprocess

    wh = tmp_path / "half"
    seeds = sorted(SEEDS.glob("00[01]_*.txt"))
    assert Warehouse(wh).load([str(p) for p in seeds]).ok  # seeds 000 and 001: 2 runs
    killed = subprocess.run(
        [sys.executable, "-m", "kidata", "-w", str(wh), "load", str(next(SEEDS.glob("003_*")))],
        env={**os.environ, "KIDATA_FAULT": "after-move:runs", "KIDATA_FAULT_ACTION": "kill"},
        capture_output=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL
    # On disk: seed 003's 24 runs are in place beside the first load's 2, its marker is not.
    assert pq.read_table(wh / "runs").num_rows == 2 + 24
    assert len(list((wh / "loads").glob("*.parquet"))) == 1
    session = spark.newSession()
    register(session, wh, views=["latencies"])
    duck = Warehouse(wh)
    assert session.sql("SELECT count(*) FROM runs").collect()[0][0] == 2  # before: 26
    for name in ("runs", "measurements", "workloads", "latest_runs", "latencies"):
        assert_same_rows(session, duck, name)


def test_loads_of_kidata_0_2_2_are_derived_in_spark(spark, seeded, tmp_path):
    """A warehouse whose loads were written by kidata 0.2.2 (latest_runs rows without the
    evidence columns added in 0.2.3): Spark derives their rows, evidence included, and gives
    DuckDB's answers on the current warehouse."""
    from test_latest_runs import as_written_by_0_2_2

    old = Path(shutil.copytree(seeded.path, tmp_path / "old", ignore=shutil.ignore_patterns(
        "_kidata")))
    as_written_by_0_2_2(old, [p.stem.removeprefix("part-") for p in (old / "loads").iterdir()])
    session = spark.newSession()
    step = Stepwise(session, old)
    for name in ("latest_runs", "latest_latencies", "speedups"):
        assert assert_same_rows(session, seeded, step.define(name)) > 0


def test_mean_only_runs_and_flat_sweeps_match_in_spark(spark, tmp_path):
    """tests/data/views/centers.jsonl (runs with only a mean, a mean against a median) and
    sweeps.jsonl (efficiency's flat-latency rule), in a load that looks written by 0.2.3 (its
    latest_runs rows derived on read, mean-only runs included): Spark gives DuckDB's rows for
    every view these reach, 'different centers' and flat_latency included."""
    import pyarrow as pa

    views = Path(__file__).parent.parent / "data" / "views"
    wh = Warehouse(tmp_path / "wh")
    assert wh.load([str(views / "centers.jsonl"), str(views / "sweeps.jsonl")]).ok
    for marker in (wh.path / "loads").iterdir():
        row = pq.read_table(marker).to_pylist()[0]
        row.update(kidata_version="0.2.3")
        pq.write_table(pa.Table.from_pylist([row], schema=TABLES["loads"]), marker)
    assert wh.sql("SELECT count(*) FROM speedups WHERE verdict = 'different centers'"
                  ).fetchall() == [(2,)]
    assert wh.sql("SELECT count(*) FROM efficiency WHERE flat_latency").fetchall() == [(1,)]
    session = spark.newSession()
    compared = ("latencies", "latest_latencies", "speedups", "speedup_summary", "series_steps",
                "trends", "regressions", "efficiency")
    step = Stepwise(session, wh.path)
    for name in ("latest_runs", *compared):
        assert assert_same_rows(session, wh, step.define(name)) > 0, name


def test_a_warehouse_of_a_newer_layout_is_refused_as_in_duckdb(spark, seeded, tmp_path):
    """Spark reads no warehouse whose layout file names a layout this kidata does not know,
    as Warehouse.require refuses it for DuckDB: what a newer layout changed could make the
    views' answers wrong."""
    from kidata import errors
    from kidata.store.layout import CURRENT_LAYOUT, Layout

    newer = Path(shutil.copytree(seeded.path, tmp_path / "newer"))
    Layout(newer).layout_file.write_text(
        json.dumps({"layout": CURRENT_LAYOUT + 1, "written_by": "kidata 9.0.0"}), "utf-8")
    with pytest.raises(errors.NewerLayout):
        register(spark.newSession(), newer)
    with pytest.raises(errors.NewerLayout):
        Warehouse(newer).sql("select 1")  # the same refusal, for DuckDB


def _as_written_by_0_2_2_exactly(wh: Path, load_id: str) -> None:
    """Rewrite one load's files with the columns kidata 0.2.2 wrote, and its types: a commit
    marker without ``rejects_not_kept`` (0.2.3) and ``commit``, ``branch``, ``ci_run``
    (0.2.9); ``latest_runs`` rows without the columns of 0.2.3, 0.2.4 and 0.3.0, their
    ``median_us`` still a required column (nullable since 0.2.4)."""
    import pyarrow as pa

    from kidata.store import derived

    marker = wh / "loads" / f"part-{load_id}.parquet"
    table = pq.read_table(marker).drop_columns(["rejects_not_kept", "commit", "branch",
                                                "ci_run"])
    table = table.set_column(table.schema.get_field_index("kidata_version"), "kidata_version",
                             pa.array(["0.2.2"] * table.num_rows))
    pq.write_table(table, marker)
    path = wh / "latest_runs" / f"part-{load_id}.parquet"
    table = pq.read_table(path).drop_columns([*derived.STATISTICS, *derived.CENTER,
                                              *derived.NOISE])
    at = table.schema.get_field_index("median_us")
    table = table.cast(table.schema.set(at, table.schema.field(at).with_nullable(False)))
    pq.write_table(table, path)
    assert not pq.ParquetFile(path).schema_arrow.field("median_us").nullable


@pytest.mark.parametrize("old", ["every load", "the first load"])
def test_columns_older_files_lack_read_as_null_as_in_duckdb(spark, tmp_path, old):
    """Spark reads each table with its declared columns (no schema merged from the files): a
    column older files lack reads as null, whether no file of the table has it (every load
    written by 0.2.2) or only some (0.2.2's load beside a current one), and a column once
    required and now nullable reads from the files that still declare it required. Every
    table and view these reach gives DuckDB's rows."""
    wh = Warehouse(tmp_path / "wh")
    assert wh.load([str(p) for p in sorted(SEEDS.glob("00[01]_*.txt"))]).ok
    assert wh.load([str(next(SEEDS.glob("003_*")))]).ok
    loads = sorted(p.stem.removeprefix("part-") for p in (wh.path / "loads").iterdir())
    rewritten = loads if old == "every load" else loads[:1]
    for load_id in rewritten:
        _as_written_by_0_2_2_exactly(wh.path, load_id)
    session = spark.newSession()
    # speedups and what it reads: the views over the tables (speedup_summary reads views only).
    step = Stepwise(session, wh.path)
    assert session.table("loads").columns == TABLES["loads"].names
    markers = {r.load_id: r for r in session.table("loads").collect()}
    for load_id in loads:
        row = markers[load_id]
        if load_id in rewritten:
            assert (row.rejects_not_kept, row.commit, row.branch, row.ci_run) == (None,) * 4
        else:
            assert row.rejects_not_kept == 0
    for name in ("loads", "runs", "latest_runs", "latest_latencies", "speedups"):
        assert assert_same_rows(session, wh, step.define(name)) > 0, name
