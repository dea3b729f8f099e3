"""Rebuild kernelindex records from the warehouse: records → warehouse → records.

``run_documents`` keeps each BenchmarkRun exactly as loaded, and the ``environments``,
``protocols``, ``workloads`` and ``implementations`` tables keep the documents it points at;
together they give back one bundle per run, ``{"run": …, "protocol": …, "environment": …,
"workload": …, "implementation": …}``, in the form ``kidata load`` reads (JSON Lines).
``kidata export runs --format kernelindex`` writes them; the property tests load, export and
load again.

What does not come back: a bundle's title line, and — when several records share a document
digest with different metadata (names, titles) — any metadata but the first loaded.
Metadata never changes a digest, so identities are unaffected.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from kidata.query.session import Queryable

QUERY = """
SELECT r.run_id, d.document AS run, p.document AS protocol, e.document AS environment,
       w.document AS workload, i.document AS implementation
FROM runs r
LEFT JOIN run_documents d ON d.run_id = r.run_id
LEFT JOIN protocols p ON p.protocol_id = r.protocol_id
LEFT JOIN environments e ON e.environment_id = r.environment_id
LEFT JOIN workloads w ON w.workload_id = r.workload_id
LEFT JOIN implementations i ON i.implementation_id = r.implementation_id
ORDER BY r.run_id
"""
BATCH = 10_000


def bundles(db: Queryable) -> Iterator[dict[str, Any]]:
    """One kernelindex bundle per run in the warehouse, ordered by run id."""
    reader = db.sql(QUERY).to_arrow_reader(BATCH)
    for batch in reader:
        for row in batch.to_pylist():
            run_id = row.pop("run_id")
            if row["run"] is None:  # never silently a bundle without its run
                from kidata.errors import WarehouseError

                raise WarehouseError(f"run {run_id} has no document in run_documents; "
                                     "kidata check lists what else is missing")
            yield {role: orjson.loads(text) for role, text in row.items() if text is not None}


def write_jsonl(db: Queryable, out: IO[bytes]) -> int:
    """Write every bundle as one JSON line; returns how many."""
    count = 0
    for bundle in bundles(db):
        out.write(orjson.dumps(bundle) + b"\n")
        count += 1
    return count


def export(db: Queryable, path: Path, parents: bool = False) -> int:
    """Write the bundles to ``path`` (JSON Lines), whole or not at all
    (:func:`kidata.query.outfile.writing`)."""
    from kidata.query import outfile

    with outfile.writing(path, parents) as tmp, open(tmp, "wb") as fh:
        count = write_jsonl(db, fh)
    return count
