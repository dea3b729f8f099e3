"""One measured row of any harness -> one kernelindex bundle (run, protocol, environment,
workload).

Every reader of the field's formats (FlashInfer, nvbench, KernelBench, Triton perf_report,
PyTorch v3, dynamo, google-benchmark, github-action-benchmark) and every declarative mapping
(:mod:`kidata.ingest.mapping`) fills a :class:`Measured` and calls :meth:`Builder.item`, so they all
get the same checks, identity, digests and measurement model (``docs/formats.md``):

- statistics are ``spec.measurements`` rows in the metric's warehouse unit (latency in ns,
  converted exactly from the source's text), named ``median``, ``p20``, ``p80``, ``p25``,
  ``p75``, ``mean``, ``stddev``, ``min``, ``max``; the sample count is a ``samples`` row with unit
  ``count``; raw samples are summarised and kept in ``sourceNative.samples``;
- the primary statistic is the median where the source has one, else the mean; it is named in
  the run (``spec.timing.primaryStatistic``) and the protocol
  (``spec.measurement.primaryStatistic``);
- context the file lacks (GPU, time, unit, implementation...) comes from ``--set key=value``
  (:class:`Settings`); a row that still lacks something required is rejected with a message
  naming the option that supplies it.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from kidata.core.catalog import closest_gpus, gpu_catalog, lookup_gpu, slugify
from kidata.core.digest import canonical_json, digest
from kidata.errors import RecordError, UsageError
from kidata.ingest.documents import document, environment_document
from kidata.ingest.dtypes import is_dtype_parameter, normalise_dtype
from kidata.ingest.readers.base import MAX_DEPTH, Item, nesting_depth, shown
from kidata.ingest.units import UNIT_SPELLINGS, latency_factor, unit_of
from kidata.ingest.units import plain as _plain

# The keys `--set` accepts, with what each supplies (shown by `kidata formats`).
SETTINGS = {
    "gpu": "the GPU the file was measured on (any name the GPU catalog knows, e.g. 'H100 SXM')",
    "observed_at": "when it was measured (ISO 8601, e.g. 2025-01-31T12:00:00Z)",
    "unit": "the unit of the file's numbers (ms, us, ns, s, TFLOPS, GB/s, TB/s, MB)",
    "implementation": "the implementation measured (e.g. triton, eager, inductor)",
    "kernel": "the kernel's name (default: from the file or its name)",
    "pass": "the timed pass: forward (default), backward, full, no-grad-forward or step",
    "variant": "a variant of the implementation (e.g. a schedule)",
    "dtype": "the dtype of the workload (bf16, fp16, ...)",
    "version": "the version of the implementation or harness",
    "statistic": "what the file's numbers are: median, p20, p80, p25, p75, mean, stddev, min "
                 "or max",
    "x_columns": "Triton perf_report: the x columns, comma-separated (default: the leading "
                 "columns of whole numbers)",
    "commit": "the commit the results measured: a fact of the load (loads.commit; in CI, "
              "the CI's variable by default)",
    "branch": "the branch of that commit (loads.branch; in CI, the CI's by default)",
    "ci_run": "the CI run that loaded them, a URL or an id (loads.ci_run)",
    "torch": "the PyTorch version the file was measured with (spec.software.torch of its "
             "environment; environment_facts)",
    "cuda": "the CUDA version (spec.software.cuda)",
    "driver": "the GPU driver version (spec.software.driver)",
    "triton": "the Triton version (spec.software.triton)",
}
# Settings that are facts of the whole load (columns of `loads`), not context of its records.
LOAD_FACTS = ("commit", "branch", "ci_run")
# Settings that are software facts of the environment the file was measured in: recorded in the
# ExecutionEnvironment document kidata builds (spec.software), read by the environment_facts
# view, and named by series_steps.changed_facts when they change between two results.
SOFTWARE_FACTS = ("torch", "cuda", "driver", "triton")

STATISTICS = ("median", "p20", "p80", "p25", "p75", "mean", "stddev", "min", "max")
# The timed passes `--set pass=` accepts: those kidata's sources name (Liger's modes, the seeds'
# passes, trainkernel's training step).
SET_PASSES = ("forward", "backward", "full", "no-grad-forward", "step")
ZERO_ALLOWED = {"stddev"}


class Settings(dict):
    """``--set key=value`` options: context every record of a load lacks."""

    @classmethod
    def parse(cls, pairs: list[str] | None) -> Settings:
        out = cls()
        for pair in pairs or []:
            key, sep, value = pair.partition("=")
            key = key.strip()
            if not sep or not key:
                raise UsageError(f"--set expects key=value, got {pair!r}")
            if key not in SETTINGS:
                raise UsageError(f"--set: unknown key {key!r}; known keys are: "
                                 f"{', '.join(SETTINGS)}")
            if not value.strip():
                raise UsageError(f"--set {key}: expected a value")
            if key in LOAD_FACTS + SOFTWARE_FACTS \
                    and (len(value) > 1024 or not value.isprintable()):
                raise UsageError(f"--set {key}: expected one line of at most 1,024 "
                                 "printable characters")
            out[key] = value.strip()
        if "observed_at" in out:
            parse_time(out["observed_at"], "--set observed_at")
        if "unit" in out and unit_of(out["unit"]) is None:
            raise UsageError(f"--set unit: unknown unit {out['unit']!r}; expected one of "
                             f"{', '.join(sorted(UNIT_SPELLINGS))}")
        # A value typed once labels every record of a file, so a typo there is refused rather
        # than stored (a file's own values are kept as its harness names them).
        for key, known in (("statistic", STATISTICS), ("pass", SET_PASSES)):
            if key in out and out[key] not in known:
                raise UsageError(f"--set {key}: unknown {key} {out[key]!r}; expected one of "
                                 f"{', '.join(known)}")
        if "gpu" in out and not lookup_gpu(out["gpu"]).known:
            family = [g.key for g in gpu_catalog().values() if g.family == out["gpu"].lower()]
            close = family if len(family) > 1 else closest_gpus(out["gpu"])
            raise UsageError(
                f"--set gpu: unknown GPU {out['gpu']!r}; "
                + (f"it is a family of {len(family)} cards: name one of "
                   f"{', '.join(map(repr, family))}. " if len(family) > 1 else
                   f"did you mean {' or '.join(map(repr, close))}? " if close else "")
                + "`kidata sql \"select gpu, product, form_factor from gpus\"` lists the GPUs "
                "kidata knows; a GPU it does not know goes in a GPU file named by $KIDATA_GPUS "
                "(docs/formats.md, \"GPUs kidata does not know\")")
        return out

    @classmethod
    def of(cls, settings: Mapping[str, str] | None) -> Settings:
        """A library caller's ``settings`` dict, checked as ``--set`` pairs are."""
        return cls.parse([f"{k}={v}" for k, v in (settings or {}).items()])

    def label(self) -> str:
        """A stable text for the load's file memory: the same file read with other settings is
        another input."""
        return ";".join(f"{k}={v}" for k, v in sorted(self.items()))


