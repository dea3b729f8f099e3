#!/usr/bin/env python3
"""What a compaction's clustering buys a filtered query: a table's small files merged in file
order (kidata before 0.3.4) beside the same files merged with one GPU per row group, ordered by
kernel, pass and time within it (``kidata.store.compaction.merge``), side by side in one
process.

    .venv/bin/python benchmarks/pruning.py --runs 100k --loads 50 --out /tmp/prune

Generates ``--runs`` runs (``benchmarks/generate.py``: every file mixes GPUs, kernels and
passes, as a CI fleet's results do), loads them as ``--loads`` loads (one small ``runs`` file
each, automatic compaction off), then merges the ``runs`` files both ways and prints, for each
GPU and for the busiest kernel: the row groups whose statistics a filter cannot rule out (what
any Parquet reader must read: DuckDB, Spark, pyarrow), and the time of a DuckDB query over each
file (best of ``--repeat``, the two files alternating), with the ratio.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import generate  # noqa: E402

from kidata import Warehouse  # noqa: E402
from kidata.core import engine  # noqa: E402
from kidata.store import compaction  # noqa: E402

QUERY = ("SELECT count(*), sum(length(document)) FROM read_parquet($f) "
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
    args = parser.parse_args(argv)
    runs = generate.parse_count(args.runs)
    data = args.out / "data"
    generate.generate(data, runs, extra=0, per_file=-(-runs // args.loads), many=True)
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
    con = engine.connect()
    filters = [("gpu", g) for (g,) in con.sql(
        "SELECT DISTINCT gpu FROM read_parquet($f) ORDER BY 1", params={"f": str(out["clustered"])}
    ).fetchall()]
    [(kernel,)] = con.sql("SELECT kernel FROM read_parquet($f) GROUP BY 1 "
                          "ORDER BY count(*) DESC, 1 LIMIT 1",
                          params={"f": str(out["clustered"])}).fetchall()
    filters.append(("kernel", kernel))
    print(f"\n{'filter':<32} {'row groups read':>22} {'query s (file order / clustered)':>34}")
    for column, value in filters:
        sql = QUERY.format(column=column)
        counts = [groups_to_read(out[n], column, value) for n in out]
        params = [{"f": str(out[n]), "value": value} for n in out]
        answers = [con.sql(sql, params=p).fetchall() for p in params]
        assert answers[0] == answers[1], (column, value, answers)
        times = best_times(con, sql, params, args.repeat)
        print(f"{column} = {value:<25} {counts[0]:>10} -> {counts[1]:<9} "
              f"{times[0]:>10.3f} / {times[1]:.3f} = {times[0] / times[1]:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
