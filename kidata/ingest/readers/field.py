"""Every format kidata reads, registered as :class:`~kidata.ingest.readers.base.Reader` objects
(:data:`READERS`: kidata's own formats, then the field's): each refers to its reading function
itself, and a format that is a built-in mapping to :func:`kidata.ingest.mapping.read_builtin`
with the mapping's name. Also how each field format is recognised from its first bytes
(:func:`detect`) and what each can and cannot supply (``kidata formats``, ``docs/formats.md``)."""

from __future__ import annotations

import re
from functools import partial

from kidata.ingest import mapping
from kidata.ingest.readers import (
    gbench,
    kernelbench,
    kernelindex,
    liger,
    nvbench,
    pytorch_v3,
    trainkernel,
)
from kidata.ingest.readers.base import Reader


def _mapping(name: str) -> partial:
    """The reader of the built-in mapping ``kidata/data/mappings/NAME.toml``."""
    return partial(mapping.read_builtin, name)


# kidata's own formats: read without the load's --set context.
BUILT_IN: tuple[Reader, ...] = (
    Reader("kernelindex", "kernelindex bundles or documents (JSON, JSON Lines, seed files)",
           "everything the model has", "nothing", kernelindex.read, settings=False),
    Reader("liger-csv", "Liger-Kernel benchmark CSV (docs/liger.md)",
           "kernel, provider, mode, p20/median/p80, GPU, time, version",
           "spread beyond p20/p80", liger.read, settings=False),
    Reader("trainkernel", "trainkernel results table",
           "GPU, workload, latency (µs), published ratio", "time, spread", trainkernel.read,
           settings=False),
)

# The field's formats: they take the load's --set context for what the file lacks.
FORMATS: dict[str, Reader] = {f.name: f for f in (
    Reader("flashinfer-csv", "FlashInfer flashinfer_benchmark.py --output_path CSV",
           "routine (kernel), backend (implementation), parameters, median and stddev (ms), "
           "TFLOP/s, TB/s",
           "GPU and version (read from the stdout .txt beside the file, else --set gpu= "
           "--set version=), time (--set observed_at=)", _mapping("flashinfer-csv")),
    Reader("nvbench-json", "NVIDIA nvbench --json",
           "benchmark (kernel), axes (workload), GPU per device, mean and relative stddev "
           "(s), median/q1/q3/min/max in newer files, samples, bandwidth",
           "implementation (--set implementation=, default the executable's name), time "
           "(--set observed_at=)", nvbench.read_json_output),
    Reader("nvbench-csv", "NVIDIA nvbench --csv",
           "benchmark, axes, GPU name, mean and relative stddev (s), samples, bandwidth",
           "implementation (--set implementation=, required), time", nvbench.read_csv_output),
    Reader("kernelbench-json", "KernelBench baseline timing JSON",
           "problem (kernel), mean/std/min/max (ms, 3 significant digits), trials, GPU",
           "median (the mean is primary), time; implementation only from the file name "
           "(baseline_time_torch[_compile_<backend>_<mode>]) or --set implementation=",
           kernelbench.read),
    Reader("triton-perf-report", "triton.testing.perf_report save_path CSV",
           "x values (workload), one value per provider (implementation)",
           "unit and GPU (--set unit= --set gpu=, required), kernel (default the file "
           "name), dtype, time, spread (median only)", _mapping("triton-perf-report")),
    Reader("pytorch-v3", "PyTorch OSS benchmark database records, schema v3",
           "benchmark, model (kernel), backend (implementation), metric with raw samples, "
           "runner (GPU) when uploaded",
           "GPU when no runners (--set gpu=), time unless uploaded (--set observed_at=)",
           pytorch_v3.read),
    Reader("dynamo-csv", "PyTorch benchmarks/dynamo --performance CSV",
           "model (kernel), batch size, compiled latency (ms), speedup over eager (a "
           "published claim)",
           "GPU and compiler (--set gpu=, implementation from the file name or --set "
           "implementation=), eager latency, spread, time", _mapping("dynamo-csv")),
    Reader("google-benchmark-json", "google/benchmark --benchmark_out_format=json",
           "benchmark name (kernel/arguments), real time per iteration with time_unit, "
           "iterations, aggregates (mean/median/stddev) over repetitions, context date",
           "GPU (--set gpu=), implementation (--set implementation=, default the "
           "benchmark family)", gbench.read),
    Reader("github-action-benchmark", "github-action-benchmark data.js store",
           "a series over commits: benchmark name, value and unit, commit id and time",
           "GPU (--set gpu=), spread (one value per commit)", gbench.read_data_js),
)}

# The registry: every format by its --format name, kidata's own first.
READERS: dict[str, Reader] = {r.name: r for r in (*BUILT_IN, *FORMATS.values())}


def _starts(text: bytes, *patterns: bytes) -> bool:
    return any(re.match(p, text) for p in patterns)


def detect(text: bytes) -> str | None:
    """The field format a file's first bytes show (BOM and leading space already stripped), or
    None. Checked on the first line or the opening of the first JSON object only, so a
    kernelindex record that mentions these names is never mistaken for them."""
    first = text.split(b"\n", 1)[0].strip()
    lowered = first.lower()
    if lowered.startswith(b"routine,") and b"median_time" in lowered:
        return "flashinfer-csv"
    if lowered.startswith(b"benchmark,device,device name"):
        return "nvbench-csv"
    if lowered.startswith(b"dev,name,batch_size,speedup"):
        return "dynamo-csv"
    if text.startswith(b"window.BENCHMARK_DATA"):
        return "github-action-benchmark"
    if _starts(text, rb'\{\s*"meta"\s*:\s*\{\s*"argv"', rb'\{\s*"devices"\s*:'):
        return "nvbench-json"
    if _starts(text, rb'\{\s*"context"\s*:\s*\{'):
        return "google-benchmark-json"
    if _starts(text, rb'\{\s*"level\d+"\s*:\s*\{\s*"[^"]*\.py"\s*:'):
        return "kernelbench-json"
    if _starts(text, rb'\[?\s*\{\s*"benchmark"\s*:\s*\{'):
        return "pytorch-v3"
    if first and not first.startswith((b"{", b"[")) and b"," in first:
        second = text.split(b"\n", 2)[1].strip() if b"\n" in text else b""
        cells = second.split(b",")
        try:
            [float(c) for c in cells]
        except ValueError:
            return None
        if len(cells) == len(first.split(b",")) >= 2:
            return "triton-perf-report"
    return None


def describe() -> list[str]:
    """Lines for ``kidata formats``: each format, what it supplies, what it lacks."""
    from kidata.ingest.readers.builder import SETTINGS

    lines = []
    for reader in READERS.values():
        lines += [f"{reader.name}: {reader.title}", f"  supplies: {reader.supplies}",
                  f"  lacks: {reader.lacks}"]
    lines.append("--set keys (context a file lacks):")
    width = max(len(k) for k in SETTINGS)
    lines += [f"  {key:<{width}}  {text}" for key, text in SETTINGS.items()]
    lines.append("--mapping FILE.toml reads any other CSV or JSON table (docs/formats.md).")
    return lines
