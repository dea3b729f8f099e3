#!/usr/bin/env python3
"""A design probe for issue 31, not kidata code: compiled readers other than DuckDB's per-line
JSON functions, with no Python per field.

Run AA (``sketch_chunked.py``) found DuckDB's ``json_transform`` costs about what DuckDB's whole
``read_json`` flatten costs per line, so a DuckDB front end lands at 0.22-0.28x. Issue 31 also
allows "another well-kept compiled library if it measures better", and quotes pyarrow's JSON
reader at 0.85-1.0x and msgspec's typed decoding at 0.70-0.86x with no rules. This script
composes them, one block of the file (``--block`` bytes of whole lines) at a time:

1. **split** (msgspec): the block's lines, joined by commas into one JSON array, decoded in
   one call to a list of ``{run, environment, protocol}`` with each document kept as raw JSON
   text (``msgspec.Raw``): the run's stored document is its own bytes, not a re-serialisation.
   A block that does not decode (a bad line, another shape) would go line by line to the
   general path; generated data has none.
2. **documents**: the distinct environment and protocol texts digested once (the kernelindex
   rule, in Python), a digest per record looked up by the text's bytes.
3. **parse** (pyarrow): the run texts, newline-joined, read by ``pyarrow.json.read_json`` with
   a declared schema (``unexpected_field_behavior='ignore'``: the document keeps every key) on
   its own threads, straight to Arrow.
4. **check and flatten** (DuckDB over the Arrow table, zero-copy): the reject predicate of
   ``sketch_chunked.py`` (kinds, names, declared digests, positive values, known units,
   quantile order, a readable time, no published claims), the run columns, a SHA-256 content
   hash of the sorted numbers, the measurements unnested.
5. **write** (pyarrow, zstd): the runs, their documents and the measurements.

Left out, as in the other sketches: dedupe, the commit, ``latest_runs``, the small tables, and
the general path itself. Prints CPU and wall time of each step and of DuckDB's ``read_json``
flatten (``baselines.duckdb_ingest``) in alternating rounds, and the process's peak RSS.

    .venv/bin/python benchmarks/sketch_arrow.py DATA.ndjson [--block 16777216] [--rounds 2]

Result (docs/benchmarks.md, Run AV): 0.40-0.50x DuckDB's CPU at 100k runs, 0.28-0.35x at 1M
(DuckDB's flatten costs less per run at 1M), ~20 CPU s for 1M runs where kidata's staging takes
~48; the load's other work (its commit and storing every series step) is ~42 CPU s more.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
import baselines  # noqa: E402
from sketch_chunked import canonical_digest  # noqa: E402  (json.loads takes bytes too)


class Bundle(msgspec.Struct, forbid_unknown_fields=True):
    run: msgspec.Raw
    environment: msgspec.Raw
    protocol: msgspec.Raw = msgspec.Raw()


BUNDLES = msgspec.json.Decoder(list[Bundle])
BUNDLE = msgspec.json.Decoder(Bundle)

S = pa.string()
F = pa.float64()
MEASUREMENT = pa.struct([("metric", S), ("statistic", S), ("unit", S), ("value", F),
                         ("resolution", F)])
RUN = pa.schema([
    ("kind", S), ("apiVersion", S),
    ("metadata", pa.struct([("name", S), ("title", S),
                            ("labels", pa.struct([("liger_version", S), ("variant", S)]))])),
    ("spec", pa.struct([
        ("status", S), ("observedAt", S),
        ("timing", pa.struct([("latencyNs", pa.struct([("median", F)])),
                              ("resolutionNs", F), ("primaryStatistic", S)])),
        ("measurements", pa.list_(MEASUREMENT)),
        ("sourceNative", pa.struct([("source", S), ("benchmark", S), ("externalId", S)])),
        ("protocolDigest", S), ("workloadDigest", S), ("environmentDigest", S),
        ("implementationDigest", S)])),
])


def blocks(path: str, size: int):
    """Whole lines, about ``size`` bytes at a time."""
    rest = b""
    with open(path, "rb") as f:
        while True:
            data = f.read(size)
            if not data:
                if rest.strip():
                    yield rest
                return
            buf = rest + data
            cut = buf.rfind(b"\n") + 1
            rest = buf[cut:]
            if cut:
                yield buf[:cut]


CHECK_AND_RUNS = """
    SELECT r.metadata.name AS run_id, r.spec."sourceNative".source AS source,
           r.spec."sourceNative"."externalId" AS external_id,
           split_part(r.spec."sourceNative".benchmark, '/', 1) AS kernel,
           split_part(r.spec."sourceNative".benchmark, '/', 2) AS pass,
           split_part(r.spec."sourceNative"."externalId", '/', 3) AS implementation,
           r.metadata.labels.variant AS variant,
           split_part(r.spec."sourceNative"."externalId", '/', 5) AS workload,
           r.spec."environmentDigest" AS environment_id,
           r.spec."protocolDigest" AS protocol_id,
           r.spec."workloadDigest" AS workload_id,
           r.spec."implementationDigest" AS implementation_id,
           try_cast(r.spec."observedAt" AS TIMESTAMPTZ) AS observed_at,
           coalesce(r.spec.status, 'unknown') AS status,
           r.metadata.labels.liger_version AS version,
           r.metadata.title AS title,
           sha256(array_to_string(list_sort(
               [m.metric || chr(31) || m.statistic || chr(31) || m.unit || chr(31)
                || printf('%.17g', m.value) FOR m IN r.spec.measurements]
               || ['latency' || chr(31) || 'median' || chr(31) || 'ns' || chr(31)
                   || printf('%.17g', r.spec.timing."latencyNs".median)]),
               chr(30))) AS content_hash,
           n AS _seq,
           NOT (r.kind = 'BenchmarkRun'
              AND r."apiVersion" = 'kernelindex.dev/v1alpha1'
              AND trim(coalesce(r.metadata.name, '')) <> ''
              AND r.spec."environmentDigest" = env_digest
              AND (protocol_digest IS NULL OR r.spec."protocolDigest" = protocol_digest)
              AND regexp_full_match(coalesce(r.spec."workloadDigest",
                                             'sha256:' || repeat('0', 64)),
                                    'sha256:[0-9a-f]{64}')
              AND coalesce(r.spec.timing."latencyNs".median, 1) > 0
              AND NOT coalesce(list_bool_or([m.value IS NULL OR m.value <= 0
                      OR m.unit NOT IN ('ns', 'us', 'ms', 's')
                      OR m.metric IS NULL OR m.statistic IS NULL
                      FOR m IN r.spec.measurements]), false)
              AND coalesce(list_filter(r.spec.measurements,
                                       lambda m: m.statistic = 'p20')[1].value, 0)
                  <= coalesce(r.spec.timing."latencyNs".median, 1e300)
              AND coalesce(list_filter(r.spec.measurements,
                                       lambda m: m.statistic = 'p80')[1].value, 1e300)
                  >= coalesce(r.spec.timing."latencyNs".median, 0)
              AND try_cast(r.spec."observedAt" AS TIMESTAMPTZ) IS NOT NULL
              ) AS _reject
    FROM chunk"""

MEASUREMENTS = """
    SELECT run_id, m.metric, m.statistic, m.unit, m.value, m.resolution, n AS _seq
    FROM (SELECT n, r.metadata.name AS run_id, unnest(r.spec.measurements) AS m FROM chunk)
    UNION ALL
    SELECT r.metadata.name, 'latency', 'median', 'ns', r.spec.timing."latencyNs".median,
           r.spec.timing."resolutionNs", n
    FROM chunk WHERE r.spec.timing."latencyNs".median IS NOT NULL"""


class Clock:
    def __init__(self) -> None:
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}

    def time(self, step: str):
        clock = self

        class _T:
            def __enter__(self):
                self.w, self.c = time.perf_counter(), time.process_time()

            def __exit__(self, *exc):
                clock.wall[step] = clock.wall.get(step, 0) + time.perf_counter() - self.w
                clock.cpu[step] = clock.cpu.get(step, 0) + time.process_time() - self.c
        return _T()


def load(src: str, work: Path, block: int) -> tuple[Clock, int, int]:
    con = duckdb.connect(config={"threads": 2, "memory_limit": "400MB",
                                 "temp_directory": str(work / "spill")})
    digests: dict[bytes, str] = {}
    clock = Clock()
    writers: dict[str, pq.ParquetWriter] = {}
    number = 0
    runs = rejected = 0
    options = pj.ParseOptions(explicit_schema=RUN, unexpected_field_behavior="ignore")
    for data in blocks(src, block):
        with clock.time("split"):
            try:
                bundles = BUNDLES.decode(b"[" + data.rstrip(b"\n").replace(b"\n", b",")
                                         + b"]")
            except (msgspec.DecodeError, msgspec.ValidationError):
                # A bad line or another shape: line by line (kidata's general path would
                # take the lines that fail; here they are counted as rejected).
                bundles = []
                for line in data.splitlines():
                    try:
                        bundles.append(BUNDLE.decode(line))
                    except (msgspec.DecodeError, msgspec.ValidationError):
                        rejected += bool(line.strip())
            texts = [b.run for b in bundles]
            lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
            joined = b"\n".join(texts)
        with clock.time("documents"):
            env = []
            protocol = []
            for b in bundles:
                key = bytes(b.environment)
                d = digests.get(key)
                if d is None:
                    d = digests[key] = canonical_digest(key)
                env.append(d)
                if not b.protocol:
                    protocol.append(None)
                else:
                    key = bytes(b.protocol)
                    d = digests.get(key)
                    if d is None:
                        d = digests[key] = canonical_digest(key)
                    protocol.append(d)
            joined += b"\n"
            offsets = np.zeros(len(texts) + 1, dtype=np.int64)
            np.cumsum(lengths + 1, out=offsets[1:])
            # The documents: slices of the joined buffer, each without its newline.
            whole = pa.Array.from_buffers(pa.large_binary(), len(texts),
                                          [None, pa.py_buffer(offsets), pa.py_buffer(joined)])
            document = pc.binary_slice(whole, 0, -1).cast(pa.large_string())
        with clock.time("parse"):
            parsed = pj.read_json(pa.BufferReader(joined),
                                  read_options=pj.ReadOptions(block_size=8 << 20),
                                  parse_options=options)
            n = np.arange(number, number + len(texts), dtype=np.int64)
            number += len(texts)
            chunk = pa.table({"n": n, "r": pa.StructArray.from_arrays(
                [c.combine_chunks() for c in parsed.columns], fields=list(RUN)),
                "env_digest": pa.array(env, S), "protocol_digest": pa.array(protocol, S)})
        with clock.time("check+flatten"):
            con.register("chunk", chunk)
            flat = con.sql(CHECK_AND_RUNS).to_arrow_table()
            meas = con.sql(MEASUREMENTS).to_arrow_table()
            con.unregister("chunk")
            good = pc.invert(flat.column("_reject"))
            rejected += flat.num_rows - pc.sum(good.cast(pa.int64())).as_py()
            flat = flat.filter(good).drop_columns(["_reject"])
            meas = meas.filter(pc.is_in(meas.column("_seq"), flat.column("_seq")))
            document = document.filter(good)
            runs += flat.num_rows
        with clock.time("write"):
            docs = pa.table({"run_id": flat.column("run_id"), "document": document})
            for name, table in (("runs", flat), ("run_documents", docs),
                                ("measurements", meas)):
                if name not in writers:
                    writers[name] = pq.ParquetWriter(work / f"{name}.parquet", table.schema,
                                                     compression="zstd")
                writers[name].write_table(table)
    with clock.time("write"):
        for w in writers.values():
            w.close()
    con.close()
    return clock, runs, rejected


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("--block", type=int, default=16 << 20)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-baseline", "--sketch-only", action="store_true",
                    help="the sketch alone (its own peak RSS)")
    args = ap.parse_args()
    for r in range(args.rounds):
        work = Path(tempfile.mkdtemp(prefix="kidata-sketch-arrow-"))
        try:
            w, c = time.perf_counter(), time.process_time()
            if not args.no_baseline:
                baselines.duckdb_ingest(args.src, str(work / "baseline.parquet"))
            base_wall, base_cpu = time.perf_counter() - w, time.process_time() - c
            w, c = time.perf_counter(), time.process_time()
            clock, runs, rejected = load(args.src, work, args.block)
            wall, cpu = time.perf_counter() - w, time.process_time() - c
        finally:
            shutil.rmtree(work, ignore_errors=True)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"round {r + 1}: baseline {base_wall:.2f} s, {base_cpu:.2f} CPU s; "
              f"sketch {wall:.2f} s, {cpu:.2f} CPU s ({runs} runs, {rejected} flagged); "
              f"ratio (CPU) {base_cpu / cpu:.2f}x; peak RSS so far {peak:.0f} MB")
        print(f"sketch: rejected {rejected}, runs_written {runs}")
        for step in clock.cpu:
            print(f"    {step:14s} {clock.wall[step]:6.2f} s  {clock.cpu[step]:6.2f} CPU s"
                  f"  {1e6 * clock.cpu[step] / max(runs, 1):5.1f} us/run")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
