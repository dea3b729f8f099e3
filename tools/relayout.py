"""Rewrite old kidata module paths to the ingest/store/query layout (issue 16).

For merging a branch written against the old flat layout: after the merge, run

    python3 tools/relayout.py $(git ls-files '*.py' '*.md' benchmarks/run)

It rewrites ``from kidata import views`` → ``from kidata.query import views``, dotted names
(``kidata.check.check`` → ``kidata.store.verify.check``), file paths (``kidata/derived.py`` →
``kidata/store/derived.py``) and test paths (``tests/test_spark.py`` →
``tests/query/test_spark.py``). It leaves the public paths ``kidata.spark``/``kidata.analysis``
in Markdown alone and never touches the Parquet metadata key ``"kidata.reference"``. Then run
``ruff check --fix`` (import order) and read the diff.
"""

import pathlib
import re
import sys

M = {}
for m in "validate flatten fast stage digest documents mapping dtypes catalog convert".split():
    M[m] = ("ingest", m)
M["readers"] = ("ingest", "readers")
M["report"] = ("ingest", "load_report")
for m in "schema snapshot durable pqwrite reference derived".split():
    M[m] = ("store", m)
M["compact"] = ("store", "compaction")
M["check"] = ("store", "verify")
for m in "views engine spark analysis export output excel present readonly".split():
    M[m] = ("query", m)
M["records"] = ("query", "bundles")


def newdot(name):
    pkg, new = M[name]
    return f"kidata.{pkg}.{new}"


FROM_KIDATA = re.compile(r"^(\s*)from kidata import ([^(\n]+)$", re.M)


def fix_from(m):
    ind, names = m.group(1), m.group(2)
    comment = ""
    if "#" in names:
        names, comment = names.split("#", 1)
        comment = "  #" + comment
    keep, groups = [], {}
    for part in [p.strip() for p in names.split(",") if p.strip()]:
        bits = part.split(" as ")
        n = bits[0].strip()
        alias = bits[1].strip() if len(bits) > 1 else None
        if n in M:
            pkg, new = M[n]
            if new != n and alias is None:
                alias = n
            groups.setdefault(pkg, []).append(
                new + (f" as {alias}" if alias and alias != new else "")
            )
        else:
            keep.append(part)
    lines = []
    if keep:
        lines.append(f"{ind}from kidata import {', '.join(keep)}")
    for pkg in sorted(groups):
        lines.append(f"{ind}from kidata.{pkg} import {', '.join(sorted(groups[pkg]))}")
    if comment and lines:
        lines[0] += comment
    return "\n".join(lines)


DOT = re.compile(
    r"(?<![\w/])kidata\.(" + "|".join(sorted(M, key=len, reverse=True)) + r")\b(?!\.py)"
)
SLASH = re.compile(
    r"(?<![\w.])kidata/(" + "|".join(sorted(M, key=len, reverse=True)) + r")(\.py|/)"
)


def fix_slash(m):
    pkg, new = M[m.group(1)]
    return f"kidata/{pkg}/{new}{m.group(2)}"


TESTS = {p.name: str(p) for p in pathlib.Path("tests").rglob("test_*.py")}

for path in sys.argv[1:]:
    p = pathlib.Path(path)
    t = p.read_text()
    o = t
    t = re.sub(
        r"(?<![\w/])tests/(test_\w+\.py)", lambda m: TESTS.get(m.group(1), "tests/" + m.group(1)), t
    )
    t = FROM_KIDATA.sub(fix_from, t)
    t = "\n".join(
        line
        if 'FINGERPRINT_KEY = "kidata.reference"' in line
        else DOT.sub(lambda m: newdot(m.group(1)), line)
        for line in t.split("\n")
    )
    t = SLASH.sub(fix_slash, t)
    if p.suffix == ".md":  # the documented public paths
        t = t.replace("kidata.query.spark", "kidata.spark").replace(
            "kidata.query.analysis", "kidata.analysis"
        )
    if t != o:
        p.write_text(t)
        print("rewrote", path)
