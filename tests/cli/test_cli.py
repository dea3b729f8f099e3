"""The command line: output formats, exit codes, exports, info, views, help and docs."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from kidata import __version__
from kidata.cli import app

ROOT = Path(__file__).parents[2]
SEEDS = Path(__file__).parents[1] / "data" / "seeds"
Q = "select workload, latency_ratio from speedups where candidate = 'trainkernel' and " \
    "gpu = 'h100-sxm5-80gb' order by workload"


@pytest.fixture
def loaded(cli):
    assert cli("load", SEEDS).code == 0
    return cli


def test_version(cli):
    result = cli("--version")
    assert (result.code, result.out) == (0, f"kidata {__version__}\n")


def test_sql_formats(loaded):
    text = loaded("sql", Q)
    assert text.code == 0
    lines = text.out.splitlines()
    assert lines[0].split() == ["workload", "latency_ratio"]
    assert lines[-1] == "(4 rows)"
    rows = list(csv.reader(loaded("sql", Q, "--format", "csv").out.splitlines()))
    # H100: medium 191.09/30.58, online 13.41/21.76, small 53.86/18.84, tiny-online 12.80/15.58
    assert [r[0] for r in rows] == ["workload", "medium", "online", "small", "tiny-online"]
    assert float(rows[2][1]) == pytest.approx(13.41 / 21.76)
    data = json.loads(loaded("sql", Q, "--format", "json").out)
    assert data[3] == {"workload": "tiny-online", "latency_ratio": pytest.approx(12.80 / 15.58)}
    nd = [json.loads(line) for line in loaded("sql", Q, "-f", "ndjson").out.splitlines()]
    assert [r["workload"] for r in nd] == ["medium", "online", "small", "tiny-online"]
    md = loaded("sql", Q, "--format", "markdown").out.splitlines()
    assert md[0] == "| workload | latency_ratio |" and md[1] == "|---|---|"
    assert md[2] == f"| medium | {191.09 / 30.58:.6g} |"


def test_bad_query_gives_duckdbs_message_without_traceback(loaded):
    result = loaded("sql", "select nope from runs")
    assert result.code == 1
    assert result.err.startswith("Error: Binder Error: Referenced column \"nope\" not found")
    assert "Traceback" not in result.err


def test_bad_usage_exits_2(cli):
    assert cli("sql", "select 1", "--format", "xml").code == 2
    assert cli("load", "does/not/exist.json").code == 2
    assert cli("export", "runs", "-o", "out.txt").code == 2  # suffix tells no format


@pytest.mark.parametrize("suffix", ["csv", "parquet", "json", "ndjson", "xlsx"])
def test_export_formats(loaded, tmp_path: Path, suffix: str):
    out = tmp_path / f"speedups.{suffix}"
    result = loaded("export", "speedups", "-o", out)
    assert result.code == 0, result.err
    assert result.out == f"wrote 16 rows of speedups to {out} ({suffix})\n"
    if suffix == "csv":
        with out.open() as fh:
            rows = list(csv.DictReader(fh))
    elif suffix == "parquet":
        rows = pq.read_table(out).to_pylist()
    elif suffix == "json":
        rows = json.loads(out.read_text())
    elif suffix == "ndjson":
        rows = [json.loads(line) for line in out.read_text().splitlines()]
    else:
        import polars as pl

        rows = pl.read_excel(out).to_dicts() if _has_excel_reader() else None
        if rows is None:
            assert out.stat().st_size > 0 and out.read_bytes()[:2] == b"PK"
            return
    assert len(rows) == 16
    pair = next(r for r in rows if r["candidate"] == "trainkernel" and r["workload"] == "small"
                and r["gpu"] == "a100-sxm4-80gb")
    assert float(pair["latency_ratio"]) == pytest.approx(66.04 / 22.92)


def _has_excel_reader() -> bool:
    try:
        import fastexcel  # noqa: F401
    except ImportError:
        return False
    return True


def test_export_format_option_and_unknown_name(loaded, tmp_path: Path):
    out = tmp_path / "runs.data"
    assert loaded("export", "runs", "-o", out, "--format", "ndjson").code == 0
    assert len(out.read_text().splitlines()) == 26
    result = loaded("export", "nope", "-o", tmp_path / "x.csv")
    assert result.code == 2
    assert result.err.startswith("Error: no table or view named 'nope'; known: ")
    result = loaded("export", "speedup", "-o", tmp_path / "x.csv")
    assert result.code == 2
    assert result.err.startswith("Error: no table or view named 'speedup'; did you mean "
                                 "'speedups' or 'rate_speedups' or 'speedup_summary'? known: ")
    assert "environments, " in result.err and "speedups, " in result.err
    result = loaded("export", "runs", "-o", tmp_path / "x.csv", "--format", "xml")
    assert result.code == 2
    assert "allowed formats are: arrow, csv, json, ndjson, parquet, xlsx" in result.err


def test_info(loaded):
    result = loaded("info")
    assert result.code == 0
    assert re.search(r"runs\s+26 rows in 1 files", result.out)
    assert "sources: liger-kernel-bench (2 runs), trainkernel-results (24 runs)" in result.out
    assert "gpus: a100-sxm4-80gb (9 runs), h100-sxm5-80gb (17 runs)" in result.out
    assert "observed: 2024-09-03 15:39:30 to 2026-03-27 06:09:46 UTC" in result.out
    assert "hint:" not in result.out


def test_info_suggests_compacting_a_table_of_many_files(loaded, tmp_path, monkeypatch):
    from kidata import cli

    monkeypatch.setattr(cli, "COMPACT_HINT_FILES", 3)
    for n in range(2):  # one new run per load: 3 files in runs
        seed = json.loads((SEEDS / "000_ef9e0295e36a82ef.txt").read_text().split("\n", 2)[2])
        seed["run"]["metadata"]["name"] = f"another-run-{n}"
        path = tmp_path / f"new-{n}.jsonl"
        path.write_text(json.dumps(seed) + "\n")
        assert loaded("load", path).code == 0
    assert "hint: a table has 3 files (each load adds one)" in loaded("info").out
    assert loaded("compact").code == 0
    assert "hint:" not in loaded("info").out


def test_warehouse_option_and_env_var(cli, tmp_path: Path, monkeypatch):
    other = tmp_path / "elsewhere"
    assert cli("--warehouse", other, "load", SEEDS).code == 0
    assert (other / "runs").is_dir()
    monkeypatch.setenv("KIDATA_WAREHOUSE", str(other))
    assert "26 rows" in cli("info").out


def test_views_lists_purposes_and_sql_script_runs_in_plain_duckdb(loaded, wh_path: Path):
    listing = loaded("views").out
    assert re.search(r"^speedups\s+Candidate vs baseline latency", listing, re.M)
    script = loaded("views", "--sql").out
    con = duckdb.connect()
    con.execute(script)  # no kidata code from here on
    assert con.execute("select count(*) from speedups where candidate = 'trainkernel'"
                       ).fetchall() == [(8,)]


def _commands():
    import typer.main

    group = typer.main.get_command(app)
    return group, sorted(group.commands)


def test_every_command_has_help_and_is_documented_in_the_readme(cli):
    group, names = _commands()
    readme = (ROOT / "README.md").read_text()
    for name in names:
        assert group.commands[name].help, f"{name} has no help text"
        result = cli(name, "--help")
        assert result.code == 0 and "Usage: kidata " + name in result.out
        assert f"kidata {name}" in readme, f"README does not document `kidata {name}`"


def test_load_says_which_files_it_did_not_read_again(loaded):
    again = loaded("load", SEEDS)
    assert again.code == 0
    assert "3 files unchanged since a load without rejects: not read again" in again.err
    assert "3 files, 26 records: 0 runs added" in again.out and "26 duplicates" in again.out
    quiet = loaded("load", "-q", SEEDS)
    assert quiet.code == 0 and "not read again" not in quiet.err
