"""The command line is a layer on top: ``kidata/cli.py`` reaches the library only through the
facade (``kidata.Warehouse`` and its companion ``kidata.library``), and no library module
imports the command line (issue 29, item 4). Checked from the source, as
tests/test_structure.py checks the rest of the package's shape."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "kidata"

# What cli.py may import: the facade, the errors it turns into exit codes, its own printing
# (console, cli_output), the version, and the process tuning its entry point applies.
CLI_MAY_IMPORT = {"kidata", "kidata.warehouse", "kidata.library", "kidata.errors",
                  "kidata.console", "kidata.cli_output", "kidata._imports",
                  "kidata.core.config"}  # the configuration (KIDATA_DEBUG)
# The command line's own modules, and who may import them: `python -m kidata` runs the CLI,
# kidata/docs.py generates docs/cli.md from its help texts.
CLI_LAYER = {"kidata.cli", "kidata.cli_output", "kidata.console"}
MAY_IMPORT_THE_CLI = CLI_LAYER | {"kidata.__main__", "kidata.docs"}


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[str, int]]:
    """Every ``kidata…`` name ``path`` imports, at any depth (a deferred import inside a
    function counts; one under ``if TYPE_CHECKING`` too: typing-only is still a dependency of
    the reader), with its line."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == "kidata":
                # `from kidata import ingest` imports the module kidata.ingest
                out += [(_name(node.module, a.name), node.lineno) for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names
                    if a.name.split(".")[0] == "kidata"]
    return out


def _name(module: str, name: str) -> str:
    """``module.name`` when that is a module or package of kidata, else ``module``."""
    full = f"{module}.{name}"
    folder = PACKAGE.parent.joinpath(*full.split("."))
    return full if folder.with_suffix(".py").is_file() or folder.is_dir() else module


def test_the_cli_imports_only_the_facade():
    offenders = [f"kidata/cli.py:{line} imports {name}"
                 for name, line in _imports(PACKAGE / "cli.py") if name not in CLI_MAY_IMPORT]
    assert offenders == [], "cli.py goes around the facade (kidata.Warehouse):\n" + \
        "\n".join(offenders)


def test_no_library_module_imports_the_cli():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module(path)
        if module in MAY_IMPORT_THE_CLI:
            continue
        for name, line in _imports(path):
            if any(name == cli or name.startswith(cli + ".") for cli in CLI_LAYER):
                offenders.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {name}")
    assert offenders == [], "the library imports the command line:\n" + "\n".join(offenders)


def test_the_check_sees_imports_at_any_depth(tmp_path: Path):
    # A deferred import inside a command is still a way around the facade.
    source = tmp_path / "x.py"
    source.write_text("def f():\n    from kidata.query import export\n"
                      "    import kidata.store.verify\n"
                      "    from kidata import ingest, __version__\n")
    assert _imports(source) == [("kidata.query.export", 2), ("kidata.store.verify", 3),
                                ("kidata.ingest", 4), ("kidata", 4)]
