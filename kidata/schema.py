"""The warehouse tables, declared once as Arrow schemas.

Every table is a folder of Parquet files under the warehouse. These schemas are used to write
the files, to check a warehouse (``kidata check``) and to generate ``docs/tables.md``. Each
field carries its description in the Arrow field metadata (key ``description``).
"""

from __future__ import annotations

import pyarrow as pa

TS = pa.timestamp("us", tz="UTC")


def _f(name: str, type_: pa.DataType, description: str, nullable: bool = True) -> pa.Field:
    return pa.field(name, type_, nullable=nullable, metadata={"description": description})


_PROVENANCE = [
    _f("source_file", pa.string(), "Path of the input file the row was read from.", False),
    _f("loaded_at", TS, "When the load that added the row committed (UTC).", False),
    _f("load_id", pa.string(), "Identifier of the load (commit) that added the row.", False),
]

RUNS = pa.schema(
    [
        _f("run_id", pa.string(), "Run identity: the kernelindex `metadata.name`.", False),
        _f("source", pa.string(), "Producer of the result (`sourceNative.source`), "
           "e.g. `liger-kernel-bench`, `trainkernel-results`."),
        _f("external_id", pa.string(), "The source's own id of the result (`sourceNative.externalId`)."),
        _f("kernel", pa.string(), "Kernel benchmarked, e.g. `rms_norm`.", False),
        _f("pass", pa.string(), "Timed pass: `forward`, `backward`, `full`, `no-grad-forward` "
           "(Liger), `step` (a whole training step: forward, loss, backward, update).", False),
        _f("implementation", pa.string(), "Implementation key, e.g. `liger`, `torch`, `trainkernel`, "
           "`inductor`.", False),
        _f("variant", pa.string(), "Variant of the implementation (a schedule), or null."),
        _f("workload", pa.string(), "Workload name/slug as the source names it, e.g. "
           "`hidden4096-rows2048-bf16`, `tiny-online`.", False),
        _f("gpu", pa.string(), "Canonical GPU key (one per physical card), e.g. `a100-sxm4-80gb`.", False),
        _f("gpu_name", pa.string(), "The GPU name as the source wrote it."),
        _f("metric", pa.string(), "The run's primary metric: `latency` or `memory`.", False),
        _f("environment_id", pa.string(), "`sha256:` digest of the ExecutionEnvironment document."),
        _f("protocol_id", pa.string(), "`sha256:` digest of the BenchmarkProtocol document."),
        _f("workload_id", pa.string(), "`sha256:` digest of the Workload document."),
        _f("implementation_id", pa.string(), "`sha256:` digest of the Implementation document."),
        _f("observed_at", TS, "When the result was measured (UTC), null when the source does not say."),
        _f("status", pa.string(), "Run status as recorded, e.g. `passed`.", False),
        _f("version", pa.string(), "Release of the implementation or harness (e.g. the Liger "
           "version), from the run's labels."),
        _f("title", pa.string(), "Human-readable title (`metadata.title`)."),
        _f("labels", pa.string(), "All `metadata.labels` as a JSON object."),
        _f("content_hash", pa.string(), "Hash of the run's numbers; the same run_id with another "
           "hash is a conflict.", False),
        _f("document", pa.string(), "The BenchmarkRun document as loaded (JSON), for lossless export.", False),
        *_PROVENANCE,
    ]
)

MEASUREMENTS = pa.schema(
    [
        _f("run_id", pa.string(), "The run this number belongs to.", False),
        _f("metric", pa.string(), "`latency` or `memory`.", False),
        _f("statistic", pa.string(), "`median`, `p20`, `p80`, … .", False),
        _f("unit", pa.string(), "One unit per metric: `ns` for latency, `MB` for memory.", False),
        _f("value", pa.float64(), "The number, in `unit`.", False),
        _f("resolution", pa.float64(), "Rounding step of the value as published, in `unit` "
           "(e.g. 10 ns for latencies published to 0.01 µs); null when unknown."),
        _f("load_id", pa.string(), "Identifier of the load (commit) that added the row.", False),
    ]
)

