"""The views run unchanged in Spark SQL over the same Parquet files, with DuckDB's answers.

One local Spark session serves the module. The seeds are loaded with kidata, the warehouse's
tables are registered in Spark with ``kidata.query.spark.register``, and every table and every
``sql/*.sql`` view that exists when the tests run is compared with DuckDB's result row for row,
each view over the rows Spark computed for the views it reads (spark_compare.Stepwise). The
whole chain as ``register`` composes it is compared at its tops, and in the plain PySpark
recipe of docs/spark.md.
Warehouses written by older kidata versions, half-committed loads and mean-only runs are in
test_spark_versions.py (a module of its own, so that the two run side by side); the session,
the seeded warehouse and the comparison are shared from tests/spark_compare.py.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import same_rows
from pyspark.sql import types as T
from spark_compare import (  # noqa: F401 (spark, seeded, stepwise: fixtures)
    Stepwise,
    assert_same_rows,
    seeded,
    spark,
    stepwise,
)

import kidata.query.spark
from kidata import Warehouse
from kidata.core.viewfiles import load_views, sql_dir
from kidata.errors import KidataError, WarehouseError
from kidata.query.spark import SparkViewError, register
from kidata.store import contexts
from kidata.store.schema import TABLES

VIEWS = list(load_views())

pytestmark = [
    # The slow lane (a Spark session); `pytest -m "not slow"` skips it.
    pytest.mark.slow,
    # PySpark warns when the pandas it finds is newer than it knows; kidata does not use it.
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]


# -- helpers -------------------------------------------------------------------------------------

def _reads(view: str) -> set[str]:
    """Every table or view name a view's SQL mentions, through the views it reads."""
    found = load_views()[view]
    code = re.sub(r"--[^\n]*", "", found.body)  # comments name tables in prose
    names = {n for n in [*TABLES, *VIEWS] if re.search(rf"\b{n}\b", code)} - {view}
    return names.union(*(_reads(d) for d in found.depends))


# -- every table and view: Spark == DuckDB -------------------------------------------------------

@pytest.mark.parametrize("name", [*TABLES, *VIEWS])
def test_spark_matches_duckdb(spark, seeded, stepwise, name):
    assert_same_rows(spark, seeded, stepwise.define(name))


def test_register_defines_every_view_and_the_chains_answer(spark, seeded):
    """``register`` as users call it: every view defined, each analyzed over the plans of the
    views it reads, none failing; the deepest chain (series_context, series_steps, trends,
    regressions) and speedup_summary's give DuckDB's rows composed as they are one view at a
    time. (Spark plans a deep chain for seconds however few its rows: the other views are
    compared one at a time, above.)"""
    session = spark.newSession()
    try:
        names = register(session, seeded.path)
    except SparkViewError as exc:
        pytest.fail(str(exc))
    assert names == [*TABLES, *VIEWS]
    for name in ("regressions", "speedup_summary"):
        assert assert_same_rows(session, seeded, name) > 0, name


def test_comparison_sees_data(spark, stepwise):
    # Guard against the comparison passing on empty tables: the seeds hold 26 runs
    # (000 and 001: one Liger run each; 003: 8 held-out rows x 2 implementations + 8 H100
    # calibration schedules = 24), samples.jsonl 11 runs with 100 samples, on which 4 rows of
    # speedups (w1 and w2, both ways), one step of trends and 2 rows of rate_speedups rest.
    for view in ("speedups", "trends", "rate_speedups"):
        stepwise.define(view)
    assert spark.sql("SELECT COUNT(*) FROM runs WHERE source <> 'views-fixture'"
                     ).collect()[0][0] == 26
    assert spark.sql("SELECT COUNT(*) FROM samples").collect()[0][0] == 100
    for view, n in (("speedups", 4), ("trends", 1), ("rate_speedups", 2)):
        assert spark.sql(f"SELECT COUNT(*) FROM {view} WHERE noise_basis = 'samples'"
                         ).collect()[0][0] == n, view


# -- values worked out by hand from the seeds, read from Spark directly --------------------------

def test_speedups_by_hand(spark, stepwise):
    stepwise.define("speedups")
    rows = spark.sql(
        "SELECT gpu, workload, latency_ratio, speedup FROM speedups "
        "WHERE candidate = 'trainkernel' AND baseline = 'inductor'").collect()
    # Seed 003 has 8 held-out rows (A100 and H100 x tiny-online, online, small, medium), each
    # one trainkernel and one inductor run: 8 pairs in this direction.
    assert len(rows) == 8
    a100_tiny = {(r.gpu, r.workload): r for r in rows}[("a100-sxm4-80gb", "tiny-online")]
    # A100 tiny-online: trainkernel_us 15.28, inductor_us 22.85.
    assert a100_tiny.latency_ratio == pytest.approx(15.28 / 22.85, rel=1e-12)
    assert a100_tiny.speedup == pytest.approx(22.85 / 15.28, rel=1e-12)


