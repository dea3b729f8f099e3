"""trainkernel's published results table (seed 003).

Each ``held_out`` row becomes two runs on its GPU and workload, ``trainkernel`` and
``inductor``; the row's published ``ratio`` (trainkernel_us / inductor_us, a latency ratio)
rides on the trainkernel run as a published claim (table ``published``), never as a
measurement. Each ``h100_calibration`` row becomes a ``trainkernel`` run on the H100 with its
schedule as the variant. Latencies are µs per training step (forward, loss, backward, SGD
update), published to 0.01 µs, stored in ns with a 10 ns resolution.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import IO, Any

import orjson

from kidata.core.catalog import lookup_gpu, slugify
from kidata.core.digest import canonical_json
from kidata.core.load_report import UnknownGpu
from kidata.errors import RecordError
from kidata.ingest.documents import document, environment_document
from kidata.ingest.readers.base import Item, raw_text, shown
from kidata.ingest.readers.builder import run_name_of

SOURCE = "trainkernel-results"
KERNEL = "train_step"
PASS = "step"
REPOSITORY = "https://github.com/arpjw/trainkernel"
US_RESOLUTION = 0.01
RATIO_RESOLUTION = 0.001
CALIBRATION_GPU = "H100 SXM 80 GB"
MAX_BYTES = 64 * 1024 * 1024


def _protocol(family: str, table: str, notes: str) -> dict[str, Any]:
    return document(
        "BenchmarkProtocol", f"trainkernel-{table.replace('_', '-')}",
        f"trainkernel results · {table}",
        {
            "harness": {"name": "trainkernel benchmark", "repository": REPOSITORY},
            "measurement": {"unit": "microseconds per training step"},
            "comparability": {"family": family, "notes": notes},
        },
    )


HELD_OUT_PROTOCOL = _protocol(
    "trainkernel_held_out", "held_out",
    "Latency of one complete training step (forward, loss, backward, SGD update) of the "
    "trainkernel kernel and of torch.compile (Inductor), measured side by side per GPU and "
    "workload. Comparable only within one GPU and workload.")
CALIBRATION_PROTOCOL = _protocol(
    "trainkernel_h100_calibration", "h100_calibration",
    "Latency of one training step under several trainkernel kernel schedules on the H100, "
    "from a separate calibration run. Comparable only within this table.")


def _number(row: dict, key: str, file: str, position: str) -> float:
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RecordError(file, position, key, f"expected a number, got {shown(value)}")
    if not math.isfinite(value) or value <= 0:
        raise RecordError(file, position, key, f"expected a finite number > 0, got {shown(value)}")
    return float(value)


def _is_shape(shape: Any) -> bool:
    """A shape as kept: a list of integers (of 64 bits: orjson reads wider ones as floats)."""
    return isinstance(shape, list) and all(isinstance(s, int) and not isinstance(s, bool)
                                           for s in shape)


def _identity(readable: str, **values: str) -> tuple[str, str]:
    """``(run id, externalId)`` of a run: the externalId is the canonical JSON of its exact
    values (table, GPU key, workload, implementation or schedule), the run id a readable slug
    prefix and a hash of it (docs/formats.md, "Identity"): workload names or schedules that
    differ only in case or separators are different runs."""
    external_id = canonical_json({"source": SOURCE, **values})
    return run_name_of(readable, external_id), external_id


def _raw(row: Any) -> str | None:
    """A row's text for ``rejects.raw``; None for one nested too deep to write again."""
    try:
        return raw_text(orjson.dumps(row))
    except TypeError:
        return None


def _url(sources: dict, key: str, file: str, position: str) -> str | None:
    """The ``sources`` link of ``key`` (a GPU family, or ``h100_calibration``): a string, or
    None when the table gives none. Anything else rejects the record it would be copied into
    (the run's ``sourceNative.url``), naming the field: a value nested deep enough could not
    even be stored (fuzzer seed 731099)."""
    value = sources.get(key)
    if value is None or isinstance(value, str):
        return value
    raise RecordError(file, position, f"sources.{key}",
                      f"expected a string (the table's link), got {shown(value)}")


