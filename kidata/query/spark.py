"""Run kidata's views in Spark SQL over the same Parquet files.

When a warehouse outgrows one machine, point Spark at its folders::

    from pyspark.sql import SparkSession
    import kidata.spark

    spark = (SparkSession.builder
             .config("spark.sql.session.timeZone", "UTC")   # kidata's timestamps are UTC
             .getOrCreate())
    kidata.spark.register(spark, "s3a://bucket/warehouse")
    spark.sql("SELECT * FROM speedup_summary").show()

:func:`register` makes every table folder a temporary view of the same name and then runs each
``sql/*.sql`` body *unchanged* as ``CREATE OR REPLACE TEMP VIEW <name> AS <body>``, in
dependency order. The view files are written in standard SQL so that DuckDB and Spark give the
same rows; ``tests/query/test_spark.py`` checks every view against DuckDB on the sample data.

Spark reads the files once, when a table is registered: call :func:`register` again after a
load to see the new files. PySpark is optional (``pip install 'kidata[spark]'``, and Java 17+).
See ``docs/spark.md``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from kidata.core import viewfiles
from kidata.core.viewfiles import View, load_views, with_dependencies
from kidata.errors import KidataError, NoSuchView, QueryError, WarehouseError
from kidata.query.session import closest_names
from kidata.store import commit, contexts, derived, reference, snapshot, tablesql
from kidata.store.schema import REFERENCE, TABLES

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# Hadoop glob metacharacters: Spark expands them in a path it reads, so a literal one in a local
# warehouse path is escaped with a backslash.
_GLOB_CHARS = re.compile(r"([\\{}\[\]*?])")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")

_LOAD_IDS = pa.schema([pa.field("load_id", pa.string(), nullable=False)])
# Spark error conditions that mean "no readable Parquet file in this folder": the table is empty.
_NO_FILES = ("PATH_NOT_FOUND", "UNABLE_TO_INFER_SCHEMA")


class SparkViewError(QueryError):
    """Some views could not be created in Spark. The others are registered and usable.

    ``failures`` maps each failed view to Spark's message; ``registered`` lists the tables and
    views that were registered.
    """

    def __init__(self, failures: dict[str, str], registered: list[str]):
        lines = [f"{len(failures)} view(s) do not run in Spark:"]
        lines += [f"  {name}: {message}" for name, message in failures.items()]
        super().__init__("\n".join(lines))
        self.failures = failures
        self.registered = registered


# Views computed once, by the first query that reads them (Spark's cache), instead of planned in
# every view that reads them: small results of large plans. Their rows are the SQL body's.
MATERIALIZED = ("noise_envelopes",)


def register(spark: SparkSession, warehouse_path: str | os.PathLike[str],
             min_effect: float | None = None, views: Iterable[str] | None = None
             ) -> list[str]:
    """Register every table of the warehouse and every kidata view as Spark temp views.

    ``warehouse_path`` is a local folder or any URI Spark can read (``hdfs://``, ``s3a://``, …).
    Each table ``<warehouse>/<table>/*.parquet`` is read with its declared schema
    (:mod:`kidata.store.schema`), so Spark opens no file to plan it: a column the files of an
    older kidata lack reads as null, a column this kidata does not declare is not shown, and
    a missing or empty folder is an empty table of those columns. As in DuckDB, the tables
    show a snapshot of whole committed loads: ``loads`` is read first and every table loads
    write is filtered to its load ids (the rule of :mod:`kidata.store.snapshot`). Then each
    view's SQL body runs unchanged (analyzed once, here). Returns the registered names,
    tables first, then views in dependency order.

    Views in :data:`MATERIALIZED` (``noise_envelopes``: a few rows computed from every run)
    are computed once, by the first query that reads them, and the ``latest_runs`` rows of
    loads written before 0.3.0 once at registration, so that the views reading them stay
    small plans.

    ``min_effect`` sets the verdict rule's minimum effect (the ``verdict_settings`` view; None:
    its own 0.10). Register again to change it: a Spark temp view may keep the plan of the
    views it read when it was defined.

    ``views`` names the views wanted (None: all): those and the views they read are
    registered, no others. Spark analyzes each view when it is registered, and a view's
    analysis covers the whole chain under it (5-10 s each for the series views even on a few
    runs: every view 54-65 s on the seeds, ``speedups`` alone 2.4 s warm, docs/spark.md); a
    job that asks one question need not pay for all of them. An unknown name raises
    :class:`NoSuchView` (a :class:`KidataError`) naming the closest views.

    Timestamps are UTC instants; set ``spark.sql.session.timeZone=UTC`` so that Spark shows
    them, and any date arithmetic in the views, in UTC as DuckDB does.

    Raises :class:`SparkViewError` (after registering everything else) when some views fail,
    :class:`WarehouseError` when a local warehouse folder does not exist, a URI holds no table
    folder at all, or a table's folder cannot be listed, :class:`NewerLayout` when a
    local warehouse's ``_kidata/layout.json`` names a layout newer than this kidata reads (a
    URI's is not checked), and :class:`KidataError` when PySpark is not installed.
    """
    exceptions = _pyspark_errors()
    wanted = _wanted(views)  # an unknown name is refused before anything is read
    root, local = _root(warehouse_path)
    if local is not None:
        # A warehouse of a newer layout is refused, as by DuckDB (what a newer layout changed
        # could make these answers wrong). A URI's layout file is not read: see docs/spark.md.
        commit.check_layout(local)
    # Layout 1 (kidata 0.3.13 and older) kept each run's document in its runs row: read there.
    # (A URI's layout is not known; its run_documents folder is read.)
    documents_from = ("runs" if local is not None and tablesql.documents_in_runs(local)
                      else "run_documents")
    # Reference tables whose file is missing or out of date are served from the packaged data,
    # as Warehouse.connect does for DuckDB (only checkable for a local warehouse).
    packaged = set(reference.stale(local)) if local else set()
    read: dict[str, DataFrame] = {}
    absent: list[str] = []
    # The snapshot rule (kidata/store/snapshot.py), as for DuckDB: the committed loads are listed
    # first (Spark lists a table's files when it is read), their ids collected, and every
    # table loads write shows only the rows of those loads. A load whose commit marker is not
    # written yet — in progress, or killed mid-commit — is hidden in every table at once.
    for table in ["loads", *(t for t in TABLES if t != "loads")]:
        schema = TABLES[table]
        folder = documents_from if table == "run_documents" else table
        frame = None if table in packaged else _read_table(spark, root, table, schema,
                                                           exceptions, absent, folder)
        if frame is None:  # no files: the declared columns, and no rows or the packaged ones
            rows = reference.tables()[table].to_pylist() if table in REFERENCE else []
            frame = _literal_frame(spark, rows, schema)
        read[table] = frame
        if table == "loads":
            # One read of the markers: the snapshot's ids, and which loads are older than
            # latest_runs' current columns.
            loads = [(row["load_id"], row["kidata_version"])
                     for row in frame.select("load_id", "kidata_version").collect()]
            _literal_frame(spark, [{"load_id": i} for i, _ in loads], _LOAD_IDS
                           ).createOrReplaceTempView(snapshot.VISIBLE)
    if not local and len(absent) == len(TABLES):
        # A local folder is checked above; for a URI, no table folder at all is a wrong path.
        raise WarehouseError(f"no kidata table folders (runs, measurements, ...) under {root}")
    frames: dict[str, DataFrame] = {}
    filtered = set(snapshot.filtered_tables())
    for table in TABLES:
        frame = read[table]
        if table in filtered:
            files = f"_kidata_files_{table}"
            frame.createOrReplaceTempView(files)
            frame = spark.sql(snapshot.visible_sql(files))
        frames[table] = frame
        frame.createOrReplaceTempView(table)
    _derive_old_loads(spark, frames, derived.underived(loads))
    registered = list(frames)

    failures: dict[str, str] = {}
    # Where every load stored its steps (kidata.store.contexts), the views of sql/stored/ are
    # read from them: each after the views it then reads.
    stored: dict[str, View] = {}
    if any(v.name in viewfiles.stored_views() for v in wanted) and contexts.readable(spark):
        stored = dict(viewfiles.stored_views())
        wanted = _ordered([w.name for w in wanted] if views is None else list(views), stored)
    for view in wanted:
        read = stored.get(view.name, view)  # every load stored its steps, as in DuckDB
        broken = [d for d in read.depends if d in failures]
        if broken:
            failures[view.name] = f"reads view(s) that failed: {', '.join(broken)}"
            continue
        body = read.body
        if view.name == "verdict_settings" and min_effect is not None:
            body = f"SELECT CAST({float(min_effect)!r} AS DOUBLE) AS min_effect"
        try:
            # The body analyzed once, here, and kept as the view's plan: a view made from SQL
            # text is analyzed again, with every view under it, each time another view reads
            # it (26 of register's 27 s at 1M runs went to that).
            frame = spark.sql(body)
            if view.name in MATERIALIZED:
                # Computed once, by the first query that reads it, and kept (Spark's cache):
                # a small table whose plan (every run's statistics) the queries reading it
                # then plan as one leaf instead of carrying it, several times over. Not at
                # registration: at 1M runs that took 41-80 s. A cached plan equal to this one
                # (an earlier register of the same loads) is dropped first: it may list files
                # a compaction has since merged away.
                frame.unpersist()
                frame = frame.cache()
            frame.createOrReplaceTempView(spark_identifier(view.name))
        except exceptions as exc:
            failures[view.name] = f"{view.path.name}: {_message(exc)}"
            continue
        registered.append(view.name)
    if failures:
        raise SparkViewError(failures, registered)
    return registered


def _wanted(views: Iterable[str] | None) -> list[View]:
    """The views to register, in dependency order: ``views`` and every view they read (all
    when None)."""
    known = load_views()
    if views is None:
        return list(known.values())
    views = list(views)
    for name in views:
        if name not in known:
            raise NoSuchView(name, list(known), closest_names(name, known))
    return [known[name] for name in with_dependencies(views)]


def _ordered(names: list[str], stored: dict[str, View]) -> list[View]:
    """The views ``names`` and those they read, each after the views it reads: by the bodies
    in ``stored`` where they have one (a stored body reads other views than its file's)."""
    known = load_views()
    out: dict[str, View] = {}

    def visit(name: str) -> None:
        if name in out:
            return
        for dep in (stored[name] if name in stored else known[name]).depends:
            visit(dep)
        out[name] = known[name]

    for name in names:
        visit(name)
    return list(out.values())


def _derive_old_loads(spark: SparkSession, frames: dict[str, DataFrame], old: list[str]
                      ) -> None:
    """The loads ``old`` (written before ``latest_runs`` had its current columns, or before
    it existed) have no rows there or incomplete ones: compute theirs from their runs with the
    SQL a commit uses (kidata/store/derived.py), as DuckDB does."""
    if not old:
        return
    ids = _literal_frame(spark, [{"load_id": i} for i in old], _LOAD_IDS)
    ids.createOrReplaceTempView("_kidata_underived_loads")
    computed = spark.sql(derived.latest_runs_of("_kidata_underived_loads"))
    stored = frames["latest_runs"].join(ids, "load_id", "left_anti")
    names = TABLES["latest_runs"].names
    # Computed once (a few rows per key and load): the views that read latest_runs then plan
    # over a table, not over every run's statistics.
    frame = stored.select(*names).unionByName(computed.select(*names)).localCheckpoint(
        eager=True)
    frames["latest_runs"] = frame
    frame.createOrReplaceTempView("latest_runs")


def spark_identifier(name: str) -> str:
    """Quote an identifier for Spark SQL (backticks; DuckDB's double quotes are strings there)."""
    return "`" + name.replace("`", "``") + "`"


def spark_schema(schema: pa.Schema) -> Any:
    """The Spark ``StructType`` equivalent to a kidata Arrow schema."""
    _pyspark_errors()
    from pyspark.sql import types as T

    def convert(type_: pa.DataType) -> Any:
        if pa.types.is_timestamp(type_):
            # An Arrow timestamp with a zone is an instant (Spark TIMESTAMP); without one it is
            # a wall-clock time (Spark TIMESTAMP_NTZ).
            return T.TimestampType() if type_.tz else T.TimestampNTZType()
        simple = {
            pa.string(): T.StringType(), pa.large_string(): T.StringType(),
            pa.float64(): T.DoubleType(), pa.float32(): T.FloatType(),
            pa.int64(): T.LongType(), pa.int32(): T.IntegerType(),
            pa.int16(): T.ShortType(), pa.int8(): T.ByteType(),
            pa.bool_(): T.BooleanType(), pa.date32(): T.DateType(),
        }
        if type_ in simple:
            return simple[type_]
        raise KidataError(f"no Spark type for the Arrow type {type_} (kidata.query.spark)")

    return T.StructType([T.StructField(f.name, convert(f.type), f.nullable) for f in schema])


def _read_table(spark: SparkSession, root: str, table: str, schema: pa.Schema,
                exceptions: tuple[type[BaseException], ...], absent: list[str],
                folder: str | None = None) -> DataFrame | None:
    """The table's Parquet files (those of ``folder``, by default the table's) read with its
    declared columns; None when its folder is missing (and its name is added to ``absent``)."""
    folder = folder or table
    try:
        # The declared schema, not mergeSchema or inference: Spark then opens no file to plan
        # the table (merging every file's footer took 30 s at 1M runs), a column missing from
        # older files reads as null, and the types are the ones `kidata check` holds every
        # file to. The folder, not a glob of its files: Spark skips names starting with '_' or
        # '.', pathGlobFilter keeps only the Parquet files, and this works on any file system.
        frame = (spark.read.schema(spark_schema(schema)).option("pathGlobFilter", "*.parquet")
                 .parquet(f"{root}/{folder}"))
    except exceptions as exc:
        condition = _condition(exc)
        if condition == "PATH_NOT_FOUND":
            absent.append(table)
        if condition in _NO_FILES:
            return None
        raise WarehouseError(f"Spark cannot read table {table} at {root}/{folder}: "
                             f"{_message(exc)}") from None
    return frame


def _literal_frame(spark: SparkSession, rows: list[dict], schema: pa.Schema) -> DataFrame:
    """A small table built from literals in the JVM (``createDataFrame`` from Python rows would
    start Python worker processes to decode them on every query)."""
    from pyspark.sql import functions as F

    fields = spark_schema(schema).fields

    def columns(row: dict) -> list:
        return [F.lit(row.get(f.name)).cast(f.dataType).alias(f.name) for f in fields]

    if not rows:
        return spark.range(0).select(*columns({}))
    return spark.range(1).select(F.inline(F.array(*[F.struct(*columns(r)) for r in rows])))


def _root(warehouse_path: str | os.PathLike[str]) -> tuple[str, Path | None]:
    """The warehouse location as Spark reads it, and the local folder (None for a URI)."""
    text = os.fspath(warehouse_path)
    if _URI.match(text):
        return text.rstrip("/"), None
    path = Path(text).resolve()
    if not path.is_dir():
        raise WarehouseError(f"no warehouse folder at {path}")
    return _GLOB_CHARS.sub(r"\\\1", str(path)), path


def _pyspark_errors() -> tuple[type[BaseException], ...]:
    try:
        from pyspark.errors import PySparkException
    except ImportError:
        raise KidataError("kidata.spark needs PySpark: pip install 'kidata[spark]' "
                          "(Spark also needs Java 17 or later)") from None
    return (PySparkException,)


def _condition(exc: BaseException) -> str | None:
    get = getattr(exc, "getCondition", None) or getattr(exc, "getErrorClass", None)
    return get() if get else None


def _message(exc: BaseException) -> str:
    # Spark appends the JVM stack trace and a long query context; the first line says it all.
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
