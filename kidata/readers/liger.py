"""Liger-Kernel's benchmark CSV (issue 3: not yet implemented)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

from kidata.errors import RecordError
from kidata.readers import Item


def read(stream: IO[bytes], file: str) -> Iterator[Item | RecordError]:
    yield RecordError(file, "file", None, "the Liger-Kernel CSV reader is not implemented yet")
