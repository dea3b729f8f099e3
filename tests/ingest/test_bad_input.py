"""The corpus of bad input (tests/data/bad/, written by tests/make_bad_corpus.py).

For every case: the message names the file, the record and the field and says what was
expected; the exit code is 1; the good records in the same file (or, where a broken file has
none, in the next file of the same load) still load; the reject is kept in the ``rejects``
table and listed by ``kidata rejects``. No input crashes kidata or hangs it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from kidata import Warehouse

DATA = Path(__file__).parents[1] / "data"
BAD = DATA / "bad"
SEED0 = DATA / "seeds" / "000_ef9e0295e36a82ef.txt"
SEED1 = DATA / "seeds" / "001_74c4a9a5654eeb33.txt"
# The two seed runs; the CSV rows they were made from give the same run ids.
RUN0 = ("liger-rms-norm-forward-liger-nvidia-a100-sxm4-80gb-hidden4096-rows2048-bf16-"
        "2024-09-03-15-39-30")
RUN1 = ("liger-relu-squared-backward-torch-nvidia-h100-80gb-hbm3-hidden4096-rows4096-bf16-"
        "2026-03-27-06-09-46")
BOTH = {RUN0, RUN1}


def column_of(name: str, token: str, line: int = 2) -> int:
    """1-based column of ``token`` on a line of a corpus file (read from the input)."""
    return (BAD / name).read_text("utf-8").splitlines()[line - 1].index(token) + 1


@dataclass
class Case:
    file: str
    position: str
    field: str | None
    reason: str
    good: set[str]  # runs in the warehouse afterwards
    also: Path | None = None  # a second input of the same load, for files with no good record
    exact: bool = True  # False: `reason` is the start of the message


NOT_POSITIVE = "expected a finite number > 0, got"
# -2**63 and 2**64 - 1: the integers orjson keeps as integers.
INT_KEPT = "kidata keeps integers from -9223372036854775808 to 18446744073709551615"
WIDE_REASON = (f"integer 123456789012345678901234567890 is beyond 64 bits ({INT_KEPT}); it "
               "would be changed when stored, so the record is rejected; write it as a string "
               "or a float")
CASES = [
    # Broken JSON. The bad line is line 2, between seed 000 (line 1) and seed 001 (line 3).
    # truncated_line: seed 000 renamed, cut after 300 characters: the data ends at column 301.
    Case("truncated_line.jsonl", "line 2", None,
         "invalid JSON: unexpected end of data: line 1 column 301 (char 300)", BOTH),
    # A pretty-printed bundle after a title line and a blank line (so it starts on line 3),
    # cut at 60%: no record in the file is good, seed 001 comes from the next file.
    Case("truncated_document.json", "line 3", None, "invalid JSON: unexpected end of data",
         {RUN1}, SEED1, exact=False),
    # The broken record first: the records after it are still read as JSON Lines.
    Case("bad_first_line.jsonl", "line 1", None,
         "invalid JSON: unexpected end of data: line 1 column 301 (char 300)", BOTH),
    Case("nan_latency.jsonl", "line 2", None,
         f"invalid JSON: NaN at line 1 column {column_of('nan_latency.jsonl', 'NaN')} is not "
         "a number JSON allows; expected a finite number", BOTH),
    Case("infinite_latency.jsonl", "line 2", None,
         f"invalid JSON: Infinity at line 1 column "
         f"{column_of('infinite_latency.jsonl', 'Infinity')} is not a number JSON allows; "
         "expected a finite number", BOTH),
    Case("negative_infinite_p80.jsonl", "line 2", None,
         f"invalid JSON: -Infinity at line 1 column "
         f"{column_of('negative_infinite_p80.jsonl', '-Infinity')} is not a number JSON "
         "allows; expected a finite number", BOTH),
    Case("number_too_large.jsonl", "line 2", None,
         f"invalid JSON: the number at line 1 column "
         f"{column_of('number_too_large.jsonl', '1e400')} is too large for a 64-bit float; "
         "expected a finite number", BOTH),
    # 100,000 '[' then 100,000 ']': refused at depth 1,025 (orjson allows 1,024), column 1026.
    Case("deep_nesting.jsonl", "line 2", None,
         "invalid JSON: nested deeper than 1,024 levels at line 1 column 1026", BOTH),
    Case("not_an_object.jsonl", "line 2", None,
         "expected a JSON object (a bundle or a document), got an array", BOTH),
    Case("not_a_bundle.jsonl", "line 2", None,
         "not a kernelindex bundle or document: expected a 'kind' key or bundle keys "
         "run/protocol/environment (found keys: hello)", BOTH),
    Case("invalid_utf8.jsonl", "line 2", None, "invalid JSON: not UTF-8 text", BOTH),
    # 4 KiB of random bytes starting 0x80: not JSON, not a title line.
    Case("binary.bin", "line 1", None, "not UTF-8 text: the file is not kernelindex JSON",
         {RUN1}, SEED1),
    Case("empty.jsonl", "document", None, "empty file: no records", {RUN1}, SEED1),
    Case("blank_lines.jsonl", "document", None, "empty file: no records", {RUN1}, SEED1),
    # Wrong types and values.
    Case("string_latency.jsonl", "line 2", "run.spec.timing.latencyNs.median",
         "expected a number, got '31072'", BOTH),
    Case("boolean_latency.jsonl", "line 2", "run.spec.timing.latencyNs.median",
         "expected a number, got True", BOTH),
    Case("spec_is_a_list.jsonl", "line 2", "run.spec", "expected an object, got []", BOTH),
    # A text field given a number or a list: rejected, not an Arrow error that fails the load.
    Case("title_not_a_string.jsonl", "line 2", "run.metadata.title",
         "expected a string, got 5", BOTH),
    Case("environment_vendor_a_list.jsonl", "line 2", "environment.spec.hardware.vendor",
         "expected a string, got ['nvidia']", BOTH),
    Case("label_not_a_string.jsonl", "line 2", "run.metadata.labels",
         "expected an object of strings", BOTH),
    Case("negative_latency.jsonl", "line 2", "run.spec.timing.latencyNs.median",
         f"{NOT_POSITIVE} -31072", BOTH),
    Case("zero_latency.jsonl", "line 2", "run.spec.timing.latencyNs.median",
         f"{NOT_POSITIVE} 0", BOTH),
    Case("negative_p20.jsonl", "line 2", "run.spec.measurements[0].value",
         f"{NOT_POSITIVE} -1", BOTH),
    # A third measurement (index 2) of memory, 0 MB.
    Case("zero_memory.jsonl", "line 2", "run.spec.measurements[2].value",
         f"{NOT_POSITIVE} 0", BOTH),
    Case("unknown_unit.jsonl", "line 2", "run.spec.measurements[0].unit",
         "unknown unit 'furlongs' for latency; expected one of ns, us, µs, ms, s", BOTH),
    # p20 set to 40000 ns while the median is 31072 ns.
    Case("quantiles_out_of_order.jsonl", "line 2", "run.spec.measurements",
         "quantiles out of order for latency: p20 = 40000 is above median = 31072; expected "
         "p20 <= median <= p80", BOTH),
    Case("bad_timestamp.jsonl", "line 2", "run.spec.observedAt",
         "expected an ISO 8601 timestamp such as 2024-09-03T15:39:30Z, got 'yesterday'", BOTH),
    Case("timestamp_without_zone.jsonl", "line 2", "run.spec.observedAt",
         "timestamp '2024-09-03T15:39:30' has no time zone; expected e.g. a trailing Z", BOTH),
    # Kinds, versions, digests, identities.
    Case("unknown_kind.jsonl", "line 2", "kind",
         "unknown kind 'BenchmarkResult'; expected one of BenchmarkRun, BenchmarkProtocol, "
         "ExecutionEnvironment, Workload, Implementation", BOTH),
    Case("wrong_api_version.jsonl", "line 2", "run.apiVersion",
         "expected 'kernelindex.dev/v1alpha1', got 'kernelindex.dev/v2'", BOTH),
    Case("malformed_digest.jsonl", "line 2", "run.spec.protocolDigest",
         "expected 'sha256:' and 64 hex digits, got 'md5:abc'", BOTH),
    # The protocol's timer changed after hashing: seed 000 declares a79eaf4d…
    Case("tampered_protocol.jsonl", "line 2", "run.spec.protocolDigest",
         "digest mismatch: the run declares sha256:a79eaf4df66c97c6adc1fb2d09df78682155d1ea86"
         "652ae0b70199875bde7747 but the protocol document in the record hashes to sha256:",
         BOTH, exact=False),
    # The environment's architecture changed after hashing: seed 000 declares 90c9e276…
    Case("tampered_environment.jsonl", "line 2", "run.spec.environmentDigest",
         "digest mismatch: the run declares sha256:90c9e2764222f592477cfccf3373519add5a1b8815"
         "63956ad058c4f99e41b6b9 but the environment document in the record hashes to sha256:",
         BOTH, exact=False),
    Case("conflict_in_file.jsonl", "line 2", "run.metadata.name",
         f"conflict: run {RUN0} appears earlier in this load ({BAD / 'conflict_in_file.jsonl'}"
         ", line 1) with different numbers", BOTH),
    # Hostile input (issue 17): each aborted the whole load with a traceback, or loaded
    # something other than what was written, or lost good records.
    # 300 nested lists at run.spec.extra: orjson reads 1,024 levels but writes 254.
    Case("deep_300.jsonl", "line 2", "run.spec.extra[0][0][0]…",
         "nested deeper than 254 levels; kidata stores documents up to 254 levels deep", BOTH),
    # 23:59:59 at UTC-1 on 9999-12-31 is 00:59:59 on 10000-01-01 in UTC.
    Case("far_timestamp.jsonl", "line 2", "run.spec.observedAt",
         "timestamp '9999-12-31T23:59:59-01:00' is outside years 1-9999 once converted to UTC",
         BOTH),
    # 123456789012345678901234567890 > 2**64 - 1 = 18446744073709551615; the run declares the
    # protocol's digest under the documented rule (kernelindex.md), which keeps the integer.
    Case("wide_integer.jsonl", "line 2", "protocol.spec.big", WIDE_REASON, BOTH),
    # The same record declaring the digest of the float-rounded document: refused the same way
    # (0.2.2 accepted it and stored 1.2345678901234568e+29).
    Case("wide_integer_float_digest.jsonl", "line 2", "protocol.spec.big", WIDE_REASON, BOTH),
    Case("run_null.jsonl", "line 2", "run",
         "expected a BenchmarkRun document (an object), got null", BOTH),
    # gzip with stored blocks cut 300 bytes into line 3: lines 1-2 (seeds 000 and 001, 4,739
    # bytes: len(jsonl(S0, S1))) are complete and load.
    Case("truncated.jsonl.gz", "line 3", None,
         "the gzip data is cut short (a truncated file) after 4,739 bytes of data (2 complete "
         "lines, all read); the incomplete line 3 after it (300 bytes) is not read", BOTH),
    # The two seeds gzipped, then 'garbage\n': the seeds load, the garbage is one reject.
    Case("trailing_garbage.jsonl.gz", "file", None,
         "the gzip data is followed by bytes that are not gzip (trailing garbage, not read) "
         "after 4,739 bytes of data (2 complete lines, all read)", BOTH),
    # 2**64 = 18446744073709551616, one more than the widest integer kept.
    Case("csv_x_value_wide.csv", "row 2", "x_value",
         f"integer 18446744073709551616 is beyond 64 bits ({INT_KEPT})", BOTH),
    Case("csv_config_wide.csv", "row 2", "extra_benchmark_config_str",
         f"integer 18446744073709551616 is beyond 64 bits ({INT_KEPT})", BOTH),
    Case("csv_config_1e400.csv", "row 2", "extra_benchmark_config_str",
         "the number 1e400 is too large for a 64-bit float; expected a finite number", BOTH),
    Case("csv_far_timestamp.csv", "row 2", "timestamp",
         "time '9999-12-31 23:59:59-01:00' is outside years 1-9999 once converted to UTC", BOTH),
    # CSV (the Liger-Kernel reader): row 2 is seed 000's row for H = 8192, broken.
    Case("csv_missing_column.csv", "header", "gpu_name",
         "missing column gpu_name; expected the Liger-Kernel benchmark CSV columns "
         "kernel_name, kernel_provider, kernel_operation_mode, metric_name, metric_unit, "
         "x_name, x_label, x_value, y_value_50, y_value_20, y_value_80, "
         "extra_benchmark_config_str, gpu_name, timestamp, liger_version", {RUN1}, SEED1),
    # The short row keeps its first 10 fields: y_value_80 (the 11th column) is the first
    # one missing.
    Case("csv_short_row.csv", "row 2", "y_value_80",
         "short row: 10 fields, the header has 15", BOTH),
    Case("csv_non_numeric.csv", "row 2", "y_value_80", "expected a number, got 'abc'", BOTH),
    Case("csv_nan.csv", "row 2", "y_value_50",
         "expected a finite number > 0, got 'nan' (upstream writes nan when a benchmark "
         "produced no result)", BOTH),
    Case("csv_bad_timestamp.csv", "row 2", "timestamp",
         "expected a time such as 2024-09-03 15:39:30, got 'yesterday'", BOTH),
    Case("csv_unknown_unit.csv", "row 2", "metric_unit",
         "expected a time unit for speed (ms, us, ns, s), got 'fortnights'", BOTH),
]


def rejected_line(path: Path, case: Case) -> str:
    where = f"{path}, {case.position}" + (f", field {case.field}" if case.field else "")
    return f"rejected: {where}: {case.reason}"


def runs(wh: Warehouse) -> set[str]:
    return {r[0] for r in wh.sql("select run_id from runs").fetchall()}


def test_the_corpus_has_at_least_25_bad_cases():
    assert len(CASES) >= 25
    stored = {p.name for p in BAD.iterdir() if not p.name.startswith(("ok_", "README"))}
    assert stored == {c.file for c in CASES} | {"conflict_with_loaded.jsonl"}


@pytest.mark.parametrize("case", CASES, ids=[c.file for c in CASES])
def test_bad_record_is_rejected_and_the_good_ones_load(case: Case, cli, wh: Warehouse):
    path = BAD / case.file
    result = cli("load", path, *([case.also] if case.also else []))
    assert result.code == 1
    expected = rejected_line(path, case)
    lines = [line for line in result.err.splitlines() if line.startswith("rejected: ")]
    assert len(lines) == 1
    assert lines[0] == expected if case.exact else lines[0].startswith(expected)
    assert "Traceback" not in result.err
    assert runs(wh) == case.good
    # Kept in the warehouse with its position, field and reason.
    kept = wh.sql("select source_file, position, field, reason from rejects").fetchall()
    assert len(kept) == 1
    assert kept[0][:3] == (str(path), case.position, case.field)
    assert kept[0][3] == case.reason if case.exact else kept[0][3].startswith(case.reason)


@pytest.fixture(scope="module")
def seed0_loaded(tmp_path_factory) -> Path:
    """A warehouse holding seed 000, loaded once by the CLI; tests copy it."""
    from kidata.cli import run as cli_run

    path = tmp_path_factory.mktemp("seed0") / "wh"
    assert cli_run(["-w", str(path), "load", "-q", str(SEED0)]) == 0
    return path


@pytest.fixture
def with_seed0(seed0_loaded: Path, wh_path: Path) -> None:
    shutil.copytree(seed0_loaded, wh_path, dirs_exist_ok=True)


def test_conflict_with_a_run_already_loaded(with_seed0, cli, wh: Warehouse):
    path = BAD / "conflict_with_loaded.jsonl"  # seed 001, then seed 000 with median 31073
    result = cli("load", path)
    assert result.code == 1
    assert (f"rejected: {path}, line 2, field run.metadata.name: conflict: run {RUN0} is "
            f"already in the warehouse, loaded from {SEED0}, with different numbers"
            ) in result.err
    assert runs(wh) == BOTH
    assert wh.sql("select value from measurements where run_id = $r and statistic = 'median'",
                  {"r": RUN0}).fetchall() == [(31072.0,)]


@pytest.mark.parametrize("name, loaded", [
    ("ok_bom_crlf.jsonl", BOTH),  # BOM, then seeds 000 and 001 as JSON Lines with CRLF
    ("ok_bom_crlf_document.json", {RUN0}),  # BOM, title line, indented seed 000, CRLF
    ("ok_bom_crlf.csv", BOTH),  # BOM, header and the two seed rows, CRLF
])
def test_bom_and_crlf_load(name: str, loaded: set[str], cli, wh: Warehouse):
    result = cli("load", BAD / name)
    assert result.code == 0, result.err
    assert result.err == ""
    assert runs(wh) == loaded
    assert wh.sql("select count(*) from rejects").fetchall() == [(0,)]


def test_unknown_gpu_is_a_warning_not_a_reject(cli, wh: Warehouse):
    path = BAD / "ok_unknown_gpu.jsonl"
    result = cli("load", path)
    assert result.code == 0
    assert (f"warning: unknown GPU 'NVIDIA Quantum Z9 PCIe' in 1 record (the first: {path}, "
            "line 1); loaded under the derived key 'quantum-z9-pcie', without peaks.") \
        in result.err
    assert "$KIDATA_GPUS" in result.err and "kidata/data" not in result.err
    assert wh.sql("select gpu from runs").fetchall() == [("quantum-z9-pcie",)]
    assert "1 warnings" in result.out


def test_strict_loads_nothing_when_anything_would_be_rejected(cli, wh: Warehouse):
    path = BAD / "truncated_line.jsonl"
    result = cli("load", "--strict", path)
    assert result.code == 1
    assert "strict: nothing loaded; 1 of 3 records would be rejected" in result.out
    for table in ("runs", "measurements", "rejects", "loads"):
        assert wh.sql(f"select count(*) from {table}").fetchall() == [(0,)]
    assert not list((wh.path / "runs").glob("*.parquet"))


def test_strict_also_refuses_a_conflict_found_at_commit(with_seed0, cli, wh: Warehouse):
    result = cli("load", "--strict", BAD / "conflict_with_loaded.jsonl")
    assert result.code == 1
    assert "strict: nothing loaded; 1 of 2 records would be rejected" in result.out
    assert runs(wh) == {RUN0}  # seed 001, the good record of that file, is not loaded either


def test_a_100_mb_line_is_rejected_keeping_64_kib_and_the_rest_loads(tmp_path, cli, wh):
    path = tmp_path / "huge.jsonl"
    with open(path, "wb") as fh:
        fh.write(SEED0.read_bytes().split(b"\n", 2)[2].replace(b"\n", b"") + b"\n")
        fh.write(b'{"x": "' + b"a" * (100 * 1024 * 1024 - 9) + b'"}\n')  # 100 MiB + newline
        fh.write(SEED1.read_bytes().split(b"\n", 2)[2].replace(b"\n", b"") + b"\n")
    result = cli("load", path)
    assert result.code == 1
    # 100 MiB = 104,857,600 bytes, plus the newline.
    assert (f"rejected: {path}, line 2: record of 104,857,601 bytes is longer than the 16 MiB "
            "limit; not read (its first 64 KiB are kept in rejects.raw)") in result.err
    assert runs(wh) == BOTH
    [(raw,)] = wh.sql("select raw from rejects").fetchall()
    assert len(raw) == 64 * 1024 and raw.startswith('{"x": "aaa')


def test_raw_text_of_a_rejected_line_is_kept(cli, wh: Warehouse):
    path = BAD / "nan_latency.jsonl"
    assert cli("load", path).code == 1
    [(raw,)] = wh.sql("select raw from rejects").fetchall()
    assert raw == path.read_text("utf-8").splitlines()[1]
    shown = cli("rejects", "--raw", "--format", "json")
    assert shown.code == 0
    [listed] = json.loads(shown.out)
    assert (listed["source_file"], listed["position"], listed["field"], listed["raw"]) == (
        str(path), "line 2", None, raw)
    assert listed["reason"].startswith("invalid JSON: NaN at line 1 column")
    plain = cli("rejects", "--file", str(path), "--format", "csv")
    assert plain.out.splitlines()[0] == "loaded_at,load_id,source_file,position,field,reason"


def test_rejects_are_kept_once_when_the_same_load_runs_again(cli, wh: Warehouse):
    path = BAD / "truncated_line.jsonl"
    assert cli("load", path).code == 1
    again = cli("load", path)
    assert again.code == 1  # still reported: the record is still bad
    assert "rejected: " in again.err
    assert wh.sql("select count(*) from rejects").fetchall() == [(1,)]
    assert cli("rejects", "--load", "nope").code == 2  # no such load: bad usage


@pytest.mark.slow
def test_the_whole_corpus_in_one_process_never_crashes_or_hangs(tmp_path: Path):
    """A real process over every file at once: no traceback, exit 1, within a time limit."""
    result = subprocess.run(
        [sys.executable, "-m", "kidata", "-w", str(tmp_path / "wh"), "load", str(BAD)],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    # Every bad case is rejected once (conflict_in_file: its line 2; conflict_with_loaded:
    # its line 2 conflicts with seed 000 from conflict_in_file's line 1, loaded earlier in
    # this load, since files load in name order).
    # (The CLI lists the first 50; the summary counts them all.)
    assert f", {len(CASES) + 1} rejected, " in result.stdout
    wh = Warehouse(tmp_path / "wh")
    assert wh.sql("select count(*) from rejects").fetchall() == [(len(CASES) + 1,)]
    # Good runs: the two seeds, seed 000 renamed with an unknown GPU (ok_unknown_gpu).
    assert runs(wh) == BOTH | {RUN0 + "-bad"}


@pytest.mark.slow
def test_quantile_reject_names_the_first_metric_given(tmp_path: Path):
    """Two metrics with quantiles out of order: the reject names the first the record gives,
    whatever the hash seed (it once named whichever a set of metric names gave first)."""
    text = SEED0.read_text("utf-8")
    bundle = json.loads(text[text.index("{"):])
    bundle["run"]["metadata"]["name"] += "-two-bad-metrics"
    bundle["run"]["spec"]["measurements"] += [
        {"metric": "throughput", "statistic": "p20", "unit": "TFLOP/s", "value": 9.0},
        {"metric": "throughput", "statistic": "p80", "unit": "TFLOP/s", "value": 2.0},
        {"metric": "memory", "statistic": "p20", "unit": "MB", "value": 7.0},
        {"metric": "memory", "statistic": "p80", "unit": "MB", "value": 3.0}]
    path = tmp_path / "two_bad_metrics.jsonl"
    path.write_text(json.dumps(bundle) + "\n", encoding="utf-8")
    for seed in range(6):
        result = subprocess.run(
            [sys.executable, "-m", "kidata", "-w", str(tmp_path / f"wh{seed}"), "load",
             str(path)], capture_output=True, text=True, timeout=120,
            env={**os.environ, "PYTHONHASHSEED": str(seed)})
        assert result.returncode == 1, result.stderr
        rejected = [line for line in result.stderr.splitlines()
                    if line.startswith("rejected: ")]
        assert rejected == [
            f"rejected: {path}, line 1, field run.spec.measurements: quantiles out of order "
            "for throughput: p20 = 9 is above p80 = 2; expected p20 <= median <= p80"], \
            f"PYTHONHASHSEED={seed}: {rejected}"


# -- nesting depth, swept on both paths (issue 27, item 2) -------------------------------------

# Depths of an array nest put in a run's spec.sourceNative: the run document is then d + 3
# deep (run, spec, sourceNative) and the JSON line d + 4. kidata stores documents up to 254
# levels deep; orjson reads up to 1,024; msgspec (the fast path's decoder) follows nesting
# only to Python's recursion limit (~1,000), where 0.2.7 raised RecursionError and lost the
# whole load.
DEPTHS = [250, 251, 252, 300, 600, 900, 950, 975, 990, 1000, 1010, 1019, 1020, 1021, 1024,
          1030, 2000, 5000]


def _deep_lines() -> tuple[bytes, int, int]:
    """A JSON Lines file: for each depth a run nested that deep, between good runs. Returns
    the text, the runs a load keeps and the records it rejects, counted from the rule."""
    from runs_factory import bundle

    out, kept, rejected = [], 0, 0
    for i, depth in enumerate(DEPTHS):
        good = bundle(2 * i)
        deep = bundle(2 * i + 1)
        deep["run"]["spec"]["sourceNative"]["deep"] = "DEEP"
        text = json.dumps(deep).replace('"DEEP"', "[" * depth + "]" * depth)
        out += [json.dumps(good), text]
        kept += 1
        if depth + 3 <= 254:
            kept += 1
        else:
            rejected += 1
    return ("\n".join(out) + "\n").encode(), kept, rejected


@pytest.mark.parametrize("path, workers", [("fast", "0"), ("slow", "0"), ("fast", "2")])
def test_any_nesting_depth_is_a_reject_on_either_path_never_a_lost_load(
        tmp_path, monkeypatch, path, workers):
    from kidata.ingest import stage

    text, kept, rejected = _deep_lines()
    assert (kept, rejected) == (len(DEPTHS) + 2, len(DEPTHS) - 2)  # 250 and 251 fit
    source = tmp_path / "deep.jsonl"
    source.write_bytes(text)
    monkeypatch.setenv("KIDATA_SLOW_PATH", "1" if path == "slow" else "0")
    monkeypatch.setenv("KIDATA_WORKERS", workers)
    monkeypatch.setattr(stage, "BATCH_LINES", 4)  # the deep lines spread over worker jobs
    wh = Warehouse(tmp_path / "wh")
    report = wh.load([str(source)])
    assert report.committed
    assert (report.runs_added, report.rejected) == (kept, rejected)
    reasons = {r.position: r.reason for r in report.rejects}
    for i, depth in enumerate(DEPTHS):
        position = f"line {2 * i + 2}"
        if depth + 3 <= 254:
            assert position not in reasons
        elif depth + 4 > 1024:
            assert reasons[position].startswith("invalid JSON: nested deeper than 1,024"), depth
        else:
            assert "nested deeper than 254 levels" in reasons[position], depth
    assert wh.check().problems == []


# -- deep values in what a reader copies into a document (fuzzer seed 731099) ---------------

TRAINKERNEL = DATA / "seeds" / "003_55f6fcd9cea2f10a.txt"


def test_deep_values_in_a_trainkernel_table_are_rejects_never_a_lost_load(tmp_path):
    """trainkernel's reader copies the table's ``sources`` link of a GPU into each of its runs
    (``sourceNative.url``) and shows a bad value in its message. A link nested 252 deep (read,
    but 255 deep once inside the run: orjson cannot write it) and values nested 1,000 deep
    (a plain repr() of one recursed past Python's limit) each crashed the whole load; now each
    rejects the rows it is in, naming the field, and the other rows load."""
    table = json.loads(TRAINKERNEL.read_text("utf-8"))
    table["held_out"][0]["trainkernel_us"] = "DEEP1000"
    table["held_out"][1]["shape"] = "DEEP1000"
    table["held_out"][2]["gpu"] = "DEEP1000"
    table["sources"] = {"a100": "https://example.org/a100", "h100": "DEEP252"}
    text = (json.dumps(table).replace('"DEEP1000"', "[" * 1000 + "]" * 1000)
            .replace('"DEEP252"', "[" * 252 + "]" * 252))
    source = tmp_path / "trainkernel.json"
    source.write_text(text, "utf-8")
    # The seed's rows: 0-3 on the A100, 4-7 on the H100 (two runs each), then 8 calibration
    # rows on the H100 (their link is sources.h100_calibration, absent here).
    assert [row["gpu"][:4] for row in table["held_out"][3:]] == ["A100"] + ["H100"] * 4
    wh = Warehouse(tmp_path / "wh")
    report = wh.load([str(source)], format="trainkernel")
    assert report.committed
    fields = {r.position: r.field for r in report.rejects}
    assert fields == {"held_out[0]": "trainkernel_us", "held_out[1]": "shape",
                      "held_out[2]": "gpu", **{f"held_out[{i}]": "sources.h100"
                                               for i in range(4, 8)}}
    reasons = {r.position: r.reason for r in report.rejects}
    assert reasons["held_out[0]"] == "expected a number, got [[[[...]]]]"
    assert reasons["held_out[5]"] == "expected a string (the table's link), got [[[[...]]]]"
    assert all(r.file == str(source) for r in report.rejects)
    assert report.runs_added == 2 + 8  # row 3's two runs and the calibration rows
    urls = wh.sql("SELECT json_extract_string(document, '$.spec.sourceNative.url') AS url, "
                  "count(*) FROM run_documents GROUP BY url ORDER BY url NULLS LAST").fetchall()
    assert urls == [("https://example.org/a100", 2), (None, 8)]
    assert wh.sql("SELECT count(*) FROM rejects").fetchall() == [(7,)]
    assert wh.check().problems == []


def test_a_document_too_deep_to_store_is_a_reject_whichever_reader_built_it():
    """The flattener (the general path, every reader's records) names a document nested
    deeper than kidata stores instead of failing in orjson: the kernelindex reader refuses
    such text before parsing, but a reader building documents from its input's values could
    hand one over (trainkernel's link did)."""
    from runs_factory import bundle

    from kidata.errors import RecordError
    from kidata.ingest.flatten import Flattener
    from kidata.ingest.readers.base import Item

    record = bundle(0)
    nest: list = []
    record["run"]["spec"]["sourceNative"]["deep"] = nest
    for _ in range(260):  # the run is then 263 deep (run, spec, sourceNative, 260 lists)
        nest.append([])
        nest = nest[0]
    with pytest.raises(RecordError) as caught:
        Flattener().flatten(Item("made.jsonl", "line 1", dict(record)))
    assert caught.value.field == "run.spec.sourceNative.deep[0][0]…"
    assert "nested deeper than 254 levels" in caught.value.reason
    record["run"]["spec"]["sourceNative"]["deep"] = [[[]]]  # shallow: it flattens
    assert Flattener().flatten(Item("made.jsonl", "line 1", dict(record))).run_rows


# -- the field's formats under hostile values (tests/fuzzing.py, fuzz_field) ----------------

def _gbench_time_unit(doc: dict) -> tuple[str, str]:
    doc["benchmarks"][0]["time_unit"] = ["ns"]
    return "benchmarks[0]", "time_unit"


def _kernelbench_gpu(doc: dict) -> tuple[str, str]:
    entry = next(iter(doc["level1"]))
    doc["level1"][entry]["hardware"] = 1.5
    return f"level1.{entry}", "gpu"


def _nvbench_tag(doc: dict) -> tuple[str, str]:
    doc["benchmarks"][0]["states"][0]["summaries"][1]["tag"] = 7
    return "benchmarks[0].states[0]", "summaries[1].tag"


def _nvbench_relative(doc: dict) -> tuple[str, str]:
    summaries = doc["benchmarks"][0]["states"][0]["summaries"]
    relative = next(s for s in summaries if s["tag"] == "nv/cold/time/gpu/stdev/relative")
    next(d for d in relative["data"] if d["name"] == "value")["value"] = "about 2%"
    return "benchmarks[0].states[0]", "summaries.nv/cold/time/gpu/stdev/relative"


def _nvbench_axis_values(doc: dict) -> tuple[str, str]:
    doc["benchmarks"][0]["states"][0]["axis_values"] = 1.5
    return "benchmarks[0].states[0]", "axis_values"


def _gbench_huge_samples(doc: dict) -> tuple[str, str]:
    rows = [i for i, r in enumerate(doc["benchmarks"]) if r["name"] == "medium"]
    for i in rows:
        doc["benchmarks"][i]["real_time"] = 1e308  # the squared deviations overflowed
    return f"benchmarks[{rows[0]}]", "samples[0]"


def _nvbench_sample_size(doc: dict) -> tuple[str, str]:
    summaries = doc["benchmarks"][0]["states"][0]["summaries"]
    size = next(s for s in summaries if s["tag"] == "nv/cold/sample_size")
    next(d for d in size["data"] if d["name"] == "value")["value"] = [1, 2, "x"]
    return "benchmarks[0].states[0]", "summaries.nv/cold/sample_size"


# Each found by a fuzzed file that crashed the whole load (a TypeError, an AttributeError, a
# decimal.InvalidOperation, orjson's "Dict key must be str"); each is now its record's reject.
FIELD_CASES = [
    ("google-benchmark/gbench_test1_run1.json", _gbench_time_unit),
    ("google-benchmark/gbench_test3_run0.json", _gbench_huge_samples),
    ("kernelbench/B200_together__baseline_time_torch.json", _kernelbench_gpu),
    ("nvbench/nvbench_test_ref.json", _nvbench_tag),
    ("nvbench/nvbench_test_ref.json", _nvbench_relative),
    ("nvbench/nvbench_test_ref.json", _nvbench_axis_values),
    ("nvbench/nvbench_test_ref.json", _nvbench_sample_size),
]


@pytest.mark.shared
@pytest.mark.parametrize("relative, mutate", FIELD_CASES,
                         ids=[m.__name__.lstrip("_") for _, m in FIELD_CASES])
def test_a_wrong_type_in_a_harness_file_is_its_records_reject(tmp_path, relative, mutate):
    from conftest import SHARED

    from kidata.ingest.readers.base import BUG

    source = SHARED / "external" / relative
    gpu = {"gpu": "NVIDIA H100 80GB HBM3"}  # what google-benchmark's files do not say
    clean = Warehouse(tmp_path / "clean").load([str(source)], settings=gpu)
    doc = json.loads(source.read_text("utf-8"))
    position, field = mutate(doc)
    bad = tmp_path / source.name
    bad.write_text(json.dumps(doc), "utf-8")
    wh = Warehouse(tmp_path / "wh")
    report = wh.load([str(bad)], settings=gpu)
    assert report.committed
    assert not [r for r in report.rejects if BUG in r.reason]
    new = [(r.position, r.field) for r in report.rejects
           if (r.position, r.field) not in {(c.position, c.field) for c in clean.rejects}]
    assert new == [(position, field)]
    assert report.runs_added == clean.runs_added - 1  # that record alone
    assert wh.check().problems == []


@pytest.mark.slow  # generated (mutated) inputs, each loaded
@pytest.mark.shared
def test_mutated_harness_files_never_crash_a_load_or_fail_inside_kidata(tmp_path):
    from fuzzing import fuzz_field

    # 12 loads of mutated harness files (JSON values, data.js values, CSV cells): ~6 s.
    assert fuzz_field(tmp_path, seed=5, rounds=12) == 12


def test_a_reader_failing_inside_kidata_rejects_the_rest_of_its_file_not_the_load(
        tmp_path, monkeypatch, cli):
    """kidata's own failure (an exception that is no reject) in a reader ends that file with
    one reject saying it is a bug to report; the load's other files, and the file's records
    read before it, load. Under KIDATA_DEBUG it raises, traceback and all."""
    from kidata.ingest.readers import trainkernel
    from kidata.ingest.readers.base import BUG

    def broken(*args, **kwargs):
        raise ZeroDivisionError("made up")

    monkeypatch.setattr(trainkernel, "_calibration", broken)  # after the held_out rows
    (tmp_path / "in").mkdir()
    shutil.copy(TRAINKERNEL, tmp_path / "in" / "trainkernel.json")
    shutil.copy(SEED0, tmp_path / "in" / "seed0.json")
    wh = Warehouse(tmp_path / "wh")
    report = wh.load([str(tmp_path / "in")])
    assert report.committed
    [reject] = report.rejects
    assert (reject.file, reject.position, reject.field) == (
        str(tmp_path / "in" / "trainkernel.json"), "file", None)
    assert reject.reason.startswith("kidata failed to read the rest of this file "
                                    "(ZeroDivisionError: made up)") and BUG in reject.reason
    assert report.runs_added == 16 + 1  # the held_out rows' runs, and seed 000's run
    monkeypatch.setenv("KIDATA_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        Warehouse(tmp_path / "wh2").load([str(tmp_path / "in")])
    # `kidata --debug` is the same: the traceback, not a reject (the variable is restored).
    monkeypatch.setenv("KIDATA_DEBUG", "0")
    result = cli("load", str(tmp_path / "in"))
    assert result.code == 1 and "a bug in kidata" in result.err
    with pytest.raises(ZeroDivisionError):  # --debug re-raises what ends a command
        cli("--debug", "load", str(tmp_path / "in"))


def test_a_record_kidata_fails_on_is_rejected_and_the_others_load(tmp_path, monkeypatch):
    """The same for one record in the flattener (the general path of every reader): that
    record is rejected, saying it is a bug to report; the others load."""
    from runs_factory import write_runs

    from kidata.ingest.flatten import Flattener
    from kidata.ingest.readers.base import BUG

    real = Flattener.bundle

    def bundle(self, c, out, run, *args, **kwargs):
        if run["metadata"]["name"].endswith("-2"):
            raise KeyError("made up")
        return real(self, c, out, run, *args, **kwargs)

    monkeypatch.setattr(Flattener, "bundle", bundle)
    monkeypatch.setenv("KIDATA_SLOW_PATH", "1")  # the general path, where the net is
    source = write_runs(tmp_path / "runs.jsonl", range(5))
    report = Warehouse(tmp_path / "wh").load([str(source)])
    assert report.runs_added == 4
    [reject] = report.rejects
    assert reject.position == "line 3" and BUG in reject.reason
    assert "KeyError: 'made up'" in reject.reason


@pytest.mark.shared
def test_a_null_time_unit_in_google_benchmark_is_its_default_ns(tmp_path):
    """``"time_unit": null`` is google-benchmark's default, ns, as an absent one is (it crashed
    the load sorting the row group's units: fuzzed input, seed 5021)."""
    from conftest import SHARED

    source = SHARED / "external" / "google-benchmark" / "gbench_test3_run0.json"
    doc = json.loads(source.read_text("utf-8"))
    rows = [r for r in doc["benchmarks"] if "real_time" in r and r.get("time_unit") == "ns"]
    assert rows
    for row in rows:
        row["time_unit"] = None
    bad = tmp_path / source.name
    bad.write_text(json.dumps(doc), "utf-8")
    gpu = {"gpu": "NVIDIA H100 80GB HBM3"}
    clean = Warehouse(tmp_path / "clean").load([str(source)], settings=gpu)
    wh = Warehouse(tmp_path / "wh")
    report = wh.load([str(bad)], settings=gpu)
    assert (report.runs_added, len(report.rejects)) == (clean.runs_added, len(clean.rejects))
    assert clean.runs_added > 0
    same = "SELECT run_id, value FROM measurements ORDER BY ALL"
    assert wh.sql(same).fetchall() == Warehouse(tmp_path / "clean").sql(same).fetchall()


@pytest.mark.shared
def test_a_data_js_date_beyond_any_year_rejects_that_commits_benches(tmp_path):
    """github-action-benchmark's entry date is ms since the epoch; one beyond year 9999
    overflowed datetime (fuzzed input, seed 20156) and ended the load. Each bench of that
    entry is now a reject naming the date; the other entries load."""
    from conftest import SHARED

    source = SHARED / "external" / "github-action-benchmark" / "blade_data.js.033c5dd.js"
    head, brace, rest = source.read_text("utf-8").partition("{")
    doc = json.loads(brace + rest)
    suite = next(iter(doc["entries"]))
    doc["entries"][suite][1]["date"] = 1.2345678901234568e22
    benches = len(doc["entries"][suite][1]["benches"])
    bad = tmp_path / source.name
    bad.write_text(head + json.dumps(doc), "utf-8")
    gpu = {"gpu": "NVIDIA H100 80GB HBM3"}
    clean = Warehouse(tmp_path / "clean").load([str(source)], settings=gpu)
    report = Warehouse(tmp_path / "wh").load([str(bad)], settings=gpu)
    dated = [r for r in report.rejects if r.field == "date"]
    assert [r.position for r in dated] == [f"entries.{suite}[1].benches[{i}]"
                                            for i in range(benches)]
    assert dated[0].reason.startswith("1.2345678901234568e+22 ms since the epoch is not a date")
    assert report.runs_added == clean.runs_added - benches > 0


@pytest.mark.shared
def test_a_time_that_is_not_text_is_a_reject_not_a_run_without_time(tmp_path):
    """A data.js entry without a date falls back on its commit's timestamp; a number there
    was dropped without a word (the runs loaded with no time). Now each bench of the entry is a
    reject naming observed_at."""
    from conftest import SHARED

    source = SHARED / "external" / "github-action-benchmark" / "blade_data.js.033c5dd.js"
    head, brace, rest = source.read_text("utf-8").partition("{")
    doc = json.loads(brace + rest)
    suite = next(iter(doc["entries"]))
    entry = doc["entries"][suite][0]
    entry.pop("date", None)
    entry["commit"]["timestamp"] = 1703109724
    bad = tmp_path / source.name
    bad.write_text(head + json.dumps(doc), "utf-8")
    report = Warehouse(tmp_path / "wh").load([str(bad)],
                                             settings={"gpu": "NVIDIA H100 80GB HBM3"})
    timed = {(r.position, r.field) for r in report.rejects}
    assert timed == {(f"entries.{suite}[0].benches[{i}]", "observed_at")
                     for i in range(len(entry["benches"]))}
    assert all(r.reason.endswith("got 1703109724") for r in report.rejects)


@pytest.mark.shared
def test_a_workload_parameter_nested_1000_deep_is_its_records_reject(tmp_path):
    """pytorch-v3 records' benchmark name becomes a workload parameter; one nested
    ~1,000 deep made str() recurse past Python's limit while naming the workload (fuzzed
    input, seed 50067) and, with the safety net, lost the rest of the file. Now that record is
    rejected naming the parameter; the file's other records load."""
    from conftest import SHARED

    from kidata.ingest.readers.base import BUG

    source = SHARED / "external" / "pytorch-v3" / "add_loop_inductor_dynamic_gpu.json"
    records = json.loads(source.read_text("utf-8"))
    second = json.loads(json.dumps(records[0]))  # a copy: its own benchmark object
    second["model"]["name"] = "second"
    records.append(second)
    records[0]["benchmark"]["name"] = "DEEP"  # the 'benchmark' parameter
    bad = tmp_path / source.name
    bad.write_text(json.dumps(records).replace('"DEEP"', "[" * 1000 + "]" * 1000), "utf-8")
    report = Warehouse(tmp_path / "wh").load([str(bad)],
                                             settings={"gpu": "NVIDIA H100 80GB HBM3"})
    [reject] = report.rejects
    assert (reject.position, reject.field) == ("index 0", "benchmark")
    assert BUG not in reject.reason
    assert reject.reason.startswith("nested deeper than 251 levels")
    assert report.runs_added == len(records) - 1
