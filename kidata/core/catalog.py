"""Reference data kept in data files, not code: the GPU catalog and display names.

``kidata/data/gpus.toml`` maps every name a source writes for a card to one canonical key, with
the card's vendor, architecture and published peaks. ``kidata/data/names.toml`` holds display
names (kernels, implementations).
"""

from __future__ import annotations

import difflib
import re
import tomllib
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path

from kidata.errors import UsageError


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


PACKAGED_GPUS = "kidata/data/gpus.toml"
GPU_FIELDS = {"family": str, "vendor": str, "product": str, "form_factor": str,
              "architecture": str, "memory_bandwidth_gbps": (int, float),
              "bf16_dense_tflops": (int, float), "aliases": list}
GPU_REQUIRED = ("family", "vendor", "product", "form_factor")


def user_gpu_file() -> str | None:
    """The GPU file named by ``$KIDATA_GPUS`` (None when unset): one variable read, so that
    each lookup sees the environment as it is now."""
    from kidata.core import config

    path = config.value("KIDATA_GPUS")
    return None if path is None else str(path)


def _entries(text: str, file: str) -> dict[str, dict]:
    """The ``[gpus.KEY]`` tables of a GPU file, checked: errors name the file and field."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{file}: not a TOML file: {exc}") from None
    unknown = set(data) - {"gpus"}
    gpus = data.get("gpus")
    if unknown or not isinstance(gpus, dict):
        raise UsageError(f"{file}: expected only [gpus.KEY] tables (as kidata's gpus.toml), "
                         f"got {sorted(unknown) or 'no [gpus] table'}")
    for key, entry in gpus.items():
        where = f"{file}, field gpus.{key}"
        if not isinstance(entry, dict):
            raise UsageError(f"{where}: expected a table")
        if key != slugify(key):
            raise UsageError(f"{where}: a key is lower case letters, digits and '-' "
                             f"(such as {slugify(key) or 'my-gpu'!r})")
        for name in GPU_REQUIRED:
            if not isinstance(entry.get(name), str) or not entry[name].strip():
                raise UsageError(f"{where}.{name}: required, a non-empty string")
        for name, value in entry.items():
            kind = GPU_FIELDS.get(name)
            if kind is None:
                raise UsageError(f"{where}.{name}: unknown field; the fields are "
                                 f"{', '.join(GPU_FIELDS)}")
            if isinstance(value, bool) or not isinstance(value, kind):
                what = {str: "a string", list: "a list of names"}.get(kind, "a number")
                raise UsageError(f"{where}.{name}: expected {what}, got {value!r}")
            if kind == (int, float) and not value > 0:
                raise UsageError(f"{where}.{name}: expected a number > 0, got {value!r}")
        if not all(isinstance(a, str) and a.strip() for a in entry.get("aliases", [])):
            raise UsageError(f"{where}.aliases: expected a list of names")
    return gpus


@cache
def _catalog(user: str | None) -> tuple[dict[str, Gpu], dict[str, str]]:
    """The GPUs by key and their names (normalised) to keys: the packaged catalog, with the
    entries of the user's file (``$KIDATA_GPUS``) added or replacing those of the same key."""
    entries = dict(_data("gpus.toml")["gpus"])
    if user is not None:
        try:
            text = Path(user).read_text("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{user} (from $KIDATA_GPUS): cannot read the GPU file: "
                             f"{exc}") from None
        entries.update(_entries(text, user))
    gpus: dict[str, Gpu] = {}
    aliases: dict[str, str] = {}
    for key, entry in entries.items():
        gpu = gpus[key] = Gpu(
            key=key,
            vendor=entry["vendor"],
            product=entry["product"],
            form_factor=entry["form_factor"],
            architecture=entry.get("architecture"),
            memory_bandwidth_gbps=entry.get("memory_bandwidth_gbps"),
            bf16_dense_tflops=entry.get("bf16_dense_tflops"),
            family=entry["family"],
        )
        for name in (key, *entry.get("aliases", []), f"{gpu.product} {gpu.form_factor}"):
            aliases[_norm(name)] = key
    return gpus, aliases


def gpu_catalog() -> dict[str, Gpu]:
    """Every GPU kidata knows, by key (the packaged catalog and ``$KIDATA_GPUS``'s)."""
    return _catalog(user_gpu_file())[0]


def _aliases() -> dict[str, str]:
    return _catalog(user_gpu_file())[1]


def closest_gpus(name: str, n: int = 3) -> list[str]:
    """Up to ``n`` catalog keys whose names are spelled most like ``name``."""
    names = _aliases()
    found = difflib.get_close_matches(_norm(name), list(names), n=4 * n, cutoff=0.5)
    return list(dict.fromkeys(names[f] for f in found))[:n]


def lookup_gpu(name: str) -> Gpu:
    """The catalog entry for any name of a GPU.

    An unknown name still resolves, to a derived key (the name's slug without a leading
    ``nvidia``) with ``known=False`` so callers can warn.
    """
    return _lookup(name, user_gpu_file())


@lru_cache(maxsize=4096)
def _lookup(name: str, user: str | None) -> Gpu:
    gpus, aliases = _catalog(user)
    key = aliases.get(_norm(name))
    if key is not None:
        return gpus[key]
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
