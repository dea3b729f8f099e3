"""A connection keeps latest_latencies as a table from its second query that reads it
(kidata.query.views.materialize): answers never change, a one-query process never pays for
the table, and a load's commit (a new snapshot, a new connection) starts afresh."""

from __future__ import annotations

import math
from pathlib import Path

from conftest import SEEDS

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


def same(a: list[tuple], b: list[tuple]) -> bool:
    """Equal row for row; floats to 12 significant digits. The geometric means of
    speedup_summary are sums of logarithms, and a table read in another order than the view
    may sum them in another order: the last bit may differ, never the answer."""
    def close(x, y) -> bool:
        if isinstance(x, float) and isinstance(y, float):
            return math.isclose(x, y, rel_tol=1e-12)
        return x == y
    return len(a) == len(b) and all(
        len(r) == len(s) and all(map(close, r, s)) for r, s in zip(a, b, strict=True))


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
        assert same(wh.sql(query).fetchall(), fresh(path, query)), query


def test_a_commit_starts_a_new_snapshot_without_the_table(tmp_path):
    path = tmp_path / "wh"
    assert Warehouse(path).load([str(SEEDS)]).ok
    wh = Warehouse(path)
    before = wh.sql(QUERIES[0]).fetchall()
    assert wh.sql(QUERIES[0]).fetchall() == before and cached(wh)
    # Another process (here another Warehouse) commits a load: the next query sees it.
    assert Warehouse(path).load([str(VIEWS / "speedups.jsonl")]).ok
    after = wh.sql(QUERIES[0]).fetchall()
    assert not cached(wh)  # a new connection for the new snapshot
    assert same(after, fresh(path, QUERIES[0]))
    assert len(after) > len(before)  # the load's latest runs are there
