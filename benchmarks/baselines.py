"""The baselines kidata is measured against, each run as its own process by ``benchmarks/run``.

    python benchmarks/baselines.py duckdb-ingest SRC OUT.parquet
        DuckDB's own ``read_json`` flattening the bundles straight to one Parquet file in one
        SQL statement: no validation, no digests, no dedupe. The floor for a Python tool.
    python benchmarks/baselines.py pandas-ingest SRC OUT.parquet
        What a user would write instead: ``json.loads`` each line, ``pd.json_normalize``,
        ``to_parquet``.
    python benchmarks/baselines.py raw-query SRC QUESTION
        A question (``speedups`` for one kernel on one GPU, or ``speedup_summary``) asked of
        the raw NDJSON with DuckDB's ``read_json``: what a user without a warehouse does.
        Prints CSV.
    python benchmarks/baselines.py warm-query SRC QUESTION WAREHOUSE REPEAT
        The question asked of kidata's warehouse (the library, Warehouse.sql) and of the raw
        NDJSON, side by side in one warm process. Prints JSON.

    python benchmarks/baselines.py plain SCRIPT MODE SQL OUT
        The script ``kidata views --sql`` prints (tables as read_parquet globs, the views'
        bodies) run by a plain DuckDB connection, then SQL: MODE 'fetch' fetches its rows,
        'copy' writes them to the Parquet file OUT, 'database' copies the tables named in SQL
        (comma-separated) into the DuckDB database file OUT, as ``kidata export --duckdb``
        does: the reading commands' baseline, with no kidata in between.
    python benchmarks/baselines.py warm-plain SCRIPT WAREHOUSE QUESTIONS REPEAT
        QUESTIONS (JSON: name -> SQL) asked of kidata (Warehouse.sql) and of that plain
        connection in one process, alternating, after one warm-up each. Prints JSON.

SRC is one NDJSON file or a folder of them.
"""

from __future__ import annotations

import sys
from pathlib import Path

# The question asked of both sides: Liger's RMSNorm on the H100 SXM5.
KERNEL = "rms_norm"
GPU_KEY = "h100-sxm5-80gb"  # kidata's canonical key
GPU_HARDWARE = ("NVIDIA H100", "80GB HBM3")  # what the raw documents say


def _files(src: str) -> list[str]:
    path = Path(src)
    if path.is_dir():
        return [str(p) for p in sorted(path.glob("*.ndjson"))]
    return [src]


def _read_json(src: str) -> str:
    path = Path(src)
    pattern = str(path / "*.ndjson") if path.is_dir() else src
    return "read_json(" + _literal(pattern) + ", format = 'newline_delimited')"


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def duckdb_ingest(src: str, out: str) -> None:
    import duckdb

    con = duckdb.connect()
    con.execute(f"""
        COPY (
            SELECT
                run.metadata.name AS run_id,
                run.spec.sourceNative.source AS source,
                run.spec.sourceNative.externalId AS external_id,
                split_part(run.spec.sourceNative.benchmark, '/', 1) AS kernel,
                split_part(run.spec.sourceNative.benchmark, '/', 2) AS pass,
                split_part(run.spec.sourceNative.externalId, '/', 3) AS implementation,
                split_part(run.spec.sourceNative.externalId, '/', 5) AS workload,
                environment.spec.hardware.product AS product,
                environment.spec.hardware.formFactor AS form_factor,
                run.metadata.labels.liger_version AS version,
                run.metadata.title AS title,
                run.spec.status AS status,
                CAST(run.spec.observedAt AS TIMESTAMPTZ) AS observed_at,
                run.spec.timing.latencyNs.median AS median_ns,
                list_filter(run.spec.measurements, lambda m: m.statistic = 'p20')[1].value
                    AS p20_ns,
                list_filter(run.spec.measurements, lambda m: m.statistic = 'p80')[1].value
                    AS p80_ns,
                run.spec.environmentDigest AS environment_id,
                run.spec.protocolDigest AS protocol_id,
                run.spec.workloadDigest AS workload_id,
                run.spec.implementationDigest AS implementation_id,
                protocol.spec.comparability.family AS family
            FROM {_read_json(src)}
        ) TO {_literal(out)} (FORMAT parquet, COMPRESSION zstd)
    """)


def pandas_ingest(src: str, out: str) -> None:
    import json

    import pandas as pd

    records = []
    for name in _files(src):
        with open(name, encoding="utf-8") as fh:
            records.extend(json.loads(line) for line in fh if line.strip())
    df = pd.json_normalize(records)
    df.to_parquet(out)


