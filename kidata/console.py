"""What the CLI shows on a terminal while it works: the load's progress bar (rich).

Only :mod:`kidata.cli` uses this module; the library reports progress through callbacks and
never prints.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import IO

from kidata.errors import KidataError

# A load that ends sooner shows no bar at all (a flash of bar is noise).
DELAY = 1.0
PHASES = {"read": "reading", "commit": "committing", "compact": "finishing"}


class LoadProgress:
    """A progress bar for :meth:`kidata.Warehouse.load`: bytes of input done out of the total
    (so the ETA means something), files, records and records per second, then the commit phase.

    Pass the instance as ``progress`` and its :meth:`phase` as ``phase``. Within a file, bytes
    done are estimated from its records at the bytes per record of the files already read.
    """

    def __init__(self, paths: list[str], stream: IO[str], delay: float = DELAY):
        from kidata.ingest.readers import expand_paths

        try:
            files = expand_paths(paths)
        except KidataError:
            files = []  # the load itself reports bad paths
        self.sizes = {f: _size(f) for f in files}
        known = list(self.sizes.values())
        self.total = sum(known) if known and None not in known else None
        self.stream = stream
        self.delay = delay
        self.start = time.monotonic()
        self.done_files: set[str] = set()
        self.current: str | None = None
        self.records = 0
        self.records_before = 0  # records of the files finished
        self.bytes_before = 0
        self.stage = "read"
        self.bar = None
        self.task = None

    def __call__(self, file: str, records: int) -> None:
        if file != self.current:
            if self.current is not None and self.current not in self.done_files:
                self._finish(self.current, records_at_switch=self.records)
            self.current = file
        self.records = records
        self._show()

    def _finish(self, file: str, records_at_switch: int) -> None:
        self.done_files.add(file)
        self.bytes_before += self.sizes.get(file) or 0
        self.records_before = records_at_switch

    def phase(self, name: str) -> None:
        if self.current is not None and self.current not in self.done_files:
            self._finish(self.current, self.records)
        self.stage = name
        self._show()

    def _done_bytes(self) -> float:
        if self.stage != "read":
            return float(self.total or 0)
        in_file = self.records - self.records_before
        if self.records_before and in_file > 0 and self.bytes_before:
            estimate = in_file * self.bytes_before / self.records_before
            return self.bytes_before + min(estimate, self.sizes.get(self.current or "", 0) or 0)
        return float(self.bytes_before)

    def _show(self) -> None:
        elapsed = time.monotonic() - self.start
        if self.bar is None:
            if elapsed < self.delay:
                return
            self._open()
        rate = self.records / elapsed if elapsed > 0 else 0.0
        self.bar.update(
            self.task, completed=self._done_bytes(),
            description=PHASES.get(self.stage, self.stage),
            files=f"{len(self.done_files):,}/{len(self.sizes):,} files" if self.sizes else "",
            records=f"{self.records:,} records", rate=f"{rate:,.0f} records/s")

    def _open(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        console = Console(file=self.stream, highlight=False)
        self.bar = Progress(
            TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
            TextColumn("{task.fields[files]}"), TextColumn("{task.fields[records]}"),
            TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
            TextColumn("ETA"), TimeRemainingColumn(),
            console=console, transient=True, auto_refresh=True, refresh_per_second=4)
        self.bar.start()
        self.task = self.bar.add_task("reading", total=self.total, files="", records="",
                                      rate="")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def _size(path: str) -> int | None:
    if path == "-":
        return None
    try:
        return os.path.getsize(path)
    except OSError:
        return None


# Option values named for what they hold, where the parameter's own name says less.
METAVARS = {"limit": "N", "threshold": "FRACTION", "to": "FORMAT", "output": "DIR",
            "format": "FORMAT"}


def plain_help(command) -> None:
    """Help without internal type names: an argument shows as ``PATH...`` (not ``{paths}...
    <list[str]>``), an option's value as its metavar or its name in capitals (not ``<str>``)."""
    from typer.core import TyperArgument, TyperOption

    for param in command.params:
        if isinstance(param, TyperArgument):
            shown = (param.metavar or param.name.upper()).strip("[]")
            if param.nargs != 1 and not shown.endswith("..."):
                shown += "..."
            param.metavar = shown
            usage = shown if param.required else f"[{shown}]"
            param.display_type_rich = lambda ctx: None
            param._usage_display_name = lambda usage=usage: usage
        elif isinstance(param, TyperOption) and not param.is_flag and not param.count \
                and param.metavar is None:
            param.metavar = METAVARS.get(param.name, param.name.upper())


