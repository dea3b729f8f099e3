"""The Python library: what the CLI does, without printing or exiting."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest

import kidata
import kidata.library
from kidata.query import views
from kidata.store import schema

SEEDS = Path(__file__).parent / "data" / "seeds"


def test_load_report_and_relations(tmp_path: Path):
    wh = kidata.Warehouse(tmp_path / "wh")
    report = wh.load([str(SEEDS)])
    assert isinstance(report, kidata.LoadReport)
    assert (report.files, report.records, report.runs_added, report.duplicates,
            report.rejected) == (3, 26, 26, 0, 0)
    rel = wh.sql("select gpu, workload, speedup from speedups where candidate = $c "
                 "order by gpu, workload", params={"c": "inductor"})
    frame = rel.pl()
    assert isinstance(frame, pl.DataFrame) and frame.height == 8
    # trainkernel vs inductor and back on 2 GPUs (4 rows), and trainkernel vs 'role:compiled'
    # (inductor plays the compiled role, kidata/data/roles.toml) on each GPU: 6 rows.
    table = wh.relation("speedup_summary").to_arrow_table()
    assert isinstance(table, pa.Table) and table.num_rows == 6
    # DuckDB 2's relation.arrow() streams: a RecordBatchReader of the same rows.
    assert wh.relation("speedup_summary").arrow().read_all().num_rows == 6


@pytest.mark.parametrize("given", ["str", "path", "list of paths"])
def test_load_takes_one_path_or_paths_as_str_or_pathlib(tmp_path: Path, given: str):
    """A single ``str`` was read as an iterable of one-letter paths and a ``Path`` failed
    with a TypeError; each form now loads the 3 seed files (26 runs, as above)."""
    arg = {"str": str(SEEDS), "path": SEEDS, "list of paths": sorted(SEEDS.iterdir())}[given]
    report = kidata.Warehouse(tmp_path / "wh").load(arg)
    assert (report.files, report.runs_added, report.rejected) == (3, 26, 0)


def test_query_error_is_a_kidata_error(tmp_path: Path):
    wh = kidata.Warehouse(tmp_path / "wh").create()
    with pytest.raises(kidata.QueryError, match="Table with name nope does not exist"):
        wh.sql("select * from nope")
    # A misspelled view is answered with kidata's closest names (DuckDB offered its own
    # catalog's, such as "sqlite_temp_master", where kidata's undefined views are absent).
    with pytest.raises(kidata.QueryError) as caught:
        wh.sql("select * from speedupz_summary")
    assert str(caught.value).startswith("Catalog Error: Table with name speedupz_summary does "
                                        'not exist! Did you mean "speedup_summary"')
    assert "sqlite" not in str(caught.value)
    with pytest.raises(kidata.errors.NoSuchView, match="did you mean 'latest_runs'"):
        wh.relation("latest_run")


def test_empty_warehouse_has_typed_empty_tables(tmp_path: Path):
    wh = kidata.Warehouse(tmp_path / "never-loaded").create()
    assert wh.sql("select count(*) from speedups").fetchall() == [(0,)]
    assert "median_us" in wh.relation("latencies").columns


def test_a_folder_that_is_not_a_warehouse_is_refused(tmp_path: Path):
    # A mistyped path must not read as an empty warehouse (issue 12, item 3).
    for path, why in [(tmp_path / "nope", "no such folder"), (tmp_path, "no _kidata/ folder")]:
        with pytest.raises(kidata.errors.NotAWarehouse, match=why):
            kidata.Warehouse(path).sql("select count(*) from runs")
        with pytest.raises(kidata.errors.NotAWarehouse):
            kidata.Warehouse(path).check()
    assert not (tmp_path / "nope").exists()  # reading created nothing


def test_default_path_follows_the_environment(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("KIDATA_WAREHOUSE", str(tmp_path / "env-wh"))
    assert kidata.Warehouse().path == tmp_path / "env-wh"
    monkeypatch.delenv("KIDATA_WAREHOUSE")
    assert kidata.Warehouse().path == Path("warehouse")


@pytest.mark.parametrize("name", ["wh [x]", "wh*", "wh {a,b}", "it's"])
def test_warehouse_paths_with_glob_characters_and_quotes(tmp_path: Path, name: str):
    # DuckDB reads glob characters in a path as a pattern; such paths list their files.
    wh = kidata.Warehouse(tmp_path / name)
    assert wh.load([str(SEEDS)]).runs_added == 26
    assert wh.load([str(SEEDS)]).duplicates == 26
    assert wh.sql("select count(*) from speedups").fetchall() == [(16,)]


def _views_on(con) -> set[str]:
    return {name for (name,) in con.execute(
        "select view_name from duckdb_views() where not internal").fetchall()}


def test_a_query_defines_the_views_it_reads_and_their_sources(tmp_path: Path):
    # Defining every view costs ~0.1 s of each `kidata sql` process; a query defines the
    # ones it names and what they read. Views are defined on demand, in order, on the same
    # connection, so later queries may name any view.
    wh = kidata.Warehouse(tmp_path / "wh")
    wh.load([str(SEEDS)])
    tables = set(schema.COLUMNS)
    assert wh.sql("select count(*) from speedup_summary").fetchall() == [(6,)]
    # speedup_summary reads kernel_speedups and student_t; speedups reads latest_latencies
    # (which reads only tables: each latest run's evidence is in latest_runs since 0.2.3),
    # the verdict rule and its settings, the run-to-run envelopes (noise_envelopes, from
    # rerun_changes over latencies, latency_statistics and run_statistics: every run) and the
    # runs' sample medians (sample_medians, from samples and runs).
    shared = {"latest_latencies", "verdict_rule", "verdict_settings", "kernel_speedups",
              "student_t", "noise_envelopes", "rerun_changes", "latencies",
              "latency_statistics", "run_statistics", "sample_medians"}
    assert _views_on(wh.session.cached) - tables == {"speedups", "speedup_summary"} | shared
    # regressions reads trends, which reads series_steps, which reads series_context (itself
    # reading run_statistics and the step_context table) and environment_facts (sql/*.sql
    # bodies), and acknowledgements (a table).
    assert wh.sql("select count(*) from REGRESSIONS").fetchall()[0][0] >= 0
    assert _views_on(wh.session.cached) - tables == {"speedups", "speedup_summary", "regressions",
                                                     "trends", "series_steps", "series_context",
                                                     "environment_facts"} | shared
    every = set(views.load_views())
    assert _views_on(wh.connect()) - tables == every


@pytest.mark.parametrize("query", [
    "select table_name from information_schema.tables",
    "select view_name from duckdb_views() where not internal",
    "show tables",
])
def test_a_query_of_the_catalog_sees_every_view(tmp_path: Path, query: str):
    wh = kidata.Warehouse(tmp_path / "wh")
    wh.load([str(SEEDS)])
    names = {row[0] for row in wh.sql(query).fetchall()}
    assert set(views.load_views()) <= names


def test_views_named_only_in_a_string_are_defined_too():
    # A superset is harmless; a view left out would fail the query.
    assert views.needed("select 'speedups' as s") == [
        "latest_latencies", "run_statistics", "latency_statistics", "latencies", "rerun_changes",
        "noise_envelopes", "sample_medians", "student_t", "verdict_rule", "verdict_settings",
        "speedups"]
    assert views.needed("select 1") == []
    assert views.needed("select * from query_table('trends')") is None


def test_the_documented_module_paths_still_work():
    """The README documents ``kidata.analysis.audit/regressions/compare`` and
    ``kidata.spark.register``; since the move into kidata/query/ they are re-exports of the same
    objects (not copies), and ``kidata.Warehouse`` is the store's facade."""
    import kidata.analysis
    import kidata.query.analysis
    import kidata.query.spark
    import kidata.spark
    import kidata.warehouse

    for name in ("audit", "regressions", "compare", "Audit", "Comparison", "DEFAULT_THRESHOLD"):
        assert getattr(kidata.analysis, name) is getattr(kidata.query.analysis, name), name
    for name in ("register", "SparkViewError"):
        assert getattr(kidata.spark, name) is getattr(kidata.query.spark, name), name
    assert kidata.Warehouse is kidata.warehouse.Warehouse


