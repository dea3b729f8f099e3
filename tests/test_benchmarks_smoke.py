"""Smoke test of benchmarks/: the generator writes valid, loadable records and the runner prints
every figure, at sizes that take seconds, so the benchmark code never rots."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# The slow lane (runs the benchmark runner); `pytest -m "not slow"` skips it.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"


def _generate_module():
    spec = importlib.util.spec_from_file_location("kidata_bench_generate", BENCH / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_bundles_load_with_valid_digests_and_no_rejects(tmp_path, cli):
    gen = _generate_module()
    # 150 runs + 10 extra, 40 bundles per file: ceil(150 / 40) = 4 files.
    gen.generate(tmp_path / "data", 150, extra=10, per_file=40)
    lines = (tmp_path / "data" / "bundles.ndjson").read_bytes().splitlines()
    assert len(lines) == 150
    assert len(list((tmp_path / "data" / "many").glob("*.ndjson"))) == 4
    # The digest rule, applied by hand to the first bundle's environment and protocol.
    bundle = json.loads(lines[0])
    for role, key in (("environment", "environmentDigest"), ("protocol", "protocolDigest")):
        body = {k: v for k, v in bundle[role].items() if k != "metadata"}
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert bundle["run"]["spec"][key] == "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    # Same arguments, same bytes.
    gen.generate(tmp_path / "again", 150, extra=10, per_file=40)
    assert (tmp_path / "again" / "bundles.ndjson").read_bytes() == b"\n".join(lines) + b"\n"

    result = cli("load", tmp_path / "data" / "bundles.ndjson")
    assert result.code == 0, result.err
    # Every bundle is a new run; 0 rejects means every digest verified.
    assert "150 runs added" in result.out and "0 rejected" in result.out
    result = cli("load", tmp_path / "data" / "many")
    assert result.code == 0 and "0 runs added" in result.out and "150 duplicates" in result.out
    result = cli("load", tmp_path / "data" / "extra.ndjson")
    assert result.code == 0 and "10 runs added" in result.out
    result = cli("sql", "select count(*) from runs", "-f", "csv")
    assert result.out.splitlines()[1] == "160"


def test_generated_liger_csv_loads_without_rejects(tmp_path, cli):
    gen = _generate_module()
    gen.generate(tmp_path / "data", 60, extra=0, per_file=60)
    csv = tmp_path / "data" / "liger.csv"
    assert len(csv.read_text().splitlines()) == 61  # header + 60 rows
    result = cli("load", csv)
    assert result.code == 0, result.err
    assert "60 runs added" in result.out and "0 rejected" in result.out


@pytest.mark.slow
def test_runner_prints_every_figure(tmp_path):
    out = tmp_path / "bench"
    proc = subprocess.run(
        [sys.executable, str(BENCH / "run"), "--sizes", "300,600", "--quick", "--extra", "50",
         "--per-file", "200", "--pandas-max", "300", "--csv-rows", "200", "--out", str(out),
         "--json", str(tmp_path / "r.json"), "--sections", "ingest"],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    table = proc.stdout
    for figure in ("ingest, one file (1 file) vs DuckDB read_json",
                   "ingest, many files (3 files) vs DuckDB read_json",
                   "ingest, one file vs pandas json_normalize",
                   "ingest, many files vs pandas json_normalize",
                   "ingest CPU per run, one file (kidata load vs DuckDB read_json flatten)",
                   "Liger CSV load per run (200 rows) vs JSON Lines load of the same runs",
                   "Liger CSV load per run (200 rows) vs the 300-run JSON Lines load per run",
                   "Liger CSV load per run (200 rows) vs the 600-run JSON Lines load per run",
                   "peak RSS of a load",
                   "peak RSS of a load without workers (KIDATA_WORKERS=0)",
                   "add 50 new runs: warehouse of 600 vs empty",
                   "add 50 new runs: warehouse built by 3 loads vs empty",
                   "re-load a file already loaded vs its first load",
                   "query `speedups`, a new process each",
                   "query `speedup_summary`, a new process each",
                   "query `speedups`, one warm process",
                   "query `speedup_summary`, one warm process",
                   'fresh `kidata sql "select count(*) from runs"` over `python -c "import '
                   'duckdb"`',
                   'fresh `kidata sql "select * from speedup_summary"` over',
                   "start-up: `kidata --help`", "start-up: `kidata views`",
                   "growth: kidata load, one file (s)", "growth: peak RSS of a load (MB)",
                   "growth: query speedup_summary (s)"):
        assert figure in table, f"missing figure {figure!r} in:\n{table}"
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    # pandas (a second or two per run) only at the smaller size: --pandas-max 300.
    pandas = [r for r in rows if "vs pandas json_normalize" in r]
    assert [("not run (--pandas-max)" in r) for r in pandas] == [False, False, True, True], pandas
    assert rows[0].startswith("| figure | runs | kidata | baseline | ratio | target | met |")
    # Each size gives 18 rows: 4 ingest, CPU per run, 2 Liger CSV (beside the JSON Lines
    # load of the CSV's 200 runs, and beside the whole load for context), 2 memory, 2
    # incremental, 1 re-load, 2 queries in new processes, 2 in a warm one and 2 fresh
    # `kidata sql` processes beside DuckDB's import.
    assert sum(" | 300 | " in r for r in rows) == 18
    assert sum(" | 600 | " in r for r in rows) == 18
    raw = json.loads((tmp_path / "r.json").read_text())
    # The like-for-like baseline is a load of its own (the runner checks it added 200 runs).
    assert {"300/load_same_runs", "600/load_same_runs"} <= set(raw["raw"])
    assert [r["runs"] for r in raw["results"]] == [300, 600]
    # The raw read_json query and the warehouse view answer with the same number of rows.
    q = raw["raw"]["600/query_speedup_summary"]
    assert q["kidata_rows"] == q["raw_rows"] > 0
    warm = raw["raw"]["600/warm_query_speedups"]
    assert warm["kidata_rows"] == warm["raw_rows"] > 0 and len(warm["kidata_s"]) == 3


def test_reading_section_prints_every_command_beside_plain_duckdb(tmp_path):
    """benchmarks/run --sections reading: each reading command, fresh beside the views script
    in a plain DuckDB connection (the report alone), and the warm questions; the runner itself
    fails when a warm question gives kidata and plain DuckDB different row counts."""
    proc = subprocess.run(
        [sys.executable, str(BENCH / "run"), "--sizes", "300", "--quick", "--extra", "50",
         "--per-file", "200", "--csv-rows", "200", "--out", str(tmp_path / "bench"),
         "--json", str(tmp_path / "r.json"), "--sections", "reading", "--query-memory",
         "256MB"],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert json.loads((tmp_path / "r.json").read_text())["query_memory"] == "256MB"
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| read, ")]
    commands = ["`kidata regressions` vs plain DuckDB",
                "`kidata sql select count(*), sum(change) from trends -f csv` vs plain DuckDB",
                "`kidata sql select * from speedup_summary -f csv` vs plain DuckDB",
                "`kidata sql select * from trends -o OUT.parquet` vs plain DuckDB",
                "`kidata export speedups -o OUT.parquet` vs plain DuckDB",
                "`kidata export --duckdb OUT.duckdb` vs plain DuckDB",
                "`kidata report -o OUT.html`", "`kidata changes -f csv`",
                "`kidata regressions --since SINCE -f csv`",
                "read, warm: `regressions`", "read, warm: `trends`",
                "read, warm: `speedup_summary`"]
    assert len(rows) == len(commands)
    for row, command in zip(rows, commands, strict=True):
        assert command in row, (command, row)
    raw = json.loads((tmp_path / "r.json").read_text())["raw"]
    fresh = raw["300/read_export --duckdb"]
    assert fresh["kidata_cpu_s"][0] > 0 and fresh["plain_cpu_s"][0] > 0
    assert raw["300/read_report"]["plain_s"] == [] == raw["300/read_changes"]["plain_s"]
    assert raw["300/read_changes"]["kidata_cpu_s"][0] > 0
    assert raw["300/read_regressions --since"]["kidata_cpu_s"][0] > 0
    assert raw["300/read_warm"]["trends"]["kidata_rows"] == 1


def test_load_memory_prints_each_case_beside_the_first_and_duckdb(tmp_path):
    gen = _generate_module()
    gen.generate(tmp_path / "data", 300, extra=0, per_file=100)
    proc = subprocess.run(
        [sys.executable, str(BENCH / "load_memory.py"), str(tmp_path / "data"),
         "--json", str(tmp_path / "m.json")],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    rows = [line.split(" | ") for line in proc.stdout.splitlines() if line.startswith("| ")]
    assert rows[0][:3] == ["| layout", "case", "runs"]
    # Each layout: the installed kidata, the same on mimalloc (the default cases), DuckDB.
    assert [r[:3] for r in rows[1:]] == [[f"| {layout}", case, "300"]
                                         for layout in ("one", "many")
                                         for case in ("kidata", "mimalloc", "duckdb")]
    assert all(r[6] == "1.00×" for r in rows[1:] if r[1] == "kidata")
    raw = json.loads((tmp_path / "m.json").read_text())
    assert sorted(raw) == ["many/duckdb", "many/kidata", "many/mimalloc", "one/duckdb",
                           "one/kidata", "one/mimalloc"]
    assert all(m["peak_mb"] > 0 and m["cpu_s"] > 0 for ms in raw.values() for m in ms)


def test_pruning_prints_each_gpu_and_a_kernel_with_row_groups_and_times(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(BENCH / "pruning.py"), "--runs", "400", "--loads", "4",
         "--repeat", "1", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    lines = proc.stdout.splitlines()
    assert [line.split(",")[0] for line in lines[:2]] == [
        "merge of 4 files", "merge of 4 files"]
    assert "file order" in lines[0] and "clustered" in lines[1]
    filters = [line.split()[0] for line in lines if line.startswith(("gpu =", "kernel ="))]
    assert filters.count("kernel") == 1 and filters.count("gpu") >= 3
    assert all(line.rstrip().endswith("x") for line in lines
               if line.startswith(("gpu =", "kernel =")))


def test_pruning_compares_what_one_load_of_each_tree_writes(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(BENCH / "pruning.py"), "--runs", "400", "--repeat", "1",
         "--out", str(tmp_path), "--load-tree", "a=", "--load-tree", "b="],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    lines = proc.stdout.splitlines()
    assert [line.split(":")[0] for line in lines if "one load in" in line] == ["a", "b"]
    for table in ("runs", "latest_runs"):
        assert sum(line.startswith(f"{table}: filter") for line in lines) == 1, table
    # Each table: one line per GPU and one for the busiest kernel; the same kidata loaded
    # both warehouses, so each filter reads as many row groups in either.
    rows = [line.split() for line in lines if line.startswith(("gpu =", "kernel ="))]
    assert sum(r[0] == "kernel" for r in rows) == 2 and sum(r[0] == "gpu" for r in rows) >= 6
    assert all(r[3] == r[5] for r in rows), rows
    assert not (tmp_path / "wh").exists()  # no warehouse of many loads in this mode


def test_cpu_per_run_gives_each_load_per_run_and_the_liger_ratio(tmp_path):
    gen = _generate_module()
    gen.generate(tmp_path / "data", 300, extra=0, per_file=100)
    proc = subprocess.run(
        [sys.executable, str(BENCH / "cpu_per_run.py"), str(tmp_path / "data")],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    (line,) = proc.stdout.splitlines()
    got = json.loads(line)
    assert got["tree"] == "installed" and got["round"] == 1
    for load in ("jsonl", "jsonl_no_workers", "liger", "duckdb"):
        assert got[load]["cpu_us_per_run"] > 0, load
    # The ratio is the two loads' per-run figures divided (300 runs in each file).
    for k in ("cpu", "wall"):
        want = got["liger"][f"{k}_us_per_run"] / got["jsonl"][f"{k}_us_per_run"]
        assert got["liger_over_jsonl"][k] == pytest.approx(want, abs=0.01), k


@pytest.mark.parametrize("probe", [
    ["sketch_vectorised.py", "--memory", "500MB"],
    # Blocks of 4 KiB and chunks of 40 lines: lines span blocks, a chunk spans several.
    ["sketch_chunked.py", "--chunk", "40", "--block", "4096", "--rounds", "1"],
    ["sketch_arrow.py", "--block", "4096", "--rounds", "1"]],
    ids=["vectorised", "chunked", "arrow"])
def test_vectorised_sketch_loads_clean_bundles_and_flags_bad_ones(tmp_path, probe):
    # benchmarks/sketch_vectorised.py, sketch_chunked.py and sketch_arrow.py are design probes
    # (docs/benchmarks.md, "Ingest", Runs AA and AV); run them small so they keep working, and
    # check that their SQL checks do flag bad records.
    gen = _generate_module()
    gen.generate(tmp_path / "data", 150, extra=0, per_file=150)
    lines = (tmp_path / "data" / "bundles.ndjson").read_text().splitlines()
    bad = [json.loads(line) for line in lines[:3]]
    bad[0]["run"]["spec"]["environmentDigest"] = "sha256:" + "0" * 64  # digest mismatch
    bad[1]["run"]["spec"]["timing"]["latencyNs"]["median"] = -5  # not positive
    bad[2]["run"]["spec"]["observedAt"] = "yesterday"  # not a time
    mutated = tmp_path / "bad.ndjson"
    # The last line without its newline: still a record.
    mutated.write_text("\n".join([json.dumps(b) for b in bad] + lines[3:]))
    for path, rejected, written in ((tmp_path / "data" / "bundles.ndjson", 0, 150),
                                    (mutated, 3, 147)):
        proc = subprocess.run([sys.executable, str(BENCH / probe[0]), str(path), *probe[1:],
                               "--sketch-only"],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        sketch = [line for line in proc.stdout.splitlines() if line.startswith("sketch")]
        assert len(sketch) == (1 if "--rounds" in probe else 2)
        assert all(f"rejected {rejected}, runs_written {written}" in line for line in sketch)


def test_floor_prints_the_floor_kidata_and_duckdb_per_run(tmp_path):
    # benchmarks/floor.py (docs/benchmarks.md, Run S): the no-rule floor, kidata's load and
    # DuckDB's flatten of the same file, each as CPU µs per run, with the ratios.
    gen = _generate_module()
    gen.generate(tmp_path / "data", 200, extra=0, per_file=200)
    proc = subprocess.run(
        [sys.executable, str(BENCH / "floor.py"), str(tmp_path / "data" / "bundles.ndjson"),
         "--sides", "floor,kidata,duckdb", "--json", str(tmp_path / "floor.json")],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ")[1:]
            for line in proc.stdout.splitlines() if line.startswith("| ")}
    for side in ("no-rule floor (msgspec/orjson, tuples, Arrow, Parquet)",
                 "kidata load (default workers)", "DuckDB read_json -> Parquet COPY"):
        work, process, wall, to_floor, to_duckdb = rows[side]
        assert float(work.split()[0]) > 0 and float(process) > 0, rows[side]
        assert to_floor.endswith("×") and to_duckdb.rstrip(" |").endswith("×"), rows[side]
    raw = json.loads((tmp_path / "floor.json").read_text())
    assert raw["runs"] == 200 and set(raw["results"]) == {"floor", "kidata", "duckdb"}


# -- which kidata a benchmark measures: --tree / --case LABEL=PATH|git:REV (measure.trees) ----

# Each script, its option and its data argument (a folder, or floor.py's NDJSON file).
TREE_SCRIPTS = [("cpu_per_run.py", "--tree", ""), ("floor.py", "--tree", "bundles.ndjson"),
                ("load_memory.py", "--case", ""), ("worker_path.py", "--tree", "bundles.ndjson")]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    data = tmp_path_factory.mktemp("tiny") / "data"
    _generate_module().generate(data, 200, extra=0, per_file=200)
    return data


def _bench(script, *args):
    return subprocess.run([sys.executable, str(BENCH / script), *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def _head():
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True)
    if head.returncode:
        pytest.skip("not run from a git checkout")
    return head.stdout.strip()


@pytest.mark.parametrize(("script", "option", "src"), TREE_SCRIPTS)
def test_a_tree_without_its_views_is_refused_before_anything_is_measured(tmp_path, tiny, script,
                                                                         option, src):
    # A folder with the package but no sql/ once failed deep inside a load ("the SQL view
    # files are missing from this installation"), after the trees before it were measured.
    nosql = tmp_path / "nosql"
    shutil.copytree(ROOT / "kidata", nosql / "kidata",
                    ignore=shutil.ignore_patterns("__pycache__"))
    proc = _bench(script, tiny / src, option, "first=", option, f"bad={nosql}")
    assert proc.returncode != 0
    assert f"{option} bad={nosql}: {nosql} holds no sql/" in proc.stderr, proc.stderr
    assert proc.stdout == "" and "peak_mb" not in proc.stderr  # nothing measured


@pytest.mark.parametrize(("script", "option", "src"), TREE_SCRIPTS)
def test_an_unknown_git_revision_is_refused(tiny, script, option, src):
    _head()
    proc = _bench(script, tiny / src, option, "old=git:no-such-rev")
    assert proc.returncode != 0
    assert (f"{option} old=git:no-such-rev: 'no-such-rev' is not a revision of the git "
            f"repository at {ROOT}") in proc.stderr, proc.stderr
    assert proc.stdout == ""


def test_cpu_per_run_measures_a_git_revision(tiny):
    head = _head()
    proc = _bench("cpu_per_run.py", tiny, "--tree", "head=git:HEAD")
    assert proc.returncode == 0, proc.stderr
    assert f"--tree head=git:HEAD: {head[:12]} extracted to " in proc.stderr
    (line,) = proc.stdout.splitlines()
    got = json.loads(line)
    assert got["tree"] == "head"
    assert all(got[load]["cpu_us_per_run"] > 0 for load in ("jsonl", "liger", "duckdb"))


def test_floor_imports_kidata_from_the_extracted_revision_then_removes_it(tmp_path, tiny):
    _head()
    proc = _bench("floor.py", tiny / "bundles.ndjson", "--sides", "kidata", "--tree",
                  "head=git:HEAD", "--json", tmp_path / "floor.json")
    assert proc.returncode == 0, proc.stderr
    results = json.loads((tmp_path / "floor.json").read_text())["results"]
    # Each kidata side reports the folder it imported kidata from.
    (installed,), (extracted,) = results["kidata"], results["kidata@head"]
    where = Path(extracted["kidata"])
    assert where.name.startswith("kidata-tree-") and where != Path(installed["kidata"])
    assert not where.exists()  # removed once measured


def test_worker_path_measures_each_tree_in_its_own_process(tmp_path, tiny):
    _head()
    proc = _bench("worker_path.py", tiny / "bundles.ndjson", "--runs", "200", "--rounds", "2",
                  "--repeat", "1", "--tree", "installed=", "--tree", "head=git:HEAD")
    assert proc.returncode == 0, proc.stderr
    assert "general path" not in proc.stderr  # every generated bundle takes the fast path
    lines = proc.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["installed", "head"]
    assert lines[0].endswith("1.000× the first")
    assert all(line.count(", ") == 1 for line in lines)  # two rounds each
    # A line the fast path leaves to the general one (a top-level key it does not know) is
    # said: the figure would otherwise measure another path than the one it names.
    src = tmp_path / "odd.ndjson"
    first, *rest = (tiny / "bundles.ndjson").read_bytes().splitlines(keepends=True)
    src.write_bytes(first[:-2] + b', "note": "x"}\n' + b"".join(rest))
    proc = _bench("worker_path.py", src, "--runs", "200", "--rounds", "1", "--repeat", "1")
    assert proc.returncode == 0, proc.stderr
    assert "installed: 1 of 200 lines took the general path" in proc.stderr


def test_self_check_times_the_loads_own_check_beside_the_load(tiny):
    for extra in ([], ["--duplicates"]):
        proc = _bench("self_check.py", tiny / "bundles.ndjson", *extra)
        assert proc.returncode == 0, proc.stderr
        (line,) = proc.stdout.splitlines()
        got = json.loads(line)
        assert got["runs_added"] == 200
        assert got["duplicates"] == (20 if extra else 0)  # the file's first tenth, again
        assert 0 < got["check_wall_s"] < got["load_wall_s"]
        assert got["check_share_of_wall"] == pytest.approx(
            got["check_wall_s"] / got["load_wall_s"], abs=0.001)


def test_compare_views_times_a_view_beside_an_older_commits(tmp_path, tiny):
    """benchmarks/compare_views.py --view: the view as HEAD writes it against the working
    tree's, each with its rows (the same at HEAD, so the counts agree)."""
    _head()
    from kidata import Warehouse

    wh = tmp_path / "wh"
    assert Warehouse(wh).load([str(tiny / "bundles.ndjson")]).ok
    proc = _bench("compare_views.py", wh, "--old", "HEAD", "--repeat", "1", "--view",
                  "series_steps")
    assert proc.returncode == 0, proc.stderr
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("series_steps ")]
    old, new = line.removeprefix("series_steps ").split("  new: ")
    assert old.startswith("old: min ") and "CPU median" in new
    assert old.rsplit(", ", 1)[1] == new.rsplit(", ", 1)[1] == "1 rows"


