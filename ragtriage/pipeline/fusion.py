"""Reciprocal rank fusion of several ranked lists. Pure: no I/O, no backend imports."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ragtriage.pipeline.types import ScoredChunk


def rrf(
    rankings: Mapping[str, Sequence[str]] | Sequence[Sequence[str]],
    k: int = 60,
    top_n: int | None = None,
) -> list[ScoredChunk]:
    """Reciprocal rank fusion: score(c) = Σ_lists 1 / (k + rank_list(c)), ranks counted from 1.

    Cormack, Clarke & Büttcher, "Reciprocal Rank Fusion outperforms Condorcet and individual
    rank learning methods", SIGIR 2009. A list that lacks a chunk adds nothing for it; a chunk
    that appears twice in one list counts once, at its first (best) occurrence. The result does
    not depend on the order of the lists: equal scores are ordered by the best rank any list
    gave the chunk, then (for named lists) by the name of that list, then by chunk id.

    Args:
        rankings: ranked chunk ids per list (a mapping route name → ids, or a sequence of lists).
        k: the RRF constant (60 in the paper); must be positive.
        top_n: keep only the first `top_n` fused chunks (None: all).

    Returns:
        Fused chunks with ranks from 1 and their RRF scores, best first.
    """
    if k <= 0:
        raise ValueError(f"RRF k must be positive, got {k}")
    if top_n is not None and top_n < 0:
        raise ValueError(f"top_n must be >= 0, got {top_n}")
    named_lists: list[tuple[str, Sequence[str]]] = (
        [(str(name), ids) for name, ids in rankings.items()]
        if isinstance(rankings, Mapping)
        else [("", ids) for ids in rankings]
    )
    positions: dict[str, list[int]] = {}
    best: dict[str, tuple[int, str]] = {}
    for list_name, ranked_ids in named_lists:
        seen: set[str] = set()
        for position, chunk_id in enumerate(ranked_ids, start=1):
            if chunk_id in seen:
                continue
            seen.add(chunk_id)
            positions.setdefault(chunk_id, []).append(position)
            best[chunk_id] = min(best.get(chunk_id, (position, list_name)), (position, list_name))
    # Summing each chunk's contributions in sorted rank order keeps the float result bit-identical
    # whatever order the lists come in.
    scores = {c: sum(1.0 / (k + rank) for rank in sorted(ranks)) for c, ranks in positions.items()}
    ordered = sorted(scores, key=lambda c: (-scores[c], best[c][0], best[c][1], c))
    if top_n is not None:
        ordered = ordered[:top_n]
    return [ScoredChunk(chunk_id=c, rank=i, score=scores[c]) for i, c in enumerate(ordered, start=1)]
