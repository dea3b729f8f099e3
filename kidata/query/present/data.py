"""The report's data: views read by name into Polars frames, restricted by :class:`Filters`.

Only columns the report draws are named, so views that gain columns keep working. What the
report cannot draw is left in DuckDB (issue 30, item 2): restrictions are bound as query
parameters (never formatted into SQL), latency and efficiency points are the latest run of
each key (``latest_latencies``), and history reads only the series it draws; so the frames
grow with the keys and the series shown, not with the runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

    from kidata.query.session import Queryable


@dataclass
class Filters:
    """What a report covers: kernels, GPUs and implementations (empty: all). ``since`` and
    ``until`` only describe the time window: the session the report reads through applies it
    (:mod:`kidata.core.window`), as for every reading command."""

    kernels: list[str] = field(default_factory=list)
    gpus: list[str] = field(default_factory=list)
    implementations: list[str] = field(default_factory=list)
    since: datetime | None = None
    until: datetime | None = None

    def describe(self) -> str:
        parts = [f"{name}: {', '.join(values)}" for name, values in
                 (("kernels", self.kernels), ("GPUs", self.gpus),
                  ("implementations", self.implementations)) if values]
        if self.since:
            parts.append(f"measured from {self.since:%Y-%m-%d %H:%M} UTC")
        if self.until:
            parts.append(f"measured before {self.until:%Y-%m-%d %H:%M} UTC")
        return "; ".join(parts) or "everything in the warehouse"

    def condition(self, alias: str = "", implementation_columns: tuple[str, ...]
                  = ("implementation",)) -> tuple[str, dict[str, list[str]]]:
        """The restriction as a SQL condition on ``alias``'s columns and its parameters (the
        names asked for are bound, never formatted into the text); ``TRUE`` for none."""
        prefix = f"{alias}." if alias else ""
        parts: list[str] = []
        params: dict[str, list[str]] = {}
        if self.kernels:
            parts.append(f"list_contains($kernels, {prefix}kernel)")
            params["kernels"] = list(self.kernels)
        if self.gpus:
            parts.append(f"list_contains($gpus, {prefix}gpu)")
            params["gpus"] = list(self.gpus)
        if self.implementations:
            parts.append("(" + " OR ".join(f"list_contains($implementations, {prefix}{c})"
                                          for c in implementation_columns) + ")")
            params["implementations"] = list(self.implementations)
        return " AND ".join(parts) or "TRUE", params

    def apply(self, frame: pl.DataFrame, implementation_columns: tuple[str, ...]
              = ("implementation",)) -> pl.DataFrame:
        """Rows of the chosen kernels and GPUs whose implementation (any of the columns, e.g.
        candidate or baseline) is chosen."""
        import polars as pl

        if self.kernels and "kernel" in frame.columns:
            frame = frame.filter(pl.col("kernel").is_in(self.kernels))
        if self.gpus and "gpu" in frame.columns:
            frame = frame.filter(pl.col("gpu").is_in(self.gpus))
        if self.implementations:
            present = [c for c in implementation_columns if c in frame.columns]
            if present:
                condition = pl.lit(False)
                for column in present:
                    condition |= pl.col(column).is_in(self.implementations)
                frame = frame.filter(condition)
        return frame


def _frame(db: Queryable, query: str, params: dict[str, Any] | None = None) -> pl.DataFrame:
    return db.sql(query, params or None).pl()


def latency_points(db: Queryable, filters: Filters) -> pl.DataFrame:
    """The latest passed latency result per kernel, pass, GPU, family, implementation, variant
    and workload, with the workload's swept parameter and size (``workload_sizes``; null when
    the workload has none) and ``others``: the values of the workload's other parameters that
    vary across the sweep (e.g. "B=8, T=2048" when V is swept at two B x T settings; "" when
    nothing else varies). A line may join only workloads with the same ``others``. A workload
    on two sweeps appears once per sweep."""
    where, params = filters.condition("k")
    # The latest passed run of each key with its numbers (latest_latencies: the loads'
    # latest_runs rows, whose statistics a commit works out by latencies' own rule), so no
    # run's statistics are worked out here (latencies at 1M runs: ~1 s); charts draw medians.
    # As the speedups view: the latest run counts, untimed runs before timed ones. Keys tied
    # in the drawing order come in the order of their first run (untimed first, then by time
    # and run id). Chosen and ordered here, not in Polars, whose allocator kept ~45 MB of the
    # sort and grouping after them, under every later query of the report
    # (docs/benchmarks.md, Run AZ).
    key = ("k.kernel, k.pass, k.gpu, k.family, k.implementation, k.variant, k.workload, "
           "s.parameter")
    frame = _frame(db, f"""
        WITH points AS (
            SELECT k.run_id, k.kernel, k.pass, k.implementation, k.variant, k.workload, k.gpu,
                   k.family, k.median_us, k.p20_us, k.p80_us, k.observed_at, k.version,
                   r.workload_id, s.parameter, CAST(s.size AS DOUBLE) AS size,
                   ROW_NUMBER() OVER (PARTITION BY {key}
                       ORDER BY k.observed_at DESC NULLS LAST, k.run_id DESC) AS latest,
                   FIRST_VALUE(k.observed_at) OVER (PARTITION BY {key}
                       ORDER BY k.observed_at NULLS FIRST, k.run_id) AS first_at,
                   FIRST_VALUE(k.run_id) OVER (PARTITION BY {key}
                       ORDER BY k.observed_at NULLS FIRST, k.run_id) AS first_run
            FROM latest_latencies k
            JOIN runs r ON r.run_id = k.run_id
            LEFT JOIN workload_sizes s ON s.workload_id = r.workload_id
            WHERE k.median_us IS NOT NULL AND {where}
        )
        SELECT * EXCLUDE (latest, first_at, first_run) FROM points WHERE latest = 1
        ORDER BY kernel, pass, gpu, parameter NULLS LAST, size NULLS LAST, workload NULLS LAST,
            first_at NULLS FIRST, first_run""", params)
    return _with_others(db, frame).drop("workload_id")


def _with_others(db: Queryable, frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with ``others`` (see :func:`latency_points`): per kernel and swept parameter,
    the parameters other than the swept one whose value (or absence) is not the same for every
    workload drawn, written ``name=value`` in name order."""
    import polars as pl

    sized = frame.filter(pl.col("parameter").is_not_null()).select(
        "kernel", "parameter", "workload_id").unique()
    if sized.is_empty():
        return frame.with_columns(others=pl.lit(""))
    params = _frame(db, """
        SELECT p.workload_id, p.name,
               p.value, p.text
        FROM workload_parameters p
        WHERE p.workload_id IN (SELECT workload_id FROM workload_sizes)""")
    params = params.with_columns(shown=pl.when(pl.col("value").is_not_null())
                                 .then(pl.col("value").map_elements(
                                     lambda v: f"{v:g}", return_dtype=pl.String))
                                 .otherwise(pl.col("text")).fill_null("null"))
    # Every (sweep, workload, other name), absent ones as "-", so absence counts as a value.
    names = sized.join(params.select("workload_id", "name"), on="workload_id")
    names = names.filter(pl.col("name") != pl.col("parameter")).select(
        "kernel", "parameter", "name").unique()
    grid = (sized.join(names, on=["kernel", "parameter"])
            .join(params.select("workload_id", "name", "shown"), on=["workload_id", "name"],
                  how="left").with_columns(pl.col("shown").fill_null("-")))
    varying = (grid.group_by("kernel", "parameter", "name")
               .agg(pl.col("shown").n_unique().alias("values"))
               .filter(pl.col("values") > 1).drop("values"))
    others = (grid.join(varying, on=["kernel", "parameter", "name"]).sort("name")
              .with_columns(pair=pl.col("name") + "=" + pl.col("shown"))
              .group_by("kernel", "parameter", "workload_id", maintain_order=True)
              .agg(others=pl.col("pair").str.join(", ")))
    return (frame.join(others, on=["kernel", "parameter", "workload_id"], how="left",
                       nulls_equal=False, maintain_order="left")
            .with_columns(pl.col("others").fill_null("")))