def parse_time(text: str, where: str) -> datetime:
    """An ISO 8601 time (a date alone is midnight); without a zone it is read as UTC."""
    try:
        ts = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{where}: expected an ISO 8601 time such as 2025-01-31T12:00:00Z, "
                         f"got {text!r}") from None
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


@dataclass(frozen=True)
class Harness:
    """What a source's BenchmarkProtocol says: one per harness, pass and primary statistic."""

    source: str          # sourceNative.source and the prefix of run names, e.g. "flashinfer"
    name: str            # the harness, e.g. "flashinfer_benchmark.py"
    repository: str
    family: str          # comparability family: runs compare only within one
    notes: str           # how it measures, what the numbers mean
    timer: str | None = None


@dataclass
class Measured:
    """One measured row, in the source's own units, before any check.

    ``stats`` maps a statistic (:data:`STATISTICS`) to its value in ``unit``, as text or a
    number (text keeps the exact decimal for the ns conversion). ``identity`` names what tells
    this row apart from the others of the same key in one file (a repetition, a commit).
    """

    kernel: str | None
    implementation: str | None
    workload: dict[str, Any]
    unit: str | None
    stats: dict[str, Any] = field(default_factory=dict)
    pass_: str | None = None
    variant: str | None = None
    slug: str | None = None
    gpu: str | None = None
    observed_at: str | datetime | None = None
    version: str | None = None
    samples: int | None = None
    raw_samples: list[float] | None = None
    # Rounding step of the values, in ``unit``: one for all, or {statistic: step}.
    resolution: Any = None
    extra: list[tuple[str, str, Any]] = field(default_factory=list)  # (unit, statistic, value)
    identity: list[str] = field(default_factory=list)
    native: dict[str, Any] = field(default_factory=dict)
    published: list[dict[str, Any]] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    title: str | None = None
    timer: str | None = None        # overrides the harness's timer (one protocol per timer)


