"""PyTorch ``benchmarks/dynamo`` ``--performance`` CSV
(``dev,name,batch_size,speedup,abs_latency,compilation_latency,compression_ratio``).

Rows are whole models, not kernels: the kernel is the model name, the workload its batch size.
``abs_latency`` is the compiled model's median ms per iteration: a latency run of the compiler
(``inductor`` from a file name such as ``..._inductor_...``, else ``--set implementation=``).
``speedup`` = eager / compiled median is kept as a published claim on that run (the eager
latency is not in the file, so no eager run is made up). ``compilation_latency`` (s) and
``compression_ratio`` (memory) stay in ``sourceNative``. GPU, dtype and mode are only in the
file name or the CI job: ``--set gpu=... --set dtype=...``. A speedup or latency of 0 means the
model failed: rejected.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import PurePath
from typing import IO

from kidata.errors import RecordError
from kidata.readers import Item
from kidata.readers.builder import Builder, Harness, Measured, typed
from kidata.readers.tabular import by_name, csv_rows

HARNESS = Harness(
    source="pytorch-dynamo", name="PyTorch benchmarks/dynamo --performance",
    repository="https://github.com/pytorch/pytorch", family="pytorch_dynamo_performance",
    timer="wall_clock",
    notes="benchmarks/dynamo common.py speedup_experiment: eager and compiled model iterations "
          "interleaved; speedup = median eager / median compiled time; abs_latency is the "
          "compiled model's median ms per iteration. Comparable only within one model, batch "
          "size, mode, dtype and GPU.")
COMPILERS = ("inductor", "aot_eager", "cudagraphs", "aot_inductor", "eager")


def read(stream: IO[bytes], file: str, settings: dict[str, str] | None = None
         ) -> Iterator[Item | RecordError]:
    stem = PurePath(file).name.lower()
    compiler = (settings or {}).get("implementation") or next(
        (c for c in COMPILERS if re.search(rf"(^|_){c}(_|\.|$)", stem)), None)
    builder = Builder(HARNESS, file, settings)
    for row in csv_rows(stream, file):
        if isinstance(row, RecordError):
            yield row
            continue
        position, header, values, raw = row
        try:
            record = by_name(header, values, file, position)
            speedup = record.get("speedup", "")
            try:
                if float(speedup) <= 0:
                    raise RecordError(file, position, "speedup",
                                      f"{speedup!r}: the model failed (the harness writes 0)")
            except ValueError:
                raise RecordError(file, position, "speedup",
                                  f"expected a number, got {speedup!r}") from None
            yield builder.item(Measured(
                kernel=record.get("name"), implementation=compiler,
                workload={"batch_size": typed(record.get("batch_size", ""))},
                unit="ms", stats={"median": record.get("abs_latency")},
                native={"dev": record.get("dev"), "row": record},
                published=[{"quantity": "speedup", "value": float(speedup),
                            "definition": "median eager time / median compiled time",
                            "resolution": 0.0001}],
                labels={"device": record["dev"]} if record.get("dev") else {},
            ), position, raw)
        except RecordError as err:
            yield err
