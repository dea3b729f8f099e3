"""The SQL view files shipped in the package: finding them, parsing their headers, ordering
views by dependency.

Each file holds one portable ``SELECT`` (it must run unchanged in DuckDB and Spark SQL over the
same Parquet files) after a header comment::

    -- view: speedups
    -- purpose: one line saying what question the view answers.
    -- grain: one row per …
    -- sources: latencies
    -- columns:
    --   speedup: baseline_us / candidate_us.
    -- notes: free text, may span lines.

The files are packaged data, read here and bound to an engine elsewhere
(:mod:`kidata.query.views` for DuckDB, :mod:`kidata.query.spark`); the store reads one view's
SQL too (``run_statistics``, the one statement of the evidence rule, in
:mod:`kidata.store.derived`), which is why this sits in the neutral layer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from kidata.errors import KidataError

_HEADER_KEY = re.compile(r"^--\s*(view|purpose|grain|sources|columns|notes):\s?(.*)$")


@dataclass
class View:
    name: str
    purpose: str
    grain: str
    sources: list[str]
    columns: dict[str, str]
    notes: str
    body: str
    path: Path
    depends: list[str] = field(default_factory=list)


def sql_dir() -> Path:
    """The folder holding the view files: inside the installed package, or the source tree.
    (Found from this file's path, not with ``importlib.resources``, whose import costs a
    query process ~10 ms: kidata is never run from a zip.)"""
    packaged = Path(__file__).resolve().parents[1] / "sql"
    if packaged.is_dir():
        return packaged
    source_tree = Path(__file__).resolve().parents[2] / "sql"
    if source_tree.is_dir():
        return source_tree
    raise KidataError("the SQL view files are missing from this installation")


def parse(path: Path) -> View:
    text = path.read_text("utf-8")
    meta: dict[str, str] = {}
    columns: dict[str, str] = {}
    key = None
    body_lines = []
    in_header = True
    for line in text.splitlines():
        if in_header and line.startswith("--"):
            m = _HEADER_KEY.match(line)
            if m:
                key = m.group(1)
                meta[key] = m.group(2).strip()
                continue
            content = line[2:].strip()
            if key == "columns":
                cm = re.match(r"^([A-Za-z_][A-Za-z0-9_]*):\s*(.*)$", content)
                if cm:
                    columns[cm.group(1)] = cm.group(2)
                    last = cm.group(1)
                elif columns and content:
                    columns[last] += " " + content
            elif key and content:
                meta[key] += " " + content
            continue
        in_header = False
        body_lines.append(line)
    body = "\n".join(body_lines).strip().rstrip(";").strip()
    name = meta.get("view", path.stem)
    if name != path.stem:
        raise KidataError(f"{path}: header says view {name!r} but the file is {path.stem}.sql")
    for required in ("purpose", "grain"):
        if not meta.get(required):
            raise KidataError(f"{path}: header lacks '-- {required}:'")
    return View(name, meta["purpose"], meta["grain"],
                [s.strip() for s in meta.get("sources", "").split(",") if s.strip()],
                columns, meta.get("notes", ""), body, path)


@cache
def load_views() -> dict[str, View]:
    """All views, in an order where each comes after the views it reads."""
    found = {p.stem: parse(p) for p in sorted(sql_dir().glob("*.sql"))}
    for view in found.values():
        view.depends = _reads(view, found)
    ordered: dict[str, View] = {}

    def visit(name: str, stack: tuple[str, ...] = ()) -> None:
        if name in ordered:
            return
        if name in stack:
            raise KidataError(f"views depend on each other in a cycle: {' -> '.join(stack)}")
        for dep in found[name].depends:
            visit(dep, (*stack, name))
        ordered[name] = found[name]

    for name in found:
        visit(name)
    return ordered


def with_dependencies(names: Iterable[str]) -> list[str]:
    """``names`` (those that are views) and every view they read, directly or not, in
    definition order: each after the views it reads."""
    found = load_views()
    wanted: set[str] = set()
    todo = [name for name in names if name in found]
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted.add(name)
            todo += found[name].depends
    return [name for name in found if name in wanted]


def strip_comments(sql: str) -> str:
    """``sql`` without its ``--`` comments."""
    return re.sub(r"--[^\n]*", "", sql)


@cache
def stored_views() -> dict[str, View]:
    """The views a session may read from a table derived per load instead
    (``sql/stored/<view>.sql``): the same name, rows and columns as the view's own file, a
    body over stored rows (see :mod:`kidata.store.contexts`)."""
    found = {p.stem: parse(p) for p in sorted((sql_dir() / "stored").glob("*.sql"))}
    for view in found.values():
        view.depends = _reads(view, load_views())
    return found


def _reads(view: View, names: Iterable[str]) -> list[str]:
    """The views of ``names`` that ``view``'s body reads (a name is a whole word)."""
    words = set(re.findall(r"\w+", strip_comments(view.body)))
    return [n for n in names if n != view.name and n in words]