# The role the heatmaps compare with (kidata/data/roles.toml): against it, each kernel is
# compared with its own reference implementation.
ROLE = "reference"


@dataclass
class SpeedupCells:
    """What the heatmaps and the choice of their pairs need of the ``speedups`` view, counted
    and aggregated in DuckDB: the view's rows (one per workload and variant pair) grow with the
    keys and, held as a frame, sat under every later query of the report (docs/benchmarks.md,
    Run BJ); these grow with kernels × GPUs.

    ``cells``: per (candidate, against, pass, kernel, GPU), over its comparisons with a
    positive speedup: ``geomean`` (of the speedups), ``n``, ``references`` (the baselines,
    sorted, joined with "/"), ``kernel_family``, and how many are ``faster``, ``slower`` and
    ``noise`` (within noise). ``pairs``: per (candidate, against, candidate_role,
    baseline_role), ``compared`` (comparisons with a speedup) and ``positive`` (with a
    positive one). ``against`` is :func:`against`'s."""

    cells: pl.DataFrame
    pairs: pl.DataFrame

    @property
    def height(self) -> int:
        """The rows held."""
        return self.cells.height + self.pairs.height

    def clear(self) -> SpeedupCells:
        """The same columns without the rows (let go once the heatmaps are drawn)."""
        return SpeedupCells(self.cells.clear(), self.pairs.clear())