def decimal_number(value: Any, field_name: str, fail) -> Decimal:
    """``value`` (a number, or its text) as an exact decimal; ``fail(field_name, message)``
    for anything else, a non-finite value or one beyond 1e±30."""
    if isinstance(value, bool):
        raise fail(field_name, f"expected a number, got {shown(value)}")
    try:
        number = Decimal(value.strip()) if isinstance(value, str) else Decimal(repr(value)) \
            if isinstance(value, float) else Decimal(value)
    except (InvalidOperation, TypeError, ValueError):
        raise fail(field_name, f"expected a number, got {shown(value)}") from None
    if not number.is_finite():
        raise fail(field_name, f"expected a finite number, got {shown(value)} (a harness writes "
                               "nan or inf when a case produced no result)")
    # Beyond any measurement (and a 10^999999999 would take ages to turn into an integer).
    if number and not -30 <= number.adjusted() <= 30:
        raise fail(field_name, f"expected a number between 1e-30 and 1e30, got {shown(value)}")
    return number


def summarise(samples: list[float]) -> dict[str, float]:
    """median, mean, min, max and (with two or more samples) the sample stddev."""
    ordered = sorted(samples)
    n = len(ordered)
    mid = n // 2
    median = ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    mean = sum(ordered) / n
    out = {"median": median, "mean": mean, "min": ordered[0], "max": ordered[-1]}
    if n > 1:
        out["stddev"] = math.sqrt(sum((x - mean) ** 2 for x in ordered) / (n - 1))
    return out


def workload_slug(params: Mapping[str, Any]) -> str:
    """A readable workload name from its parameters, in the source's order:
    ``{"batch_size": 1, "dtype": "bf16"}`` -> ``batch-size1-dtype-bf16``."""
    parts = []
    for name, value in params.items():
        key = slugify(name)
        if isinstance(value, bool):
            parts.append(key if value else f"no-{key}")
        elif isinstance(value, int | float):
            text = repr(value).replace("-", "neg").replace(".", "p").replace("+", "")
            parts.append(f"{key}{text}")
        elif value is None:
            continue
        else:
            parts.append(f"{key}-{slugify(str(value)) or 'empty'}")
    return "-".join(p for p in parts if p) or "default"


def run_identity(*, source: str, kernel: str, pass_: str, implementation: str,
                 variant: str | None, gpu: str, workload: Mapping[str, Any], metric: str,
                 identity: list[str], observed_at: str | None, version: str | None,
                 numbers: str | None) -> str:
    """A run's ``sourceNative.externalId``: the canonical JSON (:func:`canonical_json`: keys
    sorted, no spaces, UTF-8) of an object of its exact values, so two runs share it only when
    every value is equal: the workload's parameters themselves (not their slug), text as its
    exact code points (kidata does not normalise case, separators or Unicode forms), numbers
    as JSON numbers (``1`` and ``1.0`` differ; a reader decides which text is a number)."""
    return canonical_json({
        "source": source, "kernel": kernel, "pass": pass_, "implementation": implementation,
        "variant": variant, "gpu": gpu, "workload": dict(workload), "metric": metric,
        "identity": list(identity), "observedAt": observed_at, "version": version,
        "numbers": numbers})


