"""Validate kernelindex documents field by field.

Each check raises :class:`~kidata.errors.RecordError` naming the file, the record and the
dotted field path, and saying what was expected.
"""

from __future__ import annotations

import itertools
import math
import re
from datetime import UTC, datetime
from typing import Any

from kidata.errors import RecordError
from kidata.ingest.readers.base import shown

API_VERSION = "kernelindex.dev/v1alpha1"
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")

# One unit per metric in the warehouse; every accepted unit with its factor to that unit.
UNITS: dict[str, tuple[str, dict[str, float]]] = {
    "latency": ("ns", {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}),
    "memory": ("MB", {"MB": 1.0, "MiB": 1.0, "GB": 1024.0, "GiB": 1024.0, "KB": 1 / 1024,
                      "B": 1 / (1024 * 1024), "bytes": 1 / (1024 * 1024)}),
    # Rates some harnesses publish instead of (or beside) a time: never a latency.
    "throughput": ("TFLOP/s", {"TFLOP/s": 1.0, "GFLOP/s": 1e-3}),
    "bandwidth": ("GB/s", {"GB/s": 1.0, "TB/s": 1e3, "B/s": 1e-9}),
    "instructions": ("count", {"count": 1.0}),
    "speedup": ("x", {"x": 1.0}),
}
# Statistics that are not values of the metric: the sample count (unit 'count').
COUNT_STATISTICS = ("samples",)
# Statistics that may be 0 (a spread); every other value must be > 0.
ZERO_STATISTICS = ("stddev",)


# Dotted paths split once: the checks ask for the same few dozen paths millions of times.
_PATHS: dict[str, tuple[str, ...]] = {}
# Timestamps already read (a load repeats a few): the text and its UTC time.
_TIMES: dict[str, datetime] = {}
_INF = math.inf
# Declared digests already found well formed (runs repeat a few documents' digests).
_GOOD_DIGESTS: set[str] = set()


def _good_digest(text: str) -> bool:
    if not DIGEST_RE.match(text):
        return False
    if len(_GOOD_DIGESTS) >= 10_000:
        _GOOD_DIGESTS.clear()
    _GOOD_DIGESTS.add(text)
    return True


# What a field must be, as predicates on a value: the Checker's methods below decide with these
# and say what is wrong; a hot loop may test a value with them first and call the Checker
# only when one fails (to raise its error), so each rule is still written once.

def is_text(value: Any) -> bool:
    """A required text: a string with something other than whitespace."""
    return isinstance(value, str) and bool(value.strip())


def known_time(value: Any) -> datetime | None:
    """The UTC time of a timestamp text :meth:`Checker.timestamp` has already read, else None."""
    return _TIMES.get(value) if type(value) is str else None


def positive_number(value: Any) -> float | None:
    """A measured value: the float of a finite number > 0 (not a boolean); None otherwise."""
    kind = type(value)
    if kind is float:
        number = value
    elif kind is int or (not isinstance(value, bool) and isinstance(value, int | float)):
        try:
            number = float(value)
        except OverflowError:  # an integer beyond the float range
            return None
    else:
        return None
    return number if 0.0 < number < _INF else None