def against(direct: bool) -> str:
    """SQL for what a ``speedups`` row's candidate is compared with in the heatmaps: the
    baseline implementation when two implementations were chosen (``direct``); else
    ``'reference'`` where the baseline plays the reference role for the row's kernel (torch
    for one kernel, huggingface for another: speedups.baseline_role) and the candidate does
    not, else the baseline implementation."""
    if direct:
        return "s.baseline"
    return (f"CASE WHEN s.baseline_role = '{ROLE}' AND COALESCE(s.candidate_role, '') <> "
            f"'{ROLE}' THEN '{ROLE}' ELSE s.baseline END")


def speedup_cells(db: Queryable, filters: Filters) -> SpeedupCells:
    """The heatmaps' cells and pair counts (:class:`SpeedupCells`) of the ``speedups`` view
    (in a windowed session, of the latest runs measured in the window), stale pairs left out,
    each kernel's family from ``kernel_families``; one pass over the view (two grouping
    sets)."""
    import polars as pl

    where, params = filters.condition("s", ("candidate", "baseline"))
    positive = "FILTER (WHERE speedup > 0)"
    frame = _frame(db, f"""
        WITH compared AS (
            SELECT s.kernel, s.pass, s.gpu, s.candidate, s.baseline, s.candidate_role,
                   s.baseline_role, s.speedup, s.verdict,
                   {against(len(filters.implementations) == 2)} AS against,
                   COALESCE(f.family, s.kernel) AS kernel_family
            FROM speedups s LEFT JOIN kernel_families f ON f.kernel = s.kernel
            WHERE NOT s.stale  -- as kernel_speedups and speedup_summary
                AND {where}
        )
        SELECT candidate, against, candidate_role, baseline_role, pass, kernel, gpu,
               GROUPING(candidate_role) = 0 AS pair,
               -- The logarithms summed in their sorted order: the same last bits in every
               -- session (an aggregate's sum follows the order rows arrive in), so the
               -- colour scale, set by the largest cell, is drawn the same.
               EXP(list_avg(list_sort(LIST(LN(speedup)) {positive}))) AS geomean,
               COUNT(*) {positive} AS n,
               array_to_string(list_sort(list_distinct(LIST(baseline) {positive})), '/')
                   AS "references",
               MIN(kernel_family) AS kernel_family,
               COUNT(*) FILTER (WHERE speedup > 0 AND verdict = 'faster') AS faster,
               COUNT(*) FILTER (WHERE speedup > 0 AND verdict = 'slower') AS slower,
               COUNT(*) FILTER (WHERE speedup > 0 AND verdict = 'within noise') AS noise,
               COUNT(speedup) AS compared
        FROM compared
        GROUP BY GROUPING SETS ((candidate, against, candidate_role, baseline_role),
                                (candidate, against, pass, kernel, gpu))
        ORDER BY ALL  -- the heatmaps' rows of families and GPUs average cells in this order
        """, params)
    pair = pl.col("pair")
    cells = frame.filter(~pair & (pl.col("n") > 0)).select(
        "candidate", "against", "pass", "kernel", "gpu", "geomean", "n", "references",
        "kernel_family", "faster", "slower", "noise")
    pairs = frame.filter(pair).select(
        "candidate", "against", "candidate_role", "baseline_role", "compared",
        pl.col("n").alias("positive"))
    return SpeedupCells(cells, pairs)


