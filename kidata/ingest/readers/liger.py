"""Liger-Kernel's benchmark CSV (``benchmark/data/all_benchmark_data.csv``).

Every data row becomes one run as kernelindex documents (run, protocol, environment, workload,
implementation), so :mod:`kidata.ingest.flatten` is the one path to table rows. ``speed`` rows are
latency runs (ms from ``triton.testing.do_bench``, stored as integer ns), ``memory`` rows are
memory runs (MB). The mapping, with examples, is in ``docs/liger.md``; seeds 000 and 001 are
two rows mapped by it.

Positions are ``row N``: N counts data rows (the first row after the header is row 1), not
file lines, because a quoted field may span lines. Errors name the CSV column as the field.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import operator
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from functools import cache
from importlib import resources
from typing import IO, Any

from kidata.core.catalog import Gpu, display_name, lookup_gpu, slugify
from kidata.core.digest import digest
from kidata.errors import RecordError
from kidata.ingest.documents import document
from kidata.ingest.readers.base import (
    INT_RANGE,
    MAX_DEPTH,
    MAX_RECORD_BYTES,
    Item,
    Rows,
    nesting_depth,
    raw_text,
)

RAW_LIMIT = 65536  # what rejects.raw keeps of a record (kidata.ingest.readers.raw_text)

SOURCE = "liger-kernel-bench"
REPOSITORY = "https://github.com/linkedin/Liger-Kernel"
FAMILY = "liger_kernel_bench"
UNSPECIFIED = "unspecified"
COLUMNS = (
    "kernel_name", "kernel_provider", "kernel_operation_mode", "metric_name", "metric_unit",
    "x_name", "x_label", "x_value", "y_value_50", "y_value_20", "y_value_80",
    "extra_benchmark_config_str", "gpu_name", "timestamp", "liger_version",
)
# The CSV's quantile columns, in the order sourceNative.metrics lists them.
# The step of the timer behind some rows (docs/formats.md, Liger): on the RTX 3090/4090, and on
# the A100 and B200 with later Liger releases, do_bench's timings are multiples of 1.024 µs
# (14.336 µs = 14 x 1.024 µs). A row two of whose three quantiles lie on that grid (to the
# 1 ns the values are rounded to) was timed with it (by chance: about 3 in 100,000 rows): its
# latencies get that resolution, so a p20-p80 range narrower than one step is 'below
# resolution'. Interpolated quantiles fall between steps, so one value on the grid says
# nothing.
TIMER_STEP_NS = 1024
QUANTILES = (("20", "y_value_20", "p20"), ("50", "y_value_50", "median"),
             ("80", "y_value_80", "p80"))
# Speed units and their factor to ns (exact, so rounding happens once).
SPEED_UNITS = {"ms": Decimal(10) ** 6, "us": Decimal(10) ** 3, "ns": Decimal(1),
               "s": Decimal(10) ** 9}
MEMORY_UNITS = ("MB", "MiB", "GB", "GiB", "KB", "B", "bytes")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
INT_RE = re.compile(r"^[+-]?\d+$")

_COMMON_NOTES = (
    "The upstream CSV records no CUDA, driver, or torch version; the Liger release rides each "
    "run's labels."
)
# What each kernel_operation_mode times (benchmark/scripts/utils.py upstream).
_TIMED = {
    "forward": "the module forward pass",
    "backward": "the backward pass of the module output given a random upstream gradient",
    "full": "the module forward pass followed by the backward pass of its output given a "
            "random upstream gradient",
    "no-grad-forward": "the module forward pass under torch.no_grad()",
    "unspecified": "what the benchmark script runs when given no operation mode (the CSV row "
                   "names none)",
}


def _what(mode: str) -> str:
    return _TIMED.get(mode, f"the benchmark script's {mode!r} operation mode")


@cache
def speed_protocol(mode: str) -> dict[str, Any]:
    """The BenchmarkProtocol of ``speed`` rows of one mode (forward/backward: as in the seeds)."""
    return document(
        "BenchmarkProtocol", f"liger-bench-do-bench-{slugify(mode)}",
        f"Liger benchmark harness · {mode} pass",
        {
            "harness": {"name": "Liger-Kernel benchmark scripts", "repository": REPOSITORY},
            "measurement": {"timer": "cuda_events", "primaryStatistic": "median"},
            "comparability": {
                "notes": f"Timed: {_what(mode)}, via triton.testing.do_bench with quantiles "
                         f"0.5/0.2/0.8 (median with p20/p80 spread). {_COMMON_NOTES} Comparable "
                         "only within one kernel, workload, timed pass, and GPU.",
                "family": FAMILY,
            },
        },
    )


@cache
def memory_protocol(mode: str) -> dict[str, Any]:
    """The BenchmarkProtocol of ``memory`` rows of one mode."""
    return document(
        "BenchmarkProtocol", f"liger-bench-peak-memory-{slugify(mode)}",
        f"Liger benchmark harness · peak memory · {mode} pass",
        {
            "harness": {"name": "Liger-Kernel benchmark scripts", "repository": REPOSITORY},
            "measurement": {"instrument": "torch.cuda.max_memory_allocated",
                            "primaryStatistic": "median"},
            "comparability": {
                "notes": f"Measured: peak GPU memory allocated while running {_what(mode)} "
                         "(torch.cuda.max_memory_allocated after reset_peak_memory_stats, "
                         "bytes / 2^20, written as MB), over repeated runs with quantiles "
                         f"0.5/0.2/0.8 (median with p20/p80 spread). {_COMMON_NOTES} "
                         "Comparable only within one kernel, workload, measured pass, and GPU.",
                "family": FAMILY,
            },
        },
    )


# -- workload slugs ---------------------------------------------------------------------------


@cache
def slug_table() -> dict[str, dict[str, Any]]:
    """The abbreviation table of ``kidata/data/workloads.toml``."""
    text = resources.files("kidata.data").joinpath("workloads.toml").read_text("utf-8")
    data = tomllib.loads(text)
    return {k: data.get(k, {}) for k in ("words", "values", "omit")}


def _number(value: int | float) -> str:
    text = repr(value)
    if text.startswith("-"):
        text = "neg" + text[1:]
    return text.replace(".", "p").replace("e-", "em").replace("e+", "e")


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, int | float):
        return _number(value)
    if isinstance(value, str):
        return slug_table()["values"].get(value) or slugify(value) or "empty"
    return slugify(json.dumps(value, sort_keys=True)) or "empty"


def _segment(name: str, value: Any) -> str:
    words = slug_table()["words"]
    word = words[name] if name in words else slugify(name)
    if isinstance(value, bool):
        return word if value else f"no{word}"
    if isinstance(value, list):
        text = "x".join(_scalar(v) for v in value) or "empty"
    else:
        text = _scalar(value)
    if not word:
        return text
    if value is None or isinstance(value, str | list | dict) or not text[0].isdigit() \
            or word[-1].isdigit():
        return f"{word}-{text}"
    return f"{word}{text}"


def _omitted(name: str, value: Any) -> bool:
    omit = slug_table()["omit"]
    return name in omit and type(omit[name]) is type(value) and omit[name] == value


def workload_parameters(x_name: str, x_value: Any, config: dict[str, Any]) -> dict[str, Any]:
    """All named parameters of a row: the swept x value under its x_name, then every config key
    (a config key named like x_name is the swept one, so the x value wins)."""
    params = {x_name: x_value}
    params.update((k, v) for k, v in config.items() if k != x_name)
    return params


def workload_slug(x_name: str, x_value: Any, config: dict[str, Any]) -> str:
    """The readable workload name: one rule for every kernel (see ``docs/liger.md``).

    >>> workload_slug("H", 4096, {"M": 2048, "dtype": "torch.bfloat16", "eps": 1e-06})
    'hidden4096-rows2048-bf16'
    """
    params = workload_parameters(x_name, x_value, config)
    parts = [_segment(k, v) for k, v in params.items() if k == x_name or not _omitted(k, v)]
    return "-".join(p for p in parts if p)


# -- row parsing -------------------------------------------------------------------------------


def parse_x(text: str) -> int | float | str:
    """An x value: an integer, a finite float, or else the text itself (a model name)."""
    text = text.strip()
    if INT_RE.match(text):
        try:
            return int(text)
        except ValueError:  # beyond Python's digit limit for int(): keep the text
            return text
    try:
        value = float(text)
    except ValueError:
        return text
    return value if math.isfinite(value) else text


def parse_timestamp(text: str) -> datetime:
    """The CSV timestamp (``2024-09-03 15:39:30``, written by the benchmark host without a
    zone) read as UTC; a timestamp with a zone is converted to UTC."""
    ts = datetime.fromisoformat(text.strip())
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


def ns_from(text: str, factor: Decimal) -> int:
    """A speed value in integer ns: exact decimal product, halves rounded away from zero."""
    return int((Decimal(text.strip()) * factor).to_integral_value(ROUND_HALF_UP))


class _Row:
    """Field access for one CSV row, failing with the column name as the field."""

    def __init__(self, values: list[str], index: dict[str, int], file: str, position: str):
        self.values = values
        self.index = index
        self.file = file
        self.position = position

    def fail(self, column: str | None, message: str) -> RecordError:
        return RecordError(self.file, self.position, column, message)

    def get(self, column: str) -> str:
        return self.values[self.index[column]]

    def text(self, column: str) -> str:
        value = self.get(column).strip()
        if not value:
            raise self.fail(column, "expected a value, got an empty field")
        return value

    def name(self, column: str) -> str:
        value = self.text(column)
        if not NAME_RE.match(value):
            raise self.fail(column, f"expected a name of letters, digits, '_', '-' or '.' "
                                    f"(it becomes part of the run id), got {value!r}")
        return value

    def positive(self, column: str) -> tuple[float, str]:
        text = self.get(column).strip()
        try:
            value = float(text)
        except ValueError:
            raise self.fail(column, f"expected a number, got {text!r}") from None
        if not math.isfinite(value) or value <= 0:
            raise self.fail(column, f"expected a finite number > 0, got {text!r}"
                                    + (" (upstream writes nan when a benchmark produced no "
                                       "result)" if text.lower() == "nan" else ""))
        return value, text


class _Docs:
    """Builds each shared document once per file and remembers its digest.

    Every document but a Workload follows from its key alone; a Workload document is built by
    the first row of its key (see :class:`_Variants`). In a worker process, ``learned``
    lists the Workload documents built, ``(key, (document, digest))``, for the loading
    process to know them as if it had converted those rows itself (:meth:`learn`)."""

    def __init__(self, learned: list | None = None) -> None:
        self.cache: dict[tuple, tuple[dict, str]] = {}
        self.learned = learned
        # Per config text: the parsed config; per (x name, x value, config text): the
        # workload's parameters, slug and key. Rows repeat a few of each.
        self.configs: dict[str, dict[str, Any]] = {}
        self.workloads: dict[tuple, tuple[dict[str, Any], str, str]] = {}
        self.gpu_slugs: dict[str, str] = {}

    def get(self, key: tuple, build) -> tuple[dict, str]:
        found = self.cache.get(key)
        if found is None:
            doc = build()
            found = self.cache[key] = (doc, digest(doc))
            if self.learned is not None and key[0] == "workload":
                self.learned.append((key, found))
        return found

    def learn(self, key: tuple, found: tuple[dict, str]) -> None:
        """Know a Workload document built from a row converted elsewhere (by a worker), unless
        an earlier row built one already."""
        self.cache.setdefault(key, found)


def new_docs(learned: list | None = None) -> _Docs:
    """What :func:`convert_rows` keeps of the rows of one read before the next ones."""
    return _Docs(learned)


def _environment(gpu_name: str, gpu: Gpu) -> dict[str, Any]:
    hardware: dict[str, Any]
    if gpu.known:
        hardware = {"vendor": gpu.vendor, "product": gpu.product, "formFactor": gpu.form_factor}
        if gpu.architecture:
            hardware["architecture"] = gpu.architecture
    else:
        first = gpu_name.split()[0].lower() if gpu_name.split() else ""
        hardware = {"vendor": first if first in ("nvidia", "amd", "intel") else "unknown",
                    "product": gpu_name}
    short = gpu_name[len("NVIDIA "):] if gpu_name.upper().startswith("NVIDIA ") else gpu_name
    return document("ExecutionEnvironment", f"liger-bench-{slugify(gpu_name)}",
                    f"Liger benchmark host · {short}", {"hardware": hardware, "software": {}})


def _error(file: str, position: str, field: str | None, message: str,
           raw: str | None) -> RecordError:
    """A row (or header) error that keeps the row's text for ``rejects.raw``."""
    err = RecordError(file, position, field, message)
    err.raw = raw  # type: ignore[attr-defined]
    return err


