"""Printed results: the terminal table fitted to its width, and CSV, JSON and Markdown that
survive awkward values (newlines, separators, DECIMAL, NaN, structs, durations)."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from conftest import SEEDS
from hypothesis import given, settings
from hypothesis import strategies as st

from kidata import Warehouse
from kidata.query import output

KIDATA = str(Path(sys.executable).parent / "kidata")
AWKWARD = ("SELECT 'a|b' || chr(10) || 'c' AS t, 'x,y' || chr(10) || '\"z\"' AS u, "
           "'NaN'::DOUBLE AS n, '-inf'::DOUBLE AS i, 1.50::DECIMAL(10, 2) AS d, "
           "3::HUGEINT AS h, {'a': 1, 'b': [1, 2]} AS s, "
           "INTERVAL '1 day 2 hours 3.5 seconds' AS iv, true AS b, NULL AS z")


def render(fmt: str, query: str = AWKWARD, **kw) -> str:
    out = io.StringIO()
    output.write(duckdb.sql(query), fmt, out, **kw)
    return out.getvalue()


def test_json_keeps_numbers_numbers_and_says_nan():
    (row,) = json.loads(render("json"))
    assert row == {"t": "a|b\nc", "u": 'x,y\n"z"', "n": "NaN", "i": "-Infinity", "d": 1.5,
                   "h": 3, "s": {"a": 1, "b": [1, 2]}, "iv": "P1DT2H3.5S", "b": True,
                   "z": None}
    assert json.loads(render("ndjson")) == row
    assert render("json", "SELECT 1 AS x WHERE false") == "[]\n"


def test_csv_quotes_separators_and_newlines():
    text = render("csv")
    header, row = list(csv.reader(io.StringIO(text)))
    assert header == ["t", "u", "n", "i", "d", "h", "s", "iv", "b", "z"]
    assert row == ["a|b\nc", 'x,y\n"z"', "NaN", "-Infinity", "1.5", "3", '{"a":1,"b":[1,2]}',
                   "P1DT2H3.5S", "true", ""]


def test_markdown_escapes_pipes_and_line_breaks():
    lines = render("markdown").splitlines()
    assert len(lines) == 3  # a newline in a value never starts a new row
    assert lines[2].startswith("| a\\|b<br>c | x,y<br>\"z\" | NaN | -Infinity | 1.5 | 3 | ")


@pytest.mark.parametrize(("value", "iso"), [("90 minutes", "PT1H30M"), ("0 seconds", "PT0S"),
                                            ("-1 second", "-PT1S"), ("3 days", "P3D")])
def test_durations_are_iso_8601(value: str, iso: str):
    assert json.loads(render("json", f"SELECT INTERVAL '{value}' AS d"))[0]["d"] == iso


def test_table_fits_the_width_cutting_the_widest_text_first():
    query = ("SELECT 'rms_norm' AS kernel, repeat('x', 80) AS run_id, 31.072 AS median_us "
             "UNION ALL SELECT 'relu_squared', repeat('y', 80), 126.336")
    lines = render("table", query, width=60).splitlines()
    assert max(len(line) for line in lines) == 60
    # kernel (12) and median_us (9) whole, 3 spaces apart; run_id takes the rest: 60 - 12 - 9
    # - 6 = 33 characters, the last an ellipsis.
    assert lines[2] == "rms_norm       " + "x" * 32 + "…      31.072"
    assert lines[-1] == "(2 rows)"
    # Without a width limit nothing is cut.
    assert "x" * 80 in render("table", query, width=output.UNFITTED_WIDTH)


@pytest.mark.slow
def test_console_script_table_and_max_rows(tmp_path: Path):
    # Not a terminal: nothing is cut; --max-rows says how many rows there are.
    # A loaded warehouse: reading commands may refuse a folder that is not one.
    assert Warehouse(tmp_path / "wh").load([str(SEEDS)]).ok
    env = {**os.environ, "KIDATA_WAREHOUSE": str(tmp_path / "wh")}
    done = subprocess.run([KIDATA, "sql", "select range as n, repeat('w', 150) as wide "
                           "from range(7)", "--max-rows", "3"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["n", "wide"]
    assert lines[2] == "0   " + "w" * 150
    assert lines[-1] == "(3 of 7 rows shown; use --max-rows or --format csv)"


def test_csv_keeps_every_digit_and_the_table_six():
    assert render("csv", "SELECT 1 / 3 AS x") == "x\n0.3333333333333333\n"
    assert render("table", "SELECT 1 / 3 AS x", width=80).splitlines()[2] == "0.333333"


# Cells of plain text (printable ASCII and ⏎) are drawn without rich; the lines must be rich's.
_CELL = st.text(alphabet=st.sampled_from(list("ab Z09|-_.,⏎~")), max_size=14)


@settings(max_examples=150, deadline=None)
@given(columns=st.lists(st.text(alphabet="abcxyz_", min_size=1, max_size=9), min_size=1,
                        max_size=5),
       data=st.data(), width=st.integers(min_value=10, max_value=70))
def test_plain_table_is_drawn_as_rich_draws_it(columns, data, width):
    n = len(columns)
    rows = data.draw(st.lists(st.lists(_CELL, min_size=n, max_size=n), max_size=4))
    numeric = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    widths = output._fit([max([len(c)] + [len(r[i]) for r in rows]) for i, c in
                          enumerate(columns)], [len(c) for c in columns], numeric, width)
    if not all(widths):
        return  # a column of nothing: drawn by rich
    assert output._plain(columns) and all(output._plain(r) for r in rows)
    plain = [line.rstrip() for line in output._plain_lines(columns, rows, numeric, widths)]
    rich = [line.rstrip() for line in output._rich_lines(columns, rows, numeric, widths, width)]
    assert plain == rich


def test_wide_characters_go_to_rich():
    # A CJK character takes two terminal columns: rich measures it (the column is 3 characters
    # wide, so 6 columns of CJK are cut to one character and the ellipsis), the plain path
    # would not.
    assert not output._plain(["核函数"]) and not output._plain(["tab\there"])
    lines = render("table", "SELECT '核函数' AS k, 1 AS n", width=80).splitlines()
    assert lines[2] == "核…   1"


def test_a_table_runs_its_query_once_up_to_counted_rows(tmp_path: Path):
    # 150 rows > --max-rows 100: the count comes from the rows fetched (one run), and still
    # says 150; above output.COUNTED rows DuckDB counts them.
    assert render("table", "SELECT range AS n FROM range(150)").splitlines()[-1] == \
        "(100 of 150 rows shown; use --max-rows or --format csv)"
    big = output.COUNTED + 5
    assert render("table", f"SELECT range AS n FROM range({big})").splitlines()[-1] == \
        f"(100 of {big:,} rows shown; use --max-rows or --format csv)"
