"""Flatten validated kernelindex records into table rows (one dict per row).

One code path for every source and every load path: readers turn their input into kernelindex
documents, this module checks them (:mod:`kidata.ingest.validate`: what each field must be) and
maps them onto the tables of :mod:`kidata.store.schema`. Every rule that derives a row is here,
once: identity, content hash, kernel/pass split, implementation, workload, version, GPU name,
unit conversion, quantile order, the workload row of a run that names only a digest.

:meth:`Flattener.flatten` takes a record read by any reader. The fast path of a load
(:mod:`kidata.ingest.fast`) only decodes the common bundle more cheaply and then calls the same
methods (:meth:`Flattener.environment`, :meth:`Flattener.protocol`, :meth:`Flattener.bundle`),
so the two cannot disagree: there is no second copy of a rule to drift.
"""

from __future__ import annotations

import hashlib
from typing import Any, NamedTuple

import orjson

from kidata.core.catalog import Gpu, gpu_from_hardware, lookup_gpu
from kidata.core.digest import canonical_json, digest
from kidata.core.load_report import UnknownGpu
from kidata.ingest import units, validate
from kidata.ingest.readers.base import MAX_DEPTH, Item, deep_field, nesting_depth, shown
from kidata.ingest.validate import (
    COUNT_STATISTICS,
    UNITS,
    ZERO_STATISTICS,
    Checker,
)

QUANTILE_ORDER = ("min", "p20", "p25", "median", "p75", "p80", "max")
_QUANTILE_PLACE = {statistic: i for i, statistic in enumerate(QUANTILE_ORDER)}


# The columns of the rows :meth:`Flattener.bundle` gives for ``runs`` and ``measurements``, in
# the order of their tuples (the two tables hold nearly every row of a load: a tuple each is
# what staging needs, where a dictionary per row cost more than the rule that fills it).
RUN_COLUMNS = ("run_id", "source", "external_id", "kernel", "pass", "implementation",
               "variant", "workload", "gpu", "gpu_name", "metric", "environment_id",
               "protocol_id", "workload_id", "implementation_id", "observed_at", "status",
               "version", "title", "labels", "content_hash", "document")
MEASUREMENT_COLUMNS = ("run_id", "metric", "statistic", "unit", "value", "resolution")
# The columns of the rows of ``samples`` (:attr:`Flat.samples`), in the order of their tuples.
SAMPLE_COLUMNS = ("run_id", "content_hash", "metric", "unit", "sample", "value")


class Flat:
    """The rows one record contributes, by table.

    ``run_rows`` and ``measurement_rows`` are tuples in :data:`RUN_COLUMNS` and
    :data:`MEASUREMENT_COLUMNS` order (:attr:`runs` and :attr:`measurements` give them as
    dictionaries), ``samples`` tuples in :data:`SAMPLE_COLUMNS` order (a run may have
    thousands); the other tables' rows are dictionaries, shared with the flattener's memory of
    the documents it has checked: copy one before changing it."""

    __slots__ = ("run_rows", "measurement_rows", "environments", "protocols", "workloads",
                 "workload_parameters", "implementations", "published", "samples", "warnings")

    def __init__(self, warnings: list[str] | None = None):
        self.run_rows: list[tuple] = []
        self.measurement_rows: list[tuple] = []
        self.environments: list[dict] = []
        self.protocols: list[dict] = []
        self.workloads: list[dict] = []
        self.workload_parameters: list[dict] = []
        self.implementations: list[dict] = []
        self.published: list[dict] = []
        self.samples: list[tuple] = []
        self.warnings: list[str] = [] if warnings is None else warnings

    @property
    def runs(self) -> list[dict]:
        """The ``runs`` rows as dictionaries (new ones at each call)."""
        return [dict(zip(RUN_COLUMNS, row, strict=True)) for row in self.run_rows]

    @property
    def measurements(self) -> list[dict]:
        """The ``measurements`` rows as dictionaries (new ones at each call)."""
        return [dict(zip(MEASUREMENT_COLUMNS, row, strict=True))
                for row in self.measurement_rows]