def numbers_fingerprint(measurements: list[dict[str, Any]]) -> str:
    """16 hex digits of the SHA-256 of the canonical JSON of the run's measurements as
    ``[metric, statistic, unit, value]`` rows, sorted."""
    rows = sorted([r["metric"], r["statistic"], r["unit"], r["value"]] for r in measurements)
    return hashlib.sha256(canonical_json(rows).encode("utf-8")).hexdigest()[:16]


def run_name_of(readable: str, external_id: str) -> str:
    """``metadata.name``: a readable slug prefix (at most 150 characters) and 16 hex digits of
    the SHA-256 of the externalId (which names the source), so the name is as unambiguous as
    the externalId and a slug never decides identity."""
    return f"{readable[:150]}-{hashlib.sha256(external_id.encode('utf-8')).hexdigest()[:16]}"


def typed(text: str) -> Any:
    """A parameter from text: int, float, bool (``True``/``False``/``true``/``false``) or the
    text itself."""
    t = text.strip()
    if t in ("True", "true"):
        return True
    if t in ("False", "false"):
        return False
    try:
        number = int(t)
    except ValueError:
        pass
    else:  # an integer beyond 64 bits stays text (JSON tools and Parquet take 64 bits)
        return number if -(2 ** 63) <= number < 2 ** 63 else t
    try:
        value = float(t)
    except ValueError:
        return t
    if not math.isfinite(value):
        return t
    return int(value) if value.is_integer() and ("e" not in t.lower()) and "." in t else value


