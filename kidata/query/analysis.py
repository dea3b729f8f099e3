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

from kidata.core.sql import quote_identifier
from kidata.core.viewfiles import load_views
from kidata.errors import UsageError

if TYPE_CHECKING:
    from kidata.query.session import Queryable

# The threshold the regressions view has built in (sql/regressions.sql).
DEFAULT_THRESHOLD = 0.05

AUDIT_COLUMNS = ("gpu", "workload", "quantity", "published", "recomputed", "difference",
                 "tolerance", "status", "run_id", "baseline_run_id")
REGRESSION_COLUMNS = ("kernel", "pass", "implementation", "variant", "workload", "gpu",
                      "previous_version", "version", "previous_center_us", "center_us", "change",
                      "previous_run_id", "run_id")


@dataclass
class Audit:
    """The outcome of :func:`audit`: ``rows`` to show, and counts over every claim."""

    rows: duckdb.DuckDBPyRelation
    claims: int
    flagged: int
    unchecked: int


def _columns(names: tuple[str, ...] | None) -> str:
    return "*" if names is None else ", ".join(quote_identifier(c) for c in names)


def audit(db: Queryable, everything: bool = False,
          columns: tuple[str, ...] | None = AUDIT_COLUMNS) -> Audit:
    """Published derived numbers checked against their inputs (view ``audit``).

    ``rows`` holds the flagged claims, or every claim with ``everything``; ``columns=None``
    keeps all the view's columns.
    """
    where = "" if everything else "WHERE flagged"
    rows = db.sql(f"SELECT {_columns(columns)} FROM audit {where} "
                  "ORDER BY gpu, workload, quantity, run_id")
    claims, flagged, unchecked = db.sql(
        "SELECT count(*), count(CASE WHEN flagged THEN 1 END), "
        "count(CASE WHEN flagged IS NULL THEN 1 END) FROM audit").fetchall()[0]
    return Audit(rows, claims, flagged, unchecked)


def regressions(db: Queryable, threshold: float = DEFAULT_THRESHOLD,
                columns: tuple[str, ...] | None = REGRESSION_COLUMNS
                ) -> duckdb.DuckDBPyRelation:
    """Steps of a series slower than the step before beyond noise and by more than
    ``threshold`` (0.05 = 5%): the ``regressions`` view, with another threshold.

    ``columns=None`` gives every column of the ``regressions`` view.
    """
    check_threshold(threshold)
    names = columns if columns is not None else tuple(load_views()["regressions"].columns)
    # The rule of sql/regressions.sql with another threshold.
    return db.sql(f"SELECT {_columns(names)} FROM trends WHERE {_SLOWER} "
                  "AND run_id NOT IN (SELECT run_id FROM acknowledgements) "
                  "ORDER BY kernel, pass, implementation, variant, workload, gpu, family, "
                  "observed_at, run_id", params={"threshold": float(threshold)})


# A step of trends that regressions lists, but for acknowledgements (sql/regressions.sql).
_SLOWER = ("verdict = 'slower' AND change > $threshold AND attribution <> 'shared' "
           "AND (relative_change IS NULL OR relative_change > $threshold)")


def acknowledged_regressions(db: Queryable, threshold: float = DEFAULT_THRESHOLD) -> int:
    """The steps :func:`regressions` leaves out because their run was acknowledged."""
    check_threshold(threshold)
    return db.sql(f"SELECT count(*) FROM trends WHERE {_SLOWER} "
                  "AND run_id IN (SELECT run_id FROM acknowledgements)",
                  params={"threshold": float(threshold)}).fetchall()[0][0]


# -- compare -----------------------------------------------------------------------------------

# What a side of `compare` may select on: selector field -> SQL over the latencies row `l`
# joined with its run `r`. A label is `label.<name>` (runs.labels).
SELECT_FIELDS = {
    "implementation": "l.implementation", "variant": "l.variant", "version": "l.version",
    "load": "r.load_id", "gpu": "l.gpu", "gpu_family": "l.gpu_family", "family": "l.family",
    "kernel": "l.kernel", "pass": "l.pass", "workload": "l.workload",
    # The commit a source names for the run (its label `commit`: github-action-benchmark's
    # commit.id), else the load's; the branch and CI run of the load that added the run.
    "commit": "coalesce(json_extract_string(r.labels, '$.commit'), ld.commit)",
    "branch": "ld.branch", "ci_run": "ld.ci_run",
}
COMPARE_COLUMNS = ("kernel", "pass", "workload", "gpu", "implementation", "variant",
                   "baseline_us", "candidate_us", "latency_ratio", "speedup", "change", "verdict",
                   "noise_basis",
                   "baseline_run_id", "candidate_run_id")


