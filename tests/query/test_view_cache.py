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


@pytest.mark.parametrize("pooled", [False, True], ids=["one statement", "pooled"])
def test_a_large_warehouses_envelopes_are_worked_out_once_per_snapshot(tmp_path, monkeypatch,
                                                                       pooled):
    """Past contexts.CHUNK_RUNS runs a session works noise_envelopes out once per snapshot, in
    a file every later connection of the session reads (the report opens one per query), in
    one statement or, past kept.POOL_ROWS runs, a few pools at a time; the answers are the
    view's own, and a commit's new snapshot works them out again."""
    from kidata.core import engine
    from kidata.query import kept
    from kidata.store import contexts

    if pooled:
        monkeypatch.setattr(kept, "POOL_ROWS", 3)

    path = tmp_path / "wh"
    assert Warehouse(path).load([str(VIEWS / "verdicts.jsonl")]).ok
    questions = ("SELECT * FROM noise_envelopes ORDER BY ALL",
                 "SELECT * FROM regressions ORDER BY ALL", "SELECT * FROM speedups ORDER BY ALL")
    plain = {q: fresh(path, q) for q in questions}  # under CHUNK_RUNS: the view as written
    assert plain[questions[0]]  # the fixture's re-runs make an envelope

    def source(wh: Warehouse) -> str:
        return wh.connect().sql("SELECT sql FROM duckdb_views() "
                                "WHERE view_name = 'noise_envelopes'").fetchall()[0][0]

    assert "read_parquet" not in source(Warehouse(path))
    monkeypatch.setattr(contexts, "CHUNK_RUNS", 3)
    wh = Warehouse(path)
    for query in questions:
        assert same_rows(wh.sql(query).fetchall(), plain[query]), query
    first = source(wh)
    assert "read_parquet" in first  # the kept file, not the view's body
    assert ("rows-00000.parquet" in first) == pooled  # copy_pooled's batch files
    # Working them out handed DuckDB's memory back (engine.give_back) and left the session's
    # memory limit as it was opened with.
    limit = "SELECT current_setting('memory_limit')"
    assert wh.connect().sql(limit).fetchall() == \
        engine.connect(engine.reading_settings()).sql(limit).fetchall()
    wh.session.close()  # as the report does after each query: the next connection reads it
    assert same_rows(wh.sql(questions[1]).fetchall(), plain[questions[1]])
    assert source(wh) == first
    # A load commits a new snapshot: its re-runs count, in a file of their own.
    assert Warehouse(path).load([str(SEEDS)]).ok
    after = wh.sql(questions[0]).fetchall()
    assert source(wh) != first
    monkeypatch.setattr(contexts, "CHUNK_RUNS", 50_000)
    assert same_rows(after, fresh(path, questions[0]))


def test_pooled_rows_are_the_views_rows_whatever_the_batches(tmp_path):
    """kept.copy_pooled works noise_envelopes out a few pools at a time: the rows are the
    view's over every change, whether the pools share a batch, have one each, or one pool holds
    more than a batch may (it is a batch of its own); a pool keyed by a null is one pool, and
    no changes at all give no rows (a file with the view's columns)."""
    import duckdb

    from kidata.core.viewfiles import load_views
    from kidata.query import kept

    body = load_views()["noise_envelopes"].body
    con = duckdb.connect()
    con.execute("CREATE TABLE rerun_changes (source VARCHAR, gpu VARCHAR, size_decade BIGINT, "
                "log_change DOUBLE, run_id VARCHAR)")
    sizes = {("liger", "h100", 1): 40, ("liger", "h100", 2): 7, ("liger", "a100", 1): 3,
             ("tk", "h100", 0): 25, (None, "h100", 1): 12}
    rows = [(s, g, d, ((i * 37) % 101 - 50) / 1000, f"r{i}")
            for (s, g, d), n in sizes.items() for i in range(n)]
    con.executemany("INSERT INTO rerun_changes VALUES (?, ?, ?, ?, ?)", rows)
    whole = sorted(con.sql(body).fetchall(), key=repr)
    assert len(whole) == len(sizes)
    keys, values = ("source", "gpu", "size_decade"), ("log_change",)
    # In key order (nulls last): 3, 40, 7, 25, 12 changes. At most 35 a batch: 3 (40 would
    # overflow it); 40 alone (over it); 7 + 25; the null source's 12.
    for most, batches in ((10_000, 1), (35, 4), (1, 5)):
        folder = tmp_path / f"most-{most}"
        files = kept.copy_pooled(con, body, "rerun_changes", keys, values, most)(folder)
        assert len(files) == batches and not (folder / "_source.parquet").exists()
        got = con.sql(f"SELECT * FROM read_parquet({[str(f) for f in files]})").fetchall()
        assert sorted(got, key=repr) == whole, most
    # The session's own rerun_changes is untouched, and nothing of the batches is left.
    assert con.sql("SELECT count(*) FROM rerun_changes").fetchall() == [(len(rows),)]
    assert con.sql("SELECT count(*) FROM duckdb_schemas() WHERE schema_name LIKE '_kidata%'"
                   ).fetchall() == [(0,)]
    con.execute("DELETE FROM rerun_changes")
    files = kept.copy_pooled(con, body, "rerun_changes", keys, values)(tmp_path / "none")
    read = con.sql(f"SELECT * FROM read_parquet({[str(f) for f in files]})")
    assert read.fetchall() == [] and read.columns == con.sql(body).columns


