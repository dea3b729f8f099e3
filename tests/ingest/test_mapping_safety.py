"""Mapping files are checked whole, against a schema, before any input is read (issue 27,
item 9): a value of the wrong type anywhere is a usage error (exit 2) saying
``mapping FILE, key K: …``, never a traceback; and a mapping's regular expressions cannot
backtrack for ever.

The fuzzer mutates every key of the built-in mappings (``kidata/data/mappings/*.toml``) and of
custom ones (``tests/data/field/``) to values of other types. Which mutations are wrong is
decided here, from the mapping language as docs/formats.md describes it, not from kidata's code:
a number only where a number is documented (``fail.at_most``, ``published.resolution``), a
boolean only for ``input.unpivot``, free text where a template, a name or a field is expected,
and never an empty string, an array of numbers or an unknown key.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA

import kidata
from kidata import Warehouse
from kidata.errors import UsageError
from kidata.ingest.readers import read_file

KIDATA = Path(sys.executable).parent / "kidata"
FIELD = DATA / "field"
BUILT_IN = sorted((Path(kidata.__file__).parent / "data" / "mappings").glob("*.toml"))
CUSTOM = [FIELD / "team_mapping.toml", FIELD / "team_json_mapping.toml",
          FIELD / "every_key_mapping.toml"]
MAPPINGS = [*BUILT_IN, *CUSTOM]

MUTATIONS: dict[str, Any] = {
    "an integer": 7, "an array of a number": [1], "a table with an unknown key": {"x": 1},
    "a boolean": True, "a bad regular expression": "(", "an empty string": "",
}

Path_ = tuple[str | int, ...]


def _toml(value: Any) -> str:
    """A value as TOML writes it inline."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) \
            + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def _dump(data: dict[str, Any]) -> str:
    """A mapping as a TOML file: its sections as tables, [[…]] for arrays of tables (a
    section mutated into something else first, before any table header)."""
    head, out = [], []
    for section, body in data.items():
        if isinstance(body, list) and body and all(isinstance(t, dict) for t in body):
            for table in body:
                out.append(f"[[{section}]]")
                out += [f"{json.dumps(k)} = {_toml(v)}" for k, v in table.items()]
        elif isinstance(body, dict):
            out.append(f"[{section}]")
            out += [f"{json.dumps(k)} = {_toml(v)}" for k, v in body.items()]
        else:
            head.append(f"{json.dumps(section)} = {_toml(body)}")
    return "\n".join(head + out) + "\n"