def test_speedup_summary_by_hand(spark, stepwise):
    stepwise.define("speedup_summary")
    row = spark.sql(
        "SELECT workloads, geomean_speedup, wins, losses FROM speedup_summary "
        "WHERE candidate = 'trainkernel' AND baseline = 'inductor' "
        "AND candidate_variant IS NULL AND gpu = 'h100-sxm5-80gb'").collect()
    assert len(row) == 1
    # H100 speedups (inductor_us / trainkernel_us): tiny-online 15.58/12.80, online 21.76/13.41
    # (wins); small 18.84/53.86, medium 30.58/191.09 (losses).
    product = (15.58 / 12.80) * (21.76 / 13.41) * (18.84 / 53.86) * (30.58 / 191.09)
    assert row[0].workloads == 4
    assert row[0].geomean_speedup == pytest.approx(product ** 0.25, rel=1e-9)
    assert (row[0].wins, row[0].losses) == (2, 2)


def test_latencies_by_hand_with_utc_timestamp(spark, stepwise):
    stepwise.define("latencies")
    row = spark.sql(
        "SELECT median_us, p20_us, p80_us, observed_at, "
        "date_format(observed_at, 'yyyy-MM-dd HH:mm:ss') AS shown FROM latencies "
        "WHERE kernel = 'rms_norm' AND pass = 'forward' AND implementation = 'liger'").collect()
    assert len(row) == 1
    # Seed 000: median 31072 ns, p20 30048 ns, p80 31968 ns; observedAt 2024-09-03T15:39:30Z.
    assert (row[0].median_us, row[0].p20_us, row[0].p80_us) == pytest.approx(
        (31.072, 30.048, 31.968), rel=1e-12)
    assert row[0].observed_at.astimezone(UTC) == datetime(2024, 9, 3, 15, 39, 30, tzinfo=UTC)
    assert row[0].shown == "2024-09-03 15:39:30"


# -- at scale: many loads, several row groups in each file -----------------------------------------

# benchmarks/generate.py's runs in SCALE_LOADS loads, written in row groups of SCALE_GROUP rows:
# every table a load writes has a file per load, runs and measurements several row groups each.
SCALE_RUNS, SCALE_LOADS, SCALE_GROUP = 1200, 8, 50


@pytest.fixture(scope="module")
def scaled(tmp_path_factory) -> Warehouse:
    import importlib.util

    from kidata.store import pqwrite

    bench = Path(__file__).parents[2] / "benchmarks" / "generate.py"
    spec = importlib.util.spec_from_file_location("kidata_bench_generate", bench)
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    root = tmp_path_factory.mktemp("scaled")
    generate.generate(root / "data", SCALE_RUNS, extra=0, per_file=SCALE_RUNS // SCALE_LOADS,
                      csv_rows=1)
    wh = Warehouse(root / "wh")
    with pytest.MonkeyPatch.context() as patch:
        # In this process (no workers), so that the row-group size reaches every writer, and
        # in batches of a row group's size (a writer keeps a larger batch whole).
        patch.setenv("KIDATA_WORKERS", "0")
        patch.setattr(pqwrite, "ROWS", SCALE_GROUP)
        for part in sorted((root / "data" / "many").glob("*.ndjson")):
            report = wh.load([str(part)], batch_size=SCALE_GROUP)
            assert report.ok and report.runs_added == SCALE_RUNS // SCALE_LOADS, report.rejects
    return wh


# Read from many files: the tables loads write, and views at the top of the chains over them
# (the seeds compare every view above).
SCALE_NAMES = ("runs", "measurements", "environments", "protocols", "workloads",
               "workload_parameters", "latest_runs", "loads", "latencies", "speedups",
               "speedup_summary", "trends")


def test_spark_matches_duckdb_over_many_files_and_row_groups(spark, scaled):
    """The tables and views over a warehouse of many loads whose files hold several row
    groups each (what mergeSchema used to plan from every footer, and what the declared
    schemas must read the same): Spark's rows are DuckDB's."""
    for table, least in (("runs", 3), ("measurements", 3)):
        files = sorted((scaled.path / table).glob("*.parquet"))
        assert len(files) == SCALE_LOADS
        assert min(pq.ParquetFile(f).metadata.num_row_groups for f in files) >= least, table
    session = spark.newSession()
    step = Stepwise(session, scaled.path)  # the views compared, each over its inputs' rows
    assert step.tables == list(TABLES)
    counts = {name: assert_same_rows(session, scaled, step.define(name)) for name in SCALE_NAMES}
    assert counts["runs"] == SCALE_RUNS
    # Not a comparison of empty views: the pairings and series have rows at this size (the
    # generated bundles name their workloads by digest only, so workload_parameters is empty
    # on both sides).
    assert counts["workload_parameters"] == 0
    assert all(counts[n] > 0 for n in SCALE_NAMES if n != "workload_parameters"), counts


