"""Distinct runs never share an identity (issue 25, item 5).

A run of the field's formats and of TOML mappings is named from an unambiguous encoding of its
exact values (docs/formats.md, "Identity"): never a slug of the workload, never a delimiter join.
Each test loads distinct runs whose old identities collided (the slug lower-cases, joins
alphanumeric runs with '-' and drops the rest; the old externalId joined its parts with '|'), and
counts exactly what a load adds and skips.
"""

from __future__ import annotations

import csv
import hashlib
import json
import unicodedata
from pathlib import Path

from conftest import console

from kidata import Warehouse
from kidata.ingest.readers import read_file

MAPPING = """\
[input]
format = "csv"

[harness]
source = "team-bench"
name = "identity test"
family = "team_bench"

[run]
kernel = "{op}"
implementation = "{impl}"
gpu = "NVIDIA H100 80GB HBM3"
observed_at = "{when}"
unit = "us"

[workload]
parameters = "rest"

[statistics]
median = "{p50}"
"""

JSON_MAPPING = """\
[input]
format = "json"
records = "results"

[harness]
source = "team-json"
name = "identity test (JSON)"

[run]
kernel = "softmax"
implementation = "triton"
gpu = "NVIDIA H100 80GB HBM3"
unit = "ms"

[workload]
parameters = ["n", "nneg", "n1p"]

[statistics]
mean = "{mean}"
"""


def _mapping(tmp_path: Path, text: str = MAPPING) -> str:
    path = tmp_path / ("m.toml" if text is MAPPING else "m_json.toml")
    path.write_text(text, "utf-8")
    return str(path)


def _csv(path: Path, header: list[str], rows: list[list[str]]) -> str:
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return str(path)


def _load(tmp_path: Path, wh: Warehouse, files: list[str], text: str = MAPPING):
    return wh.load(files, mapping=_mapping(tmp_path, text))


def _counts(report) -> tuple[int, int, int]:
    return report.runs_added, report.duplicates, report.rejected


# Every row below measures the same number (12.5 µs) without a time: only the case tells the
# runs apart, as in a sweep where two cases happen to time the same.
HEADER = ["op", "impl", "when", "layout", "p50"]


def test_case_makes_distinct_runs(tmp_path):
    # Old slugs: 'layout-nt' for all three -> 1 run, 2 duplicates. Also with a time (the
    # time-keyed identity): 'NN' and 'nn' at the same moment are two runs.
    wh = Warehouse(tmp_path / "wh")
    rows = [["gemm", "ours", "", "NT", "12.5"], ["gemm", "ours", "", "nt", "12.5"],
            ["gemm", "ours", "", "Nt", "12.5"],
            ["gemm", "ours", "2025-01-31T12:00:00Z", "NN", "12.5"],
            ["gemm", "ours", "2025-01-31T12:00:00Z", "nn", "12.5"]]
    report = _load(tmp_path, wh, [_csv(tmp_path / "case.csv", HEADER, rows)])
    assert _counts(report) == (5, 0, 0)
    assert sorted(v for (v,) in wh.sql(
        "select text from workload_parameters where name = 'layout'").fetchall()) \
        == ["NN", "NT", "Nt", "nn", "nt"]


def test_separators_and_parameter_boundaries_make_distinct_runs(tmp_path):
    # Old slugs: 'layout-a-b' for the first four; 'x-y1' for the last two (parameter x_y = 1,
    # parameter x = 'y1'): 2 runs, 4 duplicates.
    wh = Warehouse(tmp_path / "wh")
    header = ["op", "impl", "when", "layout", "x_y", "x", "p50"]
    rows = [["gemm", "ours", "", v, "", "", "12.5"] for v in ("a b", "a-b", "a_b", "A.B")]
    rows += [["gemm", "ours", "", "", "1", "", "12.5"], ["gemm", "ours", "", "", "", "y1", "12.5"]]
    report = _load(tmp_path, wh, [_csv(tmp_path / "sep.csv", header, rows)])
    assert _counts(report) == (6, 0, 0)


