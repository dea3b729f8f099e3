"""FlashInfer ``benchmarks/flashinfer_benchmark.py --output_path`` CSV.

One row per (routine, backend, case): ``median_time`` and ``std_time`` in ms, ``tflops``
(TFLOP/s, ``0`` = not computed) and ``tb_per_sec`` (TB/s), then the routine's parameter
columns (the set grows between versions; unused ones are empty; some names repeat). The
routine is the kernel, the backend the implementation; every other non-empty column except
the run-control ones is a workload parameter. The file names no GPU, time or version: the
GPU and FlashInfer version are read from the run's stdout when it sits beside the file
(``<name>.txt``, as ``benchmarks/samples/`` keeps it), else ``--set gpu=... --set
version=...`` supplies them. Mapping: ``docs/formats.md``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from kidata.errors import RecordError
from kidata.readers import Item
from kidata.readers.builder import Builder, Harness, Measured, typed
from kidata.readers.tabular import by_name, csv_rows

HARNESS = Harness(
    source="flashinfer", name="flashinfer_benchmark.py",
    repository="https://github.com/flashinfer-ai/flashinfer",
    family="flashinfer_benchmark",
    notes="benchmarks/flashinfer_benchmark.py: median and standard deviation of the routine's "
          "GPU time over num_iters timed iterations after dry runs (CUPTI when use_cupti, else "
          "CUDA events; CUDA graphs unless no_cuda_graph). tflops and tb_per_sec are derived "
          "from the median time and the routine's own FLOP and byte counts. Comparable only "
          "within one routine, case and GPU.")
MEASURES = ("median_time", "std_time", "tflops", "tb_per_sec")
# Columns that steer the run, not the workload (kept in sourceNative).
CONTROL = ("backend", "refcheck", "no_cuda_graph", "use_cupti", "allow_output_mismatch",
           "random_seed", "generate_repro_command", "repro_command", "routine")
GPU_RE = re.compile(r"gpu_name = '([^']+)'")
VERSION_RE = re.compile(r"FlashInfer version: ([0-9][^\s]*)")


def sidecar(file: str) -> dict[str, str]:
    """GPU and version from the benchmark's stdout kept beside the CSV (same name, .txt)."""
    if file == "<stdin>":
        return {}
    path = Path(file).with_suffix(".txt")
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read(4 * 1024 * 1024)
    except OSError:
        return {}
    out = {}
    if m := GPU_RE.search(text):
        out["gpu"] = m.group(1).replace("_", " ")
    if m := VERSION_RE.search(text):
        out["version"] = m.group(1)
    return out


def read(stream: IO[bytes], file: str, settings: dict[str, str] | None = None
         ) -> Iterator[Item | RecordError]:
    context = {**sidecar(file), **(settings or {})}
    builder = Builder(HARNESS, file, context)
    for row in csv_rows(stream, file):
        if isinstance(row, RecordError):
            yield row
            continue
        position, header, values, raw = row
        try:
            record = by_name(header, values, file, position)
            for column in ("routine", "backend", "median_time"):
                if not record.get(column):
                    raise RecordError(file, position, column, "expected a value, got an "
                                                              "empty field")
            params: dict[str, Any] = {}
            for name, value in record.items():
                if name in MEASURES or name in CONTROL or not value:
                    continue
                params[name] = typed(value)
            yield builder.item(Measured(
                kernel=record["routine"], implementation=record["backend"], workload=params,
                unit="ms", stats={"median": record["median_time"],
                                  "stddev": record.get("std_time") or None},
                extra=[("TFLOPS", "median", record.get("tflops") or None),
                       ("TB/s", "median", record.get("tb_per_sec") or None)],
                native={"metrics": {k: record[k] for k in MEASURES if record.get(k)},
                        "control": {k: record[k] for k in CONTROL
                                    if record.get(k) and k not in ("routine", "backend")}},
                timer="cupti" if record.get("use_cupti") == "True" else "cuda_events",
                labels={"case_tag": record["case_tag"]} if record.get("case_tag") else {},
            ), position, raw)
        except RecordError as err:
            yield err
