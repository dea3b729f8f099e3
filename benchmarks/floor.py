#!/usr/bin/env python3
"""The load's floor: the least Python work any load of the common bundle must do per run,
beside kidata's real load and DuckDB's native flatten of the same file, side by side.

    .venv/bin/python benchmarks/floor.py DATA/bundles.ndjson [--rounds 2] [--json OUT.json]
        [--tree LABEL=PATH|git:REV ...]

Each side runs in a process of its own, in turn and ``--rounds`` times (alternating, so a busy
shared machine weighs on every side alike):

``floor``
    Read the lines; decode each bundle with msgspec (the run, environment and protocol as raw
    JSON), the run with orjson (each distinct environment text once); build the flat row
    tuples of ``runs`` and ``measurements`` with no check at all (no digest, no rule, no
    content hash, the run's document kept as the bytes given); convert them to Arrow column
    by column and write one zstd Parquet file per table. What any Python load into these two
    tables must do; kidata's rules are what it adds on top.
``floor+doc``
    The floor plus the two columns whose definition is kidata's format: the run document
    written again as JSON (``orjson.dumps``, as the flattener stores it) and the content hash
    (BLAKE2b of the sorted numbers, as the flattener computes it).
``kidata``, ``kidata-no-workers``
    ``Warehouse.load`` of the file into an empty warehouse (default workers; then
    ``KIDATA_WORKERS=0``, the single-process figure comparable to the floor's); again as
    ``kidata@LABEL`` with the kidata of each ``--tree`` (a checkout, or ``git:REV``: that
    revision of this repository, extracted for the run).
``duckdb``
    DuckDB's ``read_json`` -> Parquet ``COPY`` of the same file (``baselines.py
    duckdb-ingest``): compiled code, no validation.

Prints, per side, CPU µs per run of the work (measured inside the process after its imports;
a load's worker processes included) and of the whole process (start-up and imports included,
as ``benchmarks/run`` measures), and the ratios to the floor and to DuckDB (work CPU, the
fastest round of each side).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
from pathlib import Path

import msgspec

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

SIDES = ("floor", "floor+doc", "kidata", "kidata-no-workers", "duckdb")
BATCH = 10_000  # rows of runs per row group, as a load stages them


def _cpu() -> float:
    """CPU seconds of this process and of the children it waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


# -- the floor ------------------------------------------------------------------------------

class _Bundle(msgspec.Struct):
    run: msgspec.Raw
    environment: msgspec.Raw
    protocol: msgspec.Raw = msgspec.Raw()


