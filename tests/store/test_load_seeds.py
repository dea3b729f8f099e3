"""Loading the three seed documents: values checked by hand against the seed files."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from kidata import Warehouse
from kidata.core.digest import digest

SEEDS = Path(__file__).parents[1] / "data" / "seeds"
LIGER = ("liger-rms-norm-forward-liger-nvidia-a100-sxm4-80gb-hidden4096-rows2048-bf16-"
         "2024-09-03-15-39-30")
TORCH = ("liger-relu-squared-backward-torch-nvidia-h100-80gb-hbm3-hidden4096-rows4096-bf16-"
         "2026-03-27-06-09-46")


def seed_bundle(name: str) -> dict:
    """A seed file's JSON bundle (the text after its title line)."""
    text = next(SEEDS.glob(f"{name}_*.txt")).read_text()
    return json.loads(text.split("\n", 2)[2])


def test_seed_medians_and_spread_in_microseconds(wh: Warehouse):
    report = wh.load([str(SEEDS)])
    assert report.ok and report.files == 3
    rows = dict(
        (r[0], r[1:]) for r in wh.sql(
            "select run_id, median_us, p20_us, p80_us, kernel, pass, implementation, gpu, "
            "workload from latencies where run_id in ($1, $2)", params=[LIGER, TORCH]).fetchall())
    # seed 000: latencyNs.median 31072, p20 30048, p80 31968 (ns) -> µs = ns / 1000
    assert rows[LIGER] == (31.072, 30.048, 31.968, "rms_norm", "forward", "liger",
                           "a100-sxm4-80gb", "hidden4096-rows2048-bf16")
    # seed 001: 126336, 125152, 127136 ns
    assert rows[TORCH] == (126.336, 125.152, 127.136, "relu_squared", "backward", "torch",
                           "h100-sxm5-80gb", "hidden4096-rows4096-bf16")


def test_run_row_keeps_identity_provenance_and_versions(wh: Warehouse):
    wh.load([str(SEEDS)])
    row = wh.sql("select source, external_id, observed_at, status, version, protocol_id, "
                 "environment_id, source_file, gpu_name from runs where run_id = $1",
                 params=[LIGER]).fetchall()[0]
    bundle = seed_bundle("000")
    spec = bundle["run"]["spec"]
    assert row[0] == "liger-kernel-bench"
    assert row[1] == spec["sourceNative"]["externalId"]
    assert row[2].isoformat() == "2024-09-03T15:39:30+00:00"
    assert row[3:5] == ("passed", "0.2.1")
    assert row[5] == spec["protocolDigest"] and row[6] == spec["environmentDigest"]
    assert row[7].endswith("000_ef9e0295e36a82ef.txt")
    assert row[8] == "NVIDIA A100 SXM4-80GB"


def test_digest_rule_reproduces_the_seeds_declared_digests():
    for name in ("000", "001"):
        bundle = seed_bundle(name)
        assert digest(bundle["protocol"]) == bundle["run"]["spec"]["protocolDigest"]
        assert digest(bundle["environment"]) == bundle["run"]["spec"]["environmentDigest"]


def test_environments_and_protocols_keyed_by_digest(wh: Warehouse):
    wh.load([str(SEEDS)])
    envs = dict(wh.sql("select environment_id, gpu from environments").fetchall())
    # Seed 000's A100 host and trainkernel's "A100 SXM4 80 GB" are one hardware document
    # (metadata is not part of identity), so there are exactly two environments.
    assert envs == {
        seed_bundle("000")["run"]["spec"]["environmentDigest"]: "a100-sxm4-80gb",
        seed_bundle("001")["run"]["spec"]["environmentDigest"]: "h100-sxm5-80gb",
    }
    families = sorted(r[0] for r in wh.sql("select family from protocols").fetchall())
    assert families == ["liger_kernel_bench", "liger_kernel_bench",
                        "trainkernel_h100_calibration", "trainkernel_held_out"]


def test_one_gpu_key_per_card_across_sources(wh: Warehouse):
    wh.load([str(SEEDS)])
    names = wh.sql("select gpu, list(distinct gpu_name order by gpu_name) from runs "
                   "group by gpu order by gpu").fetchall()
    assert names == [
        ("a100-sxm4-80gb", ["A100 SXM4 80 GB", "NVIDIA A100 SXM4-80GB"]),
        ("h100-sxm5-80gb", ["H100 SXM 80 GB", "NVIDIA H100 80GB HBM3"]),
    ]


