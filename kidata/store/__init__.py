"""Store: the warehouse on disk.

:mod:`~kidata.store.layout` names every path under a warehouse; :mod:`~kidata.store.schema`
declares the tables; :mod:`~kidata.store.tablesql` gives the SQL that reads one;
:mod:`~kidata.store.snapshot` is the committed-loads read rule for every
engine; :mod:`~kidata.store.compaction` merges small files; :mod:`~kidata.store.verify` checks
and repairs a warehouse; :mod:`~kidata.store.durable` and :mod:`~kidata.store.pqwrite` write files
that survive a crash; :mod:`~kidata.store.reference` and :mod:`~kidata.store.derived` keep the
reference and derived tables; :mod:`~kidata.store.commit` is the one commit mechanism every visible
change goes through (writer lock, recovery, journal); :mod:`~kidata.store.load_commit` a load's
commit (the dedupe plan, the final files, the marker); :mod:`~kidata.store.manifest` the input
files past loads read in full.
"""
