"""A warehouse written in an older layout brought to the current one, under the writer lock.

Every writer (a load's commit, ``kidata compact``, ``kidata check --repair``, ``kidata
unload``, ``kidata ack``) takes the writer lock through :meth:`kidata.Warehouse.writer_lock`,
which upgrades the warehouse before anything else: the files a writer adds are in the current
layout, and a warehouse never mixes two. Readers read either layout as it is
(:mod:`kidata.store.tablesql`), so a warehouse that no writer touches is read by this kidata
without a change.

Layout 2 → 3 (kidata 0.3.15): ``step_context`` holds whole steps instead of fingerprinted
contexts; its old rows are dropped (:func:`_steps_afresh`) and stored again by the next writer
that stores steps.

Layout 1 → 2 (kidata 0.3.14): each run's document leaves its ``runs`` row for ``run_documents``
(issue 30: a scan of ``runs`` read ~1 KB of JSON per run, and its row groups were cut at a few
thousand runs). Every ``runs`` file ``<name>`` becomes a narrow file of the same name, its rows
sorted as a load writes them, and a ``run_documents/<name>`` file holds its
runs' documents, row for row, with their ``load_id`` and ``loaded_at``: each load's rows stay
in files of their own (``kidata unload`` and the snapshot rule are unchanged). One
:class:`~kidata.store.commit.Transaction` makes the change: the documents' files, then
``layout.json`` (layout 2), then the narrow ``runs`` files. A crash before its journal changes
nothing; after it, the next writer completes it. A reader meanwhile may fail with a missing
column (it read layout 1 and then a narrow file); run it again. It never sees a wrong answer.
"""

from __future__ import annotations

from pathlib import Path

from kidata.errors import WarehouseError
from kidata.store import durable
from kidata.store.commit import Transaction, check_layout, layout_bytes
from kidata.store.layout import Layout, prepared_layout, witness_name

# Rows read at a time from a layout-1 runs file (each holds its document: ~1-2 KB a row).
BATCH = 8192


def upgrade(root: Path) -> list[str]:
    """Bring the warehouse at ``root`` to :data:`~kidata.store.layout.CURRENT_LAYOUT` (call
    under the writer lock); returns what was done, one line each (none: it was current)."""
    number = check_layout(root)
    done = []
    if number < 2:
        done.append(_documents_apart(root))
    if number < 3:
        done.append(_steps_afresh(root))
    return done


def _documents_apart(root: Path) -> str:
    """Layout 1 → 2: the runs' documents into ``run_documents`` (see the module's doc)."""
    import pyarrow as pa
    import pyarrow.parquet as pq


    layout = Layout(root)
    if layout.table_files("run_documents"):  # layout 1 has none: whose are they?
        raise WarehouseError(
            f"cannot upgrade the warehouse {root} from layout 1 to 2: its "
            "run_documents/ folder holds files, which no kidata of layout 1 writes; nothing was "
            "changed. Move them out of the warehouse and run again")
    tx = Transaction(root, "upgrade to layout 2", faults="upgrade:")
    runs = 0
    try:
        tx.work.mkdir(parents=True, exist_ok=True)
        files = layout.table_files("runs")
        narrow: list[tuple[Path, Path]] = []
        for n, stored in enumerate(files):
            try:
                if "document" not in pq.read_schema(stored).names:
                    continue  # narrow already (a layout file lost, then written again as 1)
                documents, rows = _split(stored, tx.work, n)
            except (OSError, ValueError, TypeError, pa.ArrowException) as exc:  # input
                rel = stored.relative_to(root)
                raise WarehouseError(
                    f"cannot upgrade the warehouse {root} from layout 1 to 2: "
                    f"{rel} cannot be read as a runs file ({exc}); nothing was changed. "
                    "Restore the file, or move it out of the warehouse, and run again "
                    "(kidata check lists what else is wrong)") from None
            runs += rows
            tx.add(documents, layout.table("run_documents") / stored.name)
            narrow.append((tx.work / f"runs-{n}.parquet", stored))
        layout.table("run_documents").mkdir(exist_ok=True)
        _replace_layout(tx, layout, 2)
        for prepared, stored in narrow:
            tx.replace(prepared, stored)
        warning = tx.commit()
    finally:
        tx.discard()
    return (f"upgraded the warehouse from layout 1 to 2: the documents of "
            f"{runs:,} runs ({len(narrow):,} runs files) moved to run_documents"
            + (f" ({warning})" if warning else ""))


