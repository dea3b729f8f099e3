"""Hostile input loses nothing (issue 17): a file changing under a load, strange paths, damaged
gzip, millions of rejects, crafted names, and errors that used to be tracebacks.

Most tests run the installed console script in a subprocess, with a timeout, since the defects
were hangs and tracebacks seen by a user. The bad-record cases themselves are in the corpus
(tests/data/bad, tests/ingest/test_bad_input.py).
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest
from filelock import FileLock

from kidata import Warehouse
from kidata.errors import WarehouseError

DATA = Path(__file__).parents[1] / "data"
SEEDS = DATA / "seeds"
SEED0 = SEEDS / "000_ef9e0295e36a82ef.txt"
SEED1 = SEEDS / "001_74c4a9a5654eeb33.txt"
KIDATA = str(Path(sys.executable).parent / "kidata")
RUN0 = ("liger-rms-norm-forward-liger-nvidia-a100-sxm4-80gb-hidden4096-rows2048-bf16-"
        "2024-09-03-15-39-30")
RUN1 = ("liger-relu-squared-backward-torch-nvidia-h100-80gb-hbm3-hidden4096-rows4096-bf16-"
        "2026-03-27-06-09-46")


def bundle(seed: Path) -> dict:
    return json.loads(seed.read_text("utf-8").split("\n", 2)[2])


def renamed(seed: Path, suffix: str) -> dict:
    b = bundle(seed)
    b["run"]["metadata"]["name"] += suffix
    return b


def kidata(wh: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 60,
           **kw) -> subprocess.CompletedProcess:
    return subprocess.run([KIDATA, "-w", str(wh), *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})}, **kw)


def runs(wh: Path) -> set[str]:
    return {r[0] for r in Warehouse(wh).sql("select run_id from runs").fetchall()}


# -- 1. the manifest describes the bytes that were read ---------------------------------------

@pytest.mark.slow
def test_a_file_replaced_while_it_is_read_is_not_skipped_later(tmp_path, monkeypatch):
    """Version A is read; the file is atomically replaced by version B meanwhile. The next
    load must read B (0.2.2 hashed B from a second open, recorded it, and skipped B for good:
    "unchanged … not read again")."""
    import kidata.ingest.inputs as inputs

    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(bundle(SEED0)) + "\n")  # version A: seed 000
    b_version = tmp_path / "b.tmp"
    b_version.write_text(json.dumps(bundle(SEED1)) + "\n")  # version B: seed 001
    replaced = threading.Event()
    real_read, real_fingerprint = inputs.read_file, inputs.fingerprint

    def read_then_replace(*args, **kw):
        for n, unit in enumerate(real_read(*args, **kw)):
            if n == 0:  # A is open and being read: replace it, as `mv b in.jsonl` would
                os.replace(b_version, path)
                replaced.set()
            yield unit

    def late_fingerprint(*args, **kw):  # 0.2.2 hashed in a thread: let it see B, as in the bug
        replaced.wait(10)
        return real_fingerprint(*args, **kw)

    monkeypatch.setattr(inputs, "read_file", read_then_replace)
    monkeypatch.setattr(inputs, "fingerprint", late_fingerprint)
    wh = tmp_path / "wh"
    assert Warehouse(wh).load([str(path)]).runs_added == 1
    assert runs(wh) == {RUN0}
    monkeypatch.undo()
    again = kidata(wh, "load", path)  # the file now holds B
    assert again.returncode == 0, again.stderr
    assert "unchanged" not in again.stderr
    assert runs(wh) == {RUN0, RUN1}
    # And B, now loaded cleanly, is skipped the time after.
    assert "1 file unchanged since a load" in kidata(wh, "load", path).stderr


# -- 4. millions of rejects cannot sink a load -------------------------------------------------

@pytest.mark.slow
def test_rejects_beyond_the_cap_are_counted_not_kept_and_the_good_runs_load(tmp_path):
    """2,000 bad lines, then 3 good runs, with KIDATA_MAX_REJECTS=50 (the real scenario, 4.5M
    bad lines, is benchmarks/many_rejects.py)."""
    path = tmp_path / "bad.jsonl.gz"
    good = [renamed(SEED0, f"-{i}") for i in range(3)]
    with gzip.open(path, "wt") as fh:
        fh.writelines(f'{{"x": {i}}}\n' for i in range(2000))
        fh.writelines(json.dumps(b) + "\n" for b in good)
    wh = tmp_path / "wh"
    result = kidata(wh, "load", path, env={"KIDATA_MAX_REJECTS": "50"})
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert ("rejected: 1,950 rejects beyond the first 50 were counted but not kept "
            "(KIDATA_MAX_REJECTS sets how many a load keeps)") in result.stderr
    assert " 3 runs added " in result.stdout and ", 2,000 rejected, " in result.stdout
    assert runs(wh) == {b["run"]["metadata"]["name"] for b in good}
    w = Warehouse(wh)
    # The first 50 in input order: lines 1 to 50.
    assert w.sql("select count(*), min(position), max(cast(split_part(position, ' ', 2) "
                 "as int)) from rejects").fetchall() == [(50, "line 1", 50)]
    assert w.sql("select rejected, rejects_not_kept from loads").fetchall() == [(2000, 1950)]
    listed = kidata(wh, "rejects", "--format", "csv")
    assert listed.returncode == 0
    assert len(listed.stdout.splitlines()) == 51  # header and the 50 kept
    assert "rejected 1,950 more records than it kept here (KIDATA_MAX_REJECTS)" in listed.stderr


# -- 5 and 11. convert: titles and symlinks ----------------------------------------------------

@pytest.mark.slow
def test_a_crafted_implementation_name_cannot_change_a_converted_bundle(tmp_path):
    """The display name goes on the title line. A name holding a newline and a whole other
    bundle (seed 001 with median 1) made 0.2.2 write a file that loaded as ~90 rejects; with
    other text around it, an injected run."""
    evil = bundle(SEED0)
    other = bundle(SEED1)
    other["run"]["spec"]["timing"]["latencyNs"]["median"] = 1
    evil["run"]["metadata"]["labels"]["implementation"] = f"x\n\n{json.dumps(other)}\n"
    long_name = renamed(SEED1, "-long")
    long_name["run"]["metadata"]["labels"]["implementation"] = "{[" + "y" * 300
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(evil) + "\n" + json.dumps(long_name) + "\n")
    out, wh = tmp_path / "bundles", tmp_path / "wh"
    converted = kidata(wh, "convert", source, "-o", out)
    assert converted.returncode == 0, converted.stderr
    titles = {p.read_text("utf-8").split("\n", 1)[0] for p in out.glob("*.txt")}
    # Newlines became spaces (collapsed), '{[' dropped, cut to 200 characters.
    assert titles == {"x " + json.dumps(other)[:198], "y" * 200}
    loaded = kidata(wh, "load", out)
    assert loaded.returncode == 0, loaded.stderr
    assert runs(wh) == {RUN0, RUN1 + "-long"}
    [(median,)] = Warehouse(wh).sql("select value from measurements where run_id = $r and "
                                    "statistic = 'median'", {"r": RUN0}).fetchall()
    assert median == 31072  # seed 000's own median, not the injected 1


@pytest.mark.slow
def test_convert_replaces_a_symlink_in_the_output_folder_and_leaves_its_target(tmp_path):
    out = tmp_path / "bundles"
    out.mkdir()
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    (out / f"{RUN0}.txt").symlink_to(target)
    result = kidata(tmp_path / "wh", "convert", SEED0, "-o", out)
    assert result.returncode == 0, result.stderr
    assert target.read_text() == "keep me\n"
    written = out / f"{RUN0}.txt"
    assert not written.is_symlink()
    # The seed as convert writes it (the seed file itself lacks the final newline).
    assert written.read_text("utf-8") == SEED0.read_text("utf-8").rstrip("\n") + "\n"


# -- 6 and 7. paths: only regular files, loops, unreadable folders ----------------------------

@pytest.fixture
def strange_folder(tmp_path: Path) -> Path:
    """Seed 000 at the top, seed 001 in sub/; a FIFO, a symlink to /dev/zero, a broken
    symlink, and a symlink in sub/ back to the top (a cycle)."""
    top = tmp_path / "in"
    (top / "sub").mkdir(parents=True)
    (top / "a.txt").write_bytes(SEED0.read_bytes())
    (top / "sub" / "b.txt").write_bytes(SEED1.read_bytes())
    os.mkfifo(top / "fifo.jsonl")
    (top / "zero.jsonl").symlink_to("/dev/zero")
    (top / "broken.jsonl").symlink_to(top / "nowhere")
    (top / "sub" / "loop").symlink_to(top)
    return top


@pytest.mark.slow
def test_fifos_devices_and_symlink_loops_in_a_folder_are_skipped_and_said(strange_folder):
    wh = strange_folder.parent / "wh"
    result = kidata(wh, "load", strange_folder, timeout=30)  # 0.2.2 hung on the FIFO
    assert result.returncode == 0, result.stderr
    top = strange_folder
    assert result.stderr.splitlines() == [
        f"warning: skipped {top}/broken.jsonl: a broken symlink",
        f"warning: skipped {top}/fifo.jsonl: a FIFO (named pipe), not a regular file",
        f"warning: skipped {top}/zero.jsonl: a character device, not a regular file",
        f"warning: skipped {top}/sub/loop: a symlink loop (or a second link) to a folder "
        "already read",
    ]
    assert runs(wh) == {RUN0, RUN1}


@pytest.mark.slow
def test_a_glob_over_a_symlink_cycle_ends(strange_folder):
    wh = strange_folder.parent / "wh"
    result = kidata(wh, "load", f"{strange_folder}/**/*.txt", timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stderr == (f"warning: skipped {strange_folder}/sub/loop: a symlink loop (or "
                             "a second link) to a folder already read\n")
    assert runs(wh) == {RUN0, RUN1}


@pytest.mark.slow
def test_a_fifo_named_on_the_command_line_is_a_reject_not_a_hang(strange_folder):
    wh = strange_folder.parent / "wh"
    fifo = strange_folder / "fifo.jsonl"
    result = kidata(wh, "load", fifo, SEED1, timeout=30)
    assert result.returncode == 1
    assert (f"rejected: {fifo}, file: not a regular file: a FIFO (named pipe); only regular "
            "files are read (pipe other input to `kidata load -`)") in result.stderr
    assert runs(wh) == {RUN1}


@pytest.mark.slow
def test_a_folder_that_cannot_be_listed_is_a_reject_naming_it(tmp_path):
    """Tests run as root, whom chmod 000 does not stop; a folder whose path is longer than
    PATH_MAX (4,096 bytes) cannot be listed by anyone: os.scandir fails with ENAMETOOLONG.
    It is built one level at a time with relative names (dir_fd)."""
    top = tmp_path / "in"
    top.mkdir()
    (top / "a.txt").write_bytes(SEED0.read_bytes())
    fd = os.open(top, os.O_RDONLY)
    names = []
    try:
        for i in range(30):  # 30 names of 180 bytes: 5,400+ bytes of path
            name = f"d{i:02d}" * 60
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
            names.append(name)
    finally:
        os.close(fd)
    # The first folder kidata cannot list: the deepest one whose own path fits in PATH_MAX
    # lists fine; the next one's path is too long.
    depth = next(i for i in range(1, 31)
                 if len(os.fsencode(os.path.join(top, *names[:i]))) >= 4096)
    unlisted = os.path.join(top, *names[:depth])
    wh = tmp_path / "wh"
    result = kidata(wh, "load", top)
    assert result.returncode == 1  # 0.2.2: exit 0, nothing said
    assert (f"rejected: {unlisted}, folder: cannot list the folder: File name too long; its "
            "files are not read") in result.stderr
    assert runs(wh) == {RUN0}
    [(kept,)] = Warehouse(wh).sql("select source_file from rejects").fetchall()
    assert kept == unlisted


# -- 8. damaged gzip keeps every complete record ----------------------------------------------

@pytest.mark.slow
def test_a_gzip_file_cut_in_half_keeps_every_complete_line(tmp_path):
    lines = [json.dumps(renamed(SEED0, f"-{i}")) + "\n" for i in range(998)]
    whole = gzip.compress("".join(lines).encode(), mtime=0)
    path = tmp_path / "half.jsonl.gz"
    path.write_bytes(whole[:len(whole) // 2])
    # What any gzip reader can recover from the half: zlib's output, whole lines only.
    recovered = zlib.decompressobj(31).decompress(whole[:len(whole) // 2])
    complete = recovered.count(b"\n")
    assert 400 < complete < 998
    wh = tmp_path / "wh"
    result = kidata(wh, "load", path)
    assert result.returncode == 1
    end = recovered.rfind(b"\n") + 1  # where the last complete line ends
    assert result.stderr == (
        f"rejected: {path}, line {complete + 1}: the gzip data is cut short (a truncated "
        f"file) after {end:,} bytes of data ({complete:,} complete lines, all read); the "
        f"incomplete line {complete + 1} after it ({len(recovered) - end:,} bytes) is not "
        "read\n")
    assert len(runs(wh)) == complete


@pytest.mark.slow
def test_a_small_truncated_gzip_keeps_its_complete_lines(tmp_path):
    """Under 64 KiB, 0.2.2 lost every line (the gzip module raised before handing any out)."""
    lines = [json.dumps(renamed(SEED0, f"-{i}")) + "\n" for i in range(20)]
    whole = gzip.compress("".join(lines).encode(), compresslevel=0, mtime=0)
    cut = 10 + 5 + sum(map(len, lines[:12])) + 40  # header, stored block, 12 lines and a bit
    path = tmp_path / "small.jsonl.gz"
    path.write_bytes(whole[:cut])
    wh = tmp_path / "wh"
    result = kidata(wh, "load", path)
    assert result.returncode == 1
    assert " 12 runs added " in result.stdout
    assert f"rejected: {path}, line 13: the gzip data is cut short" in result.stderr


# -- 10. errors, not tracebacks ----------------------------------------------------------------

@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> Path:
    wh = tmp_path_factory.mktemp("hostile") / "wh"
    assert kidata(wh, "load", SEEDS).returncode == 0
    return wh


@pytest.mark.slow
@pytest.mark.parametrize("query, message", [
    ("select cast('x' as integer)",
     "Error: Conversion Error: Could not convert string 'x' to INT32\n"),
    ("select error('boom')", "Error: Invalid Input Error: boom\n"),
])
def test_a_query_failing_while_its_rows_are_read_is_an_error_line(seeded, query, message):
    result = kidata(seeded, "sql", query)
    assert (result.returncode, result.stderr, result.stdout) == (1, message, "")


@pytest.mark.slow
def test_json_output_keeps_a_hugeint_exact(seeded):
    # 2**127 - 1 = 170141183460469231731687303715884105727 (the largest HUGEINT)
    result = kidata(seeded, "sql", "select 170141183460469231731687303715884105727::hugeint as h",
                    "--format", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [{"h": 2**127 - 1}]
    nd = kidata(seeded, "sql", "select (2::hugeint ** 100)::hugeint as h, 1 as n",
                "--format", "ndjson")
    assert nd.stdout == f'{{"h":{2**100},"n":1}}\n'


@pytest.mark.slow
def test_a_corrupt_parquet_file_in_a_table_folder_is_named_by_queries(seeded, tmp_path):
    wh = tmp_path / "wh"
    subprocess.run(["cp", "-r", str(seeded), str(wh)], check=True)
    planted = wh / "runs" / "part-planted.parquet"
    planted.write_bytes(b"not parquet\n")
    result = kidata(wh, "sql", "select count(*) from runs")
    assert result.returncode == 1
    assert result.stderr == (
        "Error: cannot read the warehouse's tables: Invalid Input Error: No magic bytes found "
        f"at end of file '{planted}' (kidata check lists every unreadable file)\n")


@pytest.mark.slow
def test_check_waits_for_a_commit_instead_of_reading_half_renamed_files(seeded):
    """0.2.2's check listed and read table folders while loads committed and compacted
    (7 of 60 checks beside 40 small loads failed with a traceback: a file listed, then
    renamed away). It now holds the writer lock while reading: a commit in progress (the
    lock held here) makes it wait."""
    lock = FileLock(str(seeded / "_kidata" / "lock"))
    with lock:
        proc = subprocess.Popen([KIDATA, "-w", str(seeded), "check"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)
        assert proc.poll() is None  # waiting for the writer
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Traceback" not in err


@pytest.mark.slow
def test_a_full_disk_in_a_staging_worker_is_one_clear_error(tmp_path):
    """3,000 lines: more than a batch (2,048), so a worker process stages them; its staging
    write fails with ENOSPC (the fault hook, inherited by the worker)."""
    path = tmp_path / "many.jsonl"
    path.write_text("".join(json.dumps(renamed(SEED0, f"-{i}")) + "\n" for i in range(3000)))
    wh = tmp_path / "wh"
    result = kidata(wh, "load", path, env={"KIDATA_WORKERS": "1", "KIDATA_FAULT": "stage-write",
                                           "KIDATA_FAULT_ACTION": "enospc"})
    assert result.returncode == 1
    assert result.stderr == ("Error: a staging worker failed: [Errno 28] No space left on "
                             "device: '<fault stage-write>'\n")
    assert not list((wh / "runs").glob("*.parquet"))


# -- 11. no extension auto-install -------------------------------------------------------------

@pytest.mark.slow
def test_sql_never_installs_an_extension(seeded):
    result = kidata(seeded, "sql", "select * from sqlite_scan('x', 'y')")
    assert result.returncode == 1
    assert result.stderr.startswith('Error: Catalog Error: Table Function with name '
                                    '"sqlite_scan" is not in the catalog')
    assert "download" not in result.stderr.lower()
    assert "install the required extension" not in result.stderr


# -- 2, 3, 9 through the console script: no traceback, the good records load ------------------

@pytest.mark.slow
def test_the_hostile_corpus_cases_load_their_good_records_in_one_process(tmp_path):
    bad = DATA / "bad"
    names = ["deep_300.jsonl", "far_timestamp.jsonl", "wide_integer.jsonl", "run_null.jsonl",
             "csv_x_value_wide.csv", "csv_config_wide.csv", "csv_config_1e400.csv",
             "truncated.jsonl.gz"]
    wh = tmp_path / "wh"
    result = kidata(wh, "load", *(bad / n for n in names))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert ", 8 rejected, " in result.stdout
    assert runs(wh) == {RUN0, RUN1}


@pytest.mark.slow
def test_an_integer_within_64_bits_is_stored_exactly(tmp_path):
    """2**64 - 1 and -2**63 are kept as written, in the stored document and its digest."""
    from kidata.core.digest import digest

    b = renamed(SEED0, "-u64")
    b["protocol"]["spec"]["big"] = 2**64 - 1
    b["protocol"]["metadata"]["name"] += "-u64"
    b["run"]["spec"]["protocolDigest"] = digest(b["protocol"])
    b["run"]["spec"]["extra"] = -(2**63)
    path = tmp_path / "u64.jsonl"
    path.write_text(json.dumps(b) + "\n")
    wh = tmp_path / "wh"
    result = kidata(wh, "load", path)
    assert result.returncode == 0, result.stderr
    [(document,)] = Warehouse(wh).sql("select document from run_documents").fetchall()
    assert '"extra":-9223372036854775808' in document
    [(protocol,)] = Warehouse(wh).sql("select document from protocols").fetchall()
    assert json.loads(protocol)["spec"]["big"] == 18446744073709551615
    assert copy.deepcopy(b["run"]) == json.loads(document)


# -- a planted journal names paths outside the warehouse (issue 27, item 4) --------------------

JOURNAL_ENTRIES = [
    # 0.2.7 renamed ../victim.txt into the warehouse (and an undo deleted ../victim.txt).
    {"moves": [["../victim.txt", "runs/part-x.parquet"]]},
    {"moves": [["_kidata/staging/../../../victim.txt", "runs/part-x.parquet"]]},
    {"moves": [["_kidata/staging/x/final/runs.parquet", "../victim.txt"]]},
    {"moves": [["_kidata/staging/gone.parquet", "../victim.txt"]]},  # an "undo" deleted it
    {"moves": [["_kidata/staging/x.parquet", "_kidata/lock"]]},
    {"moves": [["{victim}", "runs/part-x.parquet"]]},  # absolute
    {"exchanges": [["../outside", "runs", "w.parquet"]]},
    {"exchanges": [["_kidata/compact/x/runs", "..", "w.parquet"]]},
    {"exchanges": [["_kidata/compact/x/runs", "runs", "../../victim.txt"]]},
]


@pytest.fixture(scope="module")
def seed0_loaded(tmp_path_factory) -> Path:
    """A warehouse holding seed 000, loaded once: each journal case works on a copy."""
    wh = tmp_path_factory.mktemp("journal") / "wh"
    assert Warehouse(wh).load([str(SEED0)]).committed
    return wh


@pytest.mark.parametrize("entry", JOURNAL_ENTRIES)
def test_a_journal_naming_paths_outside_the_warehouse_is_refused(tmp_path, entry, seed0_loaded,
                                                                 cli):
    through_script = entry == JOURNAL_ENTRIES[0]
    wh = Path(shutil.copytree(seed0_loaded, tmp_path / "wh"))
    victim = tmp_path / "victim.txt"
    victim.write_text("not kidata's")
    (tmp_path / "outside").mkdir()
    entry = json.loads(json.dumps(entry).replace("{victim}", str(victim)))
    journal = wh / "_kidata" / "journal" / "planted.json"
    journal.write_text(json.dumps({"load_id": "planted", "what": "load planted",
                                   "replaces": [], "moves": [], "exchanges": [], **entry}))
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")
                    if "_kidata" not in p.parts)
    # Every writer runs recovery first: two of them through the command line (compact, the
    # third kind, goes through the same writer lock). The first case runs them through the
    # console script in a subprocess each; the others in-process (the same `kidata.cli.run`,
    # where a traceback would fail the test as an exception), which costs no interpreter
    # start-up and import per command.
    for args in (["check", "--repair"], ["load", str(SEED1)]):
        if through_script:
            done = kidata(wh, *args)
            code, err = done.returncode, done.stderr
        else:
            result = cli("-w", wh, *args)
            code, err = result.code, result.err
        assert code == 1, (args, err)
        assert "commit journal" in err and "refused, nothing was moved" in err
        assert "Traceback" not in err
    assert victim.read_text() == "not kidata's"
    after = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")
                   if "_kidata" not in p.parts)
    assert after == before
    assert runs(wh) == {RUN0}
    with pytest.raises(WarehouseError, match="refused, nothing was moved"):
        Warehouse(wh).compact()
    # Moved aside, as the message says, the warehouse works again.
    journal.rename(tmp_path / "planted.json")
    assert Warehouse(wh).load([str(SEED1)]).ok
    assert Warehouse(wh).check().problems == []
