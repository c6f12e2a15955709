"""Stage contracts: what a team's own stage looks like, so that replay runs production's code.

A profile names a stage in its `[stages.NAME]` table (`use = "prod_rag.search:bm25"`; see
`stage_loading`). Each stage is one callable: a plain function, or an object with `__call__`.

| stage `NAME` | called as | returns |
|---|---|---|
| `rewrite` | `rewrite(query)` | the rewritten query (`str`), or a `Rewrite` with sub-queries |
| a route (below) | `route(query, k)` | at most `k` hits, best first |
| `fusion` | `fusion(routes)`, `routes`: route name → its hits | the fused list, best first |
| `rerank` | `rerank(query, passages)` | the passages' hits in reranked order |
| `select` | `select(query, reranked, top_n)` | the final context's chunk ids, or a `Selection` that may refuse |

The routes are `bm25_raw` and `dense_raw` (they get the raw query as the user wrote it),
`bm25_rewritten` and `dense_rewritten` (the rewritten query) and `dense_sub` (each sub-query). The
rerank and select stages get the rewritten query (the raw one when nothing rewrote it).

A hit is a `(chunk_id, score)` pair (a `Hit`), or a bare chunk id when the stage has no score (it
counts as 0.0). Chunk ids are the team's own: `str`, `int` or `UUID`, kept as text. A rewrite
stage that takes an `aliases` keyword (term → synonyms) can run the alias counterfactual; one that
does not says so instead of falling back to the built-in rewrite.

The built-in stages (Whoosh/bm25s and Qdrant routes, the engines, RRF/weighted/CombSUM/CombMNZ,
the feature rerank, cross-encoders) record more than this contract asks (route flags, rerank
features, lexical support); a team stage records what it returns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from uuid import UUID

#: One ranked hit: (chunk id, score). Bigger scores rank first; ranks come from the order.
Hit = tuple[str | int | UUID, float]
#: What a stage may return for a hit: a pair, or a bare chunk id.
HitLike = Hit | str | int | UUID


@dataclass(frozen=True)
class Rewrite:
    """A rewrite stage's answer when it also splits the query."""

    query: str
    """The text the rewritten routes search with."""
    sub_queries: Sequence[str] = ()
    """Texts the `dense_sub` routes search with, one route each."""


@dataclass(frozen=True)
class Passage:
    """One candidate handed to a rerank stage: a chunk of the pool with its text and scores."""

    chunk_id: str
    text: str
    title: str | None
    fused_score: float
    """Its score in the fused list (RRF or the team's own fusion)."""
    route_scores: Mapping[str, float] = field(default_factory=dict)
    """Route name → the chunk's raw score there (cosine, BM25), for routes that found it."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """The KB's metadata of the chunk: `doc_id`, `updated_at`, `product_line` where known."""


@dataclass(frozen=True)
class Selection:
    """A select stage's answer when it can refuse."""

    final: Sequence[str | int | UUID]
    refused: bool = False
    reason: str | None = None
    """Why it refused, in the team's words (shown to the triager)."""


class RewriteStage(Protocol):
    def __call__(self, query: str) -> str | Rewrite: ...


class RouteStage(Protocol):
    def __call__(self, query: str, k: int) -> Sequence[HitLike]: ...


class FusionStage(Protocol):
    def __call__(self, routes: Mapping[str, Sequence[Hit]]) -> Sequence[HitLike]: ...


class RerankStage(Protocol):
    def __call__(self, query: str, passages: Sequence[Passage]) -> Sequence[HitLike]: ...


class SelectStage(Protocol):
    def __call__(self, query: str, reranked: Sequence[Hit], top_n: int) -> Sequence[str] | Selection: ...