def test_the_old_delimiter_inside_values_makes_distinct_runs(tmp_path):
    # Old externalId 'a|forward|b|forward|c|h100-sxm5-80gb|layout-nt|n…' for both rows, and
    # the same readable prefix: 1 run, 1 duplicate.
    wh = Warehouse(tmp_path / "wh")
    rows = [["a|forward|b", "c", "", "NT", "12.5"], ["a", "b|forward|c", "", "NT", "12.5"]]
    report = _load(tmp_path, wh, [_csv(tmp_path / "pipe.csv", HEADER, rows)])
    assert _counts(report) == (2, 0, 0)
    assert sorted(wh.sql("select kernel, implementation from runs").fetchall()) \
        == [("a", "b|forward|c"), ("a|forward|b", "c")]


def test_unicode_forms_are_distinct_runs(tmp_path):
    # kidata does not normalise Unicode (no NFC/NFD anywhere in kidata.ingest): the exact code
    # points are the value, so 'é' composed (NFC, U+00E9) and decomposed (NFD, e + U+0301) are
    # two runs, as are 'è' in either form: 4 runs. Old slugs: NFC 'é' and 'è' -> 'layout-empty',
    # NFD 'é' and 'è' -> 'layout-e': 2 runs, 2 duplicates.
    nfc_e, nfc_egrave = "\u00e9", "\u00e8"
    nfd_e, nfd_egrave = (unicodedata.normalize("NFD", c) for c in (nfc_e, nfc_egrave))
    assert (nfd_e, nfd_egrave) == ("e\u0301", "e\u0300")
    wh = Warehouse(tmp_path / "wh")
    rows = [["gemm", "ours", "", v, "12.5"] for v in (nfc_e, nfd_e, nfc_egrave, nfd_egrave)]
    report = _load(tmp_path, wh, [_csv(tmp_path / "u.csv", HEADER, rows)])
    assert _counts(report) == (4, 0, 0)
    stored = {v for (v,) in wh.sql("select text from workload_parameters").fetchall()}
    assert stored == {nfc_e, nfd_e, nfc_egrave, nfd_egrave}  # kept as written


def test_numbers_are_their_exact_values(tmp_path):
    # JSON keeps types: 1 and 1.0 are different values (as the workload's parameters are); the
    # reader reads the text "1" as the number 1 (parameters are numeric where they are
    # numbers), so "1" in another file is the run of 1. Old slugs: n = -1 and nneg = 1 both
    # 'nneg1', n = 1.5 and n1p = 5 both 'n1p5': 4 runs of 6, 2 duplicates.
    wh = Warehouse(tmp_path / "wh")
    records = [{"n": -1}, {"nneg": 1}, {"n": 1.5}, {"n1p": 5}, {"n": 1}, {"n": 1.0}]
    first = tmp_path / "a.json"
    first.write_text(json.dumps({"results": [{**r, "mean": 0.05} for r in records]}))
    report = _load(tmp_path, wh, [str(first)], JSON_MAPPING)
    assert _counts(report) == (6, 0, 0)
    second = tmp_path / "b.json"
    second.write_text(json.dumps({"results": [{"n": "1", "mean": 0.05},
                                              {"n": "2", "mean": 0.05}]}))
    again = _load(tmp_path, wh, [str(second)], JSON_MAPPING)
    assert _counts(again) == (1, 1, 0)  # "1" is the run of 1; "2" is new