def _raw_latest(src: str) -> str:
    """Latest passed run per (kernel, pass, workload, GPU, family, implementation), from the
    raw bundles: the core of the speedups view, without a warehouse."""
    return f"""
        WITH raw AS (
            SELECT
                run.metadata.name AS run_id,
                split_part(run.spec.sourceNative.benchmark, '/', 1) AS kernel,
                split_part(run.spec.sourceNative.benchmark, '/', 2) AS pass,
                split_part(run.spec.sourceNative.externalId, '/', 3) AS implementation,
                split_part(run.spec.sourceNative.externalId, '/', 5) AS workload,
                environment.spec.hardware.product AS product,
                environment.spec.hardware.formFactor AS form_factor,
                coalesce(protocol.spec.comparability.family, run.spec.protocolDigest) AS family,
                run.spec.status AS status,
                CAST(run.spec.observedAt AS TIMESTAMPTZ) AS observed_at,
                run.spec.timing.latencyNs.median / 1000.0 AS median_us,
                list_filter(run.spec.measurements, lambda m: m.statistic = 'p20')[1].value
                    / 1000.0 AS p20_us,
                list_filter(run.spec.measurements, lambda m: m.statistic = 'p80')[1].value
                    / 1000.0 AS p80_us
            FROM {_read_json(src)}
        ),
        ranked AS (
            SELECT *,
                row_number() OVER (
                    PARTITION BY kernel, pass, workload, product, form_factor, family,
                        implementation
                    ORDER BY observed_at DESC NULLS LAST, run_id DESC) AS rn
            FROM raw WHERE status = 'passed'
        ),
        latest AS (SELECT * FROM ranked WHERE rn = 1),
        pairs AS (
            SELECT c.kernel, c.pass, c.workload, c.product, c.form_factor, c.family,
                c.implementation AS candidate, b.implementation AS baseline,
                c.median_us AS candidate_us, b.median_us AS baseline_us,
                b.median_us / c.median_us AS speedup,
                CASE
                    WHEN c.p20_us IS NULL OR c.p80_us IS NULL OR b.p20_us IS NULL
                        OR b.p80_us IS NULL THEN 'no spread'
                    WHEN c.p80_us < b.p20_us THEN 'faster'
                    WHEN c.p20_us > b.p80_us THEN 'slower'
                    ELSE 'within noise'
                END AS verdict
            FROM latest c JOIN latest b
                ON c.kernel = b.kernel AND c.pass = b.pass AND c.workload = b.workload
                AND c.product = b.product AND c.form_factor = b.form_factor
                AND c.family = b.family AND c.implementation <> b.implementation
        )
    """


def _raw_sql(src: str, question: str) -> tuple[str, dict]:
    if question == "speedups":
        sql = _raw_latest(src) + """
            SELECT * FROM pairs WHERE kernel = $kernel AND product = $product
                AND form_factor = $form_factor
            ORDER BY pass, workload, candidate, baseline"""
        return sql, {"kernel": KERNEL, "product": GPU_HARDWARE[0],
                     "form_factor": GPU_HARDWARE[1]}
    if question == "speedup_summary":
        # The view's question (sql/speedup_summary.sql): per pass, each kernel weighted equally
        # (geometric mean per kernel, then across kernels, with a t-interval's inputs), beside
        # the pooled per-row figure. Role rows need kidata's roles file, so both sides leave
        # them out (KIDATA_QUERIES).
        sql = _raw_latest(src) + """,
            per_kernel AS (
                SELECT candidate, baseline, product, form_factor, pass, kernel,
                    avg(ln(speedup)) AS log_geomean, sum(ln(speedup)) AS log_sum,
                    count(*) AS n, min(speedup) AS min_speedup, max(speedup) AS max_speedup,
                    sum(CASE WHEN speedup > 1 THEN 1 ELSE 0 END) AS wins,
                    sum(CASE WHEN speedup < 1 THEN 1 ELSE 0 END) AS losses,
                    sum(CASE WHEN verdict = 'faster' THEN 1 ELSE 0 END) AS faster,
                    sum(CASE WHEN verdict = 'slower' THEN 1 ELSE 0 END) AS slower,
                    sum(CASE WHEN verdict = 'within noise' THEN 1 ELSE 0 END) AS within_noise
                FROM pairs GROUP BY ALL
            )
            SELECT candidate, baseline, product, form_factor, pass, count(*) AS kernels,
                sum(n) AS workloads, exp(avg(log_geomean)) AS geomean_speedup,
                stddev_samp(log_geomean) AS sd_log, exp(sum(log_sum) / sum(n)) AS pooled,
                min(min_speedup) AS min_speedup, max(max_speedup) AS max_speedup,
                sum(wins) AS wins, sum(losses) AS losses, sum(faster) AS faster,
                sum(slower) AS slower, sum(within_noise) AS within_noise
            FROM per_kernel GROUP BY ALL ORDER BY ALL"""
        return sql, {}
    raise SystemExit(f"unknown question {question!r}; expected speedups or speedup_summary")


