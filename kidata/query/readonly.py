"""Read-only SQL: refuse statements that could write, before DuckDB runs them.

``kidata sql`` runs the user's SQL on an in-memory DuckDB whose tables are views over the
warehouse's Parquet files. What a statement does is decided by DuckDB's own parser, from the
statement type it reports (``extract_statements``), not from the statement's first word:

- ``SELECT``: everything DuckDB parses as a query — ``SELECT``, ``WITH``, ``FROM``, ``VALUES``,
  ``DESCRIBE``, ``SHOW``, ``SUMMARIZE``, ``UNPIVOT``, ``PIVOT … IN (…)`` — reads only.
- ``EXPLAIN``: reads only when the statement it explains does (``EXPLAIN ANALYZE`` runs it).
- ``MULTI``: DuckDB expands a ``PIVOT`` whose column values come from the data into several
  statements: temporary ``ENUM`` types (in the session's memory, gone with it) and then the
  statement as written, whose own type DuckDB does not report. It reads only when the
  statement as written is a query: one whose first word is a query's (``PIVOT``,
  ``SELECT``, ``FROM``, …); ``COPY (PIVOT …) TO``, ``CREATE TABLE … AS PIVOT`` are refused.
  The first word (and what an ``EXPLAIN`` explains) is found among the tokens of DuckDB's own
  tokenizer, never by a pattern over the text: block comments nest for DuckDB
  (``/* /* */ SELECT */ COPY …`` is a ``COPY``), which 0.2.7's pattern did not know.
- Every other type (``COPY``, ``EXPORT``, ``ATTACH``, ``LOAD``/``INSTALL``, ``SET``,
  ``PRAGMA``, ``CALL``, ``CREATE``, ``INSERT``, …) may write or change the session: refused
  unless ``kidata sql --write``.

Why not a read-only connection: DuckDB cannot open an in-memory database read-only, and a
database file opened read-only still runs ``COPY … TO``, ``EXPORT DATABASE``, ``SET`` and
``LOAD``: its read-only mode protects the database, not the file system. Turning external
access off would also stop the views from reading the warehouse's files.
"""

from __future__ import annotations

import re

import duckdb

from kidata.errors import QueryError, UsageError

QUERIES = "SELECT, WITH, FROM, VALUES, DESCRIBE, SHOW, SUMMARIZE, PIVOT, UNPIVOT, EXPLAIN"
# First words of statements DuckDB parses as a query (type SELECT); used only for MULTI, whose
# final statement's type DuckDB does not report.
_QUERY_WORDS = frozenset({"SELECT", "FROM", "VALUES", "TABLE", "PIVOT", "PIVOT_WIDER",
                          "UNPIVOT", "PIVOT_LONGER"})


def check(con: duckdb.DuckDBPyConnection, query: str) -> None:
    """Raise :class:`UsageError` unless every statement in ``query`` only reads."""
    try:
        statements = con.extract_statements(query)
    except duckdb.Error as exc:
        raise QueryError(str(exc)) from None
    for statement in statements:
        refused = _refused(con, statement)
        if refused:
            raise UsageError(f"kidata sql opens the warehouse read-only and runs only queries "
                             f"({QUERIES}); refused the {refused} statement. Use --write to "
                             f"allow it")


def _refused(con: duckdb.DuckDBPyConnection, statement) -> str | None:
    """None when ``statement`` only reads, else the name of the statement that may write."""
    kind = statement.type.name
    if kind == "SELECT":
        return None
    words = _words(statement.query)
    if kind == "EXPLAIN":
        inner = _explained(statement.query, words)
        if inner is not None:
            try:
                parts = con.extract_statements(inner)
            except duckdb.Error as exc:
                raise QueryError(str(exc)) from None
            if not parts:
                return "EXPLAIN"
            return next(filter(None, (_refused(con, part) for part in parts)), None)
    first = _first_word(words)
    if kind == "MULTI" and first in _QUERY_WORDS:
        return None
    return first or kind


def _words(text: str) -> list[tuple[int, str]]:
    """The statement's tokens as DuckDB's own tokenizer splits them (so comments nest as they
    do for its parser: ``/* /* */ SELECT */`` is one comment), comments left out: (position,
    text) each."""
    tokens = duckdb.tokenize(text)
    ends = [position for position, _ in tokens[1:]] + [len(text)]
    return [(position, text[position:end].strip())
            for (position, kind), end in zip(tokens, ends, strict=True)
            if kind != duckdb.token_type.comment]


def _first_word(words: list[tuple[int, str]]) -> str:
    """The statement's first keyword or name, after any opening parentheses."""
    for _, token in words:
        if token.startswith("("):
            continue
        match = re.match(r"[A-Za-z_]+", token)
        return match.group(0).upper() if match else ""
    return ""


def _explained(text: str, words: list[tuple[int, str]]) -> str | None:
    """What an ``EXPLAIN [ANALYZE] [(options)]`` statement explains, from its tokens; None
    when it is not of that form (then the statement is judged by its first word)."""
    if not words or words[0][1].upper() != "EXPLAIN":
        return None
    i = 1
    if i < len(words) and words[i][1].upper() in ("ANALYZE", "ANALYSE"):
        i += 1
    if i < len(words) and words[i][1] == "(":  # options: EXPLAIN (FORMAT json) ...
        depth = 0
        while i < len(words):
            depth += words[i][1].count("(") - words[i][1].count(")")
            i += 1
            if depth <= 0:
                break
    return text[words[i][0]:] if i < len(words) else None
