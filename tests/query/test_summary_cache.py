"""A connection keeps speedup_summary's rows as a table from its second query that reads it
(kidata.query.views.MATERIALIZED), after latest_latencies': the answer is the view's, filters
still apply, a one-query process makes no table, and a load's commit starts afresh.

tests/data/views/speedups.jsonl (see test_views_speedups.py), rms_norm forward on the A100:
liger vs torch speedups 20/10 = 2 (w1), 12/10 = 1.2 (w2), 15/10 = 1.5 (w3), 10/10 = 1 (w5);
torch is rms_norm's reference implementation.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SEEDS, same_rows

from kidata import Warehouse
from kidata.query import views

VIEWS = Path(__file__).parents[1] / "data" / "views"
SUMMARY = views.cached_name("speedup_summary")
LATEST = views.cached_name("latest_latencies")
EVERY_ROW = "SELECT * FROM speedup_summary ORDER BY ALL"
LIGER = ("SELECT workloads, geomean_speedup, wins, losses, faster, within_noise, no_verdict "
         "FROM speedup_summary WHERE candidate = 'liger' AND baseline = $b")


def tables(wh: Warehouse) -> set[str]:
    """The kidata cache tables on the Warehouse's connection."""
    return {name for (name,) in wh.connect().sql(
        "SELECT table_name FROM duckdb_tables() WHERE table_name LIKE '_kidata_cached_%'"
    ).fetchall()}


def test_second_query_keeps_the_summary_and_answers_the_same_rows(tmp_path):
    path = tmp_path / "wh"
    assert Warehouse(path).load([str(SEEDS), str(VIEWS / "speedups.jsonl")]).ok
    wh = Warehouse(path)
    first = wh.sql(EVERY_ROW).fetchall()
    assert first and tables(wh) == set()  # one query: no table
    # A query of speedups alone keeps latest_latencies (its second read), not the summary.
    assert wh.sql("SELECT count(*) FROM speedups").fetchall()
    assert tables(wh) == {LATEST}
    second = wh.sql(EVERY_ROW).fetchall()
    assert tables(wh) == {LATEST, SUMMARY}
    assert same_rows(second, first)
    assert same_rows(wh.sql(EVERY_ROW).fetchall(), first)  # read from the table
    # Filters apply to the table as to the view. liger vs torch: geomean (2 x 1.2 x 1.5 x 1)
    # ^ (1/4) = 3.6 ^ 0.25 = 1.377448..; wins 3 (w5's 1 is no win), losses 0; faster w1,
    # within noise w2 and w5, no verdict ('no spread') w3.
    want = (4, pytest.approx(1.377448, rel=1e-6), 3, 0, 1, 2, 1)
    assert wh.sql(LIGER, params={"b": "torch"}).fetchall() == [want]
    # torch is the reference, so the role row is the same comparison.
    assert wh.sql(LIGER, params={"b": "role:reference"}).fetchall() == [want]


def test_a_commit_starts_a_new_snapshot_without_the_table(tmp_path):
    path = tmp_path / "wh"
    assert Warehouse(path).load([str(SEEDS)]).ok
    wh = Warehouse(path)
    before = wh.sql(EVERY_ROW).fetchall()
    assert same_rows(wh.sql(EVERY_ROW).fetchall(), before) and SUMMARY in tables(wh)
    assert wh.sql(LIGER, params={"b": "torch"}).fetchall() == []  # the seeds hold no liger
    # Another process (here another Warehouse) commits a load: the next query sees it.
    assert Warehouse(path).load([str(VIEWS / "speedups.jsonl")]).ok
    after = wh.sql(LIGER, params={"b": "torch"}).fetchall()
    assert tables(wh) == set()  # a new connection for the new snapshot
    assert after == [(4, pytest.approx(1.377448, rel=1e-6), 3, 0, 1, 2, 1)]
    assert len(wh.sql(EVERY_ROW).fetchall()) > len(before)  # its second read: a new table
    assert SUMMARY in tables(wh)
    assert same_rows(wh.sql(EVERY_ROW).fetchall(), Warehouse(path).sql(EVERY_ROW).fetchall())


def test_the_second_query_of_the_series_keeps_trends(tmp_path):
    """trends (read by regressions, shifts and the report's history) is kept from its second
    read on, as the summary is: the first query makes no table, the second one does, and
    regressions, shifts and trends answer the same rows from it as from the view."""
    from make_view_fixtures import jsd_sessions

    wh = jsd_sessions(tmp_path, [(100, 1.01, 1.12), (200, 1.01, 1.12), (300, 1.11, 1.12),
                                 (400, 1.01, 1.40)])
    fresh = Warehouse(wh.path)
    want = {q: fresh.sql(q).fetchall() for q in (
        "SELECT * FROM regressions ORDER BY ALL", "SELECT * FROM shifts ORDER BY ALL",
        "SELECT * FROM trends ORDER BY ALL")}
    # As in test_views_verdicts: torch w4 the code's regression; w1-w3 shifts of both.
    assert len(want["SELECT * FROM regressions ORDER BY ALL"]) == 1
    assert len(want["SELECT * FROM shifts ORDER BY ALL"]) == 4
    reader = Warehouse(wh.path)
    assert same_rows(reader.sql("SELECT * FROM regressions ORDER BY ALL").fetchall(),
                     want["SELECT * FROM regressions ORDER BY ALL"])
    assert views.cached_name("trends") not in tables(reader)  # one read: no table
    for query, rows in want.items():
        assert same_rows(reader.sql(query).fetchall(), rows), query
        assert views.cached_name("trends") in tables(reader)
