"""Reference tables: kidata's data files written into the warehouse as Parquet.

The ``gpus`` table comes from ``kidata/data/gpus.toml`` (the GPU catalog), ``dtypes`` and
``byte_models`` from ``kidata/data/byte_models.toml``. They live in the warehouse beside the
loaded tables (``<warehouse>/<table>/reference.parquet``) so the views that use them (e.g.
``efficiency``) run unchanged in any engine over the same folder.

:func:`write` refreshes them after every load (under the writer lock); each file is replaced
atomically, and only when its content changed. A warehouse written before these tables existed,
or one that cannot be written, still answers queries: :func:`define_missing` serves the packaged
data to DuckDB for any table whose file is missing or out of date.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from kidata import durable
from kidata.catalog import gpu_catalog
from kidata.errors import KidataError
from kidata.schema import REFERENCE, TABLES

FILE = "reference.parquet"
BYTE_MODELS_FILE = "kidata/data/byte_models.toml"
MAX_FACTORS = 3


@dataclass(frozen=True)
class Term:
    term: str
    coefficient: float
    dtype_parameter: str | None
    dtype: str | None
    factors: tuple[str, ...]


@dataclass(frozen=True)
class ByteModel:
    kernel: str
    pass_: str
    benchmark: str
    terms: tuple[Term, ...]


def _fail(field: str, message: str) -> KidataError:
    return KidataError(f"{BYTE_MODELS_FILE}, field {field}: {message}")


def _text(table: dict, key: str, where: str, required: bool = True) -> str | None:
    value = table.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _fail(f"{where}.{key}", f"expected a non-empty string, got {value!r}")
    return value


def parse_byte_models(data: dict) -> tuple[dict[str, int], list[ByteModel]]:
    """Check the byte-model data and return ``(dtype sizes, models)``; errors name the field."""
    dtypes = data.get("dtypes")
    if not isinstance(dtypes, dict) or not dtypes:
        raise _fail("dtypes", "expected a table of dtype = bytes per element")
    for name, size in dtypes.items():
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise _fail(f"dtypes.{name}", f"expected a positive whole number, got {size!r}")
    models: list[ByteModel] = []
    seen: set[tuple[str, str]] = set()
    for i, entry in enumerate(data.get("model", [])):
        where = f"model[{i}]"
        kernel, pass_ = _text(entry, "kernel", where), _text(entry, "pass", where)
        if (kernel, pass_) in seen:
            raise _fail(where, f"a second model for {kernel} {pass_}")
        seen.add((kernel, pass_))
        raw_terms = entry.get("terms")
        if not isinstance(raw_terms, list) or not raw_terms:
            raise _fail(f"{where}.terms", "expected a non-empty list of terms")
        terms = []
        for j, t in enumerate(raw_terms):
            tw = f"{where}.terms[{j}]"
            coefficient = t.get("coefficient", 1)
            if isinstance(coefficient, bool) or not isinstance(coefficient, int | float) \
                    or coefficient <= 0:
                raise _fail(f"{tw}.coefficient", f"expected a number > 0, got {coefficient!r}")
            dtype_parameter = _text(t, "dtype_parameter", tw, required=False)
            dtype = _text(t, "dtype", tw, required=False)
            if (dtype_parameter is None) == (dtype is None):
                raise _fail(tw, "expected exactly one of dtype_parameter (a workload parameter "
                                "naming the dtype) and dtype (a fixed dtype)")
            if dtype is not None and dtype not in dtypes:
                raise _fail(f"{tw}.dtype", f"unknown dtype {dtype!r}; add it to [dtypes]")
            factors = t.get("factors", [])
            if not isinstance(factors, list) or len(factors) > MAX_FACTORS or not all(
                    isinstance(f, str) and f for f in factors):
                raise _fail(f"{tw}.factors", f"expected up to {MAX_FACTORS} parameter names, "
                                             f"got {factors!r}")
            term = _text(t, "term", tw)
            if any(x.term == term for x in terms):
                raise _fail(f"{tw}.term", f"term {term!r} appears twice in this model")
            terms.append(Term(term, float(coefficient), dtype_parameter, dtype, tuple(factors)))
        models.append(ByteModel(kernel, pass_, _text(entry, "benchmark", where), tuple(terms)))
    return dict(dtypes), models


@cache
def byte_models() -> tuple[dict[str, int], list[ByteModel]]:
    text = resources.files("kidata.data").joinpath("byte_models.toml").read_text("utf-8")
    return parse_byte_models(tomllib.loads(text))


@cache
def tables() -> dict[str, pa.Table]:
    """The reference tables as built from the packaged data files."""
    gpus = [{"gpu": g.key, "vendor": g.vendor, "product": g.product,
             "form_factor": g.form_factor or None, "architecture": g.architecture,
             "memory_bandwidth_gbps": _float(g.memory_bandwidth_gbps),
             "bf16_dense_tflops": _float(g.bf16_dense_tflops)}
            for g in gpu_catalog().values()]
    sizes, models = byte_models()
    dtypes = [{"name": name, "bytes": size} for name, size in sizes.items()]
    terms = []
    for m in models:
        for t in m.terms:
            factors = list(t.factors) + [None] * (MAX_FACTORS - len(t.factors))
            terms.append({"kernel": m.kernel, "pass": m.pass_, "term": t.term,
                          "coefficient": t.coefficient, "dtype_parameter": t.dtype_parameter,
                          "dtype": t.dtype, "factor_1": factors[0], "factor_2": factors[1],
                          "factor_3": factors[2]})
    rows = {"gpus": gpus, "dtypes": dtypes, "byte_models": terms}
    return {name: pa.Table.from_pylist(rows[name], schema=TABLES[name]) for name in REFERENCE}


def _float(value: float | None) -> float | None:
    return None if value is None else float(value)


def _current(path: Path, table: pa.Table) -> bool:
    try:
        # ParquetFile, not pq.read_table: that one imports pyarrow.dataset and pandas (a
        # quarter of a second on every query's start-up).
        with pq.ParquetFile(path) as file:
            return file.read().cast(table.schema).equals(table)
    except (OSError, pa.ArrowException):
        return False


def stale(warehouse: Path) -> list[str]:
    """Reference tables whose file in ``warehouse`` is missing or differs from the package."""
    return [name for name, table in tables().items()
            if not _current(warehouse / name / FILE, table)]


def write(warehouse: Path) -> bool:
    """Write the reference tables that are missing or out of date; False when the warehouse
    cannot be written (queries then use the packaged data, see :func:`define_missing`)."""
    try:
        for name in stale(warehouse):
            folder = warehouse / name
            folder.mkdir(parents=True, exist_ok=True)
            buffer = pa.BufferOutputStream()
            pq.write_table(tables()[name], buffer)
            # Its temporary name does not end in .parquet, so no reader's glob ever sees it.
            durable.write_atomic(folder / FILE, buffer.getvalue().to_pybytes())
    except OSError:
        return False
    return True


def define_missing(con: duckdb.DuckDBPyConnection, warehouse: Path) -> None:
    """Point the views of reference tables whose file is missing or stale at the packaged data."""
    for name in stale(warehouse):
        con.register(f"_kidata_reference_{name}", tables()[name])
        con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM _kidata_reference_{name}")
