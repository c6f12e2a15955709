"""`build_pipeline(workspace)`: the one place that picks implementations from the settings."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ragtriage.pipeline.chunk_lookup import ChunkLookup
from ragtriage.pipeline.llm_rewrite import LLMRewriter
from ragtriage.pipeline.pipeline import Pipeline
from ragtriage.pipeline.rerank import Reranker, build_scorer
from ragtriage.pipeline.rewrite import AliasDictionary, RuleRewriter, load_aliases
from ragtriage.pipeline.types import ScoredChunk

if TYPE_CHECKING:
    from ragtriage.workspace import Workspace


def build_rule_rewriter(workspace: Workspace) -> RuleRewriter:
    """The rule rewriter with the alias dictionary named in `[rewrite] alias_file` (if any)."""
    settings = workspace.settings.rewrite
    alias_path = workspace.resolve_path(settings.alias_file)
    aliases = load_aliases(alias_path) if alias_path is not None else AliasDictionary()
    return RuleRewriter(aliases, max_sub_queries=settings.max_sub_queries)


def build_pipeline(workspace: Workspace) -> Pipeline:
    """Open the indexes and the reranker the settings name and wire them into a `Pipeline`.

    Raises:
        IndexStateError: the indexes are missing, locked by another process, or built by another embedder.
        PipelineError: the reranker or an optional backend cannot be loaded.
        InputError: the alias dictionary is not valid.
    """
    from ragtriage.pipeline.indexer import open_indexes

    settings = workspace.settings
    rules = build_rule_rewriter(workspace)
    llm = LLMRewriter(settings.rewrite.llm, rules) if settings.rewrite.llm.url else None
    reranker = Reranker(settings.rerank, build_scorer(settings.rerank))
    indexes = open_indexes(workspace)
    dense = indexes.dense

    def dense_search(vector: np.ndarray, k: int) -> list[ScoredChunk]:
        return dense.search_vector(vector, k)

    def kb_version() -> int | None:
        # The KB revision the indexes were synced to, not the store's current one: a gap between
        # the two is what `index_stale` diagnosis looks for.
        return indexes.manifest.kb_revision if indexes.manifest is not None else None

    return Pipeline(
        settings,
        rules=rules,
        reranker=reranker,
        chunks=ChunkLookup(workspace.engine, kb=settings.kb.name),
        bm25=indexes.bm25,
        embedder=indexes.embedder,
        dense_search=dense_search,
        llm_rewriter=llm,
        kb_version=kb_version,
        on_close=indexes.close,
        indexes=indexes,
    )