ENVIRONMENTS = pa.schema(
    [
        _f("environment_id", pa.string(), "`sha256:` digest of the document without its metadata.", False),
        _f("name", pa.string(), "`metadata.name` of the first document loaded with this digest."),
        _f("title", pa.string(), "`metadata.title`."),
        _f("gpu", pa.string(), "Canonical GPU key.", False),
        _f("vendor", pa.string(), "`spec.hardware.vendor`."),
        _f("product", pa.string(), "`spec.hardware.product`."),
        _f("form_factor", pa.string(), "`spec.hardware.formFactor`."),
        _f("architecture", pa.string(), "`spec.hardware.architecture`, e.g. `sm_90`."),
        _f("software", pa.string(), "`spec.software` as JSON."),
        _f("document", pa.string(), "The whole document (JSON).", False),
        *_PROVENANCE,
    ]
)

PROTOCOLS = pa.schema(
    [
        _f("protocol_id", pa.string(), "`sha256:` digest of the document without its metadata.", False),
        _f("name", pa.string(), "`metadata.name`."),
        _f("title", pa.string(), "`metadata.title`."),
        _f("family", pa.string(), "`spec.comparability.family`: results compare only within one family.", False),
        _f("harness", pa.string(), "`spec.harness.name`."),
        _f("repository", pa.string(), "`spec.harness.repository`."),
        _f("timer", pa.string(), "`spec.measurement.timer`."),
        _f("primary_statistic", pa.string(), "`spec.measurement.primaryStatistic`."),
        _f("notes", pa.string(), "`spec.comparability.notes`."),
        _f("document", pa.string(), "The whole document (JSON).", False),
        *_PROVENANCE,
    ]
)

WORKLOADS = pa.schema(
    [
        _f("workload_id", pa.string(), "`sha256:` digest of the Workload document (the run's "
           "`workloadDigest` when only the digest is known).", False),
        _f("name", pa.string(), "Workload name/slug, as in `runs.workload`.", False),
        _f("kernel", pa.string(), "Kernel the workload is for."),
        _f("parameters", pa.string(), "Named parameters as a JSON object (null when only the "
           "digest is known)."),
        _f("shape", pa.string(), "Shape as given by the source (JSON list), or null."),
        _f("document", pa.string(), "The Workload document (JSON), null when not supplied."),
        *_PROVENANCE,
    ]
)

WORKLOAD_PARAMETERS = pa.schema(
    [
        _f("workload_id", pa.string(), "The workload (`workloads.workload_id`).", False),
        _f("name", pa.string(), "Parameter name as the source writes it, e.g. `M`, `H`, "
           "`dtype`.", False),
        _f("value", pa.float64(), "The value when it is a number (booleans are not), else null."),
        _f("text", pa.string(), "The value when it is not a number: a string as written, "
           "`true`/`false`, or JSON for lists and objects; null for numbers."),
        _f("load_id", pa.string(), "Identifier of the load (commit) that added the row.", False),
    ]
)

# Reference tables: written into the warehouse from kidata's data files (kidata/reference.py),
# not by loads, so that the views that need them run unchanged in any engine.
GPUS = pa.schema(
    [
        _f("gpu", pa.string(), "Canonical GPU key, as in `runs.gpu`.", False),
        _f("vendor", pa.string(), "Vendor, e.g. `nvidia`.", False),
        _f("product", pa.string(), "Product name, e.g. `NVIDIA H100`.", False),
        _f("form_factor", pa.string(), "Form factor, e.g. `SXM4-80GB`."),
        _f("architecture", pa.string(), "Compute architecture, e.g. `sm_90`."),
        _f("memory_bandwidth_gbps", pa.float64(), "Published peak memory bandwidth (GB/s, "
           "10^9 bytes/s); null when not in the catalog."),
        _f("bf16_dense_tflops", pa.float64(), "Published dense BF16 tensor peak (TFLOP/s); null "
           "when not in the catalog."),
    ]
)