def test_latest_latencies_past_a_number_of_heads_are_worked_out_once_per_snapshot(
        tmp_path, monkeypatch):
    """Past session.KEPT_PAST's number of latest_runs rows (a key has a head per load that
    measured it) a session opened ``across`` latest_latencies (the report's) works it out once
    per snapshot, in a file every later connection of the session reads (the report opens one
    per query) instead of ranking every head in each query; the answers are the view's own, in
    a window too, and a commit's new snapshot works them out again. A session not asking, or
    under the number, reads the view."""
    from kidata.core.window import Window
    from kidata.query import session as session_mod

    path = tmp_path / "wh"
    lines = (VIEWS / "verdicts.jsonl").read_text().splitlines(keepends=True)
    for i, part in enumerate((lines[::2], lines[1::2])):  # the same keys in two loads
        (tmp_path / f"part{i}.jsonl").write_text("".join(part))
        assert Warehouse(path).load([str(tmp_path / f"part{i}.jsonl")]).ok
    heads, keys = Warehouse(path).sql("SELECT (SELECT count(*) FROM latest_runs), "
                                      "(SELECT count(*) FROM latest_latencies)").fetchall()[0]
    assert heads > keys > 0  # some keys have a head in each load
    middle = Warehouse(path).sql("SELECT min(observed_at) + (max(observed_at) - "
                                 "min(observed_at)) / 2 FROM runs").fetchall()[0][0]
    questions = ("SELECT * FROM latest_latencies ORDER BY ALL",
                 "SELECT * FROM speedups ORDER BY ALL",
                 "SELECT * FROM kernel_speedups ORDER BY ALL",
                 "SELECT * FROM remeasured ORDER BY ALL")
    plain = {q: fresh(path, q) for q in questions}
    windowed = {q: Warehouse(path, since=middle).sql(q).fetchall() for q in questions}
    assert plain[questions[1]] and windowed[questions[0]] != plain[questions[0]]

    def session(since=None, across=("latest_latencies",)) -> session_mod.Session:
        return session_mod.Session(path, Warehouse(path).require,
                                   Window.of(since, None) if since else None, across=across)

    def source(db) -> str:
        return db.sql("SELECT sql FROM duckdb_views() "
                      "WHERE view_name = 'latest_latencies'").fetchall()[0][0]

    assert "read_parquet" not in source(session())  # under the number
    monkeypatch.setattr(session_mod, "KEPT_PAST", {"latest_latencies": ("latest_runs", keys)})
    assert "read_parquet" not in source(session(across=()))  # not asked
    for since, answers in ((None, plain), (middle, windowed)):
        db = session(since)
        for i, query in enumerate(questions):
            assert same_rows(db.sql(query).fetchall(), answers[query]), (since, query)
            if i == 0:  # (from the second query on the connection reads a table of the rows)
                first = source(db)
                assert "read_parquet" in first  # the kept file, not the view's body
        db.close()  # as the report does after each query: the next connection reads it
        assert same_rows(db.sql(questions[2]).fetchall(), answers[questions[2]])
        assert source(db) == first
    # A load commits a new snapshot: its runs count, in a file of their own.
    assert Warehouse(path).load([str(VIEWS / "speedups.jsonl")]).ok
    after = db.sql(questions[1]).fetchall()
    assert source(db) != first
    assert same_rows(after, Warehouse(path, since=middle).sql(questions[1]).fetchall())
