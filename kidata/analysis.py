"""Checks built on the analysis views: audit published numbers, find regressions.

The questions themselves are answered by SQL views (``sql/audit.sql``, ``sql/trends.sql``,
``sql/regressions.sql``); these functions only select from them, with bound parameters, for the
``kidata audit`` and ``kidata regressions`` commands and for library users.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import duckdb

from kidata import views as views_mod
from kidata.errors import UsageError

if TYPE_CHECKING:
    from kidata.warehouse import Warehouse

# The threshold the regressions view has built in (sql/regressions.sql).
DEFAULT_THRESHOLD = 0.05

AUDIT_COLUMNS = ("gpu", "workload", "quantity", "published", "recomputed", "difference",
                 "tolerance", "status", "run_id", "baseline_run_id")
REGRESSION_COLUMNS = ("kernel", "pass", "implementation", "variant", "workload", "gpu",
                      "previous_version", "version", "previous_median_us", "median_us", "change",
                      "previous_run_id", "run_id")


@dataclass
class Audit:
    """The outcome of :func:`audit`: ``rows`` to show, and counts over every claim."""

    rows: duckdb.DuckDBPyRelation
    claims: int
    flagged: int
    unchecked: int


def _columns(names: tuple[str, ...] | None) -> str:
    return "*" if names is None else ", ".join(views_mod.quote_identifier(c) for c in names)


def audit(wh: Warehouse, everything: bool = False,
          columns: tuple[str, ...] | None = AUDIT_COLUMNS) -> Audit:
    """Published derived numbers checked against their inputs (view ``audit``).

    ``rows`` holds the flagged claims, or every claim with ``everything``; ``columns=None``
    keeps all the view's columns.
    """
    where = "" if everything else "WHERE flagged"
    rows = wh.sql(f"SELECT {_columns(columns)} FROM audit {where} "
                  "ORDER BY gpu, workload, quantity, run_id")
    claims, flagged, unchecked = wh.sql(
        "SELECT count(*), count(CASE WHEN flagged THEN 1 END), "
        "count(CASE WHEN flagged IS NULL THEN 1 END) FROM audit").fetchall()[0]
    return Audit(rows, claims, flagged, unchecked)


def regressions(wh: Warehouse, threshold: float = DEFAULT_THRESHOLD,
                columns: tuple[str, ...] | None = REGRESSION_COLUMNS
                ) -> duckdb.DuckDBPyRelation:
    """Steps of a series slower than the step before beyond noise and by more than
    ``threshold`` (0.05 = 5%): the ``regressions`` view, with another threshold.

    ``columns=None`` gives every column of the ``regressions`` view.
    """
    if not isinstance(threshold, int | float) or not math.isfinite(threshold) or threshold < 0:
        raise UsageError(f"the threshold must be a number >= 0 (0.05 = 5%), got {threshold!r}")
    names = columns if columns is not None else tuple(views_mod.load_views()["regressions"].columns)
    # The rule of sql/regressions.sql with another threshold.
    return wh.sql(f"SELECT {_columns(names)} FROM trends "
                  "WHERE verdict = 'slower' AND change > $threshold "
                  "AND attribution <> 'shared' "
                  "AND (relative_change IS NULL OR relative_change > $threshold) "
                  "ORDER BY kernel, pass, implementation, variant, workload, gpu, family, "
                  "observed_at, run_id", params={"threshold": float(threshold)})
