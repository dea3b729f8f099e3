"""Declarative mappings: read any CSV or JSON results table without code
(``kidata load --mapping my.toml results.csv``).

A mapping (TOML) says where each field of the model comes from; every record then goes through
the same builder as the built-in formats (:mod:`kidata.ingest.readers.builder`): the same checks,
rejects, identity and digests. The built-in ``flashinfer-csv``, ``triton-perf-report`` and
``dynamo-csv`` formats are themselves mappings (``kidata/data/mappings/*.toml``). The language
is documented, with examples, in ``docs/formats.md``; in short:

- a *value* is a template (``"{median_time}"``: a column, or a dotted path into a JSON record;
  ``{file.stem}``, ``{file.name}``; in an unpivoted table ``{column}`` and ``{value}``; plain
  text is a constant) or a table ``{template = "...", regex = "...", map = {...},
  default = "..."}``; a template naming an empty or missing field gives nothing, so ``--set``
  can supply it;
- ``[input]`` ``format`` (``csv`` or ``json``), ``records`` (JSON: dotted path to the list),
  ``unpivot`` (``true``: every column after the x columns is one record),
  ``x_columns`` (a list, or ``"leading-whole-numbers"``);
- ``[harness]`` ``source``, ``name``, ``repository``, ``family``, ``notes``, ``timer``;
- ``[run]`` ``kernel``, ``implementation``, ``pass``, ``variant``, ``gpu``, ``unit``,
  ``observed_at``, ``version``, ``timer``, ``identity`` (a list of values);
- ``[workload]`` ``parameters`` (a list of fields, or ``"rest"``: every non-empty field no
  other entry uses), ``exclude`` (fields never parameters);
- ``[statistics]`` statistic = value (``median``, ``mean``, ``stddev``, ``p20``, ...), and
  ``samples``; ``[[extra]]`` ``unit``, ``statistic``, ``value`` (throughput, bandwidth...);
  ``[[published]]`` ``quantity``, ``value``, ``definition``, ``resolution``;
  ``[labels]`` name = value;
- ``[[fail]]`` ``field``, ``at_most`` (a number), ``message``: a record whose field is a number
  at or below ``at_most`` (or is not a finite number) is rejected with the message;
- ``[sidecar]`` ``path`` (a template, e.g. ``"{file.dir}/{file.stem}.txt"``) and
  key = regex: context read from a file beside the input (group 1 of the first match).
"""

from __future__ import annotations

import math
import re
import tomllib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path, PurePath
from typing import Any

from kidata.errors import RecordError, UsageError
from kidata.ingest.dtypes import is_dtype_parameter, normalise_dtype
from kidata.ingest.readers.base import Item, open_binary
from kidata.ingest.readers.builder import STATISTICS, Builder, Harness, Measured, typed
from kidata.ingest.readers.tabular import by_name, csv_rows, raw_json, read_json

TEMPLATE_RE = re.compile(r"\{([^{}]+)\}")
RUN_KEYS = ("kernel", "implementation", "pass", "variant", "gpu", "unit", "observed_at",
            "version", "timer", "identity")
SECTIONS = {
    "input": ("format", "records", "unpivot", "x_columns"),
    "harness": ("source", "name", "repository", "family", "notes", "timer"),
    "run": RUN_KEYS,
    "workload": ("parameters", "exclude"),
    "statistics": (*STATISTICS, "samples"),
    "labels": None,  # any name
    "extra": ("unit", "statistic", "value"),
    "published": ("quantity", "value", "definition", "resolution"),
    "fail": ("field", "at_most", "message"),
    "sidecar": None,  # path and any context key
}


class MappingError(UsageError):
    """A mapping file that cannot be used: names the file and the key."""

    def __init__(self, path: str, key: str, message: str):
        super().__init__(f"mapping {path}, key {key}: {message}")


@dataclass
class Mapping:
    path: str
    input: dict[str, Any]
    harness: Harness
    run: dict[str, Any]
    workload: dict[str, Any]
    statistics: dict[str, Any]
    labels: dict[str, Any] = field(default_factory=dict)
    extra: list[dict[str, Any]] = field(default_factory=list)
    published: list[dict[str, Any]] = field(default_factory=list)
    fail: list[dict[str, Any]] = field(default_factory=list)
    sidecar: dict[str, str] = field(default_factory=dict)


