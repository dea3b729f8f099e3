"""Every view's header documents exactly the columns it returns, docs/views.md is generated
from those headers, and the view SQL stays within what DuckDB and Spark SQL both accept."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kidata import Warehouse
from kidata.core.viewfiles import load_views
from kidata.docs import efficiency_markdown, views_markdown

ROOT = Path(__file__).parents[2]
VIEWS = sorted(load_views())

# DuckDB-only syntax and functions that Spark SQL rejects or reads differently.
NOT_PORTABLE = {
    r"::": "a :: cast (use CAST(x AS type))",
    r"\bQUALIFY\b": "QUALIFY (filter a window in an outer query)",
    r'"': "double quotes (Spark reads them as strings; leave identifiers unquoted)",
    r"\bjson_\w+\s*\(": "a JSON function",
    r"\blist_\w+\s*\(": "a list function",
    r"\bepoch\s*\(": "epoch()",
    r"\bEXCLUDE\b": "SELECT * EXCLUDE",
    r"\bGROUP BY ALL\b": "GROUP BY ALL",
    r"\bstrftime\s*\(": "strftime()",
}


@pytest.fixture(scope="module")
def wh(tmp_path_factory) -> Warehouse:
    wh = Warehouse(tmp_path_factory.mktemp("wh"))
    wh.load([str(ROOT / "tests" / "data" / "seeds")])
    return wh


@pytest.mark.parametrize("name", VIEWS)
def test_header_documents_exactly_the_columns(wh: Warehouse, name: str):
    view = load_views()[name]
    assert view.purpose and view.grain
    assert list(view.columns) == wh.sql(f"SELECT * FROM {name}").columns
    assert all(meaning.strip() for meaning in view.columns.values())


@pytest.mark.parametrize("name", VIEWS)
def test_view_sql_is_portable(name: str):
    body = re.sub(r"--[^\n]*", "", load_views()[name].body)
    # String literals are text, not SQL (a double quote in a pattern is no identifier), but a
    # backslash in one is read as an escape by Spark and as itself by DuckDB.
    literals = re.findall(r"'(?:[^']|'')*'", body)
    assert not [text for text in literals if "\\" in text], \
        f"{name}.sql has a backslash in a string literal (Spark and DuckDB read it differently)"
    body = re.sub(r"'(?:[^']|'')*'", "''", body)
    found = [why for pattern, why in NOT_PORTABLE.items() if re.search(pattern, body, re.I)]
    assert not found, f"{name}.sql uses {', '.join(found)}"


def test_views_md_is_generated_from_the_headers():
    text = (ROOT / "docs" / "views.md").read_text("utf-8")
    assert text == views_markdown(), "docs/views.md is stale: run `python -m kidata.docs`"
    for name, view in load_views().items():
        assert f"## {name}\n\n{view.purpose}\n" in text
        for column in view.columns:
            assert f"| `{column}` |" in text


def test_efficiency_md_is_generated_from_the_byte_models():
    text = (ROOT / "docs" / "efficiency.md").read_text("utf-8")
    assert text == efficiency_markdown(), "docs/efficiency.md is stale: run `python -m kidata.docs`"
    # rms_norm forward reads X (M x H) and weight (H) and writes Y (M x H).
    assert "| `rms_norm` | forward | size(dtype) × (2·M·H + H) |" in text
    assert "`swiglu` and `geglu`" in text
