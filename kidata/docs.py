"""Generated reference docs, kept current by tests.

``python -m kidata.docs`` rewrites ``docs/tables.md`` (from the Arrow schemas in
:mod:`kidata.schema`) and the other generated references; ``tests/test_docs.py`` fails when a
committed file differs from what this module generates.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kidata.schema import KEYS, TABLES, description

ROOT = Path(__file__).resolve().parent.parent


def tables_markdown() -> str:
    """The table dictionary: every table, its key and its columns with types and meanings."""
    out = ["# Table reference", "",
           "Generated from `kidata/schema.py` by `python -m kidata.docs`; do not edit by hand.",
           "Each table is a folder of Parquet files under the warehouse (`<warehouse>/<table>/`).",
           ""]
    for name, schema in TABLES.items():
        key = ", ".join(f"`{k}`" for k in KEYS.get(name, ())) or "none (append-only log)"
        out += [f"## {name}", "", f"Identity: {key}.", "",
                "| column | type | null | meaning |", "|---|---|---|---|"]
        for f in schema:
            meaning = description(f).replace("|", "\\|")
            out.append(f"| `{f.name}` | {f.type} | {'yes' if f.nullable else 'no'} | {meaning} |")
        out.append("")
    return "\n".join(out)


# (relative path, generator) for every generated document.
GENERATED = {
    "docs/tables.md": tables_markdown,
}


def write_all(root: Path = ROOT) -> list[str]:
    changed = []
    for rel, make in GENERATED.items():
        path = root / rel
        text = make()
        if not path.exists() or path.read_text("utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, "utf-8")
            changed.append(rel)
    return changed


if __name__ == "__main__":
    for rel in write_all():
        sys.stdout.write(f"wrote {rel}\n")
