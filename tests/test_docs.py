"""Generated reference docs must be current: regenerate with `python -m kidata.docs`."""

from __future__ import annotations

from pathlib import Path

import pytest

from kidata import docs
from kidata.docs import GENERATED

ROOT = Path(__file__).parent.parent


@pytest.mark.parametrize("relative", sorted(GENERATED))
def test_generated_doc_is_current(relative: str):
    committed = (ROOT / relative).read_text("utf-8")
    assert committed == GENERATED[relative](), (
        f"{relative} is stale: run `python -m kidata.docs` and commit the result")


def test_readme_links_the_references():
    readme = (ROOT / "README.md").read_text("utf-8")
    for relative in GENERATED:
        assert f"({relative})" in readme


def test_architecture_states_the_layer_table_the_structure_test_enforces(monkeypatch):
    """docs/architecture.md holds the table of kidata.docs.LAYERS, and the check above fails
    when the code's table changes and the doc does not."""
    committed = (ROOT / "docs" / "architecture.md").read_text("utf-8")
    assert docs.layers_markdown() in committed
    monkeypatch.setattr(docs, "LAYERS", docs.LAYERS[:-1])
    assert docs.architecture_markdown() != committed


def test_the_layer_table_needs_its_place_in_the_doc(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "architecture.md").write_text("# Architecture\n", "utf-8")
    with pytest.raises(ValueError, match="lacks the lines"):
        docs.architecture_markdown(tmp_path)
def test_the_configuration_table_lists_every_declared_variable():
    from kidata.core.config import VARIABLES

    text = (ROOT / "docs" / "configuration.md").read_text("utf-8")
    listed = [line.split("`")[1] for line in text.splitlines() if line.startswith("| `")]
    assert listed == [v.name for v in VARIABLES], (
        "docs/configuration.md is stale: run `python -m kidata.docs` and commit the result")


# -- docs/spark.md: the Polars and pyarrow examples ---------------------------------------------

ENGINE_MARKER = "<!-- tested: tests/test_docs.py runs this block -->\n```python\n"


@pytest.fixture(scope="module")
def half_committed(tmp_path_factory):
    """The seeds loaded through the library, and the runs file of a load killed before its
    commit marker (in place in the runs folder, not listed in loads): what a reader that
    skips the snapshot rule shows and kidata does not."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from kidata import Warehouse

    wh = Warehouse(tmp_path_factory.mktemp("engines") / "wh")
    assert wh.load([str(ROOT / "tests" / "data" / "seeds")]).ok
    runs = pq.read_table(next((wh.path / "runs").glob("*.parquet")))
    ghost = runs.set_column(0, "run_id", pa.array(["ghost-" + r for r in
                                                    runs["run_id"].to_pylist()]))
    at = ghost.schema.get_field_index("load_id")
    ghost = ghost.set_column(at, ghost.schema.field(at),
                             pa.array(["20991231T000000000000Z-killed"] * ghost.num_rows))
    pq.write_table(ghost, wh.path / "runs" / "part-20991231T000000000000Z-killed.parquet")
    return wh


@pytest.mark.parametrize("engine", ["polars", "pyarrow"])
def test_docs_engine_examples_give_duckdbs_rows(half_committed, engine):
    """docs/spark.md's Polars and pyarrow-dataset examples, run on the warehouse as it is,
    give the rows of DuckDB's runs table (kidata's), the uncommitted load's runs hidden."""
    doc = (ROOT / "docs" / "spark.md").read_text("utf-8")
    blocks = [part.split("```", 1)[0] for part in doc.split(ENGINE_MARKER)[1:]]
    block = {"polars": blocks[0], "pyarrow": blocks[1]}[engine]
    assert f"import {engine}" in block
    literal = '"/data/kidata-warehouse"'
    assert literal in block
    scope: dict = {}
    exec(compile(block.replace(literal, repr(str(half_committed.path))), "docs/spark.md",
                 "exec"), scope)
    runs = scope["runs"]
    columns = runs.columns if engine == "polars" else runs.column_names
    rows = runs.rows() if engine == "polars" else [tuple(r.values()) for r in runs.to_pylist()]
    duck = half_committed.relation("runs")
    assert columns == duck.columns
    expected = duck.fetchall()
    assert len(expected) == 26  # the seeds' runs; the killed load's 26 are not among them
    assert sorted(rows, key=lambda r: r[0]) == sorted(expected, key=lambda r: r[0])