def _reject_json_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


class _Unkeepable(ValueError):
    """A number in the config that kidata could not keep as written."""


def _int_in_range(text: str) -> int:
    value = int(text)
    if not INT_RANGE[0] <= value <= INT_RANGE[1]:
        raise _Unkeepable(f"integer {text} is beyond 64 bits (kidata keeps integers from "
                          f"{INT_RANGE[0]} to {INT_RANGE[1]})")
    return value


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Unkeepable(f"the number {text} is too large for a 64-bit float; expected a "
                          "finite number")
    return value


class _Lines:
    """The file's lines as text for :mod:`csv`, read one at a time so that a line that is not
    UTF-8, or longer than the record limit, spoils only its own row: the problem is kept in
    :attr:`problem` for the row that consumed the line. The text of the lines a row consumed
    (a quoted field may span several) is its raw record (:meth:`take_raw`), kept in
    ``rejects.raw`` when the row is rejected."""

    def __init__(self, stream: IO[bytes]):
        self.stream = stream
        self.number = 0
        self.problem: str | None = None
        self._taken: list[str] = []
        self._taken_size = 0

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        line = self.stream.readline(MAX_RECORD_BYTES + 1)
        if not line:
            raise StopIteration
        self.number += 1
        if self.number == 1:
            line = line.removeprefix(b"\xef\xbb\xbf")
        if len(line) > MAX_RECORD_BYTES and not line.endswith(b"\n"):
            while True:
                more = self.stream.readline(1 << 20)
                if not more or more.endswith(b"\n"):
                    break
            self.problem = self.problem or (f"line {self.number} is longer than "
                                            f"{MAX_RECORD_BYTES // (1024 * 1024)} MiB; not read")
            self._take(line[:RAW_LIMIT].decode("utf-8", errors="replace"))
            return "\n"
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.problem = self.problem or (f"not UTF-8 text (line {self.number}, byte "
                                            f"{exc.start}: {exc.reason})")
            text = line.decode("utf-8", errors="replace")
        self._take(text)
        return text

    def _take(self, text: str) -> None:
        if self._taken_size < RAW_LIMIT:  # rejects.raw keeps 64 KiB: no need for more
            self._taken.append(text)
            self._taken_size += len(text)

    def take_raw(self) -> str | None:
        """The text of the lines read since the last call (line ends of the last removed)."""
        taken, self._taken, self._taken_size = self._taken, [], 0
        return raw_text("".join(taken).removesuffix("\n").removesuffix("\r"))

    def take_problem(self) -> str | None:
        problem, self.problem = self.problem, None
        return problem