class Environment(NamedTuple):
    """A checked environment document: what runs take from it."""

    environment_id: str
    gpu: Gpu
    row: dict  # the environments row (shared: copy before changing it)
    gpu_name: str  # "product formFactor": a run's GPU name without a gpu_name label


class Named(NamedTuple):
    """A workload or implementation document of a record, checked: present or not, its
    digest and the name runs take from it."""

    present: bool
    digest: str | None
    name: str | None


_NONE = Named(False, None, None)


def _dumps(c: Checker, value: Any, field: str) -> bytes:
    """``value`` (a document ``field`` of the record) as JSON. A document nested deeper than
    kidata stores (orjson writes :data:`MAX_DEPTH` levels) is a :class:`RecordError` naming
    the path to its deep part, and one orjson cannot write otherwise (a key that is not text)
    one with orjson's reason, whichever reader built it: the kernelindex reader refuses such
    text before parsing, but a reader that copies a value of its input into a document (a
    link, a native field) could hand one over (fuzzer seed 731099 crashed a load so)."""
    try:
        return orjson.dumps(value)
    except TypeError as exc:
        if nesting_depth(value) <= MAX_DEPTH:
            # A key that is not text (a reader kept a number or null of its input as a key):
            # the record cannot be stored as it is; the load goes on without it.
            raise c.fail(field, f"cannot be stored as JSON: {exc}") from None
        path = deep_field(value, steps=5)
        where = field if path is None else field + (path if path.startswith("[") else "." + path)
        raise c.fail(where, f"nested deeper than {MAX_DEPTH} levels; kidata stores documents "
                            f"up to {MAX_DEPTH} levels deep") from None