class Builder:
    """Builds the items of one file; shared documents are built once and digested once."""

    def __init__(self, harness: Harness, file: str, settings: Mapping[str, str] | None = None):
        self.harness = harness
        self.file = file
        self.settings = dict(settings or {})
        self._cache: dict[tuple, tuple[dict, str]] = {}

    def _doc(self, key: tuple, build) -> tuple[dict, str]:
        found = self._cache.get(key)
        if found is None:
            doc = build()
            found = self._cache[key] = (doc, digest(doc))
        return found

    def protocol(self, pass_: str, primary: str, timer: str | None = None
                 ) -> tuple[dict, str]:
        h = self.harness
        timer = timer or h.timer

        def build() -> dict:
            measurement: dict[str, Any] = {"primaryStatistic": primary}
            if timer:
                measurement["timer"] = timer
            return document(
                "BenchmarkProtocol",
                f"{h.source}-{slugify(pass_)}-{primary}" + (f"-{slugify(timer)}" if timer
                                                            and timer != h.timer else ""),
                f"{h.name} · {pass_} · {primary}" + (f" · {timer}" if timer else ""),
                {"harness": {"name": h.name, "repository": h.repository},
                 "measurement": measurement,
                 "comparability": {"family": h.family, "notes": h.notes}})
        return self._doc(("protocol", pass_, primary, timer), build)

    def item(self, m: Measured, position: str, raw: str | None = None) -> Item:
        """The bundle of one measured row; raises :class:`RecordError` naming the field (or the
        ``--set`` option) when something required is missing or is not a measurement."""
        file = self.file

        def fail(field_name: str | None, message: str) -> RecordError:
            return RecordError(file, position, field_name, message)

        case = self._case(m, fail)
        measurements, native_values, values = _measurements(m, case, self.settings, fail)
        primary = "median" if "median" in values else "mean" if "mean" in values \
            else next(iter(values))
        _add_resolution(m, case, measurements, values, fail)
        _add_extra(m, measurements, fail)
        params, spelled = self._parameters(m)
        for name, value in params.items():
            # Checked before the slug and the document key, whose str()/repr() of a value
            # nested ~1,000 deep recursed past Python's limit (fuzzed pytorch-v3 input); the
            # workload document holds it three levels down.
            if nesting_depth(value) > MAX_DEPTH - 3:
                raise fail(name, f"nested deeper than {MAX_DEPTH - 3} levels; kidata stores "
                                 f"documents up to {MAX_DEPTH} levels deep")
        slug = m.slug or workload_slug(params)
        h = self.harness

        gpu = lookup_gpu(case.gpu_name)  # an unknown GPU is warned about by ingest.flatten
        software = {k: self.settings[k] for k in SOFTWARE_FACTS if k in self.settings}
        env, env_digest = self._doc(("env", gpu.key, case.gpu_name), lambda: environment_document(
            gpu, f"{h.source}-{gpu.key}", f"{h.name} host · {case.gpu_name}", software))
        protocol, protocol_digest = self.protocol(case.pass_, primary, m.timer)
        workload, workload_digest = self._doc(
            ("workload", case.kernel, slug, repr(sorted(params.items(), key=lambda kv: kv[0]))),
            lambda: document("Workload", f"{h.source}-{slugify(case.kernel)}-{slug}"[:200],
                             f"{case.kernel} · {slug}",
                             {"kernel": case.kernel, "name": slug, "parameters": params}))
        when = case.observed.isoformat(timespec="milliseconds").replace("+00:00", "Z") \
            if isinstance(case.observed, datetime) else None
        external_id = self._external_id(case, gpu.key, params, m.identity, when, measurements)
        native: dict[str, Any] = {"source": h.source, "benchmark": f"{case.kernel}/{case.pass_}",
                                  "externalId": external_id, "unit": case.unit_text,
                                  "values": native_values}
        if spelled:
            native["dtypeSpellings"] = spelled
        if m.raw_samples:
            native["samples"] = m.raw_samples
        if m.published:
            native["published"] = m.published
        native.update(m.native)
        spec = _spec(case.metric, primary, values, when, measurements, native)
        spec["protocolDigest"] = protocol_digest
        spec["workloadDigest"] = workload_digest
        spec["environmentDigest"] = env_digest
        run = self._run(m, case, slug, gpu.key, external_id, spec)
        return Item(file, position, {"run": run, "protocol": protocol, "environment": env,
                                     "workload": workload}, raw, title=case.implementation)

    def _case(self, m: Measured, fail) -> _Case:
        """What the record says of its case, ``--set`` supplying what it lacks (readers that
        derive a value from the file's name let ``--set`` override that guess themselves);
        refuses a missing kernel, implementation, GPU or unit, an unknown unit, a bad time."""
        s = self.settings
        kernel = m.kernel or s.get("kernel")
        implementation = m.implementation or s.get("implementation")
        gpu_name = m.gpu or s.get("gpu")
        unit_text = m.unit or s.get("unit")
        # What names the case is text: a number or a list where the file should give a name
        # crashed the load further on (a GPU name of 1.5: fuzzed KernelBench input).
        for value, key in ((kernel, "kernel"), (implementation, "implementation"),
                           (gpu_name, "gpu"), (unit_text, "unit"), (m.pass_, "pass"),
                           (m.variant, "variant"), (m.version, "version")):
            if value is not None and not isinstance(value, str):
                raise fail(key, f"expected a string, got {shown(value)}")
        for value, key in ((kernel, "kernel"), (implementation, "implementation"),
                           (gpu_name, "gpu"), (unit_text, "unit")):
            if not value or not value.strip():
                raise fail(key, f"the file does not say the {key}; supply it with "
                                f"--set {key}=...")
        found_unit = unit_of(unit_text)
        if found_unit is None:
            raise fail("unit", f"unknown unit {shown(unit_text)}; expected one of "
                               f"{', '.join(sorted(UNIT_SPELLINGS))} (--set unit=... "
                               "overrides the file's)")
        observed = m.observed_at or s.get("observed_at")
        if isinstance(observed, str):
            try:
                observed = parse_time(observed, "observed_at")
            except UsageError as exc:
                raise fail("observed_at", str(exc)) from None
        elif observed is not None and not isinstance(observed, datetime):
            # A number or a list where the file gives a time was dropped without a word.
            raise fail("observed_at", "expected an ISO 8601 time such as 2025-01-31T12:00:00Z, "
                                      f"got {shown(observed)}")
        return _Case(kernel, implementation, m.pass_ or s.get("pass") or "forward",
                     m.variant or s.get("variant"), gpu_name, unit_text,
                     m.version or s.get("version"), found_unit[0], found_unit[1], observed)

    def _parameters(self, m: Measured) -> tuple[dict[str, Any], dict[str, str]]:
        """The workload's parameters (empty ones dropped, dtypes in one spelling, ``--set
        dtype`` when the record names none) and the dtype spellings the source used."""
        params: dict[str, Any] = {}
        spelled: dict[str, str] = {}
        for name, value in m.workload.items():
            if value is None or value == "":
                continue
            if isinstance(value, str) and is_dtype_parameter(name):
                canonical = normalise_dtype(value)
                if canonical != value:
                    spelled[name] = value
                value = canonical
            params[name] = value
        if self.settings.get("dtype") and "dtype" not in params:
            params["dtype"] = normalise_dtype(self.settings["dtype"])
        return params, spelled

    def _external_id(self, case: _Case, gpu_key: str, params: dict[str, Any],
                     identity: list, when: str | None, measurements: list[dict]) -> str:
        """The run's identity: what tells runs of this source apart, as exact values (never
        the slug, never a delimiter join: docs/formats.md, "Identity"). A time when known;
        else the version and a fingerprint of the numbers, so a re-load adds nothing and a
        newer file with new numbers for the same case adds a run rather than a conflict."""
        return run_identity(
            source=self.harness.source, kernel=case.kernel, pass_=case.pass_,
            implementation=case.implementation, variant=case.variant, gpu=gpu_key,
            workload=params, metric=case.metric, identity=[str(p) for p in identity],
            observed_at=when, version=None if when else case.version,
            numbers=None if when else numbers_fingerprint(measurements))

    def _run(self, m: Measured, case: _Case, slug: str, gpu_key: str, external_id: str,
             spec: dict[str, Any]) -> dict:
        """The run document: its name, title and labels."""
        h = self.harness
        readable = slugify("-".join([h.source, case.kernel, case.pass_, case.implementation,
                                     gpu_key]))
        labels = {"kernel": case.kernel, "pass": case.pass_,
                  "implementation": case.implementation, "workload": slug,
                  "gpu_name": case.gpu_name, **m.labels}
        if case.variant:
            labels["variant"] = case.variant
        if case.version:
            labels["version"] = case.version
        title = m.title or f"{case.kernel} · {case.implementation} · {slug}"
        return document("BenchmarkRun", run_name_of(readable, external_id), title, spec, labels)