@dataclass(frozen=True)
class Context:
    """What converting a row needs of its file, beside the row (picklable, for a worker):
    the file's name, header and column index, and ``key``, one per read of a file (a file
    read twice in one load is converted apart each time, as :func:`read` would)."""

    key: int
    file: str
    header: tuple[str, ...]
    index: dict[str, int]


_READS = itertools.count(1)


def read(stream: IO[bytes], file: str, batch_rows: int | None = None
         ) -> Iterator[Item | RecordError | Rows]:
    """The records of a Liger CSV, in order; with ``batch_rows``, its rows in
    :class:`~kidata.ingest.readers.base.Rows` of that many, still to be converted
    (:func:`convert_rows`, in order or in worker processes), header errors as records."""
    lines = _Lines(stream)
    reader = csv.reader(lines, strict=True)
    try:
        header = next(reader, None)
    except csv.Error as exc:
        yield _error(file, "header", None, f"malformed CSV header: {exc}", lines.take_raw())
        return
    problem = lines.take_problem()
    header_raw = lines.take_raw()
    if problem:
        yield _error(file, "header", None, f"cannot read the CSV header: {problem}",
                     header_raw)
        return
    if header is None:
        yield RecordError(file, "header", None, "empty file: expected a CSV header line "
                                                "starting 'kernel_name,'")
        return
    index: dict[str, int] = {}
    for i, name in enumerate(header):
        index.setdefault(name.strip(), i)
    missing = [c for c in COLUMNS if c not in index]
    if missing:
        yield _error(file, "header", missing[0],
                          f"missing column{'s' if len(missing) > 1 else ''} "
                          f"{', '.join(missing)}; expected the Liger-Kernel benchmark CSV "
                          f"columns {', '.join(COLUMNS)}", header_raw)
        return
    context = Context(next(_READS), file, tuple(header), index)
    if not batch_rows:
        docs = _Docs()
        for entry in _entries(reader, lines):
            yield convert_row(entry, context, docs)
        return
    variants = _Variants(context)
    batch: list[tuple] = []
    for entry in _entries(reader, lines):
        batch.append((*entry, variants.depends(entry[1])))
        if len(batch) >= batch_rows:
            yield Rows(file, context, batch)
            batch = []
    if batch:
        yield Rows(file, context, batch)


