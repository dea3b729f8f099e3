"""Read-only SQL: refuse statements that could write, before DuckDB runs them.

``kidata sql`` runs the user's SQL on an in-memory DuckDB whose tables are views over the
warehouse's Parquet files. DuckDB cannot open those files read-only for us (turning off
external access also stops the views from reading them), so the statements are classified
with DuckDB's own parser and only queries are let through: ``SELECT`` (which includes
``FROM …``, ``WITH …``, ``DESCRIBE``, ``SHOW``, ``SUMMARIZE``) and ``EXPLAIN`` of one. A
``COPY … TO`` into a table folder, an ``ATTACH``, ``INSTALL``/``LOAD`` or a ``SET`` that
points DuckDB's own files somewhere are refused; ``kidata sql --write`` lifts the check.
"""

from __future__ import annotations

import re

import duckdb

from kidata.errors import QueryError, UsageError

ALLOWED = frozenset({"SELECT"})
_EXPLAIN = re.compile(r"^\s*explain\s+(?:analy[sz]e\s+)?", re.IGNORECASE)


def check(con: duckdb.DuckDBPyConnection, query: str) -> None:
    """Raise :class:`UsageError` unless every statement in ``query`` only reads."""
    try:
        statements = con.extract_statements(query)
    except duckdb.Error as exc:
        raise QueryError(str(exc)) from None
    for statement in statements:
        kind = statement.type.name
        if kind == "EXPLAIN":
            inner = _EXPLAIN.sub("", statement.query, count=1)
            if inner != statement.query and inner.strip():
                check(con, inner)  # EXPLAIN ANALYZE runs its statement
                continue
        if kind not in ALLOWED:
            first = statement.query.strip().split(None, 1)[0].upper() if \
                statement.query.strip() else kind
            raise UsageError(f"kidata sql opens the warehouse read-only and runs only queries "
                             f"(SELECT, WITH, FROM, DESCRIBE, SHOW, EXPLAIN); refused the "
                             f"{first} statement. Use --write to allow it")
