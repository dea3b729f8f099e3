"""The documented public path ``kidata.analysis``: audit, regressions and compare live in
:mod:`kidata.query.analysis`; this module re-exports its public names."""

from kidata.query.analysis import (
    AUDIT_COLUMNS,
    COMPARE_COLUMNS,
    DEFAULT_THRESHOLD,
    REGRESSION_COLUMNS,
    SELECT_FIELDS,
    Audit,
    Comparison,
    audit,
    compare,
    parse_selector,
    regressions,
)

__all__ = ["AUDIT_COLUMNS", "COMPARE_COLUMNS", "DEFAULT_THRESHOLD", "REGRESSION_COLUMNS",
           "SELECT_FIELDS", "Audit", "Comparison", "audit", "compare", "parse_selector",
           "regressions"]
