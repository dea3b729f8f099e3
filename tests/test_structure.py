"""The package's shape, checked from its source (no import, so this is fast and cannot be
fooled by import order): no import cycles between kidata's modules, no module importing a layer
it may not (the table is ``kidata.docs.LAYERS``), no module reaching into another's private
members, and every path under a warehouse named in kidata/store/layout.py.

Each rule is a list of offenders that must be empty; the failure message names file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

from kidata.docs import LAYERS, layer_of

PACKAGE = Path(__file__).resolve().parents[1] / "kidata"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _target(name: str) -> str | None:
    """The kidata module an import of ``name`` runs (a package's ``__init__`` for a name that
    is not a module of its own)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str) -> list[tuple[str, int]]:
    """Every kidata module ``module`` imports, at any depth of its code (a deferred import
    inside a function is still a dependency; one under ``if TYPE_CHECKING`` is not), with the
    line."""
    out = []
    tree = ast.parse(MODULES[module].read_text())
    typing_only = {id(inner) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and ast.unparse(node.test) == "TYPE_CHECKING"
                   for inner in ast.walk(node)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue  # annotations only: never run
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "kidata":
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                target = full if full in MODULES else _target(node.module)
                out.append((target, node.lineno))
        elif isinstance(node, ast.Import):
            out += [(_target(a.name), node.lineno) for a in node.names
                    if a.name.split(".")[0] == "kidata"]
    return [(t, line) for t, line in out if t and t != module]


def _cycles() -> list[list[str]]:
    graph = {m: sorted({t for t, _ in _imports(m)}) for m in MODULES}
    cycles, state = [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in graph[node]:
            if state.get(nxt) == "open":
                cycles.append(path[path.index(nxt):] + [node, nxt] if nxt in path
                              else [node, nxt])
            elif nxt not in state:
                visit(nxt, path + [node])
        state[node] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
    return cycles


def test_no_import_cycles_between_kidata_modules():
    # ``from kidata import __version__`` reads the package __init__, which imports nothing of
    # its own at import time (Warehouse is resolved lazily): not a cycle. None is tolerated:
    # the readers' format modules import their primitives from ``readers.base``, never the
    # dispatch in ``readers/__init__`` that imports them (issue 16).
    assert _cycles() == []


def test_the_cycle_finder_finds_a_cycle_through_a_package_init(monkeypatch):
    """The old readers circle, put back: a format module importing the dispatch package
    (``from kidata.ingest.readers import Item``) closes readers -> kernelindex -> readers."""
    real = _imports

    def with_back_edge(module: str):
        extra = [("kidata.ingest.readers", 1)] \
            if module == "kidata.ingest.readers.kernelindex" else []
        return real(module) + extra

    monkeypatch.setitem(globals(), "_imports", with_back_edge)
    assert any({"kidata.ingest.readers", "kidata.ingest.readers.kernelindex"} <= set(c)
               for c in _cycles())


def test_the_cycle_finder_finds_a_cycle(monkeypatch):
    """The rule above can fail: a made-up edge views -> warehouse closes a circle through
    warehouse -> views."""
    real = _imports

    def with_back_edge(module: str):
        extra = [("kidata.warehouse", 1)] if module == "kidata.query.views" else []
        return real(module) + extra

    monkeypatch.setitem(globals(), "_imports", with_back_edge)
    assert any({"kidata.query.views", "kidata.warehouse"} <= set(c) for c in _cycles())


def _layer_edges(module: str) -> list[tuple[str, int]]:
    """Every kidata module ``module`` imports, with the line, typing-only imports included
    (a layer that names the facade in an annotation still depends on it); ``from kidata
    import __version__`` is the pseudo-module ``kidata.__version__``."""
    out = []
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "kidata":
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full == "kidata.__version__" or full in MODULES:
                    out.append((full, node.lineno))
                else:
                    out.append((_target(node.module), node.lineno))
        elif isinstance(node, ast.Import):
            out += [(_target(a.name), node.lineno) for a in node.names
                    if a.name.split(".")[0] == "kidata"]
    return [(t, line) for t, line in out if t and t != module]


def _layer_offences() -> list[str]:
    """``file:line module imports target`` for every import across layers that the table
    does not allow, and every module no layer holds."""
    found = []
    for module, path in sorted(MODULES.items()):
        layer = layer_of(module)
        if layer is None:
            found.append(f"{path.relative_to(PACKAGE.parent)}: {module} is in no layer "
                         "(kidata.docs.LAYERS)")
            continue
        for target, line in sorted(set(_layer_edges(module)), key=lambda e: (e[1], e[0])):
            other = layer_of(target)
            if other is not None and (other is layer or other.name in layer.imports):
                continue
            found.append(f"{path.relative_to(PACKAGE.parent)}:{line} {module} ({layer.name}) "
                         f"imports {target} ({other.name if other else 'no layer'}); "
                         f"{layer.name} may import {', '.join(layer.imports) or 'nothing else'}")
    return found


def test_no_module_imports_a_layer_it_may_not():
    """Store and ingest never import query, store never imports ingest, nothing below the
    facade imports kidata.warehouse (not even for typing), nothing in the library imports
    the CLI: docs/architecture.md, "Layers and their allowed edges"."""
    assert _layer_offences() == []


def test_the_layer_rule_fails_on_an_upward_import(monkeypatch):
    """The rule above can fail: a typing-only import of the facade in the store (the circle
    issue 29 found: compaction named ``Warehouse`` in its signatures) and the store reaching
    into query are named with their file and line."""
    real = _layer_edges

    def with_upward_edges(module: str):
        extra = {"kidata.store.compaction": [("kidata.warehouse", 40)],
                 "kidata.store.manifest": [("kidata.query.session", 22)]}.get(module, [])
        return real(module) + extra

    monkeypatch.setitem(globals(), "_layer_edges", with_upward_edges)
    offences = _layer_offences()
    assert "kidata/store/compaction.py:40 kidata.store.compaction (store) imports " \
           "kidata.warehouse (facade); store may import neutral" in offences
    assert any(o.startswith("kidata/store/manifest.py:22 ") for o in offences)
    assert len(offences) == 2


def test_typing_only_imports_count_for_the_layer_rule(tmp_path, monkeypatch):
    """An import under ``if TYPE_CHECKING`` is an edge for the layer rule (the cycle rule
    skips it: it never runs)."""
    module = tmp_path / "typing_only.py"
    module.write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                      "    from kidata.warehouse import Warehouse\n")
    monkeypatch.setitem(MODULES, "kidata.query.typing_only", module)
    assert _imports("kidata.query.typing_only") == []
    assert _layer_edges("kidata.query.typing_only") == [("kidata.warehouse", 4)]


def test_every_layer_names_layers_below_it():
    """The table is ordered bottom to top: a layer may import only layers listed before it."""
    seen: set[str] = set()
    for layer in LAYERS:
        assert set(layer.imports) <= seen, layer.name
        seen.add(layer.name)


def _private_names() -> set[str]:
    """Names kidata itself defines with a leading underscore (functions, classes, methods,
    attributes set on ``self``, module constants): another module using one of them reaches
    into a private member. Third-party private names are not this test's business."""
    names = set()
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                    and isinstance(node.value, ast.Name) and node.value.id == "self":
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def private_uses(path: Path, private: set[str]) -> list[str]:
    """``from kidata.x import _y``, and ``something._y`` on anything but ``self``/``cls``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kidata"):
            found += [f"{path.name}:{node.lineno} imports {node.module}.{a.name}"
                      for a in node.names if a.name.startswith("_")
                      and not a.name.startswith("__")]
        elif isinstance(node, ast.Attribute) and node.attr in private and not (
                isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            found.append(f"{path.name}:{node.lineno} uses {ast.unparse(node)}")
    return found


def test_no_module_uses_another_modules_private_members():
    private = _private_names()
    offenders = [use for path in sorted(MODULES.values()) for use in private_uses(path, private)]
    assert offenders == []


def test_the_private_rule_catches_both_forms(tmp_path):
    """Both forms the rule looks for are caught (so an empty list above means something)."""
    bad = tmp_path / "bad.py"
    bad.write_text("from kidata.ingest.readers.kernelindex import _hidden\n"
                   "def f(wh):\n    return wh._recover()\n")
    assert private_uses(bad, {"_recover"}) == [
        "bad.py:1 imports kidata.ingest.readers.kernelindex._hidden",
        "bad.py:3 uses wh._recover"]


# The on-disk names kidata/store/layout.py owns; a string literal holding one anywhere else
# means a module builds a warehouse path itself.
LAYOUT_LITERALS = ("_kidata", "journal", "staging", "owner.lock", "part-", ".new-", "spill",
                   "enriched-", "compacted-", "reference.parquet", "final", "layout.json")


def test_every_warehouse_path_is_named_in_the_layout_module():
    offenders = []
    for module, path in sorted(MODULES.items()):
        if module == "kidata.store.layout":
            continue
        tree = ast.parse(path.read_text())
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef)
                      and n.body and isinstance(n.body[0], ast.Expr)
                      and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and id(node) not in docstrings:
                for literal in LAYOUT_LITERALS:
                    if node.value == literal or node.value.startswith(f"{literal}/") \
                            or (literal.endswith("-") and node.value.startswith(literal)):
                        offenders.append(f"{path.name}:{node.lineno} {node.value!r}")
    assert offenders == []
