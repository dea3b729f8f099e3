"""One-command exports through the console script: any query to a file (`kidata sql -o`), the
Excel sheet as an analyst opens it, Parquet field descriptions, and a DuckDB database file that a
plain DuckDB client opens."""

from __future__ import annotations

import csv
import io
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from conftest import SEEDS

from kidata import Warehouse

KIDATA = str(Path(sys.executable).parent / "kidata")


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("export") / "wh"
    assert Warehouse(path).load([str(SEEDS)]).ok
    return path


def kidata(*args, warehouse: Path, stdin: str | None = None,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "KIDATA_WAREHOUSE": str(warehouse), **(env or {})}
    return subprocess.run([KIDATA, *map(str, args)], capture_output=True, text=True, env=env,
                          input=stdin, timeout=120)


@pytest.mark.slow
def test_any_query_to_a_file(seeded: Path, tmp_path: Path):
    out = tmp_path / "pairs.csv"
    query = ("select workload, latency_ratio from speedups where candidate = 'trainkernel' "
             "and gpu = 'a100-sxm4-80gb' order by workload")
    done = kidata("sql", query, "-o", out, warehouse=seeded)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"wrote 4 rows to {out} (csv)\n"
    rows = list(csv.DictReader(out.read_text("utf-8").splitlines()))
    # Seed 003, A100: small 66.04 / 22.92 µs (trainkernel / inductor).
    assert [r["workload"] for r in rows] == ["medium", "online", "small", "tiny-online"]
    assert float(rows[2]["latency_ratio"]) == pytest.approx(66.04 / 22.92)
    # The same query from a file and from standard input.
    (tmp_path / "q.sql").write_text(query + ";\n", "utf-8")
    from_file = kidata("sql", "--file", tmp_path / "q.sql", "--format", "csv", warehouse=seeded)
    from_stdin = kidata("sql", "-", "--format", "csv", warehouse=seeded, stdin=query)
    assert from_file.returncode == from_stdin.returncode == 0
    assert from_file.stdout == from_stdin.stdout == out.read_text("utf-8")
    done = kidata("sql", "select 1", "--file", tmp_path / "q.sql", warehouse=seeded)
    assert done.returncode == 2 and "not both" in done.stderr


@pytest.mark.slow
def test_excel_as_an_analyst_opens_it(seeded: Path, tmp_path: Path):
    out = tmp_path / "x.xlsx"
    done = kidata("sql", "select '=1+1' as t, 42::BIGINT as n, 0.000031072 as small, "
                  "TIMESTAMPTZ '2024-09-03 15:39:30+00' as at, 2.5::DOUBLE as f, [1, 2] as l",
                  "-o", out, warehouse=seeded)
    assert done.returncode == 0, done.stderr
    with zipfile.ZipFile(out) as z:
        sheet = z.read("xl/worksheets/sheet1.xml").decode()
        strings = re.findall(r"<t>([^<]*)</t>", z.read("xl/sharedStrings.xml").decode())
        styles = z.read("xl/styles.xml").decode()
        workbook = z.read("xl/workbook.xml").decode()
    assert '<pane ySplit="1" topLeftCell="A2" activePane="bottomLeft" state="frozen"/>' in sheet
    assert "<f>" not in sheet  # '=1+1' is text, not a formula
    cells = dict(re.findall(r'<c r="([A-F]2)"[^>]*>(<v>[^<]*</v>)', sheet))
    assert strings[:6] == ["t", "n", "small", "at (UTC)", "f", "l"]
    assert strings[int(cells["A2"][3:-4])] == "=1+1"
    assert strings[int(cells["F2"][3:-4])] == "[1,2]"  # a list as JSON text
    assert cells["B2"] == "<v>42</v>"
    # 2024-09-03 is day 45538 after 1899-12-30; 15:39:30 is 56370 s of 86400 = 0.6524306.
    assert float(cells["D2"][3:-4]) == pytest.approx(45538 + 56370 / 86400)
    # Number formats: counts as integers, the tiny value in scientific notation.
    style_of = dict(re.findall(r'<c r="([A-F]2)" s="(\d+)"', sheet))
    xfs = re.findall(r'<xf numFmtId="(\d+)"', styles.split("<cellXfs")[1])
    formats = dict(re.findall(r'numFmtId="(\d+)" formatCode="([^"]+)"', styles))
    assert formats[xfs[int(style_of["B2"])]] == "#,##0"
    assert formats[xfs[int(style_of["C2"])]] == "0.000E+00"
    assert formats[xfs[int(style_of["D2"])]] == "yyyy-mm-dd hh:mm:ss"
    assert re.findall(r'<sheet name="([^"]+)"', workbook) == ["query", "columns"]
    # Widths fit the longest of header and values plus 2 (xlsxwriter adds 0.71 of padding):
    # t: '=1+1' 4 -> 6; at: the header 'at (UTC)' 8 < the timestamp's 19 -> 21.
    widths = re.findall(r'<col min="(\d+)" max="(\d+)" width="([\d.]+)"', sheet)
    assert widths[0] == ("1", "1", "6.7109375")
    assert ("4", "4", "21.7109375") in widths


