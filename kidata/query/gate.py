"""A regression gate for CI (``kidata gate``): a candidate (a load, a commit, a branch's newest
results) against a baseline (a branch's newest, a named load), over every key both have.

Each key is judged by the verdict rule (``verdict_rule``; its noise model, as in ``speedups``:
raw samples where both sides kept 7 or more, Welch where both sides give means, deviations and
sample counts, else run-to-run noise calibrated on re-runs, else within-run spreads) with the
key's threshold as the minimum effect: a key is *slower* when the interval of its ratio lies
above 1 and its latency grew by more than the threshold, *faster* when the interval lies below
1 and it shrank by more than ``t / (1 + t)`` (the same step seen from the other side). The
threshold is the session's minimum effect (``verdict_settings``, 10% by default) unless the
file or ``-t`` sets one. Thresholds come from a TOML file: a global one and rules per kernel,
GPU (key or family), pass and metric, the first matching rule winning. A source that gives no
spread (and has no calibrated re-runs) can never pass the verdict rule, so a rule (or the file)
may say ``no_spread = "percent"``: such keys are judged by their change alone, and the output
says which keys were.

A key whose candidate run was acknowledged (``kidata ack``) is not a regression; the counts say
how many were left out. The outcome is an exit code (0 none slower, 1 slower, 2 bad usage, 3
nothing comparable) and a Markdown summary for a pull request (:meth:`GateResult.markdown`).
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from kidata.core import engine
from kidata.errors import UsageError
from kidata.query import analysis
from kidata.query.analysis import check_threshold, min_effect, pairs

if TYPE_CHECKING:
    from kidata.query.session import Queryable

NO_SPREAD = ("skip", "percent")
RULE_KEYS = ("kernel", "gpu", "pass", "metric", "threshold", "no_spread")
METRICS = ("latency",)  # what compare pairs today
GATE_COLUMNS = ("kernel", "pass", "workload", "gpu", "implementation", "variant", "baseline_us",
                "candidate_us", "speedup", "change", "verdict", "threshold", "basis", "outcome",
                "baseline_run_id", "candidate_run_id")
# How many regressions the Markdown summary shows before the folded full list.
WORST = 10
# Kernel-passes from which the summary gives an interval (as speedup_summary over kernels).
MIN_INTERVAL = 3


@dataclass(frozen=True)
class Rule:
    """A ``[[rule]]`` of a thresholds file: where it applies (None: anywhere) and what it
    sets (None: the file's global value)."""

    kernel: str | None = None
    gpu: str | None = None  # a GPU key or family
    pass_: str | None = None
    metric: str | None = None
    threshold: float | None = None
    no_spread: str | None = None

    def describe(self) -> str:
        where = [f"{k}={v}" for k, v in (("kernel", self.kernel), ("gpu", self.gpu),
                                          ("pass", self.pass_), ("metric", self.metric)) if v]
        return ", ".join(where) or "every key"


@dataclass(frozen=True)
class Thresholds:
    """What a key must change by to count: the global threshold and ``no_spread`` mode, and
    the rules that override them (first match)."""

    threshold: float | None = None  # None: the session's minimum effect (verdict_settings)
    no_spread: str = "skip"
    rules: tuple[Rule, ...] = ()
    source: str | None = None  # the file they came from

    def describe(self) -> str:
        text = ("threshold: the minimum effect" if self.threshold is None
                else f"threshold {self.threshold:.1%}")
        if self.no_spread == "percent":
            text += ", keys without a spread judged by their change alone"
        if self.rules:
            text += f", {len(self.rules)} rule{'s' * (len(self.rules) != 1)}"
        return text + (f" ({self.source})" if self.source else "")


def load_thresholds(path: str | Path | None, threshold: float | None = None) -> Thresholds:
    """The thresholds of a TOML file (None: the defaults), ``threshold`` (the command line's
    ``-t``) replacing its global one. Errors name the file and the field::

        threshold = 0.05          # a fraction of the baseline: 5%
        no_spread = "skip"        # or "percent": keys without a spread judged by change alone

        [[rule]]                  # the first rule that matches a key sets its values
        kernel = "rms_norm"       # any of kernel, gpu (key or family), pass, metric
        gpu = "h100"
        threshold = 0.10
        no_spread = "percent"
    """
    if threshold is not None:
        check_threshold(threshold)
    if path is None:
        return Thresholds(None if threshold is None else float(threshold))
    file = str(path)
    try:
        data = tomllib.loads(Path(file).read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{file}: cannot read the thresholds: {exc}") from None
    unknown = sorted(set(data) - {"threshold", "no_spread", "rule"})
    if unknown:
        raise UsageError(f"{file}: unknown key(s) {', '.join(unknown)}; expected threshold, "
                         "no_spread and [[rule]] entries")
    glob_threshold = (_fraction(data["threshold"], f"{file}, field threshold")
                      if "threshold" in data else None)
    no_spread = _mode(data.get("no_spread", "skip"), f"{file}, field no_spread")
    raw_rules = data.get("rule", [])
    if not isinstance(raw_rules, list) or not all(isinstance(r, dict) for r in raw_rules):
        raise UsageError(f"{file}, field rule: expected [[rule]] entries")
    rules = []
    for i, raw in enumerate(raw_rules):
        where = f"{file}, field rule[{i}]"
        for key, value in raw.items():
            if key not in RULE_KEYS:
                raise UsageError(f"{where}.{key}: unknown key; a rule has "
                                 f"{', '.join(RULE_KEYS)}")
            if key in ("kernel", "gpu", "pass", "metric") and (
                    not isinstance(value, str) or not value.strip()):
                raise UsageError(f"{where}.{key}: expected a name, got {value!r}")
        if raw.get("metric") is not None and raw["metric"] not in METRICS:
            raise UsageError(f"{where}.metric: the gate compares {', '.join(METRICS)}; got "
                             f"{raw['metric']!r}")
        if "threshold" not in raw and "no_spread" not in raw:
            raise UsageError(f"{where}: a rule sets threshold, no_spread or both")
        rules.append(Rule(
            kernel=raw.get("kernel"), gpu=raw.get("gpu"), pass_=raw.get("pass"),
            metric=raw.get("metric"),
            threshold=(_fraction(raw["threshold"], f"{where}.threshold")
                       if "threshold" in raw else None),
            no_spread=_mode(raw["no_spread"], f"{where}.no_spread")
            if "no_spread" in raw else None))
    return Thresholds(float(threshold) if threshold is not None else glob_threshold,
                      no_spread, tuple(rules), file)


def _fraction(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or value < 0:
        raise UsageError(f"{where}: expected a fraction >= 0 (0.05 = 5%), got {value!r}")
    return float(value)


def _mode(value: object, where: str) -> str:
    if value not in NO_SPREAD:
        raise UsageError(f"{where}: expected {' or '.join(map(repr, NO_SPREAD))}, got {value!r}")
    return str(value)


@dataclass
class GateResult:
    """What :func:`gate` found: ``rows`` (one per shared key, :data:`GATE_COLUMNS`; a relation
    over the judged rows held in memory, so reading it judges nothing again and it outlives
    the session), the counts, the geometric mean speedup over kernel-passes with its 95%
    interval, and the sides as given."""

    rows: duckdb.DuckDBPyRelation
    baseline: str
    candidate: str
    thresholds: Thresholds
    shared: int = 0
    slower: int = 0
    faster: int = 0
    unchanged: int = 0
    no_verdict: int = 0
    acknowledged: int = 0
    shifted: int = 0  # slower, but with their session (sessions=True): not failing
    by_percent: int = 0  # keys judged by their change alone (no spread)
    kernels: int = 0
    geomean_speedup: float | None = None
    interval: tuple[float, float] | None = None
    start_point: str | None = None  # the baseline used instead, when the baseline had nothing
    table: list[tuple] = field(default_factory=list)  # the rows, fetched once

    @property
    def exit_code(self) -> int:
        """0: nothing slower; 1: a key slower; 3: nothing comparable."""
        return 3 if self.shared == 0 else 1 if self.slower else 0

    def headline(self) -> str:
        text = (f"{self.slower:,} slower, {self.faster:,} faster, {self.unchanged:,} unchanged, "
                f"{self.no_verdict:,} without a verdict")
        if self.acknowledged:
            text += f" ({self.acknowledged:,} acknowledged slower left out)"
        if self.shifted:
            text += f" ({self.shifted:,} slower with their session left out)"
        return text

    def summary_line(self) -> str:
        """The one line a terminal gets (stderr)."""
        line = f"{self.shared:,} shared keys: {self.headline()}; {self.thresholds.describe()}"
        if self.by_percent:
            line += f"; {self.by_percent:,} judged by their change alone (no spread)"
        if self.geomean_speedup is not None:
            line += (f"; geomean speedup over {self.kernels:,} kernel-passes "
                     f"{self.geomean_speedup:.4g}x{self._interval_text()}")
        if self.start_point:
            line += f"; baseline from the start point {self.start_point!r}"
        return line

    def _interval_text(self) -> str:
        if self.interval is None:
            return ""
        return f" (95% interval {self.interval[0]:.4g}-{self.interval[1]:.4g})"

    def markdown(self, report_url: str | None = None) -> str:
        """The summary for a pull request (a GitHub step summary or a bot's comment): the
        headline, the sides and thresholds, the worst regressions first, the full list folded,
        and a link to the report."""
        from kidata.query.output import markdown_table

        verdict = ("❌ slower" if self.slower else "✅ nothing slower") if self.shared else \
            "⚠️ nothing comparable"
        lines = [f"## kidata gate: {verdict}", "",
                 f"**{self.headline()}** over {self.shared:,} shared keys.", "",
                 f"- Baseline `{self.start_point or self.baseline}`"
                 + (f" (the start point: `{self.baseline}` had no results)"
                    if self.start_point else "")
                 + f", candidate `{self.candidate}`; {self.thresholds.describe()}."]
        if self.geomean_speedup is not None:
            lines.append(f"- Geometric mean speedup over {self.kernels:,} kernel-passes: "
                         f"**{self.geomean_speedup:.3g}×**{self._interval_text()}; above 1, the "
                         "candidate is faster.")
        if self.by_percent:
            lines.append(f"- {self.by_percent:,} keys have no measured spread and were judged "
                         "by their change alone (`no_spread = \"percent\"`).")
        if report_url:
            lines.append(f"- [The report]({report_url})")
        shown = ("kernel", "pass", "workload", "gpu", "implementation", "baseline_us",
                 "candidate_us", "speedup", "change", "basis")
        index = [GATE_COLUMNS.index(c) for c in shown]
        slower = sorted((r for r in self.table if r[GATE_COLUMNS.index("outcome")] == "slower"),
                        key=lambda r: -r[GATE_COLUMNS.index("change")])
        if slower:
            def readable(row: tuple) -> list:
                cells = [row[i] for i in index]
                cells[7] = f"{cells[7]:.3g}×"  # speedup
                cells[8] = f"{cells[8]:+.1%}"  # change
                return cells
            lines += ["", f"### Slower, worst first ({len(slower):,})", "",
                      markdown_table(shown, [readable(r) for r in slower[:WORST]])
                      .rstrip("\n")]
            if len(slower) > WORST:
                lines.append(f"\n…and {len(slower) - WORST:,} more in the full list below.")
        if self.table:
            lines += ["", f"<details><summary>All {len(self.table):,} keys</summary>", "",
                      markdown_table(GATE_COLUMNS[:14], [r[:14] for r in self.table])
                      .rstrip("\n"), "", "</details>"]
        return "\n".join(lines) + "\n"


def gate(db: Queryable, baseline: str, candidate: str, thresholds: Thresholds | None = None,
         start_point: str | None = None, sessions: bool = False) -> GateResult:
    """Judge ``candidate`` against ``baseline`` (selectors, as ``compare`` takes them); when
    the baseline shares no key with the candidate and ``start_point`` is given (a new branch's
    first run: ``branch=main``), against the start point. With ``sessions``, the two sides of
    one implementation are read as two sessions (compare's session model, docs/ci.md): a key
    slower with its session, its code's part within its threshold, is 'session shift'."""
    thresholds = thresholds or Thresholds()
    # No global threshold given: the session's minimum effect, stated in the output.
    thresholds = replace(thresholds, threshold=min_effect(db, thresholds.threshold))
    used = None
    result = _judge(db, baseline, candidate, thresholds, sessions)
    if result.shared == 0 and start_point:
        result = _judge(db, start_point, candidate, thresholds, sessions)
        used = start_point
    result.baseline, result.start_point = baseline, used
    return result


def _judge(db: Queryable, baseline: str, candidate: str, th: Thresholds,
           sessions: bool = False) -> GateResult:
    # The pairs (with the session model) are worked out first, in their own statements
    # (analysis.pairs and analysis.sessions: in one with the rest, they ran out of memory at
    # 10M runs), and judged in memory beside the few rows of gpus and acknowledgements they
    # need.
    local = engine.connect()  # over the rows in memory, with kidata's settings
    found = pairs(db, baseline, candidate, local)
    if sessions:
        found = analysis.sessions(db, found, th.threshold, local)
    params: dict = {"th": th.threshold, "ns": th.no_spread}
    shift = ""
    if sessions:
        # The session's effect must exceed the global threshold; the code's part is held to
        # the key's own.
        shift = ("WHEN (basis = 'percent' OR placement = 'above') AND change > threshold "
                 "AND session_change IS NOT NULL AND code_change <= threshold "
                 "THEN 'session shift'")
    threshold_case, mode_case = ["CASE"], ["CASE"]
    for i, rule in enumerate(th.rules):
        conds = []
        for name, column, value in (("k", "p.kernel", rule.kernel), ("p", "p.pass",
                                                                      rule.pass_)):
            if value is not None:
                params[f"r{i}{name}"] = value
                conds.append(f"{column} = $r{i}{name}")
        if rule.gpu is not None:
            params[f"r{i}g"] = rule.gpu
            conds.append(f"(p.gpu = $r{i}g OR g.family = $r{i}g)")
        cond = " AND ".join(conds) or "TRUE"
        if rule.threshold is not None:
            params[f"r{i}t"] = rule.threshold
            threshold_case.append(f"WHEN {cond} THEN $r{i}t")
        if rule.no_spread is not None:
            params[f"r{i}n"] = rule.no_spread
            mode_case.append(f"WHEN {cond} THEN $r{i}n")
    threshold_sql = " ".join(threshold_case + ["ELSE $th END"]) if threshold_case[1:] else "$th"
    mode_sql = " ".join(mode_case + ["ELSE $ns END"]) if mode_case[1:] else "$ns"
    judged = f"""
        WITH ruled AS (
            SELECT p.*, {threshold_sql} AS threshold, {mode_sql} AS no_spread,
                -- kidata ack: the pairs' candidates acknowledged (registered below)
                p.candidate_run_id IN (SELECT run_id FROM acknowledgements) AS acknowledged
            FROM pairs p LEFT JOIN gpus g ON g.gpu = p.gpu
        ),
        based AS (
            -- The verdict rule with the key's threshold as the minimum effect: where the
            -- interval of the ratio lies (placement, by the noise model of speedups), and the
            -- change against the threshold.
            SELECT *, CASE
                WHEN placement <> 'none' THEN noise_basis
                WHEN no_spread = 'percent' AND verdict <> 'different centers' THEN 'percent'
                ELSE 'none' END AS basis
            FROM ruled
        ),
        judged AS (
            SELECT *, CASE
                WHEN basis = 'none' THEN 'no verdict'
                {shift}
                WHEN (basis = 'percent' OR placement = 'above') AND change > threshold
                    THEN CASE WHEN acknowledged THEN 'acknowledged' ELSE 'slower' END
                WHEN (basis = 'percent' OR placement = 'below')
                    AND -change > threshold / (1 + threshold) THEN 'faster'
                ELSE 'unchanged' END AS outcome
            FROM based
        )
    """
    columns = ", ".join(GATE_COLUMNS)
    # Judged once, and held as compare holds its rows: the counts, the exit code, the summary
    # and the rows printed or exported all come from these. A relation over the query would
    # run it again (as long: the noise model reads every run) each time it was read.
    local.register("pairs", found)
    local.register("gpus", db.sql("SELECT gpu, family FROM gpus").to_arrow_table())
    local.register("acknowledgements", db.sql(
        "SELECT run_id FROM acknowledgements WHERE run_id IN (SELECT UNNEST($ids))",
        params={"ids": found.column("candidate_run_id").to_pylist()}).to_arrow_table())
    local.register("judged", local.sql(f"{judged} SELECT {columns} FROM judged",
                                       params=params).to_arrow_table())
    rows = local.sql("SELECT * FROM judged "
                     "ORDER BY kernel, pass, workload, gpu, implementation, variant")
    table = rows.fetchall()
    out = GateResult(rows, baseline, candidate, th, table=table)
    at = GATE_COLUMNS.index
    outcomes = [r[at("outcome")] for r in table]
    out.shared = len(table)
    out.slower, out.faster = outcomes.count("slower"), outcomes.count("faster")
    out.unchanged, out.no_verdict = outcomes.count("unchanged"), outcomes.count("no verdict")
    out.acknowledged = outcomes.count("acknowledged")
    out.shifted = outcomes.count("session shift")
    out.by_percent = sum(1 for r in table if r[at("basis")] == "percent")
    # The geometric mean speedup weighing each (kernel, pass) the same, with a t-interval
    # over them (the student_t view), as speedup_summary does over kernels.
    logs: dict[tuple, list[float]] = {}
    for r in table:
        logs.setdefault((r[at("kernel")], r[at("pass")]), []).append(math.log(r[at("speedup")]))
    means = [sum(v) / len(v) for v in logs.values()]
    out.kernels = len(means)
    if means:
        mean = sum(means) / len(means)
        out.geomean_speedup = math.exp(mean)
        if len(means) >= MIN_INTERVAL:  # below, t is 12.7 (df 1): the interval says nothing
            sd = math.sqrt(sum((m - mean) ** 2 for m in means) / (len(means) - 1))
            t = db.rows("SELECT t FROM student_t WHERE $df BETWEEN df_from AND df_to",
                        {"df": len(means) - 1})[0][0]
            half = float(t) * sd / math.sqrt(len(means))
            out.interval = (math.exp(mean - half), math.exp(mean + half))
    return out
