"""Import policy and process-wide tuning for kidata's own processes (the CLI and the load's
worker processes).

pyarrow imports pandas, when it is installed, the first time it converts Python objects or
reads a table, only to check whether they are pandas objects. kidata never uses pandas, and
the import costs about 0.4 s and 50 MB per process, so kidata's own processes refuse it.
The workers refuse numpy as well (:func:`refuse_numpy`), the CLI puts Arrow's memory on
the system allocator (:func:`use_system_allocator`), and both tune the garbage collector while
they stage (:func:`tune_gc_for_staging`, :class:`StagingGC`). Library users are not affected:
only :func:`kidata.cli.main` (and its ``load`` command) and the workers call these; a library
call never changes its caller's allocator or collector.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import Any


class _NoPandas:
    """An import hook that makes ``import pandas`` fail as a missing module would, so every
    importer's "is pandas installed?" check (``except ModuleNotFoundError``, as polars and
    pyarrow write it) takes its without-pandas branch instead of crashing."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError("kidata's own processes do not use pandas", name=name)
        return None


def refuse_pandas() -> None:
    if "pandas" not in sys.modules and not any(isinstance(f, _NoPandas) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoPandas())


def refuse_numpy() -> None:
    """Make ``import numpy`` fail in this process (a load's worker processes). pyarrow
    imports numpy at its own import when it is installed (~30 MB resident per process),
    but converts nothing to or from numpy for a worker: without it, pyarrow takes its
    without-numpy branch. Call before pyarrow is imported; a no-op if numpy already is."""
    if "numpy" not in sys.modules:
        sys.modules["numpy"] = None  # type: ignore[assignment]  # import raises ImportError


# The variable Arrow reads, when first imported, for its default memory pool.
POOL_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"


def use_system_allocator(env: Any = None) -> None:
    """Arrow's default memory pool on the C library's allocator for this process and its
    children (``ARROW_DEFAULT_MEMORY_POOL=system`` in ``env``, by default ``os.environ``),
    unless the user chose one: mimalloc and jemalloc, Arrow's defaults, keep memory that was
    freed, which raised a 1M-bundle load's peak by tens of MB for the same CPU time. Read by
    Arrow when it is first imported, so called before pyarrow is (:func:`kidata.cli.main`;
    a load's worker processes get it in their environment); library users keep Arrow's
    default."""
    (os.environ if env is None else env).setdefault(POOL_VARIABLE, "system")


# The garbage collector's thresholds while a process stages: a young pass every 100,000
# allocations rather than 700. Staged rows hold no cycles (reference counting frees them);
# a pass every 700 allocations walked every row buffered so far (docs/benchmarks.md).
STAGING_GC = (100_000, 50, 1_000)


def tune_gc_for_staging() -> None:
    """For a process that only stages (a load's worker, for good): the objects that exist now
    (imported modules) out of the collector's passes (:func:`gc.freeze`) and its thresholds
    at :data:`STAGING_GC`. A worker's objects are rows and documents, freed as soon as staged;
    the collector's passes over every module's objects cost a worker time for nothing."""
    gc.freeze()
    gc.set_threshold(*STAGING_GC)


class StagingGC:
    """The same while the CLI's ``load`` command stages (``with StagingGC() as tuned:``), then
    the collector as it was, at :meth:`end` (when the commit starts) or at the latest when the
    block ends: its thresholds, and the objects frozen here unfrozen (none frozen if some
    already were: :func:`gc.unfreeze` would thaw those too)."""

    def __enter__(self) -> StagingGC:
        self.thresholds = gc.get_threshold()
        self.freeze = not gc.get_freeze_count()
        if self.freeze:
            gc.freeze()
        gc.set_threshold(*STAGING_GC)
        self.active = True
        return self

    def end(self) -> None:
        if self.active:
            self.active = False
            gc.set_threshold(*self.thresholds)
            if self.freeze:
                gc.unfreeze()

    def __exit__(self, *exc: object) -> None:
        self.end()
