"""One spelling per dtype: ``torch.bfloat16``, ``bfloat16``, ``bf16`` and ``BF16`` are ``bf16``.

Harnesses spell dtypes their own way (PyTorch's ``torch.float8_e4m3fn``, FlashInfer's
``fp8_e4m3``, nvbench's ``F32``, google-benchmark template arguments ``F16``). Readers keep the
source's spelling in ``sourceNative`` and store this one in workload parameters, so the same
workload from two harnesses has the same parameters.
"""

from __future__ import annotations

import re

# Canonical spelling <- the names sources write (compared lower-case, without "torch.").
_ALIASES: dict[str, tuple[str, ...]] = {
    "bf16": ("bfloat16", "bf16"),
    "fp16": ("float16", "half", "fp16", "f16"),
    "fp32": ("float32", "float", "fp32", "f32"),
    "fp64": ("float64", "double", "fp64", "f64"),
    "tf32": ("tf32", "tensorfloat32"),
    "fp8_e4m3": ("float8_e4m3fn", "float8_e4m3", "fp8_e4m3", "fp8_e4m3fn", "e4m3"),
    "fp8_e5m2": ("float8_e5m2", "fp8_e5m2", "e5m2"),
    "fp4_e2m1": ("float4_e2m1fn_x2", "fp4_e2m1", "e2m1"),
    "int8": ("int8", "i8", "char"),
    "int16": ("int16", "i16", "short"),
    "int32": ("int32", "i32", "int"),
    "int64": ("int64", "i64", "long"),
    "uint8": ("uint8", "u8", "uint8_t"),
    "uint16": ("uint16", "u16", "uint16_t"),
    "uint32": ("uint32", "u32", "uint32_t"),
    "uint64": ("uint64", "u64", "uint64_t"),
    "bool": ("bool",),
    "complex64": ("complex64", "cfloat", "cf32"),
    "complex128": ("complex128", "cdouble", "cf64"),
}
_LOOKUP = {alias: key for key, names in _ALIASES.items() for alias in names}


def normalise_dtype(text: str) -> str:
    """The one spelling of a dtype; a name not known here is kept, lower-cased, without a
    ``torch.`` prefix (``mxfp4`` stays ``mxfp4``).

    >>> [normalise_dtype(t) for t in ("torch.bfloat16", "bfloat16", "BF16")]
    ['bf16', 'bf16', 'bf16']
    """
    name = text.strip().lower()
    name = re.sub(r"^(torch|np|numpy|jnp|tl)\.", "", name)
    return _LOOKUP.get(name, name)


def is_dtype_parameter(name: str) -> bool:
    """Whether a parameter name holds a dtype (``dtype``, ``q_dtype``, ``input_dtype``,
    ``precision``...)."""
    lowered = name.lower()
    return lowered.endswith("dtype") or lowered in ("precision", "data_type", "datatype")