# The history chart's series: the most results first, then those with a regression among
# equals, then by name (charts.history_chart draws them in this order).
SERIES_KEY = ("kernel", "pass", "implementation", "variant", "workload", "gpu", "family")


# The steps the history draws: timed, of series with two or more results.
_DRAWN = "t.median_us IS NOT NULL AND t.points > 1"


def trend_series(db: Queryable, filters: Filters, limit: int | None = None,
                 regressed: list[str] | None = None) -> tuple[list[tuple], int]:
    """The keys (:data:`SERIES_KEY`) of the ``limit`` series of ``trends`` with the most steps
    drawn (two or more results, with medians), those with more of the runs ``regressed``
    first among equals (all when None), ranked and chosen in DuckDB; and how many such series
    there are. The report reads the chosen series' steps (:func:`trend_steps`) in a second
    query, on a fresh connection: one query that held every step for both uses took ~140 MB
    more at 1M runs (Run AR), one that read ``trends`` twice ran out of the default 300MB at
    5M, and a second query on the same connection keeps ``trends`` as a table (a session's
    second read: ~300 MB at 1M; Run AS)."""
    where, params = filters.condition("t")
    key = ", ".join(SERIES_KEY)
    rows = db.rows(f"""
        WITH flagged AS (
            SELECT DISTINCT UNNEST(CAST($regressed AS VARCHAR[])) AS run_id
        ),
        ranked AS (
            SELECT {", ".join(f"t.{k}" for k in SERIES_KEY)}, COUNT(*) AS drawn,
                   COUNT(*) FILTER (WHERE t.run_id IN (SELECT run_id FROM flagged))
                       AS regressed,
                   COUNT(*) OVER () AS total
            FROM trends t
            WHERE {_DRAWN} AND {where}
            GROUP BY ALL
        )
        SELECT {key}, total FROM ranked
        ORDER BY drawn DESC, regressed DESC, kernel, pass, workload, implementation, gpu,
                 variant NULLS FIRST, family""" + (f" LIMIT {int(limit)}" if limit is not None
                                                   else ""),
        {**params, "regressed": list(regressed or [])})
    return [row[:-1] for row in rows], (int(rows[0][-1]) if rows else 0)