def test_reloading_and_the_same_case_in_two_files(tmp_path):
    wh = Warehouse(tmp_path / "wh")
    rows = [["gemm", "ours", "", "NT", "12.5"], ["gemm", "ours", "", "nt", "12.5"],
            ["gemm", "ours", "2025-01-31T12:00:00Z", "TT", "13.0"]]
    first = _csv(tmp_path / "first.csv", HEADER, rows)
    assert _counts(_load(tmp_path, wh, [first])) == (3, 0, 0)
    # The same file again: nothing added (the file manifest skips it; its runs are duplicates).
    assert _counts(_load(tmp_path, wh, [first])) == (0, 3, 0)
    # The same cases in another file (another name, its rows in another order, one new case):
    # read again, the identity is the same, so only the new case is added.
    second = _csv(tmp_path / "second.csv", HEADER, [rows[2], ["gemm", "ours", "", "TN", "12.5"],
                                                    rows[1], rows[0]])
    assert _counts(_load(tmp_path, wh, [second])) == (1, 3, 0)
    assert wh.sql("select count(*) from runs").fetchall() == [(4,)]
    # Reading is deterministic: the same file names the same runs.
    names = [[i.docs["run"]["metadata"]["name"] for i in read_file(second,
                                                                   mapping=_mapping(tmp_path))]
             for _ in range(2)]
    assert names[0] == names[1] and len(set(names[0])) == 4


def _canonical(value) -> str:
    # docs/formats.md: keys sorted, ',' and ':' without spaces, UTF-8 (not \\u escapes).
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def test_run_names_follow_the_documented_rule(tmp_path):
    """The expected names are computed here from the rule in docs/formats.md, by hand."""
    rows = [["rms|norm", "Ours", "2025-01-31T12:00:00Z", "NT", "12.5"],
            ["rms|norm", "Ours", "", "é", "12.5"]]
    timed, untimed = read_file(_csv(tmp_path / "r.csv", HEADER, rows),
                               mapping=_mapping(tmp_path))
    base = {"source": "team-bench", "kernel": "rms|norm", "pass": "forward",
            "implementation": "Ours", "variant": None, "gpu": "h100-sxm5-80gb",
            "metric": "latency", "identity": []}
    # With a time: the time, no version or numbers.
    expected = _canonical({**base, "workload": {"layout": "NT"},
                           "observedAt": "2025-01-31T12:00:00.000Z", "version": None,
                           "numbers": None})
    # Without a time: the numbers' fingerprint: 12.5 µs = 12500 ns, the median.
    numbers = hashlib.sha256(b'[["latency","median","ns",12500]]').hexdigest()[:16]
    expected_untimed = _canonical({**base, "workload": {"layout": "é"}, "observedAt": None,
                                   "version": None, "numbers": numbers})
    assert '"layout":"é"' in expected_untimed  # UTF-8, not escaped
    prefix = "team-bench-rms-norm-forward-ours-h100-sxm5-80gb-"
    for item, ext in ((timed, expected), (untimed, expected_untimed)):
        run = item.docs["run"]
        assert run["spec"]["sourceNative"]["externalId"] == ext
        assert run["metadata"]["name"] \
            == prefix + hashlib.sha256(ext.encode("utf-8")).hexdigest()[:16]


def test_five_distinct_runs_load_as_five_through_the_console_script(tmp_path):
    # The repro: two rows whose kernel and implementation hold the old delimiter, two
    # layouts differing only in case, one only in separators. Old identities: 3 runs, 2
    # duplicates, exit 0.
    rows = [["a|forward|b", "c", "", "NT", "12.5"], ["a", "b|forward|c", "", "NT", "12.5"],
            ["gemm", "ours", "", "NT", "12.5"], ["gemm", "ours", "", "nt", "12.5"],
            ["gemm", "ours", "", "n-t", "12.5"]]
    data = _csv(tmp_path / "f.csv", HEADER, rows)
    args = ["load", "--mapping", _mapping(tmp_path), data, "-w", tmp_path / "W"]
    done = console(*args)
    assert done.returncode == 0, done.stderr
    assert "1 files, 5 records: 5 runs added" in done.stdout
    assert "0 duplicates skipped, 0 rejected" in done.stdout
    again = console(*args)
    assert again.returncode == 0, again.stderr
    assert "5 records: 0 runs added" in again.stdout
    assert "5 duplicates skipped, 0 rejected" in again.stdout


