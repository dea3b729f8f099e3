"""NVIDIA nvbench ``--json`` (file version 1.x) and ``--csv`` output.

Each measured state (benchmark x axis values x device) is one run: the kernel is the
benchmark's name, the workload its axis values, the GPU the state's device. Times are the
*cold* GPU measurements (CUDA events around each isolated launch), in seconds, as strings in
JSON: ``mean`` always, ``stdev/relative`` (stddev / mean, a fraction) always, and ``median``,
``q1`` (p25), ``q3`` (p75), ``min``, ``max``, ``stdev/absolute`` in newer nvbench; the sample
count is ``nv/cold/sample_size``. The median is primary where present, else the mean.
Global-memory bandwidth (bytes/s, from the benchmark's declared bytes) rides along as metric
``bandwidth``. Skipped states are rejected with nvbench's skip reason (they measured nothing).
The implementation is not a field: ``--set implementation=...``, else, in JSON, the benchmark
executable's name (``meta.argv[0]``). No timestamp: ``--set observed_at=...``.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import PurePath
from typing import IO, Any

from kidata.errors import RecordError
from kidata.ingest.dtypes import normalise_dtype
from kidata.ingest.readers.base import Item, shown
from kidata.ingest.readers.builder import Builder, Harness, Measured, decimal_number, typed
from kidata.ingest.readers.tabular import csv_rows, raw_json, read_benchmarks_json

HARNESS = Harness(
    source="nvbench", name="NVIDIA nvbench", repository="https://github.com/NVIDIA/nvbench",
    family="nvbench_cold", timer="cuda_events",
    notes="Cold measurements: each sample is one isolated launch timed with CUDA events after "
          "the L2 cache is flushed; nvbench samples until the relative stddev falls below "
          "max_noise or the timeout. Batch (hot) times are kept in sourceNative only. "
          "Comparable only within one benchmark, axis values and GPU.")
# nvbench summary tag -> our statistic (times in seconds).
TIME_TAGS = {
    "nv/cold/time/gpu/mean": "mean",
    "nv/cold/time/gpu/median": "median",
    "nv/cold/time/gpu/q1": "p25",
    "nv/cold/time/gpu/q3": "p75",
    "nv/cold/time/gpu/min": "min",
    "nv/cold/time/gpu/max": "max",
    "nv/cold/time/gpu/stdev/absolute": "stddev",
}
RELATIVE_TAG = "nv/cold/time/gpu/stdev/relative"
SAMPLES_TAG = "nv/cold/sample_size"
BANDWIDTH_TAG = "nv/cold/bw/global/bytes_per_second"


def _summary_value(summary: dict) -> Any:
    """The summary's ``value`` datum; None when it has none (or its ``data`` is not a list:
    iterating a number of fuzzed input crashed the load)."""
    data = summary.get("data")
    for datum in data if isinstance(data, list) else []:
        if isinstance(datum, dict) and datum.get("name") == "value":
            return datum.get("value")
    return None


def _axis_value(axis: dict) -> Any:
    value = axis.get("value")
    if axis.get("type") == "type" or (axis.get("type") == "string" and isinstance(value, str)
                                      and normalise_dtype(value) != value.lower()):
        return normalise_dtype(str(value))
    if isinstance(value, str):
        return typed(value)
    return value


def _device_name(devices: dict, device: Any) -> Any:
    return devices.get(device) if isinstance(device, int | str) else None


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _dig(value: Any, *keys: str) -> Any:
    """``value[k1][k2]...``, or None where a step is missing or not an object."""
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _named(state: dict, key: str, name: str, file: str, position: str) -> list[dict]:
    """The objects listed under ``key`` of a state, each with a text ``name`` (it becomes a
    key: a number or a list there crashed the load when stored, in fuzzed input); a
    :class:`RecordError` naming the first without one."""
    value = state.get(key)
    if value is not None and not isinstance(value, list):
        raise RecordError(file, position, key, f"expected a list, got {shown(value)}")
    listed = [item for item in value or [] if isinstance(item, dict)]
    for i, item in enumerate(listed):
        if not isinstance(item.get(name), str):
            raise RecordError(file, position, f"{key}[{i}].{name}",
                              f"expected a string, got {shown(item.get(name))}")
    return listed


def read_json_output(stream: IO[bytes], file: str, settings: dict[str, str] | None = None
                     ) -> Iterator[Item | RecordError]:
    data = read_benchmarks_json(stream, file, "an nvbench")
    if isinstance(data, RecordError):
        yield data
        return
    meta = data.get("meta") if isinstance(data.get("meta"), dict) else {}
    argv = meta.get("argv") if isinstance(meta.get("argv"), list) else []
    executable = (settings or {}).get("implementation") or (
        PurePath(str(argv[0])).name if argv else None)
    version = _dig(meta, "version", "nvbench", "string")
    # Devices name the GPU of each state by id; one that cannot (an id that is not a number
    # or text, a list of something else: fuzzed input crashed here) names none.
    devices = {d["id"]: d.get("name") for d in _list(data.get("devices"))
               if isinstance(d, dict) and isinstance(d.get("id"), int | str)}
    builder = Builder(HARNESS, file, settings)
    for b_index, bench in enumerate(data["benchmarks"]):
        if not isinstance(bench, dict):
            yield RecordError(file, f"benchmarks[{b_index}]", None, "expected an object")
            continue
        states = bench.get("states")
        if states is not None and not isinstance(states, list):
            yield RecordError(file, f"benchmarks[{b_index}]", "states",
                              f"expected a list, got {shown(states)}")
            continue
        for s_index, state in enumerate(states or []):
            position = f"benchmarks[{b_index}].states[{s_index}]"
            try:
                measured = _measured(bench, state, file, position, executable, devices,
                                     version)
                yield builder.item(measured, position, raw_json(state))
            except (RecordError, ValueError) as err:
                yield err if isinstance(err, RecordError) else RecordError(
                    file, position, None, str(err))


def _measured(bench: dict, state: Any, file: str, position: str, executable: str | None,
              devices: dict, version: Any) -> Measured:
    """What one state of a benchmark measured; a :class:`RecordError` for a state skipped
    by nvbench or one that cannot be read."""
    if not isinstance(state, dict):
        raise RecordError(file, position, None, "expected an object")
    if state.get("is_skipped"):
        reason = state.get("skip_reason") or "no reason given"
        reason = reason if isinstance(reason, str) else shown(reason)
        raise RecordError(file, position, "is_skipped",
                          f"skipped by nvbench: {reason} (nothing was measured)")
    summaries = {s["tag"]: _summary_value(s)
                 for s in _named(state, "summaries", "tag", file, position)}
    params = {a["name"]: _axis_value(a)
              for a in _named(state, "axis_values", "name", file, position) if a["name"]}
    bandwidth = summaries.get(BANDWIDTH_TAG)
    return Measured(
        kernel=bench.get("name"), implementation=executable, workload=params,
        unit="s", stats=_stats(summaries, file, position),
        gpu=_device_name(devices, state.get("device")),
        samples=_sample_count(summaries.get(SAMPLES_TAG), file, position),
        extra=[("B/s", "mean", bandwidth)] if bandwidth is not None else [],
        native={"state": state.get("name"), "summaries": summaries, "nvbenchVersion": version},
    )


def _stats(summaries: dict, file: str, position: str) -> dict[str, Any]:
    """The GPU time statistics of a state's summaries; the standard deviation from the
    relative one when only that is given."""
    stats = {stat: summaries[tag] for tag, stat in TIME_TAGS.items()
             if summaries.get(tag) is not None}
    if "mean" not in stats:
        raise RecordError(file, position, "summaries",
                          f"no {list(TIME_TAGS)[0]} summary: not a GPU time")
    if "stddev" not in stats and summaries.get(RELATIVE_TAG) is not None:
        def fail(field: str, message: str) -> RecordError:
            return RecordError(file, position, field, message)

        # Both checked: Decimal(str(...)) of a list or a word raised decimal.InvalidOperation
        # past the reader's handler (fuzzed input).
        stats["stddev"] = str(
            decimal_number(summaries[RELATIVE_TAG], f"summaries.{RELATIVE_TAG}", fail)
            * decimal_number(stats["mean"], "summaries.nv/cold/time/gpu/mean", fail))
    return stats


def _sample_count(samples: Any, file: str, position: str) -> int | None:
    """The state's sample count (int() of a list ended the load: fuzzed input)."""
    if samples is None:
        return None
    try:
        if isinstance(samples, bool) or not isinstance(samples, int | float | str):
            raise ValueError
        return int(samples)
    except (ValueError, OverflowError):
        raise RecordError(file, position, f"summaries.{SAMPLES_TAG}",
                          f"expected a number of samples, got {shown(samples)}") from None


