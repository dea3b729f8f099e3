"""The kernelindex digest rule (kernelindex.md §1).

``digest(doc) = "sha256:" + sha256(canonical JSON of doc without its metadata key)`` where
canonical JSON sorts keys at every level, uses ``,`` and ``:`` with no spaces, and is UTF-8.
Metadata (names, titles) never changes identity.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def digest(document: dict[str, Any]) -> str:
    """Digest of a kernelindex document (its ``metadata`` key is left out)."""
    body = {k: v for k, v in document.items() if k != "metadata"}
    return "sha256:" + hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()
