#!/usr/bin/env python3
"""Time of ``kidata.spark.register`` (and of one warm query after it) on a warehouse, in a local
Spark session with Spark's defaults, as a user's first session would run it.

    python benchmarks/spark_register.py WAREHOUSE [--master 'local[2]'] [--repeat 3]
        [--query 'SELECT * FROM speedup_summary'] [--views speedups] [--conf KEY=VALUE ...]
        [--per-view 10] [--compare]

One JVM serves every round (its start is not timed). Each round registers the warehouse in a
new Spark session (``spark.newSession()``: its own temp views, the JVM's JIT warm from the
rounds before), then, with ``--query``, runs the query twice and collects its rows. Prints
one line per round: seconds of ``register`` (and of the query's first and second run, and
the rows it gave); with ``--per-view N``, after the last round, the N slowest ``spark.sql``
calls ``register`` made in it, named by view (where Spark analyzes each view: Run BG); with
``--compare``, then each registered view's rows against DuckDB's over the same warehouse, row
for row (what tests/query/test_spark.py checks on the seeds, at the warehouse's size: Run BI).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

# Views of more rows than this are compared a part at a time (--compare).
WHOLE_ROWS = 200_000


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("warehouse")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--query", default=None, help="e.g. 'SELECT * FROM speedup_summary'")
    ap.add_argument("--views", default=None,
                    help="comma-separated views to register (and those they read); default all")
    ap.add_argument("--per-view", type=int, default=0, metavar="N",
                    help="after the last round, its N slowest spark.sql calls, by view")
    ap.add_argument("--compare", action="store_true",
                    help="after the last round, each registered view's rows against DuckDB's "
                         "over the same warehouse (tests/spark_compare.py's row-for-row rule)")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting on top of the defaults (repeatable), e.g. "
                         "spark.driver.memory=4g")
    args = ap.parse_args(argv)

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import kidata.spark

    builder = (SparkSession.builder.master(args.master).appName("kidata-register-bench")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC"))
    for setting in args.conf:
        key, _, value = setting.partition("=")
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        calls: list[tuple[float, str]] = []
        for round_ in range(1, args.repeat + 1):
            session = spark.newSession()
            calls = []
            if args.per_view:
                _time_sql(session, calls)
            start = time.perf_counter()
            registered = kidata.spark.register(
                session, args.warehouse,
                views=None if args.views is None else [v for v in args.views.split(",") if v])
            # register's time is printed at once: the query's first run may take minutes.
            print(f"round {round_}: register {time.perf_counter() - start:.2f} s", end="",
                  flush=True)
            if args.query:
                times = []
                for _ in range(2):
                    start = time.perf_counter()
                    rows = session.sql(args.query).collect()
                    times.append(time.perf_counter() - start)
                print(f", query {times[0]:.2f} s then {times[1]:.2f} s, {len(rows)} rows",
                      end="")
            print(flush=True)
        for seconds, name in sorted(calls, reverse=True)[:args.per_view]:
            print(f"  {seconds:6.3f} s  {name}")
        if args.compare:
            return _compare(session, args.warehouse, registered)
    finally:
        spark.stop()
    return 0


def _compare(session, warehouse: str, registered: list[str]) -> int:
    """Each view of ``registered`` in Spark against DuckDB's rows of it (any order, floats
    within 1e-9): one line per view; 1 if any differs. A view of more than
    :data:`WHOLE_ROWS` rows is compared one GPU (else one kernel) at a time, so that the two
    sides' rows held in Python stay a few GB at 1M runs."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from spark_compare import assert_same_rows

    from kidata import Warehouse
    from kidata.core.viewfiles import load_views

    wh = Warehouse(warehouse)
    differ = 0
    for name in [n for n in registered if n in load_views()]:
        start = time.perf_counter()
        part = next((c for c in ("gpu", "kernel") if c in wh.relation(name).columns), None)
        rows = wh.sql(f"SELECT count(*) FROM {name}").fetchall()[0][0]
        wheres: list[str | None] = [None]  # the whole view
        if part is not None and rows > WHOLE_ROWS:
            wheres = [f"{part} IS NULL" if value is None
                      else f"{part} = '{value.replace(chr(39), chr(39) * 2)}'"
                      for (value,) in wh.sql(f"SELECT DISTINCT {part} FROM {name}").fetchall()]
        try:
            compared = sum(assert_same_rows(session, wh, name, where) for where in wheres)
        except AssertionError as exc:
            differ += 1
            print(f"  {name}: DIFFERS ({time.perf_counter() - start:.1f} s): "
                  f"{str(exc).splitlines()[0][:300]}", flush=True)
            continue
        by = "" if wheres == [None] else f", by {part} ({len(wheres)} parts)"
        print(f"  {name}: {compared} rows, the same as DuckDB's{by} "
              f"({time.perf_counter() - start:.1f} s)", flush=True)
    return 1 if differ else 0


def _time_sql(session, calls: list[tuple[float, str]]) -> None:
    """Time each ``session.sql`` call into ``calls`` as (seconds, the view whose body it
    ran, or the statement's start)."""
    from kidata.core.viewfiles import load_views, stored_views

    names = {v.body.strip(): f"{v.name}{' (stored)' if stored else ''}"
             for stored, views in ((False, load_views()), (True, stored_views()))
             for v in views.values()}
    sql = session.sql

    def timed(query, *args, **kwargs):
        start = time.perf_counter()
        try:
            return sql(query, *args, **kwargs)
        finally:
            calls.append((time.perf_counter() - start,
                          names.get(query.strip(), " ".join(query.split())[:60])))

    session.sql = timed


if __name__ == "__main__":
    sys.exit(main())