# -- What the CLI offers, offered to library users (issue 29, item 4) ------------------------


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> kidata.Warehouse:
    wh = kidata.Warehouse(tmp_path_factory.mktemp("library") / "wh")
    assert wh.load([str(SEEDS)]).runs_added == 26
    return wh


def test_export_a_view_and_the_runs_as_bundles(seeded: kidata.Warehouse, tmp_path: Path):
    written = seeded.export("speedup_summary", tmp_path / "s.csv")
    assert (written.format, written.rows) == ("csv", 6)
    lines = (tmp_path / "s.csv").read_text("utf-8").splitlines()
    assert lines[0].startswith("candidate,candidate_variant,baseline,")
    assert len(lines) == 7
    # Parquet carries each column's description (the view's header comment).
    import pyarrow.parquet as pq

    assert seeded.export("speedup_summary", tmp_path / "s.parquet").format == "parquet"
    field = pq.read_schema(tmp_path / "s.parquet").field("geomean_speedup")
    assert field.metadata and b"description" in field.metadata
    # kernelindex: the runs as bundles, loadable again into a new warehouse as the same runs.
    bundles = seeded.export("runs", tmp_path / "b.jsonl", "kernelindex")
    assert (bundles.format, bundles.rows) == ("kernelindex", 26)
    again = kidata.Warehouse(tmp_path / "again").load([str(tmp_path / "b.jsonl")])
    assert (again.runs_added, again.rejected) == (26, 0)
    with pytest.raises(kidata.UsageError, match="the kernelindex format exports runs"):
        seeded.export("speedups", tmp_path / "x.jsonl", "kernelindex")
    assert not (tmp_path / "x.jsonl").exists()


