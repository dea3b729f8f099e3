"""Builders of kernelindex documents, shared by the readers of non-kernelindex sources.

Every source is turned into kernelindex documents first and flattened by one code path
(:mod:`kidata.ingest.flatten`), so all sources get the same validation, identity and digests, and
``kidata convert --to kernelindex`` is exact by construction.
"""

from __future__ import annotations

from typing import Any

from kidata.core.catalog import Gpu

API_VERSION = "kernelindex.dev/v1alpha1"


def document(kind: str, name: str, title: str | None, spec: dict[str, Any],
             labels: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if title is not None:
        metadata["title"] = title
    if labels:
        metadata["labels"] = labels
    return {"kind": kind, "spec": spec, "metadata": metadata, "apiVersion": API_VERSION}


def environment_document(gpu: Gpu, name: str, title: str,
                         software: dict[str, str] | None = None) -> dict[str, Any]:
    """ExecutionEnvironment of a host known by its GPU and the software versions given
    (``--set torch=...``; none by default)."""
    hardware: dict[str, Any] = {"vendor": gpu.vendor or "unknown", "product": gpu.product,
                                "formFactor": gpu.form_factor}
    if gpu.architecture:
        hardware["architecture"] = gpu.architecture
    return document("ExecutionEnvironment", name, title,
                    {"hardware": hardware, "software": dict(software or {})})
