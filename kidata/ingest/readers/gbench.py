"""google/benchmark ``--benchmark_out_format=json`` and the github-action-benchmark store
``dev/bench/data.js`` (``window.BENCHMARK_DATA = {...}``, tool ``googlecpp``).

A google-benchmark ``real_time`` is the mean time per iteration over ``iterations`` iterations
(``manual_time`` benchmarks set it from CUDA events: the GPU time), in the row's ``time_unit``.
One run per ``run_name``: a single row is a ``mean``; repetitions (several ``iteration`` rows)
are raw samples (each a repetition's mean) summarised to median, mean, min, max, stddev and
their count; ``aggregate`` rows named ``mean``/``median``/``stddev``/``min``/``max`` give those
statistics directly (``cv``, ``BigO`` and ``RMS`` are not times: kept in ``sourceNative``, or
rejected when a run has nothing else). The name ``Family<F16, ArithmeticOp::ADD>/1048576/
manual_time`` gives the implementation (the family), the kernel (the op template argument, else
the family), the dtype and the arguments (``arg0``...). No GPU: ``--set gpu=...``.

data.js: every entry is a commit (id, timestamp) with ``benches`` ``{name, value, unit,
extra}``; each bench is one run observed at the entry's ``date`` (when the benchmark ran and
was stored; the commit timestamp is kept in sourceNative), its version the commit id.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from typing import IO, Any

from kidata.core.catalog import slugify
from kidata.errors import RecordError
from kidata.ingest.dtypes import normalise_dtype
from kidata.ingest.readers.base import Item, shown
from kidata.ingest.readers.builder import Builder, Harness, Measured, typed
from kidata.ingest.readers.tabular import raw_json, read_benchmarks_json, read_json

HARNESS = Harness(
    source="google-benchmark", name="google/benchmark", timer="steady_clock",
    repository="https://github.com/google/benchmark", family="google_benchmark",
    notes="real_time: wall time per iteration averaged over the run's iterations (manual_time "
          "benchmarks report their own timer, e.g. CUDA events); repetitions and aggregates "
          "summarise several such runs. Comparable only within one benchmark name and host.")
DATA_JS = Harness(
    source="github-action-benchmark", name="github-action-benchmark (googlecpp)",
    repository="https://github.com/benchmark-action/github-action-benchmark",
    family="google_benchmark", timer="steady_clock",
    notes="One google-benchmark value per benchmark and commit (real_time per iteration), "
          "stored by github-action-benchmark; comparable along the series of one benchmark "
          "name on one runner.")
AGGREGATES = {"mean": "mean", "median": "median", "stddev": "stddev", "min": "min",
              "max": "max"}
MODIFIER_RE = re.compile(r"^(manual_time|real_time|process_time|min_time:.*|min_warmup_time:.*|"
                         r"repeats:.*|iterations:.*|threads:\d+|[a-z_]+_mean|[a-z_]+_median)$")
KNOWN_DTYPES = {"bf16", "fp16", "fp32", "fp64", "tf32", "fp8_e4m3", "fp8_e5m2", "int8",
                "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}


def parse_name(name: str) -> tuple[str, str | None, dict[str, Any], list[str]]:
    """``(family, op, parameters, modifiers)`` of a benchmark name such as
    ``OpsComplexKernelBenchmark<F16, ArithmeticOp::ADD>/1048576/manual_time``."""
    head, _, rest = name.partition("/")
    family, targs = head, ""
    if "<" in head and head.endswith(">"):
        family, _, targs = head[:-1].partition("<")
    params: dict[str, Any] = {}
    op = None
    for i, targ in enumerate(a.strip() for a in targs.split(",") if a.strip()):
        if "::" in targ:
            kind, _, value = targ.rpartition("::")
            if op is None:
                op = value.lower()
            params[slugify(kind).replace("-", "_") or f"targ{i}"] = value.lower()
        elif normalise_dtype(targ) in KNOWN_DTYPES:
            params["dtype"] = normalise_dtype(targ)
        else:
            params[f"targ{i}"] = targ
    modifiers = []
    args = 0
    for part in rest.split("/") if rest else []:
        if MODIFIER_RE.match(part):
            modifiers.append(part)
        elif ":" in part:
            key, _, value = part.partition(":")
            params[key] = typed(value)
        else:
            params[f"arg{args}"] = typed(part)
            args += 1
    return family, op, params, modifiers


# A row's fields that must be strings when present.
TEXT_FIELDS = ("run_name", "run_type", "aggregate_name", "time_unit", "label")


def read(stream: IO[bytes], file: str, settings: dict[str, str] | None = None
         ) -> Iterator[Item | RecordError]:
    data = read_benchmarks_json(stream, file, "a google-benchmark")
    if isinstance(data, RecordError):
        yield data
        return
    context = data.get("context") if isinstance(data.get("context"), dict) else {}
    groups: dict[str, list[tuple[int, dict]]] = defaultdict(list)
    for index, row in enumerate(data["benchmarks"]):
        if not isinstance(row, dict) or not isinstance(row.get("name"), str):
            yield RecordError(file, f"benchmarks[{index}]", "name",
                              "expected an object with a name")
            continue
        # The fields that group, name and pick a row's time are strings when given (a list
        # there could not even be compared: fuzzed input crashed the load so).
        wrong = next((k for k in TEXT_FIELDS if row.get(k) is not None
                      and not isinstance(row[k], str)), None)
        if wrong is not None:
            yield RecordError(file, f"benchmarks[{index}]", wrong,
                              f"expected a string, got {shown(row[wrong])}")
            continue
        groups[row.get("run_name") or row["name"]].append((index, row))
    builder = Builder(HARNESS, file, settings)
    for run_name, rows in groups.items():
        position = f"benchmarks[{rows[0][0]}]"
        raw = raw_json([r for _, r in rows])
        try:
            yield builder.item(_measured(run_name, rows, context, file, position,
                                         settings or {}), position, raw)
        except RecordError as err:
            yield err


def _measured(run_name: str, rows: list[tuple[int, dict]], context: dict, file: str,
              position: str, settings: dict[str, str]) -> Measured:
    units = {r.get("time_unit") or "ns" for _, r in rows if "real_time" in r}  # null: ns too
    if len(units) > 1:
        raise RecordError(file, position, "time_unit",
                          f"the rows of {shown(run_name)} use several time units {sorted(units)}")
    stats: dict[str, Any] = {}
    samples: list[float] = []
    other: dict[str, Any] = {}
    for index, r in rows:
        kind = r.get("run_type", "iteration")
        if kind == "aggregate":
            agg = r.get("aggregate_name")
            if agg in AGGREGATES and "real_time" in r:
                stats[AGGREGATES[agg]] = r["real_time"]
            else:
                other[agg or f"benchmarks[{index}]"] = r
        elif "real_time" in r:
            samples.append(r["real_time"])
    if not stats and not samples:
        raise RecordError(file, position, "run_type",
                          f"{run_name!r} has no time google-benchmark names: aggregate rows "
                          f"without a time statistic ({', '.join(map(str, other)) or 'none'}); "
                          "a complexity fit (BigO, RMS) or an unnamed aggregate is not a time")
    for v in samples:
        if isinstance(v, bool) or not isinstance(v, int | float) or v <= 0:
            raise RecordError(file, position, "real_time", f"{shown(v)} is not a time")
    raw_samples = None
    if stats:
        pass  # the harness's own aggregates win; repetitions stay in sourceNative
    elif len(samples) == 1:
        stats = {"mean": samples[0]}
    else:
        raw_samples = [float(v) for v in samples]
    family, op, params, modifiers = parse_name(run_name)
    first = rows[0][1]
    return Measured(
        kernel=None if "kernel" in settings else op or family,
        implementation=None if "implementation" in settings else family, workload=params,
        unit=units.pop() if units else "ns", stats=stats, raw_samples=raw_samples,
        samples=len(samples) if stats and samples else None,  # repetitions behind aggregates
        observed_at=context.get("date") if isinstance(context.get("date"), str) else None,
        # The exact benchmark name: parsing it loses case, modifiers (threads:2) and spelling.
        identity=[run_name],
        native={"name": run_name, "modifiers": modifiers,
                "iterations": [r.get("iterations") for _, r in rows],
                "cpu_time": [r.get("cpu_time") for _, r in rows],
                "repetitions": samples if stats else None, "other": other or None,
                "label": first.get("label")},
        labels={"timing": modifiers[-1]} if modifiers else {},
    )


def _epoch_ms(value: Any, file: str, position: str) -> str | None:
    """``entry.date`` (ms since the epoch) as a UTC time; None when it is not a positive
    number, a :class:`RecordError` when it is one beyond any date (fuzzed input overflowed)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        from datetime import UTC, datetime

        try:
            return datetime.fromtimestamp(value / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        except (OverflowError, OSError, ValueError):
            raise RecordError(file, position, "date", f"{shown(value)} ms since the epoch is "
                              "not a date kidata can keep (years 1-9999)") from None
    return None


def read_data_js(stream: IO[bytes], file: str, settings: dict[str, str] | None = None
                 ) -> Iterator[Item | RecordError]:
    data = read_json(stream, file, prefix="window.BENCHMARK_DATA =")
    if isinstance(data, RecordError):
        yield data
        return
    if not isinstance(data, dict) or not isinstance(data.get("entries"), dict):
        yield RecordError(file, "document", "entries", "expected {entries: {suite: [...]}}")
        return
    builder = Builder(DATA_JS, file, settings)
    for suite, entries in data["entries"].items():
        if not isinstance(entries, list):
            yield RecordError(file, f"entries.{suite}", None, "expected a list of commits")
            continue
        for e_index, entry in enumerate(entries):
            commit = entry.get("commit") if isinstance(entry, dict) else None
            if not isinstance(commit, dict):
                yield RecordError(file, f"entries.{suite}[{e_index}]", "commit",
                                  "expected an object")
                continue
            benches, commit_id = entry.get("benches"), commit.get("id")
            if benches is not None and not isinstance(benches, list):
                yield RecordError(file, f"entries.{suite}[{e_index}]", "benches",
                                  f"expected a list, got {shown(benches)}")
                continue
            if commit_id is not None and not isinstance(commit_id, str | int):
                yield RecordError(file, f"entries.{suite}[{e_index}]", "commit.id",
                                  f"expected a string, got {shown(commit_id)}")
                continue
            for b_index, bench in enumerate(benches or []):
                position = f"entries.{suite}[{e_index}].benches[{b_index}]"
                try:
                    if not isinstance(bench, dict) or not isinstance(bench.get("name"), str):
                        raise RecordError(file, position, "name", "expected a named bench")
                    family, op, params, modifiers = parse_name(bench["name"])
                    s = settings or {}
                    yield builder.item(Measured(
                        kernel=None if "kernel" in s else op or family,
                        implementation=None if "implementation" in s else family,
                        workload=params,
                        unit=bench.get("unit"), stats={"mean": bench.get("value")},
                        # When the benchmark ran (entry.date, ms since the epoch); two
                        # commits can share a commit timestamp (an amend), never a run.
                        observed_at=_epoch_ms(entry.get("date"), file, position)
                        or commit.get("timestamp"),
                        identity=[suite, bench["name"], str(commit.get("id"))],
                        version=str(commit.get("id"))[:12] if commit.get("id") else None,
                        native={"name": bench["name"], "extra": bench.get("extra"),
                                "commit": commit.get("id"), "suite": suite,
                                "url": commit.get("url"),
                                "commitTimestamp": commit.get("timestamp")},
                        # The commit measured, as a run fact: `compare`/`gate` select
                        # it (commit=...) before the load's own commit.
                        labels={"suite": suite, **({"timing": modifiers[-1]}
                                                   if modifiers else {}),
                                **({"commit": str(commit["id"])} if commit.get("id") else {})},
                    ), position, raw_json(bench))
                except RecordError as err:
                    yield err
