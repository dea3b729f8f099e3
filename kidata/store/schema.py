"""The warehouse tables, declared once.

Every table is a folder of Parquet files under the warehouse. The declarations here (column
name, type, description, nullability) are plain Python, so a query can define its views
without importing pyarrow (a fifth of a second of every ``kidata sql``'s start-up). The Arrow
schemas built from them (``TABLES``, built on first use) are used to write the files, to check
a warehouse (``kidata check``) and to generate ``docs/tables.md``; each Arrow field carries its
description in the field metadata (key ``description``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import pyarrow as pa

# Column types, by Arrow name; DUCKDB_TYPES gives each one's DuckDB type.
STRING, FLOAT64, INT64, TS, BOOL = "string", "float64", "int64", "timestamp", "bool"
DUCKDB_TYPES = {STRING: "VARCHAR", FLOAT64: "DOUBLE", INT64: "BIGINT",
                TS: "TIMESTAMP WITH TIME ZONE", BOOL: "BOOLEAN"}


class Column(NamedTuple):
    name: str
    type: str  # one of DUCKDB_TYPES' keys
    description: str
    nullable: bool = True


def _f(name: str, type_: str, description: str, nullable: bool = True) -> Column:
    return Column(name, type_, description, nullable)


_PROVENANCE = [
    _f("source_file", STRING, "Path of the input file the row was read from.", False),
    _f("loaded_at", TS, "When the load that added the row started (UTC): the time its `load_id` "
       "begins with (until 0.2.4: when it committed).", False),
    _f("load_id", STRING, "Identifier of the load (commit) that added the row.", False),
]

RUNS = (
    _f("run_id", STRING, "Run identity: the kernelindex `metadata.name`.", False),
    _f("source", STRING, "Producer of the result (`sourceNative.source`), "
       "e.g. `liger-kernel-bench`, `trainkernel-results`."),
    _f("external_id", STRING, "The source's own id of the result (`sourceNative.externalId`)."),
    _f("kernel", STRING, "Kernel benchmarked, e.g. `rms_norm`.", False),
    _f("pass", STRING, "Timed pass: `forward`, `backward`, `full`, `no-grad-forward` "
       "(Liger), `step` (a whole training step: forward, loss, backward, update).", False),
    _f("implementation", STRING, "Implementation key, e.g. `liger`, `torch`, `trainkernel`, "
       "`inductor`.", False),
    _f("variant", STRING, "Variant of the implementation (a schedule), or null."),
    _f("workload", STRING, "Workload name/slug as the source names it, e.g. "
       "`hidden4096-rows2048-bf16`, `tiny-online`.", False),
    _f("gpu", STRING, "Canonical GPU key (one per physical card), e.g. `a100-sxm4-80gb`.", False),
    _f("gpu_name", STRING, "The GPU name as the source wrote it."),
    _f("metric", STRING, "The run's primary metric: `latency` or `memory`.", False),
    _f("environment_id", STRING, "`sha256:` digest of the ExecutionEnvironment document."),
    _f("protocol_id", STRING, "`sha256:` digest of the BenchmarkProtocol document."),
    _f("workload_id", STRING, "`sha256:` digest of the Workload document."),
    _f("implementation_id", STRING, "`sha256:` digest of the Implementation document."),
    _f("observed_at", TS, "When the result was measured (UTC), null when the source does not say."),
    _f("status", STRING, "Run status as recorded, e.g. `passed`.", False),
    _f("version", STRING, "Release of the implementation or harness (e.g. the Liger "
       "version), from the run's labels."),
    _f("title", STRING, "Human-readable title (`metadata.title`)."),
    _f("labels", STRING, "All `metadata.labels` as a JSON object."),
    _f("content_hash", STRING, "Hash of the run's numbers; the same run_id with another "
       "hash is a conflict.", False),
    *_PROVENANCE,
)

# A run's document apart from its row (layout 2, kidata 0.3.14): the hot table's rows stay
# narrow (~0.9 KB of Arrow instead of ~4), so a scan of runs reads no JSON and a row group
# holds ~9.5k runs instead of ~4k (docs/benchmarks.md, Run AP).
RUN_DOCUMENTS = (
    _f("run_id", STRING, "The run (one document per run in `runs`).", False),
    _f("document", STRING, "The BenchmarkRun document as loaded (JSON), for lossless export "
       "(until 0.3.13: the column `runs.document`).", False),
    _f("loaded_at", TS, "When the load that added the run started (UTC), as in `runs`.", False),
    _f("load_id", STRING, "Identifier of the load (commit) that added the run.", False),
)

MEASUREMENTS = (
    _f("run_id", STRING, "The run this number belongs to.", False),
    _f("metric", STRING, "`latency` or `memory`.", False),
    _f("statistic", STRING, "`median`, `p20`, `p80`, … .", False),
    _f("unit", STRING, "One unit per metric: `ns` for latency, `MB` for memory.", False),
    _f("value", FLOAT64, "The number, in `unit`.", False),
    _f("resolution", FLOAT64, "Rounding step of the value as published, in `unit` "
       "(e.g. 10 ns for latencies published to 0.01 µs); null when unknown."),
    _f("load_id", STRING, "Identifier of the load (commit) that added the row.", False),
)

ENVIRONMENTS = (
    _f("environment_id", STRING, "`sha256:` digest of the document without its metadata.", False),
    _f("name", STRING, "`metadata.name` of the first document loaded with this digest."),
    _f("title", STRING, "`metadata.title`."),
    _f("gpu", STRING, "Canonical GPU key.", False),
    _f("vendor", STRING, "`spec.hardware.vendor`."),
    _f("product", STRING, "`spec.hardware.product`."),
    _f("form_factor", STRING, "`spec.hardware.formFactor`."),
    _f("architecture", STRING, "`spec.hardware.architecture`, e.g. `sm_90`."),
    _f("software", STRING, "`spec.software` as JSON."),
    _f("document", STRING, "The whole document (JSON).", False),
    *_PROVENANCE,
)

PROTOCOLS = (
    _f("protocol_id", STRING, "`sha256:` digest of the document without its metadata.", False),
    _f("name", STRING, "`metadata.name`."),
    _f("title", STRING, "`metadata.title`."),
    _f("family", STRING, "`spec.comparability.family`: results compare only within one family.", False),
    _f("harness", STRING, "`spec.harness.name`."),
    _f("repository", STRING, "`spec.harness.repository`."),
    _f("timer", STRING, "`spec.measurement.timer`."),
    _f("primary_statistic", STRING, "`spec.measurement.primaryStatistic`."),
    _f("notes", STRING, "`spec.comparability.notes`."),
    _f("document", STRING, "The whole document (JSON).", False),
    *_PROVENANCE,
)

WORKLOADS = (
    _f("workload_id", STRING, "`sha256:` digest of the Workload document (the run's "
       "`workloadDigest` when only the digest is known).", False),
    _f("name", STRING, "Workload name/slug, as in `runs.workload`.", False),
    _f("kernel", STRING, "Kernel the workload is for."),
    _f("parameters", STRING, "Named parameters as a JSON object (null when only the "
       "digest is known)."),
    _f("shape", STRING, "Shape as given by the source (JSON list), or null."),
    _f("document", STRING, "The Workload document as loaded (JSON, keys in the source's "
       "order), null when not supplied."),
    *_PROVENANCE,
)

WORKLOAD_PARAMETERS = (
    _f("workload_id", STRING, "The workload (`workloads.workload_id`).", False),
    _f("name", STRING, "Parameter name as the source writes it, e.g. `M`, `H`, "
       "`dtype`.", False),
    _f("value", FLOAT64, "The value when it is a number (booleans are not), else null."),
    _f("text", STRING, "The value when it is not a number: a string as written, "
       "`true`/`false`, or JSON for lists and objects; null for numbers."),
    _f("load_id", STRING, "Identifier of the load (commit) that added the row.", False),
)

IMPLEMENTATIONS = (
    _f("implementation_id", STRING, "`sha256:` digest of the Implementation document "
       "(`runs.implementation_id`).", False),
    _f("name", STRING, "`spec.name`: the implementation key, as in `runs.implementation`."),
    _f("kernel", STRING, "`spec.kernel`: the kernel it implements."),
    _f("title", STRING, "`metadata.title`."),
    _f("document", STRING, "The whole document (JSON).", False),
    *_PROVENANCE,
)

# Reference tables: written into the warehouse from kidata's data files (kidata/store/reference.py),
# not by loads, so that the views that need them run unchanged in any engine.
GPUS = (
    _f("gpu", STRING, "Canonical GPU key, as in `runs.gpu`.", False),
    _f("vendor", STRING, "Vendor, e.g. `nvidia`.", False),
    _f("family", STRING, "The card's generation and class, e.g. `h100` for the H100 SXM5, "
       "PCIe and NVL cards, `a100` for both A100s: the `gpu_family` column of the views.",
       False),
    _f("product", STRING, "Product name, e.g. `NVIDIA H100`.", False),
    _f("form_factor", STRING, "Form factor, e.g. `SXM4-80GB`."),
    _f("architecture", STRING, "Compute architecture, e.g. `sm_90`."),
    _f("memory_bandwidth_gbps", FLOAT64, "Published peak memory bandwidth (GB/s, "
       "10^9 bytes/s); null when not in the catalog."),
    _f("bf16_dense_tflops", FLOAT64, "Published dense BF16 tensor peak (TFLOP/s); null "
       "when not in the catalog."),
)

IMPLEMENTATION_ROLES = (
    _f("kernel", STRING, "Kernel the entry is for, as in `runs.kernel`; `*` for every kernel "
       "without its own entry for this role.", False),
    _f("role", STRING, "The role, e.g. `reference` (the eager baseline a kernel is compared "
       "with) or `compiled` (a compiler's output of the reference).", False),
    _f("implementation", STRING, "An implementation that may play the role, as in "
       "`runs.implementation`.", False),
    _f("preference", INT64, "1 for the first choice; when a key has several implementations "
       "of one role, the lowest preference plays it.", False),
)

DTYPES = (
    _f("name", STRING, "A dtype as sources write it, e.g. `torch.bfloat16`.", False),
    _f("bytes", INT64, "Bytes per element.", False),
)

BYTE_MODELS = (
    _f("kernel", STRING, "Kernel the model is for, as in `runs.kernel`.", False),
    _f("pass", STRING, "Timed pass, as in `runs.pass`.", False),
    _f("term", STRING, "What the term counts, e.g. `read X (M x H)`.", False),
    _f("coefficient", FLOAT64, "How many times the tensor is moved.", False),
    _f("dtype_parameter", STRING, "Workload parameter naming the element dtype (e.g. "
       "`dtype`); null when `dtype` is fixed."),
    _f("dtype", STRING, "Fixed element dtype, when the benchmark does not make it a "
       "parameter."),
    _f("factor_1", STRING, "First workload parameter multiplied in; null for none."),
    _f("factor_2", STRING, "Second workload parameter multiplied in; null for none."),
    _f("factor_3", STRING, "Third workload parameter multiplied in; null for none."),
)

FLOP_MODELS = (
    _f("kernel", STRING, "Kernel the model is for, as in `runs.kernel`.", False),
    _f("pass", STRING, "Timed pass, as in `runs.pass`.", False),
    _f("term", STRING, "What the term counts, e.g. `gate, up and down projections`.", False),
    _f("coefficient", FLOAT64, "FLOPs per product of the factors (2 per multiply-add).", False),
    _f("factor_1", STRING, "First workload parameter multiplied in; null for none."),
    _f("factor_2", STRING, "Second workload parameter multiplied in; null for none."),
    _f("factor_3", STRING, "Third workload parameter multiplied in; null for none."),
    _f("factor_4", STRING, "Fourth workload parameter multiplied in; null for none."),
)

KERNEL_FAMILIES = (
    _f("kernel", STRING, "A kernel, as in `runs.kernel`.", False),
    _f("family", STRING, "The family it belongs to: variants of one kernel that a summary "
       "over kernels counts once (`kidata/data/families.toml`). A kernel not listed is its "
       "own family.", False),
)

PUBLISHED = (
    _f("run_id", STRING, "The candidate run the published number is about.", False),
    _f("baseline_run_id", STRING, "The baseline run, for ratios."),
    _f("quantity", STRING, "What was published, e.g. `latency_ratio`.", False),
    _f("definition", STRING, "How the source derived it, e.g. "
       "`trainkernel_us / inductor_us`."),
    _f("value", FLOAT64, "The published value.", False),
    _f("resolution", FLOAT64, "Rounding step of the published value (e.g. 0.001)."),
    *_PROVENANCE,
)

SAMPLES = (
    _f("run_id", STRING, "The run the samples were measured in.", False),
    _f("content_hash", STRING, "The run's `runs.content_hash` (its numbers): samples are "
       "facts about a run with those numbers, kept when a load is taken out (as documents "
       "are); join on both columns.", False),
    _f("metric", STRING, "What they measure, as in `measurements.metric` (`latency`, ...).",
       False),
    _f("unit", STRING, "Their unit, as in `measurements.unit` (ns for latency).", False),
    _f("sample", INT64, "The sample's place in the source's list, from 1.", False),
    _f("value", FLOAT64, "One raw sample (a repetition's or trial's timing), converted to "
       "`unit` as the run's statistics are: the run's median, mean, min and max summarise "
       "these values.", False),
    *_PROVENANCE,
)

REJECTS = (
    _f("source_file", STRING, "File the rejected record came from.", False),
    _f("position", STRING, "Record position: `line N`, `row N`, `index N`, `document`.", False),
    _f("field", STRING, "Field or column at fault, when one is."),
    _f("reason", STRING, "What was wrong and what was expected.", False),
    _f("raw", STRING, "The raw record text (truncated to 64 KiB)."),
    _f("loaded_at", TS, "When the load started (UTC), as its `load_id` says (until 0.2.4: "
       "when it committed).", False),
    _f("load_id", STRING, "The load that rejected it.", False),
)

LATEST_RUNS = (
    _f("kernel", STRING, "Kernel, as in `runs.kernel`.", False),
    _f("pass", STRING, "Timed pass, as in `runs.pass`.", False),
    _f("workload", STRING, "Workload, as in `runs.workload`.", False),
    _f("gpu", STRING, "Canonical GPU key, as in `runs.gpu`.", False),
    _f("protocol_id", STRING, "The runs' protocol digest, as in `runs.protocol_id`."),
    _f("implementation", STRING, "Implementation, as in `runs.implementation`.", False),
    _f("variant", STRING, "Variant, as in `runs.variant`."),
    _f("run_id", STRING, "The latest passed latency run of this key among the runs the "
       "load added: greatest `observed_at` (none last), ties broken by the greatest "
       "`run_id`.", False),
    _f("observed_at", TS, "That run's `observed_at`."),
    _f("median_us", FLOAT64, "That run's median latency (µs); null when its source gives only "
       "a mean (since 0.2.4; required before)."),
    _f("p20_us", FLOAT64, "That run's 20th-percentile latency (µs), null when not "
       "measured."),
    _f("p80_us", FLOAT64, "That run's 80th-percentile latency (µs), null when not "
       "measured."),
    _f("passed_runs", INT64, "Passed latency runs of this key the load added.", False),
    _f("load_id", STRING, "The load whose runs these are.", False),
    # Since 0.2.3 (kidata/store/derived.py STATISTICS): null in rows written before, whose readers
    # compute them.
    _f("version", STRING, "That run's `version` (since 0.2.3)."),
    _f("samples", INT64, "That run's latency samples (`latencies.samples`), null when "
       "unknown (since 0.2.3)."),
    _f("resolution_us", FLOAT64, "That run's timer resolution (µs, "
       "`latencies.resolution_us`), null when unknown (since 0.2.3)."),
    _f("spread", STRING, "The statistics bounding that run's noise (`latencies.spread`), "
       "null for none (since 0.2.3)."),
    _f("low_us", FLOAT64, "Lower end of the spread (µs, `latencies.low_us`) (since 0.2.3)."),
    _f("high_us", FLOAT64, "Upper end of the spread (µs, `latencies.high_us`) (since 0.2.3)."),
    _f("evidence", STRING, "What the spread supports (`latencies.evidence`); null only in "
       "rows written before 0.2.3."),
    # Since 0.2.4 (derived.CENTER): runs with only a mean are latest runs too.
    _f("center_us", FLOAT64, "That run's central latency (µs, `latencies.center_us`: the "
       "median, else the mean); null only in rows written before 0.2.4."),
    _f("center_statistic", STRING, "Which statistic `center_us` is, 'median' or 'mean' "
       "(`latencies.center_statistic`); null only in rows written before 0.2.4."),
    # Since 0.3.0 (derived.NOISE): what the verdict rule's noise model reads.
    _f("source", STRING, "That run's `source` (its run-to-run noise is calibrated per source); "
       "null only in rows written before 0.3.0."),
    _f("mean_us", FLOAT64, "That run's mean latency (µs, `latencies.mean_us`), null when not "
       "given (since 0.3.0)."),
    _f("stddev_us", FLOAT64, "That run's latency standard deviation (µs, "
       "`latencies.stddev_us`), null when not given (since 0.3.0)."),
)

# Since 0.3.15 (kidata/store/contexts.py): every step of every series as ``series_context``
# computes it (but ``points`` and ``gpu_family``, which readers add), stored by the loads that
# added or changed it, so that a session whose every load stored its steps reads them instead
# of working out every series (sql/stored/series_context.sql). Rows are never rewritten: a
# load that changes a step writes its new row and voids the old one in ``step_edits``, whose
# ``covered`` rows say which loads' steps the tables hold.
_STEP_COLUMNS = (
    ("kernel", STRING),
    ("pass", STRING),
    ("implementation", STRING),
    ("variant", STRING),
    ("workload", STRING),
    ("gpu", STRING),
    ("family", STRING),
    ("metric", STRING),
    ("unit", STRING),
    ("step", INT64),
    ("run_id", STRING),
    ("previous_run_id", STRING),
    ("observed_at", TS),
    ("previous_observed_at", TS),
    ("version", STRING),
    ("previous_version", STRING),
    ("source", STRING),
    ("previous_source", STRING),
    ("environment_id", STRING),
    ("previous_environment_id", STRING),
    ("median", FLOAT64),
    ("previous_median", FLOAT64),
    ("p20", FLOAT64),
    ("p80", FLOAT64),
    ("previous_p20", FLOAT64),
    ("previous_p80", FLOAT64),
    ("spread", STRING),
    ("previous_spread", STRING),
    ("evidence", STRING),
    ("previous_evidence", STRING),
    ("center", FLOAT64),
    ("previous_center", FLOAT64),
    ("center_statistic", STRING),
    ("previous_center_statistic", STRING),
    ("samples", INT64),
    ("previous_samples", INT64),
    ("log_variance", FLOAT64),
    ("previous_log_variance", FLOAT64),
    ("wide_low", FLOAT64),
    ("wide_high", FLOAT64),
    ("previous_wide_low", FLOAT64),
    ("previous_wide_high", FLOAT64),
    ("has_spread", BOOL),
    ("previous_has_spread", BOOL),
    ("half_step", FLOAT64),
    ("previous_half_step", FLOAT64),
    ("size_decade", INT64),
    ("previous_size_decade", INT64),
    ("log_change", FLOAT64),
    ("same_center", BOOL),
    ("same_version", BOOL),
    ("together_implementations", INT64),
    ("together_log_change", FLOAT64),
    ("session_workloads", INT64),
    ("session_log_median", FLOAT64),
    ("echo_up", FLOAT64),
    ("echo_down", FLOAT64),
)
STEP_CONTEXT = (
    *(_f(name, type_, f"`series_context.{name}`.") for name, type_ in _STEP_COLUMNS),
    _f("load_id", STRING, "The load (or the `kidata compact`, `kidata unload` or `kidata check "
       "--repair`) that wrote the row. A row holds unless a `step_edits` 'void' row names it.",
       False),
)

# Since 0.3.15: what later loads changed in step_context, in rows as small as the changes
# (readers join them, and an engine builds its hash tables from the smaller side).
STEP_EDITS = (
    _f("kind", STRING, "'void': the `step_context` row of `run_id`, `metric` and `of_load` "
       "no longer holds (its step changed or is no more); 'count': `points` results added to "
       "(or, below 0, taken from) the series named by the key columns; 'covered': the steps "
       "of the load `load_id` are stored (every other column null); 'wrote': the writer "
       "`load_id` wrote `points` steps to `step_context` (its rows count only while all are "
       "there).", False),
    _f("kernel", STRING, "The series' kernel (`series_context.kernel`)."),
    _f("pass", STRING, "Its pass."),
    _f("implementation", STRING, "Its implementation."),
    _f("variant", STRING, "Its variant (null for none)."),
    _f("workload", STRING, "Its workload."),
    _f("gpu", STRING, "Its GPU."),
    _f("family", STRING, "Its protocol family."),
    _f("metric", STRING, "Its metric."),
    _f("run_id", STRING, "'void': the step's run; null in a 'count' row."),
    _f("of_load", STRING, "'void': the `load_id` of the `step_context` row it voids."),
    _f("points", INT64, "'count': the change of the series' length (the sum over its rows is "
       "`series_context.points`); 'wrote': the steps written."),
    _f("load_id", STRING, "The load (or command) that wrote the row; a 'covered' row: the "
       "load whose steps are stored.", False),
)

LOADS = (
    _f("load_id", STRING, "Identifier of the load (commit); every row a load added "
       "carries it.", False),
    _f("loaded_at", TS, "When the load started (UTC), as its `load_id` says (until 0.2.4: "
       "when it committed).", False),
    _f("kidata_version", STRING, "Version of kidata that wrote the load.", False),
    _f("files", INT64, "Input files read.", False),
    _f("records", INT64, "Records read (added, duplicate or rejected).", False),
    _f("added", STRING, "Rows the load added, per table, as a JSON object, e.g. "
       "`{\"runs\": 2, \"measurements\": 6}`.", False),
    _f("duplicates", INT64, "Runs skipped because the warehouse already had them.", False),
    _f("rejected", INT64, "Records rejected (see `rejects`).", False),
    _f("warnings", INT64, "Warnings reported; an unknown GPU counts once per load (its "
       "records are counted in the warning's text).", False),
    _f("rejects_not_kept", INT64, "Rejected records counted in `rejected` but not kept in "
       "`rejects`: a load keeps its first 100,000 (`KIDATA_MAX_REJECTS`). Null for loads "
       "written by kidata 0.2.2 or earlier."),
    _f("commit", STRING, "The commit the load's results measured (`--set commit=`, else "
       "the CI's variable: `GITHUB_SHA`, `CI_COMMIT_SHA`, `BUILDKITE_COMMIT`); null when "
       "neither said."),
    _f("branch", STRING, "The branch of that commit (`--set branch=`, else the CI's: "
       "`GITHUB_HEAD_REF` or `GITHUB_REF_NAME`, `CI_MERGE_REQUEST_SOURCE_BRANCH_NAME` or "
       "`CI_COMMIT_REF_NAME`, `BUILDKITE_BRANCH`); null when neither said."),
    _f("ci_run", STRING, "The CI run that loaded it (`--set ci_run=`, else the run's URL from "
       "GitHub Actions, GitLab CI or Buildkite variables); null outside CI."),
)

ACKNOWLEDGEMENTS = (
    _f("run_id", STRING, "The run whose slowdown is intended (the candidate's run of a gate "
       "or `compare`, the newer run of `regressions`).", False),
    _f("baseline_run_id", STRING, "The run it was slower than when acknowledged, null when "
       "not given."),
    _f("kernel", STRING, "The run's kernel, for reading."),
    _f("pass", STRING, "The run's pass."),
    _f("workload", STRING, "The run's workload."),
    _f("gpu", STRING, "The run's GPU key."),
    _f("implementation", STRING, "The run's implementation."),
    _f("change", FLOAT64, "Its latency change against the baseline run when acknowledged "
       "(0.12: 12% slower), null when not given."),
    _f("reason", STRING, "Why the slowdown is intended, as given.", False),
    _f("author", STRING, "Who acknowledged it (`--by`, else the CI's actor, else the user).",
       False),
    _f("acknowledged_at", TS, "When (UTC).", False),
)

COLUMNS: dict[str, tuple[Column, ...]] = {
    "runs": RUNS,
    "run_documents": RUN_DOCUMENTS,
    "measurements": MEASUREMENTS,
    "environments": ENVIRONMENTS,
    "protocols": PROTOCOLS,
    "workloads": WORKLOADS,
    "workload_parameters": WORKLOAD_PARAMETERS,
    "implementations": IMPLEMENTATIONS,
    "published": PUBLISHED,
    "samples": SAMPLES,
    "latest_runs": LATEST_RUNS,
    "rejects": REJECTS,
    "loads": LOADS,
    "gpus": GPUS,
    "implementation_roles": IMPLEMENTATION_ROLES,
    "dtypes": DTYPES,
    "byte_models": BYTE_MODELS,
    "flop_models": FLOP_MODELS,
    "kernel_families": KERNEL_FAMILIES,
    "acknowledgements": ACKNOWLEDGEMENTS,
    "step_context": STEP_CONTEXT,
    "step_edits": STEP_EDITS,
}

# Identity of a row in each table: loading the same key twice adds nothing.
KEYS: dict[str, tuple[str, ...]] = {
    "runs": ("run_id",),
    "run_documents": ("run_id",),
    "measurements": ("run_id", "metric", "statistic"),
    "environments": ("environment_id",),
    "protocols": ("protocol_id",),
    "workloads": ("workload_id",),
    "workload_parameters": ("workload_id", "name"),
    "implementations": ("implementation_id",),
    "published": ("run_id", "quantity", "baseline_run_id"),
    "samples": ("run_id", "content_hash", "metric", "sample"),
    "latest_runs": ("load_id", "kernel", "pass", "workload", "gpu", "protocol_id",
                    "implementation", "variant"),
    "rejects": ("source_file", "position", "field", "reason", "raw"),
    "loads": ("load_id",),
    "gpus": ("gpu",),
    "implementation_roles": ("kernel", "role", "implementation"),
    "dtypes": ("name",),
    "byte_models": ("kernel", "pass", "term"),
    "flop_models": ("kernel", "pass", "term"),
    "kernel_families": ("kernel",),
    "acknowledgements": ("run_id", "acknowledged_at"),
    "step_context": ("run_id", "metric", "load_id"),
    "step_edits": ("kind", "kernel", "pass", "implementation", "variant", "workload", "gpu",
                   "family", "metric", "run_id", "of_load", "load_id"),
}

# Tables written from kidata's data files rather than by loads (see kidata/store/reference.py).
REFERENCE = ("gpus", "implementation_roles", "dtypes", "byte_models", "flop_models",
             "kernel_families")
# The documents a run points at, by table and digest column (a run's document declares them
# as ``spec.environmentDigest`` and so on; kidata check verifies both sides).
DOCUMENT_KEYS = {"environments": "environment_id", "protocols": "protocol_id",
                 "workloads": "workload_id", "implementations": "implementation_id"}
# The field of a run's ``spec`` that declares each of those digests (kernelindex's names).
SPEC_DIGESTS = {"environments": "environmentDigest", "protocols": "protocolDigest",
                "workloads": "workloadDigest", "implementations": "implementationDigest"}
# Tables a committing load gives an empty file while they have none: the core views read them
# (speedups reads samples through sample_medians), and an engine that infers each table's
# schema from its files (plain Spark, docs/spark.md) could not define those views otherwise.
FILED_WHEN_EMPTY = ("samples",)
# Tables written by a command of their own (kidata ack: kidata/store/acks.py), not by loads.
APART = ("acknowledgements",)
# Tables derived from the committed loads after their commit (kidata/store/contexts.py): rows
# written under the writer lock by loads, unloads, compactions and repairs, read whoever wrote
# them (a reader checks that every committed load is covered), so none is filtered by load.
AFTER_COMMIT = ("step_context", "step_edits")

# The tables that have these columns are written sorted by them (then by the table's key) from
# a file's first row to its last, one GPU per row group, by every writer of their files: a
# load's own file, its commit's copy and a compaction's merge (kidata.store.pqwrite.Clustered).
# A filter on one GPU then reads that GPU's row groups only, on one kernel a few of each GPU's
# (docs/benchmarks.md, Runs AE, AN and BC).
CLUSTERED = ("gpu", "kernel", "pass", "observed_at")


def clustered_keys(table: str) -> list[str]:
    """The columns a file of ``table`` is sorted by: :data:`CLUSTERED`, then its key, for the
    tables loads write that have those columns (``runs``, ``latest_runs``); none (file order)
    for the others (``step_context`` has them, but its own writer, kidata.store.contexts)."""
    if table not in COMMIT_ORDER or not set(CLUSTERED) <= {c.name for c in COLUMNS[table]}:
        return []
    return [*CLUSTERED, *(k for k in KEYS[table] if k not in CLUSTERED)]


# Order in which a commit makes its files visible. Dimension tables, measurements and run
# documents first, runs (the table every view starts from) after them, so a reader never sees
# a run whose measurements or document are missing. ``loads`` comes last: its row is the
# load's commit marker, and kidata's readers show only rows of loads listed there. ``latest_runs`` (derived from the
# load's runs, see kidata/store/derived.py) follows runs. See docs/guarantees.md.
COMMIT_ORDER = ("environments", "protocols", "workloads", "workload_parameters",
                "implementations", "measurements", "published", "samples", "run_documents",
                "runs", "latest_runs", "rejects", "loads")


def description(field: pa.Field) -> str:
    meta = field.metadata or {}
    return meta.get(b"description", b"").decode()


# Staged only, for the commit to derive latest_runs without joining measurements: a run's
# central latency (its median, else its mean: run_statistics.center), p20 and p80 in ns (null
# when it has none), as its measurements rows hold them.
STAGED_LATENCY = ("_latency_median", "_latency_p20", "_latency_p80")


def staged_schema(table: str) -> pa.Schema:
    """A table's rows while a load stages them: without the commit's own columns, with the
    record's order (``_seq``) and position (``_position``) for dedupe and error messages, and
    for runs their latency quantiles (``STAGED_LATENCY``) and their document (stored in
    ``run_documents``: :class:`kidata.store.finalize.DirectWriter` splits them)."""
    import pyarrow as pa

    fields = [f for f in arrow_tables()[table] if f.name not in ("loaded_at", "load_id")]
    extra = [pa.field(n, pa.float64()) for n in STAGED_LATENCY] if table == "runs" else []
    if table == "runs":  # staged with its row; the load writes it to run_documents
        document = arrow_tables()["run_documents"].field("document")
        fields.insert(fields.index(arrow_tables()["runs"].field("content_hash")) + 1, document)
    return pa.schema([*fields, pa.field("_seq", pa.int64()), pa.field("_position", pa.string()),
                      *extra])


def arrow_type(type_: str) -> pa.DataType:
    """The Arrow type of a column type."""
    import pyarrow as pa

    if type_ == TS:
        return pa.timestamp("us", tz="UTC")
    return {STRING: pa.string(), FLOAT64: pa.float64(), INT64: pa.int64(),
            BOOL: pa.bool_()}[type_]


def arrow_schema(columns: tuple[Column, ...]) -> pa.Schema:
    """The Arrow schema of a table's columns, descriptions in the field metadata."""
    import pyarrow as pa

    return pa.schema([pa.field(c.name, arrow_type(c.type), nullable=c.nullable,
                               metadata={"description": c.description}) for c in columns])


_ARROW: dict[str, Any] = {}


def arrow_tables() -> dict[str, pa.Schema]:
    """Every table's Arrow schema (``TABLES``), built on first use."""
    if not _ARROW:
        _ARROW.update({table: arrow_schema(cols) for table, cols in COLUMNS.items()})
    return _ARROW


def __getattr__(name: str) -> Any:
    """``TABLES``, :func:`arrow_tables`: imported by name, it imports pyarrow then."""
    if name == "TABLES":
        return arrow_tables()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
