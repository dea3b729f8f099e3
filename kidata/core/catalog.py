"""Reference data kept in data files, not code: the GPU catalog and display names.

``kidata/data/gpus.toml`` maps every name a source writes for a card to one canonical key, with
the card's vendor, architecture and published peaks. ``kidata/data/names.toml`` holds display
names (kernels, implementations).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources


@dataclass(frozen=True)
class Gpu:
    key: str
    vendor: str
    product: str
    form_factor: str
    architecture: str | None
    memory_bandwidth_gbps: float | None
    bf16_dense_tflops: float | None
    known: bool = True
    # The GPU's generation and class (`h100` for the SXM5, PCIe and NVL cards); for an
    # unknown GPU, its derived key.
    family: str = ""


def _norm(name: str) -> str:
    n = re.sub(r"[^a-z0-9]", "", name.lower())
    return n[len("nvidia"):] if n.startswith("nvidia") else n


def slugify(text: str) -> str:
    """Lower-case ``text`` and join its alphanumeric runs with ``-``."""
    return "-".join(re.findall(r"[a-z0-9]+", text.lower()))


@cache
def _data(name: str) -> dict:
    return tomllib.loads(resources.files("kidata.data").joinpath(name).read_text("utf-8"))


@cache
def gpu_catalog() -> dict[str, Gpu]:
    out = {}
    for key, entry in _data("gpus.toml")["gpus"].items():
        out[key] = Gpu(
            key=key,
            vendor=entry["vendor"],
            product=entry["product"],
            form_factor=entry["form_factor"],
            architecture=entry.get("architecture"),
            memory_bandwidth_gbps=entry.get("memory_bandwidth_gbps"),
            bf16_dense_tflops=entry.get("bf16_dense_tflops"),
            family=entry["family"],
        )
    return out


@cache
def _aliases() -> dict[str, str]:
    out: dict[str, str] = {}
    for key, entry in _data("gpus.toml")["gpus"].items():
        gpu = gpu_catalog()[key]
        names = [key, *entry.get("aliases", []), f"{gpu.product} {gpu.form_factor}"]
        for name in names:
            out[_norm(name)] = key
    return out


def lookup_gpu(name: str) -> Gpu:
    """The catalog entry for any name of a GPU.

    An unknown name still resolves, to a derived key (the name's slug without a leading
    ``nvidia``) with ``known=False`` so callers can warn.
    """
    key = _aliases().get(_norm(name))
    if key is not None:
        return gpu_catalog()[key]
    derived = slugify(name)
    if derived.startswith("nvidia-"):
        derived = derived[len("nvidia-"):]
    derived = derived or "unknown"
    return Gpu(derived, "", name, "", None, None, None, known=False, family=derived)


def gpu_from_hardware(hardware: dict) -> Gpu:
    """Resolve an ExecutionEnvironment ``spec.hardware`` object to a catalog GPU."""
    product = str(hardware.get("product") or "")
    form = str(hardware.get("formFactor") or "")
    for candidate in (f"{product} {form}", f"{product}-{form}", product):
        gpu = lookup_gpu(candidate)
        if gpu.known:
            return gpu
    return lookup_gpu(f"{product} {form}".strip())


def display_name(kind: str, key: str) -> str:
    """Display name of a kernel or implementation key (``kind`` is ``kernels`` or
    ``implementations``); the key itself when the data file has none."""
    return _data("names.toml").get(kind, {}).get(key, key)
