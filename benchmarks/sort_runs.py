#!/usr/bin/env python3
"""The sort of a ``runs`` file alone (``kidata.store.pqwrite.Clustered``), one kidata beside
another, each in a process of its own, the trees alternating round after round.

    .venv/bin/python benchmarks/sort_runs.py RUNS.parquet --tree old=git:8d4f0a3 --tree new= \
        [--rounds 2] [--batch 4096]

RUNS.parquet is a ``runs`` file of a warehouse (``kidata load`` of ``benchmarks/generate.py``'s
runs writes one). Each measured process reads it a row group at a time, the GPUs' row groups in
turn (so every GPU's rows arrive throughout, each piece ordered within itself, as a load's
rows do), hands them ``--batch`` rows at a time to that tree's ``Clustered`` over a
``GroupedWriter`` with a load's settings (``finalize.ROW_GROUP_BYTES``, or ``GROUP_BYTES``
before 0.3.26, and ``finalize.CLUSTER_BYTES``),
and writes the file. ``--tree`` is ``LABEL=SPEC`` (``measure.trees``: a checkout, ``git:REV``
or empty for the installed kidata). Prints, per tree: CPU seconds and peak memory (the
process's high-water mark) when the file is written (start-up and reading included, the
checks after it not), the process's wall seconds, the row groups written,
whether the file is sorted across (every GPU's rows in order from its first row group to its
last), and the row groups a filter on the input's most common kernel must read (from their
statistics); and each tree's CPU and peak over the first tree's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import measure  # noqa: E402

# What each measured process runs (the tree's kidata on its PYTHONPATH).
CHILD = r"""
import inspect, json, resource, sys, time
from pathlib import Path
import pyarrow as pa, pyarrow.compute as pc, pyarrow.parquet as pq
from kidata.store import finalize, pqwrite
from kidata.store.schema import clustered_keys

source, out, batch = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
f = pq.ParquetFile(source)
gpu = f.schema_arrow.get_field_index("gpu")
by_gpu = {}
for g in range(f.metadata.num_row_groups):
    stats = f.metadata.row_group(g).column(gpu).statistics
    by_gpu.setdefault(stats.min if stats is not None and stats.has_min_max else None,
                      []).append(g)
order = [groups[i] for i in range(max(map(len, by_gpu.values())))
         for groups in by_gpu.values() if i < len(groups)]
keys = clustered_keys("runs")
writer = pqwrite.GroupedWriter(out, f.schema_arrow,  # a load's row groups, in each tree
                               max_bytes=getattr(finalize, "ROW_GROUP_BYTES", finalize.GROUP_BYTES))
extra = ([out.with_name(out.name + ".sort")]
         if "spill" in inspect.signature(pqwrite.Clustered).parameters else [])
sink = pqwrite.Clustered(writer, keys, finalize.CLUSTER_BYTES, *extra)
for g in order:
    table = f.read_row_group(g)
    for start in range(0, table.num_rows, batch):
        sink.write(table.slice(start, batch))
    del table
sink.close()
writer.close()
cpu = time.process_time()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6
written = pq.ParquetFile(out)
rows, groups = [], []
for g in range(written.metadata.num_row_groups):
    part = written.read_row_group(g, columns=keys[:4])
    groups.append(part.column("kernel"))
    rows += list(zip(*(part.column(k).to_pylist() for k in keys[:4])))
key = lambda r: tuple((v is None, v if v is not None else 0) for v in r)
kernels = pc.value_counts(pq.read_table(source, columns=["kernel"]).column(0))
common = max(kernels.to_pylist(), key=lambda c: c["counts"])["values"]
reads = 0
index = written.schema_arrow.get_field_index("kernel")
for g in range(written.metadata.num_row_groups):
    s = written.metadata.row_group(g).column(index).statistics
    reads += s is None or not s.has_min_max or s.min <= common <= s.max
print(json.dumps({"cpu_s": round(cpu, 2), "peak_mb": round(peak, 1),
                  "row_groups": written.metadata.num_row_groups,
                  "sorted": [key(r) for r in rows] == sorted(key(r) for r in rows),
                  "rows": written.metadata.num_rows, "kernel": common, "kernel_reads": reads}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", type=Path, help="a runs Parquet file")
    ap.add_argument("--tree", action="append", default=[], metavar="LABEL=PATH|git:REV")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4096, help="rows handed over at a time")
    args = ap.parse_args()
    if not args.runs.is_file():
        raise SystemExit(f"{args.runs}: no such file")
    results: dict[str, list[dict]] = {}
    with measure.trees(args.tree or ["installed="]) as trees, \
            tempfile.TemporaryDirectory(prefix="kidata-sort-") as tmp:
        for n in range(args.rounds):
            for tree in trees:
                out = Path(tmp) / f"{tree.label}-{n}.parquet"
                # -P: the tree's kidata, not the one in the current folder.
                m = measure.run([sys.executable, "-P", "-c", CHILD, str(args.runs), str(out),
                                 str(args.batch)], env={**os.environ, **tree.env})
                if not m.ok:
                    raise SystemExit(f"{tree.label}: the sort failed:\n{m.stderr[-2000:]}")
                found = json.loads(m.stdout.strip().splitlines()[-1])
                found["wall_s"] = round(m.seconds, 2)
                results.setdefault(tree.label, []).append(found)
                print(json.dumps({"tree": tree.label, "round": n + 1, **found}), flush=True)
                out.unlink(missing_ok=True)
    first = next(iter(results.values()))
    cpu0 = statistics.median(r["cpu_s"] for r in first)
    peak0 = statistics.median(r["peak_mb"] for r in first)
    print("| tree | CPU s (each round) | peak MB | row groups | sorted across | "
          f"kernel {first[0]['kernel']!r} reads | CPU / first | peak / first |")
    print("|---|---|---|---|---|---|---|---|")
    for label, rs in results.items():
        cpu = statistics.median(r["cpu_s"] for r in rs)
        peak = statistics.median(r["peak_mb"] for r in rs)
        cpus = " / ".join(f"{r['cpu_s']:.1f}" for r in rs)
        peaks = " / ".join(f"{r['peak_mb']:.0f}" for r in rs)
        print(f"| {label} | {cpus} | {peaks} | {rs[0]['row_groups']} | "
              f"{'yes' if all(r['sorted'] for r in rs) else 'no'} | {rs[0]['kernel_reads']} | "
              f"{cpu / cpu0:.2f}× | {peak / peak0:.2f}× |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