def test_loading_twice_changes_nothing(wh: Warehouse):
    first = wh.load([str(SEEDS)])
    assert first.runs_added == 26  # 2 Liger/PyTorch + 8 held-out rows x 2 + 8 calibration rows
    def snapshot() -> dict:
        # Everything but the load's own id and time: those name the load, not the data.
        return {t: wh.sql(f"select * exclude (load_id) from {t} order by all").fetchall()
                for t in ("runs", "measurements", "environments", "protocols", "workloads",
                          "published", "rejects")}

    before = snapshot()
    second = wh.load([str(SEEDS)])
    assert second.runs_added == 0 and second.duplicates == 26 and second.ok
    assert snapshot() == before


@pytest.mark.parametrize("variant", ["no-title", "array", "jsonl", "gzip", "bare"])
def test_kernelindex_layouts_load_the_same_run(wh: Warehouse, tmp_path: Path, variant: str):
    bundle = seed_bundle("000")
    path = tmp_path / "input.json"
    if variant == "no-title":
        path.write_text(json.dumps(bundle, indent=2))
    elif variant == "array":
        path.write_text(json.dumps([bundle, seed_bundle("001")]))
    elif variant == "jsonl":
        path.write_text(json.dumps(bundle) + "\n" + json.dumps(seed_bundle("001")) + "\n")
    elif variant == "gzip":
        path = tmp_path / "input.json.gz"
        with gzip.open(path, "wb") as out:
            out.write(next(SEEDS.glob("000_*.txt")).read_bytes())
    elif variant == "bare":
        # Bare documents of one kind each: environment and protocol first, then the run.
        path.write_text("\n".join(json.dumps(bundle[k]) for k in ("environment", "protocol",
                                                                  "run")) + "\n")
    report = wh.load([str(path)])
    assert report.ok, report.rejects
    assert (LIGER, 31.072) in wh.sql("select run_id, median_us from latencies").fetchall()
    assert wh.sql("select gpu from runs where run_id = $1",
                  params=[LIGER]).fetchall() == [("a100-sxm4-80gb",)]


def test_stdin_is_read_with_dash(cli, monkeypatch):
    import io
    import sys

    text = next(SEEDS.glob("001_*.txt")).read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text)))
    result = cli("load", "-")
    assert result.code == 0, result.err
    assert "1 runs added" in result.out


def test_format_option_forces_a_reader(cli, data):
    # The trainkernel table read as kernelindex is not a bundle: rejected, named.
    result = cli("load", "--format", "kernelindex", data / "seeds" / "003_55f6fcd9cea2f10a.txt")
    assert result.code == 1
    assert "003_55f6fcd9cea2f10a.txt, document: not a kernelindex bundle or document" in result.err
    assert cli("load", "--format", "nope", data / "seeds").code == 2


def test_a_label_named_held_out_does_not_make_a_bundle_a_trainkernel_table(wh: Warehouse,
                                                                            tmp_path: Path):
    # Found by Hypothesis: detection once searched the text for '"held_out":'.
    b = seed_bundle("000")
    b["run"]["metadata"]["labels"]["held_out"] = "held_out"
    path = tmp_path / "labelled.jsonl"
    path.write_text(json.dumps(b) + "\n")
    report = wh.load([str(path)])
    assert report.ok and report.runs_added == 1


def test_a_load_creates_one_duckdb_database(wh: Warehouse, monkeypatch):
    """A load's bookkeeping (which files are loaded, the reference files) and its commit share
    one DuckDB database, with the commit's memory limit: creating one costs 20-35 ms, about a
    tenth of a small load. (Its queries afterwards open their own.)"""
    import duckdb

    created: list[dict] = []
    create = duckdb.connect

    def counting(*args, **kwargs):
        created.append(kwargs.get("config") or {})
        return create(*args, **kwargs)

    monkeypatch.setattr(duckdb, "connect", counting)
    report = wh.load([str(SEEDS)])
    assert report.ok and report.committed
    assert len(created) == 1, created
    assert created[0]["memory_limit"] == "192MB" and created[0]["threads"] == 2
    monkeypatch.setattr(duckdb, "connect", create)
    assert wh.check().problems == []
