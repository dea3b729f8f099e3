"""What a load's processes keep in memory (issue 16: a 1M-bundle load's peak under 500 MB):
a worker process never has numpy, a delivered job's rows are not held by the loading
process's reader thread, and the CLI puts Arrow on the system allocator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import weakref
from pathlib import Path

import pytest

from kidata import _imports
from kidata.ingest import stage_worker
from kidata.ingest.readers import Lines

SEEDS = Path(__file__).parents[1] / "data" / "seeds"


def _bundle_line() -> bytes:
    text = (SEEDS / "000_ef9e0295e36a82ef.txt").read_text("utf-8")
    return json.dumps(json.loads(text.split("\n", 2)[2])).encode()


def _job(n: int = 1) -> list:
    return [(Lines("a.jsonl", None, [(i, _bundle_line()) for i in range(1, n + 1)]),
             "a.jsonl")]


@pytest.fixture
def worker():
    with tempfile.TemporaryDirectory() as folder:
        w = stage_worker.WorkerProcess((folder, 100, []))
        try:
            yield w
        finally:
            w.close()


def _mapped(pid: int) -> str:
    maps = Path(f"/proc/{pid}/maps")
    if not maps.exists():
        pytest.skip("needs /proc (Linux) to see what a process has loaded")
    return maps.read_text()


def test_a_worker_process_stages_without_numpy(worker):
    # pyarrow imports numpy at its own import (~30 MB resident per worker) though a worker
    # never converts to or from numpy: the worker refuses it before importing pyarrow.
    events = worker.submit(1, 1, _job()).result(timeout=120)
    assert events.counts["a.jsonl"].runs == 1, events.counts  # the run was staged
    assert "runs" in events.tables  # ... and shipped, through pyarrow
    mapped = _mapped(worker.proc.pid)
    assert "libarrow" in mapped  # the probe sees the libraries a worker loaded
    assert "numpy" not in mapped


def test_refuse_numpy_makes_pyarrow_take_its_branch_without_numpy():
    code = ("import sys; from kidata._imports import refuse_numpy; refuse_numpy(); "
            "import pyarrow as pa, pyarrow.compute as pc; "
            "t = pa.table({'a': [3, 1, 2]}).sort_by('a'); "
            "assert pc.sum(pc.less(t['a'], 3)).as_py() == 2; "
            "print(sys.modules['numpy'])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "None"


def test_a_delivered_result_is_not_held_by_the_reader_thread(worker):
    # The reader thread waits for the worker's next result: by then it must have dropped the
    # one it delivered, or every worker keeps a finished job's rows alive until its next job.
    future = worker.submit(1, 1, _job(20))
    gone = weakref.ref(future.result(timeout=120))
    del future
    deadline = time.monotonic() + 10
    while gone() is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone() is None
    assert not worker.waiting


def test_the_cli_asks_for_the_system_allocator_unless_the_user_chose(monkeypatch):
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    _imports.use_system_allocator()
    assert os.environ["ARROW_DEFAULT_MEMORY_POOL"] == "system"
    monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")
    _imports.use_system_allocator()
    assert os.environ["ARROW_DEFAULT_MEMORY_POOL"] == "jemalloc"


# kidata.cli.main with a command that reports Arrow's memory pool (`run` replaced).
POOL = """
import sys
from kidata import cli

def run():
    import pyarrow as pa
    print(pa.default_memory_pool().backend_name)
    return 0

cli.run = run
cli.main()
"""


@pytest.mark.parametrize(("chosen", "expected"), [(None, "system"), ("mimalloc", "mimalloc")])
def test_the_cli_process_allocates_arrow_memory_with_the_system_allocator(chosen, expected):
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if chosen:
        env["ARROW_DEFAULT_MEMORY_POOL"] = chosen
    done = subprocess.run([sys.executable, "-c", POOL], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected


def test_a_library_process_keeps_arrows_default_allocator():
    # Only the CLI changes the allocator: importing and using kidata does not.
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    code = ("import kidata.warehouse, pyarrow as pa, os; "
            "print(os.environ.get('ARROW_DEFAULT_MEMORY_POOL'), "
            "pa.default_memory_pool().backend_name)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == "None"