def _entries(reader: Iterator[list[str]], lines: _Lines) -> Iterator[tuple]:
    """The data rows after the header, as ``(number, values, raw, problem)``: ``values``
    None when the row could not be read (``problem`` says why). Blank lines are no rows."""
    number = 0
    while True:
        try:
            values = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            lines.take_problem()
            number += 1
            yield number, None, lines.take_raw(), f"malformed CSV: {exc}"
            continue
        problem = lines.take_problem()
        raw = lines.take_raw()
        if problem:
            number += 1
            yield number, None, raw, problem
            continue
        if not values or (len(values) == 1 and not values[0].strip()):
            continue  # a blank line is not a row
        number += 1
        yield number, values, raw, None


def convert_row(entry: tuple, context: Context, docs: _Docs) -> Item | RecordError:
    """One entry of :func:`_entries` as the record it is, or its reject (naming file, row and
    field). ``docs`` holds what earlier rows of the file built (see :class:`_Docs`)."""
    number, values, raw, problem = entry[:4]
    position = f"row {number}"
    if values is None:
        return _error(context.file, position, None, problem, raw)
    try:
        return _item(values, context.index, context.header, context.file, position, raw, docs)
    except RecordError as err:
        err.raw = raw  # type: ignore[attr-defined]
        return err