def raw_query(src: str, question: str) -> None:
    import duckdb

    sql, params = _raw_sql(src, question)
    duckdb.connect().sql(sql, params=params).write_csv("/dev/stdout")


def warm_query(src: str, question: str, warehouse: str, repeat: int) -> None:
    """The question asked ``repeat`` times of both sides in one process, alternating, after
    one warm-up each: what an analyst in a notebook or a service waits per query, with Python,
    DuckDB and kidata already loaded. Prints JSON: seconds per run and rows of each side."""
    import json
    import time

    import duckdb

    from kidata import Warehouse

    wh = Warehouse(warehouse)
    con = duckdb.connect()
    sql, params = _raw_sql(src, question)
    sides = {"kidata": lambda: wh.sql(KIDATA_QUERIES[question]).fetchall(),
             "raw": lambda: con.sql(sql, params=params).fetchall()}
    out: dict = {}
    for name, ask in sides.items():
        out[f"{name}_rows"] = len(ask())  # warm-up (and kidata's connection)
        out[f"{name}_s"] = []
    for _ in range(repeat):
        for name, ask in sides.items():
            start = time.perf_counter()
            ask()
            out[f"{name}_s"].append(time.perf_counter() - start)
    print(json.dumps(out))


KIDATA_QUERIES = {
    "speedups": (f"SELECT * FROM speedups WHERE kernel = '{KERNEL}' AND gpu = '{GPU_KEY}' "
                 "ORDER BY pass, workload, candidate, baseline"),
    "speedup_summary": ("SELECT * FROM speedup_summary WHERE baseline NOT LIKE 'role:%' "
                        "ORDER BY ALL"),
}


def plain(script: str, mode: str, sql: str, out: str) -> None:
    import os

    import duckdb

    # Under `benchmarks/run --query-memory` the baseline gets kidata's limit.
    limit = os.environ.get("KIDATA_QUERY_MEMORY")
    con = duckdb.connect(config={"memory_limit": limit} if limit else {})
    con.execute(Path(script).read_text("utf-8"))
    if mode == "fetch":
        print(len(con.sql(sql).fetchall()))
    elif mode == "copy":
        con.execute(f"COPY ({sql}) TO {_literal(out)} (FORMAT parquet)")
    elif mode == "database":
        con.execute(f"ATTACH {_literal(out)} AS exported")
        for table in sql.split(","):
            con.execute(f"CREATE TABLE exported.{table} AS SELECT * FROM {table}")
    else:
        raise SystemExit(f"unknown mode {mode!r}")


def warm_plain(script: str, warehouse: str, questions: str, repeat: int) -> None:
    import json
    import os
    import time

    import duckdb

    from kidata import Warehouse

    wh = Warehouse(warehouse)
    limit = os.environ.get("KIDATA_QUERY_MEMORY")  # kidata's session has it: so does this
    con = duckdb.connect(config={"memory_limit": limit} if limit else {})
    con.execute(Path(script).read_text("utf-8"))
    out: dict = {}
    for name, sql in json.loads(questions).items():
        sides = {"kidata": lambda sql=sql: wh.sql(sql).fetchall(),
                 "plain": lambda sql=sql: con.sql(sql).fetchall()}
        got: dict = {}
        for side, ask in sides.items():
            got[f"{side}_rows"] = len(ask())  # warm-up
            got[f"{side}_s"] = []
        for _ in range(repeat):
            for side, ask in sides.items():
                start = time.perf_counter()
                ask()
                got[f"{side}_s"].append(time.perf_counter() - start)
        out[name] = got
    print(json.dumps(out))


def main(argv: list[str]) -> int:
    if argv and argv[0] == "plain" and len(argv) == 5:
        plain(*argv[1:])
        return 0
    if argv and argv[0] == "warm-plain" and len(argv) == 5:
        warm_plain(argv[1], argv[2], argv[3], int(argv[4]))
        return 0
    if len(argv) != 3 and not (argv and argv[0] == "warm-query"):
        sys.stderr.write(__doc__)
        return 2
    if argv and argv[0] == "warm-query" and len(argv) == 5:
        warm_query(argv[1], argv[2], argv[3], int(argv[4]))
        return 0
    command, src, arg = argv
    if command == "duckdb-ingest":
        duckdb_ingest(src, arg)
    elif command == "pandas-ingest":
        pandas_ingest(src, arg)
    elif command == "raw-query":
        raw_query(src, arg)
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
