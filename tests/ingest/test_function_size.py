"""No function in ingest's readers, flattener or mapping is past a reviewer's patience (issue 29,
item 5): at most 60 lines and McCabe complexity 15, unless its docstring says why with the marker
``Long because:``. Complexity is counted by ``mccabe`` (PyCQA, the counter flake8 uses), not by
hand."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import mccabe
import pytest

ROOT = Path(__file__).resolve().parents[2] / "kidata" / "ingest"
MEASURED = sorted((ROOT / "readers").glob("*.py")) + [ROOT / "flatten.py", ROOT / "mapping.py"]
MAX_LINES = 60
MAX_COMPLEXITY = 15
MARKER = "Long because:"


def oversized(source: str, filename: str) -> list[str]:
    """``file:function: N lines, complexity M`` for every function of ``source`` over either
    limit whose docstring does not state a reason with :data:`MARKER`. Lines run from the
    ``def`` to the function's last line (decorators excluded, docstring included)."""
    tree = ast.parse(source, filename)
    visitor = mccabe.PathGraphingAstVisitor()
    visitor.preorder(tree, visitor)
    # mccabe names methods Class.method and keys graphs by the def's line.
    complexity = {graph.lineno: (graph.entity, graph.complexity())
                  for graph in visitor.graphs.values()}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        lines = node.end_lineno - node.lineno + 1
        name, paths = complexity.get(node.lineno, (node.name, 0))
        if lines <= MAX_LINES and paths <= MAX_COMPLEXITY:
            continue
        if MARKER in (ast.get_docstring(node) or ""):
            continue
        found.append(f"{filename}:{name}: {lines} lines, complexity {paths}")
    return found


@pytest.mark.parametrize("path", MEASURED, ids=lambda p: p.name)
def test_no_function_over_the_limits_without_a_reason(path: Path) -> None:
    relative = path.relative_to(ROOT.parents[1]).as_posix()
    assert oversized(path.read_text(encoding="utf-8"), relative) == [], (
        f"split these by responsibility, or say why in the docstring with {MARKER!r}")


def _synthetic(branches: int, reason: str = "") -> str:
    body = "\n".join(f"    if x == {i}:\n        return {i}" for i in range(branches))
    doc = f'    """A synthetic function. {reason}"""\n'
    return f"def chooser(x):\n{doc}{body}\n    return None\n"


def test_the_check_fails_for_an_over_long_function() -> None:
    # 31 branches: 64 lines, complexity 32; named with its figures.
    assert oversized(_synthetic(31), "synthetic.py") == [
        "synthetic.py:chooser: 65 lines, complexity 32"]


def test_the_check_fails_for_a_complex_short_function() -> None:
    # One line per branch: 18 lines, complexity 17 (mccabe counts branches, not boolean
    # operators).
    source = "def f(a):\n" + textwrap.indent(
        "\n".join(f"if a == {i}: a += 1" for i in range(16)) + "\nreturn a", "    ")
    assert oversized(source, "short.py") == ["short.py:f: 18 lines, complexity 17"]


def test_a_stated_reason_lets_a_function_stay_long() -> None:
    assert oversized(_synthetic(31, "Long because: a measured hot loop."), "synthetic.py") == []
    assert oversized(_synthetic(3), "synthetic.py") == []