def trend_steps(db: Queryable, filters: Filters, chosen: list[tuple]) -> pl.DataFrame:
    """The steps drawn (:data:`_DRAWN`) of the ``chosen`` series (:func:`trend_series`' keys),
    with each run's ``release`` (:func:`release`)."""
    import polars as pl

    where, params = filters.condition("t")
    # The chosen series as parallel lists, unnested side by side into rows (a null variant
    # stays null: joined with IS NOT DISTINCT FROM).
    columns = {f"chosen_{k}": [row[i] for row in chosen] for i, k in enumerate(SERIES_KEY)}
    # The same restriction as plain lists of values, implied by the join: DuckDB pushes a
    # column's IN list down to the stored steps' scan, which it does not do with the join
    # (at 5M generated runs 3.4-3.6 s -> 1.8-1.9 s for the same rows; docs/benchmarks.md,
    # Run AT). Only for keys no chosen series has null in.
    implied = []
    for i, k in enumerate(SERIES_KEY):
        distinct = {row[i] for row in chosen}
        if distinct and None not in distinct:
            values = sorted(distinct)
            names = [f"$in_{k}_{j}" for j in range(len(values))]
            params.update(zip((n[1:] for n in names), values, strict=True))
            implied.append(f"t.{k} IN ({', '.join(names)})")
    frame = _frame(db, f"""
        WITH chosen AS (
            SELECT {", ".join(f"UNNEST(CAST($chosen_{k} AS VARCHAR[])) AS {k}"
                              for k in SERIES_KEY)}
        )
        SELECT t.kernel, t.pass, t.implementation, t.variant, t.workload, t.gpu, t.family,
               t.step, t.points, t.run_id, t.observed_at, t.version, t.median_us, t.p20_us,
               t.p80_us, r.labels
        FROM trends t
        JOIN chosen c ON {" AND ".join(f"t.{k} IS NOT DISTINCT FROM c.{k}"
                                       for k in SERIES_KEY)}
        LEFT JOIN runs r ON r.run_id = t.run_id
        WHERE {" AND ".join([_DRAWN, where, *implied])}""", {**params, **columns})
    return frame.with_columns(release=pl.struct("version", "labels").map_elements(
        lambda r: release(r["version"], r["labels"]), return_dtype=pl.String)
    ).drop("labels")


def release(version: str | None, labels: str | None) -> str | None:
    """The version as a reader should see it: with the package it belongs to when the run's
    labels name it (``{"liger_version": "0.2.1"}`` -> "liger 0.2.1"). Liger's CSV gives the
    Liger release on its torch and huggingface rows too: a bare "0.2.1" beside a huggingface
    series would read as a Hugging Face version."""
    import json

    if not version or not labels:
        return version
    try:
        named = json.loads(labels)
    except ValueError:
        return version
    if isinstance(named, dict):
        for key, value in sorted(named.items()):
            if key.endswith("_version") and str(value) == version and key != "_version":
                return f"{key.removesuffix('_version')} {version}"
    return version


def regressions(db: Queryable, filters: Filters) -> pl.DataFrame:
    """The ``regressions`` view, in ``kidata regressions``' order (the view has none: without
    it the report's table came in a different order from one run to the next)."""
    where, params = filters.condition()
    return _frame(db, f"""
        SELECT kernel, pass, implementation, variant, workload, gpu, family, run_id,
               observed_at, version, previous_version, median_us, previous_median_us, change,
               code_change
        FROM regressions WHERE {where}
        ORDER BY kernel, pass, implementation, variant, workload, gpu, family, observed_at,
                 run_id""", params)


def shifts(db: Queryable, filters: Filters) -> pl.DataFrame:
    """The ``shifts`` view: firm steps of the session, the environment or a re-run, which
    ``regressions`` leaves out."""
    where, params = filters.condition()
    return _frame(db, f"""
        SELECT kernel, pass, implementation, variant, workload, gpu, observed_at, version,
               previous_version, change, verdict, cause, session_change, code_change,
               changed_facts
        FROM shifts WHERE {where}
        ORDER BY kernel, pass, gpu, workload, implementation, variant, observed_at""", params)


def kernel_speedups(db: Queryable, filters: Filters) -> pl.DataFrame:
    """The per-kernel geometric means with their intervals (``kernel_speedups``)."""
    frame = _frame(db, """
        SELECT candidate, baseline, gpu, pass, kernel, workloads, geomean_speedup,
               interval_low, interval_high, min_speedup, max_speedup
        FROM kernel_speedups
        WHERE candidate_variant IS NULL AND baseline_variant IS NULL""")
    return filters.apply(frame, ("candidate", "baseline"))


