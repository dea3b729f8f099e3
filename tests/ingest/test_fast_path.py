"""The load's fast path (kidata/ingest/fast.py) gives exactly what the general path gives.

End to end: the same inputs loaded with the fast path on and off (``KIDATA_SLOW_PATH``) give
the same rows in every table, in the same order (only ``loaded_at``/``load_id`` differ), and
the same rejects with the same messages. Record by record: bundles mutated by Hypothesis
(a field dropped, a type changed, a wrong digest, quantiles out of order, extra keys, unicode)
staged both ways give the same staged rows, counts, rejects and environment knowledge.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from pathlib import Path

import duckdb
import pytest
from conftest import SHARED
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kidata import Warehouse
from kidata.ingest import fast as fast_mod
from kidata.ingest.fast import FastPath
from kidata.ingest.flatten import Flattener
from kidata.ingest.readers import Lines
from kidata.ingest.stage_writer import StagingWriter, stage_fast, stage_record
from kidata.warehouse import LoadReport

DATA = Path(__file__).parents[1] / "data"
ROOT = Path(__file__).parents[2]
SEEDS = DATA / "seeds"
BAD = DATA / "bad"
LIGER = [*sorted((SHARED / "liger").glob("*.csv")), DATA / "liger" / "edge_cases.csv"]
TRAINKERNEL = next(SEEDS.glob("003_*.txt"))


def _generator():
    spec = importlib.util.spec_from_file_location("kidata_bench_generate",
                                                  ROOT / "benchmarks" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.Generator(seed=0)


GEN = _generator()


def seed_bundle(path: Path) -> dict:
    return json.loads(path.read_text("utf-8").split("\n", 2)[2])


def tables(path: Path) -> dict[str, list[tuple]]:
    """Every table's rows in file order, without the columns a commit sets."""
    con = duckdb.connect()
    out = {}
    for folder in sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("_")):
        files = sorted(str(f) for f in folder.glob("*.parquet"))
        if not files:
            out[folder.name] = []
            continue
        rel = con.sql(f"SELECT * FROM read_parquet({files!r})")
        keep = [c for c in rel.columns if c not in ("loaded_at", "load_id")]
        out[folder.name] = rel.select(*[duckdb.ColumnExpression(c) for c in keep]).fetchall()
    con.close()
    return out


def load_both(tmp_path: Path, monkeypatch, paths: list, workers: int = 0
              ) -> tuple[LoadReport, LoadReport, dict, dict]:
    monkeypatch.setenv("KIDATA_WORKERS", str(workers))
    results = []
    for slow in ("1", "0"):
        monkeypatch.setenv("KIDATA_SLOW_PATH", slow)
        wh = Warehouse(tmp_path / f"wh-slow{slow}")
        report = wh.load([str(p) for p in paths])
        results.append((report, tables(wh.path)))
    (slow_report, slow_tables), (fast_report, fast_tables) = results
    return slow_report, fast_report, slow_tables, fast_tables


def assert_same(slow_report: LoadReport, fast_report: LoadReport, slow_tables: dict,
                fast_tables: dict) -> None:
    assert fast_report.rejects == slow_report.rejects
    assert fast_report.warnings == slow_report.warnings
    for attr in ("records", "runs_added", "duplicates", "rejected", "warned"):
        assert getattr(fast_report, attr) == getattr(slow_report, attr), attr
    assert fast_tables.keys() == slow_tables.keys()
    for table in slow_tables:
        assert fast_tables[table] == slow_tables[table], table


def write_lines(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                    encoding="utf-8")
    return path


def test_switch_is_read_from_the_environment(monkeypatch):
    monkeypatch.delenv("KIDATA_SLOW_PATH", raising=False)
    assert fast_mod.enabled()
    monkeypatch.setenv("KIDATA_SLOW_PATH", "1")
    assert not fast_mod.enabled()
    monkeypatch.setenv("KIDATA_SLOW_PATH", "0")
    assert fast_mod.enabled()


# The lines of a batch (stage.BATCH_LINES, 2048), shrunk so that fewer generated bundles
# still cross the same batch boundaries: the sizes below are the ones the tests had at 2048
# lines a batch, scaled by BATCH / 2048.
BATCH = 256


