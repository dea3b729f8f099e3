"""Generated reference docs, kept current by tests.

``python -m kidata.docs`` rewrites ``docs/tables.md`` (from the Arrow schemas in
:mod:`kidata.store.schema`) and the other generated references; ``tests/test_docs.py`` fails when a
committed file differs from what this module generates.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kidata.store.schema import KEYS, TABLES, description

ROOT = Path(__file__).resolve().parent.parent


def tables_markdown() -> str:
    """The table dictionary: every table, its key and its columns with types and meanings."""
    out = ["# Table reference", "",
           "Generated from `kidata/store/schema.py` by `python -m kidata.docs`; do not edit by "
           "hand.",
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


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def views_markdown() -> str:
    """The view reference, from the header comment of every ``sql/*.sql`` file."""
    from kidata.query.views import load_views

    found = dict(sorted(load_views().items()))
    out = ["# View reference", "",
           "Generated from the header comments of `sql/*.sql` by `python -m kidata.docs`; do not "
           "edit by hand.",
           "Each view is one portable `SELECT` (it runs unchanged in DuckDB and Spark SQL over the "
           "warehouse's Parquet folders). Latencies are in µs.", "",
           "| view | question it answers |", "|---|---|"]
    out += [f"| [{v.name}](#{v.name}) | {_cell(v.purpose)} |" for v in found.values()]
    out.append("")
    for v in found.values():
        out += [f"## {v.name}", "", v.purpose, "", f"**Grain:** {v.grain}", ""]
        if v.sources:
            out += ["**Reads:** " + ", ".join(f"`{s}`" for s in v.sources), ""]
        out += ["| column | meaning |", "|---|---|"]
        out += [f"| `{name}` | {_cell(meaning)} |" for name, meaning in v.columns.items()]
        out.append("")
        if v.notes:
            out += [f"**Notes:** {v.notes}", ""]
    return "\n".join(out)


def _product(coefficient: float, factors: tuple[str, ...]) -> str:
    parts = [] if coefficient == 1 else [f"{coefficient:g}"]
    parts += list(factors)
    return "·".join(parts) or "1"


def efficiency_markdown() -> str:
    """The byte models behind the ``efficiency`` view, from ``kidata/data/byte_models.toml``."""
    from kidata.store.reference import byte_models

    sizes, models = byte_models()
    out = ["# Byte models of the efficiency view", "",
           "Generated from `kidata/data/byte_models.toml` by `python -m kidata.docs`; do not edit "
           "by hand.", "",
           "The `efficiency` view divides the minimum number of bytes a kernel pass must move by "
           "its median latency (`achieved_gbps`), and that by the GPU's published peak memory "
           "bandwidth from `kidata/data/gpus.toml` (`peak_fraction`). The bytes come from the "
           "workload's parameters:", "",
           "    bytes = Σ over terms  coefficient × size(dtype) × factor_1 × factor_2 × factor_3",
           "",
           "Every model is a **lower bound** on the traffic of the timed code, so achieved "
           "bandwidth is a lower bound as well and never flatters:", "",
           "- each tensor is counted once per pass, at the workload's dtype, even where an "
           "implementation keeps it in float32 (Liger's benchmarks create norm weights with "
           "`nn.Parameter(torch.ones(H))` and never cast them; HF's `LlamaRMSNorm` returns "
           "float32 output for bf16 input);",
           "- per-row statistics (`rstd`, `mean`) that some implementations save for the backward "
           "pass are **not** counted: they can be recomputed from X, and they are M values "
           "against M × H;",
           "- `full` (forward then backward in one timed call) counts each distinct tensor once: "
           "inputs, weights and the upstream gradient read, output and gradients written.", "",
           "A run is left out, never guessed, when its kernel and pass have no model, when its "
           "workload lacks a parameter the model names (or gives it as text), or when its dtype "
           "is not in the table below. Shapes and parameter names are those of Liger-Kernel's "
           "benchmark scripts and CSV (the `x_name` value plus every key of "
           "`extra_benchmark_config_str`).", "",
           "**No model on purpose:** `swiglu` and `geglu`. Liger's swiglu/geglu benchmarks time "
           "the whole `LlamaMLP` (three matmuls around the elementwise kernel), which is "
           "compute-bound, so a bandwidth fraction would describe the matmuls, not the kernel. "
           "`megatron_swiglu` times the elementwise kernel alone and has a model.", "",
           "| kernel | pass | bytes | terms |", "|---|---|---|---|"]
    for m in sorted(models, key=lambda m: (m.kernel, m.pass_)):
        groups: dict[str, dict[tuple[str, ...], float]] = {}
        for t in m.terms:
            size = (f"size({t.dtype_parameter})" if t.dtype_parameter
                    else f"{sizes[t.dtype]} ({t.dtype})")
            products = groups.setdefault(size, {})
            products[t.factors] = products.get(t.factors, 0) + t.coefficient
        formula = " + ".join(
            f"{size} × " + (" + ".join(_product(c, f) for f, c in products.items())
                            if len(products) == 1 else
                            "(" + " + ".join(_product(c, f) for f, c in products.items()) + ")")
            for size, products in groups.items())
        terms = "; ".join(t.term if t.coefficient == 1 else f"{t.coefficient:g} × {t.term}"
                          for t in m.terms)
        out.append(f"| `{m.kernel}` | {m.pass_} | {_cell(formula)} | {_cell(terms)} |")
    out += ["", "Where each shape comes from:", ""]
    for m in sorted(models, key=lambda m: (m.kernel, m.pass_)):
        out.append(f"- `{m.kernel}` {m.pass_}: {m.benchmark}")
    out += ["", "Element sizes (`dtypes` table):", "", "| dtype | bytes |", "|---|---|"]
    out += [f"| `{name}` | {size} |" for name, size in sizes.items()]
    out.append("")
    return "\n".join(out)


# Width of the help text in docs/cli.md (it must not depend on the terminal that generates it).
CLI_WIDTH = 100


def cli_markdown() -> str:
    """The CLI reference: ``kidata --help`` and every command's ``--help``, as the console
    script prints them."""
    import typer

    from kidata.cli import app

    group = typer.main.get_command(app)
    root = typer.Context(group, info_name="kidata", terminal_width=CLI_WIDTH,
                         max_content_width=CLI_WIDTH)
    out = ["# CLI reference", "",
           "Generated from the commands' help by `python -m kidata.docs`; do not edit by hand.",
           "Every command also answers `--help`. Shell completion: `kidata --install-completion`.",
           "", "## kidata", "", "```text", group.get_help(root), "```", ""]
    for name in group.list_commands(root):
        command = group.get_command(root, name)
        ctx = typer.Context(command, info_name=name, parent=root, terminal_width=CLI_WIDTH,
                            max_content_width=CLI_WIDTH)
        out += [f"## kidata {name}", "", "```text", command.get_help(ctx), "```", ""]
    return "\n".join(out)


# (relative path, generator) for every generated document.
GENERATED = {
    "docs/tables.md": tables_markdown,
    "docs/views.md": views_markdown,
    "docs/efficiency.md": efficiency_markdown,
    "docs/cli.md": cli_markdown,
}



def configuration_markdown() -> str:
    """The environment variables kidata reads, from their declarations in
    :mod:`kidata.core.config`."""
    from kidata.core.config import VARIABLES

    out = ["# Configuration", "",
           "Generated from `kidata/core/config.py` by `python -m kidata.docs`; do not edit by "
           "hand.",
           "kidata reads these environment variables and no others. An empty value is the same as "
           "an unset one; a value kidata cannot use is refused (exit 2), naming the variable. "
           "They are read when an operation starts (a load, a command, a fault point), so a "
           "change made between two loads applies to the second; a load's worker processes "
           "inherit them.", "",
           "| variable | type | default | meaning |", "|---|---|---|---|"]
    out += [f"| `{v.name}` | {v.type} | {_cell(v.default_text)} | {_cell(v.description)} |"
            for v in VARIABLES]
    out.append("")
    return "\n".join(out)


GENERATED["docs/configuration.md"] = configuration_markdown


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
