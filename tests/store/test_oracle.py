"""A differential oracle for loads with repeated input: the loader against a reference model.

Why: kidata 0.2.5-0.2.7 lost measurements and doubled runs whenever one load held the same
runs more than once (``finalize.finish`` advanced its mask by the rows kept, not read, once a
copy crossed a batch), and no test saw it: the property tests loaded a handful of records, so
no load with duplicates ever crossed a batch, job or row-group boundary. Here every load does.

What: generated inputs of thousands of records (``tests/oracle_model.py``: Liger-Kernel runs as
JSON Lines bundles and as Liger CSV rows) with duplicates inside a file and across files, a
file and its prefix, richer duplicates (a bundle's run as a CSV row carrying its Workload and
Implementation), conflicts (a run's name with other numbers), re-published runs (a key in
several sweeps), are split into loads, in any order, with and without worker processes and
the fast path, with every size that cuts a load into pieces made small in-process (lines and
CSV rows per worker job, rows per staged batch, rows per batch of the commit's copy, rows per
row group). After every load:

- the load's report (runs added, stored rows enriched, rejected records with file and
  position) equals the model's;
- ``kidata check`` finds no problem;
- every table equals the model's projection of it (``oracle_model.PROJECTIONS``): each run
  once with its kernel, pass, implementation, GPU, documents and time; each measurement row
  exactly once (a multiset); documents by digest; the rejects exactly the conflicting
  records.

And when the input has no conflict, the final tables (every column but provenance) equal one
clean load of the distinct records (the same answers in any split and order). The CLI is
checked once, in a subprocess, at its default sizes.

Runs: the bounded run below (Hypothesis, ``derandomize=True``: the same examples every time;
a failure prints the scenario seed and the plan of loads) is part of the suite. The long run
(``-m oracle_long`` or ``KIDATA_ORACLE_LONG=1``; ``KIDATA_ORACLE_SEED``, ``KIDATA_ORACLE_EXAMPLES``,
``KIDATA_ORACLE_CONFLICTS=0``) draws many more and larger examples (up to 4,000 runs, six
loads, sizes from 7 to 400) from a random seed it prints.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, example, given, note, seed, settings
from hypothesis import strategies as st
from oracle_model import PROJECTIONS, InputFile, Model, Scenario, scenario
from test_properties import tables as full_tables  # every column but provenance

from kidata import Warehouse
from kidata.ingest import stage
from kidata.store import compaction, contexts, finalize, pqwrite, verify
from kidata.store.schema import clustered_keys

LONG = os.environ.get("KIDATA_ORACLE_LONG", "") not in ("", "0")
LONG_SEED = int(os.environ.get("KIDATA_ORACLE_SEED") or random.SystemRandom().randrange(2**32))
LONG_EXAMPLES = int(os.environ.get("KIDATA_ORACLE_EXAMPLES") or 40)
# KIDATA_ORACLE_CONFLICTS=0: conflict-free inputs only.
LONG_CONFLICTS = os.environ.get("KIDATA_ORACLE_CONFLICTS", "1") != "0"


MAX_FILES = 12  # a scenario has at most 4 + 4 files and 2 prefixes


# -- how a scenario is cut and loaded ----------------------------------------------------------

@dataclass(frozen=True)
class Sizes:
    """Every size that cuts a load into pieces, made small so that boundaries are everywhere:
    JSON lines and CSV rows per worker job (``stage.BATCH_LINES``, ``stage.POOL_ROWS``), runs
    staged per batch by the loading process (``Warehouse.load(batch_size=)``), rows per batch
    of the commit's copy of kept rows (``finalize.BATCH``: 0.2.7's bug) and rows per Parquet
    row group (``pqwrite.ROWS``, and ``compaction.ROW_GROUP`` of a merged file; a load's
    ``runs`` wait per GPU for theirs, ``finalize.CLUSTER_BYTES``: ~300 bytes a row here, less
    than one compressed part holds, so every part goes out as it comes)."""

    lines: int
    rows: int
    staged: int
    copy: int
    group: int


def sizes(least: int, most: int) -> st.SearchStrategy[Sizes]:
    one = st.integers(least, most)
    return st.builds(Sizes, one, one, one, one, one)


@dataclass(frozen=True)
class Load:
    files: list[int]  # indexes into Scenario.files, in the order given to the load
    workers: bool
    slow_path: bool
    compact: bool  # the load merges the tables' small files after its commit (2 or more)


@dataclass(frozen=True)
class Split:
    """A split of a scenario's files into loads: file ``i`` goes to load ``load_of[i]``, the
    loads commit in ``order``, a load's files are given in ``rank`` order, and load ``n`` runs
    with worker processes if ``workers[n]``, the general path only if ``slow_path[n]`` and
    merges the small files of every table after its commit if ``compact[n]`` (the automatic
    compaction at ``KIDATA_COMPACT_AT=2``)."""

    load_of: tuple[int, ...]
    order: tuple[int, ...]
    rank: tuple[int, ...]
    workers: tuple[bool, ...]
    slow_path: tuple[bool, ...]
    compact: tuple[bool, ...]

    def plan(self, n_files: int) -> list[Load]:
        loads = len(self.order)
        groups: dict[int, list[int]] = {n: [] for n in range(loads)}
        for i in range(n_files):
            groups[self.load_of[i % len(self.load_of)] % loads].append(i)
        return [Load(sorted(groups[n], key=lambda i: (self.rank[i % len(self.rank)], i)),
                     self.workers[n], self.slow_path[n], self.compact[n])
                for n in self.order if groups[n]]


@st.composite
def splits(draw, most: int) -> Split:
    loads = draw(st.integers(1, most))
    each = st.lists(st.booleans(), min_size=loads, max_size=loads)
    return Split(
        load_of=tuple(draw(st.lists(st.integers(0, loads - 1), min_size=MAX_FILES,
                                    max_size=MAX_FILES))),
        order=tuple(draw(st.permutations(range(loads)))),
        rank=tuple(draw(st.permutations(range(MAX_FILES)))),
        workers=tuple(draw(each)), slow_path=tuple(draw(each)), compact=tuple(draw(each)))


class _Settings:
    """Module sizes and ``KIDATA_*`` variables set for a while, then put back (a Hypothesis
    example cannot use pytest's function-scoped monkeypatch)."""

    def __init__(self, size: Sizes):
        self.attributes = [(stage, "BATCH_LINES", size.lines), (stage, "POOL_ROWS", size.rows),
                           (finalize, "BATCH", size.copy), (pqwrite, "ROWS", size.group),
                           # A load's runs wait per GPU for their row group: a budget of a
                           # few rows' bytes sends them out mid-batch, everywhere.
                           (finalize, "CLUSTER_BYTES", size.group * 300),
                           # Parts of over half a row group's rows wait compressed, the
                           # others as they are: both kinds, mixed in one buffer.
                           (pqwrite, "PACK_BYTES", size.group * 150),
                           (compaction, "ROW_GROUP", size.group),
                           # The sort of runs and latest_runs (pqwrite.Clustered): chunks of
                           # a few rows merged three at a time (passes) in batches of a few.
                           (pqwrite, "FAN_IN", 3),
                           (pqwrite, "MERGE_BATCH_BYTES", size.group * 100),
                           (pqwrite, "MIN_BATCH_ROWS", 1),
                           (contexts, "CHUNK_RUNS", size.rows),
                           # The stored steps DuckDB hands over at a time.
                           (contexts, "BATCH_ROWS", size.rows),
                           # The check after each load compares latest_runs a batch of
                           # loads at a time.
                           (verify, "DERIVED_BATCH_ROWS", size.rows)]
        self.saved: list = []
        self.environ = {k: os.environ.get(k)
                        for k in ("KIDATA_WORKERS", "KIDATA_SLOW_PATH", "KIDATA_COMPACT_AT",
                                  "KIDATA_CONTEXTS_AT")}

    def __enter__(self) -> _Settings:
        for module, name, value in self.attributes:
            self.saved.append((module, name, getattr(module, name)))
            setattr(module, name, value)
        return self

    def load(self, load: Load) -> None:
        """The environment of one load: workers (the default count) or none, fast path or not,
        a compaction after it or none."""
        if load.workers:
            os.environ.pop("KIDATA_WORKERS", None)
        else:
            os.environ["KIDATA_WORKERS"] = "0"
        os.environ["KIDATA_SLOW_PATH"] = "1" if load.slow_path else "0"
        os.environ["KIDATA_COMPACT_AT"] = "2" if load.compact else "0"
        # Every load stores its steps' contexts (kidata/store/contexts.py), whatever the size:
        # the check after it recomputes each stored context in use.
        os.environ["KIDATA_CONTEXTS_AT"] = "0"

    def __exit__(self, *exc) -> None:
        for module, name, value in self.saved:
            setattr(module, name, value)
        for key, value in self.environ.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def write_files(folder: Path, files: list[InputFile]) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in files:
        path = folder / f.name
        path.write_text(f.text(), encoding="utf-8")
        paths.append(str(path))
    return paths


# -- what the warehouse holds ------------------------------------------------------------------

def _column(name: str) -> str:
    return name if " " in name else f'"{name}"'  # an expression, or a quoted column


def _plain(value):
    """A value as the model writes it: times as UTC ISO text."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    return value


def projections(wh: Warehouse) -> dict[str, list]:
    """Each table's projection (:data:`oracle_model.PROJECTIONS`), sorted like the model's."""
    out = {}
    for table, columns in PROJECTIONS.items():
        rows = wh.sql(f"SELECT {', '.join(map(_column, columns))} FROM {table}").fetchall()
        out[table] = sorted((tuple(map(_plain, row)) for row in rows), key=repr)
    return out


def assert_same_tables(got: dict[str, list], want: dict[str, list], label: str) -> None:
    """Table for table, row for row as multisets; a failure shows a few rows each way."""
    assert sorted(got) == sorted(want), label
    for table in want:
        have, expected = Counter(got[table]), Counter(want[table])
        if have != expected:
            missing = list((expected - have).elements())[:5]
            extra = list((have - expected).elements())[:5]
            raise AssertionError(
                f"{label}: {table} holds {len(got[table]):,} rows, the model "
                f"{len(want[table]):,}; missing e.g. {missing}; not expected e.g. {extra}")


def assert_sorted_files(wh: Warehouse, label: str) -> None:
    """Every ``runs`` and ``latest_runs`` file holds one GPU per row group and is sorted by the
    table's keys from its first row to its last (ascending, nulls last), as its writers promise
    (:func:`kidata.store.schema.clustered_keys`)."""
    import pyarrow.parquet as pq

    for table in ("runs", "latest_runs"):
        keys = clustered_keys(table)
        for path in sorted((wh.path / table).glob("*.parquet")):
            f = pq.ParquetFile(path)
            rows = []
            for g in range(f.metadata.num_row_groups):
                group = f.read_row_group(g, columns=keys).to_pylist()
                assert len({r[keys[0]] for r in group}) <= 1, (label, path.name, g)
                rows += [tuple((r[k] is None, r[k] if r[k] is not None else 0) for k in keys)
                         for r in group]
            assert rows == sorted(rows), (label, path.name)


def check_scenario(sc: Scenario, plan: list[Load], size: Sizes) -> None:
    """Load the scenario's files as ``plan`` says, checking every load against the model
    (report, ``check``, every table); then, without conflicts, against one clean load."""
    with tempfile.TemporaryDirectory() as tmp, _Settings(size) as settings_:
        folder = Path(tmp)
        paths = write_files(folder / "in", sc.files)
        wh = Warehouse(folder / "wh")
        model = Model()
        note(f"sizes {size}; loads: " + "; ".join(
            f"{[sc.files[i].name for i in load.files]} workers={load.workers} "
            f"slow_path={load.slow_path} compact={load.compact}" for load in plan))
        for n, load in enumerate(plan, 1):
            names = ", ".join(sc.files[i].name for i in load.files)
            label = (f"load {n} of {len(plan)} ({names}; workers={load.workers}, "
                     f"slow path={load.slow_path}, compact={load.compact}, {size})")
            want = model.load([item for i in load.files for item in sc.files[i].items(paths[i])])
            settings_.load(load)
            report = wh.load([paths[i] for i in load.files], batch_size=size.staged)
            assert report.committed, label
            # Only a load drawn to compact merges (one that adds no file merges nothing).
            assert load.compact or not report.compacted, label
            assert report.runs_added == want.added, label
            assert report.enriched == want.enriched, label
            assert len(report.rejects) == report.rejected, label
            assert sorted((r.file, r.position) for r in report.rejects) == sorted(want.rejects), \
                label
            problems = wh.check().problems
            assert problems == [], (label, problems)
            assert_same_tables(projections(wh), model.tables(), label)
            assert_sorted_files(wh, label)
        if not sc.conflicts:
            distinct = sc.distinct_records()
            bare = [r for r in distinct if r.form == "bare"]
            rows = [r for r in distinct if r.form == "csv"]
            clean_files = [InputFile("all.jsonl", "jsonl", bare),
                           InputFile("all.csv", "csv", rows)]
            clean = Warehouse(folder / "clean")
            os.environ.pop("KIDATA_WORKERS", None)
            os.environ["KIDATA_SLOW_PATH"] = "0"
            assert clean.load(write_files(folder / "clean-in", clean_files)).ok
            assert_same_tables(full_tables(wh), full_tables(clean), "split vs clean load")


BOUNDED = settings(max_examples=1, deadline=None, derandomize=True, database=None,
                   phases=[Phase.explicit, Phase.generate], print_blob=False,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


BOUNDED_RUNS = 350


# Three loads, files of both formats in each, with and without workers, the fast path and a
# compaction after the load: an example every run has, whatever Hypothesis draws.
MIXED = Split(load_of=(0, 1, 2) * 4, order=(2, 0, 1), rank=tuple(range(MAX_FILES))[::-1],
              workers=(True, False, True), slow_path=(False, True, True),
              compact=(False, True, True))


# The slow lane: its loads start worker processes, and it takes ~60 s (CI runs both lanes).
@pytest.mark.slow
@pytest.mark.parametrize("conflicts", [
    pytest.param(False, id="no-conflicts"),
    # (This case found that a load compared the later records of a stored run with the
    # load's first record of it, not with the stored run: fixed in load_commit._plan.)
    pytest.param(True, id="conflicts")])
@BOUNDED
@example(scenario_seed=7, size=Sizes(16, 16, 16, 16, 16), split=MIXED)
@given(scenario_seed=st.integers(0, 2**32 - 1), size=sizes(16, 40), split=splits(3))
def test_every_load_of_repeated_runs_matches_the_model(conflicts, scenario_seed, size, split):
    note(f"scenario seed {scenario_seed} (oracle_model.scenario({scenario_seed}, "
         f"{BOUNDED_RUNS}, conflicts={conflicts}, min_file=100))")
    sc = scenario(scenario_seed, runs=BOUNDED_RUNS, conflicts=conflicts, min_file=100)
    check_scenario(sc, split.plan(len(sc.files)), size)


# -- the long run (opt-in) ---------------------------------------------------------------------

def _long_enabled(request: pytest.FixtureRequest) -> bool:
    expression = request.config.getoption("markexpr", "") or ""
    return LONG or ("oracle_long" in expression and "not oracle_long" not in expression)


@pytest.fixture
def long_run(request):
    if not _long_enabled(request):
        pytest.skip("the long oracle run: -m oracle_long or KIDATA_ORACLE_LONG=1")
    print(f"oracle long run: KIDATA_ORACLE_SEED={LONG_SEED}")


@pytest.mark.oracle_long
@seed(LONG_SEED)
@settings(max_examples=LONG_EXAMPLES, deadline=None, database=None,
          phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(scenario_seed=st.integers(0, 2**32 - 1), runs=st.integers(200, 4000),
       conflicts=st.booleans() if LONG_CONFLICTS else st.just(False), size=sizes(7, 400),
       split=splits(6))
def test_long_oracle_run(long_run, scenario_seed, runs, conflicts, size, split):
    note(f"KIDATA_ORACLE_SEED={LONG_SEED}; scenario seed {scenario_seed} "
         f"(oracle_model.scenario({scenario_seed}, {runs}, conflicts={conflicts}))")
    sc = scenario(scenario_seed, runs=runs, conflicts=conflicts)
    check_scenario(sc, split.plan(len(sc.files)), size)


# -- the installed CLI, at its default sizes --------------------------------------------------

@pytest.mark.slow
def test_cli_load_of_repeated_runs_matches_the_model(tmp_path):
    """`kidata load` of every file at once, then `kidata check`, at the default sizes: ~4,000
    records of 1,800 runs (duplicates, a prefix, richer CSV rows, conflicts) cross the
    8,192-row batch of the commit's copy and the 2,048-line job of a worker."""
    sc = scenario(20250301, runs=1800, conflicts=True, min_file=500)
    records = sum(len(f.records) for f in sc.files)
    lines = sum(len(f.records) for f in sc.files if f.format == "jsonl")
    assert 3 * records > finalize.BATCH and lines > stage.BATCH_LINES  # 3 measurements each
    paths = write_files(tmp_path, sc.files)
    model = Model()
    want = model.load([item for f, p in zip(sc.files, paths, strict=True)
                       for item in f.items(p)])
    assert want.rejects, "the scenario has conflicts"
    kidata = str(Path(sys.executable).parent / "kidata")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KIDATA_")}
    wh = tmp_path / "wh"

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([kidata, *args], capture_output=True, text=True, env=env,
                              timeout=600)

    load = cli("load", "-w", str(wh), *paths)
    assert load.returncode == 1, load.stdout + load.stderr  # conflicts are rejects: exit 1
    check = cli("check", "-w", str(wh))
    assert check.returncode == 0, check.stdout + check.stderr
    tables = list(PROJECTIONS)
    query = "SELECT " + ", ".join(f"(SELECT count(*) FROM {t}) AS {t}" for t in tables)
    counts = cli("sql", "-w", str(wh), query, "--format", "json")
    assert counts.returncode == 0, counts.stderr
    got = json.loads(counts.stdout)
    got = got[0] if isinstance(got, list) else got
    assert got == {t: len(rows) for t, rows in model.tables().items()}
    assert_same_tables(projections(Warehouse(wh)), model.tables(), "kidata load")
