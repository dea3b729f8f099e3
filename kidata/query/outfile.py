"""Where an output file may go, and how it is written: whole or not at all.

Every file kidata writes for a user (``kidata sql -o``, ``export -o``, ``export --duckdb``,
``export runs --format kernelindex``, ``report -o``) goes through :func:`writing`:

- never inside a warehouse's own folders (a table's folder or ``_kidata/``): a mistyped
  ``-o WAREHOUSE/runs/part-….parquet`` overwrote a committed file in 0.2.7;
- never into a folder that does not exist unless asked (``--parents``): 0.2.7 created
  ``/nonexistent/`` for ``-o /nonexistent/x.csv`` without a word;
- written under a temporary name beside the target and renamed onto it only once complete,
  so a kill, a full disk or an error leaves the old file (or none), never a truncated one or a
  database with half its tables.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

from kidata.errors import UsageError
from kidata.store.durable import fault
from kidata.store.layout import PRIVATE
from kidata.store.schema import COLUMNS


def check(path: Path, parents: bool = False) -> None:
    """Refuse ``path`` as an output (:class:`UsageError`, exit 2) when it lies in a
    warehouse's folders or its folder is missing (created instead when ``parents``)."""
    target = Path(os.path.abspath(path))
    resolved = target.parent.resolve() / target.name
    for folder in resolved.parents:
        if (folder / PRIVATE).is_dir():  # a warehouse: its tables' and private folders
            first = resolved.relative_to(folder).parts[0]
            inside = len(resolved.relative_to(folder).parts) > 1
            if first == PRIVATE or (first in COLUMNS and inside):
                raise UsageError(f"refusing to write {path}: it is inside the warehouse "
                                 f"{folder}, in its {first}/ folder, which only kidata's "
                                 "commits change; write the file elsewhere")
    if not target.parent.is_dir():
        if not parents:
            raise UsageError(f"cannot write {path}: the folder {target.parent} does not exist; "
                             "create it, or pass --parents")
        target.parent.mkdir(parents=True, exist_ok=True)


@contextlib.contextmanager
def writing(path: Path, parents: bool = False, overwrite: bool = True) -> Iterator[Path]:
    """Check ``path`` (:func:`check`), then yield a temporary path beside it to write to; on
    success it is renamed onto ``path`` (when not ``overwrite``, only if ``path`` does not
    exist yet: linked, so a file appearing meanwhile is never replaced); on any error it is
    removed and ``path`` is untouched."""
    check(path, parents)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.part{path.suffix}")
    try:
        yield tmp
        fault("output-before-rename")  # the crash tests: a kill here leaves no partial output
        if overwrite:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise UsageError(f"{path} exists; choose a new file (kidata never "
                                 "overwrites it)") from None
            except OSError:  # a file system without hard links
                if path.exists():
                    raise UsageError(f"{path} exists; choose a new file (kidata never "
                                     "overwrites it)") from None
                os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
