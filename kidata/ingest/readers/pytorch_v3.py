"""PyTorch OSS benchmark database records, schema v3 (``benchmark``, ``model``, ``metric``,
optional ``runners``, ``timestamp``, ``repo``, ``head_sha`` added by the uploader).

A file is one record, a JSON array of records, JSON Lines, or JSON Lines whose lines are
themselves arrays (the mix ``json-each-row.json`` shows). Each record is one run: the kernel is
``model.name``, the implementation ``model.backend`` (else ``--set implementation=``), the
workload ``benchmark.name`` plus ``benchmark.extra_info`` and ``model.type``. The unit comes
from ``metric.name`` (:data:`METRICS`); a metric whose unit the name does not imply is
rejected. ``benchmark_values`` are raw samples: median, mean, min, max, stddev and the count
are computed and the values kept in ``sourceNative.samples``. ``0.0`` is how the uploader
writes a failure: rejected, never a value. The GPU is ``runners[0].gpu_info`` or
``runners[0].name``, else ``--set gpu=``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import IO, Any

import orjson

from kidata.errors import RecordError
from kidata.ingest.readers.base import Item, shown
from kidata.ingest.readers.builder import Builder, Harness, Measured
from kidata.ingest.readers.tabular import raw_json, read_text

HARNESS = Harness(
    source="pytorch-v3", name="PyTorch OSS benchmark database (v3)",
    repository="https://github.com/pytorch/test-infra",
    family="pytorch_benchmark_v3",
    notes="Records uploaded by PyTorch's benchmark jobs: one metric per record, its "
          "benchmark_values the job's raw samples (summarised here). What a value measures is "
          "set by the job that wrote it (benchmark.name, metric.name). Comparable only within "
          "one benchmark, model, metric and device.")
# metric.name -> unit (the unit the name implies). Checked in order; first match wins.
METRICS: tuple[tuple[re.Pattern, str], ...] = (
    (re.compile(r"\(ms\)$|_ms$|^latency$|^abs_latency$|_latency$|^latency_"), "ms"),
    (re.compile(r"\(us\)$|_us$"), "us"),
    (re.compile(r"\(s\)$|_s$|^compilation_latency$"), "s"),
    (re.compile(r"\(mb\)$|_mb$|memory"), "MB"),
    (re.compile(r"instruction_count$"), "count"),
    (re.compile(r"^speedup$|_speedup$"), "x"),
)
# metric.name -> kernel pass / statistic hints.
AGGREGATIONS = {"p50": "median", "median": "median", "mean": "mean", "avg": "mean",
                "min": "min", "max": "max"}


def unit_for(metric: str) -> str | None:
    name = metric.strip().lower()
    for pattern, unit in METRICS:
        if pattern.search(name):
            return unit
    return None


def records(text: str, file: str) -> Iterator[tuple[str, Any] | RecordError]:
    """``(position, record)`` for every record: a whole-file JSON value (an object or an array)
    or JSON Lines (each line an object or an array of objects)."""
    stripped = text.strip()
    try:
        whole = orjson.loads(stripped)
    except orjson.JSONDecodeError:
        whole = None
    else:
        if isinstance(whole, list):
            for i, rec in enumerate(whole):
                yield f"index {i}", rec
        else:
            yield "document", whole
        return
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            yield RecordError(file, f"line {number}", None, f"invalid JSON: {exc}")
            continue
        if isinstance(value, list):
            for i, rec in enumerate(value):
                yield f"line {number}[{i}]", rec
        else:
            yield f"line {number}", value


def _timestamp(value: Any) -> str | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        seconds = value / 1000 if value > 1e11 else value
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def read(stream: IO[bytes], file: str, settings: dict[str, str] | None = None
         ) -> Iterator[Item | RecordError]:
    text = read_text(stream, file)
    if isinstance(text, RecordError):
        yield text
        return
    builder = Builder(HARNESS, file, settings)
    for found in records(text, file):
        if isinstance(found, RecordError):
            yield found
            continue
        position, rec = found
        raw = raw_json(rec)
        try:
            yield builder.item(_measured(rec, file, position), position, raw)
        except RecordError as err:
            yield err


def _values(values: Any, fail) -> list:
    """``metric.benchmark_values``: a non-empty list of measurements (numbers > 0)."""
    if not isinstance(values, list) or not values:
        raise fail("metric.benchmark_values", "expected a non-empty list of numbers")
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, int | float) or not v > 0:
            raise fail(f"metric.benchmark_values[{i}]",
                       f"{shown(v)} is not a measurement (the uploader writes 0.0 for a failed "
                       "benchmark)")
    return values


def _parameters(bench: dict, model: dict) -> dict[str, Any]:
    """The workload: the benchmark's name, the model's type, the mode and dtype, then the
    benchmark's scalar ``extra_info`` (its description left out)."""
    info = bench.get("extra_info") if isinstance(bench.get("extra_info"), dict) else {}
    params: dict[str, Any] = {"benchmark": bench.get("name")}
    if isinstance(model.get("type"), str):
        params["model_type"] = model["type"]
    if isinstance(bench.get("mode"), str):
        params["mode"] = bench["mode"]
    if isinstance(bench.get("dtype"), str):
        params["dtype"] = bench["dtype"]
    for k, v in info.items():
        if isinstance(v, str | int | float | bool) and k != "description":
            params[k] = v
    return params


