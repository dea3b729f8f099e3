"""kidata's configuration: every environment variable kidata reads, declared once here
(:data:`VARIABLES`: name, type, default, one line of meaning) and parsed into one typed,
frozen :class:`Config`. No other module reads ``os.environ`` for a setting; ``docs/
configuration.md`` is generated from the declarations (:func:`kidata.docs.configuration_markdown`).

When it is read: :func:`current` gives the configuration of the process's environment as it is
now. An operation reads it once where it starts (a load's staging and its commit, a command's
warehouse, a fault point) and uses that object throughout. The values are parsed once and kept;
they are parsed again only when one of the declared variables changed since (a test's
``monkeypatch.setenv``, a script that sets a variable between two loads), which costs one
lookup per variable. Worker processes and subprocesses inherit the environment, so they read
the same values (fault points included).

A value that cannot be parsed is refused with :class:`ConfigError`, naming the variable, what
it must be and what it was. An empty value is the same as an unset one.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from kidata._imports import POOL_VARIABLE
from kidata.errors import UsageError


class ConfigError(UsageError):
    """An environment variable kidata reads holds a value it cannot use."""

    def __init__(self, name: str, expected: str, raw: str):
        super().__init__(f"{name} must be {expected}, not {raw!r}")
        self.variable = name


def _whole(name: str, raw: str, least: int) -> int:
    try:
        return max(least, int(raw))
    except ValueError:
        raise ConfigError(name, "a whole number", raw) from None


def _count(name: str, raw: str) -> int:
    return _whole(name, raw, 0)


def _positive(name: str, raw: str) -> int:
    return _whole(name, raw, 1)


def _flag(name: str, raw: str) -> bool:
    return raw != "0"


def _text(name: str, raw: str) -> str:
    return raw


def _path(name: str, raw: str) -> Path:
    return Path(raw)


_SIZE = re.compile(r"\s*\d+(\.\d+)?\s*[A-Za-z]*\s*")


def _size(name: str, raw: str) -> str:
    if not _SIZE.fullmatch(raw):
        raise ConfigError(name, "a size DuckDB reads, such as 192MB or 1GiB", raw)
    return raw


def _size_or_none(name: str, raw: str) -> str:
    if raw.strip().lower() == "none":
        return "none"
    if not _SIZE.fullmatch(raw):
        raise ConfigError(name, "a size DuckDB reads, such as 300MB or 1GiB, or none", raw)
    return raw


def _fraction(name: str, raw: str) -> float:
    try:
        number = float(raw)
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number < 0:
        raise ConfigError(name, "a fraction >= 0, such as 0.05 for 5%", raw)
    return number


_FAULT_ACTIONS = ("raise", "enospc", "kill")


def _fault_action(name: str, raw: str) -> str:
    if raw not in _FAULT_ACTIONS:
        raise ConfigError(name, "one of " + ", ".join(_FAULT_ACTIONS), raw)
    return raw


@dataclass(frozen=True)
class Variable:
    """One environment variable: its name, the :class:`Config` field it sets, its type as
    the docs state it, its default (None: unset means off, or as ``default`` says), what it
    does, and the function that parses a non-empty value (raising :class:`ConfigError`)."""

    name: str
    field: str
    type: str
    default: Any
    default_text: str
    description: str
    parse: Callable[[str, str], Any]


VARIABLES: tuple[Variable, ...] = (
    Variable("KIDATA_WAREHOUSE", "warehouse", "path", Path("warehouse"), "`./warehouse`",
             "The warehouse folder when a command has no `--warehouse` and "
             "`Warehouse()` no path.", _path),
    Variable("KIDATA_WORKERS", "workers", "whole number", None,
             "one per core, up to 4; none on one core",
             "Worker processes a large load stages with (`0`: none, the loading process "
             "does everything). `kidata report` draws a large page's latency figures with "
             "one helper process unless this is `0` (or is unset on a single core).", _count),
    Variable("KIDATA_SLOW_PATH", "slow_path", "flag", False, "off",
             "Any value but `0` turns the fast path for common JSON Lines bundles off: every "
             "record takes the general path.", _flag),
    Variable("KIDATA_MAX_REJECTS", "max_rejects", "whole number", 100_000, "100000",
             "Rejects one load keeps in the `rejects` table (at least 1); the rest are counted.",
             _positive),
    Variable("KIDATA_COMPACT_AT", "compact_at", "whole number", 32, "32",
             "Small files per table from which a load merges them after its commit "
             "(`0`: never).", _count),
    Variable("KIDATA_CONTEXTS_AT", "contexts_at", "whole number", 20_000, "20000",
             "Runs from which a load stores the series steps it adds or changes "
             "(`step_context`, `step_edits`), which queries then read while every load did; "
             "in a smaller warehouse queries compute them, which costs less than storing "
             "them (`0`: always store).", _count),
    Variable("KIDATA_COMMIT_MEMORY", "commit_memory", "size", "192MB", "192MB",
             "DuckDB's memory limit while a load's commit plans its dedupe, and while a "
             "writer stores, rebuilds or checks the series steps (beyond it, DuckDB spills to "
             "disk: into the load's staging folder, else a folder of its own under the "
             "system's temporary directory, never the working folder).", _size),
    Variable("KIDATA_COMMIT_WRITE_MEMORY", "commit_write_memory", "size", "128MB", "128MB",
             "DuckDB's memory limit while a load's commit writes its tables and derives "
             "`latest_runs`.", _size),
    Variable("KIDATA_QUERY_MEMORY", "query_memory", "size or `none`", None,
             "300MB, or 75MB per core when that is more",
             "DuckDB's memory limit for reading: every query, view, report, export and "
             "`kidata check` session; beyond it DuckDB spills to a temporary folder (under "
             "the system's temporary directory, removed when the session closes; a killed "
             "process's by the next kidata process), slower but "
             "bounded. `none`: DuckDB's own limit (80% of RAM). Since the series steps are "
             "stored, the default costs the reading commands no time at 1M runs and keeps "
             "them near 500 MB (docs/benchmarks.md, Runs AR and AT). Where the steps are "
             "computed (a `--since` window, or loads that did not store them) a session "
             "under a limit works them out a few kernels at a time: at 1M runs, a window "
             "of ~500k takes `kidata regressions` 10.3 s and 404 MB (`none`: 6.0 s and "
             "2.1 GB; Run AU). A query that cannot spill what it "
             "needs fails with DuckDB's out-of-memory error naming this variable: raise it.",
             _size_or_none),
    Variable("KIDATA_ROLES", "roles", "path", None, "none",
             "A TOML file of implementation roles whose entries replace the packaged "
             "`roles.toml`'s of the same kernel and role.", _path),
    Variable("KIDATA_GPUS", "gpus", "path", None, "none",
             "A TOML file of GPUs, shaped as the packaged `gpus.toml`, added to the catalog: "
             "cards kidata does not know, with their names and peaks (an entry with a packaged "
             "key replaces it).", _path),
    Variable("KIDATA_MIN_EFFECT", "min_effect", "fraction", None,
             "0.10 (the `verdict_settings` view)",
             "The verdict rule's minimum effect for every reading command and library session "
             "that does not set its own (`--min-effect`, `Warehouse(min_effect=...)`): a "
             "fraction, `0.05` = 5%.", _fraction),
    Variable("KIDATA_DEBUG", "debug", "flag", False, "off",
             "Any value but `0`: as `--debug`, errors keep their traceback (and a worker's).",
             _flag),
    Variable("KIDATA_FAULT", "fault", "text", None, "none",
             "Tests only: the fault point (`before-journal`, `after-move:runs`, …) where "
             "kidata is interrupted.", _text),
    Variable("KIDATA_FAULT_ACTION", "fault_action", "text", "raise", "raise",
             "Tests only: what happens at the fault point: `raise`, `enospc` or `kill`.",
             _fault_action),
    Variable(POOL_VARIABLE, "arrow_memory_pool", "text", None,
             "`system` in kidata's CLI and workers; Arrow's own for library users",
             "Arrow's default memory pool (read by Arrow when first imported); kidata's CLI "
             "and its worker processes set `system` unless it is set.", _text),
)


@dataclass(frozen=True)
class Config:
    """The values of :data:`VARIABLES`, parsed (field names are :attr:`Variable.field`)."""

    warehouse: Path = Path("warehouse")
    workers: int | None = None
    slow_path: bool = False
    max_rejects: int = 100_000
    compact_at: int = 32
    contexts_at: int = 20_000
    commit_memory: str = "192MB"
    commit_write_memory: str = "128MB"
    query_memory: str | None = None
    roles: Path | None = None
    gpus: Path | None = None
    min_effect: float | None = None
    debug: bool = False
    fault: str | None = None
    fault_action: str = "raise"
    arrow_memory_pool: str | None = None

    @classmethod
    def from_environ(cls, env: Mapping[str, str] | None = None) -> Config:
        """The configuration ``env`` (by default ``os.environ``) sets; raises
        :class:`ConfigError` for the first variable whose value cannot be used."""
        env = os.environ if env is None else env
        return cls(**{v.field: value(v.name, env) for v in VARIABLES})


_BY_NAME = {v.name: v for v in VARIABLES}
if sorted(_BY_NAME[n].field for n in _BY_NAME) != sorted(f.name for f in fields(Config)):
    raise AssertionError("every Config field is declared once in VARIABLES")


def turn_on(name: str) -> None:
    """Set the declared flag ``name`` in this process's environment, so the library and the
    processes it starts see it: how ``kidata --debug`` makes a reader's failure raise, as
    ``KIDATA_DEBUG=1`` does (the CLI's entry point, never a library call)."""
    if _BY_NAME[name].type != "flag":
        raise ValueError(f"{name} is not a flag")
    os.environ[name] = "1"


def value(name: str, env: Mapping[str, str] | None = None) -> Any:
    """One declared variable's value in ``env`` (by default ``os.environ``): its default when
    unset or empty. For the places that must not fail on another variable's bad value (the
    CLI's error handler asks only for ``KIDATA_DEBUG``)."""
    variable = _BY_NAME[name]
    raw = (os.environ if env is None else env).get(name)
    return variable.default if not raw else variable.parse(name, raw)


_NAMES = tuple(_BY_NAME)
_cached: tuple[tuple[str | None, ...], Config] | None = None


def current() -> Config:
    """The configuration of this process's environment now: parsed again only when a declared
    variable changed since the last call (see the module docstring)."""
    global _cached
    get = os.environ.get
    raw = tuple(get(n) for n in _NAMES)
    cached = _cached
    if cached is not None and cached[0] == raw:
        return cached[1]
    config = Config.from_environ(dict(zip(_NAMES, raw, strict=True)))
    _cached = (raw, config)
    return config


# The CI systems whose variables say which commit, branch and run a load measured, read by
# `kidata load` (loads.commit, loads.branch, loads.ci_run): when the first variable is "true",
# the others name the facts (the first of a list that is set), a run URL built from parts.
CI_SYSTEMS: tuple[tuple[str, str, dict[str, tuple[str, ...]]], ...] = (
    ("GitHub Actions", "GITHUB_ACTIONS", {
        "commit": ("GITHUB_SHA",),
        "branch": ("GITHUB_HEAD_REF", "GITHUB_REF_NAME"),
        "ci_run": ("{GITHUB_SERVER_URL}/{GITHUB_REPOSITORY}/actions/runs/{GITHUB_RUN_ID}",)}),
    ("GitLab CI", "GITLAB_CI", {
        "commit": ("CI_COMMIT_SHA",),
        "branch": ("CI_MERGE_REQUEST_SOURCE_BRANCH_NAME", "CI_COMMIT_REF_NAME"),
        "ci_run": ("CI_PIPELINE_URL", "CI_JOB_URL")}),
    ("Buildkite", "BUILDKITE", {
        "commit": ("BUILDKITE_COMMIT",),
        "branch": ("BUILDKITE_BRANCH",),
        "ci_run": ("BUILDKITE_BUILD_URL",)}),
)


def ci_facts(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``commit``, ``branch`` and ``ci_run`` as the CI running this process says them (those
    it says; none outside CI). A PR's branch is its head branch, not the merge ref."""
    env = os.environ if env is None else env
    for _, flag, facts in CI_SYSTEMS:
        if env.get(flag, "").lower() != "true":
            continue
        out = {}
        for fact, sources in facts.items():
            for source in sources:
                if source.startswith("{"):
                    names = re.findall(r"\{(\w+)\}", source)
                    value = source.format(**{n: env.get(n, "") for n in names}) \
                        if all(env.get(n) for n in names) else ""
                else:
                    value = env.get(source, "")
                if value.strip():
                    out[fact] = value.strip()
                    break
        return out
    return {}


# Who a CI run acts for, by CI system (the acknowledging user of `kidata ack` in CI).
CI_ACTORS = {"GITHUB_ACTIONS": "GITHUB_ACTOR", "GITLAB_CI": "GITLAB_USER_LOGIN",
             "BUILDKITE": "BUILDKITE_BUILD_CREATOR"}


def ci_actor(env: Mapping[str, str] | None = None) -> str | None:
    """The user a CI run acts for (None outside CI, or when the CI does not say)."""
    env = os.environ if env is None else env
    for flag, variable in CI_ACTORS.items():
        if env.get(flag, "").lower() == "true" and env.get(variable, "").strip():
            return env[variable].strip()
    return None


def github_step_summary(env: Mapping[str, str] | None = None) -> str | None:
    """The file GitHub Actions shows as the job's summary (``$GITHUB_STEP_SUMMARY``), None
    outside it: where ``kidata gate`` appends its Markdown."""
    env = os.environ if env is None else env
    return env.get("GITHUB_STEP_SUMMARY") or None