def floor(src: str, out: str, document: bool = False) -> int:
    """Runs and measurements of ``src`` written to ``out``/{runs,measurements}.parquet with
    no check; returns the runs written. ``document``: also re-serialise each run document
    and compute kidata's content hash (the format-defined columns)."""
    import hashlib

    import orjson
    import pyarrow as pa
    import pyarrow.parquet as pq

    from kidata.store import pqwrite
    from kidata.store.schema import STAGED_LATENCY, TABLES, staged_schema

    decode = msgspec.json.Decoder(_Bundle).decode
    # The runs columns as a load stages them (with the document, which kidata then writes to
    # run_documents), without the staging-only ones.
    staged = staged_schema("runs")
    run_names = [n for n in staged.names if n not in ("_seq", "_position", *STAGED_LATENCY)]
    if not document:
        run_names.remove("content_hash")
    run_schema = pa.schema([staged.field(n).with_nullable(True) for n in run_names])
    m_schema = pa.schema([f.with_nullable(True) for f in TABLES["measurements"]
                          if f.name != "load_id"])
    # observed_at is converted by Arrow from the text (cast), the document from bytes.
    text_types = {"observed_at": pa.string(), "document": pa.binary()}
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    writers = (pq.ParquetWriter(folder / "runs.parquet", run_schema,
                                **pqwrite.options(run_schema)),
               pq.ParquetWriter(folder / "measurements.parquet", m_schema,
                                **pqwrite.options(m_schema)))
    environments: dict[bytes, tuple[str, str]] = {}  # text -> (gpu key, gpu name)
    runs: list[tuple] = []
    measurements: list[tuple] = []
    n = 0

    def write() -> None:
        for rows, schema, writer in ((runs, run_schema, writers[0]),
                                     (measurements, m_schema, writers[1])):
            arrays = []
            for f, column in zip(schema, zip(*rows, strict=True), strict=True):
                if f.name in text_types:
                    arrays.append(pa.array(column, type=text_types[f.name]).cast(f.type))
                else:
                    arrays.append(pa.array(column, type=f.type))
            writer.write_table(pa.Table.from_arrays(arrays, schema=schema))
            rows.clear()

    with open(src, "rb") as fh:
        for line in fh:
            if line.isspace():
                continue
            bundle = decode(line)
            run_text = bytes(bundle.run)
            run = orjson.loads(run_text)
            env_text = bytes(bundle.environment)
            gpu = environments.get(env_text)
            if gpu is None:
                hardware = orjson.loads(env_text)["spec"]["hardware"]
                name = f"{hardware['product']} {hardware['formFactor']}"
                gpu = environments[env_text] = (name.lower().replace(" ", "-"), name)
            meta, spec = run["metadata"], run["spec"]
            native = spec.get("sourceNative") or {}
            labels = meta.get("labels") or {}
            run_id = meta["name"]
            external_id = native.get("externalId")
            parts = external_id.split("/")
            kernel, pass_ = native["benchmark"].split("/")
            median = spec["timing"]["latencyNs"]["median"]
            rows = [(run_id, "latency", "median", "ns", float(median), None)]
            rows += [(run_id, m["metric"], m["statistic"], m["unit"], float(m["value"]), None)
                     for m in spec.get("measurements") or ()]
            measurements += rows
            row = [run_id, native.get("source"), external_id, kernel, pass_, parts[2],
                   labels.get("variant"), parts[4], gpu[0], gpu[1], "latency",
                   spec.get("environmentDigest"), spec.get("protocolDigest"),
                   spec.get("workloadDigest"), spec.get("implementationDigest"),
                   spec.get("observedAt"), spec.get("status"),
                   labels.get("liger_version") or labels.get("version"), meta.get("title"),
                   orjson.dumps(labels).decode() if labels else None]
            if document:
                numbers = sorted([r[1:5] for r in rows])
                row.append(hashlib.blake2b(repr(numbers).encode(), digest_size=16).hexdigest())
                row.append(orjson.dumps(run))
            else:
                row.append(run_text)
            row.append(src)
            runs.append(tuple(row))
            n += 1
            if len(runs) >= BATCH:
                write()
    if runs:
        write()
    for writer in writers:
        writer.close()
    return n


# -- one side, in its own process -------------------------------------------------------------

def side(name: str, src: str, out: str) -> None:
    """Run one side and print its work CPU seconds (after imports) as JSON."""
    if name in ("floor", "floor+doc"):
        import orjson  # noqa: F401
        import pyarrow.parquet  # noqa: F401

        import kidata.store.schema  # noqa: F401

        start = _cpu()
        runs = floor(src, out, document=name == "floor+doc")
    elif name.startswith("kidata"):
        import kidata
        from kidata import Warehouse

        where = str(Path(kidata.__file__).parent.parent)
        start = _cpu()
        report = Warehouse(out).load([src])
        runs = report.added.get("runs")
        if report.rejected:
            raise SystemExit(f"kidata rejected {report.rejected} records")
    elif name == "duckdb":
        import baselines
        import duckdb  # noqa: F401

        start = _cpu()
        baselines.duckdb_ingest(src, out)
        runs = None
    else:
        raise SystemExit(f"unknown side {name!r}; expected one of {', '.join(SIDES)}")
    print(json.dumps({"work_cpu_s": _cpu() - start, "runs": runs,
                      "kidata": where if name.startswith("kidata") else None}))


# -- side by side -----------------------------------------------------------------------------

