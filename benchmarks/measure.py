"""Run one command in a child process and measure it: wall seconds and peak memory.

Peak memory is the larger of two readings, so neither a short spike nor worker processes are
missed:

- the child's own high-water mark (``ru_maxrss`` from ``wait4``, which also covers the
  descendants it waited for), and
- the sum of the resident sets of the child and all its descendants, sampled every 20 ms
  (catches worker processes that run side by side).

A ``limit_mb`` kills the whole process tree once the sampled sum passes it, so a baseline that
would exhaust the machine fails cleanly instead.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil


@dataclass
class Measured:
    argv: list[str]
    seconds: float
    peak_mb: float
    returncode: int
    stdout: str
    stderr: str
    killed_at_mb: float | None = None
    # CPU seconds (user + system) of the child and every descendant it waited for: less
    # sensitive than wall time to other work on a shared machine.
    cpu_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.killed_at_mb is None


def records(path: Path) -> int:
    """The non-blank lines of a file, or of the ``*.ndjson`` files of a folder: the records of
    a data set written by ``generate.py`` (a CSV's header included)."""
    files = sorted(path.glob("*.ndjson")) if path.is_dir() else [path]
    total = 0
    for file in files:
        with open(file, "rb") as fh:
            total += sum(1 for line in fh if line.strip())
    return total


def _tree_rss(proc: psutil.Process) -> int:
    total = 0
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def run(argv: list[str], env: dict[str, str] | None = None, cwd: str | Path | None = None,
        limit_mb: float | None = None, stdout_path: Path | None = None) -> Measured:
    """Run ``argv``; stdout is captured (or sent to ``stdout_path``), stderr captured."""
    out_fh = open(stdout_path, "wb") if stdout_path else subprocess.PIPE  # noqa: SIM115
    start = time.perf_counter()
    child = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out_fh, stderr=subprocess.PIPE,
                             start_new_session=True)
    peak = 0
    killed: list[float] = []
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        try:
            proc = psutil.Process(child.pid)
        except psutil.Error:
            return
        while not done.is_set():
            rss = _tree_rss(proc)
            peak = max(peak, rss)
            if limit_mb is not None and rss > limit_mb * 1e6 and not killed:
                killed.append(rss / 1e6)
                try:
                    os.killpg(child.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            done.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    # Drain the pipes in threads so a chatty child never blocks on a full pipe.
    chunks: dict[str, list[bytes]] = {"out": [], "err": []}

    def drain(name: str, stream) -> None:
        for block in iter(lambda: stream.read(65536), b""):
            chunks[name].append(block)

    drains = [threading.Thread(target=drain, args=("err", child.stderr), daemon=True)]
    if stdout_path is None:
        drains.append(threading.Thread(target=drain, args=("out", child.stdout), daemon=True))
    for t in drains:
        t.start()
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    done.set()
    sampler.join()
    for t in drains:
        t.join()
    if stdout_path:
        out_fh.close()
    # ru_maxrss is in KiB on Linux.
    peak_mb = max(peak, usage.ru_maxrss * 1024) / 1e6
    return Measured(argv, seconds, peak_mb, child.returncode,
                    b"".join(chunks["out"]).decode("utf-8", "replace"),
                    b"".join(chunks["err"]).decode("utf-8", "replace"),
                    killed[0] if killed else None, usage.ru_utime + usage.ru_stime)
