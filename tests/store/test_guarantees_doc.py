"""docs/guarantees.md names the test behind each guarantee: those tests must exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
DOC = (ROOT / "docs" / "guarantees.md").read_text("utf-8")


def test_every_test_the_guarantees_name_exists():
    named = re.findall(r"`(?:tests/(?:\w+/)?)?(test_\w+\.py)(?:::(\w+(?:\*)?))?", DOC)
    assert len(named) >= 15
    for file, test in named:
        source = next((ROOT / "tests").rglob(file)).read_text("utf-8")
        if test:
            pattern = re.escape(test.rstrip("*")) + (r"\w*" if test.endswith("*") else r"\b")
            assert re.search(rf"def {pattern}\(", source), f"{file}::{test} does not exist"
    # Continuations such as `::test_check_repair_…` after a file name refer to that file.
    for test in re.findall(r"`::(\w+)`", DOC):
        assert any(re.search(rf"def {test}\(", p.read_text("utf-8"))
                   for p in (ROOT / "tests").rglob("test_*.py")), test