def test_spark_matches_duckdb_on_sweeps_with_byte_models(spark, tmp_path):
    """The efficiency and roofline views over runs with byte and FLOP models (the seeds have
    none): sweeps whose points are 2x apart, two releases, points of every bound. Spark's rows
    are DuckDB's, size_growth (a window over each sweep's byte counts) included."""
    wh = Warehouse(tmp_path / "wh")
    views = Path(__file__).parents[1] / "data" / "views"
    report = wh.load([str(views / "sweeps.jsonl"), str(views / "efficiency.jsonl")])
    assert report.ok, report.rejects
    session = spark.newSession()
    step = Stepwise(session, wh.path)
    counts = {name: assert_same_rows(session, wh, step.define(name))
              for name in ("run_bytes", "efficiency", "run_flops", "roofline")}
    assert counts["efficiency"] >= 10 and counts["roofline"] > 0, counts
    grown = wh.sql("SELECT count(size_growth) FROM efficiency").fetchall()[0][0]
    assert grown >= 3  # the liger sweep's points below its largest


def test_spark_matches_duckdb_on_stored_and_computed_steps(spark, tmp_path, monkeypatch):
    """The series views where steps have contexts, read from the stored steps and computed:
    the seeds and the generated warehouses above hold no step with another implementation,
    workload or session beside it, so there every context column is null. test_step_context's
    series (sessions across midnight, session-wide shifts, a protocol family given late) in
    two loads and the late protocol's document, each storing its steps (KIDATA_CONTEXTS_AT=0):
    both engines read series_context from step_context (sql/stored/series_context.sql); then
    a copy without them, where both compute it (sql/series_context.sql)."""
    from test_step_context import LATE_PROTOCOL, bundles

    monkeypatch.setenv("KIDATA_CONTEXTS_AT", "0")
    records = bundles()
    first = [r for r in records if not r["run"]["metadata"]["name"].startswith("ctx-5-")]
    second = [r for r in records if r not in first]
    wh = Warehouse(tmp_path / "wh")
    for number, batch in enumerate((first, second, [LATE_PROTOCOL])):
        source = tmp_path / f"part-{number}.jsonl"
        source.write_text("".join(json.dumps(r) + "\n" for r in batch))
        report = wh.load([str(source)])
        assert report.ok, report.rejects
    copy = tmp_path / "computed"
    shutil.copytree(wh.path, copy)
    shutil.rmtree(copy / "step_context")
    shutil.rmtree(copy / "step_edits")
    for path, stored in ((wh.path, True), (copy, False)):
        duck = Warehouse(path)
        [(reads, together, session_fits, echoed, voided)] = duck.sql(
            f"SELECT ({contexts.READABLE_SQL}), count(together_implementations), "
            "count(*) FILTER (WHERE session_workloads >= 3), count(echo_up), "
            "(SELECT count(*) FROM step_edits WHERE kind = 'void') FROM series_context"
        ).fetchall()
        # Not a comparison of nulls: every context column has values; the stored steps
        # include rows that later loads voided (the last session changed steps before it).
        assert reads is stored and together > 0 and session_fits > 0 and echoed > 0
        assert (voided > 0) is stored
        session = spark.newSession()
        step = Stepwise(session, path)
        assert contexts.readable(session) is stored
        for name in ("series_context", "series_steps", "trends"):
            assert assert_same_rows(session, duck, step.define(name)) > 0
        if stored:
            # register as users call it: the stored bodies, each after what it reads.
            own = spark.newSession()
            names = register(own, path, views=["rerun_changes"])
            assert names.index("series_context") < names.index("rerun_changes")
            assert "latencies" not in names  # the computing rerun_changes reads it
            for name in ("series_context", "rerun_changes"):
                assert assert_same_rows(own, duck, name) > 0


# -- warehouses of other shapes --------------------------------------------------------------------

