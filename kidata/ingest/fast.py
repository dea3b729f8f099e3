"""The fast path of a load: a cheaper front end for the common kernelindex bundle, and no rule.

Most JSON Lines input is one shape: a bundle ``{"run": …, "environment": …, "protocol": …}``
(the protocol optional) with nothing else at its top level. :class:`FastPath` decodes such a
line with msgspec's typed JSON decoder, in compiled code: the top-level shape is checked there
(an object of exactly those keys) and the environment and protocol documents are kept as raw
JSON text, not parsed. A load repeats a few environments and protocols in every record, so each
distinct text is parsed and checked once (remembered by its bytes: equal bytes are equal
documents); only the run is parsed with orjson.

Everything after decoding is the general path's own code: the documents go to the same
:class:`~kidata.ingest.flatten.Flattener` methods (:meth:`~kidata.ingest.flatten.Flattener.bundle`
derives the run's rows, :class:`~kidata.ingest.validate.Checker` checks its fields), and the
rows are staged by the same function (:func:`kidata.ingest.stage_writer.stage_fast` shares it
with :func:`~kidata.ingest.stage_writer.stage_record`). This module holds no record rule, so the
two paths cannot drift apart; what it saves is parsing, the reader's classification of the record
(:func:`~kidata.ingest.readers.kernelindex.to_item`) and its re-serialisation check.

A line that is not plainly that shape and plainly valid goes, unchanged and before anything of
it is staged, to the general path (:func:`kidata.ingest.stage_writer.stage_record`), which stays the
authority: it produces every reject message (naming file, record and field) and the rows of
anything unusual: another shape, a failing check, an integer orjson may not keep, a warning
(an unknown GPU), published claims.

``KIDATA_SLOW_PATH=1`` (any value but empty or ``0``) turns the fast path off, in the loading
process and its workers, so every record takes the general path.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import orjson

from kidata.core import config
from kidata.errors import RecordError
from kidata.ingest.flatten import Environment, Flat, Flattener
from kidata.ingest.readers.base import MAX_DEPTH, Item, Lines, Overlong, raw_text
from kidata.ingest.readers.kernelindex import (
    json_error_message,
    long_digits,
    overlong_error,
    record_error,
    to_item,
)
from kidata.ingest.validate import Checker

_NO_TEXT = msgspec.Raw()
_MAX_SAME_LENGTH = 16  # texts remembered per length
_MAX_LENGTHS = 1_000  # lengths remembered


class _Bundle(msgspec.Struct, forbid_unknown_fields=True):
    """The common bundle's top level: a run and an environment, maybe a protocol, nothing
    else (a ``kind``, a workload or implementation document: the general path reads it)."""

    run: msgspec.Raw
    environment: msgspec.Raw
    protocol: msgspec.Raw = _NO_TEXT


_decode = msgspec.json.Decoder(_Bundle).decode


def enabled() -> bool:
    """Whether the fast path is on (``KIDATA_SLOW_PATH`` unset, empty or ``0``)."""
    return not config.current().slow_path


def scan(batch: Lines) -> Iterator[tuple[str, bytes | None, RecordError | None]]:
    """The records of unparsed lines, as :func:`kidata.ingest.readers.kernelindex.parse_lines` sees
    them: ``(position, line, None)``, or ``(position, None, error)`` for a line too long to
    read. Blank lines are skipped; the others keep their surrounding whitespace (JSON allows
    it; stripping copied every line)."""
    file = batch.file
    for number, line in batch.numbered():
        if isinstance(line, Overlong):
            yield f"line {number}", None, overlong_error(file, number, line)
            continue
        if line and not line.isspace():  # not blank: bytes.strip() would leave something
            yield f"line {number}", line, None


def parse(line: bytes, file: str, position: str, title: str | None
          ) -> Item | RecordError:
    """One line as the general path reads it (exactly what ``parse_lines`` yields)."""
    stripped = line.strip()
    try:
        value = orjson.loads(stripped)
    except orjson.JSONDecodeError as exc:
        return record_error(file, position, json_error_message(exc), stripped)
    except RecursionError:
        return record_error(file, position, f"JSON nested deeper than {MAX_DEPTH} levels",
                            stripped)
    return to_item(value, file, position, raw_text(stripped), title, stripped)


class FastPath:
    """Flattens plainly valid common bundles; see the module docstring. ``stager`` is where
    :func:`kidata.ingest.stage_writer.stage_fast` stages what :meth:`flatten` gives."""

    def __init__(self, stager: Any, flattener: Flattener, on: bool | None = None):
        self.on = enabled() if on is None else on
        self.stager = stager
        self.flattener = flattener
        # What the flattener gave for each environment and protocol text (saves parsing), by
        # the text's length: a text is found by comparing bytes, without hashing it (as
        # msgspec.Raw, whose comparison is one memcmp: a memoryview's compares byte by byte).
        self._environments: dict[int, list[tuple[msgspec.Raw, Environment]]] = {}
        self._protocols: dict[int, list[tuple[msgspec.Raw, tuple[str, dict]]]] = {}

    def flatten(self, line: bytes, file: str, position: str) -> Flat | None:
        """The rows of the record on ``line`` (one JSON line) if it is a plainly valid common
        bundle, by the general path's own methods; None sends it to the general path, with
        nothing learnt that the general path would not learn from it too."""
        if not self.on:
            return None
        try:
            bundle = _decode(line)
            run_text = bytes(bundle.run)
            env_text = bundle.environment
            environment = _known(self._environments, env_text)
            protocol_text = None if bundle.protocol is _NO_TEXT else bundle.protocol
            protocol = None if protocol_text is None else _known(self._protocols, protocol_text)
            # An integer orjson may not keep: the general path checks it. Only the three
            # documents can hold one (the top level has no other value), and a remembered
            # text was looked at when it was first seen.
            if long_digits(run_text) or (environment is None and long_digits(bytes(env_text))) \
                    or (protocol is None and protocol_text is not None
                        and long_digits(bytes(protocol_text))):
                return None
            run = orjson.loads(run_text)
            env_doc = None if environment is not None else orjson.loads(memoryview(env_text))
            protocol_doc = None if protocol is not None or protocol_text is None \
                else orjson.loads(memoryview(protocol_text))
        except (msgspec.DecodeError, orjson.JSONDecodeError, RecursionError):
            # Another shape, or not JSON as orjson reads it, or nested deeper than msgspec
            # follows (~1,000 levels: Python's recursion limit; issue 27): the general path's.
            return None
        if type(run) is not dict or (environment is None and type(env_doc) is not dict) \
                or (protocol_text is not None and protocol is None
                    and type(protocol_doc) is not dict):
            return None  # the reader rejects a document that is not an object
        # Parsed like the general path's record: from here on, its own methods, in its order
        # (environment, protocol, run).
        flattener = self.flattener
        c = Checker(file, position)
        out = Flat()
        try:
            if environment is None:
                environment = self._remember(self._environments, env_text,
                                             flattener.environment(c, env_doc))
            else:
                flattener.note_environment(environment)
            if protocol is None and protocol_text is not None:
                protocol = self._remember(self._protocols, protocol_text,
                                          flattener.protocol(c, protocol_doc))
            flattener.bundle(c, out, run, environment, protocol)
        except (RecordError, TypeError, OverflowError):
            # A failing check; a document nested too deep to write again (orjson's
            # TypeError); a time beyond year 9999 in UTC: the general path rejects it.
            return None
        if out.warnings or out.published:
            return None  # unusual: the general path's, warnings and claims included
        return out

    @staticmethod
    def _remember(memo: dict, text: msgspec.Raw, value: Any) -> Any:
        if len(memo) >= _MAX_LENGTHS:
            memo.clear()
        same_length = memo.setdefault(len(text), [])
        if len(same_length) >= _MAX_SAME_LENGTH:
            same_length.clear()
        same_length.append((msgspec.Raw(bytes(text)), value))  # a copy: not the line's
        return value


def _known(memo: dict[int, list[tuple[msgspec.Raw, Any]]], text: msgspec.Raw) -> Any:
    """What ``memo`` remembers for ``text`` (equal bytes: an equal document), else None."""
    for known, value in memo.get(len(text), ()):
        if known == text:
            return value
    return None
