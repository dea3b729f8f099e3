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
  key = regex (a ``--set`` key): context read from a file beside the input (group 1 of the
  first match). Only a regular file is read, at most its first 16 MiB
  (:func:`~kidata.ingest.readers.base.read_regular_head`); one that is not (a FIFO, a device)
  or cannot be read is a reject naming it. In the path, ``{file.stem}`` is the name without
  its last suffix (``.gz`` first), then, if no such file exists, the name cut at its first dot.

A mapping is checked whole, against the schema below (:class:`MappingFile`, with msgspec),
before any input is read: anything wrong is a :class:`MappingError` (a usage error, exit 2)
naming the file, the key and what was expected. Regular expressions are RE2's (google-re2):
matching takes time linear in the text, so no pattern can backtrack for ever
(``^(a+)+$``); look-around and back-references, which need backtracking, are refused.
"""

from __future__ import annotations

import copy
import json
import math
import re
import tomllib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import PurePath
from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec

from kidata.errors import RecordError, UsageError
from kidata.ingest.dtypes import is_dtype_parameter, normalise_dtype
from kidata.ingest.readers.base import (
    MAX_RECORD_BYTES,
    Item,
    NotRegularFile,
    open_binary,
    read_regular_head,
)
from kidata.ingest.readers.builder import (
    SETTINGS,
    STATISTICS,
    Builder,
    Harness,
    Measured,
    typed,
)
from kidata.ingest.readers.tabular import by_name, csv_rows, raw_json, read_json
from kidata.ingest.units import UNIT_SPELLINGS, unit_of

if TYPE_CHECKING:
    import msgspec.inspect as mi

TEMPLATE_RE = re.compile(r"\{([^{}]+)\}")
RUN_KEYS = ("kernel", "implementation", "pass", "variant", "gpu", "unit", "observed_at",
            "version", "timer", "identity")
# What a template knows of the file it reads (a sidecar's path knows only these).
FILE_FIELDS = ("file.dir", "file.name", "file.stem")
# What the builder requires of every record; a sidecar may be where it comes from.
REQUIRED = ("kernel", "implementation", "gpu", "unit")
# At most this much of a sidecar is read (the record limit: one sidecar is one record's worth).
SIDECAR_BYTES = MAX_RECORD_BYTES


class MappingError(UsageError):
    """A mapping file that cannot be used: names the file and the key."""

    def __init__(self, path: str, key: str, message: str):
        super().__init__(f"mapping {path}, key {key}: {message}")


# -- the schema ---------------------------------------------------------------------------------
# Every key a mapping may have, with its type; each description is the "expected ..." of the
# message a wrong value gets. msgspec checks a whole file against it (:func:`_check_schema`);
# what a type cannot say (regular expressions, templates, units) is checked after
# (:func:`_check_values`).

Text = Annotated[str, msgspec.Meta(min_length=1, description="a non-empty string")]
FieldName = Annotated[str, msgspec.Meta(
    min_length=1, description="a field name (a column, or a dotted path into a JSON record)")]
Regex = Annotated[str, msgspec.Meta(
    min_length=1, description="a regular expression (RE2 syntax), as a non-empty string")]
Template = Annotated[str, msgspec.Meta(
    min_length=1, description='a template: a non-empty string, {field} standing for a '
                              'field\'s value (e.g. "{median_ms}")')]
Replacements = Annotated[dict[str, Text], msgspec.Meta(
    description="a table of value = replacement (non-empty strings)")]


class ValueTable(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A value given by a table: ``{template, regex, map, default}``."""

    template: Template | None = None
    regex: Regex | None = None
    map: Replacements | None = None
    default: Text | None = None


Value = Annotated[Template | ValueTable, msgspec.Meta(
    description='a template (a non-empty string such as "{column}") or a table {template, '
                'regex, map, default}')]
Values = Annotated[list[Value], msgspec.Meta(
    description='an array of templates (non-empty strings such as "{column}") or '
                '{template, regex, map, default} tables')]
FieldNames = Annotated[list[FieldName], msgspec.Meta(
    description="an array of field names (non-empty strings)")]
XColumns = Annotated[
    Annotated[list[FieldName], msgspec.Meta(min_length=1)] | Literal["leading-whole-numbers"],
    msgspec.Meta(description='"leading-whole-numbers" or a non-empty array of column names')]
