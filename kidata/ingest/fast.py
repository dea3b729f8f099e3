"""The fast path of a load: stage the common kernelindex bundle without the general checker.

Most JSON Lines input is one shape: a bundle of a run, its environment and usually its protocol,
every field of a plain type and every check passing. :class:`FastPath` stages such a record
straight into the stager, with direct dictionary access, documents it has already checked
remembered by their bytes, and no intermediate row dictionaries. Any record that is not plainly
that shape and plainly valid (a missing or odd-typed field, a failing check, a digest mismatch,
a published claim, an unknown GPU, ...) goes, unchanged and before anything of it is staged, to
the general path (:func:`kidata.ingest.stage.stage_record`:
:class:`~kidata.ingest.flatten.Flattener` with :class:`~kidata.ingest.validate.Checker`), which
stays the authority: it produces every reject message and every row of anything unusual. The
two give the same rows for every record the fast path takes (``tests/ingest/test_fast_path.py``
compares them on every fixture and on mutated bundles).

``KIDATA_SLOW_PATH=1`` (any value but empty or ``0``) turns the fast path off, in the loading
process and its workers, so every record takes the general path.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import orjson

from kidata.errors import RecordError
from kidata.ingest.flatten import QUANTILE_ORDER, Flattener
from kidata.ingest.readers.base import Item, Lines, Overlong, raw_text
from kidata.ingest.readers.kernelindex import (
    json_error_message,
    long_digits,
    overlong_error,
    record_error,
    to_item,
)
from kidata.ingest.validate import API_VERSION, DIGEST_RE, UNITS, Checker

_INF = float("inf")
_MAX_MEMO = 10_000
# The staged column orders the fast path's row tuples follow (kidata.store.schema.staged_schema).
_RUN_COLUMNS = ["run_id", "source", "external_id", "kernel", "pass", "implementation",
                "variant", "workload", "gpu", "gpu_name", "metric", "environment_id",
                "protocol_id", "workload_id", "implementation_id", "observed_at", "status",
                "version", "title", "labels", "content_hash", "source_file", "_seq",
                "_position", "_latency_median", "_latency_p20",
                "_latency_p80"]  # "document": in StagingWriter.blobs
_MEASUREMENT_COLUMNS = ["run_id", "metric", "statistic", "unit", "value", "resolution",
                        "_seq", "_position"]


def enabled() -> bool:
    """Whether the fast path is on (``KIDATA_SLOW_PATH`` unset, empty or ``0``)."""
    return os.environ.get("KIDATA_SLOW_PATH", "") in ("", "0")


def scan(batch: Lines) -> Iterator[tuple[str, bytes | None, RecordError | None]]:
    """The records of unparsed lines, as :func:`kidata.ingest.readers.kernelindex.parse_lines` sees
    them: ``(position, line, None)``, or ``(position, None, error)`` for a line too long to
    read. Blank lines are skipped; the others keep their surrounding whitespace (JSON allows
    it; stripping copied every line)."""
    file = batch.file
    for number, line in batch.numbered():
        if isinstance(line, Overlong):
            yield f"line {number}", None, overlong_error(file, number, line)
            continue
        if line and not line.isspace():  # not blank: bytes.strip() would leave something
            yield f"line {number}", line, None


def parse(line: bytes, file: str, position: str, title: str | None
          ) -> Item | RecordError:
    """One line as the general path reads it (exactly what ``parse_lines`` yields)."""
    stripped = line.strip()
    try:
        value = orjson.loads(stripped)
    except orjson.JSONDecodeError as exc:
        return record_error(file, position, json_error_message(exc), stripped)
    return to_item(value, file, position, raw_text(stripped), title, stripped)


def _positive(value: Any) -> float | None:
    """``Checker.positive_value`` for plain values: the float, or None when it would fail."""
    kind = type(value)
    if kind is float:
        number = value
    elif kind is int:
        try:
            number = float(value)
        except OverflowError:
            return None
    else:
        return None
    return number if 0.0 < number < _INF else None


def _text(value: Any) -> bool:
    return type(value) is str and bool(value.strip())


class FastPath:
    """Stages plainly valid common bundles; see the module docstring."""

    def __init__(self, stager: Any, flattener: Flattener, on: bool | None = None):
        self.on = enabled() if on is None else on
        self.stager = stager
        self.flattener = flattener
        self._environments: dict[bytes, tuple] = {}
        self._protocols: dict[bytes, tuple] = {}
        self._timestamps: dict[str, datetime] = {}
        self._label_sets: dict[bytes, tuple] = {}
        self._units: dict[tuple, tuple[str, float]] = {}
        self._digests: set[str] = set()  # declared digests already matched DIGEST_RE
        if stager.names["runs"] != _RUN_COLUMNS \
                or stager.names["measurements"] != _MEASUREMENT_COLUMNS:
            self.on = False  # the tuples staged below follow these column orders

    def stage(self, line: bytes, file: str, position: str, name: str, seq: int) -> bool:
        """Stage the record on ``line`` (one JSON line) if it is a plainly valid common
        bundle; False (nothing staged) sends it to the general path."""
        if not self.on or long_digits(line):
            return False  # an integer orjson may not keep: the general path checks it
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            return False
        try:
            return self._stage(value, file, position, name, seq)
        except (TypeError, OverflowError):
            # A document nested too deep to write again (orjson), a time beyond year 9999
            # in UTC: nothing is staged yet; the general path rejects it with the reason.
            return False

    def _stage(self, value: Any, file: str, position: str, name: str, seq: int) -> bool:
        if type(value) is not dict or "kind" in value or "workload" in value \
                or "implementation" in value:
            return False
        run = value.get("run")
        env_doc = value.get("environment")
        protocol_doc = value.get("protocol")
        if type(run) is not dict or type(env_doc) is not dict \
                or (protocol_doc is not None and type(protocol_doc) is not dict):
            return False
        env = self._environment(env_doc, file, position)
        if env is None:
            return False
        env_id, gpu, env_row, default_gpu_name = env
        self.flattener.env_gpu[env_id] = gpu  # as the general path does, valid run or not
        if protocol_doc is not None:
            protocol = self._protocol(protocol_doc, file, position)
            if protocol is None:
                return False
            protocol_id, protocol_row = protocol
        else:
            protocol_id = protocol_row = None
        return self._run(run, env_id, gpu, env_row, default_gpu_name, protocol_id,
                         protocol_row, protocol_doc is not None, position, name, seq)

    def _environment(self, doc: dict, file: str, position: str) -> tuple | None:
        key = orjson.dumps(doc)  # equal bytes, equal documents: a valid memo key
        found = self._environments.get(key)
        if found is None:
            try:
                env_id, gpu, row = self.flattener.environment(Checker(file, position), doc)
            except RecordError:
                return None
            if not gpu.known:
                return None  # the general path warns
            hw = doc["spec"]["hardware"]
            default = f"{hw.get('product', '')} {hw.get('formFactor', '')}".strip()
            if len(self._environments) >= _MAX_MEMO:
                self._environments.clear()
            found = self._environments[key] = (env_id, gpu, row, default)
        return found

    def _protocol(self, doc: dict, file: str, position: str) -> tuple | None:
        key = orjson.dumps(doc)
        found = self._protocols.get(key)
        if found is None:
            try:
                found = self.flattener.protocol(Checker(file, position), doc)
            except RecordError:
                return None
            if len(self._protocols) >= _MAX_MEMO:
                self._protocols.clear()
            self._protocols[key] = found
        return found

    def _timestamp(self, value: Any) -> datetime | None | bool:
        """``Checker.timestamp``: the UTC time, None when absent, False when it would fail."""
        if value is None:
            return None
        if type(value) is not str:
            return False
        found = self._timestamps.get(value)
        if found is None:
            try:
                ts = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                return False
            if ts.tzinfo is None:
                return False
            if len(self._timestamps) >= _MAX_MEMO:
                self._timestamps.clear()
            found = self._timestamps[value] = ts.astimezone(UTC)
        return found

    def _labels(self, labels: Any) -> tuple | None:
        """What a run takes from its labels (``Checker.document``'s check, then the
        flattener's reads), remembered by the labels' JSON; None when they are not an
        object of strings."""
        if labels is None:
            labels = {}
        elif type(labels) is not dict:
            return None
        text = orjson.dumps(labels)
        found = self._label_sets.get(text)
        if found is None:
            for v in labels.values():
                if type(v) is not str:
                    return None
            version = labels.get("version") or next(
                (v for k, v in sorted(labels.items()) if k.endswith("version")), None)
            if len(self._label_sets) >= _MAX_MEMO:
                self._label_sets.clear()
            found = self._label_sets[text] = (
                text if labels else None, labels.get("variant"), version,
                labels.get("kernel"), labels.get("pass"), labels.get("implementation"),
                labels.get("workload"), labels.get("gpu_name"))
        return found

    def _unit(self, metric: Any, statistic: Any, unit: Any) -> tuple[str, float] | None:
        """A measurement's metric, statistic and unit checked: the target unit and the factor
        to it; None when the general path must decide."""
        if not (_text(metric) and _text(statistic) and _text(unit)):
            return None
        found = UNITS.get(metric)
        if found is None:
            return None
        target, factors = found
        factor = factors.get(unit)
        if factor is None:
            return None
        if len(self._units) >= _MAX_MEMO:
            self._units.clear()
        result = self._units[(metric, statistic, unit)] = (target, factor)
        return result

    def _run(self, run: dict, env_id: str, gpu: Any, env_row: dict, default_gpu_name: str,
             protocol_id: str | None, protocol_row: dict | None, has_protocol: bool,
             position: str, name: str, seq: int) -> bool:
        # Checker.document(run, "run", "BenchmarkRun")
        if run.get("apiVersion") != API_VERSION or run.get("kind") != "BenchmarkRun":
            return False
        meta = run.get("metadata")
        spec = run.get("spec")
        if type(meta) is not dict or type(spec) is not dict:
            return False
        run_id = meta.get("name")
        if type(run_id) is not str or not run_id.strip():
            return False
        found = self._labels(meta.get("labels"))
        if found is None:
            return False
        labels_json, variant, version, label_kernel, label_pass, label_implementation, \
            label_workload, gpu_name = found
        title = meta.get("title")
        if title is not None and type(title) is not str:
            return False

        # Checker.declared_digest for each document
        declared = spec.get("environmentDigest")
        if declared is not None and declared != env_id:
            return False
        declared = spec.get("protocolDigest")
        if has_protocol:
            if declared is not None and declared != protocol_id:
                return False
        else:
            if declared is not None and (type(declared) is not str
                                         or not DIGEST_RE.match(declared)):
                return False
            protocol_id = declared
        workload_id = spec.get("workloadDigest")
        if workload_id is not None and not self._well_formed(workload_id):
            return False
        impl_id = spec.get("implementationDigest")
        if impl_id is not None and not self._well_formed(impl_id):
            return False

        native = spec.get("sourceNative")
        if native is None:
            native = {}
        elif type(native) is not dict:
            return False
        if native.get("published"):
            return False  # claims: the general path
        external_id = native.get("externalId")
        if type(external_id) is str:
            parts = external_id.split("/")
            six = len(parts) == 6
        else:
            external_id = None
            six = False
        benchmark = native.get("benchmark")
        if type(benchmark) is str and benchmark.count("/") == 1 and all(benchmark.split("/")):
            kernel, pass_ = benchmark.split("/")
        elif label_kernel and label_pass:
            kernel, pass_ = label_kernel, label_pass
        else:
            return False
        implementation = label_implementation or (parts[2] if six else None)
        if not implementation:
            return False
        workload = label_workload or (parts[4] if six else None)
        if not workload:
            return False
        if gpu_name is None:
            gpu_name = default_gpu_name

        # Flattener._measurements
        rows: dict[tuple[str, str], tuple] = {}
        timing = spec.get("timing")
        resolution = None
        if type(timing) is dict:
            resolution = timing.get("resolutionNs")
            if resolution is not None:
                resolution = _positive(resolution)
                if resolution is None:
                    return False
            latency = timing.get("latencyNs")
            median = latency.get("median") if type(latency) is dict else None
            if median is not None:
                kind = type(median)
                if kind is not float and kind is not int:
                    return False
                value = float(median) if kind is int else median
                if not 0.0 < value < _INF:
                    return False
                rows[("latency", "median")] = (run_id, "latency", "median", "ns", value,
                                               resolution, seq, position)
        items = spec.get("measurements")
        if items is not None:
            if type(items) is not list:
                return False
            units = self._units
            for m in items:
                if type(m) is not dict:
                    return False
                metric = m.get("metric")
                statistic = m.get("statistic")
                unit = m.get("unit")
                try:
                    found = units.get((metric, statistic, unit))
                except TypeError:  # a list or object where text belongs
                    return False
                if found is None:
                    found = self._unit(metric, statistic, unit)
                    if found is None:
                        return False
                target, factor = found
                value = m.get("value")
                kind = type(value)
                if kind is not float and kind is not int:
                    return False
                value = (float(value) if kind is int else value) * factor
                if not 0.0 < value < _INF:
                    return False
                res = m.get("resolution")
                if res is not None:
                    res = _positive(res)
                    if res is None:
                        return False
                    res = res * factor
                elif metric == "latency":
                    res = resolution
                key = (metric, statistic)
                earlier = rows.get(key)
                if earlier is not None and earlier[4] != value:
                    return False
                rows[key] = (run_id, metric, statistic, target, value, res, seq, position)
        if ("latency", "median") in rows:
            metric = "latency"
        else:
            metrics = sorted({m for m, s in rows if s == "median"})
            if not metrics:
                return False
            metric = metrics[0]
        for quantile_metric in {m for m, _ in rows}:
            previous = None
            for s in QUANTILE_ORDER:
                row = rows.get((quantile_metric, s))
                if row is not None:
                    if previous is not None and previous > row[4]:
                        return False
                    previous = row[4]
        measurements = list(rows.values())
        numbers = sorted([(r[1], r[2], r[3], r[4]) for r in measurements])
        content_hash = hashlib.blake2b(repr(numbers).encode(), digest_size=16).hexdigest()

        observed_at = spec.get("observedAt")
        if observed_at is not None:
            observed_at = self._timestamps.get(observed_at) if type(observed_at) is str \
                else False
            if observed_at is None:
                observed_at = self._timestamp(spec["observedAt"])
            if observed_at is False:
                return False
        status = spec.get("status")
        if status is None:
            status = "unknown"
        elif type(status) is not str or not status.strip():
            return False
        source = native.get("source")

        # Plainly valid: stage it (the general path's rows, in its order per table).
        stager = self.stager
        # JSON texts stay UTF-8 bytes: Arrow takes them as strings without a round trip
        # through Python str (the general path's str gives the same Arrow string).
        document = orjson.dumps(run)  # before anything is staged: it may raise
        stager.rows["runs"].append((
            run_id, source if type(source) is str else None, external_id, kernel, pass_,
            implementation, variant, workload, gpu.key, gpu_name, metric, env_id,
            protocol_id, workload_id, impl_id, observed_at, status, version, title,
            labels_json, content_hash, name, seq, position,
            *(None if r is None else r[4] for r in (rows.get(("latency", "median")),
                                                    rows.get(("latency", "p20")),
                                                    rows.get(("latency", "p80"))))))
        stager.blobs["runs"].append(document)
        counts = stager.counts
        counts["runs"] += 1
        stager.rows["measurements"].extend(measurements)
        counts["measurements"] += len(measurements)
        seen = stager.seen
        if (env_id,) not in seen["environments"]:
            stager.add("environments", dict(env_row, source_file=name), seq, position)
        if protocol_row is not None and (protocol_id,) not in seen["protocols"]:
            stager.add("protocols", dict(protocol_row, source_file=name), seq, position)
        if workload_id is not None and (workload_id,) not in seen["workloads"]:
            stager.add("workloads", {"workload_id": workload_id, "name": workload,
                                     "kernel": kernel, "parameters": None, "shape": None,
                                     "document": None, "source_file": name}, seq, position)
        return True

    def _well_formed(self, declared: Any) -> bool:
        """Whether a declared digest passes ``Checker.declared_digest``'s format check."""
        if type(declared) is not str:
            return False
        if declared not in self._digests:
            if not DIGEST_RE.match(declared):
                return False
            if len(self._digests) >= _MAX_MEMO:
                self._digests.clear()
            self._digests.add(declared)
        return True
