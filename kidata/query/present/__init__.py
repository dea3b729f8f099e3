"""Presenting the warehouse to people: ``kidata report``'s static HTML page and its charts.

:mod:`kidata.query.present.data` reads the views into frames (restricted by :class:`Filters`),
:mod:`kidata.query.present.charts` draws them with matplotlib, and
:mod:`kidata.query.present.page` writes one self-contained HTML file (charts inlined as SVG; no
script, font or request at view time).
matplotlib is an optional dependency: ``pip install 'kidata[report]'``.
"""

from __future__ import annotations

from kidata.query.present.data import Filters
from kidata.query.present.page import ReportResult, write_report

__all__ = ["Filters", "ReportResult", "write_report"]
