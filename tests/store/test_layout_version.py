"""The warehouse's layout version (issue 27, item 11): ``_kidata/layout.json`` says which
on-disk layout a warehouse is in, and a kidata that does not know that layout neither writes
nor reads it, instead of rolling forward journals it does not understand or reporting false
problems.

The commands run the CLI of the kidata package this test imports first on its path, in this
process (``conftest.console``), so the same tests, copied beside an older kidata, run that one.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
from conftest import console

import kidata
from kidata import Warehouse, errors
from kidata.errors import UsageError, WarehouseError
from kidata.store import commit

DATA = Path(__file__).parents[1] / "data"
SEED0 = DATA / "seeds" / "000_ef9e0295e36a82ef.txt"
SEED1 = DATA / "seeds" / "001_74c4a9a5654eeb33.txt"

NEWER = {"layout": 99, "written_by": "kidata 9.0.0"}


def cli(wh: Path, *args: object) -> subprocess.CompletedProcess:
    return console("-w", wh, *args, env={"KIDATA_COMPACT_AT": "0"})


def layout_file(wh: Path) -> Path:
    return wh / "_kidata" / "layout.json"


def listing(root: Path) -> dict[str, tuple]:
    """Every file and folder under ``root``: size, modification time and content hash."""
    out = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
        out[str(path.relative_to(root))] = (path.is_dir(), st.st_size, st.st_mtime_ns, digest)
    return out


@pytest.fixture(scope="module")
def _loaded(tmp_path_factory) -> tuple[Path, str]:
    wh = tmp_path_factory.mktemp("loaded") / "wh"
    report = Warehouse(wh).load([str(SEED0)])
    assert report.committed
    return wh, report.load_id


@pytest.fixture
def loaded(_loaded, tmp_path: Path) -> tuple[Path, str]:
    """A warehouse with one load, and that load's id: a fresh copy of one loaded once."""
    built, load_id = _loaded
    return Path(shutil.copytree(built, tmp_path / "wh")), load_id


def newer(wh: Path, content: dict | None = None) -> None:
    layout_file(wh).write_text(json.dumps(content or NEWER))


def test_a_new_warehouse_has_its_layout_file_and_checks_clean(tmp_path: Path):
    wh = tmp_path / "wh"
    done = cli(wh, "load", SEED0)
    assert done.returncode == 0, done.stderr
    assert json.loads(layout_file(wh).read_text()) == {
        "layout": commit.CURRENT_LAYOUT, "written_by": f"kidata {kidata.__version__}"}
    # `kidata check` knows the file: nothing to report, not even a note.
    report = Warehouse(wh).check()
    assert report.problems == [] and report.notes == []
    checked = cli(wh, "check")
    assert checked.returncode == 0 and checked.stdout.rstrip().endswith(": ok"), checked.stdout
    # A warehouse made by the library (no load yet) has it too, and no temporary file is left.
    made = Warehouse(tmp_path / "made").create()
    assert json.loads(layout_file(made.path).read_text())["layout"] == commit.CURRENT_LAYOUT
    assert sorted(p.name for p in (made.path / "_kidata").iterdir()
                  if p.is_file()) == ["layout.json"]


def test_a_newer_layout_is_refused_by_load_and_nothing_changes(loaded, tmp_path: Path):
    wh, _ = loaded
    newer(wh)
    before = listing(tmp_path)
    done = cli(wh, "load", SEED1)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr == (
        f"Error: the warehouse {wh} has layout 99, written by kidata 9.0.0; this kidata "
        f"{kidata.__version__} knows layouts up to {commit.CURRENT_LAYOUT} and neither reads "
        "nor writes a newer one "
        "(nothing was changed): upgrade kidata\n")
    assert listing(tmp_path) == before
    # The library says the same with an exception, before it creates or stages anything.
    with pytest.raises(UsageError, match="has layout 99") as raised:
        Warehouse(wh).load([str(SEED1)])
    assert isinstance(raised.value, errors.NewerLayout)
    assert isinstance(raised.value, WarehouseError)
    assert (raised.value.layout, raised.value.known) == (99, commit.CURRENT_LAYOUT)
    with pytest.raises(errors.NewerLayout):
        Warehouse(wh).create()
    assert listing(tmp_path) == before


@pytest.mark.parametrize("args", [
    ["compact"], ["check", "--repair"], ["unload", "{load_id}"],
    # Reads are refused too: a newer layout may mean rows an older reader would show wrongly.
    ["check"], ["info"], ["sql", "select count(*) from runs"],
    ["export", "runs", "-o", "{out}"],
])
def test_every_other_writer_and_reader_refuses_a_newer_layout(loaded, tmp_path: Path, args):
    wh, load_id = loaded
    newer(wh)
    args = [a.format(load_id=load_id, out=tmp_path / "runs.csv") for a in args]
    before = listing(tmp_path)
    done = cli(wh, *args)
    assert done.returncode == 2, (args, done.stdout, done.stderr)
    assert "has layout 99" in done.stderr and "upgrade kidata" in done.stderr
    assert "Traceback" not in done.stderr
    assert listing(tmp_path) == before


def test_the_library_refuses_to_read_a_newer_layout(loaded):
    wh, _ = loaded
    newer(wh)
    for read in (lambda w: w.sql("select 1"), lambda w: w.info(), lambda w: w.check(),
                 lambda w: w.compact(), lambda w: w.unload(damaged=True)):
        with pytest.raises(UsageError, match="has layout 99"):
            read(Warehouse(wh))


