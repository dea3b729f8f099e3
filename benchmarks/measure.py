"""Run one command in a child process and measure it: wall seconds and peak memory.

Peak memory is the larger of two readings, so neither a short spike nor worker processes are
missed:

- the child's own high-water mark (``ru_maxrss`` from ``wait4``, which also covers the
  descendants it waited for), and
- the sum of the resident sets of the child and all its descendants, sampled every 20 ms
  (catches worker processes that run side by side; a process being spawned, which shows its
  parent's resident set until it runs its program, is not counted).

``pss_mb`` (with ``pss=True``) is the peak of the tree's summed proportional set sizes, sampled
every ~0.2 s: the
resident sets' sum counts a page mapped by several processes of the tree (a shared library's
code) once per process, the proportional sizes once in all.

A ``limit_mb`` kills the whole process tree once the sampled sum passes it, so a baseline that
would exhaust the machine fails cleanly instead.

``trees`` turns the ``LABEL=PATH or git:REV`` options of the benchmarks that measure kidata
from another checkout (``cpu_per_run.py --tree``, ``floor.py --tree``, ``load_memory.py
--case``) into the environment a measured process needs.
"""

from __future__ import annotations

import compileall
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
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
    # The peak of the tree's summed proportional set sizes (run(pss=True), Linux; else 0),
    # sampled every ~0.2 s: what a tree of processes sharing libraries holds, each page
    # counted once (see _tree_pss).
    pss_mb: float = 0.0

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


def _tree(proc: psutil.Process) -> list[psutil.Process]:
    """``proc`` and its descendants (none once it has ended)."""
    try:
        return [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return []


def _tree_rss(proc: psutil.Process) -> int:
    """The resident sets of ``proc`` and its descendants, summed; a child whose counters equal
    its parent's is left out: it is being spawned (between ``vfork`` or ``fork`` and ``exec``
    it shares or copies the parent's memory and shows its resident set, so a process started
    late by a 400 MB parent read as 800 MB for a sample)."""
    infos = {}
    for p in _tree(proc):
        try:
            infos[p.pid] = (p.memory_info(), p.ppid())
        except psutil.Error:
            pass
    total = 0
    for info, parent in infos.values():
        above = infos.get(parent)
        if above is not None and (above[0].rss, above[0].vms) == (info.rss, info.vms):
            continue
        total += info.rss
    return total


def _tree_pss(proc: psutil.Process) -> int:
    """The proportional set sizes of ``proc`` and its descendants, summed (Linux): a page that
    several of them map, a shared library's code for one, is counted once in all, where the
    sum of resident sets counts it in each. Reading it costs the kernel a walk of each
    process's page tables (~10 ms for 500 MB), so it is sampled less often than the resident
    sets."""
    total = 0
    for p in _tree(proc):
        try:
            with open(f"/proc/{p.pid}/smaps_rollup") as fh:
                for line in fh:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except OSError:
            pass
    return total


PSS_EVERY = 10  # samples of the resident sets per sample of the proportional sizes (~0.2 s)


def run(argv: list[str], env: dict[str, str] | None = None, cwd: str | Path | None = None,
        limit_mb: float | None = None, stdout_path: Path | None = None,
        pss: bool = False) -> Measured:
    """Run ``argv``; stdout is captured (or sent to ``stdout_path``), stderr captured. With
    ``pss`` (Linux), the tree's proportional set sizes are sampled too (``Measured.pss_mb``):
    each reading walks the page tables under the process's memory lock, which slowed a 1M-run
    report by ~10%, so time and this peak are best measured in separate runs."""
    out_fh = open(stdout_path, "wb") if stdout_path else subprocess.PIPE  # noqa: SIM115
    start = time.perf_counter()
    child = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out_fh, stderr=subprocess.PIPE,
                             start_new_session=True)
    peak = peak_pss = 0
    killed: list[float] = []
    done = threading.Event()

    def sample() -> None:
        nonlocal peak, peak_pss
        try:
            proc = psutil.Process(child.pid)
        except psutil.Error:
            return
        n = 0
        while not done.is_set():
            rss = _tree_rss(proc)
            peak = max(peak, rss)
            if pss and n % PSS_EVERY == 0 and os.path.exists("/proc/self/smaps_rollup"):
                peak_pss = max(peak_pss, _tree_pss(proc))
            n += 1
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
                    killed[0] if killed else None, usage.ru_utime + usage.ru_stime,
                    peak_pss / 1e6)


