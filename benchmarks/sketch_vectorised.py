#!/usr/bin/env python3
"""A design probe, not kidata code: how fast could a load be if DuckDB did all the work?

The ingest target (0.5× DuckDB's ``read_json`` → Parquet) is missed by kidata's per-record
Python (docs/benchmarks.md, "Ingest"). This script measures the other route end to end on the
same data, beside the same baseline, so the choice rests on a measurement, not a projection:

1. **read**: ``read_json`` of the bundles with the run kept as JSON text (the ``document``:
   every key, as kidata keeps it) and its fields taken with one ``json_transform`` to a
   declared struct type; environment and protocol kept as text. Written to one staging
   Parquet file in input order (the record number is the row number).
2. **digests**: the distinct environment and protocol documents, hashed in Python with the
   kernelindex rule (a handful per load).
3. **checks**: a reject flag per record from SQL predicates standing for kidata's checks
   (kinds and API version, names, declared digests against the computed ones, positive
   latencies, quantile order, known units, timestamps). Flagged records would go to the
   Python path for their messages; the generated data has none.
4. **runs**: dedupe (first record per run id; none already in the warehouse), the flat
   columns, the document and a content hash of the sorted numbers, to zstd Parquet.
5. **measurements**: the median and every listed measurement, one row each.
6. **latest_runs**: the latest passed run per key, and the count.

Left out, so the figure is a floor for this route: the journal and commit protocol, reference
tables, the manifest, the other small tables, reject rows, and the Python fallback itself. A
value of the wrong type becomes NULL under ``TRY_CAST`` rather than a reject (a real version
would cast strictly per batch and send a failing batch to Python). The ``document`` text is
DuckDB's JSON serialisation, not orjson's: adopting this route changes the warehouse format
(and the content hash, here md5 over DuckDB's number text).

DuckDB's memory limit must be ~2 GB: at 400 MB the ordered read runs out of memory.

    .venv/bin/python benchmarks/sketch_vectorised.py DATA.ndjson [--memory 2GB]

Result at 1M runs (docs/benchmarks.md, "Ingest"): 34-38 s wall, 49-53 CPU s, 2.0 GB, against
5.5-6.9 s for the baseline: 0.17-0.19x, where kidata's load is 0.13-0.15x in 463 MB.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import duckdb
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
import baselines  # noqa: E402

RUN = """STRUCT(kind VARCHAR, "apiVersion" VARCHAR,
  metadata STRUCT(name VARCHAR, title VARCHAR, labels MAP(VARCHAR, VARCHAR)),
  spec STRUCT(status VARCHAR, "observedAt" VARCHAR,
    timing STRUCT("latencyNs" STRUCT(median DOUBLE), "resolutionNs" DOUBLE),
    measurements STRUCT(unit VARCHAR, value DOUBLE, metric VARCHAR, statistic VARCHAR,
                        resolution DOUBLE)[],
    "sourceNative" STRUCT(source VARCHAR, benchmark VARCHAR, "externalId" VARCHAR,
                          published BOOLEAN),
    "protocolDigest" VARCHAR, "workloadDigest" VARCHAR, "environmentDigest" VARCHAR,
    "implementationDigest" VARCHAR))"""


def canonical_digest(text: str) -> str:
    doc = json.loads(text)
    body = {k: v for k, v in doc.items() if k != "metadata"}
    canon = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canon.encode()).hexdigest()


class Peak:
    """The process's resident set, sampled every 20 ms."""

    def __init__(self):
        self.proc, self.peak, self.done = psutil.Process(), 0, False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.done:
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(0.02)


