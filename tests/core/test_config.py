"""The one configuration object (kidata/core/config.py, issue 29 item 2): every variable
declared once, parsed and validated with errors naming the variable, re-read when the
environment changes, and no module reading the environment on its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kidata.core import config
from kidata.core.config import VARIABLES, Config, ConfigError

KIDATA = Path(__file__).resolve().parents[2] / "kidata"


def test_the_defaults_are_those_of_an_empty_environment():
    assert Config.from_environ({}) == Config()
    assert Config.from_environ({v.name: "" for v in VARIABLES}) == Config()  # empty: unset


def test_values_are_parsed_to_their_types():
    got = Config.from_environ({
        "KIDATA_WAREHOUSE": "/data/wh", "KIDATA_WORKERS": "3", "KIDATA_SLOW_PATH": "1",
        "KIDATA_MAX_REJECTS": "0", "KIDATA_COMPACT_AT": "-4", "KIDATA_COMMIT_MEMORY": "1GiB",
        "KIDATA_ROLES": "roles.toml", "KIDATA_DEBUG": "yes", "KIDATA_FAULT": "after-journal",
        "KIDATA_FAULT_ACTION": "kill", "ARROW_DEFAULT_MEMORY_POOL": "jemalloc",
        "KIDATA_QUERY_MEMORY": "500MB"})
    assert got.warehouse == Path("/data/wh") and got.workers == 3 and got.slow_path
    assert got.max_rejects == 1 and got.compact_at == 0  # at least 1; 0 or more
    assert got.commit_memory == "1GiB" and got.commit_write_memory == "128MB"
    assert got.query_memory == "500MB" and Config().query_memory is None
    assert Config.from_environ({"KIDATA_QUERY_MEMORY": "None"}).query_memory == "none"
    assert got.roles == Path("roles.toml") and got.debug
    assert (got.fault, got.fault_action, got.arrow_memory_pool) == (
        "after-journal", "kill", "jemalloc")
    assert not Config.from_environ({"KIDATA_SLOW_PATH": "0", "KIDATA_DEBUG": "0"}).slow_path


@pytest.mark.parametrize(("name", "raw", "message"), [
    ("KIDATA_WORKERS", "two", "KIDATA_WORKERS must be a whole number, not 'two'"),
    ("KIDATA_MAX_REJECTS", "1e3", "KIDATA_MAX_REJECTS must be a whole number, not '1e3'"),
    ("KIDATA_COMPACT_AT", "x", "KIDATA_COMPACT_AT must be a whole number, not 'x'"),
    ("KIDATA_COMMIT_MEMORY", "1GB'; DROP", "KIDATA_COMMIT_MEMORY must be a size DuckDB reads"),
    ("KIDATA_QUERY_MEMORY", "lots", "KIDATA_QUERY_MEMORY must be a size DuckDB reads"),
    ("KIDATA_FAULT_ACTION", "explode",
     "KIDATA_FAULT_ACTION must be one of raise, enospc, kill, not 'explode'"),
])
def test_a_bad_value_is_refused_naming_the_variable(name, raw, message):
    with pytest.raises(ConfigError, match=re.escape(message)) as caught:
        Config.from_environ({name: raw})
    assert caught.value.variable == name


def test_current_follows_the_environment_and_parses_once_per_change(monkeypatch):
    monkeypatch.setenv("KIDATA_WORKERS", "2")
    first = config.current()
    assert first.workers == 2
    assert config.current() is first  # unchanged: the same object, not parsed again
    monkeypatch.setenv("KIDATA_WORKERS", "0")
    assert config.current().workers == 0
    monkeypatch.delenv("KIDATA_WORKERS")
    assert config.current().workers is None


def test_a_bad_value_fails_the_command_that_reads_it(monkeypatch, tmp_path):
    from kidata.cli import run

    monkeypatch.setenv("KIDATA_WAREHOUSE", str(tmp_path / "wh"))
    monkeypatch.setenv("KIDATA_MAX_REJECTS", "many")
    assert run(["sql", "select 1"]) == 2  # a usage error, not a traceback


def test_every_variable_is_declared_once_and_read_only_through_the_config():
    names = [v.name for v in VARIABLES]
    assert len(set(names)) == len(names)
    assert all(v.description and v.type and v.default_text for v in VARIABLES)
    readers = []
    for path in sorted(KIDATA.rglob("*.py")):
        text = path.read_text("utf-8")
        if path.name == "config.py" and path.parent.name == "core":
            continue
        if re.search(r"os\.environ(\.get|\[)|os\.getenv", text):
            readers.append(str(path.relative_to(KIDATA.parent)))
        for name in re.findall(r"\bKIDATA_[A-Z_]+", text):
            assert name in names, f"{path.name} names {name}, which kidata/core/config.py " \
                                  "does not declare"
    assert readers == [], "read the environment through kidata.core.config"