@dataclass
class Comparison:
    """The outcome of :func:`compare`: one row per shared key (``rows``), and the summary."""

    rows: duckdb.DuckDBPyRelation
    shared: int
    slower: int  # verdict 'slower' and change > threshold
    faster: int  # verdict 'faster' and ratio < 1 / (1 + threshold)
    unchanged: int  # within noise, or beyond noise by less than the threshold
    no_verdict: int  # a side without a measured spread
    kernels: int
    geomean_ratio: float | None  # latency ratio, candidate / baseline: below 1, faster
    threshold: float

    @property
    def geomean_speedup(self) -> float | None:
        """The summary as a speedup, baseline / candidate (above 1: the candidate is faster),
        the direction of ``speedups``, ``kernel_speedups`` and ``speedup_summary``."""
        return None if self.geomean_ratio is None else 1 / self.geomean_ratio

    @property
    def regressed(self) -> bool:
        """Whether any shared key is slower beyond noise and by more than the threshold."""
        return self.slower > 0


def parse_selector(text: str) -> dict[str, str]:
    """``"implementation=liger,version=0.4.2"`` -> ``{"implementation": "liger", ...}``;
    a bare word is an implementation. Fields: see :data:`SELECT_FIELDS` and ``label.<name>``."""
    out: dict[str, str] = {}
    for part in [p.strip() for p in text.split(",") if p.strip()]:
        field, eq, value = part.partition("=")
        field, value = field.strip(), value.strip()
        if not eq:
            field, value = "implementation", field
        if field not in SELECT_FIELDS and not (field.startswith("label.") and len(field) > 6):
            raise UsageError(f"unknown field {field!r} in selector {text!r}; expected one of "
                             f"{', '.join(SELECT_FIELDS)} or label.<name>")
        if not value:
            raise UsageError(f"field {field!r} in selector {text!r} has no value")
        if field in out:
            raise UsageError(f"field {field!r} given twice in selector {text!r}")
        out[field] = value
    if not out:
        raise UsageError(f"empty selector {text!r}; e.g. 'liger' or 'implementation=liger,"
                         "version=0.4.2'")
    return out


def _side(selector: dict[str, str], prefix: str, params: dict) -> str:
    conditions = ["l.status = 'passed'"]
    for i, (field, value) in enumerate(selector.items()):
        name = f"{prefix}{i}"
        params[name] = value
        if field.startswith("label."):
            params[f"{name}_path"] = "$." + field[len("label."):]
            conditions.append(f"json_extract_string(r.labels, ${name}_path) = ${name}")
        else:
            conditions.append(f"{SELECT_FIELDS[field]} = ${name}")
    return " AND ".join(conditions)


def check_threshold(threshold: float) -> None:
    """Raise a usage error unless ``threshold`` is a number >= 0 (a fraction: 0.05 = 5%)."""
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) \
            or not math.isfinite(threshold) or threshold < 0:
        raise UsageError(f"the threshold must be a number >= 0 (0.05 = 5%), got {threshold!r}")


