#!/usr/bin/env python3
"""What a compaction's sort buys a filtered query: a table's small files merged in file order
(kidata before 0.3.4) beside the same files merged sorted by GPU, kernel, pass and time, one
GPU per row group (``kidata.store.compaction.merge``; 0.3.4-0.3.25 sorted each row group by
itself only), side by side in one process.

    .venv/bin/python benchmarks/pruning.py --runs 100k --loads 50 --out /tmp/prune

Generates ``--runs`` runs (``benchmarks/generate.py``: every file mixes GPUs, kernels and
passes, as a CI fleet's results do), loads them as ``--loads`` loads (one small ``runs`` file
each, automatic compaction off), then merges the ``runs`` files both ways and prints, for each
GPU and for the busiest kernel: the row groups whose statistics a filter cannot rule out (what
any Parquet reader must read: DuckDB, Spark, pyarrow), and the time of a DuckDB query over each
file (best of ``--repeat``, the two files alternating), with the ratio.

    .venv/bin/python benchmarks/pruning.py --runs 300k --out /tmp/prune300 \
        --load-tree old=git:b70cff4 --load-tree new=

``--load-tree LABEL=SPEC`` (twice; SPEC as ``measure.trees`` takes it: a checkout, ``git:REV``
or empty for the installed kidata) compares instead what one *load* writes: each tree loads the
generated runs as one file, in one load, into a warehouse of its own (a ``kidata load``
process), and the two trees' ``runs`` and ``latest_runs`` files are compared as above (0.3.12's
loads cluster their files; earlier ones wrote input order).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import generate  # noqa: E402
import measure  # noqa: E402

from kidata import Warehouse  # noqa: E402
from kidata.core import engine  # noqa: E402
from kidata.store import compaction  # noqa: E402

# The runs' labels: their widest text column in every version (their documents moved to
# run_documents in 0.3.14).
QUERY = ("SELECT count(*), sum(length(labels)) FROM read_parquet($f) "
         "WHERE {column} = $value")
# latest_runs has no labels: its widest column. Rounded: the sum's order follows the rows'.
LATEST_QUERY = ("SELECT count(*), round(sum(median_us), 6) FROM read_parquet($f) "
                "WHERE {column} = $value")


def groups_to_read(path: Path, column: str, value: str) -> int:
    meta = pq.ParquetFile(path).metadata
    index = meta.schema.to_arrow_schema().get_field_index(column)
    return sum(1 for g in range(meta.num_row_groups)
               if not (s := meta.row_group(g).column(index).statistics) or not s.has_min_max
               or s.min <= value <= s.max)


def best_times(con, sql: str, params: list[dict], repeat: int) -> list[float]:
    """The best of ``repeat`` times of ``sql`` with each of ``params``, taken in turns."""
    best = [float("inf")] * len(params)
    for _ in range(repeat):
        for i, p in enumerate(params):
            start = time.perf_counter()
            con.sql(sql, params=p).fetchall()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default="100k")
    parser.add_argument("--loads", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("/tmp/kidata-pruning"))
    parser.add_argument("--load-tree", action="append", default=[], metavar="LABEL=SPEC",
                        help="compare what one load of each tree writes (twice)")
    args = parser.parse_args(argv)
    runs = generate.parse_count(args.runs)
    data = args.out / "data"
    generate.generate(data, runs, extra=0, per_file=-(-runs // args.loads), many=True)
    if args.load_tree:
        return loads_compared(args, data)
    wh_path = args.out / "wh"
    if not (wh_path / "runs").exists():
        os.environ["KIDATA_COMPACT_AT"] = "0"
        wh = Warehouse(wh_path)
        for part in sorted((data / "many").glob("*.ndjson")):
            wh.load([str(part)])
    files = sorted((wh_path / "runs").glob("*.parquet"))
    merged = args.out / "merged"
    shutil.rmtree(merged, ignore_errors=True)
    out = {}
    for name, clustered in (("file order", False), ("clustered", True)):
        (merged / name / "table").mkdir(parents=True)
        path = merged / name / "table" / "runs.parquet"
        start, cpu = time.perf_counter(), time.process_time()
        compaction.merge("runs", files, path, clustered=clustered)
        out[name] = path
        print(f"merge of {len(files)} files, {name}: {time.perf_counter() - start:.2f} s wall, "
              f"{time.process_time() - cpu:.2f} CPU s, {path.stat().st_size / 2**20:.1f} MB, "
              f"{pq.ParquetFile(path).metadata.num_row_groups} row groups")
    compared(out, args.repeat)
    return 0


def loads_compared(args: argparse.Namespace, data: Path) -> int:
    """``--load-tree``: each tree loads ``data/bundles.ndjson`` in one load; their ``runs``
    and ``latest_runs`` files compared."""
    if len(args.load_tree) != 2:
        raise SystemExit("--load-tree: give two trees (LABEL=SPEC twice)")
    with measure.trees(args.load_tree, "--load-tree") as trees:
        wh = {}
        for tree in trees:
            wh[tree.label] = args.out / f"wh-{tree.label}"
            shutil.rmtree(wh[tree.label], ignore_errors=True)
            env = {**os.environ, **tree.env, "KIDATA_COMPACT_AT": "0"}
            start = time.perf_counter()
            subprocess.run([str(Path(sys.executable).parent / "kidata"), "-w",
                            str(wh[tree.label]), "load", "-q", str(data / "bundles.ndjson")],
                           env=env, check=True, cwd=args.out)
            print(f"{tree.label}: one load in {time.perf_counter() - start:.1f} s")
    for table in ("runs", "latest_runs"):
        out = {}
        for label, path in wh.items():
            [out[label]] = sorted((path / table).glob("*.parquet"))
            print(f"{label} {table}: {out[label].stat().st_size / 2**20:.1f} MB, "
                  f"{pq.ParquetFile(out[label]).metadata.num_row_groups} row groups")
        compared(out, args.repeat, table)
    return 0


def compared(out: dict[str, Path], repeat: int, table: str = "runs") -> None:
    """Row groups read and the query's best time over the two files of ``out``, for a filter
    on each GPU and on the busiest kernel."""
    con = engine.connect()
    first, second = out
    filters = [("gpu", g) for (g,) in con.sql(
        "SELECT DISTINCT gpu FROM read_parquet($f) ORDER BY 1", params={"f": str(out[second])}
    ).fetchall()]
    [(kernel,)] = con.sql("SELECT kernel FROM read_parquet($f) GROUP BY 1 "
                          "ORDER BY count(*) DESC, 1 LIMIT 1",
                          params={"f": str(out[second])}).fetchall()
    filters.append(("kernel", kernel))
    query = QUERY if table == "runs" else LATEST_QUERY
    print(f"\n{table}: {'filter':<32} {'row groups read':>22} "
          f"{f'query s ({first} / {second})':>34}")
    for column, value in filters:
        sql = query.format(column=column)
        counts = [groups_to_read(out[n], column, value) for n in out]
        params = [{"f": str(out[n]), "value": value} for n in out]
        answers = [con.sql(sql, params=p).fetchall() for p in params]
        assert answers[0] == answers[1], (column, value, answers)
        times = best_times(con, sql, params, repeat)
        print(f"{column} = {value:<25} {counts[0]:>10} -> {counts[1]:<9} "
              f"{times[0]:>10.3f} / {times[1]:.3f} = {times[0] / times[1]:.1f}x")
    con.close()


if __name__ == "__main__":
    raise SystemExit(main())
