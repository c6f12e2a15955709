"""Business features of a (query, chunk) pair for the rerank stage. Pure functions, each in [0, 1]."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timezone

from ragtriage.pipeline.fusion import normalize_scores
from ragtriage.pipeline.normalize import normalize_text

FEATURE_NAMES = ("title_hit", "freshness", "product_line", "key_terms", "rrf", "bm25_score", "dense_score")


def title_hit(keywords: Sequence[str], title: str | None) -> float:
    """Share of the query keywords found in the chunk title (case-insensitive); 0 without keywords."""
    if not keywords or not title:
        return 0.0
    folded_title = normalize_text(title).lower()
    return sum(1 for k in keywords if k.lower() in folded_title) / len(keywords)


def freshness(updated_at: str | datetime | None, now: datetime, half_life_days: float) -> float:
    """Exponential decay 0.5 ** (age_days / half_life_days); 1.0 for today or a future date, 0 if unknown."""
    if updated_at is None:
        return 0.0
    if isinstance(updated_at, str):
        try:
            moment = datetime.fromisoformat(updated_at.replace("Z", "+00:00"))
        except ValueError:
            return 0.0
    else:
        moment = updated_at
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    age_days = max(0.0, (now - moment).total_seconds() / 86_400)
    return float(0.5 ** (age_days / half_life_days))


def product_line_match(request_product_line: str | None, chunk_product_line: str | None) -> float:
    """1 when the request's and the chunk's product lines are both set and equal (case-insensitive)."""
    if not request_product_line or not chunk_product_line:
        return 0.0
    return float(request_product_line.strip().lower() == chunk_product_line.strip().lower())


def key_term_hit(query: str, content: str, key_terms: Sequence[str]) -> float:
    """Share of the configured key terms present in the query that the chunk contains verbatim."""
    folded_query = normalize_text(query).lower()
    in_query = [t for t in key_terms if t and normalize_text(t).lower() in folded_query]
    if not in_query:
        return 0.0
    folded_content = normalize_text(content).lower()
    return sum(1 for t in in_query if normalize_text(t).lower() in folded_content) / len(in_query)


def route_scores(
    routes: Iterable[tuple[str, Sequence[tuple[str, float]]]],
) -> dict[str, dict[str, float]]:
    """Per chunk, its best min-max normalised route score per route kind: `{chunk_id: {"bm25_score":
    x, "dense_score": y}}` from `(kind, [(chunk_id, score), …])` lists, kind `bm25` or `dense`.

    Each list is rescaled on its own, (s − min) / (max − min) (1.0 when its scores are all equal,
    `fusion.normalize_scores`), so a BM25 score and a cosine become comparable in [0, 1]; a chunk
    found by several routes of one kind keeps the best. A kind that did not find the chunk is absent
    (the feature is then 0). Unlike RRF, this keeps how far ahead of the rest a route put a chunk.
    """
    best: dict[str, dict[str, float]] = {}
    for kind, hits in routes:
        name = f"{kind}_score"
        for (chunk_id, _), value in zip(hits, normalize_scores([s for _, s in hits], "min-max"), strict=True):
            slot = best.setdefault(chunk_id, {})
            slot[name] = max(slot.get(name, 0.0), value)
    return best