def load(src: str, work: Path, memory: str) -> dict[str, float]:
    con = duckdb.connect(config={"threads": 2, "memory_limit": memory,
                                 "temp_directory": str(work / "spill")})
    steps: dict[str, float] = {}

    def step(name: str, sql: str, params=None):
        t = time.perf_counter()
        result = con.execute(sql, params).fetchall()
        steps[name] = time.perf_counter() - t
        return result

    stage, runs, meas, latest = (str(work / n) for n in
                                 ("stage.parquet", "runs.parquet", "measurements.parquet",
                                  "latest_runs.parquet"))
    step("read", f"""
        COPY (
            SELECT run AS document, TRY_CAST(run AS {RUN}) AS r,
                   environment, protocol
            FROM read_json({baselines._literal(src)}, format = 'newline_delimited',
                           columns = {{'run': 'JSON', 'protocol': 'JSON',
                                       'environment': 'JSON'}})
        ) TO '{stage}' (FORMAT parquet, COMPRESSION lz4)""")
    t = time.perf_counter()
    docs = con.execute(f"SELECT DISTINCT environment::VARCHAR FROM '{stage}' UNION "
                       f"SELECT DISTINCT protocol::VARCHAR FROM '{stage}' "
                       "WHERE protocol IS NOT NULL").fetchall()
    con.execute("CREATE TEMP TABLE digests (doc VARCHAR, digest VARCHAR)")
    con.executemany("INSERT INTO digests VALUES (?, ?)",
                    [(d, canonical_digest(d)) for (d,) in docs])
    steps["digests"] = time.perf_counter() - t
    step("checks", f"""
        CREATE TEMP TABLE verdict AS
        SELECT file_row_number AS _seq, r.metadata.name AS run_id, (
            r.kind IS DISTINCT FROM 'BenchmarkRun'
            OR r."apiVersion" IS DISTINCT FROM 'kernelindex.dev/v1alpha1'
            OR coalesce(trim(r.metadata.name), '') = ''
            OR r.spec."environmentDigest" IS DISTINCT FROM e.digest
            OR (p.digest IS NOT NULL AND r.spec."protocolDigest" IS DISTINCT FROM p.digest)
            OR NOT regexp_full_match(
                coalesce(r.spec."workloadDigest", 'sha256:' || repeat('0', 64)),
                'sha256:[0-9a-f]{{64}}')
            OR coalesce(r.spec.timing."latencyNs".median, 1) <= 0
            OR list_bool_or([m.value IS NULL OR m.value <= 0
                             OR m.unit NOT IN ('ns', 'us', 'ms', 's')
                             OR m.metric IS NULL OR m.statistic IS NULL
                             for m in r.spec.measurements])
            OR coalesce(list_filter(r.spec.measurements,
                                    lambda m: m.statistic = 'p20')[1].value, 0)
               > coalesce(r.spec.timing."latencyNs".median, 1e300)
            OR coalesce(list_filter(r.spec.measurements,
                                    lambda m: m.statistic = 'p80')[1].value, 1e300)
               < coalesce(r.spec.timing."latencyNs".median, 0)
            OR try_cast(r.spec."observedAt" AS TIMESTAMPTZ) IS NULL
            OR coalesce(r.spec."sourceNative".published, false)
        ) AS bad
        FROM read_parquet('{stage}', file_row_number = true) s
        LEFT JOIN digests e ON e.doc = s.environment::VARCHAR
        LEFT JOIN digests p ON p.doc = s.protocol::VARCHAR""")
    [(bad,)] = con.execute("SELECT count(*) FROM verdict WHERE bad").fetchall()
    # Dedupe: the first record of each run id, none already in the (empty) warehouse.
    step("dedupe", """
        CREATE TEMP TABLE keep AS
        SELECT min(_seq) AS _seq FROM verdict WHERE NOT bad GROUP BY run_id""")
    step("runs", f"""
        COPY (
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
                   TRY_CAST(r.spec."observedAt" AS TIMESTAMPTZ) AS observed_at,
                   coalesce(r.spec.status, 'unknown') AS status,
                   r.metadata.labels['liger_version'] AS version,
                   r.metadata.title AS title, to_json(r.metadata.labels) AS labels,
                   md5(list_sort([m.metric || m.statistic || m.value::VARCHAR
                                  FOR m IN r.spec.measurements])::VARCHAR
                       || r.spec.timing."latencyNs".median::VARCHAR) AS content_hash,
                   document::VARCHAR AS document, file_row_number AS _seq
            FROM read_parquet('{stage}', file_row_number = true)
            SEMI JOIN keep ON keep._seq = file_row_number
            ORDER BY file_row_number
        ) TO '{runs}' (FORMAT parquet, COMPRESSION zstd)""")
    step("measurements", f"""
        COPY (
            SELECT run_id, metric, statistic, unit, value, _seq FROM (
                SELECT r.metadata.name AS run_id, 'latency' AS metric, 'median' AS statistic,
                       'ns' AS unit, r.spec.timing."latencyNs".median AS value,
                       file_row_number AS _seq, 0 AS i
                FROM read_parquet('{stage}', file_row_number = true)
                SEMI JOIN keep ON keep._seq = file_row_number
                UNION ALL
                SELECT run_id, m.metric, m.statistic, m.unit, m.value, _seq, i FROM (
                    SELECT r.metadata.name AS run_id, file_row_number AS _seq,
                           unnest(r.spec.measurements) AS m,
                           generate_subscripts(r.spec.measurements, 1) AS i
                    FROM read_parquet('{stage}', file_row_number = true)
                    SEMI JOIN keep ON keep._seq = file_row_number))
            ORDER BY _seq, i
        ) TO '{meas}' (FORMAT parquet, COMPRESSION zstd)""")
    step("latest_runs", f"""
        COPY (
            SELECT kernel, pass, workload, environment_id, protocol_id, implementation, variant,
                   arg_max(run_id, observed_at) AS run_id, max(observed_at) AS observed_at,
                   count(*) AS runs
            FROM '{runs}' WHERE status = 'passed'
            GROUP BY ALL
        ) TO '{latest}' (FORMAT parquet, COMPRESSION zstd)""")
    steps["rejected"] = bad
    [(n,)] = con.execute(f"SELECT count(*) FROM '{runs}'").fetchall()
    steps["runs_written"] = n
    con.close()
    return steps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", help="kernelindex bundles, one per line (benchmarks/generate.py)")
    ap.add_argument("--memory", default="2GB", help="DuckDB's memory limit")
    ap.add_argument("--sketch-only", action="store_true",
                    help="skip the baseline (which fails on records it cannot cast)")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="kidata-sketch-"))
    try:
        peak = Peak()
        for attempt in ("baseline", "sketch", "baseline", "sketch"):
            if args.sketch_only and attempt == "baseline":
                continue
            usage0 = resource.getrusage(resource.RUSAGE_SELF)
            t = time.perf_counter()
            if attempt == "baseline":
                baselines.duckdb_ingest(args.data, str(work / "duck.parquet"))
                steps = {}
            else:
                steps = load(args.data, work, args.memory)
            wall = time.perf_counter() - t
            usage = resource.getrusage(resource.RUSAGE_SELF)
            cpu = (usage.ru_utime - usage0.ru_utime) + (usage.ru_stime - usage0.ru_stime)
            shown = ", ".join(f"{k} {v:.1f} s" if isinstance(v, float) else f"{k} {v:,}"
                              for k, v in steps.items())
            print(f"{attempt:8s} {wall:6.1f} s wall, {cpu:6.1f} CPU s"
                  + (f"  ({shown})" if shown else ""), flush=True)
            for p in work.glob("*.parquet"):
                p.unlink()
            shutil.rmtree(work / "spill", ignore_errors=True)
        peak.done = True
        print(f"peak RSS of this process: {peak.peak / 2**20:,.0f} MB")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
