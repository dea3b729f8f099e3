"""Reference tables: kidata's data files written into the warehouse as Parquet.

The ``gpus`` table comes from ``kidata/data/gpus.toml`` (the GPU catalog),
``implementation_roles`` from ``kidata/data/roles.toml`` (or the file named by ``$KIDATA_ROLES``,
see :func:`roles`), ``dtypes`` and ``byte_models`` from ``kidata/data/byte_models.toml``,
``flop_models`` from ``kidata/data/flop_models.toml``, ``kernel_families`` from
``kidata/data/families.toml``.
They live in the warehouse beside the loaded tables (``<warehouse>/<table>/reference.parquet``)
so the views that use them (e.g. ``efficiency``) run unchanged in any engine over the same folder.

:func:`write` refreshes them after every load (under the writer lock, as one commit); each
file is replaced atomically, and only when it is stale: missing, unreadable, or without the
fingerprint of the packaged data in its Parquet metadata (checked with DuckDB alone, so a
query's start-up needs no pyarrow). A warehouse written before these tables existed, or one
that cannot be written, still answers queries: :func:`define` serves the packaged data to
DuckDB for any table whose file is stale.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from kidata.core import config, engine
from kidata.core.catalog import gpu_catalog, user_gpu_file
from kidata.errors import KidataError
from kidata.store import durable, layout
from kidata.store.layout import Layout
from kidata.store.schema import COLUMNS, REFERENCE
from kidata.store.tablesql import table_sql

if TYPE_CHECKING:
    import pyarrow as pa

FILE = layout.REFERENCE_FILE  # the one file of a reference table
# Key of the Parquet key-value metadata entry holding the file's fingerprint (see fingerprint).
FINGERPRINT_KEY = "kidata.reference"
BYTE_MODELS_FILE = "kidata/data/byte_models.toml"
ROLES_FILE = "kidata/data/roles.toml"
# Environment variable naming a TOML file whose roles replace the packaged ones, entry by entry.
ROLES_ENV = "KIDATA_ROLES"
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


def _role_list(value: Any, where: str, file: str) -> list[str]:
    if not isinstance(value, list) or not value or not all(
            isinstance(v, str) and v.strip() for v in value):
        raise KidataError(f"{file}, field {where}: expected a non-empty list of implementation "
                          f"names, got {value!r}")
    if len(set(value)) != len(value):
        raise KidataError(f"{file}, field {where}: an implementation is listed twice")
    return list(value)


def parse_roles(data: dict, file: str) -> dict[tuple[str, str], list[str]]:
    """``{(kernel or '*', role): implementations in order of preference}`` from a roles file's
    data (shape of ``kidata/data/roles.toml``); errors name the file and field."""
    out: dict[tuple[str, str], list[str]] = {}
    unknown = set(data) - {"roles", "kernels"}
    if unknown:
        raise KidataError(f"{file}: unknown table(s) {sorted(unknown)}; expected [roles] and "
                          "[kernels.<kernel>]")
    roles = data.get("roles", {})
    if not isinstance(roles, dict):
        raise KidataError(f"{file}, field roles: expected a table of role = [implementations]")
    for role, names in roles.items():
        out[("*", role)] = _role_list(names, f"roles.{role}", file)
    kernels = data.get("kernels", {})
    if not isinstance(kernels, dict):
        raise KidataError(f"{file}, field kernels: expected [kernels.<kernel>] tables")
    for kernel, table in kernels.items():
        if not isinstance(table, dict):
            raise KidataError(f"{file}, field kernels.{kernel}: expected a table of role = "
                              "[implementations]")
        for role, names in table.items():
            out[(kernel, role)] = _role_list(names, f"kernels.{kernel}.{role}", file)
    return out


def roles() -> dict[tuple[str, str], list[str]]:
    """The implementation roles: the packaged ``kidata/data/roles.toml``, with the entries of
    the file named by ``$KIDATA_ROLES`` (if set) replacing its entries of the same kernel and
    role."""
    return _roles(config.current().roles)


@cache
def _roles(override: Path | None) -> dict[tuple[str, str], list[str]]:
    text = resources.files("kidata.data").joinpath("roles.toml").read_text("utf-8")
    out = parse_roles(tomllib.loads(text), ROLES_FILE)
    if override:
        try:
            data = tomllib.loads(Path(override).read_text("utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise KidataError(f"{override} (from ${ROLES_ENV}): cannot read the roles file: "
                              f"{exc}") from exc
        out.update(parse_roles(data, override))
    return out


FLOP_FACTORS = 4
FLOP_MODELS_FILE = "kidata/data/flop_models.toml"


def parse_flop_models(data: dict) -> list[dict[str, Any]]:
    """Check the FLOP-model data and return the ``flop_models`` rows; errors name the field."""
    def fail(field: str, message: str) -> KidataError:
        return KidataError(f"{FLOP_MODELS_FILE}, field {field}: {message}")

    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str, str]] = set()
    for i, entry in enumerate(data.get("model", [])):
        where = f"model[{i}]"
        kernel, pass_ = entry.get("kernel"), entry.get("pass")
        for name, value in (("kernel", kernel), ("pass", pass_)):
            if not isinstance(value, str) or not value:
                raise fail(f"{where}.{name}", f"expected a non-empty string, got {value!r}")
        terms = entry.get("terms")
        if not isinstance(terms, list) or not terms:
            raise fail(f"{where}.terms", "expected a non-empty list of terms")
        for j, t in enumerate(terms):
            tw = f"{where}.terms[{j}]"
            term, coefficient = t.get("term"), t.get("coefficient", 1)
            factors = t.get("factors", [])
            if not isinstance(term, str) or not term:
                raise fail(f"{tw}.term", f"expected a non-empty string, got {term!r}")
            if isinstance(coefficient, bool) or not isinstance(coefficient, int | float) \
                    or coefficient <= 0:
                raise fail(f"{tw}.coefficient", f"expected a number > 0, got {coefficient!r}")
            if not isinstance(factors, list) or not 0 < len(factors) <= FLOP_FACTORS or not all(
                    isinstance(f, str) and f for f in factors):
                raise fail(f"{tw}.factors", f"expected 1 to {FLOP_FACTORS} parameter names, "
                                            f"got {factors!r}")
            if (kernel, pass_, term) in seen:
                raise fail(f"{tw}.term", f"term {term!r} appears twice for {kernel} {pass_}")
            seen.add((kernel, pass_, term))
            padded = list(factors) + [None] * (FLOP_FACTORS - len(factors))
            out.append({"kernel": kernel, "pass": pass_, "term": term,
                        "coefficient": float(coefficient),
                        **{f"factor_{k + 1}": padded[k] for k in range(FLOP_FACTORS)}})
    return out


@cache
def flop_models() -> list[dict[str, Any]]:
    text = resources.files("kidata.data").joinpath("flop_models.toml").read_text("utf-8")
    return parse_flop_models(tomllib.loads(text))


FAMILIES_FILE = "kidata/data/families.toml"


def parse_families(data: dict, file: str = FAMILIES_FILE) -> list[dict[str, Any]]:
    """Check the kernel-family data and return the ``kernel_families`` rows (one per member
    kernel); errors name the file and the field."""
    def fail(field: str, message: str) -> KidataError:
        return KidataError(f"{file}, field {field}: {message}")

    unknown = sorted(set(data) - {"families"})
    if unknown:
        raise fail(unknown[0], "unknown key; expected [families]")
    families = data.get("families", {})
    if not isinstance(families, dict):
        raise fail("families", "expected a table of family = [kernels]")
    out: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    for family, kernels in sorted(families.items()):
        where = f"families.{family}"
        if not isinstance(kernels, list) or len(kernels) < 2 or not all(
                isinstance(k, str) and k for k in kernels):
            raise fail(where, f"expected a list of 2 or more kernel names, got {kernels!r}")
        for kernel in kernels:
            if kernel in seen:
                raise fail(where, f"kernel {kernel!r} is already in family {seen[kernel]!r}")
            seen[kernel] = family
            out.append({"kernel": kernel, "family": family})
    return out


@cache
def kernel_families() -> list[dict[str, Any]]:
    text = resources.files("kidata.data").joinpath("families.toml").read_text("utf-8")
    return parse_families(tomllib.loads(text))


def _user_files() -> tuple[str | None, Path | None]:
    """The user's files the reference tables are built with: ``$KIDATA_GPUS``,
    ``$KIDATA_ROLES`` (the tables, and their fingerprints, are kept per pair)."""
    return user_gpu_file(), config.current().roles


def rows() -> dict[str, list[dict[str, Any]]]:
    """The reference tables' rows as built from the packaged data files (and ``$KIDATA_GPUS``,
    ``$KIDATA_ROLES``)."""
    return _rows(_user_files())


@cache
def _rows(files: tuple[str | None, Path | None]) -> dict[str, list[dict[str, Any]]]:
    gpus = [{"gpu": g.key, "vendor": g.vendor, "family": g.family, "product": g.product,
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
    implementation_roles = [
        {"kernel": kernel, "role": role, "implementation": name, "preference": i}
        for (kernel, role), names in sorted(roles().items())
        for i, name in enumerate(names, start=1)]
    return {"gpus": gpus, "implementation_roles": implementation_roles, "dtypes": dtypes,
            "byte_models": terms, "flop_models": flop_models(),
            "kernel_families": kernel_families()}


def fingerprint(name: str) -> str:
    """A digest of what the file of reference table ``name`` holds: its rows and columns.
    Written into the file's metadata, it tells a query whether the file is current without
    reading the rows (or importing pyarrow)."""
    return _fingerprint(name, _user_files())


@cache
def _fingerprint(name: str, files: tuple[str | None, Path | None]) -> str:
    columns = [[c.name, c.type, c.nullable] for c in COLUMNS[name]]
    text = json.dumps({"columns": columns, "rows": rows()[name]}, sort_keys=True)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def tables() -> dict[str, pa.Table]:
    """The reference tables as built from the packaged data files, as Arrow tables."""
    return _tables(_user_files())


@cache
def _tables(files: tuple[str | None, Path | None]) -> dict[str, pa.Table]:
    import pyarrow as pa

    from kidata.store.schema import TABLES

    return {name: pa.Table.from_pylist(rows()[name], schema=TABLES[name]) for name in REFERENCE}


def _float(value: float | None) -> float | None:
    return None if value is None else float(value)


def _fingerprints(con: duckdb.DuckDBPyConnection, files: dict[str, Path]) -> dict[str, list]:
    """The fingerprint values each reference table's file carries (an empty list for a file
    that is missing or unreadable), read in one statement: a load and every query session ask
    this of all the files at once."""
    present = {name: path for name, path in files.items() if path.is_file()}
    found: dict[str, list] = {name: [] for name in files}
    if not present:
        return found
    query = ("SELECT file_name, decode(value) FROM parquet_kv_metadata($files) "
             "WHERE decode(key) = $key")
    try:
        rows = con.execute(query, {"files": [str(p) for p in present.values()],
                                   "key": FINGERPRINT_KEY}).fetchall()
    except duckdb.Error:
        # One unreadable file fails the read of all: each file alone (an unreadable one is
        # rewritten by the next load and served from the package meanwhile).
        for name, path in present.items():
            try:
                found[name] = [v for _, v in con.execute(
                    query, {"files": [str(path)], "key": FINGERPRINT_KEY}).fetchall()]
            except duckdb.Error:
                pass
        return found
    by_file: dict[str, list] = {}
    for file, value in rows:
        by_file.setdefault(file, []).append(value)
    for name, path in present.items():
        found[name] = by_file.get(str(path), [])
    return found


def stale(warehouse: Path, con: duckdb.DuckDBPyConnection | None = None) -> list[str]:
    """Reference tables whose file in ``warehouse`` is missing, unreadable, or not written
    from the packaged data of this kidata (by its fingerprint)."""
    db = engine.connect() if con is None else con
    try:
        paths = Layout(warehouse)
        found = _fingerprints(db, {name: paths.reference_file(name) for name in REFERENCE})
        return [name for name in REFERENCE if found[name] != [fingerprint(name)]]
    finally:
        if con is None:
            db.close()


def write(warehouse: Path, con: duckdb.DuckDBPyConnection | None = None) -> bool:
    """Write the reference tables that are missing or out of date (checked on ``con``, if
    given), as one commit (:class:`kidata.store.commit.Transaction`; call under the writer
    lock); False when the warehouse cannot be written (queries then use the packaged data,
    see :func:`define`)."""
    try:
        names = stale(warehouse, con)
        if not names:
            return True
        import pyarrow.parquet as pq

        from kidata.store.commit import Transaction

        # One commit replaces every stale file, each in one rename (a reader sees the old
        # file or the new one).
        tx = Transaction(warehouse, "refresh of the reference tables", faults="reference-")
        try:
            tx.work.mkdir(parents=True)
            for name in names:
                Layout(warehouse).table(name).mkdir(parents=True, exist_ok=True)
                table = tables()[name]
                metadata = dict(table.schema.metadata or {})
                metadata[FINGERPRINT_KEY.encode()] = fingerprint(name).encode()
                prepared = tx.work / f"{name}.parquet"
                pq.write_table(table.replace_schema_metadata(metadata), prepared)
                durable.fsync_file(prepared)
                tx.replace(prepared, Layout(warehouse).reference_file(name))
            tx.commit()
        finally:
            tx.discard()
    except OSError:
        return False
    return True


def define(con: duckdb.DuckDBPyConnection, warehouse: Path,
           names: tuple[str, ...] = REFERENCE) -> None:
    """Define the reference tables' views on ``con`` (``names``: only these): over their files
    in ``warehouse``, or, for those whose file is stale (see :func:`stale`), over the packaged
    data."""
    packaged = stale(warehouse, con)
    for name in names:
        if name in packaged:
            con.register(f"_kidata_reference_{name}", tables()[name])
            body = f"SELECT * FROM _kidata_reference_{name}"
        else:
            body = table_sql(warehouse, name)
        con.execute(f"CREATE VIEW {name} AS {body}")