def _measured(rec: Any, file: str, position: str) -> Measured:
    """A v3 record as a :class:`Measured` row: one metric's values (raw samples, or one value
    that is itself a summary), the model as kernel and its backend as implementation."""
    def fail(field: str | None, message: str) -> RecordError:
        return RecordError(file, position, field, message)

    if not isinstance(rec, dict):
        raise fail(None, "expected a v3 record (an object)")
    bench, model, metric = (rec.get(k) for k in ("benchmark", "model", "metric"))
    for key, value in (("benchmark", bench), ("model", model), ("metric", metric)):
        if not isinstance(value, dict):
            raise fail(key, "expected an object")
    name = metric.get("name")
    if not isinstance(name, str) or not name.strip():
        raise fail("metric.name", "expected a metric name")
    unit = unit_for(name)
    if unit is None:
        raise fail("metric.name", f"cannot tell the unit of metric {name!r} from its name; "
                                  "load it with --set unit=... if it is one of ms, us, s, MB")
    values = _values(metric.get("benchmark_values"), fail)
    params = _parameters(bench, model)
    runners = rec.get("runners")
    gpu = None
    if isinstance(runners, list) and runners and isinstance(runners[0], dict):
        gpu = runners[0].get("gpu_info") or runners[0].get("name")
    aggregation = metric.get("extra_info", {}).get("aggregation") \
        if isinstance(metric.get("extra_info"), dict) else None
    stats: dict[str, Any] = {}
    raw_samples: list[float] | None = [float(v) for v in values]
    if len(values) == 1 and aggregation in AGGREGATIONS:
        stats = {AGGREGATIONS[aggregation]: values[0]}  # one value that is itself a summary
        raw_samples = None
    model_name = model.get("name")
    return Measured(
        kernel=model_name if isinstance(model_name, str) else None,
        implementation=model.get("backend") if isinstance(model.get("backend"), str) else None,
        workload=params, unit=unit, stats=stats, raw_samples=raw_samples,
        pass_=(metric.get("extra_info") or {}).get("method")
        if isinstance(metric.get("extra_info"), dict) else None,
        gpu=gpu, observed_at=_timestamp(rec.get("timestamp")),
        version=rec.get("head_sha") if isinstance(rec.get("head_sha"), str) else None,
        identity=[name],
        native={"metric": name, "repo": rec.get("repo"), "runners": runners,
                "targetValue": metric.get("target_value")},
        labels={"metric_name": name},
    )
