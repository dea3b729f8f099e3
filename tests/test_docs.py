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