DTYPES = pa.schema(
    [
        _f("name", pa.string(), "A dtype as sources write it, e.g. `torch.bfloat16`.", False),
        _f("bytes", pa.int64(), "Bytes per element.", False),
    ]
)

BYTE_MODELS = pa.schema(
    [
        _f("kernel", pa.string(), "Kernel the model is for, as in `runs.kernel`.", False),
        _f("pass", pa.string(), "Timed pass, as in `runs.pass`.", False),
        _f("term", pa.string(), "What the term counts, e.g. `read X (M x H)`.", False),
        _f("coefficient", pa.float64(), "How many times the tensor is moved.", False),
        _f("dtype_parameter", pa.string(), "Workload parameter naming the element dtype (e.g. "
           "`dtype`); null when `dtype` is fixed."),
        _f("dtype", pa.string(), "Fixed element dtype, when the benchmark does not make it a "
           "parameter."),
        _f("factor_1", pa.string(), "First workload parameter multiplied in; null for none."),
        _f("factor_2", pa.string(), "Second workload parameter multiplied in; null for none."),
        _f("factor_3", pa.string(), "Third workload parameter multiplied in; null for none."),
    ]
)

PUBLISHED = pa.schema(
    [
        _f("run_id", pa.string(), "The candidate run the published number is about.", False),
        _f("baseline_run_id", pa.string(), "The baseline run, for ratios."),
        _f("quantity", pa.string(), "What was published, e.g. `latency_ratio`.", False),
        _f("definition", pa.string(), "How the source derived it, e.g. "
           "`trainkernel_us / inductor_us`."),
        _f("value", pa.float64(), "The published value.", False),
        _f("resolution", pa.float64(), "Rounding step of the published value (e.g. 0.001)."),
        *_PROVENANCE,
    ]
)

REJECTS = pa.schema(
    [
        _f("source_file", pa.string(), "File the rejected record came from.", False),
        _f("position", pa.string(), "Record position: `line N`, `row N`, `index N`, `document`.", False),
        _f("field", pa.string(), "Field or column at fault, when one is."),
        _f("reason", pa.string(), "What was wrong and what was expected.", False),
        _f("raw", pa.string(), "The raw record text (truncated to 64 KiB)."),
        _f("loaded_at", TS, "When the load committed (UTC).", False),
        _f("load_id", pa.string(), "The load that rejected it.", False),
    ]
)

LATEST_RUNS = pa.schema(
    [
        _f("kernel", pa.string(), "Kernel, as in `runs.kernel`.", False),
        _f("pass", pa.string(), "Timed pass, as in `runs.pass`.", False),
        _f("workload", pa.string(), "Workload, as in `runs.workload`.", False),
        _f("gpu", pa.string(), "Canonical GPU key, as in `runs.gpu`.", False),
        _f("protocol_id", pa.string(), "The runs' protocol digest, as in `runs.protocol_id`."),
        _f("implementation", pa.string(), "Implementation, as in `runs.implementation`.", False),
        _f("variant", pa.string(), "Variant, as in `runs.variant`."),
        _f("run_id", pa.string(), "The latest passed latency run of this key among the runs the "
           "load added: greatest `observed_at` (none last), ties broken by the greatest "
           "`run_id`.", False),
        _f("observed_at", TS, "That run's `observed_at`."),
        _f("median_us", pa.float64(), "That run's median latency (µs).", False),
        _f("p20_us", pa.float64(), "That run's 20th-percentile latency (µs), null when not "
           "measured."),
        _f("p80_us", pa.float64(), "That run's 80th-percentile latency (µs), null when not "
           "measured."),
        _f("passed_runs", pa.int64(), "Passed latency runs of this key the load added.", False),
        _f("load_id", pa.string(), "The load whose runs these are.", False),
    ]
)

