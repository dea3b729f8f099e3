"""A reference model of what loads put in a warehouse, and a generator of inputs for it.

Used by ``tests/store/test_oracle.py`` (a differential oracle): the loader's tables after every
load are compared with what this model says they must hold. The model is plain Python over
dicts and shares no code with the loader (nothing from ``kidata`` is imported). It applies the
documented rules (README, ``kidata load``; docs/guarantees.md, "Duplicates that carry more" and
"Rejected records"; docs/liger.md), one record at a time, loads in the order they commit and
records in input order (files in the order given, lines/rows in file order):

- a run is identified by its name; its numbers are its measurements (metric, statistic,
  unit, value);
- a record of a run not yet known adds the run; the same numbers again (same record, or another
  record of the run) is a duplicate and adds nothing; other numbers are a *conflict*: the
  record is rejected (kept in ``rejects`` with its file and position) and the run keeps the
  numbers of the first record *loaded* (an earlier load, else the first of its own load);
- documents (environments, protocols, workloads, implementations) are keyed by digest and are
  added from every record read, duplicates and conflicts included ("added from every
  record"); a workload known only by digest gets its document when a record brings it;
- of the records of one run with its numbers, the run keeps the richest: here a Liger CSV row
  (its run points at four documents it carries) always beats a bare bundle (environment and
  protocol only; its workload and implementation are named by digests whose documents are
  never supplied, or, for the workload of some runs, only supplied by CSV rows), so which
  record a run keeps never depends on the MD5 tie-break, and the model knows the run's
  ``workload_id`` and ``implementation_id`` exactly.

Inputs: :class:`Run` is one benchmark run (kernel, pass, provider, GPU, workload, sweep); its
record ``i`` is a pure function of those. A record is a run in one *form* (``bare``: a JSON
Lines bundle shaped like the seeds; ``csv``: a row of Liger-Kernel's benchmark CSV) with one
set of numbers (``variant`` 0 is the run's own numbers; 1 and 2 conflict with them). Digests
are computed here from the documents (``sha256:`` + SHA-256 of the canonical JSON without
``metadata``), as benchmarks/generate.py does, independently of kidata; the Workload and
Implementation documents a CSV row stands for are written out from docs/liger.md.
The protocol and environment documents are benchmarks/generate.py's (the same documents the
Liger reader builds for these GPUs and passes, by that generator's contract), loaded with
importlib.

What the model cannot know without reimplementing the loader (the stored JSON of a document,
titles, the file a kept row came from) it does not claim: :meth:`Model.tables` gives a
projection of each table that it knows exactly.
"""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import io
import json
import random
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import cache
from pathlib import Path

API = "kernelindex.dev/v1alpha1"
GENERATE = Path(__file__).resolve().parents[1] / "benchmarks" / "generate.py"