def measure_sides(src: Path, rounds: int, sides: tuple[str, ...] = SIDES,
                  trees: dict[str, dict[str, str]] | None = None) -> dict:
    """Each side ``rounds`` times; a side ``kidata@LABEL`` (or ``kidata-no-workers@LABEL``)
    runs with ``trees[LABEL]`` added to its environment (``measure.Tree.env``)."""
    import measure  # here, not at the top: a side's process does not import it

    n = measure.records(src)
    results: dict[str, list[dict]] = {s: [] for s in sides}
    with tempfile.TemporaryDirectory(prefix="kidata-floor-") as tmp:
        for _ in range(rounds):
            for name in sides:
                out = Path(tmp) / "out"
                if name == "duckdb":
                    out = Path(tmp) / "duck.parquet"
                base, _, tree = name.partition("@")
                env = {**os.environ, **((trees or {})[tree] if tree else {})}
                if base == "kidata-no-workers":
                    env["KIDATA_WORKERS"] = "0"
                m = measure.run([sys.executable, str(Path(__file__).resolve()), "--side", base,
                                 str(src), str(out)], env=env)
                if not m.ok:
                    raise SystemExit(f"{name} failed: {m.stderr}")
                said = json.loads(m.stdout.strip().splitlines()[-1])
                work = said["work_cpu_s"]
                results[name].append({"work_us": work / n * 1e6, "kidata": said["kidata"],
                                      "process_us": m.cpu_seconds / n * 1e6,
                                      "wall_s": m.seconds, "peak_mb": m.peak_mb})
                if out.is_dir():
                    shutil.rmtree(out)
                elif out.exists():
                    out.unlink()
    return {"runs": n, "rounds": rounds, "results": results}


def table(measured: dict) -> str:
    best = {name: min(r["work_us"] for r in rs) for name, rs in measured["results"].items()}
    out = [f"{measured['runs']:,} runs, {measured['rounds']} round(s); load average "
           f"{os.getloadavg()[0]:.2f}; CPU µs per run (fastest round; all rounds in brackets)",
           "", "| side | work CPU µs/run | process CPU µs/run | wall s | × floor | × DuckDB |",
           "|---|---|---|---|---|---|"]
    for name, rs in measured["results"].items():
        fastest = min(rs, key=lambda r: r["work_us"])
        every = ", ".join(f"{r['work_us']:.1f}" for r in rs)
        ratio_floor = (f"{best[name] / best['floor']:.2f}×" if "floor" in best else "")
        ratio_duck = (f"{best[name] / best['duckdb']:.2f}×" if "duckdb" in best else "")
        base, _, tree = name.partition("@")
        label = LABELS.get(base, base) + (f" [{tree}]" if tree else "")
        out.append(f"| {label} | {fastest['work_us']:.1f} ({every}) | "
                   f"{fastest['process_us']:.1f} | {fastest['wall_s']:.2f} | {ratio_floor} | "
                   f"{ratio_duck} |")
    return "\n".join(out)


LABELS = {"floor": "no-rule floor (msgspec/orjson, tuples, Arrow, Parquet)",
          "floor+doc": "floor + document re-serialised + content hash",
          "kidata": "kidata load (default workers)",
          "kidata-no-workers": "kidata load, KIDATA_WORKERS=0",
          "duckdb": "DuckDB read_json -> Parquet COPY"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", type=Path, nargs="?", help="an NDJSON file of bundles "
                    "(benchmarks/generate.py's bundles.ndjson)")
    ap.add_argument("out", nargs="?", help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--sides", default=",".join(SIDES),
                    help=f"comma-separated, of: {', '.join(SIDES)}")
    ap.add_argument("--tree", action="append", default=[], metavar="LABEL=PATH|git:REV",
                    help="also measure kidata's loads with the kidata of this checkout, or of "
                    "git:REV, that revision of this repository (sides kidata@LABEL, "
                    "kidata-no-workers@LABEL; repeatable)")
    ap.add_argument("--json", type=Path, help="also write the raw figures here")
    ap.add_argument("--side", help=argparse.SUPPRESS)  # internal: run one side
    args = ap.parse_args(argv)
    if args.src is None:
        ap.error("SRC is required")
    if args.side:
        side(args.side, str(args.src), args.out)
        return 0
    sides = [s.strip() for s in args.sides.split(",")]
    import measure

    with measure.trees(args.tree) as trees:
        for tree in trees:
            sides += [f"{s}@{tree.label}" for s in ("kidata", "kidata-no-workers") if s in sides]
        measured = measure_sides(args.src, args.rounds, tuple(sides),
                                 {tree.label: tree.env for tree in trees})
    print(table(measured))
    if args.json:
        args.json.write_text(json.dumps(measured, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