def noise_envelopes(db: Queryable, filters: Filters) -> pl.DataFrame:
    """The run-to-run noise calibration (``noise_envelopes``), per source, GPU and size."""
    frame = _frame(db, """
        SELECT source, gpu, size_class, changes, median_change, envelope, calibrated
        FROM noise_envelopes ORDER BY source, gpu, size_decade""")
    return filters.apply(frame)


def min_effect(db: Queryable) -> float:
    """The minimum effect the report's verdicts use (``verdict_settings``)."""
    return float(db.rows("SELECT min_effect FROM verdict_settings")[0][0])


def modelled(db: Queryable, view: str) -> bool:
    """Whether some run has a row in ``view`` (``run_bytes``, ``run_flops``): the efficiency
    and roofline views work out the latency of every run before they meet the few with a model
    (1.5 and 0.7 s at 1M generated runs, none with a model), and DuckDB drops a plan whose
    condition is ``FALSE`` without running it (0.15 s). The answer itself costs a pass over the
    runs and their models (~180 MB beside DuckDB at 5M runs): the report asks it first, while
    the process holds no frame yet (docs/benchmarks.md, Run BD)."""
    return bool(db.rows(f"SELECT EXISTS (SELECT 1 FROM {view})")[0][0])


# What sets a point's latency when its bytes do not (the efficiency view's ``bound``): such a
# point's rate is no bandwidth figure, and the efficiency chart draws it hollow.
NOT_BYTES = ("overhead", "fixed cost")
# Points of one GPU's efficiency panel beyond which the panel shows merged points (below).
# Liger's published CSVs have at most ~100 per GPU; 1M generated runs with byte models have
# 900, which took 1.3 s and 3.1 MB of SVG to draw, every point piled on 41 byte counts
# (docs/benchmarks.md, Run BE).
MAX_EFFICIENCY_POINTS = 300


def efficiency(db: Queryable, filters: Filters, has_bytes: bool | None = None
               ) -> pl.DataFrame:
    """The ``efficiency`` view for the latest run of each key (``latest_latencies``, as the
    latency charts), with each run's time, in a fixed order (the panels' legends follow it);
    none when ``has_bytes`` is false (default: asked, :func:`modelled`).

    A GPU with more than :data:`MAX_EFFICIENCY_POINTS` points has them merged per
    implementation, variant, byte count and kind (bound by its bytes or not, above the peak or
    not): ``achieved_gbps`` and ``peak_fraction`` are the medians of the merged runs',
    ``achieved_gbps_low`` and ``_high`` their lowest and highest rate (instead of one run's p80
    and p20 rates), ``kernel``, ``pass`` and ``workload`` are null unless the runs share one,
    ``observed_at`` is the latest. ``merged`` says which GPUs' points were merged; ``runs``
    counts each point's runs."""
    where, params = filters.condition("e")
    if has_bytes is None:
        has_bytes = modelled(db, "run_bytes")
    any_run = "TRUE" if has_bytes else "FALSE"
    frame = _frame(db, f"""
        SELECT e.kernel, e.pass, e.implementation, e.variant, e.workload, e.gpu, e.bytes,
               e.achieved_gbps, e.achieved_gbps_low, e.achieved_gbps_high, e.peak_gbps,
               e.peak_fraction, e.above_peak, e.bound, r.observed_at, e.run_id
        FROM efficiency e
        JOIN runs r ON r.run_id = e.run_id
        WHERE e.run_id IN (SELECT run_id FROM latest_latencies) AND {any_run} AND {where}
        ORDER BY e.gpu, e.implementation, e.kernel, e.pass, e.workload, e.run_id""",
                   params)
    return _merge_crowded(frame)


