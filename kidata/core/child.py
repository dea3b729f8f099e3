"""Child interpreters of kidata's own: a load's staging workers
(:mod:`kidata.ingest.stage_worker`) and the report's drawing helper
(:mod:`kidata.query.present.drawing`). Plain subprocesses rather than multiprocessing, whose
spawned children import the caller's main script again: a library user's unguarded script
would then run recursively. Each child reads pickled work on its standard input and writes
pickled results on its standard output."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any


def workers() -> int:
    """Child processes a command may share its work with: ``KIDATA_WORKERS`` if set, else one
    per core up to 4 (none on a single core, where they would only add overhead). A load
    stages with this many workers (each writes its rows after every job and keeps no numpy,
    so a load's memory is about 200 MB plus ~100 MB per worker, whatever the input size:
    docs/benchmarks.md, Runs Q and U); the report draws with one helper when it is not 0."""
    from kidata.core import config

    count = config.current().workers
    if count is not None:
        return count
    cores = os.cpu_count() or 1
    return 0 if cores < 2 else min(cores, 4)


def start(code: str, prepare: Callable[[dict[str, str]], Any] | None = None
          ) -> subprocess.Popen:
    """``python -P -c code`` with pipes on its standard input and output. The child imports
    the same kidata as this process: this process's path, in order ('' being the current
    folder), and not first a ``kidata`` folder in the current folder that this process did not
    import (``-P``). ``prepare`` may change the child's environment first."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p or os.getcwd() for p in sys.path)
    if prepare is not None:
        prepare(env)
    return subprocess.Popen([sys.executable, "-P", "-c", code],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)


def end(proc: subprocess.Popen, timeout: float) -> None:
    """Close the child's input (its end of work) and wait for it to exit, killing it after
    ``timeout`` seconds."""
    try:
        proc.stdin.close()
    except OSError:
        pass
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def serving() -> tuple[Any, Any]:
    """In a child: its input and output pipes, binary. Ctrl-C is left to the parent (which
    stops sending work and closes the child's input), and ``print`` goes to the standard
    error, so that nothing but results reaches the output pipe. Changes this process's
    signal handling and ``sys.stdout``: call it only in a child."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr
    return inp, out


def jobs(inp: Any) -> Iterator[Any]:
    """The pickled objects read from ``inp`` until it ends."""
    import pickle

    while True:
        try:
            yield pickle.load(inp)
        except EOFError:
            return