Parameters = Annotated[list[FieldName] | Literal["rest", "x_columns"], msgspec.Meta(
    description='"rest", "x_columns" or an array of field names (non-empty strings)')]
Number = Annotated[float, msgspec.Meta(description="a number")]
Positive = Annotated[float, msgspec.Meta(gt=0, description="a number above 0")]
Flag = Annotated[bool, msgspec.Meta(description="true or false")]
SidecarEntry = Annotated[str, msgspec.Meta(
    min_length=1, description="a non-empty string (path: a template naming the file; a --set "
                              "key: a regular expression)")]
Statistic = Annotated[Literal[STATISTICS], msgspec.Meta(  # type: ignore[valid-type]
    description=f"one of {', '.join(STATISTICS)}")]


class InputSection(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    format: Annotated[Literal["csv", "json"], msgspec.Meta(description='"csv" or "json"')] \
        = "csv"
    records: FieldName | None = None
    unpivot: Flag = False
    x_columns: XColumns = "leading-whole-numbers"


class HarnessSection(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    source: Text
    name: Text
    repository: Text | None = None
    family: Text | None = None
    notes: Text | None = None
    timer: Text | None = None


class RunSection(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    kernel: Value | None = None
    implementation: Value | None = None
    pass_: Value | None = msgspec.field(default=None, name="pass")
    variant: Value | None = None
    gpu: Value | None = None
    unit: Value | None = None
    observed_at: Value | None = None
    version: Value | None = None
    timer: Value | None = None
    identity: Values = msgspec.field(default_factory=list)


class WorkloadSection(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    parameters: Parameters = msgspec.field(default_factory=list)
    exclude: FieldNames = msgspec.field(default_factory=list)


StatisticsSection = msgspec.defstruct(
    "StatisticsSection", [(name, Value | None, None) for name in (*STATISTICS, "samples")],
    kw_only=True, forbid_unknown_fields=True)


class ExtraTable(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    unit: Annotated[str, msgspec.Meta(
        min_length=1, description="a unit (TFLOPS, GB/s, TB/s, ...)")]
    statistic: Statistic = "median"
    value: Value


class PublishedTable(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    quantity: Text
    value: Value
    definition: Text | None = None
    resolution: Positive | None = None


class FailTable(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    field: FieldName
    at_most: Number = 0
    message: Text | None = None


class MappingFile(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A mapping file's schema (docs/formats.md, "Any other table: TOML mappings")."""

    input: InputSection = msgspec.field(default_factory=InputSection)
    harness: HarnessSection
    run: RunSection = msgspec.field(default_factory=RunSection)
    workload: WorkloadSection = msgspec.field(default_factory=WorkloadSection)
    statistics: StatisticsSection  # type: ignore[valid-type]
    labels: Annotated[dict[str, Value], msgspec.Meta(
        description="a table of name = value")] = msgspec.field(default_factory=dict)
    extra: Annotated[list[ExtraTable], msgspec.Meta(
        description="[[extra]] tables (unit, statistic, value)")] \
        = msgspec.field(default_factory=list)
    published: Annotated[list[PublishedTable], msgspec.Meta(
        description="[[published]] tables (quantity, value, definition, resolution)")] \
        = msgspec.field(default_factory=list)
    fail: Annotated[list[FailTable], msgspec.Meta(
        description="[[fail]] tables (field, at_most, message)")] \
        = msgspec.field(default_factory=list)
    sidecar: Annotated[dict[str, SidecarEntry], msgspec.Meta(
        description="a table: path = a template, then --set key = a regular expression")] \
        = msgspec.field(default_factory=dict)


@cache
def schema() -> mi.StructType:
    """:class:`MappingFile` as msgspec describes it (made when a message needs it)."""
    import msgspec.inspect as mi

    return mi.type_info(MappingFile)  # type: ignore[return-value]


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
        # A regular file only, and bounded, as every file kidata reads.
        raw, more = read_regular_head(path, MAX_RECORD_BYTES)
    except OSError as exc:
        raise UsageError(f"cannot read mapping {path}: {exc.strerror or exc}") from None
    if more:
        raise UsageError(f"mapping {path} is larger than {MAX_RECORD_BYTES >> 20} MiB")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"mapping {path} is not valid TOML: {exc}") from None
    except RecursionError:
        raise UsageError(f"mapping {path}: arrays or tables nested too deeply") from None
    _check_schema(path, data)
    _check_values(path, data)
    inp = dict(data.get("input", {}))
    inp.setdefault("format", "csv")
    h = data["harness"]
    harness = Harness(source=h["source"], name=h["name"], repository=h.get("repository", ""),
                      family=h.get("family", h["source"]), notes=h.get("notes", ""),
                      timer=h.get("timer"))
    return Mapping(path=path, input=inp, harness=harness, run=data.get("run", {}),
                   workload=data.get("workload", {}), statistics=data["statistics"],
                   labels=data.get("labels", {}), extra=data.get("extra", []),
                   published=data.get("published", []), fail=data.get("fail", []),
                   sidecar=data.get("sidecar", {}))


# -- checking a mapping -------------------------------------------------------------------------

Segment = str | int  # a table's key or an array's index; `...` stands for a key msgspec omits
_SEGMENT_RE = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")


def _check_schema(path: str, data: dict[str, Any]) -> None:
    """Check ``data`` (a mapping file's TOML) against :class:`MappingFile`: the first thing
    wrong, in the file's order, is a :class:`MappingError` naming its key."""
    try:
        msgspec.convert(data, MappingFile)
    except RecursionError:  # nothing in the schema nests: a value nested that deep is wrong
        raise UsageError(f"mapping {path}: arrays or tables nested too deeply") from None
    except msgspec.ValidationError as exc:
        what, where, data = _locate(data, str(exc))
        raise _schema_error(path, data, what, where) from None


def _parse_error(text: str) -> tuple[str, list[Any]]:
    """msgspec's message split into what is wrong and where (``$.fail[0].at_most``)."""
    what, sep, where = text.partition(" - at `")
    where = where.rstrip("`") if sep else "$"
    return what, [m.group(1) if m.group(1) is not None else
                  (... if m.group(2) == "..." else int(m.group(2)))
                  for m in _SEGMENT_RE.finditer(where[1:])]


def _locate(data: dict[str, Any], text: str) -> tuple[str, list[Segment], dict[str, Any]]:
    """What is wrong, its full path, and a copy of ``data`` holding the value there. msgspec
    does not name a table's key in its path (``$.labels[...]``); it is found by checking the
    table's entries one at a time: the first that fails there, in the file's order, is the
    one msgspec stopped at."""
    what, where = _parse_error(text)
    while ... in where:
        i = where.index(...)
        table = _get(data, where[:i])
        for key, value in table.items() if isinstance(table, dict) else ():
            trial = _replaced(data, where[:i], {key: value})
            try:
                msgspec.convert(trial, MappingFile)
            except msgspec.ValidationError as exc:
                found_what, found = _parse_error(str(exc))
                if found[:i] == where[:i] and len(found) > i:
                    what, where, data = found_what, found, trial
                    where[i] = key
                    break
        else:
            where[i] = "?"
    return what, where, data


def _get(data: Any, where: list[Segment]) -> Any:
    for segment in where:
        try:
            data = data[segment]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def _replaced(data: Any, where: list[Segment], new: Any) -> Any:
    """``data`` with the value at ``where`` replaced by ``new`` (copied along the path)."""
    if not where:
        return new
    out = copy.copy(data)
    out[where[0]] = _replaced(data[where[0]], where[1:], new)
    return out


def key_name(where: list[Segment]) -> str:
    """A key path as a mapping's reader writes it: ``fail[0].at_most``, ``labels."a b"``."""
    out = ""
    for segment in where:
        if isinstance(segment, int):
            out += f"[{segment}]"
        else:
            bare = re.fullmatch(r"[A-Za-z0-9_-]+", segment)
            out += ("." if out else "") + (segment if bare else json.dumps(segment))
    return out


def _type_at(where: list[Segment]) -> mi.Type | None:
    """The schema's type of the key at ``where`` (None for a key it does not have)."""
    t: mi.Type | None = schema()
    for segment in where:
        t = _step(t, segment)
        if t is None:
            return None
    return t


def _concrete(t: mi.Type) -> list[mi.Type]:
    """The types a (possibly annotated, possibly union) type allows, None left out."""
    import msgspec.inspect as mi

    if isinstance(t, mi.Metadata):
        return _concrete(t.type)
    if isinstance(t, mi.UnionType):
        return [c for member in t.types for c in _concrete(member)]
    return [] if isinstance(t, mi.NoneType) else [t]


def _step(t: mi.Type | None, segment: Segment) -> mi.Type | None:
    import msgspec.inspect as mi

    for c in _concrete(t) if t is not None else ():
        if isinstance(segment, int) and isinstance(c, mi.ListType):
            return c.item_type
        if isinstance(segment, str) and isinstance(c, mi.DictType):
            return c.value_type
        if isinstance(segment, str) and isinstance(c, mi.StructType):
            return next((f.type for f in c.fields if f.encode_name == segment), None)
    return None


def _expected(t: mi.Type | None) -> str:
    """What a key of type ``t`` takes, in words."""
    import msgspec.inspect as mi

    if t is None:
        return "nothing (an unknown key)"
    if isinstance(t, mi.Metadata):
        return (t.extra_json_schema or {}).get("description") or _expected(t.type)
    if isinstance(t, mi.UnionType):
        return " or ".join(_expected(m) for m in t.types if not isinstance(m, mi.NoneType))
    if isinstance(t, mi.StructType):
        return "a table of " + ", ".join(f.encode_name for f in t.fields)
    if isinstance(t, mi.LiteralType):
        return " or ".join(json.dumps(v) for v in t.values)
    return type(t).__name__.removesuffix("Type").lower()


def shown(value: Any) -> str:
    """A value as the message about it shows it (TOML's words and spellings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "an empty string" if not value else json.dumps(value if len(value) <= 60
                                                              else value[:57] + "...")
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, dict | list):
        if not value:
            return f"an empty {'table' if isinstance(value, dict) else 'array'}"
        text = _literal(value)
        return text if len(text) <= 60 else f"{text[:57]}..."
    return f"a {type(value).__name__}"  # a TOML date or time


def _literal(value: Any, depth: int = 0) -> str:
    """``value`` as TOML writes it inline (``[1, "a"]``, ``{ x = 1 }``), its first levels."""
    if isinstance(value, dict | list) and depth > 20:
        return "..."
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{key_name([k])} = {_literal(v, depth + 1)}"
                                for k, v in list(value.items())[:10]) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v, depth + 1) for v in value[:10]) + "]"
    if isinstance(value, str):
        return json.dumps(value)
    return shown(value)


def _schema_error(path: str, data: dict[str, Any], what: str, where: list[Segment]
                  ) -> MappingError:
    import msgspec.inspect as mi

    if m := re.match(r"Object contains unknown field `(.*)`", what):
        keys = [c for c in _concrete(_type_at(where)) if isinstance(c, mi.StructType)]
        names = ", ".join(f.encode_name for f in keys[0].fields) if keys else ""
        return MappingError(path, key_name([*where, m.group(1)]),
                            f"unknown {'section' if not where else 'key'}; expected one of "
                            f"{names}")
    if m := re.match(r"Object missing required field `(.*)`", what):
        where = [*where, m.group(1)]
        if where == ["statistics"]:
            return MappingError(path, "statistics", _NO_STATISTIC)
        return MappingError(path, key_name(where), f"required: {_expected(_type_at(where))}")
    return MappingError(path, key_name(where) or "(the whole file)",
                        f"expected {_expected(_type_at(where))}, got "
                        f"{shown(_get(data, where))}")


_NO_STATISTIC = 'required: at least one statistic, e.g. median = "{median_ms}"'


def _check_values(path: str, data: dict[str, Any]) -> None:
    """What the schema's types cannot say: templates, regular expressions, units, sidecar
    keys, at least one statistic. ``data`` has passed :func:`_check_schema`."""
    if not data["statistics"]:
        raise MappingError(path, "statistics", _NO_STATISTIC)
    _check_value_tables(path, data)
    for i, rule in enumerate(data.get("fail", [])):
        if not math.isfinite(rule.get("at_most", 0)):
            raise MappingError(path, f"fail[{i}].at_most", f"expected a finite number, got "
                                                           f"{rule['at_most']}")
    for i, extra in enumerate(data.get("extra", [])):
        if unit_of(extra["unit"]) is None:
            raise MappingError(path, f"extra[{i}].unit",
                               f"unknown unit {shown(extra['unit'])}; expected one of "
                               f"{', '.join(sorted(UNIT_SPELLINGS))}")
    sidecar = data.get("sidecar")
    if sidecar:
        _check_sidecar(path, sidecar)


def _check_value_tables(path: str, data: dict[str, Any]) -> None:
    """Every value of ``run``, ``statistics``, ``labels``, ``extra`` and ``published``: a
    template, or a table with a template (or a default) and a regular expression that
    compiles; a label has a name."""
    run = data.get("run", {})
    values: list[tuple[list[Segment], Any]] = [
        *((["run", k], v) for k, v in run.items() if k != "identity"),
        *((["run", "identity", i], v) for i, v in enumerate(run.get("identity", []))),
        *((["statistics", k], v) for k, v in data["statistics"].items()),
        *((["labels", k], v) for k, v in data.get("labels", {}).items()),
        *(([section, i, "value"], t["value"]) for section in ("extra", "published")
          for i, t in enumerate(data.get(section, []))),
    ]
    for where, value in values:
        if where[0] == "labels" and not where[1]:
            raise MappingError(path, key_name(where), "a label needs a name")
        if isinstance(value, str):
            _check_template(path, where, value)
            continue
        if "template" not in value and "default" not in value:
            raise MappingError(path, key_name(where), "a value table needs a template (or a "
                                                      "default)")
        if "template" in value:
            _check_template(path, [*where, "template"], value["template"])
        if "regex" in value:
            _check_regex(path, [*where, "regex"], value["regex"])


def _check_sidecar(path: str, sidecar: dict[str, Any]) -> None:
    """A ``[sidecar]`` table: a ``path`` template of the file's own fields only, and for each
    other key, a ``--set`` key, a regular expression."""
    if "path" not in sidecar:
        raise MappingError(path, "sidecar.path", "required: a template naming the file "
                                                 '(e.g. "{file.dir}/{file.stem}.txt")')
    for key, pattern in sidecar.items():
        if key == "path":
            _check_template(path, ["sidecar", "path"], pattern)
            other = set(TEMPLATE_RE.findall(pattern)) - set(FILE_FIELDS)
            if other:
                raise MappingError(path, "sidecar.path",
                                   f"{{{sorted(other)[0]}}}: a sidecar's path can use "
                                   f"only {', '.join('{' + f + '}' for f in FILE_FIELDS)}")
        elif key not in SETTINGS:
            raise MappingError(path, key_name(["sidecar", key]),
                               f"unknown key; expected path or a --set key "
                               f"({', '.join(SETTINGS)})")
        else:
            _check_regex(path, ["sidecar", key], pattern)


def _check_template(path: str, where: list[Segment], template: str) -> None:
    rest = TEMPLATE_RE.sub("", template)
    if "{" in rest or "}" in rest:
        raise MappingError(path, key_name(where),
                           f"unbalanced {{ or }} in the template {shown(template)} (a field "
                           "is written {name}, e.g. \"{median_ms}\")")


def _check_regex(path: str, where: list[Segment], pattern: str) -> None:
    try:
        _regex(pattern)
    except ValueError as exc:
        raise MappingError(path, key_name(where),
                           f"not a regular expression kidata can use: {exc} (in "
                           f"{shown(pattern)}); mappings use RE2 syntax, which never "
                           "backtracks: no look-around, no back-references") from None


@cache
def _regex(pattern: str) -> Any:
    """``pattern`` compiled by RE2 (google-re2): matching is linear in the text, whatever the
    pattern (``^(a+)+$`` cannot backtrack for ever). A pattern RE2 refuses (bad syntax,
    look-around, back-references, too large to compile) raises ValueError."""
    import re2

    options = re2.Options()
    options.log_errors = False  # the error is raised (and reported); not also logged to stderr
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        raise ValueError(detail.decode("utf-8", "replace") if isinstance(detail, bytes)
                         else str(detail)) from None


def _search(pattern: str, text: str) -> str | None:
    """Group 1 of the first match of ``pattern`` in ``text`` (the whole match when the
    pattern has no group), or None."""
    try:
        m = _regex(pattern).search(text)
    except UnicodeEncodeError:  # RE2 reads UTF-8: a lone surrogate is read as "?"
        m = _regex(pattern).search(text.encode("utf-8", "replace").decode("utf-8"))
    if m is None:
        return None
    return m.group(1) if m.groups() else m.group(0)


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
            value = _search(spec["regex"], str(value))
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


@dataclass
class Sidecar:
    """What a file's sidecar gave: ``values`` by key; ``unknown``, for each key it was asked
    for and did not give, why (for the rejects that name it); ``reject``, the file's reject
    when the sidecar exists and could not be read."""

    values: dict[str, str] = field(default_factory=dict)
    unknown: dict[str, str] = field(default_factory=dict)
    reject: RecordError | None = None


def sidecar_paths(template: str, context: dict[str, Any]) -> list[str]:
    """Where a file's sidecar may be, in order: ``{file.stem}`` as the name without its last
    suffix (``.gz`` first: ``run.2025-09-23.csv`` -> ``run.2025-09-23``), then as the name cut
    at its first dot (``run``: kidata 0.2.7 looked only there)."""
    name = context["file.name"]
    base = name[:-3] if name.endswith(".gz") else name
    stems = [base.rsplit(".", 1)[0] if "." in base.lstrip(".") else base, name.split(".")[0]]
    paths = [render(template, {**context, "file.stem": stem}) for stem in stems]
    return list(dict.fromkeys(str(p) for p in paths if p is not None))


def read_sidecar(mapping: Mapping, context: dict[str, Any], file: str,
                 settings: dict[str, str]) -> Sidecar:
    """The context a mapping's ``[sidecar]`` reads from the file beside ``file``. Only a
    regular file is read, and at most its first :data:`SIDECAR_BYTES`; nothing is read when
    ``--set`` gives every key the sidecar would."""
    spec = dict(mapping.sidecar)
    template = spec.pop("path", None)
    wanted = {k: v for k, v in spec.items() if k not in settings}
    if not template or not wanted or file == "<stdin>":
        return Sidecar()
    paths = sidecar_paths(template, context)
    if not paths:
        why = f"its path {shown(template)} names a field this file does not give"
        return Sidecar(unknown=dict.fromkeys(wanted, why))
    for path in paths:
        try:
            data, more = read_regular_head(path, SIDECAR_BYTES)
        except FileNotFoundError:
            continue
        except NotRegularFile as exc:
            return _unread(file, path, wanted, str(exc), "; only regular files are read")
        except OSError as exc:
            return _unread(file, path, wanted, f"cannot read it: {exc.strerror or exc}")
        text = data.decode("utf-8", errors="replace")
        out = Sidecar()
        for key, pattern in wanted.items():
            found = _search(pattern, text)
            if found:
                out.values[key] = found
            else:
                first = f" in its first {SIDECAR_BYTES // (1 << 20)} MiB" if more else ""
                out.unknown[key] = f"{path} has no match for {shown(pattern)}{first}"
        return out
    return Sidecar(unknown=dict.fromkeys(wanted, f"looked for {' and '.join(paths)}: no such "
                                                 "file"))


def _unread(file: str, path: str, wanted: dict[str, str], why: str, more: str = ""
            ) -> Sidecar:
    return Sidecar(unknown=dict.fromkeys(wanted, f"{path} was not read ({why})"),
                   reject=RecordError(file, "file", None,
                                      f"sidecar {path} not read: {why}{more}"))


def _whole(text: Any) -> bool:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return False
    return math.isfinite(value) and value.is_integer()


def read_builtin(name: str, stream, file: str, settings: dict[str, str] | None = None
                 ) -> Iterator[Item | RecordError]:
    """Read a stream by the built-in mapping ``kidata/data/mappings/NAME.toml``: the reader of
    a registered format that is a mapping (``flashinfer-csv``, ``dynamo-csv``, …)."""
    return read_stream(load_mapping(builtin_path(name)), stream, file, settings)


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
    # {file.stem} in the mapping's values is the name before its first dot (a Triton plot's
    # name without a date); its sidecar is looked for by both rules (sidecar_paths).
    context = {"file.name": pure.name, "file.stem": pure.name.split(".")[0]
               if file != "<stdin>" else "", "file.dir": str(pure.parent)}
    settings = dict(settings or {})
    x_setting = settings.pop("x_columns", None)
    sidecar = read_sidecar(mapping, context, file, settings)
    if sidecar.reject is not None:
        yield sidecar.reject
    # A required value only a sidecar could give: when it did not, the record's reject says
    # where it was looked for.
    unknown = {k: why for k, why in sidecar.unknown.items() if k in REQUIRED}
    builder = Builder(mapping.harness, file, {**sidecar.values, **settings})
    guessed = [(key, "pass_" if key == "pass" else key) for key in RUN_KEYS
               if key in settings and _from_file_name(mapping.run.get(key))]
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
            for key, attr in guessed:  # a guess from the file's name yields to --set
                setattr(measured, attr, settings[key])
            for key, why in unknown.items():
                if not getattr(measured, key):
                    raise RecordError(file, position, key,
                                      f"the file does not say the {key}, nor does its "
                                      f"sidecar: {why}; supply it with --set {key}=...")
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


def _from_file_name(spec: Any) -> bool:
    """Whether a mapping value is read from the file's name alone (``"{file.stem}"``, or a
    regex over ``{file.name}``): a guess that ``--set`` overrides, as docs/formats.md says."""
    template = spec.get("template") if isinstance(spec, dict) else spec
    if not isinstance(template, str):
        return False
    fields = re.findall(r"\{([^{}]*)\}", template)
    return bool(fields) and all(f in FILE_FIELDS for f in fields)


def _measured(mapping: Mapping, record: dict[str, Any], file: str, position: str) -> Measured:
    """One record (a row, or a JSON object) as a :class:`Measured` row by the mapping. The
    fields its templates use are collected as they are rendered (in this order), so that
    ``parameters = "rest"`` takes every field nothing else used."""
    used: set[str] = set()
    _check_fail_rules(mapping, record, used, file, position)
    run = {key: render(mapping.run.get(key), record, used) for key in RUN_KEYS
           if key != "identity"}
    identity = [_text(render(v, record, used)) or "" for v in mapping.run.get("identity", [])]
    stats = {k: render(v, record, used) for k, v in mapping.statistics.items()
             if k != "samples"}
    samples = render(mapping.statistics.get("samples"), record, used)
    extra = [(e.get("unit", ""), e.get("statistic", "median"), render(e.get("value"), record,
                                                                      used))
             for e in mapping.extra]
    published = _published(mapping, record, used)
    # Labels describe; they do not take a field away from the workload's parameters.
    labels = {k: _text(render(v, record)) for k, v in mapping.labels.items()}
    params = _parameters(mapping, record, used)
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
        samples=_samples(samples, file, position), extra=extra, identity=identity,
        native=native, published=published,
        labels={k: v for k, v in labels.items() if v},
    )


def _check_fail_rules(mapping: Mapping, record: dict[str, Any], used: set[str], file: str,
                      position: str) -> None:
    """Refuse a record whose field a ``[[fail]]`` rule names is not a number, or at most the
    rule's ``at_most`` (the harness's way of writing a failed case)."""
    for rule in mapping.fail:
        value = render(f"{{{rule.get('field')}}}", record, used)
        number = _number(value)
        if value is not None and (number is None or number <= rule.get("at_most", 0)):
            raise RecordError(file, position, rule.get("field"),
                              f"{value!r}: {rule.get('message', 'a failure value')}")


def _published(mapping: Mapping, record: dict[str, Any], used: set[str]) -> list[dict]:
    """The record's published claims: each ``[[published]]`` whose value is a number > 0."""
    published = []
    for p in mapping.published:
        value = _number(render(p.get("value"), record, used))
        if value is not None and value > 0:
            claim = {"quantity": p.get("quantity"), "value": value}
            for key in ("definition", "resolution"):
                if key in p:
                    claim[key] = p[key]
            published.append(claim)
    return published


def _parameters(mapping: Mapping, record: dict[str, Any], used: set[str]) -> dict[str, Any]:
    """The workload's parameters: the listed fields, or (``"rest"``) every non-empty field
    nothing else used, or the record's x columns; scalars only, text typed."""
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
    return params


def _samples(samples: Any, file: str, position: str) -> int | None:
    """The rendered sample count as a whole number (None when the mapping gives none)."""
    if samples is None:
        return None
    count = _number(samples)
    if count is None or count < 0 or not float(count).is_integer():
        raise RecordError(file, position, "samples", f"expected a whole number, got "
                                                     f"{samples!r}")
    return int(count)