def _scaled(lines_at_2048: int) -> int:
    return lines_at_2048 * BATCH // 2048


def test_generated_bundles_single_process(tmp_path, monkeypatch):
    from kidata.ingest import stage

    monkeypatch.setattr(stage, "BATCH_LINES", BATCH)
    n = _scaled(2500)  # more than a batch
    assert n > BATCH
    path = write_lines(tmp_path / "gen.ndjson", [GEN.bundle(i) for i in range(n)])
    out = load_both(tmp_path, monkeypatch, [path])
    assert out[1].runs_added == n
    assert (out[1].fast_path, out[0].fast_path) == (n, 0)  # every one is the common shape
    assert_same(*out)


@pytest.mark.slow
def test_generated_bundles_with_workers(tmp_path, monkeypatch, pool_jobs):
    # More than a worker batch (BATCH lines), so the pool starts; the rest of the file, a few
    # bad records among good ones, goes through the workers' fast and general paths.
    from kidata.ingest import stage

    monkeypatch.setattr(stage, "BATCH_LINES", BATCH)
    n, bad = _scaled(4500), _scaled(3000)  # the altered records in the pool's second batch
    records = [GEN.bundle(i) for i in range(n)]
    records[bad]["run"]["spec"]["timing"]["latencyNs"]["median"] = -1
    records[bad + 1]["run"]["spec"]["environmentDigest"] = "sha256:" + "0" * 64
    del records[bad + 2]["environment"]  # a bare run: its environment is known from before
    out = load_both(tmp_path, monkeypatch, [path := write_lines(tmp_path / "g.ndjson", records)],
                    workers=2)
    assert pool_jobs == [1, 2, 1, 2]  # the pool took two jobs in each load (general, fast path)
    assert path.exists() and out[1].rejected == 2
    # Each path takes what it should, in the workers too: the three altered records take the
    # general path (two rejects; a bare run, which the fast path never takes), the other
    # n - 3 the fast path; with it switched off, all n take the general path.
    assert (out[1].records, out[1].fast_path) == (n, n - 3)
    assert out[0].fast_path == 0
    assert_same(*out)


@pytest.mark.shared
def test_seeds_liger_and_trainkernel(tmp_path, monkeypatch):
    # The seeds as they are (whole documents) and as JSON Lines (the fast path's input).
    lines = write_lines(tmp_path / "seeds.jsonl",
                        [seed_bundle(p) for p in sorted(SEEDS.glob("00[01]_*.txt"))])
    out = load_both(tmp_path, monkeypatch, [SEEDS, TRAINKERNEL, *LIGER, lines])
    assert out[1].runs_added > 0
    assert_same(*out)


def test_bad_corpus(tmp_path, monkeypatch):
    out = load_both(tmp_path, monkeypatch, [SEEDS, BAD])
    assert out[1].rejected > 10
    assert_same(*out)


