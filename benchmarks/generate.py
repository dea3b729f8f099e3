"""Deterministic generator of realistic synthetic benchmark records for kidata's benchmarks.

Writes the same runs in the shapes kidata ingests:

- ``bundles.ndjson``: kernelindex bundles (``{"run", "protocol", "environment"}``), one per
  line, shaped exactly like the seeds (Liger-Kernel results turned into kernelindex records);
- ``many/part-NNNNN.ndjson``: the same bundles split into files of ``--per-file`` records, as a
  CI system drops them;
- ``liger.csv``: the same runs as rows of Liger-Kernel's benchmark CSV;
- ``extra.ndjson``: ``--extra`` more bundles that are *not* in the files above (new results to
  add incrementally).

Runs cover many kernels, passes, implementations, GPUs, workloads and Liger versions; record
``i`` is a pure function of ``i`` and ``--seed``, so the same arguments always give byte-identical
files. Protocol and environment digests follow the kernelindex rule (``sha256:`` + SHA-256 of the
canonical JSON of the document without ``metadata``), computed here independently of kidata, so
kidata's digest check verifies them for real.

    python benchmarks/generate.py --runs 100000 --out benchmarks/out/100k
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson

API = "kernelindex.dev/v1alpha1"

KERNELS = {  # key: (display title, x_name, x_label)
    "rms_norm": ("RMSNorm", "H", "hidden size"),
    "layer_norm": ("LayerNorm", "H", "hidden size"),
    "group_norm": ("GroupNorm", "H", "hidden size"),
    "cross_entropy": ("CrossEntropy", "V", "vocab size"),
    "fused_linear_cross_entropy": ("FusedLinearCrossEntropy", "V", "vocab size"),
    "softmax": ("Softmax", "N", "hidden size"),
    "swiglu": ("SwiGLU", "N", "hidden size"),
    "geglu": ("GeGLU", "N", "hidden size"),
    "relu_squared": ("ReLU squared", "N", "hidden size"),
    "rope": ("RoPE", "H", "hidden size"),
    "embedding": ("Embedding", "V", "vocab size"),
    "kl_div": ("KLDiv", "V", "vocab size"),
    "jsd": ("JSD", "V", "vocab size"),
    "fused_linear_jsd": ("FusedLinearJSD", "V", "vocab size"),
    "dyt": ("DyT", "H", "hidden size"),
    "qwen2vl_mrope": ("Qwen2-VL M-RoPE", "H", "hidden size"),
    "tvd": ("TVD", "V", "vocab size"),
    "sparsemax": ("Sparsemax", "N", "hidden size"),
    "multi_token_attention": ("MultiTokenAttention", "N", "hidden size"),
    "fused_add_rms_norm": ("FusedAddRMSNorm", "H", "hidden size"),
    "poly_norm": ("PolyNorm", "H", "hidden size"),
    "softcap": ("Softcap", "N", "hidden size"),
    "cosine_similarity_loss": ("CosineSimilarityLoss", "H", "hidden size"),
    "llama4_rope": ("Llama4 RoPE", "H", "hidden size"),
}
PASSES = ("forward", "backward", "full")
IMPLEMENTATIONS = ("liger", "huggingface", "torch", "torch_compile", "triton")
IMPL_FACTOR = {"liger": 0.62, "huggingface": 1.0, "torch": 1.04, "torch_compile": 0.78,
               "triton": 0.7}
GPUS = {  # name as the source writes it: (slug, product, formFactor, architecture, speed)
    "NVIDIA A100-SXM4-80GB": ("nvidia-a100-sxm4-80gb", "NVIDIA A100", "SXM4-80GB", "sm_80", 1.0),
    "NVIDIA H100 80GB HBM3": ("nvidia-h100-80gb-hbm3", "NVIDIA H100", "80GB HBM3", "sm_90", 1.7),
    "NVIDIA H100 PCIe": ("nvidia-h100-pcie", "NVIDIA H100", "PCIe", "sm_90", 1.4),
    "NVIDIA H200": ("nvidia-h200", "NVIDIA H200", "SXM 141GB", "sm_90", 2.2),
    "NVIDIA B200": ("nvidia-b200", "NVIDIA B200", "SXM", "sm_100", 3.6),
    "NVIDIA GeForce RTX 3090": ("nvidia-geforce-rtx-3090", "NVIDIA GeForce RTX 3090", "PCIe",
                                "sm_86", 0.45),
    "NVIDIA GeForce RTX 4090": ("nvidia-geforce-rtx-4090", "NVIDIA GeForce RTX 4090", "PCIe",
                                "sm_89", 0.8),
}
SIZES = (1024, 2048, 4096, 8192, 16384)
ROWS = (2048, 4096)
DTYPES = (("bf16", "torch.bfloat16"), ("fp32", "torch.float32"))
VERSIONS = ("0.2.0", "0.2.1", "0.3.0", "0.3.1", "0.4.0", "0.4.1", "0.4.2", "0.5.0", "0.5.2",
            "0.5.5", "0.5.8", "0.6.0", "0.6.1", "0.6.2", "0.6.3", "0.6.4", "0.7.0")
START = datetime(2024, 9, 3, 15, 0, 0, tzinfo=UTC)

_GPU_NAMES = list(GPUS)
_KERNEL_KEYS = list(KERNELS)
_WORKLOADS = [(size, rows, dtype) for size in SIZES for rows in ROWS for dtype in DTYPES]
# Combinations per benchmark sweep; record i belongs to sweep i // COMBOS (a later date).
COMBOS = len(_KERNEL_KEYS) * len(PASSES) * len(IMPLEMENTATIONS) * len(GPUS) * len(_WORKLOADS)

PROTOCOL_NOTES = {
    "forward": "Timed: the module forward pass",
    "backward": "Timed: the backward pass of the module output given a random upstream gradient",
    "full": "Timed: the forward and backward passes together",
}


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(document: dict) -> str:
    body = {k: v for k, v in document.items() if k != "metadata"}
    return "sha256:" + hashlib.sha256(canonical(body).encode("utf-8")).hexdigest()


def protocol(pass_: str) -> dict:
    return {
        "kind": "BenchmarkProtocol",
        "spec": {
            "harness": {"name": "Liger-Kernel benchmark scripts",
                        "repository": "https://github.com/linkedin/Liger-Kernel"},
            "measurement": {"timer": "cuda_events", "primaryStatistic": "median"},
            "comparability": {
                "notes": PROTOCOL_NOTES[pass_] + ", via triton.testing.do_bench with quantiles "
                "0.5/0.2/0.8 (median with p20/p80 spread). The upstream CSV records no CUDA, "
                "driver, or torch version; the Liger release rides each run's labels. "
                "Comparable only within one kernel, workload, timed pass, and GPU.",
                "family": "liger_kernel_bench",
            },
        },
        "metadata": {"name": f"liger-bench-do-bench-{pass_}",
                     "title": f"Liger benchmark harness · {pass_} pass"},
        "apiVersion": API,
    }


def environment(gpu_name: str) -> dict:
    slug, product, form, arch, _ = GPUS[gpu_name]
    return {
        "kind": "ExecutionEnvironment",
        "spec": {"hardware": {"vendor": "nvidia", "product": product, "formFactor": form,
                              "architecture": arch},
                 "software": {}},
        "metadata": {"name": f"liger-bench-{slug}",
                     "title": f"Liger benchmark host · {gpu_name.removeprefix('NVIDIA ')}"},
        "apiVersion": API,
    }


def _small_doc(kind: str, spec: dict) -> dict:
    return {"kind": kind, "spec": spec, "metadata": {"name": "x"}, "apiVersion": API}


class Generator:
    """Record ``i`` of a data set, as a kernelindex bundle and as a Liger CSV row."""

    def __init__(self, seed: int = 0):
        self.seed = seed
        self.protocols = {p: protocol(p) for p in PASSES}
        self.protocol_digests = {p: digest(d) for p, d in self.protocols.items()}
        self.environments = {g: environment(g) for g in GPUS}
        self.environment_digests = {g: digest(d) for g, d in self.environments.items()}
        self.workload_digests = {
            (k, w): digest(_small_doc("Workload", {"kernel": k, "parameters": {
                "x": w[0], "M": w[1], "dtype": w[2][1]}}))
            for k in KERNELS for w in _WORKLOADS}
        self.impl_digests = {i: digest(_small_doc("Implementation", {"name": i}))
                             for i in IMPLEMENTATIONS}
        # A base latency per (kernel, pass, workload): deterministic from the seed.
        rng = random.Random(seed)
        self.base_ns = {(k, p, w): rng.uniform(8_000, 900_000) * (w[0] / 4096) ** 0.5
                        * (2.0 if p == "full" else 1.0)
                        for k in KERNELS for p in PASSES for w in _WORKLOADS}

    def parts(self, i: int):
        sweep, rest = divmod(i, COMBOS)
        rest, w = divmod(rest, len(_WORKLOADS))
        rest, g = divmod(rest, len(_GPU_NAMES))
        rest, m = divmod(rest, len(IMPLEMENTATIONS))
        k, p = divmod(rest, len(PASSES))
        kernel, pass_, impl = _KERNEL_KEYS[k], PASSES[p], IMPLEMENTATIONS[m]
        gpu = _GPU_NAMES[g]
        workload = _WORKLOADS[w]
        # Each (sweep, kernel, gpu) ran at its own time, as the Liger scripts write one
        # timestamp per kernel script run.
        when = START + timedelta(days=7 * sweep, minutes=31 * k + 3 * g, seconds=w)
        version = VERSIONS[min(sweep * len(VERSIONS) // 40, len(VERSIONS) - 1)]
        noise = random.Random(i * 1_000_003 + self.seed)
        median = (self.base_ns[(kernel, pass_, workload)] * IMPL_FACTOR[impl] / GPUS[gpu][4]
                  * (1 + noise.uniform(-0.05, 0.05)))
        median_ns = max(1000, round(median))
        p20_ns = round(median_ns * (1 - noise.uniform(0.005, 0.04)))
        p80_ns = round(median_ns * (1 + noise.uniform(0.005, 0.04)))
        return kernel, pass_, impl, gpu, workload, when, version, (p20_ns, median_ns, p80_ns)

    def bundle(self, i: int) -> dict:
        kernel, pass_, impl, gpu, workload, when, version, (p20, med, p80) = self.parts(i)
        size, rows, (dtype, _) = workload
        slug = f"{KERNELS[kernel][2].split()[0]}{size}-rows{rows}-{dtype}"
        time_slug = when.strftime("%Y-%m-%d-%H-%M-%S")
        external = f"{kernel}/{pass_}/{impl}/{GPUS[gpu][0]}/{slug}/{time_slug}"
        name = "liger-" + "-".join(external.split("/")).replace("_", "-")
        run = {
            "kind": "BenchmarkRun",
            "spec": {
                "status": "passed",
                "timing": {"latencyNs": {"median": med}, "primaryStatistic": "median"},
                "observedAt": when.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
                "measurements": [
                    {"unit": "ns", "value": p20, "metric": "latency", "statistic": "p20"},
                    {"unit": "ns", "value": p80, "metric": "latency", "statistic": "p80"},
                ],
                "sourceNative": {
                    "source": "liger-kernel-bench",
                    "metrics": {"ms_20": p20 / 1e6, "ms_50": med / 1e6, "ms_80": p80 / 1e6},
                    "benchmark": f"{kernel}/{pass_}",
                    "externalId": external,
                },
                "protocolDigest": self.protocol_digests[pass_],
                "workloadDigest": self.workload_digests[(kernel, workload)],
                "environmentDigest": self.environment_digests[gpu],
                "implementationDigest": self.impl_digests[impl],
            },
            "metadata": {"name": name,
                         "title": f"{KERNELS[kernel][0]} · {impl} · {pass_}",
                         "labels": {"liger_version": version}},
            "apiVersion": API,
        }
        return {"run": run, "protocol": self.protocols[pass_],
                "environment": self.environments[gpu]}

    def csv_row(self, i: int) -> list:
        kernel, pass_, impl, gpu, workload, when, version, (p20, med, p80) = self.parts(i)
        size, rows, (_, torch_dtype) = workload
        _, x_name, x_label = KERNELS[kernel]
        config = json.dumps({"M": rows, "dtype": torch_dtype})
        return [kernel, impl, pass_, "speed", "ms", x_name, x_label, size, med / 1e6, p20 / 1e6,
                p80 / 1e6, config, gpu, when.strftime("%Y-%m-%d %H:%M:%S"), version]


CSV_HEADER = ["kernel_name", "kernel_provider", "kernel_operation_mode", "metric_name",
              "metric_unit", "x_name", "x_label", "x_value", "y_value_50", "y_value_20",
              "y_value_80", "extra_benchmark_config_str", "gpu_name", "timestamp",
              "liger_version"]


def write_ndjson(gen: Generator, path: Path, start: int, stop: int) -> None:
    with open(path, "wb") as fh:
        buf = []
        for i in range(start, stop):
            buf.append(orjson.dumps(gen.bundle(i)))
            if len(buf) >= 2000:
                fh.write(b"\n".join(buf) + b"\n")
                buf.clear()
        if buf:
            fh.write(b"\n".join(buf) + b"\n")


def write_many(single: Path, folder: Path, per_file: int) -> int:
    """Split ``single`` into files of ``per_file`` lines (byte-identical records)."""
    folder.mkdir(parents=True, exist_ok=True)
    count = 0
    out = None
    with open(single, "rb") as src:
        for n, line in enumerate(src):
            if n % per_file == 0:
                if out is not None:
                    out.close()
                out = open(folder / f"part-{count:05d}.ndjson", "wb")  # noqa: SIM115
                count += 1
            out.write(line)
    if out is not None:
        out.close()
    return count


def write_csv(gen: Generator, path: Path, start: int, stop: int) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(CSV_HEADER)
        for i in range(start, stop):
            writer.writerow(gen.csv_row(i))


def generate(out: Path, runs: int, extra: int = 1000, per_file: int = 1000, seed: int = 0,
             csv_rows: int | None = None, many: bool = True) -> dict:
    """Write a data set of ``runs`` runs (+ ``extra`` new ones) under ``out``; returns what
    was written. Files that exist with the right size marker are reused."""
    out.mkdir(parents=True, exist_ok=True)
    marker = out / "generated.json"
    meta = {"runs": runs, "extra": extra, "per_file": per_file, "seed": seed,
            "csv_rows": csv_rows if csv_rows is not None else runs, "many": many,
            "version": 1}
    if marker.exists() and json.loads(marker.read_text()) == meta:
        return meta
    gen = Generator(seed)
    write_ndjson(gen, out / "bundles.ndjson", 0, runs)
    write_ndjson(gen, out / "extra.ndjson", runs, runs + extra)
    if many:
        write_many(out / "bundles.ndjson", out / "many", per_file)
    write_csv(gen, out / "liger.csv", 0, meta["csv_rows"])
    marker.write_text(json.dumps(meta))
    return meta


def parse_count(text: str) -> int:
    text = text.strip().lower().replace("_", "").replace(",", "")
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=parse_count, required=True, help="e.g. 100k, 1M")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--extra", type=parse_count, default=1000)
    ap.add_argument("--per-file", type=parse_count, default=1000)
    ap.add_argument("--csv-rows", type=parse_count, default=None)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    meta = generate(args.out, args.runs, args.extra, args.per_file, args.seed, args.csv_rows)
    sys.stdout.write(json.dumps(meta) + "\n")
    return 0


if __name__ == "__main__":
    os.umask(0o022)
    sys.exit(main())