def pairs_sql(baseline: str | dict[str, str], candidate: str | dict[str, str]
              ) -> tuple[str, dict]:
    """The query of :func:`compare`'s rows (one per shared key, with the verdict), and its
    parameters: the pairing every comparing command shares (``compare``, ``gate``)."""
    a = parse_selector(baseline) if isinstance(baseline, str) else dict(baseline)
    b = parse_selector(candidate) if isinstance(candidate, str) else dict(candidate)
    if a == b:
        raise UsageError("the two sides select the same runs; give two different selectors")
    params: dict = {}
    where_a, where_b = _side(a, "a", params), _side(b, "b", params)
    across = a.get("implementation") != b.get("implementation")
    key = ["kernel", "pass", "workload", "gpu", "family"]
    own = [] if across else ["implementation", "variant"]
    partition = ", ".join(f"l.{k}" for k in key + ["implementation", "variant"])
    on = " AND ".join([f"x.{k} = y.{k}" for k in key + own[:1]]
                      + (["(x.variant = y.variant OR (x.variant IS NULL AND y.variant IS NULL))"]
                         if own else []))
    shown = "x.implementation, x.variant" if own else \
        "CONCAT(y.implementation, ' vs ', x.implementation) AS implementation, " \
        "y.variant AS variant"
    query = f"""
        WITH a AS (
            SELECT l.*, ROW_NUMBER() OVER (PARTITION BY {partition}
                ORDER BY l.observed_at DESC NULLS LAST, l.run_id DESC) AS rn
            FROM latencies l JOIN runs r ON r.run_id = l.run_id
                LEFT JOIN loads ld ON ld.load_id = r.load_id WHERE {where_a}
        ),
        b AS (
            SELECT l.*, ROW_NUMBER() OVER (PARTITION BY {partition}
                ORDER BY l.observed_at DESC NULLS LAST, l.run_id DESC) AS rn
            FROM latencies l JOIN runs r ON r.run_id = l.run_id
                LEFT JOIN loads ld ON ld.load_id = r.load_id WHERE {where_b}
        ),
        pairs AS (
            SELECT x.kernel, x.pass, x.workload, x.gpu, {shown},
                x.center_us AS baseline_us, y.center_us AS candidate_us,
                y.center_us / x.center_us AS latency_ratio,
                x.center_us / y.center_us AS speedup, y.center_us / x.center_us - 1 AS change,
                v.verdict,
                CASE WHEN y.evidence = 'measured' AND x.evidence = 'measured'
                          AND y.spread = x.spread
                     THEN CONCAT('within-run ', y.spread) ELSE 'none' END AS noise_basis,
                x.run_id AS baseline_run_id, y.run_id AS candidate_run_id
            FROM (SELECT * FROM a WHERE rn = 1) x
            JOIN (SELECT * FROM b WHERE rn = 1) y ON {on}
            JOIN verdict_rule v
                ON v.candidate_evidence = y.evidence AND v.baseline_evidence = x.evidence
                AND v.placement = CASE
                    WHEN y.center_statistic <> x.center_statistic THEN 'different centers'
                    WHEN COALESCE(y.spread, '') <> COALESCE(x.spread, '')
                        THEN 'different spreads'
                    WHEN y.high_us < x.low_us THEN 'below'
                    WHEN y.low_us > x.high_us THEN 'above'
                    ELSE 'overlap' END
        )
        SELECT * FROM pairs
        ORDER BY kernel, pass, workload, gpu, implementation, variant
    """
    return query, params


def compare(db: Queryable, baseline: str | dict[str, str], candidate: str | dict[str, str],
            threshold: float = DEFAULT_THRESHOLD) -> Comparison:
    """Compare the latest passed run of every key selected by ``baseline`` with the one
    selected by ``candidate``, over the keys both have, with the verdicts of ``speedups``
    (the ``verdict_rule`` view). A key is kernel, pass, workload, GPU and protocol family, and
    implementation and variant unless the two selectors name different implementations.

    A key counts as slower when its verdict is 'slower' and its change (candidate / baseline
    - 1) exceeds ``threshold``; ``Comparison.regressed`` says whether any did. The summary's
    ``geomean_ratio`` weighs each (kernel, pass) equally: the geometric mean over them of
    each one's geometric mean ratio; ``geomean_speedup`` is its inverse.

    Each row has both directions, named as in ``speedups``: ``latency_ratio`` = candidate_us /
    baseline_us (below 1: candidate faster), ``speedup`` = baseline_us / candidate_us (above 1:
    candidate faster); ``change`` = latency_ratio - 1 (the latency's change, above 0: slower).
    The pairing differs from ``speedups`` by design: each side is the latest passed run its
    selector matches (any version, load or label), where ``speedups`` pairs the latest run of
    each implementation overall.
    """
    check_threshold(threshold)
    query, params = pairs_sql(baseline, candidate)
    params = {**params, "threshold": float(threshold)}
    rows = db.sql(query, params={k: v for k, v in params.items() if k != "threshold"})
    summary = db.sql(f"""
        WITH pairs AS ({query}),
        kernels AS (SELECT kernel, pass, AVG(LN(latency_ratio)) AS log_ratio FROM pairs
                    GROUP BY kernel, pass)
        SELECT
            (SELECT COUNT(*) FROM pairs),
            (SELECT COUNT(*) FROM pairs WHERE verdict = 'slower' AND change > $threshold),
            (SELECT COUNT(*) FROM pairs WHERE verdict = 'faster' AND -change > $threshold
                / (1 + $threshold)),
            (SELECT COUNT(*) FROM pairs WHERE verdict = 'within noise'
                OR (verdict = 'slower' AND change <= $threshold)
                OR (verdict = 'faster' AND -change <= $threshold / (1 + $threshold))),
            (SELECT COUNT(*) FROM pairs
                WHERE verdict NOT IN ('faster', 'slower', 'within noise')),
            (SELECT COUNT(*) FROM kernels),
            (SELECT EXP(AVG(log_ratio)) FROM kernels)
    """, params=params).fetchall()[0]
    shared, slower, faster, unchanged, none, kernels, geomean = summary
    return Comparison(rows, shared, slower, faster, unchanged, none, kernels, geomean,
                      float(threshold))