@pytest.mark.slow
def test_excel_export_of_a_view_describes_its_columns(seeded: Path, tmp_path: Path):
    out = tmp_path / "s.xlsx"
    assert kidata("export", "audit", "-o", out, warehouse=seeded).returncode == 0
    with zipfile.ZipFile(out) as z:
        strings = re.findall(r"<t>([^<]*)</t>", z.read("xl/sharedStrings.xml").decode())
    # From sql/audit.sql's header.
    assert "the published value." in strings


@pytest.mark.slow
def test_parquet_carries_column_descriptions(seeded: Path, tmp_path: Path):
    out = tmp_path / "runs.parquet"
    assert kidata("export", "runs", "-o", out, warehouse=seeded).returncode == 0
    schema = pq.read_schema(out)
    # kidata/store/schema.py's description of runs.kernel.
    assert schema.field("kernel").metadata[b"description"] == (
        b"Kernel benchmarked, e.g. `rms_norm`.")
    assert pq.read_metadata(out).num_rows == 26
    # A query's columns are described from the relations it names.
    out = tmp_path / "q.parquet"
    assert kidata("sql", "select kernel, speedup, 1 as one from speedups", "-o", out,
                  warehouse=seeded).returncode == 0
    schema = pq.read_schema(out)
    assert schema.field("speedup").metadata[b"description"] == (
        b"As in speedups.speedup: baseline_us / candidate_us; above 1 means the candidate "
        b"is faster.")
    assert schema.field("kernel").metadata[b"description"] == (
        b"As in speedups.kernel: kernel benchmarked.")
    assert schema.field("one").metadata is None
    # Arrow IPC (Feather v2) carries them too.
    out = tmp_path / "runs.arrow"
    assert kidata("export", "runs", "-o", out, warehouse=seeded).returncode == 0
    import pyarrow as pa

    with pa.memory_map(str(out)) as source:
        table = pa.ipc.open_file(source).read_all()
    assert table.num_rows == 26
    assert table.schema.field("kernel").metadata[b"description"] == (
        b"Kernel benchmarked, e.g. `rms_norm`.")