def _text(row: dict, key: str, file: str, position: str) -> str:
    value = row.get(key)
    if not isinstance(value, str) or not value.strip():
        raise RecordError(file, position, key, f"expected a non-empty string, got {shown(value)}")
    return value


def _run(run_id: str, title: str, external_id: str, table: str, us: float, labels: dict,
         protocol: dict, environment: dict, workload: dict, url: str | None,
         published: list | None = None) -> dict[str, Any]:
    from kidata.core.digest import digest

    native: dict[str, Any] = {
        "source": SOURCE,
        "table": table,
        "metrics": {"latency_us": us},
        "benchmark": f"{KERNEL}/{PASS}",
        "externalId": external_id,
    }
    if url:
        native["url"] = url
    if published:
        native["published"] = published
    spec = {
        "status": "passed",
        "timing": {
            "latencyNs": {"median": round(us * 1000, 6)},
            "primaryStatistic": "median",
            "resolutionNs": US_RESOLUTION * 1000,
        },
        "sourceNative": native,
        "protocolDigest": digest(protocol),
        "workloadDigest": digest(workload),
        "environmentDigest": digest(environment),
    }
    return document("BenchmarkRun", run_id, title, spec, labels)


def read(stream: IO[bytes], file: str) -> Iterator[Item | RecordError]:
    """The runs of a trainkernel results table: two per ``held_out`` row (trainkernel and
    Inductor, the ratio a published claim), one per ``h100_calibration`` row; a bad row is
    its own reject, a bad table one reject for the file."""
    table = _table(stream, file)
    if isinstance(table, RecordError):
        yield table
        return
    sources = table.get("sources") if isinstance(table.get("sources"), dict) else {}
    docs = _Documents()
    # Shapes first, so a calibration row names the same workload document as held_out.
    for row in table["held_out"]:
        if isinstance(row, dict) and isinstance(row.get("workload"), str):
            if _is_shape(row.get("shape")):  # a bad shape is its row's reject, nobody's else
                docs.workload(row["workload"], row["shape"])
    yield from _held_out(table["held_out"], docs, sources, file)
    calibration = table.get("h100_calibration")
    if calibration is None:
        return
    if not isinstance(calibration, list):
        yield RecordError(file, "document", "h100_calibration", "expected a list")
        return
    yield from _calibration(calibration, docs, sources, file)


def _table(stream: IO[bytes], file: str) -> dict | RecordError:
    """The file's table (at most 64 MiB of JSON: an object with a ``held_out`` list, in
    microseconds), or the one reject that says why not."""
    data = stream.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        return RecordError(file, "document", None, "trainkernel table larger than 64 MiB")
    try:
        table = orjson.loads(data.removeprefix(b"\xef\xbb\xbf"))
    except orjson.JSONDecodeError as exc:
        return RecordError(file, "document", None, f"invalid JSON: {exc}")
    if not isinstance(table, dict) or not isinstance(table.get("held_out"), list):
        return RecordError(file, "document", "held_out",
                           "expected a trainkernel results object with a 'held_out' list")
    units = table.get("units")
    if not isinstance(units, str) or "microsecond" not in units:
        return RecordError(file, "document", "units",
                           f"expected microseconds per training step, got {shown(units)}")
    return table


class _Documents:
    """A file's shared Workload and Environment documents, built once each."""

    def __init__(self) -> None:
        self.workloads: dict[str, dict] = {}
        self.envs: dict[str, dict] = {}

    def workload(self, name: str, shape: Any) -> dict:
        """The workload named ``name``; built again once when a row first gives its shape."""
        workloads = self.workloads
        if name not in workloads or (shape is not None and "shape" not in workloads[name]["spec"]):
            spec: dict[str, Any] = {"kernel": KERNEL, "name": name}
            if shape is not None:
                spec["shape"] = shape
            workloads[name] = document("Workload", f"trainkernel-{slugify(name)}", name, spec)
        return workloads[name]

    def environment(self, gpu_name: str) -> tuple[dict, Any]:
        """The environment of the GPU named ``gpu_name``, and that GPU."""
        gpu = lookup_gpu(gpu_name)
        if gpu.key not in self.envs:
            self.envs[gpu.key] = environment_document(
                gpu, f"trainkernel-{gpu.key}", f"trainkernel host · {gpu_name}")
        return self.envs[gpu.key], gpu