def test_a_warehouse_without_the_file_still_reads_and_loads_and_gets_it(tmp_path: Path):
    """Warehouses written by kidata 0.1-0.2.7 have no layout file: layout 1 (a warehouse
    kidata 0.3.13 wrote, its file removed; tests/store/test_upgrade.py has the upgrade)."""
    wh = tmp_path / "wh"
    shutil.copytree(DATA / "layout1" / "warehouse", wh)
    layout_file(wh).unlink()
    assert Warehouse(wh).sql("select count(*) from runs").fetchall() == [(31,)]
    assert not layout_file(wh).exists()  # reading writes nothing
    seed = tmp_path / "again.txt"  # a seed file again, under another name: duplicates
    shutil.copyfile(SEED1, seed)
    done = cli(wh, "load", seed)
    assert done.returncode == 0, done.stderr
    assert Warehouse(wh).sql("select count(*) from runs").fetchall() == [(31,)]
    # Its next write gives it the file, upgraded to the current layout.
    assert json.loads(layout_file(wh).read_text()) == {
        "layout": commit.CURRENT_LAYOUT, "written_by": f"kidata {kidata.__version__}"}
    assert cli(wh, "check").returncode == 0


def test_a_layout_file_of_a_known_layout_with_more_keys_is_read(loaded):
    wh, _ = loaded
    layout_file(wh).write_text(json.dumps({"layout": commit.CURRENT_LAYOUT,
                                           "written_by": "kidata 1.4.0",
                                           "features": ["something later"]}))
    done = cli(wh, "load", SEED1)
    assert done.returncode == 0, done.stderr
    # Another writer's file is kept as it is, never rewritten.
    assert json.loads(layout_file(wh).read_text())["written_by"] == "kidata 1.4.0"


@pytest.mark.parametrize("content", [
    b"", b"{", b"\xff\xfe", b"[1]", b"null", b'{"written_by": "kidata 0.2.8"}',
    b'{"layout": "1"}', b'{"layout": 0}', b'{"layout": -3}', b'{"layout": true}',
    b'{"layout": 1.0}', b'{"layout": 1e999}', b'{"layout": 1, "pad": "' + b"x" * 70_000 + b'"}',
])
def test_a_malformed_layout_file_is_an_error_naming_it(loaded, tmp_path: Path, content: bytes):
    wh, _ = loaded
    layout_file(wh).write_bytes(content)
    before = listing(tmp_path)
    message = f"the warehouse layout file {layout_file(wh)} is malformed ("
    for act in (lambda w: w.load([str(SEED1)]), lambda w: w.sql("select 1"),
                lambda w: w.check(repair=True)):
        with pytest.raises(WarehouseError) as raised:
            act(Warehouse(wh))
        assert str(raised.value).startswith(message) and not isinstance(raised.value,
                                                                         UsageError)
    assert listing(tmp_path) == before


def test_a_malformed_layout_file_is_an_error_line_on_the_command_line(loaded, tmp_path: Path):
    wh, _ = loaded
    layout_file(wh).write_text('{"layout": "two"}')
    before = listing(tmp_path)
    for args in (["load", SEED1], ["sql", "select 1"]):
        done = cli(wh, *args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert done.stderr == (
            f"Error: the warehouse layout file {layout_file(wh)} is malformed (not a JSON "
            'object with an integer "layout" of 1 or more); kidata neither reads nor writes '
            f'{wh} until it holds {{"layout": N, ...}}\n')
    assert listing(tmp_path) == before


def test_a_layout_file_that_is_a_folder_is_an_error_naming_it(loaded):
    wh, _ = loaded
    layout_file(wh).unlink()
    layout_file(wh).mkdir()
    done = cli(wh, "info")
    assert done.returncode == 1
    assert done.stderr.startswith(
        f"Error: cannot read the warehouse layout file {layout_file(wh)}: "), done.stderr


def test_a_newer_layouts_writer_name_is_shown_only_when_plain(loaded):
    """A warehouse's files are input: its writer's name reaches the terminal only as a short
    printable text."""
    wh, _ = loaded
    newer(wh, {"layout": 99, "written_by": "kidata 3.0\x1b[2J\x1b]0;pwned\x07"})
    done = cli(wh, "info")
    assert done.returncode == 2
    assert "\x1b" not in done.stderr and "written by" not in done.stderr
    assert "has layout 99;" in done.stderr


def test_concurrent_first_writers_leave_one_whole_layout_file(tmp_path: Path):
    """Two first loads at once both create the file: each writes under its own name and links
    it into place, so the file is never empty, half-written or replaced."""
    root = tmp_path / "wh"
    failures: list[BaseException] = []
    seen: set[str] = set()
    stop = threading.Event()

    def read_while_written() -> None:
        while not stop.is_set():
            try:
                seen.add(layout_file(root).read_text())
            except (FileNotFoundError, NotADirectoryError):
                pass

    def first_write() -> None:
        try:
            commit.ensure(root)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    reader = threading.Thread(target=read_while_written)
    reader.start()
    writers = [threading.Thread(target=first_write) for _ in range(8)]
    for t in writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    reader.join()
    assert failures == []
    whole = json.dumps({"layout": commit.CURRENT_LAYOUT,
                        "written_by": f"kidata {kidata.__version__}"}) + "\n"
    assert layout_file(root).read_text() == whole
    assert seen <= {whole}
    assert [p.name for p in (root / "_kidata").iterdir() if p.is_file()] == ["layout.json"]
