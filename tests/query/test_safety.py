"""`kidata sql` is read-only unless asked; text from input never becomes SQL or a path."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kidata import Warehouse
from kidata.store.schema import TABLES

SEEDS = Path(__file__).parents[1] / "data" / "seeds"
BAD = Path(__file__).parents[1] / "data" / "bad"
REFUSED = ("Error: kidata sql opens the warehouse read-only and runs only queries (SELECT, "
           "WITH, FROM, VALUES, DESCRIBE, SHOW, SUMMARIZE, PIVOT, UNPIVOT, EXPLAIN); refused "
           "the {} statement. Use --write to allow it\n")


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> Path:
    """One warehouse with the seeds for every test here (none of them may change it)."""
    path = tmp_path_factory.mktemp("safety") / "wh"
    assert Warehouse(path).load([str(SEEDS)]).committed
    return path


@pytest.fixture
def loaded(cli, shared: Path, monkeypatch):
    monkeypatch.setenv("KIDATA_WAREHOUSE", str(shared))
    return cli


@pytest.mark.parametrize("statement, first", [
    ("copy runs to '{wh}/runs/evil.parquet'", "COPY"),
    ("select 1; copy runs to '{wh}/runs/evil.parquet'", "COPY"),
    ("explain analyze copy runs to '{wh}/runs/evil.parquet'", "COPY"),
    ("attach '{wh}/runs/evil.parquet' as x", "ATTACH"),
    ("install httpfs", "INSTALL"),
    ("set temp_directory = '{wh}/runs'", "SET"),
    ("create table t as select 1", "CREATE"),
    # PIVOT over values from the data is a MULTI statement in DuckDB: judged by what it
    # wraps, so a write around it is still refused.
    ("copy (pivot runs on gpu using count(*)) to '{wh}/runs/evil.parquet'", "COPY"),
    ("create table t as pivot runs on gpu using count(*)", "CREATE"),
    ("export database '{wh}/runs'", "EXPORT"),
    # DuckDB nests block comments; 0.2.7 stripped them as if they did not, read the SELECT
    # inside the comment as the first word, and ran the COPY (issue 27, item 1).
    ("/* /* */ SELECT */ COPY (PIVOT (select 'a' k, 1 v) ON k USING sum(v)) "
     "TO '{wh}/runs/evil.parquet'", "COPY"),
    ("/* /* /* */ */ select */ copy (pivot runs on gpu using count(*)) "
     "to '{wh}/runs/evil.parquet'", "COPY"),
    ("select 1; -- select\n/* pivot */ copy (pivot runs on gpu using count(*)) "
     "to '{wh}/runs/evil.parquet'", "COPY"),
    ("/* /* */ explain */ copy (select 1) to '{wh}/runs/evil.parquet'", "COPY"),
    ("explain /* select */ analyze copy runs to '{wh}/runs/evil.parquet'", "COPY"),
])
def test_statements_that_can_write_are_refused(statement, first, loaded, shared: Path):
    result = loaded("sql", statement.format(wh=shared))
    assert result.code == 2
    assert result.err == REFUSED.format(first)
    assert not (shared / "runs" / "evil.parquet").exists()
    # Nothing but the warehouse's own folders (a refused ATTACH would have created a file).
    assert sorted(p.name for p in shared.iterdir()) == sorted(["_kidata", *TABLES])


@pytest.mark.parametrize("query", [
    "select count(*) as n from runs",
    "with x as (select * from runs) select count(*) as n from x",
    "from runs select count(*) as n",
    "explain select count(*) from runs",
    "describe runs",
    "show tables",
    "summarize runs",
    "/* /* nested */ copy */ select count(*) as n from runs",
    "explain (format json) select count(*) from runs",
    "pivot runs on gpu using count(*)",
    "/* copy /* */ */ pivot runs on gpu using count(*)",
])
def test_queries_run(query, loaded):
    result = loaded("sql", query, "--format", "csv")
    assert result.code == 0, result.err
    if query.endswith(" n from runs") or query.endswith("from x"):
        assert result.out == "n\n26\n"


def test_write_opt_in_allows_copy(loaded, tmp_path: Path):
    target = tmp_path / "out.csv"
    result = loaded("sql", "--write", f"copy (select run_id from runs) to '{target}'")
    assert result.code == 0, result.err
    assert len(target.read_text().splitlines()) == 27  # a header and 26 runs


def test_library_sql_can_be_asked_to_be_read_only(wh: Warehouse):
    from kidata.errors import UsageError

    wh.load([str(SEEDS)])
    with pytest.raises(UsageError):
        wh.sql("copy runs to 'x.csv'", read_only=True)
    assert wh.sql("select count(*) from runs", read_only=True).fetchall() == [(26,)]


def test_names_from_input_are_values_not_sql_or_paths(tmp_path: Path, cli):
    """A warehouse path and input file names full of SQL and path syntax load and are
    reported as given."""
    folder = tmp_path / "it's $1; drop table runs; --"
    folder.mkdir()
    source = folder / "o'neil \"x\" ; select 1.jsonl"
    shutil.copy(BAD / "truncated_line.jsonl", source)
    wh_path = tmp_path / "wh 'quoted' $x"
    result = cli("-w", wh_path, "load", source)
    assert result.code == 1
    assert f"rejected: {source}, line 2: invalid JSON" in result.err
    wh = Warehouse(wh_path)
    assert wh.sql("select count(*) from runs").fetchall() == [(2,)]
    listed = cli("-w", wh_path, "rejects", "--file", str(source), "--format", "ndjson")
    assert listed.code == 0 and str(source).replace('"', '\\"') in listed.out
    assert wh.check().problems == []
    # Only the load's own, generated names appear under the warehouse.
    names = {p.name for p in wh_path.rglob("*") if p.is_file()}
    assert not any("neil" in n or "drop" in n for n in names)


def test_a_warehouse_that_cannot_be_written_is_an_error_not_a_traceback(tmp_path: Path, cli):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = cli("-w", blocker / "wh", "load", SEEDS)
    assert result.code == 1
    assert result.err.startswith(f"Error: cannot write to the warehouse {blocker / 'wh'}: ")


# Pieces a fuzzed statement is made of: comments that nest or look like keywords, and
# statements that read (R) or may write (W), PIVOT over data values (DuckDB's MULTI) included.
COMMENTS = ["", "/* */ ", "/* select */ ", "/* /* */ select */ ", "/* /* /* */ */ pivot */ ",
            "-- select\n", "/* explain */ ", "/**/"]
READS = ["select 1", "with x as (select 1) select * from x", "from runs select count(*)",
         "pivot runs on gpu using count(*)", "explain select 1", "values (1)",
         "select * from query('select 1')", "describe runs", "summarize runs",
         "unpivot (select 1 a, 2 b) on a, b into name k value v"]
WRITES = ["copy (select 1) to '{out}'", "copy (pivot runs on gpu using count(*)) to '{out}'",
          "explain analyze copy (select 1) to '{out}'", "create table t as select 1",
          "create table t as pivot runs on gpu using count(*)", "attach '{out}' as x",
          "set threads = 1", "export database '{out}'", "install httpfs",
          "insert into runs select * from runs", "call pragma_version()",
          "pragma threads = 1", "create macro m() as 1"]


def test_fuzzed_read_only_rule(tmp_path: Path, shared: Path):
    """Every statement that may write is refused and writes nothing, whatever comments, nesting
    or parentheses surround it, alone or after a query; every query runs."""
    import random

    from kidata.errors import UsageError

    wh = Warehouse(shared)
    rng = random.Random(27)
    out = tmp_path / "written"
    for _ in range(250):
        lead = rng.choice(COMMENTS) + rng.choice(COMMENTS)
        write = rng.choice(WRITES).format(out=out)
        parens = rng.choice([0, 0, 1]) if write.startswith(("copy", "create")) else 0
        statement = lead + "(" * parens + rng.choice(COMMENTS) + write + ")" * parens
        if rng.random() < 0.3:
            statement = rng.choice(READS) + "; " + statement
        try:
            wh.sql(statement, read_only=True).fetchall()
        except UsageError as exc:
            assert "refused the" in str(exc)
        except Exception as exc:  # a parse error is fine, anything that ran is not
            assert "refused" in str(exc) or "Parser Error" in str(exc), (statement, exc)
        else:
            raise AssertionError(f"ran: {statement!r}")
        assert not out.exists(), statement
    for _ in range(100):
        statement = rng.choice(COMMENTS) + rng.choice(COMMENTS) + rng.choice(READS)
        wh.sql(statement, read_only=True).fetchall()
