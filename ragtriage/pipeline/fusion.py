"""Fusion of several routes' ranked lists into one. Pure: no I/O, no backend imports.

One function per method: `rrf` (ranks only), `weighted_fusion`, `combsum` and `combmnz` (scores,
normalised per list by `normalize_scores`). Every function returns `ScoredChunk`s ranked from 1,
and none depends on the order in which the lists are given.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

from ragtriage.index.types import ScoredChunk
from ragtriage.wording import quoted


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
    return _ranked(scores, best, top_n)


# ---------------------------------------------------------------- score fusion

#: How a route's scores are rescaled before they are combined.
Normalization = Literal["none", "min-max", "max", "z-score"]
#: What a chunk missing from a route's list scores there: 0, or the lowest (normalised) score of that list.
MissingScore = Literal["zero", "min"]
ScoredLists = Mapping[str, Sequence[tuple[str, float]]]
#: One method for every list, or one per list name (`{"dense_raw": "none", "bm25_raw": "max"}`).
Normalizations = Normalization | Mapping[str, Normalization]
#: The method of a list a per-list mapping does not name.
DEFAULT_NORMALIZATION: Normalization = "min-max"


def normalization_of(normalization: Normalizations, list_name: str) -> Normalization:
    """The method that rescales list `list_name`: the one method, or the mapping's entry for the
    list (`DEFAULT_NORMALIZATION`, min-max, when the mapping does not name it)."""
    if isinstance(normalization, str):
        return normalization
    return normalization.get(list_name, DEFAULT_NORMALIZATION)


def normalize_scores(scores: Sequence[float], method: Normalization) -> list[float]:
    """Rescale one list's scores. Pure; returns a new list of the same length.

    - `none`: s
    - `min-max`: (s − min) / (max − min); a list whose scores are all equal maps to 1.0 (each is
      that list's best; ranx divides by 1e-9 instead and gives 0.0)
    - `max`: s / max when max > 0, else s unchanged
    - `z-score`: (s − mean) / σ with the population σ (as ranx `zmuv`); σ = 0 maps to 0.0

    Raises:
        ValueError: an unknown method.
    """
    values = [float(s) for s in scores]
    if method == "none" or not values:
        return values
    if method == "min-max":
        low, high = min(values), max(values)
        return [1.0] * len(values) if high == low else [(s - low) / (high - low) for s in values]
    if method == "max":
        high = max(values)
        return [s / high for s in values] if high > 0 else values
    if method == "z-score":
        mean = math.fsum(values) / len(values)
        sigma = math.sqrt(math.fsum((s - mean) ** 2 for s in values) / len(values))
        return [0.0] * len(values) if sigma == 0 else [(s - mean) / sigma for s in values]
    raise ValueError(f"unknown normalization {quoted(method)}; use none, min-max, max or z-score")


def _prepared(
    lists: ScoredLists, normalization: Normalizations
) -> tuple[dict[str, dict[str, float]], dict[str, tuple[int, str]]]:
    """Per list: chunk id → normalised score (first occurrence wins, each list by its own method,
    `normalization_of`); per chunk its best (rank, list)."""
    per_list: dict[str, dict[str, float]] = {}
    best: dict[str, tuple[int, str]] = {}
    for list_name, hits in lists.items():
        first: dict[str, float] = {}
        for position, (chunk_id, score) in enumerate(hits, start=1):
            if chunk_id in first:
                continue
            first[chunk_id] = score
            best[chunk_id] = min(best.get(chunk_id, (position, list_name)), (position, list_name))
        normalised = normalize_scores(list(first.values()), normalization_of(normalization, str(list_name)))
        per_list[str(list_name)] = dict(zip(first, normalised, strict=True))
    return per_list, best


def _ranked(
    scores: dict[str, float], best: dict[str, tuple[int, str]], top_n: int | None
) -> list[ScoredChunk]:
    if top_n is not None and top_n < 0:
        raise ValueError(f"top_n must be >= 0, got {top_n}")
    ordered = sorted(scores, key=lambda c: (-scores[c], best[c][0], best[c][1], c))
    if top_n is not None:
        ordered = ordered[:top_n]
    return [ScoredChunk(chunk_id=c, rank=i, score=scores[c]) for i, c in enumerate(ordered, start=1)]


def weighted_fusion(
    lists: ScoredLists,
    weights: Mapping[str, float] | None = None,
    *,
    normalization: Normalizations = "min-max",
    missing: MissingScore = "zero",
    top_n: int | None = None,
) -> list[ScoredChunk]:
    """Weighted score fusion (a linear combination): score(c) = Σ_r w_r · norm_r(s_r(c)).

    The convex-combination hybrid of Bruch, Gai & Ingber, "An Analysis of Fusion Functions for
    Hybrid Retrieval", ACM TOIS 2023 (e.g. 0.7 × dense + 0.3 × BM25); ranx calls it `wsum`. A
    chunk absent from list r scores 0 there (`missing="zero"`, as ranx) or the lowest normalised
    score of list r (`missing="min"`). A list without a weight has weight 1.0; an empty list adds
    nothing. Ties are ordered as in `rrf`, so the result does not depend on the order of the lists.

    Args:
        lists: route name → ranked (chunk id, score) pairs, best first.
        weights: route name → weight.
        normalization: `none`, `min-max`, `max` or `z-score` (see `normalize_scores`) for every
            list, or a mapping list name → method for a production that rescales its routes
            differently, e.g. `{"dense_raw": "none", "bm25_raw": "max"}` for 0.7 × raw cosine +
            0.3 × BM25 ÷ max(BM25); a list the mapping does not name is min-max normalised.

    Raises:
        ValueError: an unknown normalization or missing-score rule, or a negative `top_n`.
    """
    if missing not in ("zero", "min"):
        raise ValueError(f"unknown missing-score rule {quoted(missing)}; use zero or min")
    per_list, best = _prepared(lists, normalization)
    weight_of = dict(weights or {})
    contributions: dict[str, list[float]] = {chunk_id: [] for chunk_id in best}
    for list_name, scores in per_list.items():
        if not scores:
            continue
        weight = float(weight_of.get(list_name, 1.0))
        absent = min(scores.values()) if missing == "min" else 0.0
        for chunk_id in contributions:
            contributions[chunk_id].append(weight * scores.get(chunk_id, absent))
    # Summing in sorted order keeps the float result bit-identical whatever order the lists come in.
    fused = {c: math.fsum(sorted(parts)) for c, parts in contributions.items()}
    return _ranked(fused, best, top_n)


def combsum(
    lists: ScoredLists, *, normalization: Normalizations = "min-max", top_n: int | None = None
) -> list[ScoredChunk]:
    """CombSUM: score(c) = Σ_{r ∋ c} norm_r(s_r(c)), the sum over the lists that hold c.

    Fox & Shaw, "Combination of Multiple Searches", TREC-2, NIST SP 500-215 (1994). Scores are
    normalised per list first (Lee 1997 recommends min-max, ranx's default).
    """
    per_list, best = _prepared(lists, normalization)
    parts: dict[str, list[float]] = {chunk_id: [] for chunk_id in best}
    for scores in per_list.values():
        for chunk_id, score in scores.items():
            parts[chunk_id].append(score)
    return _ranked({c: math.fsum(sorted(p)) for c, p in parts.items()}, best, top_n)


def combmnz(
    lists: ScoredLists, *, normalization: Normalizations = "min-max", top_n: int | None = None
) -> list[ScoredChunk]:
    """CombMNZ: score(c) = |{r : c ∈ r}| · Σ_{r ∋ c} norm_r(s_r(c)) (CombSUM times the number of lists holding c).

    Fox & Shaw, "Combination of Multiple Searches", TREC-2, NIST SP 500-215 (1994).
    """
    per_list, best = _prepared(lists, normalization)
    parts: dict[str, list[float]] = {chunk_id: [] for chunk_id in best}
    for scores in per_list.values():
        for chunk_id, score in scores.items():
            parts[chunk_id].append(score)
    return _ranked({c: len(p) * math.fsum(sorted(p)) for c, p in parts.items()}, best, top_n)


FusionMethod = Literal["rrf", "weighted", "combsum", "combmnz"]


def fuse(
    method: FusionMethod,
    lists: ScoredLists,
    *,
    rrf_k: int = 60,
    weights: Mapping[str, float] | None = None,
    normalization: Normalizations = "min-max",
    missing: MissingScore = "zero",
    top_n: int | None = None,
) -> list[ScoredChunk]:
    """Fuse with `method` (`[retrieval.fusion] method`); `rrf` uses the ranks only, the others the
    scores, each list rescaled by `normalization` (one method, or one per list name). `top_n` keeps
    the first fused chunks only (`[retrieval.fusion] keep`; None: all).

    Raises:
        ValueError: an unknown method (or a bad parameter of one).
    """
    if method == "rrf":
        return rrf(
            {name: [chunk_id for chunk_id, _ in hits] for name, hits in lists.items()}, k=rrf_k, top_n=top_n
        )
    if method == "weighted":
        return weighted_fusion(lists, weights, normalization=normalization, missing=missing, top_n=top_n)
    if method == "combsum":
        return combsum(lists, normalization=normalization, top_n=top_n)
    if method == "combmnz":
        return combmnz(lists, normalization=normalization, top_n=top_n)
    raise ValueError(f"unknown fusion method {quoted(method)}; use rrf, weighted, combsum or combmnz")