def convert_rows(rows: Rows, docs: _Docs, defer: bool = False
                 ) -> Iterator[tuple[tuple, Item | RecordError | None]]:
    """Each entry of ``rows`` with its record or reject, in order (:func:`convert_row`; what
    :func:`read` would have yielded, given the ``docs`` of the rows before). With ``defer``
    (in a worker process), an entry that depends on an earlier row of the file, which the
    worker may not have seen (:class:`_Variants`), comes with None instead: the loading
    process converts it, in order."""
    context = rows.context
    for entry in rows.rows:
        if defer and entry[4]:
            yield entry, None
        else:
            yield entry, convert_row(entry, context, docs)


class _Variants:
    """Which rows depend on an earlier row of the file, which a worker process converting
    rows out of order may not have seen.

    The one thing a row's record takes from earlier rows is its Workload document: the
    first row with the same kernel, workload parameters (as a set) and x label that reaches
    that point builds it (:class:`_Docs`), and later rows use it, even when their own x name
    or parameter order (a variant) would have built another. A row whose key has had a single
    variant so far gets the document it would build itself, whichever row came first; a row
    whose key has had two or more variants (e.g. the same config with its keys in another
    order) depends on which came first: it is converted in the loading process, in order.
    Rows that cannot reach that point (unreadable, a bad x value or config) build nothing."""

    def __init__(self, context: Context):
        self.fields = operator.itemgetter(*(context.index[c] for c in (
            "kernel_name", "x_name", "x_label", "x_value", "extra_benchmark_config_str")))
        self.width = len(context.header)
        self.found: dict[tuple, tuple | None] = {}
        self.first: dict[tuple, tuple] = {}  # workload key: its first variant
        self.mixed: set[tuple] = set()  # keys seen with two or more variants

    def depends(self, values: list[str] | None) -> bool:
        if values is None or len(values) != self.width:
            return False  # rejected before a workload is built
        fields = self.fields(values)
        found = self.found.get(fields, _UNSEEN)
        if found is _UNSEEN:
            found = _variant(*fields)
            if len(self.found) < 100_000:
                self.found[fields] = found
        if found is None:
            return False
        key, variant = found
        if key is _ANY:
            return True
        if self.first.setdefault(key, variant) != variant:
            self.mixed.add(key)
        return key in self.mixed


def _workload_key(kernel: str, params_key: str, x_label: str) -> tuple:
    """The key a Workload document is built and remembered under (:class:`_Docs`): one per
    kernel, workload parameters as a set (``params_key``: their JSON with sorted keys) and x
    label. :func:`_item` builds by it and :class:`_Variants` groups rows by it: one rule."""
    return ("workload", kernel, params_key, x_label)


