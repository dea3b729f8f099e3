"""The CLI as a new user meets it: help without internal type names, shell completion,
`info --format json`, the hint after the first load, and the load's progress bar."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SEEDS

from kidata.console import LoadProgress

KIDATA = str(Path(sys.executable).parent / "kidata")


def commands() -> list[str]:
    """Every command the CLI has (commands added later are checked too)."""
    import typer

    from kidata.cli import app

    group = typer.main.get_command(app)
    return group.list_commands(typer.Context(group))


def kidata(*args, warehouse: Path | None = None, **env_extra) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "100", **env_extra}
    if warehouse is not None:
        env["KIDATA_WAREHOUSE"] = str(warehouse)
    return subprocess.run([KIDATA, *map(str, args)], capture_output=True, text=True, env=env,
                          timeout=120)


# typer's own spellings of types (`<str>`, `<list[str]>`, `{paths}`), not prose such as
# `label.<name>`.
TYPE_NAMES = re.compile(r"<(str|int|float|bool|path|datetime|list\[\w+\])>|\{[a-z_]+\}")


@pytest.mark.slow
def test_help_shows_no_internal_type_names(cli):
    assert {"load", "sql", "report", "export", "info"} <= set(commands())
    for command in commands():  # in-process: a dozen start-ups would cost seconds
        result = cli(command, "--help")
        assert result.code == 0, result.err
        assert not TYPE_NAMES.search(result.out), f"kidata {command} --help:\n{result.out}"
    load = kidata("load", "--help").stdout  # and as the console script prints it
    assert "Usage: kidata load [OPTIONS] PATH..." in load
    assert "-f, --format FORMAT" in load and "-w, --warehouse DIR" in load


@pytest.mark.slow
def test_shell_completion_is_offered():
    # typer picks the shell from the parent process (shellingham), whatever is named after
    # --show-completion; started from a shell-less parent (nohup, an IDE) it finds none. (A
    # second command keeps bash from exec'ing kidata in its place.)
    done = subprocess.run(["bash", "-c", f"'{KIDATA}' --show-completion bash; exit $?"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "100"})
    assert done.returncode == 0
    assert "_kidata_completion()" in done.stdout and "complete " in done.stdout
    assert "--install-completion" in kidata("--help").stdout


def load_at_a_terminal(wh: Path) -> tuple[int, str]:
    """``kidata load SEEDS`` with stderr on a pseudo-terminal; exit code and what it showed."""
    main, child = os.openpty()
    env = {**os.environ, "KIDATA_WAREHOUSE": str(wh)}
    process = subprocess.Popen([KIDATA, "load", str(SEEDS)], stdout=subprocess.DEVNULL,
                               stderr=child, env=env)
    os.close(child)
    shown = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        shown += chunk
    os.close(main)
    return process.wait(60), shown.decode().replace("\r\n", "\n")


@pytest.mark.slow
def test_info_as_json_and_the_first_load_hint(tmp_path: Path):
    wh = tmp_path / "wh"
    code, shown = load_at_a_terminal(wh)
    assert code == 0, shown
    assert "next:\n  kidata sql \"select * from speedup_summary\"" in shown
    assert "kidata report -o report.html" in shown
    code, shown = load_at_a_terminal(wh)
    assert code == 0 and "next:" not in shown  # not the first load
    other = kidata("load", SEEDS, warehouse=tmp_path / "other")  # stderr not a terminal
    assert other.returncode == 0 and other.stderr == ""
    done = kidata("info", "--format", "json", warehouse=wh)
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    # Seeds: 2 Liger runs (000, 001) and 24 trainkernel runs (003); one load of 3 files.
    assert info["tables"]["runs"] == {"rows": 26, "files": 1}
    assert info["sources"] == {"liger-kernel-bench": 2, "trainkernel-results": 24}
    assert info["observed_from"] == "2024-09-03T15:39:30+00:00"
    assert kidata("info", "--format", "xml", warehouse=wh).returncode == 2


def test_progress_counts_bytes_files_records_and_the_commit(tmp_path: Path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_bytes(b"x" * 1000)
    b.write_bytes(b"y" * 3000)
    stream = io.StringIO()
    progress = LoadProgress([str(a), str(b)], stream, delay=0)
    assert progress.total == 4000
    progress(str(a), 10)            # a finished with 10 records (100 bytes per record)
    progress(str(b), 10)            # b started
    progress(str(b), 25)            # 15 records into b: about 1500 of its 3000 bytes
    task = progress.bar.tasks[0]
    assert task.completed == pytest.approx(1000 + 1500)
    assert task.fields["files"] == "1/2 files" and task.fields["records"] == "25 records"
    progress.phase("commit")
    task = progress.bar.tasks[0]
    assert task.description == "committing"
    assert task.completed == 4000 and task.fields["files"] == "2/2 files"
    progress.close()
    assert progress.bar is None


def test_no_progress_bar_for_a_quick_load(tmp_path: Path):
    progress = LoadProgress([str(SEEDS)], io.StringIO(), delay=60)
    progress(str(SEEDS / "000_ef9e0295e36a82ef.txt"), 1)
    progress.phase("commit")
    assert progress.bar is None
