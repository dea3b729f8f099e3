"""How the ``kidata`` command line writes: one :class:`Output` object that knows the streams and
writes results (tables in a format, JSON, lines), messages, a report's warnings and rejects,
and errors; and the one check of a ``--format`` option.

Part of the command line, as :mod:`kidata.console` is: the library never imports it (it neither
prints nor exits; ``tests/cli/test_layers.py``). Results go to standard output, everything
else (progress, warnings, rejects, summaries of a check) to standard error, so that a
command's output can be piped. The formats themselves are :mod:`kidata.query.output`'s,
imported when a result is written (``kidata --help`` imports none of it).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import IO, Any

import typer

# Reject lines a command prints; the rest are counted (and, for a load, kept in `rejects`).
REJECTS_SHOWN = 50


def check_format(fmt: str, allowed: Sequence[str] | None = None) -> None:
    """Refuse a ``--format`` value that is not one of ``allowed`` (default: the formats
    results print in, :data:`kidata.query.output.FORMATS`) as a usage error (exit 2)."""
    if allowed is None:
        from kidata.query.output import FORMATS

        allowed = FORMATS
    if fmt not in allowed:
        raise typer.BadParameter(f"allowed formats are: {', '.join(allowed)}",
                                 param_hint="--format")


class Output:
    """Where a command's words go: :meth:`echo` and :meth:`rows` to standard output (the
    result), :meth:`note`, :meth:`error` and :meth:`report_lines` to standard error. The
    streams are looked up when written to, so a test's captured streams are the ones used."""

    def __init__(self, out: IO[str] | None = None, err: IO[str] | None = None):
        self._out = out
        self._err = err

    @property
    def out(self) -> IO[str]:
        return self._out if self._out is not None else sys.stdout

    @property
    def err(self) -> IO[str]:
        return self._err if self._err is not None else sys.stderr

    def echo(self, text: str = "", nl: bool = True) -> None:
        """A line of the result, on standard output."""
        typer.echo(text, nl=nl, file=self._out)

    def note(self, text: str) -> None:
        """A message beside the result (a summary, a hint, a warning), on standard error."""
        typer.echo(text, err=True, file=self._err)

    def error(self, message: str) -> None:
        """``Error: <message>``, on standard error: how every failed command ends."""
        self.note(f"Error: {message}")

    def rows(self, relation, fmt: str, max_rows: int = 100, csv_raw: bool = False) -> None:
        """A query's result in ``fmt`` (table, csv, json, ndjson, markdown;
        :func:`kidata.query.output.write`): the table format shows ``max_rows`` rows."""
        from kidata.query.output import write

        write(relation, fmt, self.out, max_rows=max_rows, csv_raw=csv_raw)

    def json(self, data: Any) -> None:
        """``data`` as indented JSON, values spelled as every JSON output spells them
        (:func:`kidata.query.output.plain`)."""
        import orjson

        from kidata.query.output import plain

        self.echo(orjson.dumps(plain(data), option=orjson.OPT_INDENT_2).decode())

    def report_lines(self, report, more: str = "") -> None:
        """A load's or a conversion's warnings and rejected records (the first
        :data:`REJECTS_SHOWN`; then how many more, followed by ``more``)."""
        for message in report.warnings:
            self.note(f"warning: {message}")
        if report.warned > len(report.warnings):
            self.note(f"warning: … and {report.warned - len(report.warnings):,} more warnings")
        shown = report.rejects[:REJECTS_SHOWN]
        for reject in shown:
            self.note(f"rejected: {reject}")
        if report.rejected > len(shown):
            self.note(f"rejected: … and {report.rejected - len(shown):,} more{more}")

    def failure(self, exc: BaseException) -> str | None:
        """The message a command that failed with ``exc`` prints (``Error: …``) when ``exc``
        came from DuckDB or the file system while a result was being produced; None for
        anything else (a bug, which keeps its traceback)."""
        from kidata.library import engine_message

        return engine_message(exc)
