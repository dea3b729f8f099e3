"""Rows of the dimension tables are staged once per key (kidata/ingest/stage.py,
``StagingWriter.add``): a later row with the same key is dropped, except that a workload known
only by its digest gives way to a later record that brings its Workload document."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from kidata import Warehouse
from kidata.ingest.readers import read_file

LIGER = Path(__file__).parents[1] / "data" / "liger" / "edge_cases.csv"


def _records() -> tuple[dict, dict]:
    """A Liger CSV row as a kernelindex bundle with its Workload and Implementation documents,
    and another run of the same workload (its own name) that names them by digest only."""
    item = next(iter(read_file(str(LIGER), None)))
    full = copy.deepcopy(item.docs)
    bare = {role: doc for role, doc in copy.deepcopy(item.docs).items()
            if role not in ("workload", "implementation")}
    bare["run"]["metadata"]["name"] += "-bare"
    return bare, full


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.parametrize("digest_first", [True, False])
def test_a_workload_named_by_digest_keeps_the_document_another_record_brings(
        tmp_path, monkeypatch, workers, digest_first):
    monkeypatch.setenv("KIDATA_WORKERS", workers)
    bare, full = _records()
    source = tmp_path / "a.jsonl"
    records = [bare, full] if digest_first else [full, bare]  # either order, the same tables
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    wh = Warehouse(tmp_path / "wh")
    report = wh.load([str(source)])
    assert (report.added["runs"], report.rejected) == (2, 0)
    digest = full["run"]["spec"]["workloadDigest"]
    # One row for the workload, with the document (a digest-only row staged first gives
    # way), and the same for the implementation.
    assert wh.sql("SELECT workload_id, document IS NOT NULL FROM workloads").fetchall() == [
        (digest, True)]
    assert wh.sql("SELECT count(*), count(document) FROM implementations").fetchall() == [(1, 1)]
    assert wh.check().problems == []
