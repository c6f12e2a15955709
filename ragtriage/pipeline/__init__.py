"""Query time: the retrieval pipeline a replay, an eval run and a diagnosis run.

normalize → rewrite (rules and alias dictionary, or an LLM) → routes (local BM25 and dense, or
production's Elasticsearch, Qdrant or HTTP engines) → fusion → rerank (cross-encoder and business
features) → final context and refusal, every stage recorded in a `Trace` (`types`). `factory` is the
one module that picks implementations from a profile's settings.
"""