def test_export_a_query(seeded: kidata.Warehouse, tmp_path: Path):
    written = seeded.export_query("select gpu, count(*) as n from runs group by gpu "
                                  "order by gpu", tmp_path / "q.ndjson")
    assert (written.format, written.rows) == ("ndjson", 2)
    rows = (tmp_path / "q.ndjson").read_text().splitlines()
    assert rows[0].startswith('{"gpu":"a100') and len(rows) == 2
    # The format is checked before the query runs: a bad suffix, not the missing table.
    with pytest.raises(kidata.UsageError, match="cannot tell the format of 'q.txt'"):
        seeded.export_query("select * from nope", tmp_path / "q.txt")
    # Read-only by default, as `kidata sql` is.
    with pytest.raises(kidata.KidataError):
        seeded.export_query("copy runs to 'x.csv'", tmp_path / "c.csv")


def test_export_duckdb(seeded: kidata.Warehouse, tmp_path: Path):
    import duckdb

    counts = seeded.export_duckdb(tmp_path / "k.duckdb")
    assert counts["runs"] == 26 and counts["published"] == 8
    con = duckdb.connect(str(tmp_path / "k.duckdb"), read_only=True)
    try:
        assert con.sql("select count(*) from speedup_summary").fetchall() == [(6,)]
    finally:
        con.close()
    with pytest.raises(kidata.UsageError, match="exists; choose a new file"):
        seeded.export_duckdb(tmp_path / "k.duckdb")


def test_views_script(seeded: kidata.Warehouse, tmp_path: Path):
    script = seeded.views_script()
    folder = seeded.path.resolve()
    assert script.startswith(f"-- kidata views over the warehouse at {folder}\n")
    assert f"CREATE OR REPLACE VIEW runs AS SELECT * FROM read_parquet('{folder}/runs/" in script
    for view in kidata.library.views():
        assert f"VIEW {view} AS" in script, view
    with pytest.raises(kidata.errors.NotAWarehouse):
        kidata.Warehouse(tmp_path / "nope").views_script()


def test_audit_regressions_and_compare(seeded: kidata.Warehouse):
    from kidata.analysis import AUDIT_COLUMNS, REGRESSION_COLUMNS

    audit = seeded.audit()
    # 3 of trainkernel's 8 published ratios disagree (tests/query/test_views_audit.py).
    assert (audit.claims, audit.flagged, audit.unchecked) == (8, 3, 0)
    assert tuple(audit.rows.columns) == AUDIT_COLUMNS
    assert len(audit.rows.fetchall()) == 3
    assert len(seeded.audit(everything=True).rows.fetchall()) == 8
    regressions = seeded.regressions()
    assert tuple(regressions.columns) == REGRESSION_COLUMNS
    assert regressions.fetchall() == seeded.sql(
        f"select {', '.join(REGRESSION_COLUMNS)} from regressions").fetchall() == []
    # trainkernel's tables publish no spread: every shared key is without a verdict.
    result = seeded.compare("inductor", "trainkernel")
    assert (result.shared, result.slower, result.faster, result.no_verdict) == (8, 0, 0, 8)
    # One kernel-pass (train_step step) over both GPUs: the geometric mean of the 8 latency
    # ratios of the seeds' held-out table (trainkernel / inductor, µs), and its inverse.
    ratios = [255.32 / 42.19, 191.09 / 30.58, 20.32 / 24.24, 13.41 / 21.76, 66.04 / 22.92,
              53.86 / 18.84, 15.28 / 22.85, 12.8 / 15.58]
    geomean = math.exp(sum(map(math.log, ratios)) / 8)
    assert result.geomean_ratio == pytest.approx(geomean) == pytest.approx(1.751, rel=1e-3)
    assert result.geomean_speedup == pytest.approx(1 / geomean)
    assert len(result.rows.fetchall()) == 8 and not result.regressed
    changed = seeded.compare("inductor", "trainkernel", only_changed=True)
    assert changed.rows.fetchall() == [] and changed.shared == 8
    with pytest.raises(kidata.UsageError, match="unknown field 'colour'"):
        seeded.compare("colour=red", "trainkernel")


