"""Change points over the whole history of each series (``kidata changes``): where a series'
latency level moved, found from all its results at once rather than from the previous result
only (the one-step ``trends``/``regressions`` view stays the CI gate's rule).

Method (docs/statistics.md, section 4): asv's step detection objective. For a series of n
results (time order) with log latencies ``y``, find the segmentation minimising

    sum over segments of sum |y_i - median(segment)|  +  penalty x (number of segments)

(a piecewise-constant L1 fit, Friedrich et al. 2008, the objective of ``asv/step_detect.py``),
solved exactly by PELT (Killick et al. 2012) as implemented in ``ruptures`` (``Pelt(model="l1")``).
The penalty is ``PENALTY_FACTOR x sigma x ln(n)``, sigma the series' robust noise: 1.4826 x the
median absolute difference of successive log latencies, divided by sqrt 2 (a step moves one
difference, so it barely moves the median), floored at ``MIN_SIGMA``. A segment holds at least
``MIN_SEGMENT`` results, so one outlier is never a level of its own. Each change point is
reported with the two segments' levels, the medians of their log latencies (with an even count,
the geometric mean of the two middle results); only changes beyond the minimum effect
(``verdict_settings``) are listed, and a change between two results of one version is labelled
so (a shift of the environment, not of the code).

Each change point is attributed by the one-step rules (docs/statistics.md, section 4) of the step
where the new level starts, the ``trends`` row from the last result of the old level to the first
of the new: ``cause`` is ``same version``, ``shared``, ``session`` or ``environment`` when that
step is one of those shifts (the ``shifts`` view's causes), else ``code``; ``changed_facts`` names
the software that changed there. A change point whose boundary is not a step of ``trends`` (a
series mixing center statistics) has no cause.

ruptures (and its scipy) is an optional dependency: ``pip install 'kidata[changes]'``.
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kidata.errors import UsageError

if TYPE_CHECKING:
    import duckdb

    from kidata.query.session import Queryable

PENALTY_FACTOR = 3.0
MIN_SIGMA = 0.002  # 0.2%: a series with no measurable noise still needs a finite penalty
MIN_SEGMENT = 2
MIN_POINTS = 6  # fewer results give no segmentation worth reporting (3 + 3 at best)

SERIES = ("kernel", "pass", "implementation", "variant", "workload", "gpu", "family")
COLUMNS = (*SERIES, "run_id", "previous_run_id", "observed_at", "previous_observed_at",
           "version", "previous_version", "points_before", "points_after", "level_before_us",
           "level_after_us", "change", "direction", "same_version", "cause", "changed_facts",
           "series_points", "series_noise")

# The step at a change point and what trends puts it down to (series_steps.cause).
_CAUSES = """
    SELECT run_id, previous_run_id, cause, changed_facts
    FROM trends
    WHERE run_id IN (SELECT unnest($runs))"""


@dataclass
class Changes:
    """What :func:`changes` found: ``rows`` (one per change point beyond the minimum
    effect, as a relation), how many series were searched and the minimum effect used."""

    rows: duckdb.DuckDBPyRelation
    series: int
    found: int
    slower: int
    min_effect: float
    code_slower: int = 0


def robust_sigma(y: list[float]) -> float:
    """1.4826 x the median |y[i+1] - y[i]| / sqrt 2, floored at :data:`MIN_SIGMA`."""
    diffs = [abs(b - a) for a, b in itertools.pairwise(y)]
    if not diffs:
        return MIN_SIGMA
    return max(1.4826 * statistics.median(diffs) / math.sqrt(2), MIN_SIGMA)


def breakpoints(y: list[float]) -> list[int]:
    """The indices where a new level starts (each in 1 .. len(y) - 1), by PELT on the L1 cost
    with the penalty of the module docstring."""
    try:
        import numpy as np
        import ruptures
    except ImportError:
        raise UsageError("kidata changes needs ruptures: pip install 'kidata[changes]'"
                         ) from None
    n = len(y)
    if n < 2 * MIN_SEGMENT:
        return []
    penalty = PENALTY_FACTOR * robust_sigma(y) * math.log(n)
    algo = ruptures.Pelt(model="l1", min_size=MIN_SEGMENT, jump=1).fit(np.asarray(y))
    return [b for b in algo.predict(pen=penalty) if b < n]


def changes(db: Queryable, min_effect: float | None = None,
            min_points: int = MIN_POINTS) -> Changes:
    """Change points of every latency series with at least ``min_points`` timed, passed
    results (one center statistic), beyond ``min_effect`` (None: the session's minimum
    effect)."""
    from kidata.query.analysis import min_effect as resolve

    effect = resolve(db, min_effect)
    if isinstance(min_points, bool) or not isinstance(min_points, int) or \
            min_points < 2 * MIN_SEGMENT:
        raise UsageError(f"--min-points must be a whole number >= {2 * MIN_SEGMENT}, "
                         f"got {min_points!r}")
    keys = ", ".join(SERIES)
    data = db.sql(f"""
        SELECT {keys}, center_statistic, run_id, observed_at, version, center_us
        FROM (
            SELECT l.*, COUNT(*) OVER (PARTITION BY {keys}, center_statistic) AS n
            FROM latencies l
            WHERE status = 'passed' AND observed_at IS NOT NULL AND center_us > 0
        )
        WHERE n >= $n
        ORDER BY {keys}, center_statistic, observed_at, run_id""",
                  params={"n": min_points}).fetchall()
    width = len(SERIES) + 1  # the series and its center statistic
    rows: list[dict[str, Any]] = []
    series = 0
    # A series holding two center statistics is searched once per statistic (the key).
    for key, group in itertools.groupby(data, key=lambda r: r[:width]):
        chunk = list(group)
        series += 1
        y = [math.log(r[width + 3]) for r in chunk]
        sigma = robust_sigma(y)
        cuts = [0, *breakpoints(y), len(y)]
        for left, cut, right in zip(cuts, cuts[1:], cuts[2:], strict=False):
            before, after = statistics.median(y[left:cut]), statistics.median(y[cut:right])
            change = math.exp(after - before) - 1
            if abs(after - before) <= math.log1p(effect):
                continue
            first, last = chunk[cut], chunk[cut - 1]
            rows.append({
                **dict(zip(SERIES, key[:len(SERIES)], strict=True)),
                "run_id": first[width], "previous_run_id": last[width],
                "observed_at": first[width + 1], "previous_observed_at": last[width + 1],
                "version": first[width + 2], "previous_version": last[width + 2],
                "points_before": cut - left, "points_after": right - cut,
                "level_before_us": math.exp(before), "level_after_us": math.exp(after),
                "change": change, "direction": "slower" if change > 0 else "faster",
                "same_version": (None if first[width + 2] is None or last[width + 2] is None
                                 else first[width + 2] == last[width + 2]),
                "series_points": len(chunk), "series_noise": math.exp(sigma) - 1,
            })
    if rows:
        causes = {(run, previous): (cause, facts) for run, previous, cause, facts in db.sql(
            _CAUSES, params={"runs": [r["run_id"] for r in rows]}).fetchall()}
        for r in rows:
            r["cause"], r["changed_facts"] = causes.get((r["run_id"], r["previous_run_id"]),
                                                        (None, None))
    slower = [r for r in rows if r["direction"] == "slower"]
    return Changes(_relation(rows), series, len(rows), len(slower), effect,
                   sum(1 for r in slower if r["cause"] == "code"))


def _relation(rows: list[dict[str, Any]]) -> duckdb.DuckDBPyRelation:
    import duckdb
    import pyarrow as pa

    schema = pa.schema([
        *[(c, pa.string()) for c in SERIES],
        ("run_id", pa.string()), ("previous_run_id", pa.string()),
        ("observed_at", pa.timestamp("us", tz="UTC")),
        ("previous_observed_at", pa.timestamp("us", tz="UTC")),
        ("version", pa.string()), ("previous_version", pa.string()),
        ("points_before", pa.int64()), ("points_after", pa.int64()),
        ("level_before_us", pa.float64()), ("level_after_us", pa.float64()),
        ("change", pa.float64()), ("direction", pa.string()), ("same_version", pa.bool_()),
        ("cause", pa.string()), ("changed_facts", pa.string()),
        ("series_points", pa.int64()), ("series_noise", pa.float64()),
    ])
    table = pa.Table.from_pylist(rows, schema=schema)
    return duckdb.connect().from_arrow(table)