def test_google_benchmark_names_are_the_identity(tmp_path):
    # One file, one date: names that parse to the same kernel, implementation and parameters
    # (a modifier, the case of a template argument) are distinct benchmarks. Old identities:
    # family BM_Copy, kernel 'add' or BM_Copy, parameters {arg0: 64} or {op: add}, the date:
    # 2 runs, 2 duplicates.
    names = ["BM_Copy/64/threads:1", "BM_Copy/64/threads:2",
             "BM_Op<Op::ADD>/manual_time", "BM_Op<op::add>/manual_time"]
    data = {"context": {"date": "2025-02-01T10:00:00+00:00"},
            "benchmarks": [{"name": n, "run_name": n, "run_type": "iteration",
                            "iterations": 100, "real_time": 10.0, "cpu_time": 11.0,
                            "time_unit": "us"} for n in names]}
    path = tmp_path / "gbench.json"
    path.write_text(json.dumps(data))
    wh = Warehouse(tmp_path / "wh")
    report = wh.load([str(path)], settings={"gpu": "NVIDIA H100 80GB HBM3"})
    assert _counts(report) == (4, 0, 0)
    copy = tmp_path / "gbench_copy.json"
    copy.write_text(json.dumps(data, indent=1))  # the same runs in another file's bytes
    assert _counts(wh.load([str(copy)], settings={"gpu": "NVIDIA H100 80GB HBM3"})) \
        == (0, 4, 0)


def test_trainkernel_workloads_and_schedules_are_exact(tmp_path):
    # Old run ids slugified the workload and schedule and joined them with '-': 'Small' and
    # 'small' were one held-out pair of runs; ('a-b', 'c') and ('a', 'b-c') one calibration
    # run. 2 rows x 2 implementations + 2 schedules = 6 runs, the old ids gave 3.
    table = {"units": "microseconds per complete forward, loss, backward, and SGD update step",
             "held_out": [{"gpu": "A100 SXM4 80 GB", "workload": w, "trainkernel_us": 10.0,
                           "inductor_us": 20.0, "ratio": 0.5} for w in ("Small", "small")],
             "h100_calibration": [{"workload": "a-b", "schedule": "c", "latency_us": 5.0},
                                  {"workload": "a", "schedule": "b-c", "latency_us": 5.0}]}
    path = tmp_path / "trainkernel.json"
    path.write_text(json.dumps(table))
    wh = Warehouse(tmp_path / "wh")
    assert _counts(wh.load([str(path)])) == (6, 0, 0)
    # Each trainkernel run's published ratio names its own inductor run.
    assert sorted(wh.sql(
        "select r.workload, b.workload from published p join runs r using (run_id) "
        "join runs b on b.run_id = p.baseline_run_id").fetchall()) \
        == [("Small", "Small"), ("small", "small")]


def test_identity_values_keep_their_places_and_dtype_spellings_are_one_case(tmp_path):
    # run.identity ["{a}", "{b}"]: ("x", "") and ("", "x") are two runs (0.2.7 dropped the
    # empty values: one run and a duplicate).
    text = MAPPING.replace('unit = "us"', 'unit = "us"\nidentity = ["{a}", "{b}"]').replace(
        'parameters = "rest"', 'parameters = "rest"\nexclude = ["a", "b"]')
    wh = Warehouse(tmp_path / "wh")
    # (One row per file: in one file the second row of a case is an occurrence of it.)
    places = [_csv(tmp_path / f"places{n}.csv", [*HEADER, "a", "b"],
                   [["gemm", "ours", "", "NT", "12.5", *ab]])
              for n, ab in enumerate((["x", ""], ["", "x"]))]
    report = _load(tmp_path, wh, places, text)
    assert _counts(report) == (2, 0, 0)
    # bf16 and BF16 are one dtype, so the second row is the same case again: another
    # measurement of it (an occurrence), not a silent duplicate of the first.
    wh2 = Warehouse(tmp_path / "wh2")
    rows = [["gemm", "ours", "", "bf16", "12.5"], ["gemm", "ours", "", "BF16", "12.5"]]
    header = ["op", "impl", "when", "dtype", "p50"]
    report = _load(tmp_path, wh2, [_csv(tmp_path / "dtype.csv", header, rows)])
    assert _counts(report) == (2, 0, 0)