@dataclass(frozen=True)
class _Case:
    """One measured row's case as :meth:`Builder.item` builds it: the record's values, else
    ``--set``'s, checked; ``metric`` and ``stored_unit`` are what its unit measures and how
    kidata stores it; ``observed`` a time, or None."""

    kernel: str
    implementation: str
    pass_: str
    variant: str | None
    gpu_name: str
    unit_text: str
    version: str | None
    metric: str
    stored_unit: str
    observed: datetime | None


def _measurements(m: Measured, case: _Case, settings: Mapping[str, str], fail
                  ) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, int | float]]:
    """The row's measurements (statistics exact, in the stored unit; then the sample count),
    the values as the source gave them, and the stored values by statistic. A failure (0,
    negative, nan) is not a number; a row with no measured value is refused."""
    metric, unit_text = case.metric, case.unit_text
    stats = dict(m.stats)
    if "statistic" in settings and list(stats) == ["median"]:
        stats = {settings["statistic"]: stats["median"]}
    if m.raw_samples:
        # Each sample in the range every statistic is held to, before they are summed (two of
        # 1e308 overflowed the squared deviations: fuzzed google-benchmark input).
        for i, sample in enumerate(m.raw_samples):
            decimal_number(sample, f"samples[{i}]", fail)
        for k, v in summarise(m.raw_samples).items():
            stats.setdefault(k, v)
    measurements: list[dict[str, Any]] = []
    native_values: dict[str, Any] = {}
    values: dict[str, int | float] = {}
    for statistic, value in stats.items():
        if value is None:
            continue
        number = decimal_number(value, statistic, fail)
        if number < 0 or (number == 0 and statistic not in ZERO_ALLOWED):
            raise fail(statistic, f"{value!r} is not a {metric} (the harness writes 0 or "
                                  "a negative number when a case failed or was not "
                                  "measured)")
        native_values[statistic] = int(number) if number == number.to_integral_value() \
            and abs(number) < 2 ** 53 else float(number)
        if metric == "latency":
            number = number * latency_factor(unit_text)
        values[statistic] = _plain(number)
        measurements.append({"metric": metric, "statistic": statistic,
                             "unit": case.stored_unit, "value": values[statistic]})
    if not measurements:
        raise fail(None, "no measured value in this record")
    if m.samples is not None or m.raw_samples:
        count = m.samples if m.samples is not None else len(m.raw_samples or [])
        measurements.append({"metric": metric, "statistic": "samples", "unit": "count",
                             "value": int(count)})
    return measurements, native_values, values


