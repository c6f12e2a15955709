"""Assemble what the pipeline builds from its stage lists: the reranker's input items, and the
candidate pool of a trace (every chunk any route returned, at every stage)."""

from __future__ import annotations

from collections.abc import Sequence

from ragtriage.index.types import ScoredChunk
from ragtriage.pipeline.chunk_lookup import ChunkLookup
from ragtriage.pipeline.features import route_scores
from ragtriage.pipeline.rerank import RerankItem, RerankOutcome
from ragtriage.pipeline.types import Candidate, RouteResult, StageRank


def rerank_items(
    fused: Sequence[ScoredChunk], routes: Sequence[RouteResult], chunks: ChunkLookup
) -> list[RerankItem]:
    """The reranker's input: each fused chunk with its text, KB metadata and best route scores."""
    contents = chunks.contents([c.chunk_id for c in fused])
    scores = route_scores((r.kind, [(h.chunk_id, h.score) for h in r.hits]) for r in routes)
    items = []
    for chunk in fused:
        meta = chunks.get(chunk.chunk_id)
        items.append(
            RerankItem(
                chunk_id=chunk.chunk_id,
                rrf_score=chunk.score,
                title=meta.title if meta else None,
                content=contents.get(chunk.chunk_id, ""),
                updated_at=meta.updated_at if meta else None,
                product_line=meta.product_line if meta else None,
                bm25_score=scores.get(chunk.chunk_id, {}).get("bm25_score", 0.0),
                dense_score=scores.get(chunk.chunk_id, {}).get("dense_score", 0.0),
            )
        )
    return items


def build_candidates(
    routes: Sequence[RouteResult],
    fused: Sequence[ScoredChunk],
    rerank_input: Sequence[str],
    outcome: RerankOutcome | None,
    final: Sequence[str],
    chunks: ChunkLookup,
) -> list[Candidate]:
    """One `Candidate` per chunk seen in any route, ordered by fused rank, with KB metadata.

    A chunk id the KB does not know (or no longer publishes) is kept with `known = False`: that is
    the signature of a stale index, which triage must see rather than lose.
    """
    order: list[str] = [c.chunk_id for c in fused]
    for route in routes:
        order.extend(h.chunk_id for h in route.hits)
    pool = list(dict.fromkeys(order))
    by_id: dict[str, Candidate] = {}
    for chunk_id in pool:
        meta = chunks.get(chunk_id)
        by_id[chunk_id] = Candidate(
            chunk_id=chunk_id,
            doc_id=meta.doc_id if meta else None,
            title=meta.title if meta else None,
            anchor=meta.anchor if meta else None,
            heading_path=list(meta.heading_path) if meta else [],
            known=meta is not None,
        )
    for route in routes:
        for hit in route.hits:
            # The first occurrence wins if a backend ever returns a chunk twice.
            by_id[hit.chunk_id].routes.setdefault(route.name, StageRank(rank=hit.rank, score=hit.score))
    for chunk in fused:
        by_id[chunk.chunk_id].fused = StageRank(rank=chunk.rank, score=chunk.score)
    for chunk_id in rerank_input:
        by_id[chunk_id].in_rerank_input = True
    if outcome is not None:
        for chunk in outcome.reranked:
            by_id[chunk.chunk_id].reranked = StageRank(rank=chunk.rank, score=chunk.score)
        for pair in outcome.pairs:
            by_id[pair.chunk_id].features = dict(pair.features)
            if pair.cross_encoder_score is not None:
                by_id[pair.chunk_id].features["cross_encoder"] = pair.cross_encoder_score
            by_id[pair.chunk_id].truncated = pair.truncated
    for rank, chunk_id in enumerate(final, start=1):
        by_id[chunk_id].final_rank = rank
        by_id[chunk_id].is_selected = True
    return [by_id[c] for c in pool]