class Checker:
    """Field access for one record, producing errors that say where."""

    def __init__(self, file: str, position: str):
        self.file = file
        self.position = position

    def fail(self, field: str | None, message: str) -> RecordError:
        return RecordError(self.file, self.position, field, message)

    def get(self, obj: Any, path: str, prefix: str = "") -> Any:
        """The value at dotted ``path`` in ``obj``, or None when any step is missing."""
        parts = _PATHS.get(path)
        if parts is None:
            parts = tuple(path.split("."))
            if len(_PATHS) < 1000:
                _PATHS[path] = parts
        cur = obj
        for part in parts:
            if not isinstance(cur, dict):
                return None
            cur = cur.get(part)
        return cur

    def obj(self, obj: Any, path: str, prefix: str, required: bool = True) -> dict | None:
        value = self.get(obj, path)
        if value is None and not required:
            return None
        if not isinstance(value, dict):
            raise self.fail(f"{prefix}{path}", f"expected an object, got {_show(value)}")
        return value

    def text(self, obj: Any, path: str, prefix: str, required: bool = True) -> str | None:
        value = self.get(obj, path)
        if value is None and not required:
            return None
        if not is_text(value):
            raise self.fail(f"{prefix}{path}", f"expected a non-empty string, got {_show(value)}")
        return value

    def string(self, obj: Any, path: str, prefix: str) -> str | None:
        """An optional field stored as text (a title, a name, a version): a string, or None
        when missing; anything else (a number, a list) is an error, not a crash later."""
        value = self.get(obj, path)
        if value is None or isinstance(value, str):
            return value
        raise self.fail(f"{prefix}{path}", f"expected a string, got {_show(value)}")

    def positive(self, obj: Any, path: str, prefix: str, required: bool = True) -> float | None:
        value = self.get(obj, path)
        if value is None and not required:
            return None
        return self.positive_value(value, f"{prefix}{path}")

    def positive_value(self, value: Any, field: str) -> float:
        number = positive_number(value)
        if number is not None:
            return number
        # Not a measured value (positive_number decides): say why.
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(field, f"expected a number, got {_show(value)}")
        try:
            float(value)
        except OverflowError:  # an integer beyond the float range
            raise self.fail(field, f"expected a number that fits a 64-bit float, got "
                                   f"{_show(value)}") from None
        raise self.fail(field, f"expected a finite number > 0, got {_show(value)}")

    def timestamp(self, obj: Any, path: str, prefix: str) -> datetime | None:
        value = self.get(obj, path)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.fail(f"{prefix}{path}",
                            f"expected an ISO 8601 timestamp, got {_show(value)}")
        found = _TIMES.get(value)
        if found is not None:
            return found
        try:
            ts = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise self.fail(f"{prefix}{path}",
                            f"expected an ISO 8601 timestamp such as 2024-09-03T15:39:30Z, "
                            f"got {value!r}") from None
        if ts.tzinfo is None:
            raise self.fail(f"{prefix}{path}",
                            f"timestamp {value!r} has no time zone; expected e.g. a trailing Z")
        try:
            found = ts.astimezone(UTC)
        except OverflowError:
            raise self.fail(f"{prefix}{path}",
                            f"timestamp {value!r} is outside years 1-9999 once converted to "
                            "UTC") from None
        if len(_TIMES) >= 10_000:
            _TIMES.clear()
        _TIMES[value] = found
        return found

    def document(self, doc: Any, role: str, kind: str) -> dict:
        """Check the envelope every kernelindex document shares."""
        if not isinstance(doc, dict):
            raise self.fail(role, f"expected a {kind} document (object), got {_show(doc)}")
        api = doc.get("apiVersion")
        if api != API_VERSION:
            raise self.fail(f"{role}.apiVersion", f"expected {API_VERSION!r}, got {_show(api)}")
        if doc.get("kind") != kind:
            raise self.fail(f"{role}.kind", f"expected {kind!r}, got {_show(doc.get('kind'))}")
        meta = doc.get("metadata")
        if not (isinstance(meta, dict) and is_text(meta.get("name"))):
            self.text(doc, "metadata.name", f"{role}.")  # raises: says what is wrong
        if not isinstance(doc.get("spec"), dict):
            self.obj(doc, "spec", f"{role}.")  # raises
        labels = meta.get("labels")
        if labels is not None and not (isinstance(labels, dict) and all(
                map(isinstance, labels.values(), itertools.repeat(str)))):
            raise self.fail(f"{role}.metadata.labels", "expected an object of strings")
        return doc

    def declared_digest(self, spec: dict, key: str, present: bool, role: str,
                        actual: str | None = None) -> str | None:
        """The digest a run declares for a document (``spec``: the run's spec), checked
        against the record's document when it has one (``present``; ``actual``: that
        document's digest)."""
        declared = spec.get(key)
        if declared is not None and not (isinstance(declared, str) and (
                declared in _GOOD_DIGESTS or _good_digest(declared))):
            raise self.fail(f"run.spec.{key}",
                            f"expected 'sha256:' and 64 hex digits, got {_show(declared)}")
        if not present:
            return declared
        if declared is not None and declared != actual:
            raise self.fail(f"run.spec.{key}",
                            f"digest mismatch: the run declares {declared} but the {role} "
                            f"document in the record hashes to {actual}")
        return actual


def _show(value: Any) -> str:
    if value is None:
        return "nothing (missing or null)"
    return shown(value)