_UNSEEN: Any = object()
_ANY: Any = object()


def _variant(kernel: str, x_name: str, x_label: str, x_value: str, config_text: str
             ) -> tuple[tuple, tuple] | None:
    """A row's workload key as :func:`_item` builds it (its cache key of the Workload
    document) and its variant (what else the document is built from); None when the row is
    rejected before it builds one; ``(_ANY, None)`` when unsure (the row is then converted in
    order)."""
    try:
        config = _parse_config(config_text.strip())
        x_name = x_name.strip()
        params = workload_parameters(x_name, parse_x(x_value.strip()), config)
        key = _workload_key(kernel.strip(), json.dumps(params, sort_keys=True),
                            x_label.strip())
        return key, (x_name, json.dumps(params))
    except (ValueError, RecursionError):
        return None  # a config _config() rejects (_BadConfig), or a row _item() rejects
    except Exception:  # noqa: BLE001 - converted in order, where _item() decides
        return _ANY, None


class _BadConfig(ValueError):
    """Why an ``extra_benchmark_config_str`` is rejected."""


def _config(row: _Row, config_text: str) -> dict[str, Any]:
    """The row's ``extra_benchmark_config_str`` parsed and checked (:func:`_parse_config`),
    or the row's reject naming that field."""
    try:
        return _parse_config(config_text)
    except _BadConfig as exc:
        raise row.fail("extra_benchmark_config_str", str(exc)) from None


def _parse_config(config_text: str) -> dict[str, Any]:
    """A config text parsed and checked: a JSON object of numbers kidata keeps exactly,
    nested shallowly enough to store (empty or null: no config); else :class:`_BadConfig`.
    Only read afterwards (rows with the same text share it)."""
    try:
        config = json.loads(config_text, parse_constant=_reject_json_constant,
                            parse_int=_int_in_range, parse_float=_finite_float) \
            if config_text else {}
    except _Unkeepable as exc:
        raise _BadConfig(str(exc)) from None
    except (ValueError, RecursionError) as exc:
        raise _BadConfig(f"expected a JSON object, got invalid JSON: {exc}") from None
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise _BadConfig(f"expected a JSON object, got {type(config).__name__}")
    # The config becomes a Workload document's spec.parameters: three levels below its top.
    if nesting_depth(config) > MAX_DEPTH - 3:
        raise _BadConfig(f"nested deeper than {MAX_DEPTH - 3} levels; kidata stores documents "
                         f"up to {MAX_DEPTH} levels deep")
    return config


def _item(values: list[str], index: dict[str, int], header: list[str], file: str,
          position: str, raw: str | None, docs: _Docs) -> Item:
    """One CSV row as a bundle: its fields checked in the CSV's column order (so a reject
    names the first bad one), its shared documents built once per file (``docs``)."""
    row = _Row(values, index, file, position)
    _check_width(row, values, index, header)
    kernel = row.name("kernel_name")
    provider = row.name("kernel_provider")
    # Upstream writes an empty mode when a script runs without one: kept, as "unspecified".
    mode = row.name("kernel_operation_mode") if row.get("kernel_operation_mode").strip() \
        else UNSPECIFIED
    metric_name, unit = _metric(row)
    x_name, x_label, x_value = _x(row)
    numbers = _quantiles(row)
    config_text = row.get("extra_benchmark_config_str").strip()
    config = docs.configs.get(config_text)
    if config is None:
        config = _config(row, config_text)
        if len(docs.configs) < 10_000:
            docs.configs[config_text] = config
    gpu_name = row.text("gpu_name")
    gpu_slug = _gpu_slug(row, docs, gpu_name)
    observed = _observed(row)
    version = row.get("liger_version").strip()
    params, slug, params_key = _workload(docs, x_name, x_value, config_text, config)

    kernel_title = display_name("kernels", kernel)
    impl_title = display_name("implementations", provider)
    built = _documents(docs, metric_name, mode, gpu_name, kernel, kernel_title, provider,
                       impl_title, params, slug, params_key, x_name, x_label)

    parts = [kernel, mode, provider, gpu_slug, slug, observed.strftime("%Y-%m-%d-%H-%M-%S")]
    title = f"{kernel_title} · {provider} · {mode}"
    if metric_name == "memory":
        parts.append("memory")
        title += " · memory"
    native = {
        "source": SOURCE,
        "metrics": {f"{unit.lower()}_{q}": numbers[q][0] for q, _, _ in QUANTILES},
        "benchmark": f"{kernel}/{mode}",
        "externalId": "/".join(parts),
    }
    spec = _spec(row, metric_name, unit, numbers, observed)
    spec["sourceNative"] = native
    for name in ("protocol", "workload", "environment", "implementation"):
        spec[f"{name}Digest"] = built[name][1]
    run = document("BenchmarkRun", "liger-" + "-".join(parts).replace("_", "-"), title, spec,
                   {"liger_version": version} if version else None)
    return Item(file, position, {"run": run, **{name: doc for name, (doc, _) in built.items()}},
                raw, title=impl_title)


