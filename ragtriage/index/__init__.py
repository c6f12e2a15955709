"""The derived indexes built from the KB: BM25 (Whoosh, or bm25s for big KBs) and dense (Qdrant), their
manifest, the embedders and the embedding cache. Below `pipeline`, above `kb` and `store`.
"""