def test_mixed_records_in_one_file(tmp_path, monkeypatch):
    # Shapes the fast path declines, between ones it takes: it must hand them on unchanged.
    seed = seed_bundle(next(SEEDS.glob("000_*.txt")))
    bare = copy.deepcopy(GEN.bundle(7))
    del bare["environment"], bare["protocol"]
    unknown_gpu = copy.deepcopy(GEN.bundle(8))
    unknown_gpu["environment"]["spec"]["hardware"]["product"] = "Imaginary X1"
    unknown_gpu["run"]["spec"].pop("environmentDigest")
    claims = copy.deepcopy(GEN.bundle(9))
    claims["run"]["spec"]["sourceNative"]["published"] = [
        {"quantity": "speedup", "value": 1.5, "resolution": 0.01}]
    records = [GEN.bundle(1), seed, bare, GEN.bundle(2), unknown_gpu, claims, "not a bundle",
               {"kind": "BenchmarkRun"}, GEN.bundle(1), GEN.bundle(3)]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n\n{broken\n")
    out = load_both(tmp_path, monkeypatch, [path])
    assert out[1].warned == 1 and out[1].rejected >= 3
    # The fast path takes the plain bundles — GEN 1, the seed, GEN 2, GEN 1 again (a
    # duplicate, found at commit), GEN 3: 5 — and hands on the other 6 of the 11 records (bare
    # run, unknown GPU, published claims, a string, a bare document, broken JSON) unchanged to
    # the general path. Switched off, it takes none.
    assert (out[1].records, out[1].fast_path) == (11, 5)
    assert (out[0].records, out[0].fast_path) == (11, 0)
    assert_same(*out)


# -- record by record, with Hypothesis ----------------------------------------------------------

def _stage_lines(lines: list[bytes], fast_on: bool) -> tuple:
    """Stage ``lines`` as the loading process does, the fast path on or off; returns what was
    staged (JSON texts as str: Arrow stores str and UTF-8 bytes alike), the report and what
    the flattener learned."""
    stager = StagingWriter(Path("/nonexistent"), batch=10**9)
    flattener = Flattener()
    fast = FastPath(stager, flattener, on=fast_on)
    report = LoadReport(load_id="")
    counts: dict[str, list[int]] = {}
    batch = Lines("f.jsonl", None, list(enumerate(lines, start=1)))
    for seq, (position, line, error) in enumerate(fast_mod.scan(batch), start=1):
        if error is None and stage_fast(fast, report, line, batch.file, position, "f",
                                        seq, counts):
            continue
        item = error if error is not None else fast_mod.parse(line, batch.file, position,
                                                              None)
        stage_record(stager, flattener, report, item, "f", seq, counts)
    def text(v):
        return v.decode() if isinstance(v, bytes) else v

    rows = {table: [tuple(map(text, row)) for row in table_rows]
            for table, table_rows in stager.pending().items()}
    return rows, stager.counts, report.rejects, report.warnings, report.records, \
        counts, flattener.env_gpu


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


def _get(doc, path):
    for step in path:
        doc = doc[step]
    return doc


def _parent(doc, path):
    return _get(doc, path[:-1])


ODD = st.one_of(
    st.sampled_from([None, True, False, 0, -1, 0.0, -0.0, 1e308, 2**64 - 1, 2**70, "", " ",
                     "x", "é·", "\u2028", "\x00", [], {}, [1], {"a": 1}, "2024-09-03T15:00:00",
                     "2024-09-03T15:00:00+02:00", "not a time", "sha256:" + "a" * 64,
                     "sha256:" + "a" * 64 + "\n", "rms_norm/forward", "a/b/c/d/e/f",
                     "kernelindex.dev/v1alpha1", "BenchmarkRun", "latency", "memory", "us",
                     "ms", "MB", "GiB", "p20", "median", "p80", "NVIDIA H100", "h100-sxm5-80gb"]),
    st.integers(min_value=-10, max_value=10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)


# Text fields the checks read: a blank one must be rejected (or defaulted) alike.
CHECKED_TEXTS = {"name", "metric", "statistic", "unit", "status", "product", "observedAt",
                 "benchmark", "externalId", "kind", "apiVersion", "family", "liger_version"}


@st.composite
def mutated(draw) -> bytes:
    bundle = copy.deepcopy(GEN.bundle(draw(st.integers(0, 5000))))
    for _ in range(draw(st.integers(0, 3))):
        paths = [p for p in _paths(bundle) if p]
        op = draw(st.sampled_from(["drop", "set", "add", "digest", "quantiles", "labels",
                                   "unit", "duplicate", "resolution", "published", "blank"]))
        run_spec = bundle.get("run", {}).get("spec") if isinstance(bundle.get("run"), dict) \
            else None
        if op == "drop" and paths:
            path = draw(st.sampled_from(paths))
            container = _parent(bundle, path)
            del container[path[-1]]
        elif op == "set" and paths:
            path = draw(st.sampled_from(paths))
            _parent(bundle, path)[path[-1]] = draw(ODD)
        elif op == "add":
            dicts = [p for p in _paths(bundle) if isinstance(_get(bundle, p), dict)]
            target = _get(bundle, draw(st.sampled_from(dicts)))
            key = draw(st.sampled_from(["extra", "kind", "workload", "implementation",
                                        "published", "resolutionNs", "resolution", "title",
                                        "labels", "é"]))
            target[key] = draw(ODD)
        elif op == "digest" and isinstance(run_spec, dict):
            key = draw(st.sampled_from(["environmentDigest", "protocolDigest",
                                        "workloadDigest", "implementationDigest"]))
            run_spec[key] = draw(st.sampled_from(["sha256:" + "0" * 64, "sha256:" + "A" * 64,
                                                  "md5:1", None, 5, [], {"a": 1}]))
        elif op == "quantiles" and isinstance(run_spec, dict) \
                and isinstance(run_spec.get("measurements"), list) \
                and len(run_spec["measurements"]) == 2:
            m = run_spec["measurements"]
            if all(isinstance(x, dict) for x in m):
                m[0]["value"], m[1]["value"] = m[1].get("value"), m[0].get("value")
        elif op == "labels" and isinstance(bundle.get("run"), dict) \
                and isinstance(bundle["run"].get("metadata"), dict):
            labels = bundle["run"]["metadata"].setdefault("labels", {})
            if isinstance(labels, dict):
                key = draw(st.sampled_from(["gpu_name", "implementation", "workload",
                                            "kernel", "pass", "version", "variant",
                                            "x_version", "a"]))
                labels[key] = draw(st.one_of(st.text(max_size=8), ODD))
        elif op == "unit" and isinstance(run_spec, dict) \
                and isinstance(run_spec.get("measurements"), list) \
                and run_spec["measurements"] and isinstance(run_spec["measurements"][0], dict):
            m = run_spec["measurements"][0]
            m[draw(st.sampled_from(["unit", "metric", "statistic"]))] = draw(st.sampled_from(
                ["us", "µs", "ms", "s", "MB", "bytes", "ns", "latency", "memory", "energy",
                 "median", "p80", "p20", "p50", " ", "", [], {}, 1]))
        elif op == "duplicate" and isinstance(run_spec, dict) \
                and isinstance(run_spec.get("measurements"), list):
            run_spec["measurements"].append({"metric": "latency", "statistic": "median",
                                             "unit": "ns", "value": draw(ODD)})
        elif op == "blank":
            texts = [p for p in paths if isinstance(_get(bundle, p), str)]
            checked = [p for p in texts if p[-1] in CHECKED_TEXTS]
            if checked and draw(st.booleans()):
                texts = checked
            if texts:
                path = draw(st.sampled_from(texts))
                _parent(bundle, path)[path[-1]] = draw(st.sampled_from(
                    ["", " ", "\t", "\u3000", "\u2028", "\n"]))
        elif op == "resolution" and isinstance(run_spec, dict):
            timing = run_spec.get("timing")
            if isinstance(timing, dict) and draw(st.booleans()):
                timing["resolutionNs"] = draw(st.one_of(st.just(10), ODD))
            items = run_spec.get("measurements")
            if isinstance(items, list) and items and isinstance(items[-1], dict):
                items[-1]["resolution"] = draw(st.one_of(st.just(0.01), ODD))
        elif op == "published" and isinstance(run_spec, dict) \
                and isinstance(run_spec.get("sourceNative"), dict):
            run_spec["sourceNative"]["published"] = draw(st.one_of(
                ODD, st.just([{"quantity": "speedup", "value": 1.25, "resolution": 0.01,
                               "baselineRun": "x"}])))
    # Either serialisation: escapes or raw unicode, as producers write it.
    return json.dumps(bundle, ensure_ascii=draw(st.booleans())).encode()


@pytest.mark.slow  # 800 generated inputs, the fast path against the general path
@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(mutated(), st.builds(lambda i: json.dumps(GEN.bundle(i)).encode(),
                                               st.integers(0, 5000))),
                min_size=1, max_size=6))