def _add_resolution(m: Measured, case: _Case, measurements: list[dict[str, Any]],
                    values: dict[str, int | float], fail) -> None:
    """Give each measured statistic its rounding step (``m.resolution``: one for all, or by
    statistic), in the stored unit; a step of 0 is none."""
    if m.resolution is None:
        return
    steps = m.resolution if isinstance(m.resolution, dict) \
        else {k: m.resolution for k in values}
    for row in measurements:
        step = steps.get(row["statistic"])
        if step is None or row["statistic"] == "samples":
            continue
        res = decimal_number(step, "resolution", fail)
        if case.metric == "latency":
            res = res * latency_factor(case.unit_text)
        if res > 0:
            row["resolution"] = _plain(res)


def _add_extra(m: Measured, measurements: list[dict[str, Any]], fail) -> None:
    """Add the row's other quantities (``m.extra``: throughput and the like, each in its own
    unit); a value of 0 or less means "not computed" and is left out."""
    for extra_unit, statistic, value in m.extra:
        if value is None:
            continue
        found = unit_of(extra_unit)
        if found is None:
            raise fail(extra_unit, f"unknown unit {extra_unit!r}")
        number = decimal_number(value, f"{found[0]}.{statistic}", fail)
        if number <= 0:
            continue  # e.g. FlashInfer's tflops 0: "not computed", not a throughput
        measurements.append({"metric": found[0], "statistic": statistic,
                             "unit": found[1], "value": _plain(number)})


def _spec(metric: str, primary: str, values: dict[str, int | float], when: str | None,
          measurements: list[dict[str, Any]], native: dict[str, Any]) -> dict[str, Any]:
    """The run's spec up to its digests, keys in the order kidata has always written them."""
    spec: dict[str, Any] = {"status": "passed"}
    if when:
        spec["observedAt"] = when
    timing: dict[str, Any] = {"primaryStatistic": primary}
    if metric == "latency" and "median" in values:
        timing["latencyNs"] = {"median": values["median"]}
    spec["timing"] = timing
    spec["measurements"] = measurements
    spec["sourceNative"] = native
    return spec