@pytest.mark.slow
def test_report(seeded: kidata.Warehouse, tmp_path: Path):
    result = seeded.report(tmp_path / "r.html", kernels=["train_step"])
    assert result.charts == ["speedup-trainkernel-vs-inductor-step",
                             "forest-trainkernel-vs-inductor-step", "latency-train_step"]
    page = (tmp_path / "r.html").read_text("utf-8")
    assert "3 of 8 published numbers disagree" in page and "kernels: train_step" in page


def test_what_needs_no_warehouse(seeded: kidata.Warehouse, tmp_path: Path):
    lines = kidata.library.formats()
    assert lines[0].startswith("kernelindex: ") and "--set keys (context a file lacks):" in lines
    found = kidata.library.views()
    assert set(found) == set(views.load_views())
    assert found["speedups"] == views.load_views()["speedups"].purpose
    assert kidata.library.read_options(["gpu=h100-sxm5-80gb", "unit=us"], None) == (
        {"gpu": "h100-sxm5-80gb", "unit": "us"}, None)
    # A family is not a card: the error names its cards.
    with pytest.raises(kidata.UsageError, match="unknown GPU 'h100'; it is a family of 3 cards: "
                       "name one of 'h100-sxm5-80gb', 'h100-pcie-80gb', 'h100-nvl'"):
        kidata.library.read_options(["gpu=h100"], None)
    with pytest.raises(kidata.UsageError):
        kidata.library.read_options(["gpu"], None)
    report = kidata.library.convert([str(SEEDS)], tmp_path / "bundles")
    assert (report.records, report.written, report.rejected) == (26, 26, 0)
    assert len(list((tmp_path / "bundles").iterdir())) == 26
    assert kidata.library.check_summary(seeded.check()).endswith(f"in {seeded.path}: ok")


@pytest.mark.parametrize("bad", [{"mapping": "bad.toml"}, {"format": "no-such-format"}],
                         ids=["mapping", "format"])
def test_a_load_that_cannot_read_any_file_creates_no_warehouse(tmp_path, bad):
    """A bad mapping or an unknown format is refused before anything is written: the folder
    stays absent, so it never becomes an empty warehouse that later commands take for one."""
    from kidata.errors import UsageError

    (tmp_path / "bad.toml").write_text("nonsense = [\n", "utf-8")
    if "mapping" in bad:
        bad = {"mapping": str(tmp_path / "bad.toml")}
    target = tmp_path / "new"
    with pytest.raises(UsageError):
        kidata.Warehouse(target).load([str(SEEDS)], **bad)
    assert not target.exists()


def test_rows_answers_as_sql_does_without_binding_a_relation(seeded: kidata.Warehouse,
                                                              monkeypatch, tmp_path: Path):
    """``Warehouse.rows``: the rows ``sql`` gives, its errors and its read-only rule, with the
    statement bound once (a relation is bound when made and again when it runs)."""
    assert seeded.rows("select count(*) from runs") == [(26,)]  # the seeds' 26 runs
    query = "select kernel, gpu, candidate, baseline, speedup from speedups order by all"
    assert seeded.rows(query) == seeded.sql(query).fetchall() != []
    h100 = {"gpu": "h100-sxm5-80gb"}
    assert (seeded.rows("select count(*) from runs where gpu = $gpu", h100)
            == seeded.sql("select count(*) from runs where gpu = $gpu", h100).fetchall())
    with pytest.raises(kidata.QueryError, match='Did you mean "speedups"'):
        seeded.rows("select * from speedupz")
    with pytest.raises(kidata.errors.UsageError, match="refused the COPY statement"):
        seeded.rows(f"copy runs to '{tmp_path / 'x.csv'}'", read_only=True)
    assert not (tmp_path / "x.csv").exists()

    from duckdb import _seam  # DuckDB's Python layer: every relation made is bound here

    bound: list[str] = []
    bind = _seam.bind
    monkeypatch.setattr(_seam, "bind", lambda con, sql, *a, **k: (
        bound.append(str(getattr(sql, "query", sql))), bind(con, sql, *a, **k))[1])
    seeded.sql(query).fetchall()
    assert any("speedups" in text for text in bound)  # the relation, bound
    bound.clear()
    assert seeded.rows(query) != []
    assert not any("speedups" in text for text in bound)
