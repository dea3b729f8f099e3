"""Ingest: input files → checked, flattened rows in a load's staging folder.

``readers/`` open each format and turn its records into kernelindex documents;
:mod:`~kidata.ingest.validate` checks them field by field; :mod:`~kidata.ingest.flatten` derives
identity, content hash, workload and implementation and yields one row per table;
:mod:`~kidata.ingest.stage` batches the rows into staging Parquet files (in worker processes for
large inputs). :mod:`~kidata.ingest.fast` is a cheaper decoder for the common JSON Lines bundle
that feeds the same flattener: every record rule is written once. What a load reports
is :mod:`~kidata.core.load_report`. Nothing here opens DuckDB or touches committed files.
"""