def _steps_afresh(root: Path) -> str:
    """Layout 2 → 3: ``step_context`` emptied (one file with no row). Its rows held each step's
    context with the fingerprint of the results it depended on (kidata 0.3.7-0.3.14); they
    now hold each whole step (:mod:`kidata.store.contexts`), and the next writer that stores
    steps computes them all. One :class:`~kidata.store.commit.Transaction`: the table's folder
    exchanged with one holding the empty file, and ``layout.json`` (layout 3)."""
    from kidata.store import contexts

    layout = Layout(root)
    had = len(layout.table_files(contexts.TABLE))
    tx = Transaction(root, "upgrade to layout 3", faults="upgrade:")
    try:
        tx.work.mkdir(parents=True, exist_ok=True)
        witness = witness_name(tx.name)
        nxt = layout.next_table(tx.work, contexts.TABLE)
        nxt.mkdir(parents=True)
        contexts.write_empty(nxt / witness)
        durable.fsync_dir(nxt)
        layout.table(contexts.TABLE).mkdir(exist_ok=True)
        _replace_layout(tx, layout, 3)
        tx.exchange(nxt, layout.table(contexts.TABLE), witness)
        warning = tx.commit()
    finally:
        tx.discard()
    return (f"upgraded the warehouse from layout 2 to 3: step_context emptied ({had:,} files "
            "of steps' contexts in the format of kidata 0.3.7-0.3.14); the next load from "
            "KIDATA_CONTEXTS_AT runs, or kidata compact, stores every step"
            + (f" ({warning})" if warning else ""))


def _replace_layout(tx: Transaction, layout: Layout, number: int) -> None:
    """Have ``tx`` replace ``layout.json`` by one saying layout ``number``."""
    new_layout = prepared_layout(tx.work)
    new_layout.write_bytes(layout_bytes(number))
    durable.fsync_file(new_layout)
    tx.replace(new_layout, layout.layout_file)


def _split(stored: Path, work: Path, n: int) -> tuple[Path, int]:
    """Write the narrow version of the layout-1 runs file ``stored`` (``work/runs-<n>``) and
    its documents (``work/run_documents-<n>``), both fsync'd; returns the documents' file and
    its rows."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from kidata.store import finalize
    from kidata.store.pqwrite import Clustered, GroupedWriter, write_reader
    from kidata.store.schema import TABLES, clustered_keys

    source = pq.ParquetFile(stored)
    runs_schema, docs_schema = TABLES["runs"], TABLES["run_documents"]
    runs_out, docs_out = work / f"runs-{n}.parquet", work / f"run_documents-{n}.parquet"
    with GroupedWriter(runs_out, runs_schema, max_bytes=finalize.group_bytes("runs")) as rw, \
            GroupedWriter(docs_out, docs_schema) as dw:
        # A file written before 0.3.12 is in input order: clustered as a load writes now.
        sink = Clustered(rw, clustered_keys("runs"), finalize.CLUSTER_BYTES)
        documented = 0
        for batch in source.iter_batches(batch_size=BATCH):
            rows = pa.Table.from_batches([batch])
            sink.write(rows.select(runs_schema.names).cast(runs_schema))
            # A run stored without its document (damage kidata check reports) keeps its row;
            # it has no document to move, and check goes on reporting it.
            docs = rows.select(docs_schema.names).filter(pc.is_valid(rows["document"]))
            documented += docs.num_rows
            dw.write(docs.cast(docs_schema))
            pa.default_memory_pool().release_unused()
        sink.close()
    for path, schema in ((runs_out, runs_schema), (docs_out, docs_schema)):
        if not path.exists():  # a file of no rows stays one
            write_reader(path, schema, iter(()), create_empty=True)
    if rw.rows != source.metadata.num_rows or dw.rows != documented:
        raise WarehouseError(f"{stored}: upgrading wrote {rw.rows:,} runs and {dw.rows:,} "
                             f"documents of {source.metadata.num_rows:,} rows")
    for path in (runs_out, docs_out):
        durable.fsync_file(path)
    return docs_out, dw.rows
