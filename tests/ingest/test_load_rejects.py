"""Bad records are rejected with file, record and field named, while the others load."""

from __future__ import annotations

import json
from pathlib import Path

from kidata import Warehouse

SEEDS = Path(__file__).parents[1] / "data" / "seeds"


def bundle(name: str) -> dict:
    text = next(SEEDS.glob(f"{name}_*.txt")).read_text()
    return json.loads(text.split("\n", 2)[2])


def write_jsonl(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_digest_mismatch_rejects_only_that_record(cli, tmp_path: Path, wh: Warehouse):
    tampered = bundle("001")
    tampered["protocol"]["spec"]["measurement"]["timer"] = "wall_clock"  # not what was hashed
    path = write_jsonl(tmp_path / "runs.jsonl", [bundle("000"), tampered])
    result = cli("load", path)
    assert result.code == 1
    assert (f"rejected: {path}, line 2, field run.spec.protocolDigest: digest mismatch: the run "
            "declares sha256:080e6e66e4ec75a131aa0c9121c74b8e8eed64e7b6d621d567c6a28f79548be8 "
            "but the protocol document in the record hashes to sha256:") in result.err
    assert "1 runs added" in result.out and "1 rejected" in result.out
    assert wh.sql("select kernel from runs").fetchall() == [("rms_norm",)]
    rejects = wh.sql("select source_file, position, field, raw from rejects").fetchall()
    assert [(r[0], r[1], r[2]) for r in rejects] == [
        (str(path), "line 2", "run.spec.protocolDigest")]
    assert json.loads(rejects[0][3])["protocol"]["spec"]["measurement"]["timer"] == "wall_clock"


def test_malformed_file_is_rejected_and_other_files_load(cli, tmp_path: Path, wh: Warehouse):
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(bundle("000"), indent=2)[:-40])  # truncated
    result = cli("load", broken, SEEDS / "001_74c4a9a5654eeb33.txt")
    assert result.code == 1
    assert f"rejected: {broken}, document: invalid JSON:" in result.err
    assert wh.sql("select kernel from runs").fetchall() == [("relu_squared",)]


def test_missing_required_field_is_named(cli, tmp_path: Path, wh: Warehouse):
    missing = bundle("000")
    del missing["run"]["spec"]["timing"]["latencyNs"]["median"]
    path = write_jsonl(tmp_path / "runs.jsonl", [missing, bundle("001")])
    result = cli("load", path)
    assert result.code == 1
    assert (f"rejected: {path}, line 1, field run.spec.timing.latencyNs.median: expected a "
            "median: spec.timing.latencyNs.median or a measurement with statistic 'median'"
            ) in result.err
    assert wh.sql("select kernel from runs").fetchall() == [("relu_squared",)]


def test_missing_name_and_wrong_type_are_named(cli, tmp_path: Path):
    no_name = bundle("000")
    del no_name["run"]["metadata"]["name"]
    wrong_type = bundle("001")
    wrong_type["run"]["spec"]["timing"]["latencyNs"]["median"] = "126336"
    path = write_jsonl(tmp_path / "runs.jsonl", [no_name, wrong_type])
    result = cli("load", path)
    assert result.code == 1
    assert (f"{path}, line 1, field run.metadata.name: expected a non-empty string, got "
            "nothing (missing or null)") in result.err
    assert (f"{path}, line 2, field run.spec.timing.latencyNs.median: expected a number, "
            "got '126336'") in result.err


def test_conflicting_numbers_for_a_loaded_run_are_rejected_naming_both_files(
        cli, tmp_path: Path, wh: Warehouse):
    first = SEEDS / "000_ef9e0295e36a82ef.txt"
    assert cli("load", first).code == 0
    changed = bundle("000")
    changed["run"]["spec"]["timing"]["latencyNs"]["median"] = 31073
    path = write_jsonl(tmp_path / "again.jsonl", [changed])
    result = cli("load", path)
    assert result.code == 1
    assert (f"{path}, line 1, field run.metadata.name: conflict: run "
            "liger-rms-norm-forward-liger-nvidia-a100-sxm4-80gb-hidden4096-rows2048-bf16-"
            f"2024-09-03-15-39-30 is already in the warehouse, loaded from {first}, with "
            "different numbers") in result.err
    assert wh.sql("select value from measurements where statistic = 'median'"
                  ).fetchall() == [(31072.0,)]


def test_published_that_is_not_a_list_is_rejected_not_a_crash(tmp_path: Path, wh: Warehouse):
    odd = bundle("000")
    odd["run"]["spec"].setdefault("sourceNative", {})["published"] = True
    path = write_jsonl(tmp_path / "runs.jsonl", [odd, bundle("001")])
    report = wh.load([str(path)])
    assert [(r.position, r.field, r.reason) for r in report.rejects] == [
        ("line 1", "run.spec.sourceNative.published", "expected a list of objects, got True")]
    assert report.runs_added == 1


def test_rejects_lists_what_is_still_unresolved(cli, tmp_path: Path, wh: Warehouse):
    """A failed first try (no --set: both records of a Triton CSV lack their GPU), a second
    try with the options (one record is nan), the file fixed: `kidata rejects` lists the
    newest read's rejects only, says how many it leaves out, and --all / --load list all."""
    triton = tmp_path / "t.csv"
    triton.write_text("N,cuBLAS,Triton\n128.000000,0.5,nan\n")
    other = write_jsonl(tmp_path / "other.jsonl", [bundle("000"), {"not": "a bundle"}])

    def listed(*args: str) -> list[tuple[str, str, str]]:
        result = cli("rejects", "--format", "json", *args)
        assert result.code == 0, result.err
        return sorted((r["source_file"].rsplit("/", 1)[1], r["position"], r["field"])
                      for r in json.loads(result.out))

    assert cli("load", triton, other).code == 1
    (first,) = [r[0] for r in wh.sql("select load_id from loads").fetchall()]
    assert listed() == [("other.jsonl", "line 2", None),
                        ("t.csv", "row 1, column Triton", "gpu"),
                        ("t.csv", "row 1, column cuBLAS", "gpu")]
    assert cli("load", triton, "--set", "gpu=H100 SXM", "--set", "unit=ms").code == 1
    # The newest read of t.csv rejects only its nan; other.jsonl was not read again.
    assert listed() == [("other.jsonl", "line 2", None),
                        ("t.csv", "row 1, column Triton", "median")]
    result = cli("rejects")
    assert ("note: 2 rejects of files that a later load read again are not listed (the newest "
            "read of a file says what is wrong with it now); --all lists them") in result.err
    assert len(listed("--all")) == 4
    assert listed("--load", first) == [("other.jsonl", "line 2", None),
                                       ("t.csv", "row 1, column Triton", "gpu"),
                                       ("t.csv", "row 1, column cuBLAS", "gpu")]
    # Fixed: read in full without reject, so nothing of t.csv is left to fix.
    triton.write_text("N,cuBLAS,Triton\n128.000000,0.5,0.7\n")
    assert cli("load", triton, "--set", "gpu=H100 SXM", "--set", "unit=ms").code == 0
    assert listed() == [("other.jsonl", "line 2", None)]
    assert wh.superseded_rejects() == 3 and wh.superseded_rejects(str(other)) == 0
    assert len(wh.rejects(everything=True).fetchall()) == 4