def test_mutated_bundles_stage_the_same(lines):
    slow = _stage_lines(lines, fast_on=False)
    fast = _stage_lines(lines, fast_on=True)
    assert fast == slow


def test_whitespace_around_and_between_lines(tmp_path, monkeypatch):
    # The fast path reads lines unstripped: padding, CRLF and whitespace-only lines must give
    # what the general path gives (which strips), positions included.
    pads = [b" ", b"\t", b"\r", b"\x0b", b"\x0c", b"  \t"]
    body = [json.dumps(GEN.bundle(i)).encode() for i in range(12)]
    text = b""
    for i, line in enumerate(body):
        text += pads[i % len(pads)] + line + pads[(i + 1) % len(pads)] + b"\r\n"
        text += pads[i % len(pads)] * (i % 3) + b"\n"  # blank, or whitespace only
    text += b"   {broken  \r\n"
    path = tmp_path / "padded.jsonl"
    path.write_bytes(text)
    out = load_both(tmp_path, monkeypatch, [path])
    assert out[1].runs_added == 12 and out[1].rejected == 1
    assert out[1].rejects[0].position == f"line {12 * 2 + 1}"
    assert_same(*out)


# -- one home for every rule ----------------------------------------------------------------

def test_the_fast_path_holds_no_record_rule():
    # The fast path only decodes: it names none of the rules' tables and helpers (units,
    # quantile order, digest format, content hash, API version), so a rule cannot be changed
    # in it alone. Read from its source, without importing.
    source = (ROOT / "kidata" / "ingest" / "fast.py").read_text()
    code = "\n".join(line for line in source.splitlines()
                     if not line.lstrip().startswith("#"))
    code = code.split('"""', 2)[2]  # after the module docstring
    for name in ("UNITS", "QUANTILE_ORDER", "DIGEST_RE", "API_VERSION", "hashlib",
                 "COUNT_STATISTICS", "ZERO_STATISTICS", "positive_number", "is_text",
                 "blake2b", "externalId", "benchmark", "labels", "measurements"):
        assert name not in code, name


