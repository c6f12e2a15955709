"""The knowledge base: documents split into chunks, stored in SQL.

Loaders for Markdown, HTML, text, Word, PowerPoint and PDF; structure-aware chunking; `kb add`,
`kb remove` and the chunk listings (`service`); and `kb import` of production's own chunk table with
its ids and vectors, from JSONL/CSV/Parquet, a SQL query or a Qdrant collection (`importer` and the
`import_*` modules). The indexes built from the KB live in `ragtriage.index`.
"""