LOADS = pa.schema(
    [
        _f("load_id", pa.string(), "Identifier of the load (commit); every row a load added "
           "carries it.", False),
        _f("loaded_at", TS, "When the load committed (UTC).", False),
        _f("kidata_version", pa.string(), "Version of kidata that wrote the load.", False),
        _f("files", pa.int64(), "Input files read.", False),
        _f("records", pa.int64(), "Records read (added, duplicate or rejected).", False),
        _f("added", pa.string(), "Rows the load added, per table, as a JSON object, e.g. "
           "`{\"runs\": 2, \"measurements\": 6}`.", False),
        _f("duplicates", pa.int64(), "Runs skipped because the warehouse already had them.", False),
        _f("rejected", pa.int64(), "Records rejected (see `rejects`).", False),
        _f("warnings", pa.int64(), "Warnings reported (e.g. unknown GPUs).", False),
    ]
)

TABLES: dict[str, pa.Schema] = {
    "runs": RUNS,
    "measurements": MEASUREMENTS,
    "environments": ENVIRONMENTS,
    "protocols": PROTOCOLS,
    "workloads": WORKLOADS,
    "workload_parameters": WORKLOAD_PARAMETERS,
    "published": PUBLISHED,
    "latest_runs": LATEST_RUNS,
    "rejects": REJECTS,
    "loads": LOADS,
    "gpus": GPUS,
    "dtypes": DTYPES,
    "byte_models": BYTE_MODELS,
}

# Identity of a row in each table: loading the same key twice adds nothing.
KEYS: dict[str, tuple[str, ...]] = {
    "runs": ("run_id",),
    "measurements": ("run_id", "metric", "statistic"),
    "environments": ("environment_id",),
    "protocols": ("protocol_id",),
    "workloads": ("workload_id",),
    "workload_parameters": ("workload_id", "name"),
    "published": ("run_id", "quantity", "baseline_run_id"),
    "latest_runs": ("load_id", "kernel", "pass", "workload", "gpu", "protocol_id",
                    "implementation", "variant"),
    "rejects": ("source_file", "position", "field", "reason", "raw"),
    "loads": ("load_id",),
    "gpus": ("gpu",),
    "dtypes": ("name",),
    "byte_models": ("kernel", "pass", "term"),
}

# Tables written from kidata's data files rather than by loads (see kidata/reference.py).
REFERENCE = ("gpus", "dtypes", "byte_models")

# Order in which a commit makes its files visible. Dimension tables and measurements first,
# runs (the table every view starts from) after them, so a reader never sees a run whose
# measurements are missing. ``loads`` comes last: its row is the load's commit marker, and
# kidata's readers show only rows of loads listed there. ``latest_runs`` (derived from the
# load's runs, see kidata/derived.py) follows runs. See docs/guarantees.md.
COMMIT_ORDER = ("environments", "protocols", "workloads", "workload_parameters", "measurements",
                "published", "runs", "latest_runs", "rejects", "loads")


def description(field: pa.Field) -> str:
    meta = field.metadata or {}
    return meta.get(b"description", b"").decode()


# Staged only, for the commit to derive latest_runs without joining measurements: a run's
# latency median, p20 and p80 in ns (null when it has none), as its measurements rows hold them.
STAGED_LATENCY = ("_latency_median", "_latency_p20", "_latency_p80")


def staged_schema(table: str) -> pa.Schema:
    """A table's rows while a load stages them: without the commit's own columns, with the
    record's order (``_seq``) and position (``_position``) for dedupe and error messages, and
    for runs their latency quantiles (``STAGED_LATENCY``)."""
    fields = [f for f in TABLES[table] if f.name not in ("loaded_at", "load_id")]
    extra = [pa.field(n, pa.float64()) for n in STAGED_LATENCY] if table == "runs" else []
    return pa.schema([*fields, pa.field("_seq", pa.int64()), pa.field("_position", pa.string()),
                      *extra])
