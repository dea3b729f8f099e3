"""Sidecars: the context a mapping reads from a file beside its input (FlashInfer's stdout
``.txt``; a custom mapping's ``[sidecar]``). They follow the rule inputs follow: only a regular
file is read, never a FIFO or a device (issue 27, item 3), and a dated file name finds its own
sidecar. Tests that could hang run the installed command in a subprocess with a timeout.

The FlashInfer files are read from ../shared/data/external/flashinfer (SOURCES.md there):
``sample_testlist_output.csv`` has 111 rows of one B200 run, and the stdout beside it says
``gpu_name = 'NVIDIA_B200'`` and ``FlashInfer version: 0.6.2`` (lines 4-5 of the .txt).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DATA, shared

from kidata.errors import RecordError
from kidata.ingest.readers import read_file

KIDATA = Path(sys.executable).parent / "kidata"
ROWS = 111  # data rows of sample_testlist_output.csv (112 lines with the header)
STEM = "sample_testlist_output"


def _kidata(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(KIDATA), *map(str, args)], capture_output=True, text=True,
                          timeout=60)


def _flashinfer(folder: Path, name: str = f"{STEM}.csv") -> Path:
    """The FlashInfer CSV copied into ``folder`` as ``name`` (its .txt not copied)."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    shutil.copy(shared(f"external/flashinfer/{STEM}.csv"), target)
    return target


def _stdout_text() -> str:
    return shared(f"external/flashinfer/{STEM}.txt").read_text()


@pytest.mark.slow
@pytest.mark.shared
def test_a_fifo_as_the_flashinfer_sidecar_is_a_reject_not_a_hang(tmp_path):
    """kidata 0.2.7 opened the FIFO to read the GPU from it and waited for a writer for ever,
    in `load DIR` and in `convert`."""
    folder = tmp_path / "in"
    _flashinfer(folder)
    fifo = folder / f"{STEM}.txt"
    os.mkfifo(fifo)
    said = f"{folder / STEM}.csv, file: sidecar {fifo} not read: not a regular file: a FIFO " \
           "(named pipe); only regular files are read"
    for args in (["-w", tmp_path / "wh", "load", folder],
                 ["convert", folder, "-o", tmp_path / "bundles"]):
        done = _kidata(*args)
        assert done.returncode == 1, done.stderr
        # The FIFO itself is skipped as an input, and named as the CSV's sidecar.
        assert f"skipped {fifo}: a FIFO (named pipe), not a regular file" in done.stderr
        assert said in done.stderr
        # Every row lacks its GPU, and says where it was looked for.
        assert f"{folder / STEM}.csv, row 1, field gpu: the file does not say the gpu, nor " \
               f"does its sidecar: {fifo} was not read (not a regular file: a FIFO (named " \
               "pipe)); supply it with --set gpu=..." in done.stderr
        assert "Traceback" not in done.stderr
    # With --set giving all the sidecar would, it is not read at all: every row loads.
    done = _kidata("-w", tmp_path / "wh", "load", folder, "--set", "gpu=B200",
                   "--set", "version=0.6.2")
    assert done.returncode == 0, done.stderr
    assert f"{ROWS} runs added" in done.stdout
    assert "rejected:" not in done.stderr


def _team_with_sidecar(tmp_path: Path) -> tuple[Path, Path]:
    """tests/data/field's team mapping, its GPU read from ``<stem>.env`` beside the CSV
    instead of the file's ``device`` column (which the copied CSV leaves empty)."""
    text = (DATA / "field" / "team_mapping.toml").read_text()
    assert 'gpu = "{device}"\n' in text
    mapping = tmp_path / "sidecar_mapping.toml"
    mapping.write_text(text.replace('gpu = "{device}"\n', "") + "\n[sidecar]\n"
                       'path = "{file.dir}/{file.stem}.env"\ngpu = "gpu: ([^\\n]+)"\n')
    folder = tmp_path / "in"
    folder.mkdir()
    csv = folder / "team_results.csv"
    csv.write_text((DATA / "field" / "team_results.csv").read_text()
                   .replace("NVIDIA H100 80GB HBM3", ""))
    return mapping, csv


