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
_EXPLAIN = re.compile(r"^\s*explain\s+(?:analy[sz]e\s+)?", re.IGNORECASE)
# Leading comments, whitespace and parentheses before a statement's first word.
_LEAD = re.compile(r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/|\()*", re.DOTALL)
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
    if kind == "EXPLAIN":
        inner = _EXPLAIN.sub("", statement.query, count=1)
        if inner != statement.query and inner.strip():
            try:
                parts = con.extract_statements(inner)
            except duckdb.Error as exc:
                raise QueryError(str(exc)) from None
            return next(filter(None, (_refused(con, part) for part in parts)), None)
    if kind == "MULTI" and _first_word(statement.query) in _QUERY_WORDS:
        return None
    return _first_word(statement.query) or kind


def _first_word(text: str) -> str:
    rest = _LEAD.sub("", text, count=1)
    match = re.match(r"[A-Za-z_]+", rest)
    return match.group(0).upper() if match else ""
