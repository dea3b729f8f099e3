"""The promises of the README and docs, tried as a new user tries them: through the installed
console script (``.venv/bin/kidata``) in a subprocess, where the in-process CLI fixture would
hide what ``main()`` does (its import hook, its exit codes, its output streams)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from xml.etree import ElementTree

import pytest
from conftest import DATA, SEEDS

from kidata import Warehouse

KIDATA = Path(sys.executable).parent / "kidata"


def kidata(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(KIDATA), *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> Path:
    """A warehouse holding the three seeds, loaded by the console script."""
    path = tmp_path_factory.mktemp("seeded") / "wh"
    done = kidata("-w", path, "load", SEEDS, "-q")
    assert done.returncode == 0, done.stderr
    return path


@pytest.fixture(scope="module")
def liger_loaded(tmp_path_factory) -> Path:
    """A warehouse holding the recent upstream Liger CSV, loaded by the console script; tests
    copy it (the same load as their own first one, made once)."""
    from conftest import shared

    path = tmp_path_factory.mktemp("liger") / "wh"
    done = kidata("-w", path, "load", "-q", shared("liger/all_benchmark_data.csv"))
    assert done.returncode == 0, done.stderr
    return path


def xlsx_rows(path: Path) -> list[list[str]]:
    """The cells of the first sheet of an .xlsx file, as text (a minimal reader: the test
    extra has xlsxwriter to write, nothing to read)."""
    ns = {"m": "http://schemas.openxmlformats.org/spreadsheetml/2006/main"}
    with zipfile.ZipFile(path) as z:
        shared = [si.findtext(".//m:t", "", ns) for si in ElementTree.fromstring(
            z.read("xl/sharedStrings.xml")).findall("m:si", ns)] \
            if "xl/sharedStrings.xml" in z.namelist() else []
        sheet = ElementTree.fromstring(z.read("xl/worksheets/sheet1.xml"))
    rows = []
    for row in sheet.findall(".//m:sheetData/m:row", ns):
        cells: list[str] = []
        for c in row.findall("m:c", ns):
            # Empty cells are not written: place each by its reference (``C7`` is column 3).
            letters = "".join(ch for ch in c.get("r", "") if ch.isalpha())
            column = 0
            for ch in letters:
                column = column * 26 + ord(ch) - ord("A") + 1
            cells.extend([""] * (column - 1 - len(cells)))
            value = c.findtext("m:v", "", ns) or c.findtext("m:is/m:t", "", ns)
            cells.append(shared[int(value)] if c.get("t") == "s" else value)
        rows.append(cells)
    return rows


# -- 1. Excel export from the console script -----------------------------------------------

@pytest.mark.slow
def test_excel_export_through_the_console_script(seeded, tmp_path):
    pytest.importorskip("xlsxwriter")
    out = tmp_path / "s.xlsx"
    done = kidata("-w", seeded, "export", "speedups", "-o", out)
    # Before the fix: a traceback ending in "ImportError: kidata's own processes do not use
    # pandas" (main()'s import hook raised ImportError where polars expects
    # ModuleNotFoundError).
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout.strip() == f"wrote 16 rows of speedups to {out} (xlsx)"
    rows = xlsx_rows(out)
    header = rows[0]
    # Seed 003's held-out table: 2 GPUs x 4 workloads, each pair shown both ways = 16 rows.
    assert len(rows) == 1 + 16
    at = {name: header.index(name) for name in ("gpu", "workload", "candidate", "baseline",
                                                 "candidate_us", "baseline_us")}
    got = {(r[at["gpu"]], r[at["workload"]], r[at["candidate"]], r[at["baseline"]]):
           (float(r[at["candidate_us"]]), float(r[at["baseline_us"]])) for r in rows[1:]}
    # Seed 003: A100 small, trainkernel_us 66.04, inductor_us 22.92.
    assert got[("a100-sxm4-80gb", "small", "trainkernel", "inductor")] == (66.04, 22.92)


# -- 3. a folder that is not a warehouse ----------------------------------------------------

READING = [["regressions"], ["audit"], ["info"], ["sql", "select count(*) from runs"],
           ["export", "runs", "-o", "out.csv"], ["rejects"], ["check"], ["compact"],
           ["unload", "--damaged"], ["views", "--sql"]]


@pytest.mark.slow
@pytest.mark.parametrize("where", ["no-such-folder", "/etc/passwd", "empty-folder"])
def test_reading_commands_refuse_what_is_not_a_warehouse(tmp_path, where):
    (tmp_path / "empty-folder").mkdir()
    why = {"no-such-folder": "no such folder", "/etc/passwd": "not a folder",
           "empty-folder": "no _kidata/ folder in it"}[where]
    # Every reading command on a missing folder; the first four (a subprocess each) otherwise.
    for command in READING if where == "no-such-folder" else READING[:4]:
        done = kidata("-w", where, *command, cwd=tmp_path)
        # Before: regressions said "0 regressions" and exited 0, export wrote an empty file,
        # and info on /etc/passwd printed a traceback.
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert done.stderr.startswith(f"Error: {where} is not a kidata warehouse ({why}"), \
            (command, done.stderr)
        assert "Traceback" not in done.stderr
        assert done.stdout == ""
    assert not (tmp_path / "out.csv").exists()
    assert not (tmp_path / "no-such-folder").exists()


@pytest.mark.slow
def test_a_warehouse_whose_loads_added_nothing_reads_as_empty(tmp_path):
    # A strict load that would reject its one record commits nothing, but has made the
    # folder a warehouse (its _kidata/ folder) first: an empty one, not a mistake.
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    assert kidata("-w", tmp_path / "wh", "load", "--strict", tmp_path / "bad.jsonl"
                  ).returncode == 1
    assert not list((tmp_path / "wh" / "loads").glob("*.parquet"))
    done = kidata("-w", tmp_path / "wh", "regressions")
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr.startswith("0 regressions")


# -- 5. CSV rejects keep their raw text -------------------------------------------------------

@pytest.mark.slow
def test_liger_csv_rejects_keep_the_raw_row(tmp_path):
    csv_file = DATA / "liger" / "edge_cases.csv"
    wh = tmp_path / "wh"
    assert kidata("-w", wh, "load", csv_file).returncode == 1  # five bad rows
    done = kidata("-w", wh, "rejects", "--raw", "--format", "json")
    assert done.returncode == 0, done.stderr
    got = {r["position"]: r["raw"] for r in json.loads(done.stdout)}
    # The file's lines (CRLF, a BOM): header, rows 1-2, row 3 over two lines (a quoted x
    # label with a line break), row 4, then the five bad rows 5-9 on lines 7-11.
    lines = csv_file.read_bytes().decode("utf-8-sig").split("\r\n")
    assert lines[6] == "rms_norm,liger,forward,speed,ms,H,hidden size,8192,0.02"  # short row
    assert got == {f"row {n}": lines[n + 1] for n in range(5, 10)}


# -- 6. read-only SQL decided by what a statement does ---------------------------------------

@pytest.mark.slow
def test_pivot_unpivot_and_summarize_are_queries(seeded, tmp_path):
    pivot = ("PIVOT (SELECT gpu, implementation FROM runs WHERE source = 'trainkernel-results') "
             "ON implementation USING count(*) ORDER BY gpu")
    done = kidata("-w", seeded, "sql", pivot, "--format", "csv")
    # Before: "refused the PIVOT statement" (DuckDB reports a PIVOT over values from the
    # data as a MULTI statement, which the keyword list did not know).
    assert done.returncode == 0, done.stderr
    # Seed 003: per GPU 4 held-out workloads x (trainkernel, inductor); the H100 adds 8
    # calibration schedules of trainkernel (small and medium, 4 each).
    assert done.stdout == "gpu,inductor,trainkernel\na100-sxm4-80gb,4,4\nh100-sxm5-80gb,4,12\n"
    done = kidata("-w", seeded, "sql", "UNPIVOT (SELECT 1 AS a, 2 AS b) ON a, b INTO NAME k "
                  "VALUE v", "--format", "csv")
    assert (done.returncode, done.stdout) == (0, "k,v\na,1\nb,2\n")
    done = kidata("-w", seeded, "sql", "SUMMARIZE SELECT kernel FROM runs", "--format", "json")
    assert done.returncode == 0 and json.loads(done.stdout)[0]["column_name"] == "kernel"
    # A write around a PIVOT is still a write.
    target = tmp_path / "p.csv"
    done = kidata("-w", seeded, "sql", f"COPY (PIVOT runs ON gpu USING count(*)) TO '{target}'")
    assert done.returncode == 2 and "refused the COPY statement" in done.stderr
    assert not target.exists()


# -- 7. every count is a BIGINT ---------------------------------------------------------------

@pytest.mark.slow
def test_every_integer_column_of_every_view_is_a_bigint(seeded, tmp_path):
    from kidata import Warehouse
    from kidata.core.viewfiles import load_views

    wh = Warehouse(seeded)
    found = {}
    for view in load_views():
        for name, kind in wh.sql(f"SELECT column_name, column_type FROM (DESCRIBE {view})"
                                 ).fetchall():
            if kind in ("HUGEINT", "INTEGER", "SMALLINT", "TINYINT", "UBIGINT", "UINTEGER") \
                    or kind.startswith("DECIMAL"):
                found[f"{view}.{name}"] = kind
    assert found == {}  # before: speedup_summary's wins ... no_spread were HUGEINT
    out = tmp_path / "summary.parquet"
    done = kidata("-w", seeded, "export", "speedup_summary", "-o", out)
    assert done.returncode == 0, done.stderr
    import pyarrow.parquet as pq

    schema = pq.read_schema(out)
    counts = ["workloads", "wins", "losses", "faster", "slower", "within_noise", "no_verdict",
              "kernels"]
    assert {c: str(schema.field(c).type) for c in counts} == dict.fromkeys(counts, "int64")
    # Seed 003, trainkernel vs inductor on the A100: 4 workloads; trainkernel is faster on
    # tiny-online (15.28 < 22.85 us) and online (20.32 < 24.24), slower on small and medium.
    row = pq.read_table(out).to_pylist()
    a100 = next(r for r in row if r["candidate"] == "trainkernel" and r["baseline"] ==
                "inductor" and r["gpu"] == "a100-sxm4-80gb")
    assert (a100["workloads"], a100["wins"], a100["losses"]) == (4, 2, 2)


# -- 8. exit codes and messages as documented -------------------------------------------------

@pytest.mark.slow
def test_compact_of_an_unknown_table_is_bad_usage(seeded):
    done = kidata("-w", seeded, "compact", "nope")
    assert done.returncode == 2, done.stderr  # before: 1
    assert done.stderr.startswith("Error: cannot compact nope: no such table loads write; "
                                  "tables that can be compacted: environments, ")


@pytest.mark.slow
def test_rejects_of_an_unknown_load_is_bad_usage(seeded):
    done = kidata("-w", seeded, "rejects", "--load", "nope")
    # Before: an empty table and exit 0.
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("Error: no committed load 'nope'; the loads are listed by: kidata "
                           "sql 'select load_id, loaded_at, rejected from loads'\n")
    [[load_id]] = [json.loads(line).values() for line in kidata(
        "-w", seeded, "sql", "select load_id from loads", "--format", "ndjson").stdout.split()]
    done = kidata("-w", seeded, "rejects", "--load", load_id, "--format", "csv")
    assert (done.returncode, done.stdout) == (0, "loaded_at,load_id,source_file,position,"
                                                 "field,reason\n")  # a load without rejects


@pytest.mark.slow
def test_quiet_load_prints_only_the_summary(tmp_path):
    csv_file = DATA / "liger" / "edge_cases.csv"
    done = kidata("-w", tmp_path / "wh", "load", "-q", csv_file)
    # edge_cases.csv: 10 rows, 5 bad (rejected) and one unknown GPU (a warning). Before, -q
    # still printed the 5 "rejected:" lines and the warning. The 5 good rows: 5 x (median,
    # p20, p80) = 15 measurements; GPUs A100, H200, Quantum Z9 (the unknown one), H100 PCIe;
    # protocols no-grad-forward speed and memory, full speed, forward speed; workloads rms_norm
    # H=4096 M=2048 bf16 (rows 1, 2, 4, 10) and swiglu's model row.
    assert done.returncode == 1
    assert done.stderr == ""
    assert done.stdout.splitlines() == [
        "1 files, 10 records: 5 runs added (15 measurements, 4 environments, 4 protocols, "
        f"2 workloads), 0 duplicates skipped, 5 rejected, 1 warnings [{tmp_path / 'wh'}]"]


# -- 2. kernelindex export round-trips for every source ---------------------------------------

PROVENANCE = {"source_file", "loaded_at", "load_id"}
# Every table a load writes but `loads` and `rejects`, which describe the loads themselves.
LOADED = ["runs", "measurements", "environments", "protocols", "workloads",
          "workload_parameters", "implementations", "published", "latest_runs"]


def table_rows(path: Path) -> dict[str, list]:
    from kidata import Warehouse
    from kidata.store.schema import TABLES

    wh = Warehouse(path)
    out = {}
    for table in LOADED:
        cols = ", ".join(f'"{f.name}"' for f in TABLES[table] if f.name not in PROVENANCE)
        out[table] = sorted(wh.sql(f"SELECT {cols} FROM {table}").fetchall(), key=repr)
    return out


@pytest.mark.slow
@pytest.mark.shared
@pytest.mark.parametrize("source, runs", [
    # Seeds 000, 001 and trainkernel's table 003 (2 + 24 runs), and edge_cases.csv (10 rows,
    # 5 bad): no run in common.
    ("seeds and edge cases", 26 + 5),
    ("liger", 2448),  # the recent upstream CSV: one run per row, speed and memory
])
def test_kernelindex_export_loads_back_into_the_same_tables(request, tmp_path, source, runs):
    first, second, bundles = tmp_path / "first", tmp_path / "second", tmp_path / "rt.jsonl"
    if source == "liger":  # the recent CSV, loaded once for the module
        shutil.copytree(request.getfixturevalue("liger_loaded"), first)
    else:
        paths = [SEEDS, DATA / "liger" / "edge_cases.csv"]
        assert kidata("-w", first, "load", "-q", *paths).returncode in (0, 1)
    done = kidata("-w", first, "export", "runs", "--format", "kernelindex", "-o", bundles)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"wrote {runs:,} runs as kernelindex bundles to {bundles}\n"
    done = kidata("-w", second, "load", bundles)
    # Before: every memory run of the CSV was rejected ("cannot tell the implementation":
    # Implementation documents were not kept, and a memory run's external id has 7 parts).
    assert done.returncode == 0, done.stderr
    assert f"{runs:,} runs added" in done.stdout
    a, b = table_rows(first), table_rows(second)
    for table in LOADED:
        assert a[table] == b[table], table
    assert a["implementations"]  # the CSVs' Implementation documents came back


# -- 4. the same inputs in any order give the same answers ------------------------------------

@pytest.mark.slow
@pytest.mark.shared
def test_seeds_and_liger_csv_in_either_order_give_the_same_tables_and_views(
        tmp_path, seeded, liger_loaded):
    from conftest import SHARED

    from kidata import Warehouse
    from kidata.core.viewfiles import load_views
    from kidata.store.schema import TABLES

    csv_file = SHARED / "liger" / "all_benchmark_data.csv"
    first, second = tmp_path / "seeds-first", tmp_path / "csv-first"
    # Each order's first load is the module's (`kidata load -q` of the seeds, of the CSV),
    # copied; the second load is this test's own.
    for wh, loaded, then in ((first, seeded, csv_file), (second, liger_loaded, SEEDS)):
        shutil.copytree(loaded, wh)
        done = kidata("-w", wh, "load", "-q", then)
        assert done.returncode == 0, done.stderr
    # Seeds 000 and 001 are rows 285 and 1930 of the CSV. The CSV's record of each carries its
    # Workload (with the parameters efficiency needs) and Implementation documents; the seed's
    # names them by digest only. Before: loaded second, the CSV's record was skipped as a
    # duplicate and efficiency lost those two runs (204 rows, 206 the other way round).
    efficiency = "SELECT count(*) FROM efficiency"
    assert kidata("-w", first, "sql", efficiency, "--format", "csv").stdout == \
        "count_star()\n206\n"
    assert kidata("-w", second, "sql", efficiency, "--format", "csv").stdout == \
        "count_star()\n206\n"
    seed0 = ("liger-rms-norm-forward-liger-nvidia-a100-sxm4-80gb-hidden4096-rows2048-bf16-"
             "2024-09-03-15-39-30")
    a, b = Warehouse(first), Warehouse(second)
    # The CSV's workload for seed 000's run (docs/liger.md: sha256:547dbd5e…), both ways.
    for wh in (a, b):
        [(workload,)] = wh.sql("SELECT workload_id FROM runs WHERE run_id = $r",
                               {"r": seed0}).fetchall()
        assert workload.startswith("sha256:547dbd5e")
    provenance = {"source_file", "loaded_at", "load_id"}
    # Floats to 12 digits: DuckDB may sum in another order (docs/guarantees.md).
    def rows(wh, name):
        cols = [c for c in wh.relation(name).columns if c not in provenance]
        got = wh.sql(f"SELECT {', '.join(cols)} FROM {name}").fetchall()
        return sorted((tuple(float(f"{v:.12g}") if isinstance(v, float) else v for v in r)
                       for r in got), key=repr)

    # Every table but those describing the loads (loads, rejects; latest_runs is per load).
    # The stored steps (step_context, step_edits) depend on the order of the loads (which load
    # stored or voided which step): the views that read them are compared instead.
    names = [t for t in TABLES if t not in ("loads", "rejects", "latest_runs", "step_context",
                                            "step_edits")]
    for name in [*names, *load_views()]:
        assert rows(a, name) == rows(b, name), name
    assert kidata("-w", first, "check").returncode == 0


# -- a misspelled table or view (issue 28, item 7) -----------------------------------------

@pytest.mark.slow
def test_a_misspelled_view_is_answered_with_the_closest_of_kidatas_names(seeded):
    """DuckDB guesses among its catalog, where views a query does not name are not defined
    yet: for ``speedup`` it offered "pg_depend". kidata names its own closest tables and
    views, and says where to look when none is close."""
    done = kidata("-w", seeded, "sql", "select * from speedup")
    assert done.returncode == 1
    assert 'Table with name speedup does not exist! Did you mean "speedups" or ' \
           '"rate_speedups" or "speedup_summary"?' in done.stderr
    assert "pg_" not in done.stderr and "sqlite_" not in done.stderr
    done = kidata("-w", seeded, "sql", "select * from runz")
    assert 'Did you mean "runs"?' in done.stderr
    done = kidata("-w", seeded, "sql", "select * from zzzqqq")
    assert "It is none of kidata's tables and views (`kidata views` lists them)." in done.stderr
    assert "Did you mean" not in done.stderr


# -- every command through the installed script ----------------------------------------------

def _steps(load_id: str, tmp: Path) -> list[tuple[str, list[object], int, str]]:
    """Every command of the CLI, each once, in an order that works on one warehouse holding
    the three seeds (26 runs: 4 inductor and 12 trainkernel ones on the H100, 4 of each on the
    A100, one Liger and one torch run): (command, arguments, exit code, a line of its output,
    stdout or stderr). The other tests run most commands in the test process
    (``conftest.console``); this is where each meets ``main()`` as a user's shell runs it."""
    return [
        ("info", [], 0, "runs                         26 rows in 1 files"),
        ("views", [], 0, "speedups"),
        ("formats", [], 0, "liger-csv: Liger-Kernel benchmark CSV (docs/liger.md)"),
        ("sql", ["select count(*) as n from runs", "-f", "csv"], 0, "26"),
        # The seeds' trainkernel documents publish 8 numbers; 3 disagree (test_views_audit).
        ("audit", [], 1, "3 of 8 published numbers disagree with their inputs beyond rounding"),
        ("changes", ["-f", "csv"], 0, "0 change points in 0 series"),
        ("regressions", ["-f", "csv"], 0, "0 regressions slower beyond noise"),
        # 8 keys (kernel, pass, workload, GPU) hold both an inductor and a trainkernel run.
        ("compare", ["trainkernel", "inductor", "-f", "csv"], 0, "8 shared keys"),
        ("gate", ["trainkernel", "inductor", "-f", "csv"], 0, "8 shared keys"),
        ("rejects", ["-f", "csv"], 0, "loaded_at,load_id,source_file,position,field,reason"),
        ("export", ["runs", "-o", tmp / "runs.csv"], 0, "wrote 26 rows of runs to"),
        ("ack", ["-m", "intended", RUN], 0, "1 slowdown acknowledged"),
        ("convert", [SEEDS / "000_ef9e0295e36a82ef.txt", "-o", tmp / "converted"], 0,
         "1 files, 1 records: 1 bundles written to"),
        ("compact", [], 0, "compacted: 0 fewer files, 0 rows rewritten"),
        ("report", ["-o", tmp / "r.html", "-k", "rms_norm"], 0, f"wrote {tmp / 'r.html'}"),
        ("check", [], 0, ": ok"),
        ("unload", [load_id], 0, "took out 1 load(s)"),
        ("load", ["-q", SEEDS], 0, "26 runs added"),
    ]