def _merge_crowded(frame: pl.DataFrame) -> pl.DataFrame:
    """:func:`efficiency`'s points with each crowded GPU's merged. In Polars, over the few
    thousand rows read: the same grouping in the view's query cost 0.15-0.4 s more at 1M runs
    with byte models (DuckDB planned the efficiency view differently beneath it)."""
    import polars as pl

    counts = frame.group_by("gpu").len()
    crowded = counts.filter(pl.col("len") > MAX_EFFICIENCY_POINTS)["gpu"].to_list()
    alone = frame.filter(~pl.col("gpu").is_in(crowded)).with_columns(
        merged=pl.lit(False), runs=pl.lit(1, pl.UInt32))
    if not crowded:
        return alone.drop("run_id")

    def shared(column: str) -> pl.Expr:
        return pl.when(pl.col(column).n_unique() == 1).then(pl.col(column).first())

    kind = ["gpu", "implementation", "variant", "bytes", "hollow", "above_peak"]
    merged = (frame.filter(pl.col("gpu").is_in(crowded))
              .with_columns(hollow=pl.col("bound").is_in(list(NOT_BYTES)).fill_null(False))
              .group_by(kind)
              .agg(shared("kernel"), shared("pass"), shared("workload"),
                   pl.col("achieved_gbps").median(),
                   pl.col("achieved_gbps").min().alias("achieved_gbps_low"),
                   pl.col("achieved_gbps").max().alias("achieved_gbps_high"),
                   pl.col("peak_gbps").first(), pl.col("peak_fraction").median(),
                   pl.col("bound").min(), pl.col("observed_at").max(),
                   pl.len().alias("runs"), pl.col("run_id").min())
              .with_columns(merged=pl.lit(True))
              .sort(["gpu", "implementation", "kernel", "pass", "workload", "run_id"],
                    nulls_last=True)
              .drop("hollow")
              .select(alone.columns))
    # Each GPU's points stay together, in the query's order of GPUs.
    return (pl.concat([alone, merged]).sort("gpu", maintain_order=True).drop("run_id"))


def roofline(db: Queryable, filters: Filters, has_flops: bool | None = None) -> pl.DataFrame:
    """The ``roofline`` view (runs of kernels with a FLOP model) for the latest run of each
    key, with each run's time, in a fixed order; none when ``has_flops`` is false (default:
    asked, :func:`modelled`)."""
    where, params = filters.condition("f")
    if has_flops is None:
        has_flops = modelled(db, "run_flops")
    any_run = "TRUE" if has_flops else "FALSE"
    return _frame(db, f"""
        SELECT f.kernel, f.pass, f.implementation, f.variant, f.workload, f.gpu, f.flops,
               f.achieved_tflops, f.peak_tflops, f.compute_fraction, f.bound, r.observed_at
        FROM roofline f
        JOIN runs r ON r.run_id = f.run_id
        WHERE f.run_id IN (SELECT run_id FROM latest_latencies) AND {any_run} AND {where}
        ORDER BY f.gpu, f.implementation, f.kernel, f.pass, f.workload, f.run_id""",
                  params)


def audit(db: Queryable, filters: Filters) -> pl.DataFrame:
    """Published claims and whether they agree with their inputs (``audit``), flagged first."""
    import polars as pl

    frame = _frame(db, """
        SELECT a.gpu, a.kernel, a.pass, a.workload, a.quantity, a.published, a.recomputed,
               a.tolerance, a.status, a.flagged, r.observed_at
        FROM audit a
        LEFT JOIN runs r ON r.run_id = a.run_id""")
    frame = filters.apply(frame)
    return frame.sort([pl.col("flagged").fill_null(False), "gpu", "kernel", "workload"],
                      descending=[True, False, False, False])


def summary(db: Queryable) -> dict[str, Any]:
    """What the warehouse holds: its ``info()`` (:meth:`kidata.query.session.Session.info`)
    plus loads and rejects per file."""
    data = db.info()
    data["loads"] = _frame(db, """
        SELECT loaded_at, kidata_version, files, records, duplicates, rejected, warnings
        FROM loads ORDER BY loaded_at""")
    data["rejects"] = _frame(db, """
        SELECT source_file, count(*) AS rejected, min(reason) AS first_reason
        FROM rejects GROUP BY source_file ORDER BY rejected DESC, source_file""")
    return data