def _documents(docs: _Docs, metric_name: str, mode: str, gpu_name: str, kernel: str,
               kernel_title: str, provider: str, impl_title: str, params: dict[str, Any],
               slug: str, params_key: str, x_name: str, x_label: str
               ) -> dict[str, tuple[dict, str]]:
    """The row's shared documents with their digests, built once per file (``docs``):
    ``protocol``, ``environment``, ``workload`` and ``implementation``, in the bundle's
    order."""
    gpu = lookup_gpu(gpu_name)
    env = docs.get(("env", gpu_name), lambda: _environment(gpu_name, gpu))
    if metric_name == "speed":
        protocol = docs.get(("speed", mode), lambda: (speed_protocol(mode)))
    else:
        protocol = docs.get(("memory", mode), lambda: memory_protocol(mode))
    workload = docs.get(
        _workload_key(kernel, params_key, x_label),
        lambda: document("Workload", f"liger-{kernel}-{slug}".replace("_", "-"),
                         f"{kernel_title} · {slug}",
                         {"kernel": kernel, "name": slug, "parameters": params},
                         {"x_name": x_name, "x_label": x_label} if x_label
                         else {"x_name": x_name}))
    implementation = docs.get(
        ("implementation", kernel, provider),
        lambda: document("Implementation", f"liger-impl-{kernel}-{provider}".replace("_", "-"),
                         f"{impl_title} · {kernel_title}", {"kernel": kernel, "name": provider}))
    return {"protocol": protocol, "environment": env, "workload": workload,
            "implementation": implementation}


def _check_width(row: _Row, values: list[str], index: dict[str, int],
                 header: list[str]) -> None:
    """Refuse a row with fewer or more fields than the header (naming the first missing
    column of those kidata reads, or an unquoted comma)."""
    if len(values) < len(header):
        first_missing = next(c for c in COLUMNS if index[c] >= len(values)) \
            if any(index[c] >= len(values) for c in COLUMNS) else None
        raise row.fail(first_missing, f"short row: {len(values)} fields, the header has "
                                      f"{len(header)}")
    if len(values) > len(header):
        raise row.fail(None, f"long row: {len(values)} fields, the header has {len(header)} "
                             "(an unquoted comma?)")


def _metric(row: _Row) -> tuple[str, str]:
    """The row's metric (``speed`` or ``memory``) and a unit that metric can have."""
    metric_name = row.text("metric_name")
    unit = row.text("metric_unit")
    if metric_name == "speed":
        if unit not in SPEED_UNITS:
            raise row.fail("metric_unit", f"expected a time unit for speed "
                                          f"({', '.join(SPEED_UNITS)}), got {unit!r}")
    elif metric_name == "memory":
        if unit not in MEMORY_UNITS:
            raise row.fail("metric_unit", f"expected a memory unit ({', '.join(MEMORY_UNITS)})"
                                          f", got {unit!r}")
    else:
        raise row.fail("metric_name", f"expected 'speed' or 'memory', got {metric_name!r}")
    return metric_name, unit


def _x(row: _Row) -> tuple[str, str, Any]:
    """The row's x axis: its name, label and value (an integer within 64 bits)."""
    x_name = row.text("x_name")
    x_label = row.get("x_label").strip()
    x_value = parse_x(row.text("x_value"))
    if isinstance(x_value, int) and not INT_RANGE[0] <= x_value <= INT_RANGE[1]:
        raise row.fail("x_value", f"integer {x_value} is beyond 64 bits (kidata keeps "
                                  f"integers from {INT_RANGE[0]} to {INT_RANGE[1]})")
    return x_name, x_label, x_value