def test_small_ops_prints_a_load_and_a_check_against_a_baseline_checkout():
    # The baseline is this checkout itself: the turn runs both sides and prints their ratios.
    root = BENCH.parent
    proc = subprocess.run(
        [sys.executable, str(BENCH / "small_ops.py"), "--baseline", str(root), "--turns", "1",
         "--repeat", "1"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    [line] = proc.stdout.splitlines()
    figures = json.loads(line)
    assert figures["turn"] == 1
    for key in ("load_cpu_ms", "check_cpu_ms", "baseline_load_cpu_ms", "baseline_check_cpu_ms"):
        assert figures[key] > 0, figures
    # the ratio is of the unrounded seconds; the printed milliseconds are rounded
    for op in ("load", "check"):
        ratio = figures[f"{op}_cpu_ms"] / figures[f"baseline_{op}_cpu_ms"]
        assert abs(figures[f"{op}_ratio"] - ratio) < 0.02, figures


def test_commands_runs_a_command_per_tree_in_turns_and_refuses_different_answers(
        tmp_path, tiny):
    """benchmarks/commands.py: each tree runs the command once a round, the medians and their
    ratios to the first tree are printed; trees that answer differently are refused, as is a
    command that fails."""
    from kidata import Warehouse

    wh = tmp_path / "wh"
    assert Warehouse(wh).load([str(tiny / "bundles.ndjson")]).ok
    trees = ["--tree", f"a={ROOT}", "--tree", f"b={ROOT}"]
    proc = _bench("commands.py", *trees, "--rounds", "2", "--", "-w", wh, "sql",
                  "select count(*) from runs")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [x.split(":")[0] for x in lines] == ["round 1 a", "round 1 b", "round 2 a",
                                                "round 2 b", "a", "b"]
    assert all(", exit 0" in x for x in lines[:4])
    assert "(1.00x of a)" in lines[4] and "(1.00x), " in lines[4]
    # Every run prints another time: the figures would not compare the same work.
    proc = _bench("commands.py", *trees, "--rounds", "1", "--", "-w", wh, "sql",
                  "select epoch_us(now())")
    assert proc.returncode == 1
    assert "b printed another answer than a" in proc.stderr
    proc = _bench("commands.py", *trees, "--rounds", "1", "--", "-w", wh, "sql",
                  "select * from no_such_view")
    assert proc.returncode == 1
    assert "a: kidata -w" in proc.stderr and "failed (exit 1)" in proc.stderr


def test_commands_copy_gives_each_run_the_same_warehouse_to_write_to(tmp_path, tiny):
    """benchmarks/commands.py --copy: a command that writes (a load) runs on a fresh copy of
    its warehouse every round, so every round adds the same runs and the warehouse given is
    left as it was; without it the second round finds them stored: another answer than the
    first round's, refused (the figures would compare different work)."""
    wh = tmp_path / "wh"
    wh.mkdir()
    args = ["--tree", f"a={ROOT}", "--wh", f"a={wh}", "--rounds", "2"]
    load = ["--", "-w", "@wh", "load", tiny / "bundles.ndjson"]
    proc = _bench("commands.py", *args, "--copy", *load)
    assert proc.returncode == 0, proc.stderr
    assert not any(wh.iterdir())
    proc = _bench("commands.py", *args, *load)
    assert proc.returncode == 1
    assert "a printed another answer in round 2 than in round 1" in proc.stderr


def test_sort_runs_sorts_a_runs_file_in_each_trees_process(tmp_path, tiny):
    from kidata import Warehouse

    wh = Warehouse(tmp_path / "wh")
    assert wh.load([str(tiny / "bundles.ndjson")]).committed
    [runs] = sorted((wh.path / "runs").glob("*.parquet"))
    proc = _bench("sort_runs.py", runs, "--tree", "a=", "--tree", "b=", "--rounds", "1",
                  "--batch", "16")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    measured = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert [m["tree"] for m in measured] == ["a", "b"]
    assert all(m["rows"] == 200 and m["sorted"] and m["kernel_reads"] >= 1 for m in measured)
    table = [line.split("|") for line in proc.stdout.splitlines() if line.startswith("| a")
             or line.startswith("| b")]
    assert [row[1].strip() for row in table] == ["a", "b"]
    assert all(row[5].strip() == "yes" and row[7].strip().endswith("×") for row in table)


def test_report_queries_prints_each_report_query_with_its_memory(tmp_path, tiny):
    """benchmarks/report_queries.py: a line per query the report makes, in its order, with
    the memory held before it and the peak while it ran; no page is drawn."""
    from kidata import Warehouse

    wh = tmp_path / "wh"
    assert Warehouse(wh).load([str(tiny / "bundles.ndjson")]).ok
    proc = _bench("report_queries.py", wh)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [x.split()[0] for x in lines] == [
        "modelled", "modelled", "efficiency", "roofline", "speedup_cells", "kernel_speedups",
        "latency_points", "regressions", "trend_series", "trend_steps", "shifts", "audit",
        "noise_envelopes", "min_effect", "summary"]
    for line in lines:
        held, peak = (int(v) for v in re.findall(r"(\d+) MiB", line))
        assert 0 < held <= peak, line
    assert "all queries" in proc.stderr
