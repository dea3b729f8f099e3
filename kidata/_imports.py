"""Import policy for kidata's own processes (the CLI and the load's worker processes).

pyarrow imports pandas, when it is installed, the first time it converts Python objects or
reads a table, only to check whether they are pandas objects. kidata never uses pandas, and
the import costs about 0.4 s and 50 MB per process, so kidata's own processes refuse it.
Library users are not affected: only :func:`kidata.cli.main` and the workers call this.
"""

from __future__ import annotations

import sys
from typing import Any


class _NoPandas:
    """An import hook that makes ``import pandas`` fail as a missing module would, so every
    importer's "is pandas installed?" check (``except ModuleNotFoundError``, as polars and
    pyarrow write it) takes its without-pandas branch instead of crashing."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError("kidata's own processes do not use pandas", name=name)
        return None


def refuse_pandas() -> None:
    if "pandas" not in sys.modules and not any(isinstance(f, _NoPandas) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoPandas())
