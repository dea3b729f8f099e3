"""Take committed loads out of a warehouse (``kidata unload``), and find the ones to take out.

The way out of a warehouse damaged by kidata 0.2.5-0.2.7, whose loads with repeated runs
committed runs twice and lost measurements (issue 25; :func:`damaged_loads` finds them), and of
any load a user wants gone.

A load taken out keeps its commit marker (its row in ``loads``, with ``added`` counting only
what stays and ``records``, ``duplicates``, ``rejected`` and ``rejects_not_kept`` 0) and the
documents it added (environments, protocols, workloads and their parameters, implementations:
keyed by digest, runs of other loads may name them) and the raw samples it added (``samples``,
keyed by run id and content hash: read only beside a run with those numbers); everything else
of it goes: its runs, measurements, published claims, ``latest_runs`` rows and rejects.
Its file manifest goes too, so loading the same files again reads them and adds what they
hold. Every table it touches changes in one :class:`~kidata.store.commit.Transaction` (each
table folder exchanged for its next one: the files without the load's rows, merged into one,
beside hard links to the files it had no row in), so a crash leaves all of it or none.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import duckdb

from kidata.core import engine
from kidata.core.sql import duckdb_type, quote_identifier, union_all
from kidata.errors import NoSuchLoad
from kidata.store import commit, contexts, snapshot
from kidata.store.layout import Layout
from kidata.store.schema import COMMIT_ORDER, TABLES

# The tables whose rows of an unloaded load go. The others a load writes hold documents,
# which stay: a document is a fact about its digest, and later loads' runs may point at it.
REMOVED = ("runs", "run_documents", "measurements", "published", "latest_runs", "rejects")

q = quote_identifier
# Counts of an unloaded load's marker that become 0: the records it read are out.
ZEROED = ("records", "duplicates", "rejected", "rejects_not_kept")
# The runs (``r``) that have no median (or primary statistic) measurement of their metric: a
# run stored without its measurements. A mean-only source (KernelBench, old nvbench) names its
# primary statistic. (kidata check lists them; damaged_loads counts them per load.)
# Two plain anti-joins: one whose condition held a subquery on protocols was ~11x slower at 5M
# runs (docs/benchmarks.md, Run BA).
NO_MEDIAN = (
    "NOT EXISTS (SELECT 1 FROM measurements m WHERE m.run_id = r.run_id AND m.metric = r.metric "
    "AND m.statistic = 'median') AND NOT EXISTS (SELECT 1 FROM measurements m JOIN protocols p "
    "ON p.primary_statistic = m.statistic WHERE m.run_id = r.run_id AND m.metric = r.metric "
    "AND p.protocol_id = r.protocol_id)")
# The releases whose loads with repeated runs could commit damaged tables (issue 25).
DAMAGING = ("0.2.5", "0.2.6", "0.2.7")


def damaged_loads(con: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
    """The loads whose committed rows break the load invariant, with what each broke: a run
    stored more than once (every row after a run's first, by load and file order, blames its
    load), a measurement stored more than once, measurements whose run is not stored, runs
    without their median (or primary statistic) measurement. Needs views ``runs``,
    ``measurements`` and ``protocols`` on ``con`` (every committed row, with ``load_id``)."""
    checks = {
        "runs stored more than once": """
            SELECT load_id, count(*) FROM (
                SELECT load_id, row_number() OVER (PARTITION BY run_id ORDER BY load_id) AS n
                FROM runs) WHERE n > 1 GROUP BY load_id""",
        "measurements stored more than once": """
            SELECT load_id, count(*) FROM (
                SELECT load_id, row_number() OVER (PARTITION BY run_id, metric, statistic
                                                   ORDER BY load_id) AS n
                FROM measurements) WHERE n > 1 GROUP BY load_id""",
        "measurements of runs not stored": """
            SELECT load_id, count(*) FROM measurements m
            WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_id = m.run_id)
            GROUP BY load_id""",
        "runs without their median measurement": f"""
            SELECT load_id, count(*) FROM runs r WHERE {NO_MEDIAN} GROUP BY load_id""",
    }
    # A load of 0.2.5-0.2.7 that copied its kept rows (it had duplicates) could also lose
    # runs with all their measurements, which leaves nothing inconsistent behind but its own
    # count: it read more runs than it added, skipped and rejected. (A record that is a bare
    # document adds no run, so such a load is named too: taking it out and loading it again
    # loses nothing.)
    checks["runs read but neither added, skipped nor rejected (kidata 0.2.5-0.2.7)"] = f"""
        SELECT load_id, missing FROM (
            SELECT load_id, records - duplicates - rejected
                - coalesce(TRY_CAST(json_extract_string(added, '$.runs') AS BIGINT), 0)
                AS missing
            FROM loads WHERE kidata_version IN ({', '.join(map(repr, DAMAGING))})
                AND duplicates > 0)
        WHERE missing > 0"""
    # One statement, its rows in the checks' order.
    whats = list(checks)
    rows = con.execute(union_all(
        f"SELECT {i} AS _check, load_id, CAST(n AS BIGINT) FROM ({sql}) AS c(load_id, n)"
        for i, sql in enumerate(checks.values())) + " ORDER BY _check, load_id").fetchall()
    out: dict[str, list[str]] = {}
    for i, load_id, n in rows:
        out.setdefault(load_id, []).append(f"{n:,} {whats[i]}")
    return dict(sorted(out.items()))


def unload(root: Path, load_ids: list[str]) -> dict[str, int]:
    """Take the committed loads ``load_ids`` out of the warehouse at ``root`` (see the
    module's doc); call under the writer lock. Returns the rows removed per table. Raises
    :class:`NoSuchLoad` for an id that names no committed load (nothing is changed)."""
    layout = Layout(root)
    ids = sorted(set(load_ids))
    con = engine.connect()
    try:
        committed = {load_id for load_id, _ in snapshot.committed(root, con)}
        for load_id in ids:
            if load_id not in committed:
                raise NoSuchLoad(load_id)
        if not ids:
            return {}
        snapshot.id_table(con, "_unloaded", ids)
        plan: dict[str, tuple] = {}
        removed: dict[str, int] = {}
        for table in COMMIT_ORDER:
            if table not in TABLES or table not in snapshot.filtered_tables():
                continue
            files = layout.table_files(table)
            touched = [f for f in files if con.execute(
                "SELECT count(*) FROM read_parquet($f) WHERE load_id IN "
                "(SELECT load_id FROM _unloaded)", {"f": str(f)}).fetchall()[0][0]]
            if not touched or (table != "loads" and table not in REMOVED):
                continue
            keep = [f for f in files if f not in touched]
            if table != "loads":
                removed[table] = con.execute(
                    "SELECT count(*) FROM read_parquet($f, union_by_name = true) WHERE load_id "
                    "IN (SELECT load_id FROM _unloaded)",
                    {"f": [str(f) for f in touched]}).fetchall()[0][0]
            plan[table] = (_writer(con, table, touched), keep)
        # The stored steps go in the same commit (kidata/store/contexts.py: a load stores what
        # it changed, and results leave their groups only here).
        for table in (contexts.TABLE, contexts.EDITS):
            if layout.table_files(table):
                plan[table] = (functools.partial(contexts.write_empty, table=table), [])
        # The manifests first: a crash after this and before the commit only costs reading
        # the loads' files again; the other order could skip files whose runs are gone.
        for load_id in ids:
            layout.files_manifest(load_id).unlink(missing_ok=True)
        commit.replace_tables(root, plan, what=f"unload of {', '.join(ids)}",
                              faults="unload-")
    finally:
        con.close()
    return removed


def _writer(con: duckdb.DuckDBPyConnection, table: str, files: list[Path]):
    """A function writing ``files``' rows of ``table`` without the unloaded loads' rows (for
    ``loads``: their markers with ``added`` counting only what they keep) to its argument."""
    from kidata.store.pqwrite import write_reader

    schema = TABLES[table]
    listed = [str(f) for f in files]
    present: set[str] = set()
    for row in con.execute("SELECT name FROM parquet_schema($f)", {"f": listed}).fetchall():
        present.add(row[0])

    def column(name: str) -> str:
        field = schema.field(name)
        return q(name) if name in present else \
            f"CAST(NULL AS {duckdb_type(field.type)}) AS {q(name)}"

    cols = [column(f.name) for f in schema]
    source = "read_parquet($f, union_by_name = true, filename = true, file_row_number = true)"
    order = "ORDER BY filename, file_row_number"
    if table == "loads":
        markers = con.execute(f"SELECT load_id, added FROM {source} WHERE load_id IN "
                              "(SELECT load_id FROM _unloaded)", {"f": listed}).fetchall()
        kept = {load_id: json.dumps({t: n for t, n in json.loads(added).items()
                                     if t not in REMOVED}, sort_keys=True)
                for load_id, added in markers}
        con.execute("CREATE OR REPLACE TEMP TABLE _added (load_id VARCHAR, added VARCHAR)")
        con.executemany("INSERT INTO _added VALUES (?, ?)", list(kept.items()))
        unloaded = "t.load_id IN (SELECT load_id FROM _unloaded)"

        def marker(name: str, col: str) -> str:
            if name == "added":
                return ("coalesce((SELECT a.added FROM _added a WHERE a.load_id = t.load_id), "
                        "t.added) AS added")
            if name in ZEROED:  # what it read is no longer in the warehouse
                return f"CASE WHEN {unloaded} THEN 0 ELSE {col} END AS {q(name)}"
            return col
        cols = [marker(f.name, c) for f, c in zip(schema, cols, strict=True)]
        query = f"SELECT {', '.join(cols)} FROM {source} t {order}"
    else:
        query = (f"SELECT {', '.join(cols)} FROM {source} WHERE load_id NOT IN "
                 f"(SELECT load_id FROM _unloaded) {order}")

    def write(out: Path) -> int:
        reader = con.sql(query, params={"f": listed}).to_arrow_reader(8192)
        return write_reader(out, schema, reader, create_empty=True)

    return write