def _held_out_row(row: Any, file: str, position: str
                  ) -> tuple[str, str, Any, dict[str, float], float]:
    """A ``held_out`` row's GPU name, workload, shape, latency by implementation and ratio,
    checked; raises :class:`RecordError`."""
    if not isinstance(row, dict):
        raise RecordError(file, position, None, "expected an object")
    gpu_name = _text(row, "gpu", file, position)
    name = _text(row, "workload", file, position)
    shape = row.get("shape")
    if shape is not None and not _is_shape(shape):
        raise RecordError(file, position, "shape",
                          f"expected a list of integers, got {shown(shape)}")
    times = {impl: _number(row, f"{impl}_us", file, position)
             for impl in ("trainkernel", "inductor")}
    return gpu_name, name, shape, times, _number(row, "ratio", file, position)


def _held_out(rows: list, docs: _Documents, sources: dict, file: str
              ) -> Iterator[Item | RecordError]:
    """Two runs per ``held_out`` row, trainkernel's claiming its ratio to Inductor's."""
    for index, row in enumerate(rows):
        position = f"held_out[{index}]"
        raw = _raw(row)
        try:
            gpu_name, name, shape, times, ratio = _held_out_row(row, file, position)
            env, gpu = docs.environment(gpu_name)
            url = _url(sources, gpu.key.split("-")[0], file, position)
        except RecordError as err:
            yield err
            continue
        warnings = [] if gpu.known else [UnknownGpu(f"{file}, {position}, field gpu",
                                                    gpu_name, gpu.key)]
        workload = docs.workload(name, shape)
        ids = {impl: _identity(f"trainkernel-held-out-{gpu.key}-{slugify(name)}-{impl}",
                               table="held_out", gpu=gpu.key, workload=name,
                               implementation=impl) for impl in times}
        for impl, us in times.items():
            published = None
            if impl == "trainkernel":
                published = [{"quantity": "latency_ratio", "value": ratio,
                              "resolution": RATIO_RESOLUTION,
                              "definition": "trainkernel_us / inductor_us",
                              "baselineRun": ids["inductor"][0]}]
            run = _run(ids[impl][0], f"Training step · {impl} · {name} · {gpu_name}",
                       ids[impl][1], "held_out", us,
                       {"implementation": impl, "workload": name, "gpu_name": gpu_name},
                       HELD_OUT_PROTOCOL, env, workload, url, published)
            yield Item(file, position, {"run": run, "protocol": HELD_OUT_PROTOCOL,
                                        "environment": env, "workload": workload}, raw,
                       warnings=warnings)


def _calibration(rows: list, docs: _Documents, sources: dict, file: str
                 ) -> Iterator[Item | RecordError]:
    """One run per ``h100_calibration`` row: a trainkernel schedule on the H100."""
    for index, row in enumerate(rows):
        position = f"h100_calibration[{index}]"
        raw = _raw(row)
        try:
            if not isinstance(row, dict):
                raise RecordError(file, position, None, "expected an object")
            name = _text(row, "workload", file, position)
            schedule = _text(row, "schedule", file, position)
            us = _number(row, "latency_us", file, position)
            url = _url(sources, "h100_calibration", file, position)
        except RecordError as err:
            yield err
            continue
        env, gpu = docs.environment(CALIBRATION_GPU)
        workload = docs.workload(name, None)
        run_id, external_id = _identity(
            f"trainkernel-h100-calibration-{slugify(name)}-{slugify(schedule)}",
            table="h100_calibration", gpu=gpu.key, workload=name, variant=schedule)
        run = _run(run_id,
                   f"Training step · trainkernel · {schedule} · {name} · {CALIBRATION_GPU}",
                   external_id, "h100_calibration", us,
                   {"implementation": "trainkernel", "variant": schedule, "workload": name,
                    "gpu_name": CALIBRATION_GPU},
                   CALIBRATION_PROTOCOL, env, workload, url)
        yield Item(file, position, {"run": run, "protocol": CALIBRATION_PROTOCOL,
                                    "environment": env, "workload": workload}, raw)
