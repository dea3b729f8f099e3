"""What the Spark tests share (tests/query/test_spark.py, test_spark_versions.py): one local
Spark session for the whole test process (one JVM: tests/conftest.py has pytest-xdist run both
modules in the same worker), the seeded warehouse's tables registered in it with its views
defined one at a time (:class:`Stepwise`), and the row-for-row comparison of a Spark table or
view with DuckDB's. Each module imports the fixtures it uses from here."""

from __future__ import annotations

import math
import os
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from kidata import Warehouse
from kidata.core.viewfiles import load_views, stored_views
from kidata.query.spark import register, spark_identifier
from kidata.store import contexts

SEEDS = Path(__file__).parent / "data" / "seeds"
# Raw samples (tests/make_view_fixtures.py, samples()): kernels the seeds do not have, so that
# sample_medians and the basis 'samples' of the comparing views are compared on rows.
SAMPLES = Path(__file__).parent / "data" / "views" / "samples.jsonl"


@pytest.fixture(scope="session")
def spark():
    # Spark binds to loopback only (it would otherwise pick the first network interface).
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[1]")
        .appName("kidata-tests")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "1")
        .config("spark.sql.session.timeZone", "UTC")
        # Re-planning between stages only costs time on data this small.
        .config("spark.sql.adaptive.enabled", "false")
        # One GC thread. Not the quick JIT only (-XX:TieredStopAtLevel=1): the session lives
        # for minutes of query planning, which runs ~2x faster once C2 has compiled the
        # analyzer (4 registrations of the seeds: 25-41 s each with C1 only, 13-28 s with C2).
        .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC")
        # No broadcast joins: with them, three queries of the seeds' views left ~2 GB of long[]
        # reachable (jcmd GC.class_histogram; none without), and a 1 GB driver spent about half
        # of the Spark tests in full collections (-Xlog:gc). Sort-merge joins give the same rows.
        .config("spark.sql.autoBroadcastJoinThreshold", "-1")
        .config("spark.driver.memory", "2g")
        # Each query here runs once over a few dozen rows: generating and compiling Java for it
        # (whole-stage codegen) costs more than interpreting it. The answers are the same;
        # test_docs_plain_pyspark_block_runs_every_view runs the views with Spark's defaults too.
        .config("spark.sql.codegen.factoryMode", "NO_CODEGEN")
        # A temporary view keeps its analyzed plan instead of its SQL text, so a view read by
        # other views is not parsed and analyzed again for each of them.
        .config("spark.sql.legacy.storeAnalyzedPlanForView", "true")
        # No constraints inferred and propagated through the plans: on the series views'
        # plans (window functions, self-joins) the optimizer spent ~2/3 of its time there
        # (EliminateOuterJoin's constraints: 14 of 36 s for series_steps), for filters a few
        # rows do not need. Same answers (a rule that adds redundant filters).
        .config("spark.sql.constraintPropagation.enabled", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("FATAL")  # errors reach the tests as exceptions
    yield session
    session.stop()


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> Warehouse:
    wh = Warehouse(tmp_path_factory.mktemp("spark") / "wh seeds")  # Spark reads the space
    report = wh.load([str(SEEDS), str(SAMPLES)])
    assert report.ok, report.rejects
    return wh


@pytest.fixture(scope="module")
def stepwise(spark, seeded) -> Stepwise:
    """The seeded warehouse's tables registered in the module's session, its views defined
    one at a time (:class:`Stepwise`)."""
    return Stepwise(spark, seeded.path)


class Stepwise:
    """A warehouse's tables registered with ``kidata.query.spark.register(views=[])`` (the
    snapshot rule, older loads derived), and its views defined on demand, each over its
    inputs' rows: a view's SQL body runs unchanged, then its rows are kept as a leaf
    (``localCheckpoint``) for the views that read it, which Spark then analyzes and plans as
    their own SQL over a few rows instead of over the whole chain under them.

    Why: Catalyst takes seconds to analyze and plan a deep chain whatever its size (on the
    seeds, 5-9 s to analyze each of series_context, series_steps, trends, regressions, shifts
    and the memory views, 8-25 s to plan each: 4-5 minutes for every view, most of the suite's
    time); one view at a time over its inputs' rows, all of them take under a minute. The
    rows compared are still Spark's own: each view's SQL over the rows Spark computed for the
    views it reads. Composing the chain, ``register`` as users call it, is tested apart
    (test_register_defines_every_view_and_the_chains_answer in test_spark.py, and the plain
    PySpark recipe of docs/spark.md).
    """

    def __init__(self, session, path):
        self.session = session
        self.tables = register(session, path, views=[])
        self.views: list[str] = []
        self.known = load_views()

    def define(self, name: str) -> str:
        """Define ``name`` (a table: nothing to do) and the views it reads; returns it."""
        if name in self.tables or name in self.views:
            return name
        view = self.known[name]
        if name in stored_views() and contexts.readable(self.session):
            view = stored_views()[name]  # every load stored its steps: as register does
        for dep in view.depends:
            self.define(dep)
        frame = self.session.sql(view.body).localCheckpoint()
        frame.createOrReplaceTempView(spark_identifier(name))
        self.views.append(name)
        return name


# -- helpers -------------------------------------------------------------------------------------

def _spark_rows(spark, name: str, where: str | None = None) -> tuple[list[str], list[tuple]]:
    from pyspark.sql import types as T

    frame = spark.table(name) if where is None else spark.table(name).where(where)
    # collect() turns a Spark TIMESTAMP into a naive datetime in the Python process's local
    # zone; make it the same aware UTC datetime DuckDB returns.
    instant = {f.name for f in frame.schema.fields if isinstance(f.dataType, T.TimestampType)}
    rows = []
    for row in frame.collect():
        rows.append(tuple(v.astimezone(UTC) if k in instant and v is not None else v
                          for k, v in row.asDict().items()))
    return frame.columns, rows


def _duck_rows(wh: Warehouse, name: str, where: str | None = None
               ) -> tuple[list[str], list[tuple]]:
    rel = wh.relation(name) if where is None else wh.sql(f"SELECT * FROM {name} WHERE {where}")
    return rel.columns, [tuple(v.astimezone(UTC) if isinstance(v, datetime) and v.tzinfo
                               else v for v in row) for row in rel.fetchall()]


def _plain(value):
    """One comparable value: numbers as float, everything else as it is."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float | Decimal):
        return float(value)
    return value


def _sort_key(row: tuple) -> tuple:
    # Floats rounded so that last-bit differences between the engines do not reorder rows.
    return tuple((v is None, type(v).__name__,
                  float(f"{v:.9g}") if isinstance(v, float) else str(v))
                 for v in map(_plain, row))


def _same(a, b) -> bool:
    a, b = _plain(a), _plain(b)
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b and type(a) is type(b)


def assert_same_rows(session, wh: Warehouse, name: str, where: str | None = None) -> int:
    """Spark's ``name`` equals DuckDB's row for row (in any order); returns the row count.
    ``where``: only the rows of this SQL condition, on both sides (a part of a large view)."""
    duck_columns, duck = _duck_rows(wh, name, where)
    spark_columns, rows = _spark_rows(session, name, where)
    assert spark_columns == duck_columns
    assert len(rows) == len(duck), f"{name}: Spark {len(rows)} rows, DuckDB {len(duck)}"
    for s_row, d_row in zip(sorted(rows, key=_sort_key), sorted(duck, key=_sort_key),
                            strict=True):
        diffs = [(c, s, d) for c, s, d in zip(duck_columns, s_row, d_row, strict=True)
                 if not _same(s, d)]
        assert not diffs, f"{name}: (column, Spark, DuckDB) differ: {diffs} in row {d_row}"
    return len(rows)


