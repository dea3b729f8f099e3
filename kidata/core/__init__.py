"""The neutral layer every other package may import: configuration, the DuckDB connection's
settings and SQL text helpers (:mod:`~kidata.core.engine`, :mod:`~kidata.core.sql`), the view
files (:mod:`~kidata.core.viewfiles`), the load report's types, the digest rule and the GPU
catalog.
It imports nothing of kidata's but :mod:`kidata.errors` and :mod:`kidata._imports`
(docs/architecture.md, "Layers and their allowed edges")."""
