"""``triton.testing.perf_report`` ``save_path`` CSV: the x columns, then one column per
provider (``M,N,K,cuBLAS,Triton``).

Each (row, provider) cell is one run: the provider is the implementation, the x columns the
workload, the file's name (the plot name) the kernel unless ``--set kernel=...``. The file has
no unit, GPU, dtype, time or statistic: ``--set unit=...`` (the plot's ylabel: ms, TFLOPS,
GB/s) and ``--set gpu=...`` are required, and the value is the median (the first of
``do_bench``'s quantiles 0.5/0.2/0.8, the only one perf_report keeps). A throughput unit makes
a ``throughput`` or ``bandwidth`` run, never a latency. The x columns are the leading columns
whose values are all whole numbers (``--set x_columns=M,N,K`` names them otherwise). A row
repeated with the same x values is another measurement of the same case: its occurrence number
is part of its identity.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from pathlib import PurePath
from typing import IO

from kidata.errors import RecordError
from kidata.readers import Item
from kidata.readers.builder import Builder, Harness, Measured, typed
from kidata.readers.tabular import csv_rows

HARNESS = Harness(
    source="triton-perf-report", name="triton.testing.perf_report",
    repository="https://github.com/triton-lang/triton", family="triton_perf_report",
    timer="cuda_events",
    notes="triton.testing.do_bench: median of repeated timed calls (CUDA events, L2 flushed "
          "between calls); perf_report writes the median of each provider converted by the "
          "benchmark's own function (ms, or TFLOPS / GB/s from the benchmark's FLOP and byte "
          "counts). Comparable only within one benchmark script, x values and GPU.")


def _whole(text: str) -> bool:
    try:
        value = float(text)
    except ValueError:
        return False
    return math.isfinite(value) and value.is_integer()


def read(stream: IO[bytes], file: str, settings: dict[str, str] | None = None
         ) -> Iterator[Item | RecordError]:
    settings = dict(settings or {})
    rows = []
    for row in csv_rows(stream, file):
        if isinstance(row, RecordError):
            yield row
        else:
            rows.append(row)
    if not rows:
        return
    header = rows[0][1]
    if "x_columns" in settings:
        wanted = [c.strip() for c in settings.pop("x_columns").split(",") if c.strip()]
        missing = [c for c in wanted if c not in header]
        if missing:
            yield RecordError(file, "header", missing[0],
                              f"--set x_columns names {missing[0]!r}, not a column of the file "
                              f"({', '.join(header)})")
            return
        x_columns = wanted
    else:
        x_columns = []
        for i, name in enumerate(header[:-1]):
            if all(len(r[2]) > i and _whole(r[2][i]) for r in rows):
                x_columns.append(name)
            else:
                break
    providers = [h for h in header if h not in x_columns]
    if not x_columns or not providers:
        yield RecordError(file, "header", None,
                          "cannot tell the x columns from the providers: expected leading "
                          "columns of whole numbers then one column per provider; name them "
                          "with --set x_columns=M,N,K")
        return
    kernel = settings.get("kernel") or (PurePath(file).name.rsplit(".", 1)[0]
                                        if file != "<stdin>" else None)
    builder = Builder(HARNESS, file, settings)
    seen: Counter = Counter()
    for position, _, values, raw in rows:
        if len(values) != len(header):
            yield RecordError(file, position, None,
                              f"{len(values)} fields, the header has {len(header)}")
            continue
        record = dict(zip(header, (v.strip() for v in values), strict=True))
        params = {x: typed(record[x]) for x in x_columns}
        key = tuple(record[x] for x in x_columns)
        seen[key] += 1
        for provider in providers:
            try:
                if not record[provider]:
                    raise RecordError(file, position, provider, "empty value")
                yield builder.item(Measured(
                    kernel=kernel, implementation=provider, workload=params, unit=None,
                    stats={"median": record[provider]},
                    identity=[f"occurrence{seen[key]}"] if seen[key] > 1 else [],
                    native={"column": provider, "text": record[provider],
                            "occurrence": seen[key]},
                ), f"{position}, column {provider}", raw)
            except RecordError as err:
                yield err
