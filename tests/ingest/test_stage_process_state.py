"""A library load changes nothing process-wide in its caller (issue 29 item 3): neither Arrow's
memory pool nor the garbage collector's thresholds or frozen objects, during the load or after
it. The CLI's load command and the worker processes tune their own process
(kidata/_imports.py)."""

from __future__ import annotations

import gc
from pathlib import Path

import pyarrow as pa

from kidata import Warehouse
from kidata._imports import STAGING_GC, StagingGC

SEEDS = Path(__file__).parents[1] / "data" / "seeds"


def _state() -> tuple:
    return pa.default_memory_pool().backend_name, gc.get_threshold()


def test_a_library_load_leaves_the_callers_allocator_and_collector_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("KIDATA_WORKERS", "0")  # staged in this process
    gc.freeze()  # the caller's own frozen objects stay frozen (fewer as some are freed)
    try:
        before, frozen = _state(), gc.get_freeze_count()
        during, frozen_during = [], []

        def progress(*_):
            during.append(_state())
            frozen_during.append(gc.get_freeze_count())

        report = Warehouse(tmp_path / "wh").load([str(SEEDS)], progress=progress)
        assert report.runs_added > 0 and during
        assert set(during) == {before}
        assert max(frozen_during) <= frozen  # nothing of the load's frozen
        assert _state() == before
        assert 0 < gc.get_freeze_count() <= frozen  # the caller's not unfrozen
    finally:
        gc.unfreeze()


def test_the_clis_staging_gc_is_undone_and_spares_a_callers_frozen_objects():
    thresholds = gc.get_threshold()
    with StagingGC() as tuned:
        assert gc.get_threshold() == STAGING_GC and gc.get_freeze_count() > 0
        tuned.end()  # the CLI's load, when its commit starts
        assert gc.get_threshold() == thresholds and gc.get_freeze_count() == 0
    assert gc.get_threshold() == thresholds and gc.get_freeze_count() == 0
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with StagingGC():
            pass
        # Not thawed (0), nothing more frozen; a frozen object freed meanwhile lowers the count.
        assert 0 < gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()