def builtin_path(name: str) -> str:
    return str(resources.files("kidata.data").joinpath("mappings", f"{name}.toml"))


@cache
def _load_cached(path: str) -> Mapping:
    return _parse(path)


def load_mapping(path: str) -> Mapping:
    """Read and check a mapping file; a bad one raises :class:`MappingError`."""
    return _load_cached(str(path))


def _parse(path: str) -> Mapping:
    try:
        data = tomllib.loads(Path(path).read_text("utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read mapping {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"mapping {path} is not valid TOML: {exc}") from None
    for section, value in data.items():
        if section not in SECTIONS:
            raise MappingError(path, section, f"unknown section; expected one of "
                                              f"{', '.join(SECTIONS)}")
        allowed = SECTIONS[section]
        tables = value if isinstance(value, list) else [value]
        for table in tables:
            if not isinstance(table, dict):
                raise MappingError(path, section, "expected a table")
            for key in table:
                if allowed is not None and key not in allowed:
                    raise MappingError(path, f"{section}.{key}",
                                       f"unknown key; expected one of {', '.join(allowed)}")
    inp = dict(data.get("input", {}))
    inp.setdefault("format", "csv")
    if inp["format"] not in ("csv", "json"):
        raise MappingError(path, "input.format", f"expected 'csv' or 'json', got "
                                                 f"{inp['format']!r}")
    h = data.get("harness", {})
    for key in ("source", "name"):
        if not isinstance(h.get(key), str) or not h[key].strip():
            raise MappingError(path, f"harness.{key}", "required: a non-empty string")
    harness = Harness(source=h["source"], name=h["name"], repository=h.get("repository", ""),
                      family=h.get("family", h["source"]), notes=h.get("notes", ""),
                      timer=h.get("timer"))
    stats = data.get("statistics", {})
    if not stats:
        raise MappingError(path, "statistics", "required: at least one statistic, e.g. "
                                               "median = \"{median_ms}\"")
    for section in ("extra", "published", "fail"):
        if not isinstance(data.get(section, []), list):
            raise MappingError(path, section, f"expected [[{section}]] tables")
    return Mapping(path=path, input=inp, harness=harness, run=data.get("run", {}),
                   workload=data.get("workload", {}), statistics=stats,
                   labels=data.get("labels", {}), extra=data.get("extra", []),
                   published=data.get("published", []), fail=data.get("fail", []),
                   sidecar=data.get("sidecar", {}))


# -- values ------------------------------------------------------------------------------------


def _lookup(record: dict[str, Any], name: str) -> Any:
    if name in record:
        return record[name]
    cur: Any = record
    for part in name.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def render(spec: Any, record: dict[str, Any], used: set[str] | None = None) -> Any:
    """The value a mapping entry gives for one record, or None when a field it names is empty.

    A template that is exactly one ``{field}`` gives the field's value as it is (a JSON number
    stays a number); otherwise the text with every field substituted."""
    if isinstance(spec, dict):
        value = render(spec.get("template"), record, used)
        if value is not None and spec.get("regex"):
            m = re.search(spec["regex"], str(value))
            value = (m.group(1) if m.groups() else m.group(0)) if m else None
        if value is not None and "map" in spec:
            value = spec["map"].get(str(value), spec.get("default"))
        return spec.get("default") if value is None else value
    if not isinstance(spec, str):
        return spec
    names = TEMPLATE_RE.findall(spec)
    if used is not None:
        used.update(names)
    if len(names) == 1 and spec == "{" + names[0] + "}":
        value = _lookup(record, names[0])
        return None if value is None or value == "" else value
    out = spec
    for name in names:
        value = _lookup(record, name)
        if value is None or value == "":
            return None
        out = out.replace("{" + name + "}", str(value))
    return out


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


# -- reading -----------------------------------------------------------------------------------


def _sidecar(mapping: Mapping, context: dict[str, Any]) -> dict[str, str]:
    spec = dict(mapping.sidecar)
    template = spec.pop("path", None)
    if not template or context["file.name"] == "<stdin>":
        return {}
    path = render(template, context)
    if path is None:
        return {}
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read(4 * 1024 * 1024)
    except OSError:
        return {}
    out = {}
    for key, pattern in spec.items():
        if m := re.search(pattern, text):
            out[key] = m.group(1) if m.groups() else m.group(0)
    return out


def _whole(text: Any) -> bool:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return False
    return math.isfinite(value) and value.is_integer()


def read_with_mapping(mapping_path: str, path: str, settings: dict[str, str] | None = None
                      ) -> Iterator[Item | RecordError]:
    """Read one file by a mapping; yields items and rejects like any reader."""
    mapping = load_mapping(mapping_path)
    name = "<stdin>" if path == "-" else path
    try:
        stream = open_binary(path)
    except OSError as exc:
        yield RecordError(name, "file", None, f"cannot open: {exc.strerror or exc}")
        return
    with stream:
        yield from read_stream(mapping, stream, name, settings)


def read_stream(mapping: Mapping, stream, file: str, settings: dict[str, str] | None = None
                ) -> Iterator[Item | RecordError]:
    pure = PurePath(file)
    context = {"file.name": pure.name, "file.stem": pure.name.split(".")[0]
               if file != "<stdin>" else "", "file.dir": str(pure.parent)}
    settings = dict(settings or {})
    x_setting = settings.pop("x_columns", None)
    builder = Builder(mapping.harness, file, {**_sidecar(mapping, context), **settings})
    rows: list = list(_records(mapping, stream, file))  # in file order, rejects included
    if mapping.input.get("unpivot"):
        # The x columns are decided from every row: rejects first, then the cells.
        yield from (r for r in rows if isinstance(r, RecordError))
        good = [r for r in rows if not isinstance(r, RecordError)]
        if not good:
            return
        expanded = _unpivot(mapping, good, file, x_setting)
        if isinstance(expanded, RecordError):
            yield expanded
            return
        rows = expanded
    seen: Counter = Counter()
    for row in rows:
        if isinstance(row, RecordError):
            yield row
            continue
        position, record, raw = row
        record = {**context, **record}
        try:
            measured = _measured(mapping, record, file, position)
            # The case as the run's identity will name it: dtype spellings normalised as
            # the builder does (``bf16`` and ``BF16`` are one case, so a second is an
            # occurrence, not a silent duplicate).
            key = (measured.implementation, repr(sorted(
                (k, normalise_dtype(v) if isinstance(v, str) and is_dtype_parameter(k) else v)
                for k, v in measured.workload.items())))
            seen[key] += 1
            if seen[key] > 1:  # the same case again in one file: another measurement of it
                measured.identity.append(f"occurrence{seen[key]}")
            yield builder.item(measured, position, raw)
        except RecordError as err:
            yield err


def _records(mapping: Mapping, stream, file: str
             ) -> Iterator[tuple[str, dict[str, Any], str | None] | RecordError]:
    if mapping.input["format"] == "csv":
        for row in csv_rows(stream, file):
            if isinstance(row, RecordError):
                yield row
                continue
            position, header, values, raw = row
            try:
                yield position, by_name(header, values, file, position), raw
            except RecordError as err:
                yield err
        return
    data = read_json(stream, file)
    if isinstance(data, RecordError):
        yield data
        return
    where = mapping.input.get("records") or ""
    items = _lookup(data, where) if where else data
    if isinstance(items, dict):
        items = [items]
    if not isinstance(items, list):
        yield RecordError(file, "document", where or None,
                          f"expected a list of records at {where or 'the top level'}")
        return
    for i, rec in enumerate(items):
        if not isinstance(rec, dict):
            yield RecordError(file, f"index {i}", None, "expected an object")
            continue
        yield f"index {i}", rec, raw_json(rec)


def _unpivot(mapping: Mapping, rows: list, file: str, x_setting: str | None
             ) -> list | RecordError:
    header = list(rows[0][1])
    spec = mapping.input.get("x_columns", "leading-whole-numbers")
    if x_setting:
        spec = [c.strip() for c in x_setting.split(",") if c.strip()]
    if isinstance(spec, list):
        missing = [c for c in spec if c not in header]
        if missing:
            return RecordError(file, "header", missing[0],
                               f"x column {missing[0]!r} is not a column of the file "
                               f"({', '.join(header)})")
        x_columns = spec
    else:
        x_columns = []
        for column in header[:-1]:
            if all(_whole(r[1].get(column)) for r in rows):
                x_columns.append(column)
            else:
                break
    others = [c for c in header if c not in x_columns]
    if not x_columns or not others:
        return RecordError(file, "header", None,
                           "cannot tell the x columns from the value columns: expected leading "
                           "columns of whole numbers then one column per provider; name them "
                           "with --set x_columns=M,N,K")
    out = []
    for position, record, raw in rows:
        base = {c: record.get(c, "") for c in x_columns}
        base["x_columns"] = x_columns
        for column in others:
            out.append((f"{position}, column {column}",
                        {**base, "column": column, "value": record.get(column, "")}, raw))
    return out


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _measured(mapping: Mapping, record: dict[str, Any], file: str, position: str) -> Measured:
    used: set[str] = set()
    for rule in mapping.fail:
        value = render(f"{{{rule.get('field')}}}", record, used)
        number = _number(value)
        if value is not None and (number is None or number <= rule.get("at_most", 0)):
            raise RecordError(file, position, rule.get("field"),
                              f"{value!r}: {rule.get('message', 'a failure value')}")
    run = {key: render(mapping.run.get(key), record, used) for key in RUN_KEYS
           if key != "identity"}
    identity = [_text(render(v, record, used)) or "" for v in mapping.run.get("identity", [])]
    stats = {k: render(v, record, used) for k, v in mapping.statistics.items()
             if k != "samples"}
    samples = render(mapping.statistics.get("samples"), record, used)
    extra = [(e.get("unit", ""), e.get("statistic", "median"), render(e.get("value"), record,
                                                                      used))
             for e in mapping.extra]
    published = []
    for p in mapping.published:
        value = _number(render(p.get("value"), record, used))
        if value is not None and value > 0:
            claim = {"quantity": p.get("quantity"), "value": value}
            for key in ("definition", "resolution"):
                if key in p:
                    claim[key] = p[key]
            published.append(claim)
    # Labels describe; they do not take a field away from the workload's parameters.
    labels = {k: _text(render(v, record)) for k, v in mapping.labels.items()}
    # Workload parameters: the listed fields, or every non-empty field nothing else used.
    spec = mapping.workload.get("parameters", [])
    exclude = set(mapping.workload.get("exclude", []))
    if spec == "rest":
        names = [k for k in record if k not in used and k not in exclude and "." not in k
                 and k not in ("column", "value", "x_columns")]
    elif spec == "x_columns":
        names = list(record.get("x_columns", []))
    else:
        names = [n for n in spec if n not in exclude]
    params = {}
    for name in names:
        value = _lookup(record, name)
        if value is None or value == "" or isinstance(value, dict | list):
            continue
        # A JSON path names the parameter by its last part: case.rows -> rows.
        params[name.rsplit(".", 1)[-1]] = typed(value) if isinstance(value, str) else value
    samples_count = None
    if samples is not None:
        count = _number(samples)
        if count is None or count < 0 or not float(count).is_integer():
            raise RecordError(file, position, "samples", f"expected a whole number, got "
                                                         f"{samples!r}")
        samples_count = int(count)
    native = {"row": {k: v for k, v in record.items()
                      if "." not in k and k != "x_columns" and v not in ("", None)}}
    return Measured(
        kernel=_text(run["kernel"]), implementation=_text(run["implementation"]),
        pass_=_text(run["pass"]), variant=_text(run["variant"]), gpu=_text(run["gpu"]),
        unit=_text(run["unit"]), observed_at=_text(run["observed_at"]),
        version=_text(run["version"]), timer=_text(run["timer"]), workload=params,
        stats={k: (str(v) if isinstance(v, str) else v) for k, v in stats.items()},
        # Every identity value in its place, empty ones too: dropping them made ["a", ""]
        # and ["", "a"] one run.
        samples=samples_count, extra=extra, identity=identity,
        native=native, published=published,
        labels={k: v for k, v in labels.items() if v},
    )
