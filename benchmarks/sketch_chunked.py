#!/usr/bin/env python3
"""A design probe for issue 31, not kidata code: DuckDB checking and flattening JSON Lines in
bounded chunks, with no Python per record.

Issue 31's prototype (one pass of DuckDB over the whole file) reached 0.42-0.51x DuckDB's
``read_json`` -> Parquet at 100k runs but spilled at 1M (1 GB limit) and fell to 0.29x;
``benchmarks/sketch_vectorised.py`` (staging Parquet, several passes) measured 0.17-0.19x in
2 GB. Chunking was not tried. This script tries it:

1. Python reads the file in blocks of about ``--chunk`` lines and hands each to DuckDB as an
   Arrow table ``(n, line)`` built from the block's bytes and the newline offsets (numpy), so
   no Python object is made per line.
2. One DuckDB query per chunk: ``json_valid``, ``json_transform`` of the bundle to a declared
   structure (the run also kept as JSON text: the stored document), a reject predicate
   standing for the record rules (kind and API version, name, digests against the distinct
   environment/protocol texts hashed once in Python, positive values, known units, quantile
   order, a readable time, no published claims), and the run columns with a SHA-256 content
   hash computed in SQL over the sorted measurement texts. A second query unnests the
   measurements of the good rows.
3. The good rows are written with pyarrow (zstd) into one runs and one measurements file; the
   numbers of the rejected lines are counted (they would go to the general path).

Left out, as in sketch_vectorised.py: dedupe, the commit, latest_runs, the small tables. It
measures the front end a native path would put in place of msgspec + the flattener.

    .venv/bin/python benchmarks/sketch_chunked.py DATA.ndjson [--chunk 100000] [--memory 400MB]

Prints CPU and wall time of this route and of DuckDB's read_json flatten (baselines.py), in
alternating rounds, and the peak RSS of the process.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
import baselines  # noqa: E402
from sketch_vectorised import Peak  # noqa: E402

BUNDLE = """{"run": {"kind": "VARCHAR", "apiVersion": "VARCHAR",
  "metadata": {"name": "VARCHAR", "title": "VARCHAR", "labels": "MAP(VARCHAR, VARCHAR)"},
  "spec": {"status": "VARCHAR", "observedAt": "VARCHAR",
    "timing": {"latencyNs": {"median": "DOUBLE"}, "resolutionNs": "DOUBLE"},
    "measurements": [{"unit": "VARCHAR", "value": "DOUBLE", "metric": "VARCHAR",
                      "statistic": "VARCHAR", "resolution": "DOUBLE"}],
    "sourceNative": {"source": "VARCHAR", "benchmark": "VARCHAR", "externalId": "VARCHAR",
                     "published": "JSON"},
    "protocolDigest": "VARCHAR", "workloadDigest": "VARCHAR",
    "environmentDigest": "VARCHAR", "implementationDigest": "VARCHAR"}},
 "environment": "JSON", "protocol": "JSON"}"""


def canonical_digest(text: str) -> str:
    doc = json.loads(text)
    body = {k: v for k, v in doc.items() if k != "metadata"}
    canon = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canon.encode()).hexdigest()


def chunks(path: str, lines: int, block: int = 1 << 24):
    """(first line number, Arrow table (n, line)) for about ``lines`` lines at a time."""
    number = 1
    rest = b""
    pending: list[pa.Table] = []
    pending_rows = 0
    with open(path, "rb") as f:
        while True:
            data = f.read(block)
            if not data and not rest:
                break
            buf = rest + data
            if not data:  # the last line, without a newline
                buf += b"\n"
            arr = np.frombuffer(buf, dtype=np.uint8)
            ends = np.flatnonzero(arr == 10)
            if len(ends) == 0:
                rest = buf
                continue
            cut = int(ends[-1]) + 1
            rest = buf[cut:]
            # Each line with its newline, then the newline sliced off.
            starts = np.concatenate(([0], ends[:-1] + 1))
            # A string array needs contiguous values: drop the newlines by taking slices.
            values = pa.py_buffer(buf[:cut])
            whole = pa.Array.from_buffers(pa.large_binary(), len(ends),
                                          [None, pa.py_buffer(np.concatenate(
                                              (starts, [cut])).astype(np.int64)), values])
            stripped = pc.binary_slice(whole, 0, -1)
            n = np.arange(number, number + len(ends), dtype=np.int64)
            number += len(ends)
            pending.append(pa.table({"n": n, "line": stripped.cast(pa.large_string())}))
            pending_rows += len(ends)
            if pending_rows >= lines:
                yield pa.concat_tables(pending)
                pending, pending_rows = [], 0
            if not data:
                break
    if pending:
        yield pa.concat_tables(pending)


def load(src: str, work: Path, memory: str, lines: int, block: int = 1 << 24
         ) -> dict[str, float]:
    con = duckdb.connect(config={"threads": 2, "memory_limit": memory,
                                 "temp_directory": str(work / "spill")})
    con.execute("CREATE TEMP TABLE digests (doc VARCHAR, digest VARCHAR)")
    known: set[str] = set()
    runs_writer = meas_writer = None
    steps = {"rejected": 0, "runs_written": 0, "query": 0.0, "write": 0.0, "digests": 0.0,
             "read": 0.0}
    t_read = time.perf_counter()
    for chunk in chunks(src, lines, block):
        steps["read"] += time.perf_counter() - t_read
        con.register("chunk", chunk)
        t = time.perf_counter()
        con.execute(f"""
            CREATE OR REPLACE TEMP TABLE parsed AS
            SELECT n, json_transform(line, '{BUNDLE.replace(chr(10), ' ')}') AS b,
                   json_extract(line, '$.run')::VARCHAR AS document
            FROM chunk WHERE json_valid(line)""")
        new = [d for (d,) in con.execute(
            "SELECT DISTINCT b.environment::VARCHAR FROM parsed UNION "
            "SELECT DISTINCT b.protocol::VARCHAR FROM parsed WHERE b.protocol IS NOT NULL"
        ).fetchall() if d is not None and d not in known]
        steps["query"] += time.perf_counter() - t
        t = time.perf_counter()
        if new:
            con.executemany("INSERT INTO digests VALUES (?, ?)",
                            [(d, canonical_digest(d)) for d in new])
            known.update(new)
        steps["digests"] += time.perf_counter() - t
        t = time.perf_counter()
        con.execute("""
            CREATE OR REPLACE TEMP TABLE good AS
            SELECT p.n, p.b.run AS r, p.document FROM parsed p
            LEFT JOIN digests e ON e.doc = p.b.environment::VARCHAR
            LEFT JOIN digests d ON d.doc = p.b.protocol::VARCHAR
            WHERE p.b.run.kind = 'BenchmarkRun'
              AND p.b.run."apiVersion" = 'kernelindex.dev/v1alpha1'
              AND trim(coalesce(p.b.run.metadata.name, '')) <> ''
              AND p.b.run.spec."environmentDigest" = e.digest
              AND (p.b.protocol IS NULL OR p.b.run.spec."protocolDigest" = d.digest)
              AND regexp_full_match(coalesce(p.b.run.spec."workloadDigest",
                                             'sha256:' || repeat('0', 64)),
                                    'sha256:[0-9a-f]{64}')
              AND coalesce(p.b.run.spec.timing."latencyNs".median, 1) > 0
              AND NOT coalesce(list_bool_or([m.value IS NULL OR m.value <= 0
                      OR m.unit NOT IN ('ns', 'us', 'ms', 's')
                      OR m.metric IS NULL OR m.statistic IS NULL
                      FOR m IN p.b.run.spec.measurements]), false)
              AND coalesce(list_filter(p.b.run.spec.measurements,
                                       lambda m: m.statistic = 'p20')[1].value, 0)
                  <= coalesce(p.b.run.spec.timing."latencyNs".median, 1e300)
              AND coalesce(list_filter(p.b.run.spec.measurements,
                                       lambda m: m.statistic = 'p80')[1].value, 1e300)
                  >= coalesce(p.b.run.spec.timing."latencyNs".median, 0)
              AND try_cast(p.b.run.spec."observedAt" AS TIMESTAMPTZ) IS NOT NULL
              AND p.b.run.spec."sourceNative".published IS NULL""")
        runs = con.sql("""
            SELECT r.metadata.name AS run_id, r.spec."sourceNative".source AS source,
                   r.spec."sourceNative"."externalId" AS external_id,
                   split_part(r.spec."sourceNative".benchmark, '/', 1) AS kernel,
                   split_part(r.spec."sourceNative".benchmark, '/', 2) AS pass,
                   split_part(r.spec."sourceNative"."externalId", '/', 3) AS implementation,
                   r.metadata.labels['variant'] AS variant,
                   split_part(r.spec."sourceNative"."externalId", '/', 5) AS workload,
                   r.spec."environmentDigest" AS environment_id,
                   r.spec."protocolDigest" AS protocol_id,
                   r.spec."workloadDigest" AS workload_id,
                   r.spec."implementationDigest" AS implementation_id,
                   CAST(r.spec."observedAt" AS TIMESTAMPTZ) AS observed_at,
                   coalesce(r.spec.status, 'unknown') AS status,
                   r.metadata.labels['liger_version'] AS version,
                   r.metadata.title AS title, to_json(r.metadata.labels)::VARCHAR AS labels,
                   sha256(array_to_string(list_sort(
                       [m.metric || chr(31) || m.statistic || chr(31) || m.unit || chr(31)
                        || printf('%.17g', m.value) FOR m IN r.spec.measurements]
                       || ['latency' || chr(31) || 'median' || chr(31) || 'ns' || chr(31)
                           || printf('%.17g', r.spec.timing."latencyNs".median)]),
                       chr(30))) AS content_hash,
                   document, n AS _seq
            FROM good ORDER BY n""").to_arrow_table()
        meas = con.sql("""
            SELECT run_id, m.metric, m.statistic, m.unit, m.value, m.resolution, n AS _seq
            FROM (SELECT n, r.metadata.name AS run_id,
                         unnest(r.spec.measurements
                                || [{'unit': 'ns', 'value': r.spec.timing."latencyNs".median,
                                     'metric': 'latency', 'statistic': 'median',
                                     'resolution': NULL}]) AS m
                  FROM good)
            ORDER BY n""").to_arrow_table()
        [(parsed,)] = con.execute("SELECT count(*) FROM chunk").fetchall()
        steps["rejected"] += parsed - runs.num_rows
        steps["query"] += time.perf_counter() - t
        t = time.perf_counter()
        if runs_writer is None:
            runs_writer = pq.ParquetWriter(work / "runs.parquet", runs.schema,
                                           compression="zstd")
            meas_writer = pq.ParquetWriter(work / "measurements.parquet", meas.schema,
                                           compression="zstd")
        runs_writer.write_table(runs)
        meas_writer.write_table(meas)
        steps["runs_written"] += runs.num_rows
        steps["write"] += time.perf_counter() - t
        con.unregister("chunk")
        t_read = time.perf_counter()
    if runs_writer is not None:
        runs_writer.close()
        meas_writer.close()
    con.close()
    return steps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", help="kernelindex bundles, one per line (benchmarks/generate.py)")
    ap.add_argument("--memory", default="400MB", help="DuckDB's memory limit")
    ap.add_argument("--chunk", type=int, default=100_000, help="lines per chunk")
    ap.add_argument("--block", type=int, default=1 << 24,
                    help="bytes read at a time (a line may span blocks)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sketch-only", action="store_true")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="kidata-chunked-"))
    try:
        peak = Peak()
        for attempt in ("baseline", "sketch") * args.rounds:
            if args.sketch_only and attempt == "baseline":
                continue
            usage0 = resource.getrusage(resource.RUSAGE_SELF)
            t = time.perf_counter()
            if attempt == "baseline":
                baselines.duckdb_ingest(args.data, str(work / "duck.parquet"))
                steps = {}
            else:
                steps = load(args.data, work, args.memory, args.chunk, args.block)
            wall = time.perf_counter() - t
            usage = resource.getrusage(resource.RUSAGE_SELF)
            cpu = (usage.ru_utime - usage0.ru_utime) + (usage.ru_stime - usage0.ru_stime)
            shown = ", ".join(f"{k} {v:.1f} s" if isinstance(v, float) else f"{k} {v:,}"
                              for k, v in steps.items())
            print(f"{attempt:8s} {wall:6.1f} s wall, {cpu:6.1f} CPU s, peak so far "
                  f"{peak.peak / 2**20:,.0f} MB" + (f"  ({shown})" if shown else ""),
                  flush=True)
            for p in work.glob("*.parquet"):
                p.unlink()
            shutil.rmtree(work / "spill", ignore_errors=True)
        peak.done = True
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