@pytest.mark.slow
def test_a_custom_mapping_sidecar_must_be_a_regular_file(tmp_path):
    mapping, csv = _team_with_sidecar(tmp_path)
    sidecar = csv.with_suffix(".env")
    # A regular sidecar gives the GPU: rows 1-2 load (row 3 is the file's -1, a failure).
    sidecar.write_text("host: a\ngpu: NVIDIA H100 80GB HBM3\n")
    done = _kidata("-w", tmp_path / "wh", "load", "--mapping", mapping, csv)
    assert done.returncode == 1 and "2 runs added" in done.stdout, done.stderr
    assert done.stderr.count("rejected:") == 1  # row 3 only
    sidecar.unlink()
    cases = {"a FIFO (named pipe)": lambda: os.mkfifo(sidecar),
             "a character device": lambda: sidecar.symlink_to("/dev/zero"),
             "a folder": lambda: sidecar.mkdir()}
    for kind, make in cases.items():
        make()
        done = _kidata("-w", tmp_path / "wh", "load", "--mapping", mapping, csv)
        assert done.returncode == 1, (kind, done.stderr)
        assert f"{csv}, file: sidecar {sidecar} not read: not a regular file: {kind}; only " \
               "regular files are read" in done.stderr, (kind, done.stderr)
        assert f"{csv}, row 1, field gpu: the file does not say the gpu, nor does its " \
               f"sidecar: {sidecar} was not read (not a regular file: {kind})" in done.stderr
        assert "0 runs added" in done.stdout and "Traceback" not in done.stderr
        if sidecar.is_dir() and not sidecar.is_symlink():
            sidecar.rmdir()
        else:
            sidecar.unlink()


def _gpus(path: Path) -> set[tuple[str, str]]:
    items = list(read_file(str(path)))
    assert len(items) == ROWS and not [i for i in items if isinstance(i, RecordError)]
    return {(i.docs["run"]["metadata"]["labels"]["gpu_name"],
             i.docs["run"]["metadata"]["labels"]["version"]) for i in items}


@pytest.mark.shared
def test_a_dated_file_name_finds_its_own_sidecar_then_the_undated_one(tmp_path):
    """0.2.7 cut the name at its first dot, so `….2025-09-23.csv` looked for `….txt` only."""
    csv = _flashinfer(tmp_path, f"{STEM}.2025-09-23.csv")
    (tmp_path / f"{STEM}.2025-09-23.txt").write_text(_stdout_text())
    # The undated sidecar of another run beside it, on another GPU: not this file's.
    (tmp_path / f"{STEM}.txt").write_text(_stdout_text().replace("NVIDIA_B200", "NVIDIA_H100"))
    assert _gpus(csv) == {("NVIDIA_B200", "0.6.2")}
    # Without its own, the name cut at the first dot is still looked for, as before.
    (tmp_path / f"{STEM}.2025-09-23.txt").unlink()
    assert _gpus(csv) == {("NVIDIA_H100", "0.6.2")}


@pytest.mark.shared
def test_a_missing_sidecar_is_named_in_every_reject(tmp_path):
    csv = _flashinfer(tmp_path, f"{STEM}.2025-09-23.csv")
    out = list(read_file(str(csv)))
    assert len(out) == ROWS and all(isinstance(r, RecordError) for r in out)
    looked = f"looked for {tmp_path / STEM}.2025-09-23.txt and {tmp_path / STEM}.txt"
    assert {(r.field, r.reason) for r in out} == {
        ("gpu", f"the file does not say the gpu, nor does its sidecar: {looked}: no such file; "
                "supply it with --set gpu=...")}
    # A sidecar without the GPU's line is named with the pattern it lacks.
    (tmp_path / f"{STEM}.2025-09-23.txt").write_text("FlashInfer version: 0.6.2\n")
    out = list(read_file(str(csv)))
    assert {r.reason for r in out} == {
        f"the file does not say the gpu, nor does its sidecar: {tmp_path / STEM}.2025-09-23.txt "
        "has no match for \"gpu_name = '([^']+)'\"; supply it with --set gpu=..."}