def _json(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


def _parameter(workload_id: str, name: str, value: Any) -> dict:
    """One ``workload_parameters`` row: numbers in ``value`` (so SQL can compute with them
    portably, without JSON functions), everything else as text."""
    number = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an integer beyond the float range stays text
            return {"workload_id": workload_id, "name": name, "value": None, "text": str(value)}
    text = None if number is not None else value if isinstance(value, str) else _json(value)
    return {"workload_id": workload_id, "name": name, "value": number, "text": text}


# A measurement's (metric, statistic, unit) already converted: the warehouse unit and factor.
_CONVERSIONS: dict[tuple[str, str, str], tuple[str, float]] = {}


def _conversion(c: Checker, i: int, metric: str, statistic: str, unit: str
                ) -> tuple[str, float]:
    """The warehouse unit of measurement ``i`` and the factor to it; raises when the metric
    or the unit is unknown. One unit per metric (``UNITS``); a count statistic (the sample
    count) is a count whatever the metric."""
    prefix = f"run.spec.measurements[{i}]."
    if metric not in UNITS:
        raise c.fail(f"{prefix}metric",
                     f"unknown metric {metric!r}; expected one of {', '.join(UNITS)}")
    target, factors = UNITS[metric]
    if statistic in COUNT_STATISTICS:
        target, factors = "count", {"count": 1.0}
    if unit not in factors:
        raise c.fail(f"{prefix}unit", f"unknown unit {unit!r} for {metric}"
                                      f"{' ' + statistic if target == 'count' else ''}"
                                      f"; expected one of {', '.join(factors)}")
    if len(_CONVERSIONS) >= 10_000:
        _CONVERSIONS.clear()
    found = _CONVERSIONS[(metric, statistic, unit)] = (target, factors[unit])
    return found


class NeedsEnvironment(Exception):
    """Raised instead of flattening a run whose environment is neither in its record nor known
    yet, when the flattener was asked to defer such runs (``defer_unknown_environments``): a
    load's worker process hands the record back to the process that has seen every record
    before it, so the result is the same as reading the input in one pass."""


class Flattener:
    """Turns :class:`~kidata.ingest.readers.Item` into :class:`Flat` rows.

    Remembers the environments and protocols it has seen (and those already in the warehouse,
    via :meth:`know_environment`/:meth:`know_protocol`) so that a bare run can name its GPU.
    This memory is the only state that changes a result; everything else is a pure function of
    the record (the caches below only save work).
    """

    def __init__(self, defer_unknown_environments: bool = False) -> None:
        self.defer_unknown_environments = defer_unknown_environments
        self.env_gpu: dict[str, Gpu] = {}
        self._digests: dict[bytes, str] = {}
        self._done: dict[tuple[str, bytes], Any] = {}
        self._label_sets: dict[str, tuple[str, str | None]] = {}

    def know_environment(self, environment_id: str, gpu_key: str) -> None:
        self.env_gpu[environment_id] = lookup_gpu(gpu_key)

    def _digest(self, doc: dict) -> str:
        # Documents repeat across records: cache digests by their raw bytes.
        key = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
        found = self._digests.get(key)
        if found is None:
            found = self._digests[key] = digest(doc)
            if len(self._digests) > 100_000:
                self._digests.clear()
        return found

    def _memo(self, c: Checker, role: str, doc: dict) -> tuple[bytes, Any]:
        # Records repeat the same few documents: remember what checking and flattening one
        # gave, by its bytes (as parsed: equal bytes are equal documents, and not sorting
        # them is cheaper), so each distinct document is checked and hashed about once.
        key = _dumps(c, doc, role)
        return key, self._done.get((role, key))

    def _remember(self, role: str, key: bytes, value: Any) -> None:
        if len(self._done) > 100_000:
            self._done.clear()
        self._done[(role, key)] = value

    def environment(self, c: Checker, env_doc: Any) -> Environment:
        """The environment document checked: its digest, GPU, row and the GPU's display name
        for runs without a ``gpu_name`` label. Raises :class:`RecordError`."""
        key, found = self._memo(c, "environment", env_doc) if isinstance(env_doc, dict) \
            else (None, None)
        if found is None:
            c.document(env_doc, "environment", "ExecutionEnvironment")
            hardware = c.obj(env_doc, "spec.hardware", "environment.")
            c.text(env_doc, "spec.hardware.product", "environment.")
            vendor, form_factor, architecture = (
                c.string(env_doc, f"spec.hardware.{k}", "environment.")
                for k in ("vendor", "formFactor", "architecture"))
            env_id = self._digest(env_doc)
            gpu = gpu_from_hardware(hardware)
            gpu_name = f"{hardware.get('product', '')} {hardware.get('formFactor', '')}".strip()
            found = Environment(env_id, gpu, {
                "environment_id": env_id,
                "name": c.get(env_doc, "metadata.name"),
                "title": c.string(env_doc, "metadata.title", "environment."),
                "gpu": gpu.key,
                "vendor": vendor,
                "product": hardware.get("product"),
                "form_factor": form_factor,
                "architecture": architecture,
                "software": _json(c.get(env_doc, "spec.software")),
                "document": canonical_json(env_doc),
            }, gpu_name)
            self._remember("environment", key, found)
        self.note_environment(found)
        return found

    def note_environment(self, environment: Environment) -> None:
        """Know a checked environment from here on, whatever the rest of its record: a later
        run that names only its digest takes its GPU (:meth:`environment` notes each)."""
        self.env_gpu[environment.environment_id] = environment.gpu

    def protocol(self, c: Checker, protocol_doc: Any) -> tuple[str, dict]:
        """The protocol document checked: its digest and row (shared: copy before changing
        it). Raises :class:`RecordError`."""
        key, found = self._memo(c, "protocol", protocol_doc) if isinstance(protocol_doc, dict) \
            else (None, None)
        if found is None:
            c.document(protocol_doc, "protocol", "BenchmarkProtocol")
            protocol_id = self._digest(protocol_doc)
            family = c.text(protocol_doc, "spec.comparability.family", "protocol.",
                            required=False) or protocol_id
            found = (protocol_id, {
                "protocol_id": protocol_id,
                "name": c.get(protocol_doc, "metadata.name"),
                "title": c.string(protocol_doc, "metadata.title", "protocol."),
                "family": family,
                "harness": c.string(protocol_doc, "spec.harness.name", "protocol."),
                "repository": c.string(protocol_doc, "spec.harness.repository", "protocol."),
                "timer": c.string(protocol_doc, "spec.measurement.timer", "protocol."),
                "primary_statistic": c.string(protocol_doc, "spec.measurement.primaryStatistic",
                                              "protocol."),
                "notes": c.string(protocol_doc, "spec.comparability.notes", "protocol."),
                "document": canonical_json(protocol_doc),
            })
            self._remember("protocol", key, found)
        return found

    def workload(self, c: Checker, doc: Any) -> tuple[Named, dict, list[dict]]:
        """The workload document checked: its digest and name, its row and its parameter rows
        (shared: copy before changing them). Raises :class:`RecordError`."""
        key, found = self._memo(c, "workload", doc) if isinstance(doc, dict) else (None, None)
        if found is None:
            c.document(doc, "workload", "Workload")
            workload_id = self._digest(doc)
            name = c.text(doc, "spec.name", "workload.", required=False) \
                or c.get(doc, "metadata.name")
            params = c.get(doc, "spec.parameters")
            if params is not None and not isinstance(params, dict):
                raise c.fail("workload.spec.parameters", "expected an object")
            found = (Named(True, workload_id, name), {
                "workload_id": workload_id,
                "name": name,
                "kernel": c.string(doc, "spec.kernel", "workload."),
                "parameters": _json(params),
                "shape": _json(c.get(doc, "spec.shape")),
                # As loaded, not canonical: the order of its parameters is the source's (and
                # that of `parameters`), which an export must give back.
                "document": orjson.dumps(doc).decode(),
            }, [_parameter(workload_id, k, v) for k, v in sorted((params or {}).items())])
            self._remember("workload", key, found)
        return found

    def implementation(self, c: Checker, doc: Any) -> tuple[Named, dict]:
        """The implementation document checked: its digest and name, and its row (shared:
        copy before changing it). Raises :class:`RecordError`."""
        key, found = self._memo(c, "implementation", doc) if isinstance(doc, dict) \
            else (None, None)
        if found is None:
            c.document(doc, "implementation", "Implementation")
            impl_id = self._digest(doc)
            name = c.text(doc, "spec.name", "implementation.", required=False)
            found = (Named(True, impl_id, name), {
                "implementation_id": impl_id,
                "name": name,
                "kernel": c.string(doc, "spec.kernel", "implementation."),
                "title": c.string(doc, "metadata.title", "implementation."),
                "document": canonical_json(doc),
            })
            self._remember("implementation", key, found)
        return found

    def flatten(self, item: Item) -> Flat:
        """The rows of one record, checked. Raises :class:`RecordError` (naming file, record
        and field) for the first thing wrong, or :class:`NeedsEnvironment`."""
        c = Checker(item.file, item.position)
        out = Flat(warnings=list(item.warnings))
        docs = item.docs
        env_doc = docs.get("environment")
        protocol_doc = docs.get("protocol")
        environment = None if env_doc is None else self.environment(c, env_doc)
        protocol = None if protocol_doc is None else self.protocol(c, protocol_doc)
        workload_doc = docs.get("workload")
        impl_doc = docs.get("implementation")
        workload = implementation = None
        if workload_doc is not None:
            workload, row, parameters = self.workload(c, workload_doc)
            out.workloads.append(row)
            out.workload_parameters = list(parameters)
        if impl_doc is not None:
            implementation, row = self.implementation(c, impl_doc)
            out.implementations.append(row)
        run = docs.get("run")
        return self.bundle(c, out, run, environment, protocol, workload, implementation)

    def bundle(self, c: Checker, out: Flat, run: Any, environment: Environment | None,
               protocol: tuple[str, dict] | None, workload_doc: Named | None = None,
               impl_doc: Named | None = None) -> Flat:
        """Add to ``out`` the rows of a record whose other documents are already checked:
        its environment and protocol (from :meth:`environment` and :meth:`protocol`, or None
        when the record has none), its workload and implementation documents' digest and
        name (:class:`Named`, or None when it has none), then its run, if any."""
        workload_doc = workload_doc or _NONE
        impl_doc = impl_doc or _NONE
        env_id = gpu = protocol_id = None
        if environment is not None:
            env_id, gpu, row, _ = environment
            out.environments.append(row)
        if protocol is not None:
            protocol_id, row = protocol
            out.protocols.append(row)
        if run is None:
            return out
        c.document(run, "run", "BenchmarkRun")
        # Checked by c.document: metadata (with a name) and spec are objects, labels an
        # object of strings or missing.
        meta, spec = run["metadata"], run["spec"]
        run_id = meta["name"]
        env_id = c.declared_digest(spec, "environmentDigest", environment is not None,
                                   "environment", env_id)
        protocol_id = c.declared_digest(spec, "protocolDigest", protocol is not None,
                                        "protocol", protocol_id)
        workload_id = c.declared_digest(spec, "workloadDigest", workload_doc.present,
                                        "workload", workload_doc.digest)
        impl_id = c.declared_digest(spec, "implementationDigest", impl_doc.present,
                                    "implementation", impl_doc.digest)
        labels: dict[str, str] = meta.get("labels") or {}
        native, external_id, parts = _source_native(c, spec)
        kernel, pass_, implementation, workload = self._run_identity(
            c, native, labels, parts, workload_doc.name, impl_doc.name)
        gpu, gpu_name = self._run_gpu(c, out, labels, parts, environment, env_id, gpu)

        measurements, metric = self._measurements(c, spec, run_id)
        out.measurement_rows = measurements
        numbers = sorted([m[1:5] for m in measurements])  # (metric, statistic, unit, value)
        content_hash = hashlib.blake2b(repr(numbers).encode(), digest_size=16).hexdigest()
        labels_json, version = self._labels(labels)
        observed_at, status, title = _run_fields(c, meta, spec)
        source = native.get("source")
        out.run_rows.append((  # in RUN_COLUMNS order
            run_id, source if isinstance(source, str) else None, external_id,
            kernel, pass_, implementation, labels.get("variant"), workload, gpu.key, gpu_name,
            metric, env_id, protocol_id, workload_id, impl_id,
            observed_at, status, version, title, labels_json, content_hash,
            _dumps(c, run, "run"),  # the document: UTF-8 JSON, staged as a string, no copy
        ))
        if workload_id is not None and not workload_doc.present:
            # Only the digest is known: keep a row so every run's workload is listed.
            out.workloads.append({"workload_id": workload_id, "name": workload,
                                  "kernel": kernel, "parameters": None, "shape": None,
                                  "document": None})
        _native_rows(c, out, native, run_id, content_hash)
        return out

    @staticmethod
    def _run_identity(c: Checker, native: dict, labels: dict[str, str], parts: list,
                      workload_name: str | None, impl_name: str | None
                      ) -> tuple[str, str, str, str]:
        """A run's kernel, pass, implementation and workload: each from the first source that
        gives it (the benchmark ``kernel/pass``, else labels; the implementation document,
        labels, then the 6-part external id; the workload label, document, then the external
        id). Raises :class:`RecordError` naming what is missing."""
        benchmark = native.get("benchmark")
        if isinstance(benchmark, str) and benchmark.count("/") == 1 and all(benchmark.split("/")):
            kernel, pass_ = benchmark.split("/")
        elif labels.get("kernel") and labels.get("pass"):
            kernel, pass_ = labels["kernel"], labels["pass"]
        else:
            raise c.fail("run.spec.sourceNative.benchmark",
                         "expected 'kernel/pass' such as 'rms_norm/forward', got "
                         + shown(benchmark))
        implementation = impl_name or labels.get("implementation") or parts[2]
        if not implementation:
            raise c.fail("run.metadata.labels.implementation",
                         "cannot tell the implementation: expected an Implementation document, "
                         "a label 'implementation', or a 6-part sourceNative.externalId")
        workload = labels.get("workload") or workload_name or parts[4]
        if not workload:
            raise c.fail("run.metadata.labels.workload",
                         "cannot tell the workload: expected a Workload document, a label "
                         "'workload', or a 6-part sourceNative.externalId")
        return kernel, pass_, implementation, workload

    def _run_gpu(self, c: Checker, out: Flat, labels: dict[str, str], parts: list,
                 environment: Environment | None, env_id: str | None, gpu: Gpu | None
                 ) -> tuple[Gpu, str | None]:
        """A run's GPU and the name its record gives it: from the record's environment, an
        environment this load or the warehouse holds, else the ``gpu_name`` label or the
        external id. Warns of a GPU the catalog does not know; raises :class:`RecordError`,
        or :class:`NeedsEnvironment` while unknown environments are deferred."""
        gpu_name = labels.get("gpu_name")
        if gpu is None and env_id is not None:
            gpu = self.env_gpu.get(env_id)
            if gpu is None and self.defer_unknown_environments:
                raise NeedsEnvironment(env_id)
        if gpu is None:
            hint = gpu_name or parts[3]
            if not hint:
                raise c.fail("run.spec.environmentDigest",
                             f"environment {env_id} is not in this record, this load or the "
                             "warehouse, and no label 'gpu_name' names the GPU")
            gpu = lookup_gpu(hint)
        if gpu_name is None and environment is not None:
            gpu_name = environment.gpu_name
        if not gpu.known:
            out.warnings.append(UnknownGpu(f"{c.file}, {c.position}",
                                           gpu_name or gpu.product, gpu.key))
        return gpu, gpu_name

    def _labels(self, labels: dict[str, str]) -> tuple[str | None, str | None]:
        """A run's labels as stored (JSON, None when there are none) and the version they
        give: the label ``version``, else the first label (by name) ending in ``version``.
        Remembered by the labels' JSON: runs repeat a few label sets."""
        if not labels:
            return None, None
        text = _json(labels)
        found = self._label_sets.get(text)
        if found is None:
            version = labels.get("version") or next(
                (v for k, v in sorted(labels.items()) if k.endswith("version")), None)
            if len(self._label_sets) >= 10_000:
                self._label_sets.clear()
            found = self._label_sets[text] = (text, version)
        return found

    def _measurements(self, c: Checker, spec: dict, run_id: str) -> tuple[list[tuple], str]:
        """The run's measurement rows (tuples in :data:`MEASUREMENT_COLUMNS` order; units
        converted, quantiles in order) and its primary metric; ``spec`` is the run's spec."""
        rows: dict[tuple[str, str], tuple] = {}
        timing = spec.get("timing")
        if not isinstance(timing, dict):
            timing = {}
        resolution = timing.get("resolutionNs")
        if resolution is not None:
            resolution = c.positive_value(resolution, "run.spec.timing.resolutionNs")
        latency = timing.get("latencyNs")
        median = latency.get("median") if isinstance(latency, dict) else None
        if median is not None:
            value = validate.positive_number(median)
            if value is None:  # the Checker says why (or, if its rule differs, decides)
                value = c.positive_value(median, "run.spec.timing.latencyNs.median")
            rows[("latency", "median")] = (run_id, "latency", "median", "ns", value,
                                           resolution)
        items = spec.get("measurements")
        if items is not None and not isinstance(items, list):
            raise c.fail("run.spec.measurements", "expected a list")
        for i, m in enumerate(items or []):
            row = _measurement(c, i, m, run_id, resolution)
            key = row[1:3]  # (metric, statistic)
            if key in rows and rows[key][4] != row[4]:
                raise c.fail(f"run.spec.measurements[{i}].value",
                             f"{key[0]} {key[1]} given twice with different values "
                             f"({rows[key][4]} and {row[4]})")
            rows[key] = row
        primary = _primary_metric(c, rows, timing.get("primaryStatistic"))
        _check_quantile_order(c, rows)
        return list(rows.values()), primary


# A 6-part external id's parts when the run has none: each empty.
_NO_PARTS = [None] * 6


def _source_native(c: Checker, spec: dict) -> tuple[dict, str | None, list]:
    """A run's ``sourceNative`` (an object, empty when missing), its external id (a string or
    None) and that id's six parts ``{kernel}/{pass}/{implementation}/{gpu}/{workload}/{time}``
    (each None unless it has exactly six)."""
    native = spec.get("sourceNative")
    if native is None:
        native = {}
    elif not isinstance(native, dict):
        c.obj(spec, "sourceNative", "run.spec.")  # raises: not an object
    external_id = native.get("externalId")
    if not isinstance(external_id, str):
        return native, None, _NO_PARTS
    parts = external_id.split("/")
    return native, external_id, parts if len(parts) == 6 else _NO_PARTS


def _run_fields(c: Checker, meta: dict, spec: dict) -> tuple[str | None, str, str | None]:
    """A run's observation time, status (``unknown`` when missing) and title, checked."""
    observed_at = spec.get("observedAt")
    if observed_at is not None:  # a time already read, else the check
        observed_at = validate.known_time(observed_at) \
            or c.timestamp(spec, "observedAt", "run.spec.")
    status = spec.get("status")
    if status is None:
        status = "unknown"
    elif not validate.is_text(status):
        status = c.text(spec, "status", "run.spec.")  # says why
    title = meta.get("title")
    if title is not None and not isinstance(title, str):
        title = c.string(meta, "title", "run.metadata.")  # says why
    return observed_at, status, title


def _published(c: Checker, claims: Any, run_id: str) -> list[dict]:
    """The rows of a run's published claims (``sourceNative.published``: a list of objects)."""
    if isinstance(claims, bool | int | float):  # a true or non-zero scalar: not iterable
        raise c.fail("run.spec.sourceNative.published",
                     f"expected a list of objects, got {shown(claims)}")
    rows = []
    for i, claim in enumerate(claims):
        prefix = f"run.spec.sourceNative.published[{i}]."
        if not isinstance(claim, dict):
            raise c.fail(prefix[:-1], "expected an object")
        rows.append({
            "run_id": run_id,
            "baseline_run_id": c.text(claim, "baselineRun", prefix, required=False),
            "quantity": c.text(claim, "quantity", prefix),
            "definition": c.text(claim, "definition", prefix, required=False),
            "value": c.positive(claim, "value", prefix),
            "resolution": c.positive(claim, "resolution", prefix, required=False),
        })
    return rows


def _native_rows(c: Checker, out: Flat, native: dict, run_id: str, content_hash: str) -> None:
    """Add to ``out`` the rows of what a run's ``sourceNative`` holds beside its statistics:
    published claims and raw samples."""
    claims = native.get("published")
    if claims:
        out.published.extend(_published(c, claims, run_id))
    raw_samples = native.get("samples")
    if isinstance(raw_samples, list) and raw_samples:
        out.samples = _samples(c, out, raw_samples, native.get("unit"), run_id, content_hash)


def _samples(c: Checker, out: Flat, values: list, unit: Any, run_id: str,
             content_hash: str) -> list[tuple]:
    """The rows of a run's raw samples, tuples in :data:`SAMPLE_COLUMNS` order
    (``sourceNative.samples``, in the source's unit
    ``sourceNative.unit``: kidata's readers keep them there), converted as the run's
    statistics were (:func:`kidata.ingest.units.converter`, then the metric's unit as
    stored). Raises :class:`RecordError` for a sample that is no positive number; a unit kidata
    does not know keeps no rows and warns (the run itself is fine)."""
    metric_unit = units.unit_of(unit) if isinstance(unit, str) else None
    target = UNITS.get(metric_unit[0]) if metric_unit else None
    if metric_unit is None or target is None or metric_unit[1] not in target[1]:
        out.warnings.append(f"{c.file}, {c.position}: {len(values):,} samples of run "
                            f"{run_id} not kept: sourceNative.unit {shown(unit)} is not a unit "
                            f"kidata knows ({', '.join(sorted(units.UNIT_SPELLINGS))})")
        return []
    metric, unit_as_measured = metric_unit
    stored_unit, factors = target
    factor = factors[unit_as_measured]
    convert = units.converter(unit)
    rows = []
    for i, value in enumerate(values):
        number = convert(value)
        if number is None:
            raise c.fail(f"run.spec.sourceNative.samples[{i}]",
                         f"expected a positive number (a raw sample), got {value!r}")
        rows.append((run_id, content_hash, metric, stored_unit, i + 1, number * factor))
    return rows


def _measurement(c: Checker, i: int, m: Any, run_id: str, resolution: float | None) -> tuple:
    """One entry of ``spec.measurements`` as a row: its unit converted (value and
    resolution), a zero kept only for statistics that may be zero; the run's timer resolution
    for a latency that gives none. Raises :class:`RecordError`."""
    if not isinstance(m, dict):
        raise c.fail(f"run.spec.measurements[{i}]", "expected an object")
    metric, statistic, unit = m.get("metric"), m.get("statistic"), m.get("unit")
    try:  # found: three texts already checked (only equal strings match them)
        conversion = _CONVERSIONS.get((metric, statistic, unit))
    except TypeError:  # a value that is no text (a list, an object)
        conversion = None
    if conversion is None:
        if not (validate.is_text(metric) and validate.is_text(statistic)
                and validate.is_text(unit)):  # the Checker says which and why
            metric, statistic, unit = (c.text(m, key, f"run.spec.measurements[{i}].")
                                       for key in ("metric", "statistic", "unit"))
        conversion = _conversion(c, i, metric, statistic, unit)
    target, factor = conversion
    value = m.get("value")
    if statistic in ZERO_STATISTICS and value == 0 and not isinstance(value, bool):
        value = 0.0
    else:
        number = validate.positive_number(value)
        if number is None:  # the Checker says why
            number = c.positive(m, "value", f"run.spec.measurements[{i}].")
        value = number * factor
    res = m.get("resolution")
    if res is not None:
        number = validate.positive_number(res)
        if number is None:  # the Checker says why
            number = c.positive(m, "resolution", f"run.spec.measurements[{i}].")
        res = number * factor
    elif metric == "latency" and target != "count":
        res = resolution
    return (run_id, metric, statistic, target, value, res)


def _primary_metric(c: Checker, rows: dict[tuple[str, str], tuple],
                    primary_statistic: Any) -> str:
    """The run's primary metric: ``latency`` if it has a median, else the first (by name)
    with a median. A source without a median (KernelBench, old nvbench: mean and stddev only)
    names its primary statistic in spec.timing.primaryStatistic (docs/formats.md)."""
    metrics = sorted({m for m, s in rows if s == "median"}) or sorted(
        {m for m, s in rows if s == primary_statistic and s not in COUNT_STATISTICS})
    if not metrics:
        raise c.fail("run.spec.timing.latencyNs.median",
                     "expected a median: spec.timing.latencyNs.median or a measurement "
                     "with statistic 'median' (or the statistic named by "
                     "spec.timing.primaryStatistic)")
    return "latency" if "latency" in metrics else metrics[0]


def _check_quantile_order(c: Checker, rows: dict[tuple[str, str], tuple]) -> None:
    """Refuse a metric whose quantiles are out of order (min <= p20 <= p25 <= median <= p75 <=
    p80 <= max, among those given). Metrics are compared in the order the record gives them,
    so that of two metrics out of order, the reject names the first given."""
    # Each metric's quantiles as (place in QUANTILE_ORDER, statistic, value).
    quantiles: dict[str, list[tuple[int, str, float]]] = {}
    for (m, s), row in rows.items():
        place = _QUANTILE_PLACE.get(s)
        if place is not None:
            quantiles.setdefault(m, []).append((place, s, row[4]))
    for metric, given in quantiles.items():
        if len(given) < 2:
            continue
        given.sort()  # by place: one statistic per place
        s1 = v1 = None  # the quantile before, among those given
        for _, s2, v2 in given:
            if v1 is not None and v1 > v2:
                raise c.fail("run.spec.measurements",
                             f"quantiles out of order for {metric}: {s1} = {v1:g} is above "
                             f"{s2} = {v2:g}; expected "
                             + ("p20 <= median <= p80" if {s1, s2} <= {"p20", "median", "p80"}
                                else "min <= p20 <= p25 <= median <= p75 <= p80 <= max"))
            s1, v1 = s2, v2
