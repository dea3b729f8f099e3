"""Raw samples on the load path (issue 26, item 1): ``sourceNative.samples`` in the unit of
``sourceNative.unit`` become rows of the ``samples`` table, converted as the run's statistics
are; a bad sample is a reject naming the field; an unknown unit keeps the run and warns; the
fast and the general path stage the same rows; a run's samples do not depend on which of its
records (with or without samples) came first, nor on whether they came in one load; they stay
when a load is taken out, as documents do. The differential oracle (tests/store/test_oracle.py)
checks the same rules on generated loads of every split and order.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import console

from kidata import Warehouse

VIEWS = Path(__file__).parents[1] / "data" / "views"
SAMPLES = VIEWS / "samples.jsonl"


def bundles() -> list[dict]:
    return [json.loads(line) for line in SAMPLES.read_text().splitlines()]


def write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def sample_rows(wh: Warehouse) -> list[tuple]:
    return wh.sql("SELECT run_id, content_hash, metric, unit, sample, value FROM samples "
                  "ORDER BY ALL").fetchall()


def test_a_sample_that_is_no_number_is_a_reject_naming_it(tmp_path):
    records = bundles()[:2]
    records[0]["run"]["spec"]["sourceNative"]["samples"][3] = "fast"
    records[1]["run"]["spec"]["sourceNative"]["samples"][0] = -0.012
    wh = Warehouse(tmp_path / "wh")
    report = wh.load([str(write(tmp_path / "bad.jsonl", records))])
    assert [(r.position, r.field, r.reason) for r in report.rejects] == [
        ("line 1", "run.spec.sourceNative.samples[3]",
         "expected a positive number (a raw sample), got 'fast'"),
        ("line 2", "run.spec.sourceNative.samples[0]",
         "expected a positive number (a raw sample), got -0.012")]
    assert report.runs_added == 0 and sample_rows(wh) == []


def test_an_unknown_unit_keeps_the_run_and_says_its_samples_were_not_kept(tmp_path):
    records = bundles()[:2]
    records[0]["run"]["spec"]["sourceNative"]["unit"] = "furlongs"
    del records[1]["run"]["spec"]["sourceNative"]["unit"]
    wh = Warehouse(tmp_path / "wh")
    report = wh.load([str(write(tmp_path / "odd.jsonl", records))])
    assert report.ok and report.runs_added == 2
    assert sample_rows(wh) == []
    assert any("9 samples of run sa-w1-liger not kept: sourceNative.unit 'furlongs'" in w
               for w in report.warnings), report.warnings
    assert any("9 samples of run sa-w1-torch not kept: sourceNative.unit None" in w
               for w in report.warnings), report.warnings


def test_the_fast_and_the_general_path_keep_the_same_samples(tmp_path, monkeypatch):
    # The oracle's bundles are the common shape the fast path takes (run, protocol,
    # environment); a third of its runs carry samples in ms.
    sys.path.insert(0, str(Path(__file__).parents[1]))
    from oracle_model import scenario

    sc = scenario(7, runs=90, conflicts=False)
    lines = [r.json_line() for f in sc.files if f.format == "jsonl" for r in f.records]
    path = tmp_path / "bundles.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    fast = Warehouse(tmp_path / "fast")
    assert fast.load([str(path)]).fast_path == len(lines)
    monkeypatch.setenv("KIDATA_SLOW_PATH", "1")
    slow = Warehouse(tmp_path / "slow")
    assert slow.load([str(path)]).fast_path == 0
    assert sample_rows(fast) == sample_rows(slow)
    assert len(sample_rows(fast)) >= 3 * 10, "too few sampled runs to compare"


def without_samples(record: dict) -> dict:
    copy = json.loads(json.dumps(record))
    native = copy["run"]["spec"]["sourceNative"]
    del native["samples"], native["unit"]
    return copy


@pytest.mark.parametrize("order", ["with first", "without first", "two loads", "two loads, "
                                   "without first"])
def test_a_runs_samples_do_not_depend_on_which_record_came_first(tmp_path, order):
    records = bundles()
    bare = [without_samples(r) for r in records]
    wh = Warehouse(tmp_path / "wh")
    first, second = (bare, records) if "without first" in order else (records, bare)
    if order.startswith("two loads"):
        assert wh.load([str(write(tmp_path / "a.jsonl", first))]).ok
        report = wh.load([str(write(tmp_path / "b.jsonl", second))])
    else:
        report = wh.load([str(write(tmp_path / "ab.jsonl", first + second))])
    assert report.ok
    reference = Warehouse(tmp_path / "reference")
    reference.load([str(SAMPLES)])
    assert sample_rows(wh) == sample_rows(reference)
    assert wh.check().ok


def test_samples_stay_when_their_load_is_taken_out_and_are_not_doubled_by_a_reload(tmp_path):
    wh = Warehouse(tmp_path / "wh")
    wh.load([str(SAMPLES)])
    kept = sample_rows(wh)
    [(load_id,)] = wh.sql("SELECT load_id FROM loads").fetchall()
    proc = console("unload", load_id, "--warehouse", wh.path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert wh.sql("SELECT count(*) FROM runs").fetchall() == [(0,)]
    assert sample_rows(wh) == kept  # facts about (run id, numbers), as documents are
    # Nothing reads them without their run: the views join on run_id and content_hash.
    assert wh.sql("SELECT count(*) FROM sample_medians").fetchall() == [(0,)]
    report = wh.load([str(SAMPLES)])
    assert report.runs_added == 11 and report.added.get("samples", 0) == 0
    assert sample_rows(wh) == kept
    assert wh.sql("SELECT count(*) FROM sample_medians").fetchall() == [(11,)]
    assert wh.check().ok


def test_two_records_samples_are_never_mixed(tmp_path):
    # The same run (same numbers) twice, with lists of 9 and of 12 samples: the first record
    # that has samples gives all of them, and the second adds none (not its samples 10-12).
    first = bundles()[0]
    second = json.loads(json.dumps(first))
    second["run"]["spec"]["sourceNative"]["samples"] = [10.0] * 12
    wh = Warehouse(tmp_path / "wh")
    report = wh.load([str(write(tmp_path / "twice.jsonl", [first, second]))])
    assert report.ok and report.duplicates == 1
    got = [v for (*_, v) in sample_rows(wh)]
    assert got == [9600, 10000, 9800, 10200, 9900, 10100, 9700, 10300, 10000]
    # A later load of the other list adds nothing either: the run has its samples.
    wh.load([str(write(tmp_path / "again.jsonl", [second]))])
    assert [v for (*_, v) in sample_rows(wh)] == got


def test_a_load_without_samples_gives_the_table_its_one_empty_file(tmp_path):
    # Plain Spark infers a table's schema from its files (docs/spark.md): without a file,
    # sample_medians and every view reading it (speedups, trends...) could not be defined.
    import pyarrow.parquet as pq

    from kidata.store.schema import TABLES

    seeds = Path(__file__).parents[1] / "data" / "seeds"
    wh = Warehouse(tmp_path / "wh")
    assert wh.load([str(seeds)]).ok
    [empty] = list((wh.path / "samples").glob("*.parquet"))
    table = pq.read_table(empty)
    assert table.num_rows == 0 and table.schema.names == TABLES["samples"].names
    assert wh.load([str(VIEWS / "single.jsonl")]).ok  # the table has a file: none added
    assert list((wh.path / "samples").glob("*.parquet")) == [empty]
    assert wh.check().ok


@pytest.mark.parametrize("unit", ["ns", "us", "µs", "ms", "s", "ms/iter", "tflops", "MB"])
def test_samples_convert_exactly_as_the_statistics_do(unit):
    # The builder converts a statistic with Decimal arithmetic (latency to ns, the rest as
    # given) and keeps 6 decimals; the samples' converter (a fast path for whole numbers)
    # must give the same number, worked out here independently.
    import random
    from decimal import Decimal

    from kidata.ingest import units

    scale = {"ns": 1, "us": 10 ** 3, "µs": 10 ** 3, "ms": 10 ** 6, "s": 10 ** 9,
             "ms/iter": 10 ** 6}.get(unit, 1)
    rng = random.Random(unit)
    values = [rng.randrange(1, 10 ** 12) for _ in range(200)] + \
        [rng.uniform(1e-6, 1e6) for _ in range(200)] + [2 ** 53 - 1, 2 ** 53 + 1, 0.1, 1e-30]
    convert = units.converter(unit)
    for v in values:
        exact = Decimal(repr(v) if isinstance(v, float) else v) * scale
        want = int(exact) if exact == exact.to_integral_value() and exact < 2 ** 53 \
            else round(float(exact), 6)
        got = convert(v)
        assert got == want and type(got) is type(want), (v, got, want)
    assert [convert(v) for v in (0, -3, True, "7", None, float("inf"), 10 ** 31)] == [None] * 7
