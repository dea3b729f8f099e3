"""kidata convert --to kernelindex: bundles like the seeds, and loading them gives the same
warehouse as loading the source."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from conftest import SHARED, shared

from kidata import Warehouse
from kidata.core.digest import digest
from kidata.core.sql import quote_identifier
from kidata.ingest.convert import convert
from kidata.store.schema import TABLES as SCHEMAS

DATA = Path(__file__).parents[1] / "data"
RECENT = SHARED / "liger" / "all_benchmark_data.csv"
EDGE = DATA / "liger" / "edge_cases.csv"
SEEDS = DATA / "seeds"
SEED_000 = next(SEEDS.glob("000_*.txt"))
SEED_001 = next(SEEDS.glob("001_*.txt"))
SEED_003 = next(SEEDS.glob("003_*.txt"))
RMS = ("liger-rms-norm-forward-liger-nvidia-a100-sxm4-80gb-hidden4096-rows2048-bf16-"
       "2024-09-03-15-39-30")
RELU = ("liger-relu-squared-backward-torch-nvidia-h100-80gb-hbm3-hidden4096-rows4096-bf16-"
        "2026-03-27-06-09-46")
# Tables a load fills from records (not the load log or the static reference tables), and the
# columns that say which file and load a row came from rather than what it is.
TABLES = ("runs", "measurements", "environments", "protocols", "workloads",
          "workload_parameters", "published")
PROVENANCE = ("source_file", "loaded_at", "load_id")


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> tuple[Path, object]:
    out = tmp_path_factory.mktemp("bundles")
    report = convert([str(shared("liger/all_benchmark_data.csv")), str(SEED_003)], out)
    return out, report


def snapshot(wh: Warehouse) -> dict[str, list[tuple]]:
    """Every row of the record tables without provenance columns, sorted."""
    out = {}
    for table in TABLES:
        columns = ", ".join(quote_identifier(f.name) for f in SCHEMAS[table]
                            if f.name not in PROVENANCE)
        out[table] = sorted(wh.sql(f"select {columns} from {table}").fetchall(), key=repr)
    return out


def test_one_bundle_per_record(converted):
    out, report = converted
    # 2,448 CSV rows + trainkernel's 8 held_out rows x 2 runs + 8 calibration rows = 2,472.
    assert (report.records, report.written, report.rejected, report.duplicates) == \
        (2472, 2472, 0, 0)
    assert len(list(out.glob("*.txt"))) == 2472


@pytest.mark.parametrize("name, seed, title", [(RMS, SEED_000, "Liger"),
                                               (RELU, SEED_001, "PyTorch")])
def test_seed_rows_are_written_as_the_seeds(converted, name: str, seed: Path, title: str):
    out, _ = converted
    text = (out / f"{name}.txt").read_text("utf-8")
    head, blank, body = text.split("\n", 2)
    assert (head, blank) == (title, "")
    ours = json.loads(body)
    theirs = json.loads(seed.read_text("utf-8").split("\n", 2)[2])
    assert list(ours) == ["run", "protocol", "environment", "workload", "implementation"]
    # The workload and implementation digests are kidata's own (docs/liger.md): they hash the
    # documents the bundle carries.
    assert ours["run"]["spec"].pop("workloadDigest") == digest(ours["workload"])
    assert ours["run"]["spec"].pop("implementationDigest") == digest(ours["implementation"])
    del theirs["run"]["spec"]["workloadDigest"], theirs["run"]["spec"]["implementationDigest"]
    for role in ("run", "protocol", "environment"):
        # Same documents with the same key order and number formatting as the seed's text.
        assert json.dumps(ours[role], indent=2, ensure_ascii=False) == \
            json.dumps(theirs[role], indent=2, ensure_ascii=False)
    # 2-space indent with literal "·", as in the seed files.
    assert '\n  "run": {\n    "kind": "BenchmarkRun",' in text and " · " in text


@pytest.mark.shared
def test_loading_the_bundles_gives_the_same_warehouse(converted, tmp_path: Path):
    out, _ = converted
    source = Warehouse(tmp_path / "source")
    assert source.load([str(RECENT), str(SEED_003)]).ok
    bundles = Warehouse(tmp_path / "bundles")
    report = bundles.load([str(out)])
    assert report.ok and report.runs_added == 2472
    assert snapshot(bundles) == snapshot(source)


def test_convert_command_reports_rejects_and_writes_the_good_records(cli, tmp_path: Path):
    out = tmp_path / "out"
    result = cli("convert", EDGE, "--to", "kernelindex", "-o", out)
    assert result.code == 1
    rejected = [line for line in result.err.splitlines() if line.startswith("rejected:")]
    assert [line.split(", field")[0] for line in rejected] == [
        f"rejected: {EDGE}, row {n}" for n in (5, 6, 7, 8, 9)]
    assert result.out.strip() == (f"1 files, 10 records: 5 bundles written to {out}, "
                                  "0 duplicates skipped, 5 rejected, 1 warnings")
    assert len(list(out.glob("*.txt"))) == 5
    memory = out / ("liger-rms-norm-no-grad-forward-liger-nvidia-a100-sxm4-80gb-hidden4096-"
                    "rows2048-bf16-2025-01-02-03-04-05-memory.txt")
    bundle = json.loads(memory.read_text("utf-8").split("\n", 2)[2])
    assert bundle["run"]["spec"]["measurements"] == [
        {"unit": "MB", "value": 64.5, "metric": "memory", "statistic": "median"},
        {"unit": "MB", "value": 64.25, "metric": "memory", "statistic": "p20"},
        {"unit": "MB", "value": 65.0, "metric": "memory", "statistic": "p80"},
    ]
    assert bundle["protocol"]["metadata"]["name"] == "liger-bench-peak-memory-no-grad-forward"


def test_trainkernel_converts_too(cli, tmp_path: Path):
    out = tmp_path / "out"
    assert cli("convert", SEED_003, "-o", out).code == 0
    # The run's name (docs/formats.md, "Identity"): a readable prefix, then 16 hex digits of
    # the SHA-256 of its externalId, the canonical JSON of its exact values.
    external_id = ('{"gpu":"h100-sxm5-80gb","implementation":"inductor",'
                   '"source":"trainkernel-results","table":"held_out","workload":"small"}')
    name = ("trainkernel-held-out-h100-sxm5-80gb-small-inductor-"
            + hashlib.sha256(external_id.encode()).hexdigest()[:16])
    text = (out / f"{name}.txt").read_text("utf-8")
    assert text.startswith("Inductor (torch.compile)\n\n{\n")
    run = json.loads(text.split("\n", 2)[2])["run"]
    assert run["spec"]["timing"]["latencyNs"] == {"median": 18840.0}  # 18.84 µs
    assert run["spec"]["sourceNative"]["externalId"] == external_id


def test_bare_documents_are_filled_into_the_run_bundle(cli, tmp_path: Path):
    # JSON Lines: the environment and protocol as bare documents, then the run alone.
    seed = json.loads(SEED_000.read_text("utf-8").split("\n", 2)[2])
    source = tmp_path / "bare.jsonl"
    source.write_text("\n".join(json.dumps(seed[r]) for r in ("environment", "protocol", "run")))
    out = tmp_path / "out"
    assert cli("convert", source, "-o", out).code == 0
    names = sorted(p.name for p in out.glob("*.txt"))
    assert names == ["environment-liger-bench-nvidia-a100-sxm4-80gb.txt", f"{RMS}.txt",
                     "protocol-liger-bench-do-bench-forward.txt"]
    bundle = json.loads((out / f"{RMS}.txt").read_text("utf-8").split("\n", 2)[2])
    assert bundle == {"run": seed["run"], "protocol": seed["protocol"],
                      "environment": seed["environment"]}
    a, b = Warehouse(tmp_path / "a"), Warehouse(tmp_path / "b")
    assert a.load([str(source)]).ok and b.load([str(out)]).ok
    source_tables, bundle_tables = snapshot(a), snapshot(b)
    # One difference, and it is a gain: runs.gpu_name comes from an environment document in
    # the same record, which the bare run lacked (null) and its bundle now has.
    gpu_name = [f.name for f in SCHEMAS["runs"] if f.name not in PROVENANCE].index("gpu_name")
    (source_run,), (bundle_run,) = source_tables.pop("runs"), bundle_tables.pop("runs")
    assert (source_run[gpu_name], bundle_run[gpu_name]) == (None, "NVIDIA A100 SXM4-80GB")
    assert source_run[:gpu_name] + source_run[gpu_name + 1:] == \
        bundle_run[:gpu_name] + bundle_run[gpu_name + 1:]
    assert source_tables == bundle_tables


def test_same_run_with_other_numbers_is_a_conflict(cli, tmp_path: Path):
    seed = json.loads(SEED_000.read_text("utf-8").split("\n", 2)[2])
    changed = json.loads(json.dumps(seed))
    changed["run"]["spec"]["timing"]["latencyNs"]["median"] = 31073
    source = tmp_path / "two.jsonl"
    source.write_text(json.dumps(seed) + "\n" + json.dumps(seed) + "\n" + json.dumps(changed))
    result = cli("convert", source, "-o", tmp_path / "out")
    assert result.code == 1
    assert f"rejected: {source}, line 3, field run.metadata.name: conflict: {RMS} appears " \
           f"earlier in this conversion ({source}, line 1) with different numbers" in result.err
    assert "1 bundles written" in result.out and "1 duplicates skipped" in result.out


def test_unknown_target_is_a_usage_error(cli, tmp_path: Path):
    result = cli("convert", SEED_000, "--to", "csv", "-o", tmp_path / "out")
    assert result.code == 2
    assert "Error: unknown target 'csv'; allowed targets are: kernelindex" in result.err