def _quantiles(row: _Row) -> dict[str, tuple]:
    """The row's p50, p20 and p80 (``row.positive``'s pairs by ``"50"``, ``"20"``, ``"80"``),
    checked in the CSV's column order (y_value_50 first) and in order of size."""
    numbers = {q: row.positive(f"y_value_{q}") for q in ("50", "20", "80")}
    if not numbers["20"][0] <= numbers["50"][0] <= numbers["80"][0]:
        raise row.fail("y_value_50", f"quantiles out of order: expected y_value_20 <= "
                                     f"y_value_50 <= y_value_80, got {numbers['20'][1]}, "
                                     f"{numbers['50'][1]}, {numbers['80'][1]}")
    return numbers


def _gpu_slug(row: _Row, docs: _Docs, gpu_name: str) -> str:
    """The GPU's name as it appears in the external id (remembered per file); refused when
    it has no letter or digit."""
    gpu_slug = docs.gpu_slugs.get(gpu_name)
    if gpu_slug is None:
        gpu_slug = slugify(gpu_name)
        if len(docs.gpu_slugs) < 10_000:
            docs.gpu_slugs[gpu_name] = gpu_slug
    if not gpu_slug:
        raise row.fail("gpu_name", f"expected a GPU name with letters or digits, got {gpu_name!r}")
    return gpu_slug


def _observed(row: _Row) -> datetime:
    """The row's ``timestamp`` as a UTC time."""
    stamp = row.text("timestamp")
    try:
        return parse_timestamp(stamp)
    except OverflowError:
        raise row.fail("timestamp", f"time {stamp!r} is outside years 1-9999 once converted "
                                    "to UTC") from None
    except ValueError:
        raise row.fail("timestamp", f"expected a time such as 2024-09-03 15:39:30, "
                                    f"got {stamp!r}") from None


def _workload(docs: _Docs, x_name: str, x_value: Any, config_text: str,
              config: dict[str, Any]) -> tuple[dict[str, Any], str, str]:
    """The workload's parameters, slug and parameters key (JSON, sorted keys), remembered
    per file by the x value and the config text."""
    workload_key = (x_name, type(x_value), repr(x_value), config_text)  # -0.0 is not 0.0
    found = docs.workloads.get(workload_key)
    if found is None:
        params = workload_parameters(x_name, x_value, config)
        found = (params, workload_slug(x_name, x_value, config),
                 json.dumps(params, sort_keys=True))
        if len(docs.workloads) < 100_000:
            docs.workloads[workload_key] = found
    return found


def _spec(row: _Row, metric_name: str, unit: str, numbers: dict[str, tuple],
          observed: datetime) -> dict[str, Any]:
    """The run's spec up to its source and digests: for speed, latencies in ns (each within
    64 bits; the timer's step as resolution when at least two quantiles fall on it); for
    memory, the values in the file's unit, median first."""
    spec: dict[str, Any] = {"status": "passed"}
    when = observed.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if metric_name != "speed":
        spec["observedAt"] = when
        spec["measurements"] = [
            {"unit": unit, "value": numbers[q][0], "metric": "memory", "statistic": stat}
            for q, _, stat in sorted(QUANTILES, key=lambda t: t[2] != "median")]
        return spec
    factor = SPEED_UNITS[unit]
    ns = {q: ns_from(numbers[q][1], factor) for q, _, _ in QUANTILES}
    for q, _, _ in QUANTILES:  # in ns, a run's latency must fit kidata's integers
        if ns[q] > INT_RANGE[1]:
            raise row.fail(f"y_value_{q}", f"{numbers[q][1]} {unit} is {ns[q]:,} ns, "
                                           "beyond 64 bits; expected a plausible latency")
    spec["timing"] = {"latencyNs": {"median": ns["50"]}, "primaryStatistic": "median"}
    if sum(ns[q] % TIMER_STEP_NS in (0, 1, TIMER_STEP_NS - 1) for q in ns) >= 2:
        spec["timing"]["resolutionNs"] = TIMER_STEP_NS
    spec["observedAt"] = when
    spec["measurements"] = [
        {"unit": "ns", "value": ns[q], "metric": "latency", "statistic": stat}
        for q, _, stat in QUANTILES if stat != "median"]
    return spec