def test_empty_warehouse_gives_typed_empty_tables(spark, tmp_path):
    session = spark.newSession()  # own temp views, same JVM
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "runs").mkdir()  # an empty table folder, and the other tables have none
    # speedups and the views it reads (every view analyzes over the declared schemas whether
    # their tables have rows or not: the seeds' registration defines them all).
    names = register(session, empty, views=["speedups"])
    assert names[:len(TABLES)] == list(TABLES) and names[-1] == "speedups"
    assert session.sql("SELECT COUNT(*) FROM runs").collect()[0][0] == 0
    observed = session.table("runs").schema["observed_at"].dataType
    assert isinstance(observed, T.TimestampType)
    assert session.sql("SELECT COUNT(*) FROM speedups").collect()[0][0] == 0
    # Reference tables are served from kidata's packaged data, as DuckDB does.
    duck = Warehouse(empty).create()  # kidata reads only a folder made a warehouse
    for table in ("gpus",):
        if table in TABLES:
            assert session.table(table).count() == duck.sql(
                f"SELECT COUNT(*) FROM {table}").fetchall()[0][0] > 0


def test_files_of_another_version_read_with_the_declared_columns(spark, seeded, tmp_path):
    """Each table is read with its declared columns: an older file without one reads it as
    null, a newer file's column this kidata does not declare is not shown (`kidata check`
    calls it unexpected; no view reads it)."""
    session = spark.newSession()
    # Glob characters in the path: Spark must read it literally.
    wh = tmp_path / "wh [v]{1}*"
    shutil.copytree(seeded.path, wh, ignore=shutil.ignore_patterns("_kidata"))
    # An "older" runs file without the version column and a "newer" one with an extra column.
    runs = pq.read_table(next((wh / "runs").glob("*.parquet")))
    one = runs.filter(pc.and_(pc.equal(runs["implementation"], "liger"),
                              pc.is_valid(runs["version"]))).slice(0, 1)
    version = one["version"][0].as_py()  # whichever liger run with a version comes first
    assert version
    older = one.drop_columns(["version"]).set_column(
        0, "run_id", [["older-run"]])
    pq.write_table(older, wh / "runs" / "part-older.parquet")
    newer = one.set_column(0, "run_id", [["newer-run"]]).append_column(
        "added_later", [["x"]])
    pq.write_table(newer, wh / "runs" / "part-newer.parquet")
    # Not a table file: Spark and DuckDB both skip it.
    (wh / "runs" / "notes.txt").write_text("not parquet\n")

    register(session, wh, views=[])  # the tables only
    assert session.table("runs").columns == TABLES["runs"].names
    got = {r.run_id: r for r in session.sql(
        "SELECT run_id, version FROM runs "
        "WHERE run_id IN ('older-run', 'newer-run')").collect()}
    assert got["older-run"].version is None
    assert got["newer-run"].version == version
    # 26 seed runs and samples.jsonl's 11, + the two added.
    assert session.sql("SELECT COUNT(*) FROM runs").collect()[0][0] == 26 + 11 + 2


def test_a_layout_1_warehouse_gives_run_documents_from_its_runs_files(spark, tmp_path):
    """kidata 0.3.13 and older kept each run's document in its runs row (layout 1): Spark
    reads run_documents from the runs files there, as DuckDB does, until a writer upgrades."""
    session = spark.newSession()
    wh = tmp_path / "wh"
    shutil.copytree(Path(__file__).parents[1] / "data" / "layout1" / "warehouse", wh)
    register(session, wh, views=[])
    assert "document" not in session.table("runs").columns
    got = sorted((r.run_id, r.document) for r in
                 session.sql("SELECT run_id, document FROM run_documents").collect())
    expected = []
    for path in sorted((wh / "runs").glob("*.parquet")):
        table = pq.read_table(path, columns=["run_id", "document"])
        expected += zip(table["run_id"].to_pylist(), table["document"].to_pylist(), strict=True)
    assert len(got) == 31 and got == sorted(expected)


def test_register_opens_no_file_to_plan_a_table(spark, seeded, tmp_path):
    """Tables are planned from their declared schemas, not from their files' footers
    (mergeSchema read every footer: 30 s at 1M runs). So a file that is not Parquet at all
    breaks only the queries that read its table, not the registration; a warehouse whose
    files kidata wrote never has one (`kidata check` finds it)."""
    wh = tmp_path / "wh"
    shutil.copytree(seeded.path, wh, ignore=shutil.ignore_patterns("_kidata"))
    (wh / "rejects").mkdir(exist_ok=True)
    (wh / "rejects" / "part-broken.parquet").write_bytes(b"not a Parquet file\n")
    session = spark.newSession()
    register(session, wh, views=[])
    assert session.table("rejects").columns == TABLES["rejects"].names
    assert session.sql("SELECT COUNT(*) FROM runs").collect()[0][0] == 26 + 11
    with pytest.raises(Exception, match="part-broken.parquet"):
        session.sql("SELECT * FROM rejects").collect()