# A trainkernel run of the seeds (the A100, the medium workload).
RUN = "trainkernel-held-out-a100-sxm4-80gb-medium-trainkernel-4e071fd248db605e"


def test_every_command_has_a_step_through_the_installed_script(tmp_path):
    from kidata.cli import _command

    assert {name for name, *_ in _steps("", tmp_path)} == set(_command().commands)


@pytest.mark.slow
def test_every_command_runs_through_the_installed_script(seeded, tmp_path):
    wh = Path(shutil.copytree(seeded, tmp_path / "wh"))
    [(load_id,)] = Warehouse(wh).sql("select load_id from loads").fetchall()
    for name, args, code, line in _steps(load_id, tmp_path):
        done = kidata("-w", wh, name, *args)
        assert done.returncode == code, (name, done.stdout, done.stderr)
        assert line in done.stdout + done.stderr, (name, done.stdout, done.stderr)
    assert (tmp_path / "runs.csv").read_text().count("\n") == 27  # a header and 26 runs
    assert "<html" in (tmp_path / "r.html").read_text("utf-8")
    # Seed 000 as a seed file of its own (a title line, a blank line, the bundle), named by
    # its run.
    name = ("liger-rms-norm-forward-liger-nvidia-a100-sxm4-80gb-hidden4096-rows2048-bf16-"
            "2024-09-03-15-39-30")
    [converted] = (tmp_path / "converted").iterdir()
    assert converted.name == f"{name}.txt"
    title, blank, document = converted.read_text("utf-8").split("\n", 2)
    assert blank == "" and json.loads(document)["run"]["metadata"]["name"] == name
