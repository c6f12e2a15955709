"""`build_pipeline`: the one place that picks implementations from the settings."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from sqlalchemy.engine import Engine

from ragtriage.config.profiles import ResolvedProfile, get_profile
from ragtriage.config.settings import Settings
from ragtriage.index.analyzer import normalize_text
from ragtriage.index.bm25_engine import BM25Query
from ragtriage.index.indexer import Indexes
from ragtriage.index.types import ScoredChunk
from ragtriage.pipeline.chunk_lookup import ChunkLookup
from ragtriage.pipeline.engines import build_route_engines
from ragtriage.pipeline.pipeline import Pipeline, WholeRun
from ragtriage.pipeline.rerank import Reranker, build_scorer
from ragtriage.pipeline.rewrite import AliasDictionary, LLMRewriter, RuleRewriter, load_aliases
from ragtriage.pipeline.stage_loading import ROUTE_STAGES, load_stages, team_routes

DEFAULT_PROFILE = "default"

#: A settings path resolved as the settings file means it (`Workspace.resolve_path`).
PathResolver = Callable[[str | None], Path | None]


def build_rule_rewriter(settings: Settings, resolve_path: PathResolver) -> RuleRewriter:
    """The rule rewriter with the alias dictionary named in `[rewrite] alias_file` (if any)."""
    rewrite = settings.rewrite
    alias_path = resolve_path(rewrite.alias_file)
    aliases = load_aliases(alias_path) if alias_path is not None else AliasDictionary()
    return RuleRewriter(aliases, max_sub_queries=rewrite.max_sub_queries, alias_mode=rewrite.alias_mode)


def bm25_query(settings: Settings) -> BM25Query:
    """How a profile's BM25 route analyses and scores a query (`[index]` title_boost, bm25_k1,
    bm25_b, query_segmentation, query_stop_words, which a profile may overlay)."""
    index = settings.index
    return BM25Query(
        title_boost=index.title_boost,
        segmentation=index.query_segmentation,
        stop_words=frozenset(normalize_text(w) for w in index.query_stop_words),
        k1=index.bm25_k1,
        b=index.bm25_b,
    )


def build_pipeline(
    settings: Settings,
    indexes: Indexes,
    engine: Engine,
    resolve_path: PathResolver,
    profile: ResolvedProfile | None = None,
    whole: WholeRun | None = None,
) -> Pipeline:
    """Wire the opened indexes, and the rewrite, engines and reranker a profile names, into a `Pipeline`.

    `profile` None: `settings` as they are (profile `default`). The indexes are shared by every
    profile's pipeline; their owner closes them. `whole`: the team's whole pipeline
    (`[stages.pipeline]`, built by `ragtriage.replay.framework`), run instead of every stage.

    Raises:
        IndexStateError: the indexes are missing, locked by another process, or built by another embedder.
        PipelineError: the reranker, an optional backend or a team stage (`[stages]`) cannot be loaded.
        InputError: the alias dictionary is not valid.
    """
    profile = profile or get_profile(settings, DEFAULT_PROFILE)
    settings = profile.settings
    rules = build_rule_rewriter(settings, resolve_path)
    llm = LLMRewriter(settings.rewrite.llm, rules) if settings.rewrite.llm.url else None
    reranker = Reranker(settings.rerank, build_scorer(settings.rerank))
    engines = build_route_engines(settings)
    # The team's own stages: its routes take the place of the local index (or an engine) for their route.
    stages = load_stages(settings, profile.name)
    engines.update(team_routes(stages))
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
        chunks=ChunkLookup(engine, kb=settings.kb.name),
        bm25=indexes.bm25.with_query(bm25_query(settings)),
        embedder=indexes.embedder,
        dense_search=dense_search,
        llm_rewriter=llm,
        kb_version=kb_version,
        indexes=indexes,
        engines=engines,
        profile=profile.ref(),
        stages={name: stage for name, stage in stages.items() if name not in ROUTE_STAGES},
        whole=whole,
    )