@cache
def generate_module():
    """benchmarks/generate.py as a module (its protocol and environment documents)."""
    spec = importlib.util.spec_from_file_location("kidata_bench_generate", GENERATE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(document: dict) -> str:
    body = {k: v for k, v in document.items() if k != "metadata"}
    return "sha256:" + hashlib.sha256(canonical(body).encode("utf-8")).hexdigest()


# -- the universe of runs ---------------------------------------------------------------------

# kernel: (display title, x_name, x_label); x_name's word in the workload slug (docs/liger.md).
KERNELS = {
    "rms_norm": ("RMSNorm", "H", "hidden size"),
    "layer_norm": ("LayerNorm", "H", "hidden size"),
    "cross_entropy": ("CrossEntropy", "V", "vocab size"),
    "softmax": ("Softmax", "N", "hidden size"),
    "swiglu": ("SwiGLU", "N", "hidden size"),
    "embedding": ("Embedding", "V", "vocab size"),
}
WORDS = {"H": "hidden", "N": "hidden", "V": "vocab"}
# forward and backward only: their protocol documents are the seeds' (docs/liger.md), and
# generate.py's "full" protocol is not the one the Liger reader writes (another protocol_id:
# records of one run that differ there are not variants of each other, a documented limit).
PASSES = ("forward", "backward")
PROVIDERS = ("liger", "huggingface", "torch")
# The CSV's gpu_name: its catalog key (runs.gpu), as docs/liger.md's table gives them.
GPUS = {
    "NVIDIA A100-SXM4-80GB": "a100-sxm4-80gb",
    "NVIDIA H100 80GB HBM3": "h100-sxm5-80gb",
    "NVIDIA H100 PCIe": "h100-pcie-80gb",
    "NVIDIA B200": "b200",
    "NVIDIA GeForce RTX 3090": "rtx-3090",
    "NVIDIA GeForce RTX 4090": "rtx-4090",
}
SIZES = (1024, 4096, 16384)
ROWS = (2048, 4096)
DTYPES = (("bf16", "torch.bfloat16"), ("fp32", "torch.float32"))
VERSIONS = ("0.4.0", "0.5.2", "0.6.1", "0.7.0")
START = datetime(2025, 3, 3, 9, 0, 0, tzinfo=UTC)
CSV_HEADER = ["kernel_name", "kernel_provider", "kernel_operation_mode", "metric_name",
              "metric_unit", "x_name", "x_label", "x_value", "y_value_50", "y_value_20",
              "y_value_80", "extra_benchmark_config_str", "gpu_name", "timestamp",
              "liger_version"]
KEYS = [(k, p, m, g, s, r, d) for k in KERNELS for p in PASSES for m in PROVIDERS
        for g in GPUS for s in SIZES for r in ROWS for d in DTYPES]


def gpu_slug(name: str) -> str:
    return "-".join(re.findall(r"[a-z0-9]+", name.lower()))


@dataclass(frozen=True, order=True)
class Run:
    """One benchmark run: a Liger row key (kernel, pass, provider, GPU, workload) and the sweep
    that ran it. Sweeps of one key are re-published versions of it: a later time and release,
    so another run (the history of Liger's file)."""

    kernel: str
    pass_: str
    provider: str
    gpu: str
    size: int
    rows: int
    dtype: tuple[str, str]
    sweep: int

    @property
    def when(self) -> datetime:
        k = list(KERNELS).index(self.kernel)
        g = list(GPUS).index(self.gpu)
        return START + timedelta(days=9 * self.sweep, minutes=37 * k + 3 * g,
                                 seconds=SIZES.index(self.size) * 4 + ROWS.index(self.rows) * 2
                                 + DTYPES.index(self.dtype))

    @property
    def version(self) -> str:
        return VERSIONS[self.sweep % len(VERSIONS)]

    @property
    def slug(self) -> str:
        return f"{WORDS[KERNELS[self.kernel][1]]}{self.size}-rows{self.rows}-{self.dtype[0]}"

    @property
    def external_id(self) -> str:
        return (f"{self.kernel}/{self.pass_}/{self.provider}/{gpu_slug(self.gpu)}/{self.slug}/"
                f"{self.when.strftime('%Y-%m-%d-%H-%M-%S')}")

    @property
    def name(self) -> str:
        return "liger-" + "-".join(self.external_id.split("/")).replace("_", "-")

    @property
    def named_bare(self) -> bool:
        """Whether this run's bare bundle names the workload by the digest of the CSV's
        Workload document (as ``kidata convert`` output stripped of documents would), instead
        of a digest no record supplies. Fixed per run, so a run's bare records are one
        document and never tie with each other."""
        return hashlib.sha256(self.name.encode()).digest()[0] % 3 == 0

    @property
    def sampled(self) -> bool:
        """Whether this run's bundles carry raw samples (``sourceNative.samples`` in ms, as
        kidata's readers of PyTorch v3 and google-benchmark keep them): a third of the runs,
        fixed per run. The Liger CSV has none, so a run's kept record decides its samples."""
        return hashlib.sha256(self.name.encode()).digest()[1] % 3 == 0

    def numbers(self, variant: int) -> tuple[int, int, int]:
        """(p20, median, p80) in integer ns; variant 0 is the run's, 1 and 2 conflict with it.
        No value is a multiple of 1,024 ns (a CSV row with two such values gets a timer
        resolution the bundle lacks: docs/liger.md; a documented limit of richer duplicates,
        left out here)."""
        rng = random.Random(self.name)
        median = rng.randrange(5_000, 900_000)
        p20 = median - rng.randrange(30, median // 30)
        p80 = median + rng.randrange(30, median // 30)
        median += 7 * variant
        values = []
        for v in (p20, median, p80):
            while v % 1024 == 0:
                v += 1
            values.append(v)
        return tuple(values)

    # -- documents ----------------------------------------------------------------------------

    def workload_document(self) -> dict:
        """The Workload document the Liger reader writes for this row (docs/liger.md)."""
        x_name = KERNELS[self.kernel][1]
        return {"kind": "Workload",
                "spec": {"kernel": self.kernel, "name": self.slug,
                         "parameters": {x_name: self.size, "M": self.rows,
                                        "dtype": self.dtype[1]}},
                "metadata": {"name": "liger-" + self.kernel.replace("_", "-") + "-" + self.slug,
                             "title": f"{KERNELS[self.kernel][0]} · {self.slug}",
                             "labels": {"x_name": x_name, "x_label": KERNELS[self.kernel][2]}},
                "apiVersion": API}

    def implementation_document(self) -> dict:
        return {"kind": "Implementation",
                "spec": {"kernel": self.kernel, "name": self.provider},
                "metadata": {"name": "liger-impl-" + f"{self.kernel}-{self.provider}"
                             .replace("_", "-")},
                "apiVersion": API}

    def seed_workload_digest(self) -> str:
        """A workload digest like the seeds': of a document no record carries."""
        return digest({"kind": "Workload", "apiVersion": API,
                       "spec": {"kernel": self.kernel, "parameters": {
                           "x": self.size, "M": self.rows, "dtype": self.dtype[1]}}})

    def seed_implementation_digest(self) -> str:
        """An implementation digest no record supplies (not the CSV's document: that names
        the kernel too)."""
        return digest({"kind": "Implementation", "apiVersion": API,
                       "spec": {"name": self.provider}})

    def protocol(self) -> dict:
        return _protocol(self.pass_)[0]

    def environment(self) -> dict:
        return _environment(self.gpu)[0]

    @property
    def protocol_id(self) -> str:
        return _protocol(self.pass_)[1]

    @property
    def environment_id(self) -> str:
        return _environment(self.gpu)[1]


@cache
def _protocol(pass_: str) -> tuple[dict, str]:
    document = generate_module().protocol(pass_)
    return document, digest(document)


@cache
def _environment(gpu: str) -> tuple[dict, str]:
    document = generate_module().environment(gpu)
    return document, digest(document)


@cache
def _ids(run: Run) -> dict[str, str]:
    """The run's workload and implementation digests: of the CSV's documents, and the
    seed-like ones no record supplies."""
    return {"csv_workload": digest(run.workload_document()),
            "csv_implementation": digest(run.implementation_document()),
            "seed_workload": run.seed_workload_digest(),
            "seed_implementation": run.seed_implementation_digest()}


def _ms(ns: int) -> str:
    """ns as the CSV's ms text, exactly (no binary rounding)."""
    return format(Decimal(ns).scaleb(-6), "f")


@dataclass(frozen=True, order=True)
class Record:
    """A run in one form (``bare`` JSON Lines bundle or ``csv`` Liger row) with one set of
    numbers (``variant``)."""

    run: Run
    form: str
    variant: int = 0

    @property
    def numbers(self) -> tuple[int, int, int]:
        return self.run.numbers(self.variant)

    def measurements(self) -> list[tuple]:
        """(run_id, metric, statistic, unit, value) of the record."""
        p20, median, p80 = self.numbers
        return [(self.run.name, "latency", stat, "ns", float(v))
                for stat, v in (("median", median), ("p20", p20), ("p80", p80))]

    def raw_samples(self) -> list[float]:
        """The bundle's samples in ms, in the order given (not sorted): p80, median, p20."""
        p20, median, p80 = self.numbers
        return [p80 / 1e6, median / 1e6, p20 / 1e6] if self.run.sampled else []

    @property
    def has_samples(self) -> bool:
        return self.form == "bare" and self.run.sampled

    def samples(self) -> list[tuple]:
        """(run_id, metric, unit, sample, value, whether its content hash is the run's) of the
        record's samples, in ns: exact, as every number has at most 6 decimals in ms."""
        p20, median, p80 = self.numbers
        return [(self.run.name, "latency", "ns", i, float(v), True)
                for i, v in enumerate((p80, median, p20), 1)] if self.has_samples else []

    # What the run row points at, for each form.
    def workload_id(self) -> str:
        if self.form == "csv" or self.run.named_bare:
            return _ids(self.run)["csv_workload"]
        return _ids(self.run)["seed_workload"]

    def implementation_id(self) -> str:
        if self.form == "csv":
            return _ids(self.run)["csv_implementation"]
        return _ids(self.run)["seed_implementation"]

    def json_line(self) -> str:
        run = self.run
        p20, median, p80 = self.numbers
        when = run.when
        document = {
            "kind": "BenchmarkRun",
            "spec": {
                "status": "passed",
                "timing": {"latencyNs": {"median": median}, "primaryStatistic": "median"},
                "observedAt": when.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
                "measurements": [
                    {"unit": "ns", "value": p20, "metric": "latency", "statistic": "p20"},
                    {"unit": "ns", "value": p80, "metric": "latency", "statistic": "p80"},
                ],
                "sourceNative": {
                    "source": "liger-kernel-bench",
                    "metrics": {"ms_20": p20 / 1e6, "ms_50": median / 1e6, "ms_80": p80 / 1e6},
                    "benchmark": f"{run.kernel}/{run.pass_}",
                    "externalId": run.external_id,
                },
                "protocolDigest": run.protocol_id,
                "workloadDigest": self.workload_id(),
                "environmentDigest": run.environment_id,
                "implementationDigest": self.implementation_id(),
            },
            "metadata": {"name": run.name,
                         "title": f"{KERNELS[run.kernel][0]} · {run.provider} · {run.pass_}",
                         "labels": {"liger_version": run.version}},
            "apiVersion": API,
        }
        if run.sampled:
            document["spec"]["sourceNative"].update(unit="ms", samples=self.raw_samples())
        bundle = {"run": document, "protocol": run.protocol(), "environment": run.environment()}
        return json.dumps(bundle, ensure_ascii=False)

    def csv_fields(self) -> list[str]:
        run = self.run
        p20, median, p80 = self.numbers
        _, x_name, x_label = KERNELS[run.kernel]
        config = json.dumps({"M": run.rows, "dtype": run.dtype[1]})
        return [run.kernel, run.provider, run.pass_, "speed", "ms", x_name, x_label,
                str(run.size), _ms(median), _ms(p20), _ms(p80), config, run.gpu,
                run.when.strftime("%Y-%m-%d %H:%M:%S"), run.version]


# -- input files ------------------------------------------------------------------------------

@dataclass
class InputFile:
    """One input file: its name, format (``jsonl`` or ``csv``) and records in order."""

    name: str
    format: str
    records: list[Record]

    def text(self) -> str:
        if self.format == "jsonl":
            return "".join(r.json_line() + "\n" for r in self.records)
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(CSV_HEADER)
        for r in self.records:
            writer.writerow(r.csv_fields())
        return out.getvalue()

    def items(self, path: str) -> list[tuple[str, str, Record]]:
        """(file, position, record) in input order: JSON Lines positions are ``line N``
        (file lines from 1), CSV ``row N`` (data rows from 1: docs/liger.md, Errors)."""
        word = "line" if self.format == "jsonl" else "row"
        return [(path, f"{word} {n}", r) for n, r in enumerate(self.records, 1)]


@dataclass
class Scenario:
    files: list[InputFile]
    runs: list[Run]
    conflicts: bool

    def distinct_records(self) -> list[Record]:
        return sorted({r for f in self.files for r in f.records})


def scenario(seed: int, runs: int, conflicts: bool, min_file: int = 150) -> Scenario:
    """Input files holding ``runs`` distinct runs (thousands of records), from ``seed``:

    - runs of a key in up to three sweeps (re-published: same key, new time and version);
    - each run as a bare bundle, a CSV row, or both (the CSV row is the richer duplicate);
    - with ``conflicts``, ~4% of the runs also in a record with other numbers (bare or CSV;
      some twice, some in two variants);
    - records shuffled into JSON Lines and CSV files of at least ``min_file`` records;
      duplicates inside a file and copied into other files; a prefix of some files as a file
      of its own (same format, its first lines or rows).
    """
    rng = random.Random(seed)
    chosen: list[Run] = []
    seen: set[Run] = set()
    while len(chosen) < runs:
        key = rng.choice(KEYS)
        for sweep in range(rng.choice((1, 1, 1, 2, 2, 3))):
            run = Run(*key, sweep=sweep)
            if run not in seen and len(chosen) < runs:
                seen.add(run)
                chosen.append(run)
    jsonl: list[Record] = []
    rows: list[Record] = []
    for run in chosen:
        form = rng.random()
        if form < 0.70:
            jsonl.append(Record(run, "bare"))
        if form > 0.40:
            rows.append(Record(run, "csv"))
    if conflicts:
        for run in rng.sample(chosen, max(1, len(chosen) // 25)):
            for _ in range(rng.choice((1, 1, 2))):
                rec = Record(run, rng.choice(("bare", "csv")), rng.choice((1, 1, 2)))
                (jsonl if rec.form == "bare" else rows).append(rec)
    files: list[InputFile] = []
    for fmt, records in (("jsonl", jsonl), ("csv", rows)):
        rng.shuffle(records)
        n_files = max(1, min(rng.randint(2, 4), len(records) // min_file))
        bounds = [0, *_cuts(rng, len(records), n_files, min_file), len(records)]
        for n in range(n_files):
            files.append(InputFile(f"{fmt}-{n}.{'jsonl' if fmt == 'jsonl' else 'csv'}", fmt,
                                   records[bounds[n]:bounds[n + 1]]))
    # Duplicates inside a file and across files (of one format).
    for f in files:
        for rec in rng.sample(f.records, len(f.records) // 10):
            f.records.insert(rng.randrange(len(f.records) + 1), rec)
        others = [g for g in files if g is not f and g.format == f.format]
        if others:
            target = rng.choice(others)
            for rec in rng.sample(f.records, len(f.records) // 12):
                target.records.insert(rng.randrange(len(target.records) + 1), rec)
    # A file and its prefix.
    for f in rng.sample(files, min(2, len(files))):
        k = rng.randint(len(f.records) // 2, len(f.records) - 1)
        stem, ext = f.name.rsplit(".", 1)
        files.append(InputFile(f"{stem}-prefix.{ext}", f.format, f.records[:k]))
    return Scenario(files, chosen, conflicts)


def _cuts(rng: random.Random, total: int, parts: int, least: int) -> list[int]:
    """``parts - 1`` cut points splitting ``total`` into parts of at least ``least``."""
    spare = max(0, total - parts * least)
    offsets = sorted(rng.randint(0, spare) for _ in range(parts - 1))
    return [least * (i + 1) + offsets[i] for i in range(parts - 1)]


# -- the model --------------------------------------------------------------------------------

@dataclass
class Outcome:
    """What one load did, by the model."""

    added: int = 0  # runs added
    enriched: int = 0  # stored rows replaced by a richer version (runs and workloads)
    rejects: list[tuple[str, str]] = field(default_factory=list)  # conflicts: (file, position)


@dataclass
class _Stored:
    record: Record  # the record the run keeps (its numbers are the run's)
    # A record with the run's numbers that gives samples (any such record's samples are
    # kept, whichever record the run row keeps: a CSV row has none).
    sampled: Record | None = None


class Model:
    """The warehouse as the documented rules say it must be, load after load."""

    def __init__(self):
        self.runs: dict[str, _Stored] = {}
        self.environments: dict[str, str] = {}  # id -> gpu key
        self.protocols: set[str] = set()
        self.workloads: dict[str, list] = {}  # id -> [name, has document]
        self.parameters: set[tuple] = set()
        self.implementations: dict[str, tuple[str, str]] = {}  # id -> (name, kernel)
        self.rejects: set[tuple[str, str]] = set()

    def load(self, items: list[tuple[str, str, Record]]) -> Outcome:
        """Apply one load of ``items`` ((file, position, record), in input order)."""
        out = Outcome()
        before = set(self.runs)
        digest_only = {w for w, (_, doc) in self.workloads.items() if not doc}
        enriched_runs: set[str] = set()
        documented: set[str] = set()
        for file, position, rec in items:
            self._documents(rec, documented)
            name = rec.run.name
            stored = self.runs.get(name)
            if stored is None:
                stored = self.runs[name] = _Stored(rec)
                out.added += 1
            elif rec.numbers != stored.record.numbers:
                out.rejects.append((file, position))
                self.rejects.add((file, position))
                continue
            elif rec.form == "csv" and stored.record.form == "bare":
                stored.record = rec  # the richer duplicate: the run keeps it
                if name in before:
                    enriched_runs.add(name)
            if rec.has_samples and stored.sampled is None:
                stored.sampled = rec  # its samples, whichever record the run row keeps
        out.enriched = len(enriched_runs) + len(digest_only & documented)
        return out

    def _documents(self, rec: Record, documented: set[str]) -> None:
        run = rec.run
        self.environments[run.environment_id] = GPUS[run.gpu]
        self.protocols.add(run.protocol_id)
        wid = rec.workload_id()
        entry = self.workloads.setdefault(wid, [run.slug, False])
        if rec.form == "csv":
            if not entry[1]:
                documented.add(wid)
            entry[1] = True
            for key, value in run.workload_document()["spec"]["parameters"].items():
                number = isinstance(value, int | float) and not isinstance(value, bool)
                self.parameters.add((wid, key, float(value) if number else None,
                                     None if number else value))
            self.implementations[rec.implementation_id()] = (run.provider, run.kernel)

    # -- expected tables (projections) ---------------------------------------------------------

    def tables(self) -> dict[str, list]:
        """Each table's projection (the columns of :data:`PROJECTIONS`), one tuple per row
        the table must hold, sorted by ``repr`` (times as UTC ISO text)."""
        runs, measurements, samples = [], [], []
        for name, stored in self.runs.items():
            rec, run = stored.record, stored.record.run
            runs.append((name, "liger-kernel-bench", run.external_id, run.kernel, run.pass_,
                         run.provider, run.slug, GPUS[run.gpu], "latency",
                         run.environment_id, run.protocol_id,
                         rec.workload_id(), rec.implementation_id(), run.when.isoformat(),
                         "passed", run.version))
            measurements.extend(rec.measurements())
            if stored.sampled is not None:
                samples.extend(stored.sampled.samples())
        tables = {
            "runs": runs,
            # One document per stored run, naming it (which record's: kidata check, run after
            # every load, holds each document to its row's digests).
            "run_documents": [(name, True) for name in self.runs],
            "measurements": measurements,
            "samples": samples,
            "environments": list(self.environments.items()),
            "protocols": [(p,) for p in self.protocols],
            "workloads": [(w, n, d) for w, (n, d) in self.workloads.items()],
            "workload_parameters": list(self.parameters),
            "implementations": [(i, n, k) for i, (n, k) in self.implementations.items()],
            "rejects": list(self.rejects),
        }
        return {t: sorted(rows, key=repr) for t, rows in tables.items()}


# The columns each projection holds, in order (what test_oracle.py selects from the warehouse).
PROJECTIONS = {
    "runs": ["run_id", "source", "external_id", "kernel", "pass", "implementation", "workload",
             "gpu", "metric", "environment_id", "protocol_id", "workload_id",
             "implementation_id", "observed_at", "status", "version"],
    "run_documents": ["run_id", "json_extract_string(document, '$.metadata.name') = run_id"],
    "measurements": ["run_id", "metric", "statistic", "unit", "value"],
    "samples": ["run_id", "metric", "unit", "sample", "value",
                "content_hash = (SELECT r.content_hash FROM runs r "
                "WHERE r.run_id = samples.run_id)"],
    "environments": ["environment_id", "gpu"],
    "protocols": ["protocol_id"],
    "workloads": ["workload_id", "name", "document IS NOT NULL"],
    "workload_parameters": ["workload_id", "name", "value", "text"],
    "implementations": ["implementation_id", "name", "kernel"],
    "rejects": ["source_file", "position"],
}
