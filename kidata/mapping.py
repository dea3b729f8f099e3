"""Declarative mappings (TOML): read any CSV or JSON results table without code.

Placeholder: filled in by the mapping language (docs/formats.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kidata.errors import UsageError


def load_mapping(path: str) -> dict[str, Any]:
    raise UsageError("--mapping is not implemented yet")


def read_with_mapping(mapping: str, path: str, settings: dict[str, str] | None
                      ) -> Iterator[Any]:
    raise UsageError("--mapping is not implemented yet")