def test_a_rule_changed_in_one_place_changes_both_paths(monkeypatch):
    # Change two rules where they are written: the version a run's labels give (flatten.py)
    # and what a measured value must be (validate.py: here also below 240,000 ns). Both paths
    # follow: the fast path still takes the records it takes, and gives what the general
    # path gives.
    from kidata.ingest import flatten, validate

    real_labels = flatten.Flattener._labels
    real_positive = validate.positive_number

    def labels(self, values):
        return real_labels(self, values)[0], "patched"

    def below(value):
        number = real_positive(value)
        return number if number is not None and number < 240_000 else None

    monkeypatch.setattr(flatten.Flattener, "_labels", labels)
    monkeypatch.setattr(validate, "positive_number", below)
    # GEN 0 has median 244,107 ns (the first line of benchmarks' generated bundles): above
    # the changed limit, rejected by both paths; GEN 1 (median 212,406, p20 208,964, p80
    # 214,756) is kept, its version "patched" (the labels say liger_version 0.2.0).
    lines = [json.dumps(GEN.bundle(0)).encode(), json.dumps(GEN.bundle(1)).encode()]
    slow = _stage_lines(lines, fast_on=False)
    fast = _stage_lines(lines, fast_on=True)
    assert fast == slow
    rows, _, rejects, *_ = fast
    assert [(r.position, r.field) for r in rejects] == [
        ("line 1", "run.spec.timing.latencyNs.median")]
    assert "expected a finite number > 0" in rejects[0].reason
    version = stager_names()["runs"].index("version")
    assert [r[version] for r in rows["runs"]] == ["patched"]


def stager_names() -> dict[str, list[str]]:
    return StagingWriter(Path("/nonexistent"), batch=1).names  # pending()'s column order


def test_many_environments_of_one_length_are_told_apart():
    # The fast path remembers environment texts by their length, at most 16 per length: 40
    # environments whose texts differ only in an architecture of the same length ("sm_00" to
    # "sm_39": the digest covers the spec), each twice (the second time remembered, or
    # forgotten when the 17th came), must each give their own digest, as the general path
    # does.
    lines = []
    for i in [*range(40), *range(40)]:
        bundle = copy.deepcopy(GEN.bundle(i))
        bundle["environment"]["spec"]["hardware"]["architecture"] = f"sm_{i:02d}"
        del bundle["run"]["spec"]["environmentDigest"]
        lines.append(json.dumps(bundle).encode())
    slow = _stage_lines(lines, fast_on=False)
    fast = _stage_lines(lines, fast_on=True)
    assert fast == slow
    rows = fast[0]
    env = stager_names()["runs"].index("environment_id")
    assert len({r[env] for r in rows["runs"]}) == 40
    assert len(rows["environments"]) == 40
