"""Change points over the whole history of each series (``kidata changes``): where a series'
latency level moved, found from all its results at once rather than from the previous result
only (the one-step ``trends``/``regressions`` view stays the CI gate's rule).

Method (docs/statistics.md, section 4): asv's step detection objective. For a series of n
results (time order) with log latencies ``y``, find the segmentation minimising

    sum over segments of sum |y_i - median(segment)|  +  penalty x (number of segments)

(a piecewise-constant L1 fit, Friedrich et al. 2008, the objective of ``asv/step_detect.py``),
solved exactly: for series of up to :data:`BATCH_MAX_POINTS` results by optimal partitioning
(Jackson et al. 2005; the dynamic programme PELT prunes) over every segmentation, batched in
numpy across all series of one length; for longer ones by PELT (Killick et al. 2012) as
implemented in ``ruptures`` (``Pelt(model="l1")``). Both find the same optimum and break ties
alike (the earliest start of the last segment); ``tests/query/test_changes.py`` holds the
batched solver to ruptures' answers on 800 generated series. ruptures costs a few
milliseconds of Python calls per series (the whole command 39 s for 48,000 series of 6
results at 300k runs), the batched solver ~0.02-0.3 ms (the command 10 s; docs/benchmarks.md,
Run AK).
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

import contextlib
import itertools
import math
import statistics
from collections.abc import Iterator
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
# Series up to this many results are solved batched (cost O(n^3) per series, in numpy); longer
# ones by ruptures' PELT (O(n) to O(n^2) cost evaluations, each a Python call).
BATCH_MAX_POINTS = 300
# Segment costs held at once by the batched solver: series x (n + 1)^2 floats (32 MB).
_BATCH_CELLS = 1 << 22

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


def penalty(y: list[float]) -> float:
    """The penalty per segment: ``PENALTY_FACTOR x sigma x ln(n)``."""
    return PENALTY_FACTOR * robust_sigma(y) * math.log(len(y))


def all_breakpoints(series: list[list[float]]) -> list[list[int]]:
    """For each series, the indices where a new level starts (each in 1 .. len(y) - 1),
    minimising the L1 cost with :func:`penalty`: series of one length up to
    :data:`BATCH_MAX_POINTS` solved together (:func:`_optimal_partitions`), longer ones by
    ruptures' PELT."""
    try:
        import numpy as np
    except ImportError:
        raise UsageError("kidata changes needs ruptures: pip install 'kidata[changes]'"
                         ) from None
    out: list[list[int]] = [[] for _ in series]
    by_length: dict[int, list[int]] = {}
    for i, y in enumerate(series):
        if len(y) >= 2 * MIN_SEGMENT:
            by_length.setdefault(len(y), []).append(i)
    for n, members in by_length.items():
        if n > BATCH_MAX_POINTS:
            for i in members:
                out[i] = _pelt(series[i])
            continue
        step = max(1, _BATCH_CELLS // (n + 1) ** 2)
        for start in range(0, len(members), step):
            chunk = members[start:start + step]
            found = _optimal_partitions(np.asarray([series[i] for i in chunk], dtype=float),
                                        np.asarray([penalty(series[i]) for i in chunk]))
            for i, cuts in zip(chunk, found, strict=True):
                out[i] = cuts
    return out


def _optimal_partitions(y, penalties) -> list[list[int]]:
    """Exact minimisers of sum over segments of sum |y - median(segment)| + penalty per
    segment, segments of at least :data:`MIN_SEGMENT`, for each row of ``y`` (series of one
    length n) with its own penalty: every segment's cost from sliding windows, then the
    optimal-partitioning recursion F(t) = min over s of F(s) + cost(s, t) + penalty, the
    earliest s on a tie (as ruptures' ``min`` over its candidates in order)."""
    import numpy as np
    from numpy.lib.stride_tricks import sliding_window_view

    rows, n = y.shape
    cost = np.full((rows, n + 1, n + 1), np.inf)
    for length in range(MIN_SEGMENT, n + 1):
        windows = sliding_window_view(y, length, axis=1)  # rows x (n - length + 1) x length
        median = np.median(windows, axis=2)
        starts = np.arange(n - length + 1)
        cost[:, starts, starts + length] = np.abs(windows - median[..., None]).sum(axis=2)
    best = np.full((rows, n + 1), np.inf)
    best[:, 0] = 0.0
    start_of_last = np.zeros((rows, n + 1), dtype=np.int64)
    every = np.arange(rows)
    for t in range(MIN_SEGMENT, n + 1):
        # Summed in ruptures' order (the earlier segments' total, then this segment's cost
        # and penalty together), so that two segmentations whose totals tie in exact
        # arithmetic tie or differ in their last bit as they do there.
        candidates = best[:, :t] + (cost[:, :t, t] + penalties[:, None])
        start_of_last[:, t] = s = np.argmin(candidates, axis=1)
        best[:, t] = candidates[every, s]
    found = []
    for row in start_of_last.tolist():
        cuts, t = [], n
        while t > 0:
            t = row[t]
            if t > 0:
                cuts.append(t)
        found.append(cuts[::-1])
    return found


def _pelt(y: list[float]) -> list[int]:
    """ruptures' PELT on the L1 cost (series longer than :data:`BATCH_MAX_POINTS`)."""
    try:
        import numpy as np
        import ruptures
    except ImportError:
        raise UsageError("kidata changes needs ruptures: pip install 'kidata[changes]'"
                         ) from None
    algo = ruptures.Pelt(model="l1", min_size=MIN_SEGMENT, jump=1).fit(np.asarray(y))
    return [b for b in algo.predict(pen=penalty(y)) if b < len(y)]


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
    rows: list[dict[str, Any]] = []
    series = 0
    pending: list[tuple[tuple, list[tuple]]] = []
    held = 0
    # The series stream in from DuckDB and are solved CHUNK_POINTS results at a time, so
    # Python holds a chunk, not every result (1.5 GB of tuples at 1M runs; Run AM).
    with _sort_memory(db):
        for key, chunk in _series(db, min_points):
            series += 1
            pending.append((key, chunk))
            held += len(chunk)
            if held >= CHUNK_POINTS:
                rows += _change_points(pending, effect)
                pending, held = [], 0
    rows += _change_points(pending, effect)
    if rows:
        causes = {(run, previous): (cause, facts) for run, previous, cause, facts in db.rows(
            _CAUSES, {"runs": [r["run_id"] for r in rows]})}
        for r in rows:
            r["cause"], r["changed_facts"] = causes.get((r["run_id"], r["previous_run_id"]),
                                                        (None, None))
    slower = [r for r in rows if r["direction"] == "slower"]
    return Changes(_relation(rows), series, len(rows), len(slower), effect,
                   sum(1 for r in slower if r["cause"] == "code"))


# Results (timed, of series long enough to search) held in Python at once: the series are
# solved in chunks of about this many (a series is never split). At 1M runs under
# KIDATA_QUERY_MEMORY=500MB the command peaked at 725 MB with 25,000, 799 MB with 100,000;
# under the default 300MB, with 4,096-row batches, 519 MB with 25,000 and 486 with 5,000, in
# the same time (Run AS).
CHUNK_POINTS = 5_000
# Rows per Arrow batch read from DuckDB (a series may span batches); each becomes Python
# objects: at 1M runs under the default 300MB, 65,536 peaked at 608-636 MB, 16,384 at 519-544
# (Run AR), 4,096 at 486-519 (Run AS), in the same time.
READ_BATCH_ROWS = 4_096
# The share of the session's memory limit DuckDB sorts every timed latency under: while it
# streams the sorted rows it holds up to its limit of them, and Python holds its own beside
# (~100-200 MB: the libraries, the batches, the solver's arrays). Under the whole default
# 300MB, 5M runs in 250 loads peaked at 520 MB; under 2/3 of it at 411 MB in the same time
# (183.6 against 186.2 s; 1M in 50 loads 492 → 409 MB, 9.2 s either way: docs/benchmarks.md,
# Run BK).
SORT_MEMORY_SHARE = 2 / 3


@contextlib.contextmanager
def _sort_memory(db: Queryable) -> Iterator[None]:
    """The session's memory limit lowered to :data:`SORT_MEMORY_SHARE` of it (as DuckDB shows
    it, e.g. ``286.1 MiB``, read back by DuckDB's ``parse_formatted_bytes``) while the block
    runs, then set back to the configured one. Left alone under ``KIDATA_QUERY_MEMORY=none``
    (DuckDB's own limit)."""
    from kidata.core import engine

    limit = engine.query_memory()
    if limit is None:
        yield
        return
    [(limit_bytes,)] = db.rows(
        "SELECT parse_formatted_bytes(current_setting('memory_limit'))")
    share = int(limit_bytes * SORT_MEMORY_SHARE)
    db.sql(f"SET memory_limit = '{share} bytes'")
    try:
        yield
    finally:
        db.sql("SET memory_limit = $limit", params={"limit": limit})


# The key of a fetched row: the series and its center statistic (a series holding two center
# statistics is searched once per statistic); then run_id, observed_at, version, center_us.
_KEY = len(SERIES) + 1


def _series(db: Queryable, min_points: int):
    """Each searched series, in key order, as (key, its results in time order), streamed from
    DuckDB in Arrow batches."""
    keys = ", ".join(SERIES)
    # One sort, no window: a series' length is counted here as it streams by (a window
    # counting it in DuckDB sorted every result once more: 495 MB against ~400 at 1M runs).
    reader = db.sql(f"""
        SELECT {keys}, center_statistic, run_id, observed_at, version, center_us
        FROM latencies
        WHERE status = 'passed' AND observed_at IS NOT NULL AND center_us > 0
        ORDER BY {keys}, center_statistic, observed_at, run_id""").to_arrow_reader(
        READ_BATCH_ROWS)

    def results():
        for batch in reader:
            yield from zip(*(column.to_pylist() for column in batch.columns), strict=True)

    for key, group in itertools.groupby(results(), key=lambda r: r[:_KEY]):
        found = list(group)
        if len(found) >= min_points:
            yield key, found


def _change_points(groups: list[tuple[tuple, list[tuple]]], effect: float
                   ) -> list[dict[str, Any]]:
    """The change points beyond ``effect`` of each (key, results) series."""
    width = _KEY
    logs = [[math.log(r[width + 3]) for r in chunk] for _, chunk in groups]
    rows: list[dict[str, Any]] = []
    for (key, chunk), y, found in zip(groups, logs, all_breakpoints(logs), strict=True):
        sigma = robust_sigma(y)
        cuts = [0, *found, len(y)]
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
    return rows


def _relation(rows: list[dict[str, Any]]) -> duckdb.DuckDBPyRelation:
    import pyarrow as pa

    from kidata.core import engine

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
    return engine.connect().from_arrow(table)