def _keys(value: Any, path: Path_ = ()) -> Iterator[Path_]:
    """Every key of a mapping, tables and arrays as well as what is in them."""
    if path:
        yield path
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _keys(inner, (*path, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            yield from _keys(inner, (*path, i))


def _mutated(data: Any, path: Path_, new: Any) -> Any:
    if not path:
        return new
    out = dict(data) if isinstance(data, dict) else list(data)
    out[path[0]] = _mutated(data[path[0]], path[1:], new)
    return out


def _name(path: Path_) -> str:
    """A key as the error names it: ``fail[0].at_most``, ``run.timer.map.True``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            bare = re.fullmatch(r"[A-Za-z0-9_-]+", part)
            out += ("." if out else "") + (part if bare else json.dumps(part))
    return out


# Where a value is given (a template, or a {template, regex, map, default} table); * is any
# key or index.
VALUES = [("run", "*"), ("run", "identity", "*"), ("statistics", "*"), ("labels", "*"),
          ("extra", "*", "value"), ("published", "*", "value")]
TEXT = [("input", "records"), ("harness", "*"), *VALUES,
        ("workload", "parameters", "*"), ("workload", "exclude", "*"), ("input", "x_columns", "*"),
        *((*v, "template") for v in VALUES), *((*v, "default") for v in VALUES),
        *((*v, "map", "*") for v in VALUES),
        ("published", "*", "quantity"), ("published", "*", "definition"),
        ("fail", "*", "field"), ("fail", "*", "message"), ("sidecar", "path")]
NUMBERS = [("fail", "*", "at_most"), ("published", "*", "resolution")]
BOOLEANS = [("input", "unpivot")]


def _matches(path: Path_, patterns: list[tuple]) -> bool:
    if path == ("run", "identity"):  # an array, not a value
        return False
    return any(len(p) == len(path) and all(a == "*" or a == b for a, b in zip(p, path,
                                                                               strict=True))
               for p in patterns)


def _is_wrong(path: Path_, mutation: str) -> bool:
    """Whether the documented mapping language refuses ``mutation`` at ``path``."""
    if mutation == "a bad regular expression":  # free text where text is expected
        return not _matches(path, TEXT)
    if mutation == "an integer":
        return not _matches(path, NUMBERS)
    if mutation == "a boolean":
        return not _matches(path, BOOLEANS)
    return True  # an empty string, an array of a number, an unknown key: wrong everywhere


def _cases() -> Iterator[tuple[Path, Path_, str]]:
    for mapping in MAPPINGS:
        data = tomllib.loads(mapping.read_text())
        for path in _keys(data):
            for mutation in MUTATIONS:
                yield mapping, path, mutation


def _write(tmp_path: Path, mapping: Path, path: Path_, mutation: str, n: int) -> Path:
    data = tomllib.loads(mapping.read_text())
    # A new file per case: a mapping is read once per process and path.
    target = tmp_path / f"{n:04d}_{mapping.stem}.toml"
    target.write_text(_dump(_mutated(data, path, MUTATIONS[mutation])))
    return target


def _input_for(mapping: Path) -> str:
    return str(FIELD / ("team_results.json" if "json" in mapping.stem else "team_results.csv"))


def _names_the_key(message: str, target: Path, path: Path_) -> bool:
    return re.match(rf"mapping {re.escape(str(target))}, key {re.escape(_name(path))}[.\[:]",
                    message) is not None


def test_every_key_of_every_mapping_refuses_values_of_the_wrong_type(tmp_path):
    """Every key of the built-in and custom mappings set to an integer, an array, a table, a
    boolean, a bad regular expression or an empty string: where that is wrong, reading any
    file by the mapping raises a UsageError naming the file and the key, before the file is
    read; never another exception."""
    # The starting points, rewritten by the fuzzer's own TOML writer, are accepted (a bad
    # starting point would make every mutation of it look refused).
    for n, mapping in enumerate(MAPPINGS):
        target = tmp_path / f"start{n}_{mapping.stem}.toml"
        target.write_text(_dump(tomllib.loads(mapping.read_text())))
        assert tomllib.loads(target.read_text()) == tomllib.loads(mapping.read_text())
        list(read_file(_input_for(mapping), mapping=str(target), settings={"gpu": "B200"}))
    wrong = right = 0
    problems = []
    for n, (mapping, path, mutation) in enumerate(_cases()):
        target = _write(tmp_path, mapping, path, mutation, n)
        try:
            list(read_file(_input_for(mapping), mapping=str(target), settings={"gpu": "B200"}))
        except UsageError as exc:
            if not _is_wrong(path, mutation):
                problems.append(f"{_name(path)} = {mutation} in {mapping.name}: refused: {exc}")
            elif not _names_the_key(str(exc), target, path):
                problems.append(f"{_name(path)} = {mutation} in {mapping.name}: {exc}")
            wrong += 1
            continue
        except Exception as exc:  # noqa: BLE001 - any other exception is the failure
            problems.append(f"{_name(path)} = {mutation} in {mapping.name}: "
                            f"{type(exc).__name__}: {exc}")
            continue
        if _is_wrong(path, mutation):
            problems.append(f"{_name(path)} = {mutation} in {mapping.name}: accepted")
        right += 1
    assert not problems, f"{len(problems)} cases:\n" + "\n".join(problems[:40])
    # 213 keys in the six mappings (tables and arrays included), 6 mutations each; all but
    # the free text, numbers and booleans where they belong are wrong.
    assert wrong + right == 213 * 6
    assert wrong > 1000


@pytest.mark.slow
def test_every_key_through_the_library_load_is_a_usage_error(tmp_path):
    """The same through ``Warehouse.load`` (one wrong mutation per key, in turn): a
    UsageError naming the file and the key; nothing is loaded, nor a warehouse created."""
    wh = Warehouse(tmp_path / "wh")
    kinds = list(MUTATIONS)
    seen = 0
    for n, mapping in enumerate(MAPPINGS):
        for i, path in enumerate(_keys(tomllib.loads(mapping.read_text()))):
            turn = kinds[i % len(kinds):] + kinds[:i % len(kinds)]
            mutation = next(m for m in turn if _is_wrong(path, m))
            target = _write(tmp_path, mapping, path, mutation, n * 1000 + i)
            with pytest.raises(UsageError) as caught:
                wh.load([_input_for(mapping)], mapping=str(target))
            assert _names_the_key(str(caught.value), target, path), (mutation, caught.value)
            seen += 1
    assert seen == 213
    assert not wh.path.exists()  # refused before anything was written


TEAM = (FIELD / "team_mapping.toml").read_text()
# The cases of the issue, on tests/data/field/team_mapping.toml: (replace, with, message).
ISSUE_CASES = [
    ('kernel = "{op}"', 'kernel = { template = "{op}", regex = "(" }',
     "key run.kernel.regex: not a regular expression kidata can use: "),
    ('kernel = "{op}"', 'kernel = { template = "{op}", map = 3 }',
     "key run.kernel.map: expected a table of value = replacement (non-empty strings), got 3"),
    ('parameters = ["tokens", "hidden", "precision"]', "parameters = 5",
     'key workload.parameters: expected "rest", "x_columns" or an array of field names '
     "(non-empty strings), got 5"),
    ('parameters = ["tokens", "hidden", "precision"]',
     'parameters = ["tokens"]\nexclude = 5',
     "key workload.exclude: expected an array of field names (non-empty strings), got 5"),
    ("at_most = 0", 'at_most = "x"', 'key fail[0].at_most: expected a number, got "x"'),
    ('timer = "cuda_events"', "timer = [1]",
     "key harness.timer: expected a non-empty string, got [1]"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("old", "new", "message"), ISSUE_CASES,
                         ids=["regex", "map", "parameters", "exclude", "at_most", "timer"])
def test_the_issues_cases_are_usage_errors_of_the_installed_command(tmp_path, old, new,
                                                                     message):
    assert old in TEAM
    bad = tmp_path / "bad.toml"
    bad.write_text(TEAM.replace(old, new, 1))
    done = subprocess.run([str(KIDATA), "-w", str(tmp_path / "wh"), "load", "--mapping",
                           str(bad), str(FIELD / "team_results.csv")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith(f"Error: mapping {bad}, {message}"), done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert not (tmp_path / "wh").exists()  # refused before anything, the warehouse too


@pytest.mark.parametrize("pattern", [
    "(?=x)",     # look-ahead: needs backtracking
    "(a)\\\\1",  # a back-reference: likewise
    "a{2000}",   # past RE2's bound on a repetition
], ids=["look-ahead", "back-reference", "repetition"])
def test_regular_expressions_that_need_backtracking_are_refused(tmp_path, pattern):
    bad = tmp_path / "bad.toml"
    bad.write_text(TEAM.replace('kernel = "{op}"',
                                f'kernel = {{ template = "{{op}}", regex = "{pattern}" }}'))
    with pytest.raises(UsageError) as caught:
        list(read_file(str(FIELD / "team_results.csv"), mapping=str(bad)))
    assert str(caught.value).startswith(
        f"mapping {bad}, key run.kernel.regex: not a regular expression kidata can use: ")
    # The pattern as the file spells it (a TOML basic string and JSON escape alike).
    assert f'(in "{pattern}"); mappings use RE2 syntax' in str(caught.value)


@pytest.mark.slow
def test_a_catastrophic_regular_expression_ends(tmp_path):
    """``^(a+)+$`` on 40 a's and a b: Python's backtracking engine tries about 2^40 ways
    (0.2.7 never finished); RE2 answers in time linear in the text."""
    mapping = tmp_path / "redos.toml"
    mapping.write_text(TEAM.replace(
        'kernel = "{op}"', 'kernel = { template = "{op}", regex = "^(a+)+$", default = "none" }'))
    rows = (FIELD / "team_results.csv").read_text().splitlines()
    assert rows[1].startswith("rmsnorm,ours,4096,") and rows[2].startswith("rmsnorm,torch,")
    rows[1] = rows[1].replace("rmsnorm", "a" * 40 + "b", 1)  # no match: the default
    rows[2] = rows[2].replace("rmsnorm", "aaaa", 1)          # a match: group 1, "aaaa"
    csv = tmp_path / "redos.csv"
    csv.write_text("\n".join(rows) + "\n")
    wh = tmp_path / "wh"
    done = subprocess.run([str(KIDATA), "-w", str(wh), "load", "--mapping", str(mapping),
                           str(csv)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1  # row 3 is the file's -1, a failure
    assert "2 runs added" in done.stdout
    assert Warehouse(wh).sql("select implementation, kernel from runs order by 1"
                             ).fetchall() == [("ours", "none"), ("torch", "aaaa")]


@pytest.mark.slow
def test_a_mapping_that_is_a_fifo_is_refused_not_waited_for(tmp_path):
    fifo = tmp_path / "mapping.toml"
    os.mkfifo(fifo)
    done = subprocess.run([str(KIDATA), "-w", str(tmp_path / "wh"), "load", "--mapping",
                           str(fifo), str(FIELD / "team_results.csv")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == f"Error: cannot read mapping {fifo}: not a regular file: a FIFO " \
                          "(named pipe)\n"


def test_a_value_nested_too_deeply_is_a_usage_error(tmp_path):
    for depth in (100, 5000):
        bad = tmp_path / f"deep{depth}.toml"
        bad.write_text(TEAM.replace('median = "{p50_us}"',
                                    "median = " + "[" * depth + "]" * depth))
        with pytest.raises(UsageError) as caught:
            list(read_file(str(FIELD / "team_results.csv"), mapping=str(bad)))
        assert str(caught.value).startswith(f"mapping {bad}")
        assert "statistics.median" in str(caught.value) or "nested too deeply" \
            in str(caught.value)
