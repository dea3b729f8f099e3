"""A time window over the results (``--since`` / ``--until`` of the reading commands).

A window keeps the runs *measured* in it (``observed_at``; a run whose source gives no time
cannot be placed in a window and is left out), from ``since`` (inclusive) to ``until``
(exclusive), UTC. Every table and view
read through a windowed session sees only those runs: their measurements and published
numbers, the latest run of each key *within* the window, the trends between them, the rejects
of loads made in it. Bounds are ISO 8601 dates or times (``2026-03-01``, ``2026-03-01T12:00Z``;
without a zone, UTC) or a span back from now (``30d``, ``12h``, ``2w``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from kidata.errors import UsageError

_SPAN = re.compile(r"^\s*(\d+)\s*([hdw])\s*$")
_UNITS = {"h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}


def moment(text: str | datetime, option: str, now: datetime | None = None) -> datetime:
    """A bound as a UTC time: ISO 8601, or ``<n>h``/``<n>d``/``<n>w`` back from ``now``."""
    if isinstance(text, datetime):
        return text.replace(tzinfo=UTC) if text.tzinfo is None else text.astimezone(UTC)
    span = _SPAN.match(text)
    if span:
        return (now or datetime.now(UTC)) - int(span[1]) * _UNITS[span[2]]
    try:
        ts = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{option}: expected a date or time such as 2026-03-01 or "
                         f"2026-03-01T12:00Z (UTC), or a span back from now such as 30d, 12h "
                         f"or 2w; got {text!r}") from None
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


@dataclass(frozen=True)
class Window:
    """``since`` (inclusive) to ``until`` (exclusive), either open."""

    since: datetime | None = None
    until: datetime | None = None

    @classmethod
    def of(cls, since: str | datetime | None, until: str | datetime | None) -> Window | None:
        """The window of two bounds as the command line gives them (None: no window)."""
        if since is None and until is None:
            return None
        now = datetime.now(UTC)
        start = None if since is None else moment(since, "--since", now)
        end = None if until is None else moment(until, "--until", now)
        if start is not None and end is not None and start >= end:
            raise UsageError(f"--since ({start:%Y-%m-%d %H:%M:%S} UTC) must come before --until "
                             f"({end:%Y-%m-%d %H:%M:%S} UTC)")
        return cls(start, end)

    def sql(self, column: str) -> str:
        """The condition that ``column`` (a timestamp) lies in the window."""
        parts = []
        if self.since is not None:
            parts.append(f"{column} >= TIMESTAMPTZ '{self.since.isoformat()}'")
        if self.until is not None:
            parts.append(f"{column} < TIMESTAMPTZ '{self.until.isoformat()}'")
        return " AND ".join(parts) or "TRUE"

    def describe(self) -> str:
        parts = []
        if self.since is not None:
            parts.append(f"measured from {self.since:%Y-%m-%d %H:%M} UTC")
        if self.until is not None:
            parts.append(f"before {self.until:%Y-%m-%d %H:%M} UTC")
        return " and ".join(parts)