_INTEGER = re.compile(r"[-+]?[0-9]+")
_DECIMAL = re.compile(r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?")
_UNSURE = object()  # "not a plain value: let typer decide"


class PlainValues:
    """Typer's coercion of an option's value for the plain types kidata's options have (str,
    int, float, Path, list[str]), without Pydantic.

    Typer 0.2x coerces every value that is not a flag through a Pydantic ``TypeAdapter``, and
    importing Pydantic to build them costs ~0.1–0.2 s of every command (a third of a query
    process). Ordinary values (``-w DIR``, ``--max-rows 20``, ``-t 0.05``) give the same Python
    value here; anything else (an unparsable number, a path typer would check, a type not
    listed) goes to typer's own coercion, so its messages and rules stay the authority.
    """

    def __init__(self, param):
        self.param = param

    def coerce(self, value, param=None, ctx=None):
        param = param or self.param
        if value is None:
            return () if param.multiple or param.nargs == -1 else None
        got = self._plain(value)
        if got is _UNSURE:
            param._runtime_param = None  # typer builds its own, once
            return type(param).get_runtime_param(param).coerce(value, param=param, ctx=ctx)
        return got

    def _plain(self, value):
        annotation = self.param.type_descriptor.annotation
        if annotation is str:
            return value if isinstance(value, str) else _UNSURE
        if annotation is bool:
            return value if isinstance(value, bool) else _UNSURE
        if annotation is int:
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            return int(value) if isinstance(value, str) and _INTEGER.fullmatch(value) \
                else _UNSURE
        if annotation is float:
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
            return float(value) if isinstance(value, str) and _DECIMAL.fullmatch(value) \
                else _UNSURE
        if annotation is Path:
            info = self.param.type_descriptor.parameter_info
            if (info.exists or info.resolve_path or info.writable or not info.file_okay
                    or not info.dir_okay or info.path_type not in (None, Path)):
                return _UNSURE  # typer checks the file system
            if isinstance(value, Path):
                return value
            if not isinstance(value, str) or (info.readable and os.path.exists(value)
                                              and not os.access(value, os.R_OK)):
                return _UNSURE
            return Path(value)
        if annotation == list[str]:
            if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
                return list(value)
        return _UNSURE


def plain_values(params) -> None:
    """Give ``params`` :class:`PlainValues` (those typer has not coerced yet); a typer without
    this hook (no ``_runtime_param``) keeps its own coercion."""
    for param in params:
        if getattr(param, "_runtime_param", _UNSURE) is None \
                and hasattr(param, "type_descriptor"):
            param._runtime_param = PlainValues(param)


def group_class():
    """The Typer group class for :mod:`kidata.cli`: every command's help goes through
    :func:`plain_help`, and its values through :class:`PlainValues`."""
    from typer.core import TyperGroup

    class KidataGroup(TyperGroup):
        def get_command(self, ctx, cmd_name):
            command = super().get_command(ctx, cmd_name)
            if command is not None:
                plain_help(command)
                plain_values(command.get_params(ctx))  # with its --help option
            return command

        def get_params(self, ctx):
            plain_help(self)
            params = super().get_params(ctx)
            plain_values(params)
            return params

    return KidataGroup