def test_parquet_row_groups_hold_about_100k_rows_or_32_mb(seeded: Path, tmp_path: Path):
    """The export reads DuckDB's result in 16,384-row batches and writes a row group per
    131,072 rows (8 batches) or 32 MiB buffered (kidata/query/export.py): a narrow result's
    groups are full-sized, not one per batch; a wide one's are cut by bytes; no row is lost."""
    out = tmp_path / "narrow.parquet"
    done = kidata("sql", "select range as i from range(300000)", "-o", out, warehouse=seeded)
    assert done.returncode == 0, done.stderr
    meta = pq.read_metadata(out)
    assert [meta.row_group(g).num_rows for g in range(meta.num_row_groups)] == [
        131_072, 131_072, 300_000 - 2 * 131_072]
    assert duckdb.sql(f"select sum(i) from '{out}'").fetchall() == [(300_000 * 299_999 // 2,)]
    # 2,000-character rows: a 16,384-row batch is 16,384 x (2,000 + 4 + 8) bytes = 31.4 MiB,
    # so the second batch passes 32 MiB: groups of 32,768 rows (3 x 32,768 = 98,304).
    out = tmp_path / "wide.parquet"
    done = kidata("sql", "select range as i, repeat('x', 2000) as s from range(100000)",
                  "-o", out, warehouse=seeded)
    assert done.returncode == 0, done.stderr
    meta = pq.read_metadata(out)
    groups = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
    assert sum(groups) == 100_000 and groups == [32_768, 32_768, 32_768, 1_696]


@pytest.mark.slow
def test_duckdb_file_opens_in_plain_duckdb(seeded: Path, tmp_path: Path):
    out = tmp_path / "analysis.duckdb"
    done = kidata("export", "--duckdb", out, warehouse=seeded)
    assert done.returncode == 0, done.stderr
    # Every table of kidata/store/schema.py (13 today); the seeds' 26 runs.
    from kidata.store.schema import COLUMNS

    assert done.stdout.startswith(f"wrote {len(COLUMNS)} tables (26 runs) and every view to ")
    con = duckdb.connect(str(out), read_only=True)
    try:
        names = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        views = {r[0] for r in con.execute(
            "SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
        assert {"runs", "measurements", "gpus"} <= names
        assert {"speedups", "speedup_summary", "workload_sizes"} <= views
        # trainkernel vs inductor on the A100: geometric mean of 1.4954, 1.1929, 0.34706,
        # 0.16524 (seed 003) = 0.5656.
        (geomean,) = con.execute(
            "SELECT geomean_speedup FROM speedup_summary WHERE candidate = 'trainkernel' "
            "AND gpu = 'a100-sxm4-80gb'").fetchone()
        assert geomean == pytest.approx(0.5656, abs=1e-4)
        (comment,) = con.execute(
            "SELECT comment FROM duckdb_columns() WHERE table_name = 'runs' "
            "AND column_name = 'kernel'").fetchone()
        assert comment == "Kernel benchmarked, e.g. `rms_norm`."
    finally:
        con.close()
    again = kidata("export", "--duckdb", out, warehouse=seeded)
    assert again.returncode == 2 and "exists" in again.stderr


# -- outputs: never inside a warehouse, never a missing folder, whole or not at all (issue 27,
# items 5 and 6) -------------------------------------------------------------------------------

@pytest.mark.slow
def test_an_output_inside_a_warehouse_folder_is_refused_and_the_file_kept(seeded, tmp_path):
    part = next((seeded / "runs").glob("part-*.parquet"))
    before = part.read_bytes()
    for args in (["sql", "select 1 as x", "-o", part],
                 ["export", "runs", "-o", seeded / "runs" / "new.csv"],
                 ["export", "--duckdb", seeded / "_kidata" / "x.duckdb"],
                 ["report", "-o", seeded / "loads" / "r.html"]):
        done = kidata(*args, warehouse=seeded)
        assert done.returncode == 2, (args, done.stderr)
        assert "inside the warehouse" in done.stderr and "only kidata's commits" in done.stderr
    assert part.read_bytes() == before  # 0.2.7 overwrote it (78 runs gone)
    assert not (seeded / "runs" / "new.csv").exists()
    assert kidata("check", warehouse=seeded).returncode == 0
    # Beside the tables, in the warehouse's own folder, is not a table: allowed.
    assert kidata("sql", "select 1 as x", "-o", seeded / "x.csv",
                  warehouse=seeded).returncode == 0
    (seeded / "x.csv").unlink()


@pytest.mark.slow
def test_a_missing_output_folder_is_an_error_unless_parents(seeded, tmp_path):
    target = tmp_path / "no" / "such" / "x.csv"
    done = kidata("sql", "select 1 as x", "-o", target, warehouse=seeded)
    assert done.returncode == 2
    assert f"the folder {target.parent} does not exist; create it, or pass --parents" \
        in done.stderr
    assert not (tmp_path / "no").exists()  # 0.2.7 created it silently
    done = kidata("sql", "select 1 as x", "-o", target, "--parents", warehouse=seeded)
    assert done.returncode == 0, done.stderr
    assert target.read_text() == "x\n1\n"


@pytest.mark.slow
@pytest.mark.parametrize("args, name", [
    (["sql", "select * from runs"], "q.csv"),
    (["export", "runs"], "runs.json"),
    (["export", "runs", "--format", "kernelindex"], "runs.jsonl"),
])
def test_a_killed_export_leaves_the_old_file_not_a_truncated_one(seeded, tmp_path, args, name):
    target = tmp_path / name
    target.write_text("old\n")
    env = {"KIDATA_FAULT": "output-before-rename", "KIDATA_FAULT_ACTION": "kill"}
    done = kidata(*args, "-o", target, warehouse=seeded, env=env)
    assert done.returncode == -9
    assert target.read_text() == "old\n"
    done = kidata(*args, "-o", target, warehouse=seeded)
    assert done.returncode == 0, done.stderr
    assert target.read_text() != "old\n" and target.stat().st_size > 1000


@pytest.mark.slow
def test_a_killed_duckdb_export_leaves_no_database_and_runs_again(seeded, tmp_path):
    target = tmp_path / "a.duckdb"
    env = {"KIDATA_FAULT": "export-duckdb:runs", "KIDATA_FAULT_ACTION": "kill"}
    done = kidata("export", "--duckdb", target, warehouse=seeded, env=env)
    assert done.returncode == -9
    assert not target.exists()  # 0.2.7: a database with some of its tables, refused on rerun
    done = kidata("export", "--duckdb", target, warehouse=seeded)
    assert done.returncode == 0, done.stderr
    con = duckdb.connect(str(target), read_only=True)
    assert con.sql("select count(*) from runs").fetchall() == [(26,)]
    con.close()


@pytest.mark.slow
def test_csv_text_a_spreadsheet_would_run_gets_a_leading_quote(seeded, tmp_path):
    """OWASP's CSV injection rule (issue 27, item 10): text starting with = + - @ tab or CR
    is written with a leading ' ; numbers are numbers; --csv-raw writes text exactly."""
    query = ("select * from (values ('=HYPERLINK(\"x\")', -1.5), ('+1', 2.0), ('-2', 3.0), "
             "('@SUM(A1)', 4.0), (chr(9) || 'tab', 5.0), (chr(13) || 'cr', 6.0), "
             "('a=b', 7.0)) t(name, v)")
    want = ["'=HYPERLINK(\"x\")", "'+1", "'-2", "'@SUM(A1)", "'\ttab", "'\rcr", "a=b"]
    out = tmp_path / "q.csv"
    assert kidata("sql", query, "-o", out, warehouse=seeded).returncode == 0
    with open(out, newline="") as fh:
        rows = list(csv.reader(fh))
    assert [r[0] for r in rows[1:]] == want
    assert [r[1] for r in rows[1:]] == ["-1.5", "2.0", "3.0", "4.0", "5.0", "6.0", "7.0"]
    # Standard output, read as text (a CR inside a quoted cell arrives as a line feed).
    shown = [w.replace("\r", "\n") for w in want]
    printed = kidata("sql", query, "--format", "csv", warehouse=seeded)
    assert [r[0] for r in csv.reader(io.StringIO(printed.stdout))][1:] == shown
    raw = kidata("sql", query, "--format", "csv", "--csv-raw", warehouse=seeded)
    assert [r[0] for r in csv.reader(io.StringIO(raw.stdout))][1:] == [
        w[1:] if w.startswith("'") else w for w in shown]
