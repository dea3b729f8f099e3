"""KernelBench baseline timing JSON (``results/timing/<hardware>/baseline_time_*.json``).

``{levelN: {problem.py: {mean, std, min, max, num_trials, hardware, device}}}`` in ms, rounded
to 3 significant digits; no median, so the primary statistic is the mean
(``docs/formats.md``). The implementation is only in the file name: ``baseline_time_torch`` is
eager PyTorch, ``baseline_time_torch_compile_<backend>_<mode>`` is torch.compile with that
backend (the implementation) and mode (the variant). The folder (``H100_Modal``) says where it
ran; the files in ``../shared`` carry it before ``__``. ``-1`` means the problem failed: such an
entry is rejected, never a latency. The kernel is the problem (``level1/1_Square_matrix...``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import PurePath
from typing import IO

from kidata.core.catalog import slugify
from kidata.errors import RecordError
from kidata.ingest.readers.base import Item
from kidata.ingest.readers.builder import Builder, Harness, Measured
from kidata.ingest.readers.tabular import raw_json, read_json

HARNESS = Harness(
    source="kernelbench", name="KernelBench baseline timing",
    repository="https://github.com/ScalingIntelligence/KernelBench",
    family="kernelbench_timing", timer="cuda_events",
    notes="scripts/generate_baseline_time.py: mean, std, min and max of num_trials timed "
          "calls of the problem's Model.forward on its get_inputs(), CUDA events, after warm-up; "
          "written in ms rounded to 3 significant digits. Eager and torch.compile files of one "
          "hardware folder compare on the same problem; a problem file can change size between "
          "KernelBench versions.")
NAME_RE = re.compile(r"baseline_time_torch(?:_compile_(?P<backend>[a-z0-9]+)_(?P<mode>.+))?$")
LEVEL_RE = re.compile(r"^level\d+$")


def implementation_from(file: str) -> tuple[str | None, str | None, str | None]:
    """``(implementation, variant, hardware folder)`` from a file name such as
    ``H100_Modal__baseline_time_torch_compile_inductor_default.json``."""
    stem = PurePath(file).name.split(".")[0]
    folder = None
    if "__" in stem:
        folder, stem = stem.split("__", 1)
    elif PurePath(file).parent.name:
        folder = PurePath(file).parent.name
    m = NAME_RE.search(stem)
    if not m:
        return None, None, folder
    if m.group("backend"):
        return m.group("backend"), m.group("mode"), folder
    return "eager", None, folder


def three_digits(value: float) -> float | None:
    """The rounding step of a value written to 3 significant digits (2.66 -> 0.01)."""
    if value <= 0:
        return None
    from math import floor, log10

    return float(f"1e{floor(log10(value)) - 2}")


def read(stream: IO[bytes], file: str, settings: dict[str, str] | None = None
         ) -> Iterator[Item | RecordError]:
    data = read_json(stream, file)
    if isinstance(data, RecordError):
        yield data
        return
    if not isinstance(data, dict):
        yield RecordError(file, "document", None, "expected an object of levels")
        return
    implementation, variant, folder = implementation_from(file)
    if settings and settings.get("implementation"):  # overrides the file name's
        implementation, variant = settings["implementation"], settings.get("variant")
    builder = Builder(HARNESS, file, settings)
    for level, problems in data.items():
        if not isinstance(problems, dict):
            yield RecordError(file, level, None, "expected an object of problems")
            continue
        for problem, entry in problems.items():
            position = f"{level}.{problem}"
            raw = raw_json(entry)
            try:
                if entry is None:
                    raise RecordError(file, position, None,
                                      "null: KernelBench wrote no timing for this problem (it "
                                      "did not compile, run or pass its check): not a latency")
                if not isinstance(entry, dict):
                    raise RecordError(file, position, None,
                                      f"expected an object of timings (mean, std, min, max, "
                                      f"num_trials, hardware), got {type(entry).__name__}")
                mean = entry.get("mean")
                if mean == -1 or mean == -1.0:
                    raise RecordError(file, position, "mean",
                                      "-1 means the problem failed (KernelBench writes -1.0 "
                                      "when it could not time it): not a latency")
                name = problem.removesuffix(".py")
                number, _, title = name.partition("_")
                stats = {k2: entry.get(k1) for k1, k2 in
                         (("mean", "mean"), ("std", "stddev"), ("min", "min"), ("max", "max"))}
                # Each value was rounded to 3 significant digits: its own step.
                resolution = {k: three_digits(v) for k, v in stats.items()
                              if isinstance(v, int | float) and not isinstance(v, bool)
                              and v > 0}
                labels = {"level": level}
                if folder:
                    labels["hardware_folder"] = folder
                yield builder.item(Measured(
                    kernel=f"{level}_{name}", implementation=implementation, variant=variant,
                    workload={"level": int(level[5:]) if LEVEL_RE.match(level) else level,
                              "problem": int(number) if number.isdigit() else number},
                    slug=slugify(f"{level} {name}"),
                    unit="ms", stats=stats, pass_="forward", gpu=entry.get("hardware"),
                    samples=entry.get("num_trials") if isinstance(entry.get("num_trials"), int)
                    else None,
                    resolution=resolution,
                    native={"problem": problem, "device": entry.get("device"),
                            "hardwareFolder": folder},
                    labels=labels, title=f"{title or name} · {implementation}",
                ), position, raw)
            except RecordError as err:
                yield err
