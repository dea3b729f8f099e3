"""The report's data: views read by name into Polars frames, restricted by :class:`Filters`.

Only columns the report draws are named, so views that gain columns keep working. Restrictions
are applied to the frames (never formatted into SQL).
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


def _frame(db: Queryable, query: str) -> pl.DataFrame:
    return db.sql(query).pl()


def latency_points(db: Queryable, filters: Filters) -> pl.DataFrame:
    """The latest passed latency result per kernel, pass, GPU, family, implementation, variant
    and workload, with the workload's swept parameter and size (``workload_sizes``; null when
    the workload has none) and ``others``: the values of the workload's other parameters that
    vary across the sweep (e.g. "B=8, T=2048" when V is swept at two B x T settings; "" when
    nothing else varies). A line may join only workloads with the same ``others``. A workload
    on two sweeps appears once per sweep."""
    import polars as pl

    frame = _frame(db, """
        SELECT l.run_id, l.kernel, l.pass, l.implementation, l.variant, l.workload, l.gpu,
               l.family, l.median_us, l.p20_us, l.p80_us, l.observed_at, l.version,
               r.workload_id, s.parameter, s.size
        FROM latencies l
        JOIN runs r ON r.run_id = l.run_id
        LEFT JOIN workload_sizes s ON s.workload_id = r.workload_id
        WHERE l.status = 'passed' AND l.median_us IS NOT NULL""")  # charts draw medians
    frame = filters.apply(frame)
    key = ["kernel", "pass", "gpu", "family", "implementation", "variant", "workload",
           "parameter"]
    # As the speedups view: the latest run counts, untimed runs before timed ones.
    frame = (frame.sort(["observed_at", "run_id"], nulls_last=False)
             .group_by(key, maintain_order=True).last()
             .sort(["kernel", "pass", "gpu", "parameter", "size", "workload"], nulls_last=True)
             .with_columns(pl.col("size").cast(pl.Float64)))
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


def speedups(db: Queryable, filters: Filters) -> pl.DataFrame:
    """Comparisons of the ``speedups`` view (in a windowed session, of the latest runs
    measured in the window), stale pairs left out, with each kernel's family."""
    frame = _frame(db, """
        SELECT s.kernel, s.pass, s.workload, s.gpu, s.family, s.candidate, s.candidate_variant,
               s.baseline, s.baseline_variant, s.speedup, s.verdict, s.candidate_role,
               s.baseline_role, COALESCE(f.family, s.kernel) AS kernel_family
        FROM speedups s LEFT JOIN kernel_families f ON f.kernel = s.kernel
        WHERE NOT s.stale  -- as kernel_speedups and speedup_summary""")
    return filters.apply(frame, ("candidate", "baseline"))


def trends(db: Queryable, filters: Filters) -> pl.DataFrame:
    """Steps of series with at least two results (``trends``)."""
    import polars as pl

    frame = _frame(db, """
        SELECT t.kernel, t.pass, t.implementation, t.variant, t.workload, t.gpu, t.family,
               t.step, t.points, t.run_id, t.observed_at, t.version, t.median_us, t.p20_us,
               t.p80_us, r.labels
        FROM trends t
        LEFT JOIN runs r ON r.run_id = t.run_id
        WHERE t.median_us IS NOT NULL""")  # charts draw medians (a mean-only series has none)
    frame = filters.apply(frame)
    frame = frame.filter(pl.col("points") > 1)
    return frame.with_columns(release=pl.struct("version", "labels").map_elements(
        lambda r: release(r["version"], r["labels"]), return_dtype=pl.String)).drop("labels")


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
    """The ``regressions`` view."""
    frame = _frame(db, """
        SELECT kernel, pass, implementation, variant, workload, gpu, family, run_id,
               observed_at, version, previous_version, median_us, previous_median_us, change
        FROM regressions""")
    return filters.apply(frame)


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
    return float(db.sql("SELECT min_effect FROM verdict_settings").fetchall()[0][0])


def efficiency(db: Queryable, filters: Filters) -> pl.DataFrame:
    """The ``efficiency`` view, with each run's time for the window."""
    frame = _frame(db, """
        SELECT e.kernel, e.pass, e.implementation, e.variant, e.workload, e.gpu, e.bytes,
               e.achieved_gbps, e.achieved_gbps_low, e.achieved_gbps_high, e.peak_gbps,
               e.peak_fraction, e.above_peak, e.bound, r.observed_at
        FROM efficiency e
        JOIN runs r ON r.run_id = e.run_id""")
    return filters.apply(frame)


def roofline(db: Queryable, filters: Filters) -> pl.DataFrame:
    """The ``roofline`` view (runs of kernels with a FLOP model), with each run's time."""
    frame = _frame(db, """
        SELECT f.kernel, f.pass, f.implementation, f.variant, f.workload, f.gpu, f.flops,
               f.achieved_tflops, f.peak_tflops, f.compute_fraction, f.bound, r.observed_at
        FROM roofline f
        JOIN runs r ON r.run_id = f.run_id""")
    return filters.apply(frame)


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
