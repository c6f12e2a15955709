"""Refusal: the score a run's confidence is judged by, and whether it falls below the threshold.

The score is the cross-encoder probability of the best candidate when a cross-encoder scored the
pool; otherwise the one `[rerank] refusal_score` names: `dense_cosine` (the best cosine similarity
any dense route returned), `fused` (the fused score of the first fused candidate) or `final` (the
best combined rerank score). The trace records which score was used and its value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from ragtriage.pipeline.types import RerankPair, RouteResult, ScoredChunk

__all__ = ["REFUSAL_SCORES", "RefusalScore", "chosen_score", "refusal_reason", "refusal_scores"]

RefusalScore = Literal["cross_encoder", "dense_cosine", "fused", "final"]
REFUSAL_SCORES: tuple[str, ...] = ("cross_encoder", "dense_cosine", "fused", "final")


def refusal_scores(
    routes: Sequence[RouteResult],
    fused: Sequence[ScoredChunk],
    reranked: Sequence[ScoredChunk],
    pairs: Sequence[RerankPair],
) -> dict[str, float | None]:
    """Every candidate refusal score of one run (None where the run has none)."""
    probabilities = [p.cross_encoder_score for p in pairs if p.cross_encoder_score is not None]
    cosines = [r.hits[0].score for r in routes if r.kind == "dense" and r.hits]
    return {
        "cross_encoder": max(probabilities) if probabilities else None,
        "dense_cosine": max(cosines) if cosines else None,
        "fused": fused[0].score if fused else None,
        "final": reranked[0].score if reranked else None,
    }


def chosen_score(scores: dict[str, float | None], fallback: str) -> tuple[str, float | None]:
    """`(kind, value)`: the cross-encoder's when it scored, else `fallback`'s."""
    if scores.get("cross_encoder") is not None:
        return "cross_encoder", scores["cross_encoder"]
    return fallback, scores.get(fallback)


def refusal_reason(threshold: float | None, kind: str, value: float | None, candidates: int) -> str | None:
    """Why the run refuses (its score below `threshold`, or nothing retrieved), or None."""
    if threshold is None:
        return None
    if candidates == 0:
        return "no candidates retrieved"
    if value is None:
        return f"no {kind} score (nothing to judge confidence by) with refusal_threshold {threshold:g}"
    if value < threshold:
        return f"{kind} score {value:.4f} < refusal_threshold {threshold:g}"
    return None