# CSV: the column that holds the measurements (its name as nvbench writes it).
CSV_TIME = "GPU Time (sec)"


def read_csv_output(stream: IO[bytes], file: str, settings: dict[str, str] | None = None
                    ) -> Iterator[Item | RecordError]:
    builder = Builder(HARNESS, file, settings)
    for row in csv_rows(stream, file):
        if isinstance(row, RecordError):
            yield row
            continue
        position, header, values, raw = row
        try:
            if len(values) != len(header):
                raise RecordError(file, position, None,
                                  f"{len(values)} fields, the header has {len(header)}")
            # The header repeats Samples and Noise: each belongs to the column before it.
            cells = list(zip(header, (v.strip() for v in values), strict=True))
            names = [h for h, _ in cells]
            if CSV_TIME not in names or "Skipped" not in names:
                raise RecordError(file, position, CSV_TIME,
                                  f"expected nvbench CSV columns {CSV_TIME!r} and 'Skipped'")
            record = {h: v for h, v in cells if h not in ("Samples", "Noise")}
            if record.get("Skipped", "No") != "No":
                raise RecordError(file, position, "Skipped", "skipped by nvbench (nothing "
                                                             "was measured)")
            t = names.index(CSV_TIME)
            noise = cells[t + 1][1] if t + 1 < len(cells) and cells[t + 1][0] == "Noise" \
                else None
            samples = next((v for h, v in cells if h == "Samples"), None)  # the cold one
            stats: dict[str, Any] = {"mean": record[CSV_TIME]}
            if noise:
                stats["stddev"] = str(Decimal(noise) * Decimal(record[CSV_TIME]))
            # Axis columns lie between 'Device Name' and 'Skipped'; '(pow2)' ones repeat the
            # next column as 2^k.
            first, last = names.index("Device Name") + 1, names.index("Skipped")
            params = {h: typed(v) for h, v in cells[first:last]
                      if v and not h.endswith("(pow2)")}
            bandwidth = record.get("GlobalMem BW (bytes/sec)")
            yield builder.item(Measured(
                kernel=record.get("Benchmark"), implementation=None, workload=params,
                unit="s", stats=stats, gpu=record.get("Device Name"),
                samples=int(samples) if samples else None,
                extra=[("B/s", "mean", bandwidth)] if bandwidth else [],
                native={"columns": {h: v for h, v in cells if v}},
            ), position, raw)
        except (RecordError, ValueError, ArithmeticError) as err:
            yield err if isinstance(err, RecordError) else RecordError(
                file, position, None, f"not a number: {err}")

