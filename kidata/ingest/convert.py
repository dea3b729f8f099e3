"""Convert any source kidata reads into kernelindex bundles (``kidata convert --to kernelindex``).

Each record becomes one file ``<run metadata.name>.txt`` written like the seeds: the
implementation's display name as a title line, a blank line, then the bundle as JSON with a
2-space indent and the documents' keys in the order the source built them
(``{"run", "protocol", "environment", "workload", "implementation"}``, those the record has).
A bundle is self-contained: documents a run names only by digest are filled in from earlier
records of the same conversion. Records are validated exactly as a load validates them
(:class:`kidata.ingest.flatten.Flattener`), so loading the written folder gives the same
warehouse as loading the source; a record that would be rejected is reported and not written. See
``docs/liger.md`` ("convert").
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kidata.core.catalog import display_name
from kidata.core.digest import digest
from kidata.core.load_report import Tally
from kidata.errors import RecordError, UnknownFormat, UsageError
from kidata.ingest.flatten import Flattener
from kidata.ingest.readers import Item, expand_paths, read_file
from kidata.store.schema import SPEC_DIGESTS

TARGETS = ("kernelindex",)
ROLES = ("run", "protocol", "environment", "workload", "implementation")
# A bundle's document keys (singular) and the run's spec field declaring each one's digest.
DIGEST_KEYS = {table.removesuffix("s"): field for table, field in SPEC_DIGESTS.items()}
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


@dataclass
class ConvertReport(Tally):
    """What a conversion did. ``rejects`` and ``warnings`` keep the first 1,000 of each."""

    files: int = 0
    records: int = 0
    written: int = 0
    duplicates: int = 0
    rejected: int = 0
    rejects: list[RecordError] = field(default_factory=list)
    warned: int = 0
    warnings: list[str] = field(default_factory=list)
    unknown_gpus: dict[str, list] = field(default_factory=dict)


def file_name(name: str) -> str:
    """A safe file name for a document name: the name itself when it is safe, else its slug
    plus a short hash (so two unsafe names never share a file)."""
    if SAFE_NAME.match(name):
        return f"{name}.txt"
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:150] or "record"
    return f"{slug}-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:12]}.txt"


# The reader takes a title line of at most 200 characters (kidata.ingest.readers.kernelindex).
MAX_TITLE = 200


def title_line(name: str | None) -> str | None:
    """``name`` made safe as a bundle's title line, or None (no title line): one line of at
    most 200 characters that the reader cannot take for JSON. Control and line-separator
    characters become spaces; leading ``{``, ``[``, BOMs and spaces are dropped. The title is
    a label only: whatever it held, the bundle after it says the same."""
    if not name:
        return None
    text = "".join(" " if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") else ch
                   for ch in name)
    text = " ".join(text.split()).lstrip("{[ ")
    text = text[:MAX_TITLE].rstrip()
    return text or None


def render(bundle: dict[str, Any], title: str | None) -> str:
    """The text of one bundle file, as in the seeds (the title made safe: :func:`title_line`)."""
    body = json.dumps(bundle, indent=2, ensure_ascii=False, allow_nan=False)
    title = title_line(title)
    return f"{title}\n\n{body}\n" if title else f"{body}\n"


def write_new(path: Path, text: str) -> None:
    """Write ``path`` through a temporary file renamed over it: a symlink already at ``path``
    is replaced, never followed (its target is left as it was)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def convert(paths: Iterable[str], output: str | os.PathLike[str], to: str = "kernelindex",
            format: str | None = None, settings: dict[str, str] | None = None,
            mapping: str | None = None) -> ConvertReport:
    """Read files, folders or globs (any format kidata reads, detected unless ``format`` names
    one) and write one kernelindex bundle file per record into the folder ``output``.

    Returns a :class:`ConvertReport`; records that fail validation are listed there and not
    written. A record whose run was already written by this conversion with the same numbers
    is a duplicate (skipped); with other numbers it is rejected as a conflict, as a load does.
    """
    if to not in TARGETS:
        raise UnknownFormat(to, list(TARGETS), what="target")
    out = Path(output)
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} exists and is not a folder")
    skipped: list[str] = []
    unreadable: list[RecordError] = []
    files = expand_paths(paths, skipped, unreadable)
    out.mkdir(parents=True, exist_ok=True)
    report = ConvertReport()
    for message in skipped:
        report.add_warning(message)
    for error in unreadable:
        report.add_reject(error)
    flattener = Flattener()
    known: dict[str, dict[str, Any]] = {}   # digest -> document seen in this conversion
    written: dict[str, tuple[str, str]] = {}  # file name -> (content hash, where first seen)
    for path in files:
        report.files += 1
        for item in read_file(path, format, settings=settings, mapping=mapping):
            report.records += 1
            if isinstance(item, RecordError):
                report.add_reject(item)
                continue
            try:
                flat = flattener.flatten(item)
            except RecordError as err:
                report.add_reject(err)
                continue
            for message in flat.warnings:
                report.add_warning(message)
            for doc in item.docs.values():
                if isinstance(doc, dict) and doc.get("kind") != "BenchmarkRun":
                    known.setdefault(digest(doc), doc)
            bundle = _bundle(item, known)
            run = bundle.get("run")
            if run is not None:
                name = file_name(run["metadata"]["name"])
                content = flat.runs[0]["content_hash"]
                title = item.title or display_name("implementations",
                                                   flat.runs[0]["implementation"])
            else:
                role, doc = next(iter(bundle.items()))
                name = file_name(f"{role}-{doc['metadata']['name']}")
                content = digest(doc)
                title = None
            where = f"{item.file}, {item.position}"
            if name in written:
                first_hash, first_where = written[name]
                if first_hash == content:
                    report.duplicates += 1
                else:
                    report.add_reject(RecordError(
                        item.file, item.position, "run.metadata.name",
                        f"conflict: {name[:-4]} appears earlier in this conversion "
                        f"({first_where}) with different numbers"))
                continue
            write_new(out / name, render(bundle, title))
            written[name] = (content, where)
            report.written += 1
    return report


def _bundle(item: Item, known: dict[str, dict[str, Any]]) -> dict[str, Any]:
    docs = dict(item.docs)
    run = docs.get("run")
    if isinstance(run, dict):
        spec = run.get("spec") or {}
        for role, key in DIGEST_KEYS.items():
            declared = spec.get(key)
            if role not in docs and isinstance(declared, str) and declared in known:
                docs[role] = known[declared]
    return {role: docs[role] for role in ROLES if role in docs}