# -- which kidata a measured process imports --------------------------------------------------

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Tree:
    """One kidata to measure: ``label`` names it in the output, ``env`` is what to add to the
    measured process's environment (``PYTHONPATH``; empty: the installed kidata)."""

    label: str
    env: dict[str, str] = field(default_factory=dict)


def _checkout(option: str, path: Path) -> None:
    """Refuse at once a folder kidata cannot be imported from with its views."""
    if not path.is_dir():
        raise SystemExit(f"{option}: {path} is not a folder")
    missing = [name for name, there in (
        ("kidata/", (path / "kidata" / "__init__.py").is_file()),
        # views.sql_dir: the views beside the package (a checkout) or inside it (a wheel).
        ("sql/", (path / "sql").is_dir() or (path / "kidata" / "sql").is_dir())) if not there]
    if missing:
        raise SystemExit(f"{option}: {path} holds no {' and no '.join(missing)} (a kidata "
                         "checkout has the package kidata/ and its SQL views sql/ side by side)")


def _extract(option: str, rev: str, into: Path) -> None:
    """``git archive REV | tar -x`` of the repository these benchmarks run from."""
    found = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", "--quiet",
                            f"{rev}^{{commit}}"], capture_output=True)
    if not rev or found.returncode:
        why = found.stderr.decode().strip()
        raise SystemExit(f"{option}: {rev!r} is not a revision of the git repository at "
                         f"{REPO}" + (f" ({why})" if why else ""))
    commit = found.stdout.decode().strip()
    archive = subprocess.Popen(["git", "-C", str(REPO), "archive", commit],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    untar = subprocess.run(["tar", "-x", "-C", str(into)], stdin=archive.stdout,
                           capture_output=True)
    archive.stdout.close()
    err = archive.stderr.read()
    if archive.wait() or untar.returncode:
        raise SystemExit(f"{option}: git archive {commit} | tar -x failed: "
                         f"{(err + untar.stderr).decode().strip()}")
    # Compiled once here, as benchmarks/run compiles the installed kidata, so the first process
    # measured does not pay for compiling every module.
    compileall.compile_dir(str(into / "kidata"), quiet=1)
    print(f"{option}: {commit[:12]} extracted to {into}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def trees(specs: Iterable[str], option: str = "--tree") -> Iterator[list[Tree]]:
    """The trees of ``LABEL=SPEC`` options, every one checked before any is measured.

    SPEC is a path to a kidata checkout (holding ``kidata/`` and ``sql/``), ``git:REV`` (that
    revision of the repository these benchmarks run from, extracted to a temporary folder
    removed on exit; extracted once per REV) or empty (the installed kidata).
    """
    with contextlib.ExitStack() as stack:
        extracted: dict[str, Path] = {}
        out = []
        for spec in specs:
            label, _, where = spec.partition("=")
            given = f"{option} {spec}"
            if not where:
                out.append(Tree(label))
                continue
            if where.startswith("git:"):
                rev = where.removeprefix("git:")
                path = extracted.get(rev)
                if path is None:
                    path = Path(stack.enter_context(
                        tempfile.TemporaryDirectory(prefix="kidata-tree-")))
                    _extract(given, rev, path)
                    extracted[rev] = path
            else:
                path = Path(where).resolve()
            _checkout(given, path)
            out.append(Tree(label, {"PYTHONPATH": str(path)}))
        yield out
