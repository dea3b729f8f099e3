"""Checks built on the analysis views: audit published numbers, find regressions.

The questions themselves are answered by SQL views (``sql/audit.sql``, ``sql/trends.sql``,
``sql/regressions.sql``); these functions only select from them, with bound parameters, for the
``kidata audit`` and ``kidata regressions`` commands and for library users.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import duckdb

from kidata.core import engine
from kidata.core.sql import quote_identifier
from kidata.core.viewfiles import load_views
from kidata.errors import UsageError

if TYPE_CHECKING:
    import pyarrow as pa

    from kidata.query.session import Queryable

# The verdict rule's minimum effect by default, as sql/verdict_settings.sql states it (asv's
# factor 1.1; a test holds the two equal). A command's threshold left as None is the session's.
DEFAULT_THRESHOLD = 0.10

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
    claims, flagged, unchecked = db.rows(
        "SELECT count(*), count(CASE WHEN flagged THEN 1 END), "
        "count(CASE WHEN flagged IS NULL THEN 1 END) FROM audit")[0]
    return Audit(rows, claims, flagged, unchecked)


def min_effect(db: Queryable, threshold: float | None = None) -> float:
    """``threshold`` checked, or when None the session's minimum effect (the
    ``verdict_settings`` view: 0.10 unless the session sets another)."""
    if threshold is None:
        return float(db.rows("SELECT min_effect FROM verdict_settings")[0][0])
    check_threshold(threshold)
    return float(threshold)


def regressions(db: Queryable, threshold: float | None = None,
                columns: tuple[str, ...] | None = REGRESSION_COLUMNS
                ) -> duckdb.DuckDBPyRelation:
    """Steps of a series slower than the step before beyond noise and by more than
    ``threshold`` (0.05 = 5%), between two versions: the ``regressions`` view, with
    ``threshold`` as the minimum effect (None: the session's, verdict_settings).

    ``columns=None`` gives every column of the ``regressions`` view.
    """
    threshold = min_effect(db, threshold)
    names = columns if columns is not None else tuple(load_views()["regressions"].columns)
    # The rule of sql/regressions.sql with another threshold.
    return db.sql(f"SELECT {_columns(names)} FROM trends WHERE {_SLOWER} "
                  "AND run_id NOT IN (SELECT run_id FROM acknowledgements) "
                  f"ORDER BY {_REGRESSION_ORDER}", params={"threshold": float(threshold)})


# A step of trends that regressions lists, but for acknowledgements (sql/regressions.sql),
# with the minimum effect $threshold: the interval of the change lies above 0 (change_low is
# null without a noise estimate) and the change exceeds it; verdict 'slower' is this rule at
# the session's minimum effect.
_SLOWER = ("change_low > 0 AND change > $threshold AND cause = 'code' "
           "AND (relative_change IS NULL OR relative_change > $threshold) "
           "AND (code_change IS NULL OR code_change > $threshold)")


# A slower step that the shifts view lists (sql/shifts.sql: a firm step of the session, the
# environment or a re-run, not of the code): counted beside the regressions.
_SHIFTED_SLOWER = "verdict = 'slower' AND cause <> 'code'"
_REGRESSION_ORDER = ("kernel, pass, implementation, variant, workload, gpu, family, observed_at, "
                     "run_id")


@dataclass
class RegressionScan:
    """What ``kidata regressions`` prints, from one pass over ``trends``
    (:func:`regression_scan`): the regressions (``rows``, as :func:`regressions` gives them),
    how many, how many were left out as acknowledged, and how many slower steps ``shifts``
    lists instead."""

    rows: duckdb.DuckDBPyRelation
    found: int
    acknowledged: int
    shifted: int
    threshold: float


def regression_scan(db: Queryable, threshold: float | None = None,
                    columns: tuple[str, ...] | None = REGRESSION_COLUMNS) -> RegressionScan:
    """:func:`regressions`, :func:`acknowledged_regressions` and the slower steps of the
    ``shifts`` view, answered by one query of ``trends``: each of those reads every step of
    every series (at 1M runs ~0.8 s each; keeping all of ``trends`` instead held ~600 MB).
    The steps it returns are few (those slower beyond noise); they are split here."""
    threshold = min_effect(db, threshold)
    names = columns if columns is not None else tuple(load_views()["regressions"].columns)
    table = db.sql(f"SELECT {_columns(names)}, "
                   "run_id IN (SELECT run_id FROM acknowledgements) AS _acknowledged, "
                   f"COALESCE({_SLOWER}, FALSE) AS _regressed "
                   f"FROM trends WHERE ({_SLOWER}) OR ({_SHIFTED_SLOWER}) "
                   f"ORDER BY {_REGRESSION_ORDER}", params={"threshold": float(threshold)}
                   ).to_arrow_table()
    local = engine.connect()  # over the rows in memory, as compare and the gate hold theirs
    steps = local.from_arrow(table)
    counts = steps.aggregate(
        "count(*) FILTER (WHERE _regressed AND NOT _acknowledged), "
        "count(*) FILTER (WHERE _regressed AND _acknowledged), "
        "count(*) FILTER (WHERE NOT _regressed)").fetchall()[0]
    rows = steps.filter("_regressed AND NOT _acknowledged").project(_columns(names))
    return RegressionScan(rows, counts[0], counts[1], counts[2], threshold)


def acknowledged_regressions(db: Queryable, threshold: float | None = None) -> int:
    """The steps :func:`regressions` leaves out because their run was acknowledged."""
    return regression_scan(db, threshold).acknowledged


# -- compare -----------------------------------------------------------------------------------

# What a side of `compare` may select on: selector field -> SQL over the run `l` (a runs row
# with its protocol's `family` and its GPU's `gpu_family`, as latencies names them) and its
# load `ld`. A label is `label.<name>` (runs.labels).
SELECT_FIELDS = {
    "implementation": "l.implementation", "variant": "l.variant", "version": "l.version",
    "load": "l.load_id", "gpu": "l.gpu", "gpu_family": "l.gpu_family", "family": "l.family",
    "kernel": "l.kernel", "pass": "l.pass", "workload": "l.workload",
    # The commit a source names for the run (its label `commit`: github-action-benchmark's
    # commit.id), else the load's; the branch and CI run of the load that added the run.
    "commit": "coalesce(json_extract_string(l.labels, '$.commit'), ld.commit)",
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
    slower: int  # interval above 1 and change > threshold
    faster: int  # interval below 1 and ratio < 1 / (1 + threshold)
    unchanged: int  # within noise, or beyond noise by less than the threshold
    no_verdict: int  # no noise estimate (see speedups.noise_basis)
    kernels: int
    geomean_ratio: float | None  # latency ratio, candidate / baseline: below 1, faster
    threshold: float
    # Slower by the verdict rule, but a shift of the session (the code's part, code_change,
    # within the threshold): not counted in ``slower``.
    shifted: int = 0

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
            conditions.append(f"json_extract_string(l.labels, ${name}_path) = ${name}")
        else:
            conditions.append(f"{SELECT_FIELDS[field]} = ${name}")
    return " AND ".join(conditions)


def check_threshold(threshold: float) -> None:
    """Raise a usage error unless ``threshold`` is a number >= 0 (a fraction: 0.05 = 5%)."""
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) \
            or not math.isfinite(threshold) or threshold < 0:
        raise UsageError(f"the threshold must be a number >= 0 (0.05 = 5%), got {threshold!r}")


# The verdict rule's noise model over two sides, as sql/speedups.sql works it out (a view
# cannot take the two sides as input, so compare and gate repeat its steps here; a test holds
# the two to the same answers on the same pairs). Each run chosen: its latencies row with its
# envelope and its samples' interval.
_NOISE_SIDE = """
    SELECT l.*,
        CASE WHEN l.center_statistic = 'mean' AND l.samples >= 2 AND l.stddev_us >= 0
                  AND l.mean_us > 0
             THEN POWER(l.stddev_us / l.mean_us, 2) / l.samples
                  + POWER(COALESCE(l.resolution_us, 0) / l.mean_us, 2) / 12
        END AS log_variance,
        l.low_us - COALESCE(l.resolution_us, 0) / 2 AS wide_low_us,
        l.high_us + COALESCE(l.resolution_us, 0) / 2 AS wide_high_us,
        l.evidence IN ('measured', 'below resolution') AS has_spread,
        m.low / 1000 - COALESCE(l.resolution_us, 0) / 2 AS sample_wide_low_us,
        m.high / 1000 + COALESCE(l.resolution_us, 0) / 2 AS sample_wide_high_us,
        n.log_envelope, n.changes AS envelope_changes
    FROM latencies l
    LEFT JOIN noise_envelopes n
        ON n.calibrated AND n.source = l.source AND n.gpu = l.gpu AND l.center_us > 0
        AND n.size_decade = CAST(LEAST(GREATEST(FLOOR(LOG10(l.center_us)), -1), 5) AS BIGINT)
    LEFT JOIN sample_medians m
        ON m.run_id = l.run_id AND m.metric = 'latency' AND m.high IS NOT NULL
"""
_NOISE_PAIR = """
    {c}.log_variance + {b}.log_variance AS log_variance,
    FLOOR(POWER({c}.log_variance + {b}.log_variance, 2)
          / NULLIF(POWER({c}.log_variance, 2) / ({c}.samples - 1)
             + POWER({b}.log_variance, 2) / ({b}.samples - 1), 0)) AS welch_df,
    GREATEST({c}.log_envelope, {b}.log_envelope) AS log_envelope,
    CASE WHEN {c}.wide_low_us > 0 AND {b}.wide_high_us > 0
         THEN LN({c}.wide_low_us / {b}.wide_high_us) END AS range_log_low,
    CASE WHEN {b}.wide_low_us > 0 AND {c}.wide_high_us > 0
         THEN LN({c}.wide_high_us / {b}.wide_low_us) END AS range_log_high,
    CASE WHEN {c}.sample_wide_low_us > 0 AND {b}.sample_wide_high_us > 0
         THEN LN({c}.sample_wide_low_us / {b}.sample_wide_high_us) END AS sample_log_low,
    CASE WHEN {b}.sample_wide_low_us > 0 AND {c}.sample_wide_high_us > 0
         THEN LN({c}.sample_wide_high_us / {b}.sample_wide_low_us) END AS sample_log_high,
    CASE
        WHEN {c}.center_statistic <> {b}.center_statistic THEN 'different centers'
        WHEN {c}.center_statistic = 'median' AND {c}.sample_wide_high_us IS NOT NULL
            AND {b}.sample_wide_high_us IS NOT NULL THEN 'samples'
        WHEN {c}.log_variance + {b}.log_variance > 0 THEN 'welch'
        WHEN {c}.log_envelope IS NOT NULL AND {b}.log_envelope IS NOT NULL THEN 'run-to-run'
        WHEN {c}.has_spread AND {b}.has_spread AND {c}.spread = {b}.spread THEN 'within-run'
        WHEN {c}.has_spread AND {b}.has_spread THEN 'different spreads'
        WHEN NOT {c}.has_spread THEN {c}.evidence
        ELSE {b}.evidence
    END AS basis
"""
_NOISE_BOUNDS = """
    SELECT p.*,
        CASE p.basis WHEN 'samples' THEN p.sample_log_low
            WHEN 'welch' THEN p.log_ratio - t.t * SQRT(p.log_variance)
            WHEN 'run-to-run' THEN p.log_ratio - p.log_envelope
            WHEN 'within-run' THEN p.range_log_low END AS log_low,
        CASE p.basis WHEN 'samples' THEN p.sample_log_high
            WHEN 'welch' THEN p.log_ratio + t.t * SQRT(p.log_variance)
            WHEN 'run-to-run' THEN p.log_ratio + p.log_envelope
            WHEN 'within-run' THEN p.range_log_high END AS log_high
    FROM {pairs} p
    LEFT JOIN student_t t
        ON p.basis = 'welch' AND GREATEST(p.welch_df, 1) BETWEEN t.df_from AND t.df_to
"""
_NOISE_RULE = """
    {v}.basis = {p}.basis
    AND {v}.placement = CASE
        WHEN {p}.basis NOT IN ('samples', 'welch', 'run-to-run', 'within-run') THEN 'none'
        WHEN {p}.log_low > 0 THEN 'above'
        WHEN {p}.log_high < 0 THEN 'below'
        ELSE 'overlap' END
    AND {v}.effect = CASE WHEN ABS({p}.log_ratio) > LN(1 + {s}.min_effect) THEN 'beyond'
                          ELSE 'under' END
"""


def pairs(db: Queryable, baseline: str | dict[str, str], candidate: str | dict[str, str],
          local: duckdb.DuckDBPyConnection) -> pa.Table:
    """compare's rows (one per shared key, with the verdict; :func:`pairs_sql`), worked out
    in three statements: the latest run of each key on each side (run ids only), then those
    runs' latencies with their noise, both on ``db``; then the pairing on ``local``, the
    caller's connection over rows in memory (where ``latest``, ``chosen`` and the verdict
    rule's small views stay registered). In one statement DuckDB ranked every selected
    latency with all its columns, and at ~5M runs a side (one load against another of a
    10M-run warehouse) ran the default 300MB out (docs/benchmarks.md, Run AZ).

    The runs join ``noise_envelopes``, a few dozen rows worked out from every run: read once
    from ``db`` (2.6 s at 10M runs, from the stored steps), not once per side."""
    query = pairs_sql(baseline, candidate)
    for name in RULE_VIEWS:
        local.register(name, db.sql(f"SELECT * FROM {name}").to_arrow_table())
    latest = db.sql(query.latest, params=query.params).to_arrow_table()
    db.release()
    ids = sorted({i for c in ("baseline_run_id", "candidate_run_id")
                  for i in latest.column(c).to_pylist() if i is not None})
    local.register("latest", latest)
    # noise_envelopes is worked out from every run, and so is read from db.
    envelopes = db.sql("SELECT * FROM noise_envelopes").to_arrow_table()
    db.release()
    local.register("chosen", _of_runs(db, ids, _NOISE_SIDE, ["latencies", "sample_medians"],
                                      {"noise_envelopes": envelopes}))
    return local.sql(query.pairing).to_arrow_table()


def _of_runs(db: Queryable, ids: list[str], query: str, reads: list[str],
             given: dict[str, pa.Table] | None = None) -> pa.Table:
    """The rows of ``query``, which reads the views ``reads`` (and the tables ``given``), where
    the warehouse holds only the runs ``ids``: their rows of the tables those views read are
    copied from ``db`` (DuckDB skips the rest of the files while reading them), and the views
    are defined over the copies on a connection of their own. On ``db`` the views would work
    out the statistics of every run before keeping those of ``ids`` (DuckDB does not take a
    filter on the run id through their grouping): ~11 s and the whole memory limit at 10M
    runs, for a few ten thousand (docs/benchmarks.md, Run AZ)."""
    from kidata.core.viewfiles import load_views, strip_comments, with_dependencies

    views = with_dependencies(reads)
    found = load_views()
    tables = sorted({t for v in views for t in found[v].sources} - set(views))
    # The columns the views name (a word of their bodies): a run's whole row is ~800 bytes,
    # its title, labels and digests among them, which no view reads.
    words = set(re.findall(r"\w+", " ".join(strip_comments(found[v].body) for v in views)))
    con = engine.connect(engine.reading_settings())
    try:
        for table in tables:
            columns = db.sql(f"SELECT * FROM {table} LIMIT 0").columns
            named = ", ".join(quote_identifier(c) for c in columns if c in words)
            filtered = ("WHERE run_id IN (SELECT UNNEST(CAST($ids AS VARCHAR[])))"
                        if "run_id" in columns else "")
            con.register(table, db.sql(f"SELECT {named} FROM {table} {filtered}",
                                       params={"ids": ids} if filtered else None).to_arrow_table())
            db.release()
        for name, rows in (given or {}).items():
            con.register(name, rows)
        for view in views:
            con.execute(f"CREATE VIEW {view} AS {found[view].body}")
        return con.sql(query).to_arrow_table()
    finally:
        con.close()


# The views the pairing reads besides the runs chosen: a few rows each.
RULE_VIEWS = ("student_t", "verdict_settings", "verdict_rule")


@dataclass(frozen=True)
class PairsQuery:
    """:func:`pairs_sql`'s answer, two of the three statements :func:`pairs` runs: ``latest``,
    with ``params``, the latest run of each key on each side (``baseline_run_id``,
    ``candidate_run_id``); ``pairing``, the rows, over that table, ``chosen`` (those runs'
    latencies with their noise: :data:`_NOISE_SIDE`, the same for every pair of sides) and the
    verdict rule's views."""

    latest: str
    params: dict
    pairing: str


def pairs_sql(baseline: str | dict[str, str], candidate: str | dict[str, str]) -> PairsQuery:
    """The queries of :func:`compare`'s rows (one per shared key, with the verdict): the
    pairing every comparing command shares (``compare``, ``gate``), which run them through
    :func:`pairs`."""
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
    # Greatest observed_at, none last, then the greatest run id (as latest_latencies).
    order = ("(l.observed_at IS NOT NULL, COALESCE(l.observed_at, TIMESTAMPTZ "
             "'1970-01-01 00:00:00+00'), l.run_id)")
    # Read from the runs, not from latencies: DuckDB would work out every run's statistics
    # and join them with the runs on their text ids first, and beside this aggregate the two
    # ran the default 300MB out at 10M runs. What latencies adds here is whether the run has a
    # center (a latency median or mean), asked of the measurements on the run id's MD5.
    latest = f"""
        SELECT arg_max(l.run_id, {order}) FILTER (WHERE {where_a}) AS baseline_run_id,
            arg_max(l.run_id, {order}) FILTER (WHERE {where_b}) AS candidate_run_id
        FROM (SELECT r.*, COALESCE(p.family, r.protocol_id) AS family,
                  COALESCE(g.family, r.gpu) AS gpu_family
              FROM runs r LEFT JOIN protocols p ON p.protocol_id = r.protocol_id
                  LEFT JOIN gpus g ON g.gpu = r.gpu) l
            LEFT JOIN loads ld ON ld.load_id = l.load_id
        WHERE (({where_a}) OR ({where_b}))
            AND md5_number(l.run_id) IN (
                SELECT md5_number(run_id) FROM measurements WHERE metric = 'latency'
                    AND statistic IN ('median', 'mean') AND value IS NOT NULL)
        GROUP BY {partition}
    """
    pairing = f"""
        WITH x AS (SELECT * FROM chosen
                   WHERE run_id IN (SELECT baseline_run_id FROM latest)),
        y AS (SELECT * FROM chosen WHERE run_id IN (SELECT candidate_run_id FROM latest)),
        paired AS (
            SELECT x.kernel, x.pass, x.workload, x.gpu, {shown},
                x.center_us AS baseline_us, y.center_us AS candidate_us,
                x.run_id AS baseline_run_id, y.run_id AS candidate_run_id,
                y.spread, LN(y.center_us / x.center_us) AS log_ratio,
                {_NOISE_PAIR.format(c="y", b="x")}
            FROM x JOIN y ON {on}
        ),
        pairs AS (
            SELECT p.kernel, p.pass, p.workload, p.gpu, p.implementation, p.variant,
                p.baseline_us, p.candidate_us,
                p.candidate_us / p.baseline_us AS latency_ratio,
                p.baseline_us / p.candidate_us AS speedup,
                p.candidate_us / p.baseline_us - 1 AS change,
                v.verdict,
                CASE p.basis WHEN 'within-run' THEN CONCAT('within-run ', p.spread)
                     WHEN 'samples' THEN 'samples' WHEN 'welch' THEN 'welch'
                     WHEN 'run-to-run' THEN 'run-to-run' ELSE 'none' END AS noise_basis,
                p.baseline_run_id, p.candidate_run_id,
                EXP(-p.log_high) AS speedup_low, EXP(-p.log_low) AS speedup_high,
                v.placement
            FROM ({_NOISE_BOUNDS.format(pairs="paired")}) p
            CROSS JOIN verdict_settings s
            JOIN verdict_rule v ON {_NOISE_RULE.format(p="p", s="s", v="v")}
        )
        SELECT * FROM pairs
        ORDER BY kernel, pass, workload, gpu, implementation, variant
    """
    return PairsQuery(latest, params, pairing)


# compare's rows with the session model of series_steps (docs/statistics.md section 4) over
# the pairs of one implementation: the session's effect is the median log ratio of the
# implementation's keys (kernel, pass, GPU, family) whose two results lie within an hour of
# this pair's two, this one included, taken out when 3 or more others share it, another
# implementation measured within those hours moved the same way by at least half as much at
# some workload (the echo), and it exceeds the threshold; session_shift when what it leaves
# (code_change) is within the threshold. Pairs of two implementations get nulls.
#
# It runs over two tables (:func:`sessions`): ``pairs``, the rows of :func:`pairs_sql`, and
# ``results``, the passed results it may read: those in the hours of the pairs' runs and the
# hours beside them, as any result within an hour of a pair's is.
SESSIONS_SQL = """
    WITH timed AS (
        SELECT p.*, lb.family, lb.observed_at AS baseline_at, lc.observed_at AS candidate_at,
            LN(p.latency_ratio) AS log_ratio,
            lb.implementation = lc.implementation
                AND (lb.variant = lc.variant OR (lb.variant IS NULL AND lc.variant IS NULL))
                AS one_implementation
        FROM pairs p
        LEFT JOIN results lb ON lb.run_id = p.baseline_run_id
        LEFT JOIN results lc ON lc.run_id = p.candidate_run_id
    ),
    session AS (
        SELECT p.baseline_run_id, p.candidate_run_id,
            COUNT(CASE WHEN q.workload <> p.workload THEN 1 END) AS others,
            PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY q.log_ratio) AS effect
        FROM timed p
        JOIN timed q
            ON q.kernel = p.kernel AND q.pass = p.pass AND q.gpu = p.gpu
            AND q.family = p.family AND q.implementation = p.implementation
            AND (q.variant = p.variant OR (q.variant IS NULL AND p.variant IS NULL))
            AND q.one_implementation
            AND (q.workload <> p.workload OR q.candidate_run_id = p.candidate_run_id)
            AND q.baseline_at BETWEEN p.baseline_at - INTERVAL '1' HOUR
                                  AND p.baseline_at + INTERVAL '1' HOUR
            AND q.candidate_at BETWEEN p.candidate_at - INTERVAL '1' HOUR
                                   AND p.candidate_at + INTERVAL '1' HOUR
        WHERE p.one_implementation
        GROUP BY p.baseline_run_id, p.candidate_run_id
    ),
    echo AS (
        SELECT p.baseline_run_id, p.candidate_run_id,
            MAX(LN(o2.center_us / o1.center_us)) AS up,
            MIN(LN(o2.center_us / o1.center_us)) AS down
        FROM timed p
        JOIN results o1
            ON o1.kernel = p.kernel AND o1.pass = p.pass AND o1.gpu = p.gpu
            AND o1.family = p.family AND o1.implementation <> p.implementation
            AND o1.center_us > 0
            AND o1.observed_at BETWEEN p.baseline_at - INTERVAL '1' HOUR
                                   AND p.baseline_at + INTERVAL '1' HOUR
        JOIN results o2
            ON o2.kernel = o1.kernel AND o2.pass = o1.pass AND o2.gpu = o1.gpu
            AND o2.family = o1.family AND o2.workload = o1.workload
            AND o2.implementation = o1.implementation
            AND (o2.variant = o1.variant OR (o2.variant IS NULL AND o1.variant IS NULL))
            AND o2.center_statistic = o1.center_statistic AND o2.center_us > 0
            AND o2.observed_at BETWEEN p.candidate_at - INTERVAL '1' HOUR
                                   AND p.candidate_at + INTERVAL '1' HOUR
        WHERE p.one_implementation
        GROUP BY p.baseline_run_id, p.candidate_run_id
    ),
    fitted AS (
        SELECT t.*,
            CASE WHEN se.others >= 3 AND ABS(se.effect) > LN(1 + $threshold)
                      AND (se.effect > 0 AND e.up >= se.effect / 2
                           OR se.effect < 0 AND e.down <= se.effect / 2)
                 THEN se.effect END AS session_log_effect
        FROM timed t
        LEFT JOIN session se
            ON se.baseline_run_id = t.baseline_run_id
            AND se.candidate_run_id = t.candidate_run_id
        LEFT JOIN echo e
            ON e.baseline_run_id = t.baseline_run_id AND e.candidate_run_id = t.candidate_run_id
    )
    SELECT * EXCLUDE (family, baseline_at, candidate_at, log_ratio, one_implementation,
                      session_log_effect),
        EXP(session_log_effect) - 1 AS session_change,
        EXP(log_ratio - session_log_effect) - 1 AS code_change,
        COALESCE(log_ratio <> 0 AND SIGN(session_log_effect) = SIGN(log_ratio)
                 AND ABS(log_ratio - session_log_effect) <= LN(1 + $threshold), FALSE)
            AS session_shift
    FROM fitted
    ORDER BY kernel, pass, workload, gpu, implementation, variant
"""


# The passed results the session model may read (SESSIONS_SQL's ``results``), over a warehouse
# that holds those measured in the given hours only (:func:`sessions`).
RESULTS_SQL = """
    SELECT run_id, kernel, pass, gpu, family, implementation, variant, workload,
        center_statistic, center_us, observed_at
    FROM latencies
    WHERE status = 'passed'
"""


def sessions(db: Queryable, found: pa.Table, threshold: float,
             local: duckdb.DuckDBPyConnection) -> pa.Table:
    """``found``, the rows of :func:`pairs`, with the session model (:data:`SESSIONS_SQL`):
    the passed runs in the hours of their runs and the hours beside them are found on ``db``
    (bounded by constants, so that the scan of ``runs`` skips the rest), their results read
    over a copy of them (:func:`_of_runs`), then the model runs over both on ``local``, the
    caller's connection over rows in memory (the pairs stay registered as ``pairs`` there,
    for the caller to replace by the rows returned). In one statement with the pairs, the
    model read every passed result of the warehouse beside the pairs' own reading, which ran
    ``kidata compare`` and ``kidata gate`` out of the default 300MB at 10M runs
    (docs/benchmarks.md, Run AY)."""
    from datetime import timedelta

    ids = found.column("baseline_run_id").to_pylist() + found.column("candidate_run_id").to_pylist()
    hours = [h for (h,) in db.rows(
        "SELECT DISTINCT DATE_TRUNC('hour', observed_at) + TO_HOURS(d.shift) FROM runs "
        "CROSS JOIN (VALUES (-1), (0), (1)) AS d(shift) "
        "WHERE observed_at IS NOT NULL AND run_id IN (SELECT UNNEST($ids))",
        {"ids": ids})] if ids else []
    in_hours = [i for (i,) in db.rows(
        "SELECT run_id FROM runs WHERE status = 'passed' AND observed_at >= $lo "
        "AND observed_at < $hi AND DATE_TRUNC('hour', observed_at) IN (SELECT UNNEST($hours))",
        {"lo": min(hours), "hi": max(hours) + timedelta(hours=1),
         "hours": hours})] if hours else []  # no pairs: no hours, no results
    db.release()
    results = _of_runs(db, in_hours, RESULTS_SQL, ["latencies"])
    local.register("pairs", found)
    local.register("results", results)
    try:
        return local.sql(SESSIONS_SQL, params={"threshold": float(threshold)}).to_arrow_table()
    finally:
        local.unregister("results")


def compare(db: Queryable, baseline: str | dict[str, str], candidate: str | dict[str, str],
            threshold: float | None = None) -> Comparison:
    """Compare the latest passed run of every key selected by ``baseline`` with the one
    selected by ``candidate``, over the keys both have, with the verdicts of ``speedups``
    (the ``verdict_rule`` view). A key is kernel, pass, workload, GPU and protocol family, and
    implementation and variant unless the two selectors name different implementations.

    A key counts as slower when the interval of its ratio lies above 1 (``placement``
    'above', by the noise model of ``speedups``: ``noise_basis``) and its change (candidate /
    baseline - 1) exceeds ``threshold``: the verdict rule with ``threshold`` as the minimum
    effect (None: the session's, so the count agrees with the rows' ``verdict``).
    ``Comparison.regressed`` says whether any did. The summary's
    ``geomean_ratio`` weighs each (kernel, pass) equally: the geometric mean over them of
    each one's geometric mean ratio; ``geomean_speedup`` is its inverse.

    Each row has both directions, named as in ``speedups``: ``latency_ratio`` = candidate_us /
    baseline_us (below 1: candidate faster), ``speedup`` = baseline_us / candidate_us (above 1:
    candidate faster); ``change`` = latency_ratio - 1 (the latency's change, above 0: slower).
    The pairing differs from ``speedups`` by design: each side is the latest passed run its
    selector matches (any version, load or label), where ``speedups`` pairs the latest run of
    each implementation overall.

    Two sides of one implementation (two versions, loads, commits) are also read as two
    sessions: ``session_change``, ``code_change`` and ``session_shift`` apply the session model
    of ``series_steps`` (docs/statistics.md section 4) to the pairs, with ``threshold`` as the
    minimum effect. A slower key that is a shift of the session (``session_shift``), or whose
    code's part is not beyond the threshold, is counted in ``shifted``, not in ``slower``.
    """
    threshold = min_effect(db, threshold)
    # The rows are computed once (the session model reads the results twice more) and the
    # summary is asked of them: as many rows as shared keys, which the CLI prints anyway.
    local = engine.connect()  # over the rows in memory, with kidata's settings
    local.register("pairs", sessions(db, pairs(db, baseline, candidate, local), threshold,
                                     local))
    rows = local.sql("SELECT * FROM pairs ORDER BY kernel, pass, workload, gpu, "
                     "implementation, variant")
    slower = "placement = 'above' AND change > $threshold"
    code = "(NOT session_shift AND (code_change IS NULL OR code_change > $threshold))"
    summary = local.execute(f"""
        WITH kernels AS (SELECT kernel, pass, AVG(LN(latency_ratio)) AS log_ratio FROM pairs
                         GROUP BY kernel, pass)
        SELECT
            (SELECT COUNT(*) FROM pairs),
            (SELECT COUNT(*) FROM pairs WHERE {slower} AND {code}),
            (SELECT COUNT(*) FROM pairs WHERE placement = 'below' AND -change > $threshold
                / (1 + $threshold)),
            (SELECT COUNT(*) FROM pairs WHERE placement = 'overlap'
                OR (placement = 'above' AND change <= $threshold)
                OR (placement = 'below' AND -change <= $threshold / (1 + $threshold))),
            (SELECT COUNT(*) FROM pairs WHERE placement = 'none'),
            (SELECT COUNT(*) FROM kernels),
            (SELECT EXP(AVG(log_ratio)) FROM kernels),
            (SELECT COUNT(*) FROM pairs WHERE {slower} AND NOT {code})
    """, {"threshold": float(threshold)}).fetchall()[0]
    shared, slower, faster, unchanged, none, kernels, geomean, shifted = summary
    return Comparison(rows, shared, slower, faster, unchanged, none, kernels, geomean,
                      float(threshold), shifted)
