"""Query: answers from a committed warehouse.

:mod:`~kidata.query.session` holds a warehouse's cached connection and runs queries;
:mod:`~kidata.query.views` binds the tables and ``sql/*.sql`` views to DuckDB (connections
from :mod:`~kidata.core.engine`), :mod:`~kidata.query.spark` to Spark SQL;
:mod:`~kidata.query.analysis` (audit, regressions, compare); hand-off as terminal tables
(:mod:`~kidata.query.output`), files (:mod:`~kidata.query.export`, :mod:`~kidata.query.excel`),
kernelindex bundles (:mod:`~kidata.query.bundles`) and the HTML report (``present/``);
:mod:`~kidata.query.readonly` refuses SQL that could write.
"""
