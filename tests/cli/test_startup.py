"""Start-up: what each command imports. Seconds are measured by benchmarks/run; here, that
the heavy libraries stay out of the commands that do not need them (each one costs a fifth of
a second or more of every invocation)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kidata import Warehouse
from kidata.store import reference

# The slow lane (times fresh kidata processes); `pytest -m "not slow"` skips it.
pytestmark = pytest.mark.slow

SEEDS = Path(__file__).parents[1] / "data" / "seeds"
HEAVY = ("duckdb", "pyarrow", "pandas", "polars", "numpy")

RUN = """
import json, sys
args, heavy = json.loads(sys.argv[1]), set(json.loads(sys.argv[2]))
sys.argv = ["kidata", *args]
from kidata.cli import main
try:
    main()
except SystemExit:
    pass
found = sorted({m.split(".")[0] for m in sys.modules} & heavy)
sys.stderr.write("\\nIMPORTED " + json.dumps(found) + "\\n")
"""


def imported(*args: str) -> tuple[list[str], str]:
    """The heavy top-level packages ``kidata ARGS`` imported, and what it printed."""
    done = subprocess.run([sys.executable, "-c", RUN, json.dumps(args), json.dumps(HEAVY)],
                          capture_output=True, text=True, timeout=120)
    line = [x for x in done.stderr.splitlines() if x.startswith("IMPORTED ")]
    assert line, done.stderr
    return json.loads(line[-1].removeprefix("IMPORTED ")), done.stdout


@pytest.mark.parametrize("args", [["--help"], ["views"], ["sql", "--help"]])
def test_help_and_views_import_no_engine(args):
    modules, out = imported(*args)
    assert out.strip()
    assert modules == []


def test_a_query_imports_duckdb_only(tmp_path):
    wh = tmp_path / "wh"
    Warehouse(wh).load([str(SEEDS)])
    modules, out = imported("sql", "-w", str(wh), "--format", "csv",
                            "select count(*) as n from speedups")
    assert out.splitlines()[1] != "0"
    assert modules == ["duckdb"]
    # A warehouse whose reference files were written by another kidata (or by hand) is
    # answered from the packaged tables: then pyarrow is needed, and the answer is the same.
    for name in reference.REFERENCE:
        (wh / name / reference.FILE).unlink()
    modules, again = imported("sql", "-w", str(wh), "--format", "csv",
                              "select count(*) as n from speedups")
    assert again == out
    assert "pyarrow" in modules


# Imported by a query process before these changes, and not needed to answer one: typer's
# Pydantic coercion of option values (~0.15 s; kidata.console.PlainValues), rich for a table of
# plain text (kidata.query.output), filelock, the readers and the thread pool (loads only).
NOT_FOR_A_QUERY = ("pydantic", "pydantic_core", "rich", "filelock", "pyarrow", "polars",
                   "pandas", "numpy", "kidata.ingest.readers", "kidata.ingest.stage",
                   "concurrent.futures")


@pytest.mark.parametrize("fmt", ["table", "csv"])
def test_a_query_imports_nothing_it_does_not_use(tmp_path, fmt):
    wh = tmp_path / "wh"
    Warehouse(wh).load([str(SEEDS)])
    done = subprocess.run([sys.executable, "-c", FULL_NAMES, json.dumps(
        ["-w", str(wh), "sql", "--format", fmt, "--max-rows", "5",
         "select gpu, candidate, baseline, geomean_speedup from speedup_summary"]),
        json.dumps(NOT_FOR_A_QUERY)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "trainkernel" in done.stdout  # it answered (the seeds' candidate)
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_a_bad_option_value_gets_typers_message(tmp_path):
    # Plain values skip typer's Pydantic coercion; anything else still goes through it.
    Warehouse(tmp_path / "wh").load([str(SEEDS)])
    bad = subprocess.run([sys.executable, "-m", "kidata", "-w", str(tmp_path / "wh"), "sql",
                          "--max-rows", "many", "select 1"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert "Invalid value for '--max-rows'" in bad.stderr


FULL_NAMES = """
import json, sys
args, heavy = json.loads(sys.argv[1]), json.loads(sys.argv[2])
sys.argv = ["kidata", *args]
from kidata.cli import run
from kidata._imports import refuse_pandas
refuse_pandas()
code = run()
assert code == 0, code
sys.stdout.write("\\n")
print(json.dumps(sorted(m for m in heavy if m in sys.modules)))
"""


def test_reference_files_carry_their_fingerprint(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    wh = tmp_path / "wh"
    Warehouse(wh).load([str(SEEDS)])
    assert reference.stale(wh) == []
    gpus = wh / "gpus" / reference.FILE
    meta = pq.read_schema(gpus).metadata
    assert meta[reference.FINGERPRINT_KEY.encode()] == reference.fingerprint("gpus").encode()
    # Same rows, no fingerprint (as written by kidata 0.2.0 or by hand): stale.
    pq.write_table(pq.read_table(gpus).replace_schema_metadata(None), gpus)
    assert reference.stale(wh) == ["gpus"]
    # A fingerprint of other data: stale.
    table = reference.tables()["gpus"]
    pq.write_table(table.replace_schema_metadata(
        {reference.FINGERPRINT_KEY: reference.fingerprint("dtypes")}), gpus)
    assert reference.stale(wh) == ["gpus"]
    # Not Parquet at all: stale, and the query still answers from the packaged data.
    gpus.write_bytes(b"not parquet")
    assert reference.stale(wh) == ["gpus"]
    assert Warehouse(wh).sql("select count(*) from gpus").fetchall() == [(table.num_rows,)]
    # The next load writes it back, fingerprint included.
    Warehouse(wh).load([str(SEEDS)])
    assert reference.stale(wh) == []
    assert pq.read_table(gpus).equals(table)
    assert isinstance(pq.read_table(gpus), pa.Table)


def test_fingerprint_follows_the_packaged_rows(monkeypatch):
    before = reference.fingerprint("dtypes")
    gpus = reference.fingerprint("gpus")
    rows = {k: [dict(r) for r in v] for k, v in reference.rows().items()}
    rows["dtypes"][0]["bytes"] += 1
    reference._fingerprint.cache_clear()
    monkeypatch.setattr(reference, "rows", lambda: rows)
    try:
        assert reference.fingerprint("dtypes") != before
        assert reference.fingerprint("gpus") == gpus
    finally:
        reference._fingerprint.cache_clear()


def test_reloading_unchanged_files_imports_no_pyarrow(tmp_path):
    # A re-load of files already loaded skips them unread: it is start-up and bookkeeping
    # only, so it must not pay for pyarrow (a fifth of a second) either.
    wh = tmp_path / "wh"
    first = Warehouse(wh).load([str(SEEDS)])
    assert first.runs_added > 0
    modules, out = imported("load", "-w", str(wh), str(SEEDS))
    assert "0 runs added" in out and f"{first.runs_added:,} duplicates skipped" in out
    assert modules == ["duckdb"]
    # Files not loaded before (here the same runs under other names) are read: then the load
    # needs pyarrow, and finds the runs duplicates.
    extra = tmp_path / "more"
    shutil.copytree(SEEDS, extra)
    modules, out = imported("load", "-w", str(wh), str(extra))
    assert "pyarrow" in modules and "0 runs added" in out


WORKER = """
import json, sys, tempfile
from kidata._imports import refuse_pandas
refuse_pandas()  # as kidata.ingest.stage_worker.serve, a worker's entry point, does
from kidata.ingest.readers import Lines
from kidata.ingest.stage_worker import WorkerState
lines = [(1, sys.argv[1].encode())]
with tempfile.TemporaryDirectory() as folder:
    events = WorkerState(folder, 100, []).run(1, 1, [(Lines("a.jsonl", None, lines), "a.jsonl")])
    assert events.counts["a.jsonl"].runs == 1, events.counts  # the run was staged
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"duckdb", "pandas", "polars"})
print(json.dumps(heavy))
"""


def test_a_load_worker_imports_no_duckdb():
    # Each worker process of a load would hold DuckDB's 16 MB for nothing: the staging peak
    # (the loading process and its workers at once) is the load's memory peak.
    bundle = json.loads((SEEDS / "000_ef9e0295e36a82ef.txt").read_text().split("\n", 2)[2])
    done = subprocess.run([sys.executable, "-c", WORKER, json.dumps(bundle)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
