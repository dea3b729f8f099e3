"""A connection keeps latest_latencies as a table from its second query that reads it
(kidata.query.views.materialize): answers never change, a one-query process never pays for
the table, and a load's commit (a new snapshot, a new connection) starts afresh."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SEEDS, same_rows

from kidata import Warehouse
from kidata.query import views

VIEWS = Path(__file__).parents[1] / "data" / "views"
CACHED = views.cached_name("latest_latencies")
QUERIES = ("SELECT * FROM latest_latencies ORDER BY ALL",
           "SELECT * FROM speedups ORDER BY ALL",
           "SELECT * FROM speedup_summary ORDER BY ALL",
           "SELECT * FROM calibration ORDER BY ALL",
           "SELECT * FROM remeasured ORDER BY ALL")


def cached(wh: Warehouse) -> bool:
    return wh.connect().sql("SELECT count(*) FROM duckdb_tables() WHERE table_name = $n",
                            params={"n": CACHED}).fetchall() == [(1,)]


def fresh(path: Path, query: str) -> list[tuple]:
    """The answer of a Warehouse whose connection answers its first query: plain views."""
    wh = Warehouse(path)
    answer = wh.sql(query).fetchall()
    assert not cached(wh)
    return answer


def test_second_query_reads_the_table_and_answers_the_same(tmp_path):
    path = tmp_path / "wh"
    assert Warehouse(path).load([str(SEEDS), str(VIEWS / "speedups.jsonl")]).ok
    wh = Warehouse(path)
    first = wh.sql(QUERIES[1]).fetchall()
    assert first and not cached(wh)  # one query: no table
    assert wh.sql("SELECT count(*) FROM runs").fetchall()  # reads no view: counts nothing
    assert not cached(wh)
    assert wh.sql(QUERIES[1]).fetchall() == first
    assert cached(wh)
    for query in QUERIES:
        assert same_rows(wh.sql(query).fetchall(), fresh(path, query)), query


def test_a_commit_starts_a_new_snapshot_without_the_table(tmp_path):
    path = tmp_path / "wh"
    assert Warehouse(path).load([str(SEEDS)]).ok
    wh = Warehouse(path)
    before = wh.sql(QUERIES[0]).fetchall()
    assert same_rows(wh.sql(QUERIES[0]).fetchall(), before) and cached(wh)
    # Another process (here another Warehouse) commits a load: the next query sees it.
    assert Warehouse(path).load([str(VIEWS / "speedups.jsonl")]).ok
    after = wh.sql(QUERIES[0]).fetchall()
    assert not cached(wh)  # a new connection for the new snapshot
    assert same_rows(after, fresh(path, QUERIES[0]))
    assert len(after) > len(before)  # the load's latest runs are there


def test_a_kept_view_is_computed_once_and_answers_the_same(tmp_path):
    """Warehouse.keep('trends') (the report and `kidata regressions` ask trends several
    questions): trends and the views reading it (regressions, shifts) answer from one table
    of its rows, exactly as the views do; a commit starts a snapshot without it."""
    path = tmp_path / "wh"
    assert Warehouse(path).load([str(VIEWS / "verdicts.jsonl")]).ok
    questions = ("SELECT * FROM trends ORDER BY ALL", "SELECT * FROM regressions ORDER BY ALL",
                 "SELECT * FROM shifts ORDER BY ALL")
    wh = Warehouse(path)
    table = views.cached_name("trends")

    def kept() -> bool:
        return wh.connect().sql("SELECT count(*) FROM duckdb_tables() WHERE table_name = $n",
                                params={"n": table}).fetchall() == [(1,)]

    wh.keep("trends")
    assert kept()
    # The view now reads the table: the answer of every question is the views' own.
    assert table in wh.connect().sql("SELECT sql FROM duckdb_views() WHERE view_name = 'trends'"
                                     ).fetchall()[0][0]
    for query in questions:
        assert same_rows(wh.sql(query).fetchall(), fresh(path, query)), query
    assert wh.sql("SELECT count(*) FROM trends WHERE step > 1").fetchall()[0][0] > 0
    assert Warehouse(path).load([str(SEEDS)]).ok
    assert wh.sql("SELECT count(*) FROM runs").fetchall() and not kept()


def test_a_closed_session_opens_a_new_connection_on_its_next_query(tmp_path):
    # Session.close gives the connection (and DuckDB's memory) back: the next query opens a
    # new one, without what the old one held (a kept table, a temporary table), with the
    # same answers.
    path = tmp_path / "wh"
    assert Warehouse(path).load([str(SEEDS)]).ok
    wh = Warehouse(path)
    before = wh.sql(QUERIES[0]).fetchall()
    assert same_rows(wh.sql(QUERIES[0]).fetchall(), before) and cached(wh)
    wh.sql("CREATE TEMP TABLE mine AS SELECT 1 AS x")
    old = wh.session.cached
    wh.session.close()
    assert wh.session.cached is None
    assert same_rows(wh.sql(QUERIES[0]).fetchall(), before)
    assert wh.session.cached is not old and not cached(wh)
    from kidata.errors import QueryError

    with pytest.raises(QueryError, match="mine"):
        wh.sql("SELECT x FROM mine")