def test_docs_plain_pyspark_block_runs_every_view(spark, seeded, stepwise, capsys):
    """The plain-PySpark recipe in docs/spark.md (no kidata code) registers every view."""
    doc = (Path(__file__).parents[2] / "docs" / "spark.md").read_text("utf-8")
    marker = "<!-- tested: tests/query/test_spark.py runs this block -->\n```python\n"
    assert marker in doc
    block = doc.split(marker, 1)[1].split("```", 1)[0]
    session = spark.newSession()
    # The module's session interprets queries and keeps views' analyzed plans (spark_compare);
    # a user's Spark runs with the defaults: this block runs with them.
    session.conf.set("spark.sql.codegen.factoryMode", "FALLBACK")
    session.conf.set("spark.sql.legacy.storeAnalyzedPlanForView", "false")
    scope = {"spark": session, "warehouse": str(seeded.path), "sql_dir": sql_dir()}
    exec(compile(block, "docs/spark.md", "exec"), scope)
    assert scope["tables"] == list(TABLES), (
        f"the table list in docs/spark.md must be schema.TABLES, i.e. {list(TABLES)}")
    assert "trainkernel" in capsys.readouterr().out  # the block's closing .show()
    # Without kidata, a table with no files has no schema: the views reading it (directly or
    # through another view) are left out, and only those.
    empty = {t for t in TABLES if not any((seeded.path / t).glob("*.parquet"))}
    assert set(scope["errors"]) == {v for v in VIEWS if _reads(v) & empty}
    present = {r.viewName for r in session.sql("SHOW VIEWS").collect() if r.isTemporary}
    assert set(VIEWS) - set(scope["errors"]) <= present
    stepwise.define("speedups")
    # Same answers as the module's session (code generation off, analyzed plans kept, views
    # over their inputs' rows): speedups row for row, 24 rows = 12 pairs x 2
    # directions: the seeds' 8, samples.jsonl's geglu w1-w3 and matmul (the module compares
    # every view with DuckDB).
    query = "SELECT * FROM speedups ORDER BY ALL"
    recipe, module = ([tuple(r) for r in s.sql(query).collect()] for s in (session, spark))
    assert len(recipe) == 24 and same_rows(recipe, module)


def test_register_defines_the_views_asked_for_and_those_they_read(spark, seeded):
    """``views=``: speedups and the views its SQL reads, in dependency order, and no other
    (speedup_summary reads speedups, not the other way round); ``[]`` the tables alone; an
    unknown name is refused with the closest views named."""
    from kidata.core.viewfiles import load_views
    from kidata.errors import NoSuchView

    session = spark.newSession()
    names = register(session, seeded.path, views=["speedups"])
    assert names[:len(TABLES)] == list(TABLES)
    defined = names[len(TABLES):]
    assert "speedups" in defined and "speedup_summary" not in defined and "trends" not in defined
    views = load_views()
    for name in defined:  # each view's dependencies are defined before it
        assert all(dep in defined[:defined.index(name)] for dep in views[name].depends), name
    # ...and each defined view is needed: speedups itself or read on the way to it.
    needed = {"speedups"}
    for name in reversed(defined):
        if name in needed:
            needed.update(views[name].depends)
    assert set(defined) == needed
    assert session.sql("SELECT COUNT(*) FROM speedups").collect()[0][0] == 24  # 12 pairs x 2
    assert register(spark.newSession(), seeded.path, views=[]) == list(TABLES)
    with pytest.raises(NoSuchView, match="did you mean 'speedup_summary'"):
        register(spark.newSession(), seeded.path, views=["speedup_sumary"])


def test_missing_warehouse_is_an_error(spark, tmp_path):
    with pytest.raises(WarehouseError, match="no warehouse folder at .*nowhere"):
        register(spark.newSession(), tmp_path / "nowhere")
    # A URI is not listed by kidata; Spark finding no table folder under it is the same error.
    with pytest.raises(WarehouseError, match=r"no kidata table folders .* under file:///"):
        register(spark.newSession(), (tmp_path / "nowhere").as_uri())


def test_without_pyspark_the_error_says_how_to_install(monkeypatch, tmp_path):
    # None in sys.modules makes `import pyspark...` raise ImportError.
    for mod in [m for m in sys.modules if m == "pyspark" or m.startswith("pyspark.")]:
        monkeypatch.setitem(sys.modules, mod, None)
    with pytest.raises(KidataError, match=r"pip install 'kidata\[spark\]'"):
        kidata.query.spark.register(object(), tmp_path)
