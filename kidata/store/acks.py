"""Acknowledgements: slowdowns someone said are intended (``kidata ack``), kept in the
warehouse's ``acknowledgements`` table, so that ``kidata gate`` and ``regressions`` leave them
out (and say how many they left out) instead of failing every build after an accepted
trade-off.

An acknowledgement names the run that was slower (the candidate's run of a gate, the newer run
of a regression), who said it, why and when. It is added in one atomic step: one new Parquet
file renamed into the table's folder (:func:`kidata.store.durable.write_atomic`, under the
writer lock), so a reader sees it whole or not at all; compaction merges such files as any
table's.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any

from kidata.errors import UsageError
from kidata.store import commit, durable
from kidata.store.layout import Layout

TABLE = "acknowledgements"
# A reason is said in a line or a paragraph; the cap keeps one row from being a document.
MAX_REASON = 4096


def ensure_table(layout: Layout) -> None:
    """Give the table its (empty) file when it has none, so that an engine reading the
    Parquet folders alone (plain Spark infers a schema from files) can define the views that
    read it. Called by every load under the writer lock: once per warehouse."""
    if layout.table_files(TABLE):
        return
    from kidata.store.schema import TABLES

    _add_file(layout, TABLES[TABLE].empty_table())


def _add_file(layout: Layout, table: Any) -> None:
    """Add ``table`` (Arrow) to the folder as one new file, atomically."""
    import io

    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd")
    layout.table(TABLE).mkdir(parents=True, exist_ok=True)
    durable.write_atomic(layout.part(TABLE, commit.new_id()), buffer.getvalue())


def acknowledge(layout: Layout, writer_lock: Callable[[], AbstractContextManager],
                rows: list[dict[str, Any]], reason: str, author: str) -> int:
    """Add one acknowledgement per row (``run_id`` and what is known of it: baseline_run_id,
    kernel, pass, workload, gpu, implementation, change), with ``reason`` and ``author``.
    Returns the rows added."""
    import pyarrow as pa

    from kidata.store.schema import TABLES

    reason, author = reason.strip(), author.strip()
    if not reason:
        raise UsageError("an acknowledgement needs a reason (--reason): say why the slowdown "
                         "is intended")
    if len(reason) > MAX_REASON:
        raise UsageError(f"the reason is {len(reason):,} characters; at most {MAX_REASON:,}")
    if not author:
        raise UsageError("an acknowledgement needs an author (--by)")
    if not rows:
        return 0
    now = datetime.now(UTC)
    names = TABLES[TABLE].names
    table = pa.Table.from_pylist(
        [{**{k: r.get(k) for k in names}, "reason": reason, "author": author,
          "acknowledged_at": now} for r in rows], schema=TABLES[TABLE])

    with writer_lock():
        _add_file(layout, table)
    return table.num_rows
