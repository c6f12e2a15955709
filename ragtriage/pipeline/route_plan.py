"""Which routes a query runs, with which text, engine and k (the planning half of the pipeline's recall).

Pure: no I/O. `plan_routes` turns a rewrite into the routes the settings (or a one-off
`RunOptions.routes`) enable; `route_k` and `engine_for` read the per-route settings, where
`dense_sub` stands for every sub-query route.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragtriage.config.settings import RetrievalSettings
from ragtriage.index.types import ScoredChunk
from ragtriage.pipeline.normalize import normalize_text
from ragtriage.pipeline.types import (
    ROUTE_BM25_RAW,
    ROUTE_BM25_REWRITTEN,
    ROUTE_DENSE_RAW,
    ROUTE_DENSE_REWRITTEN,
    ROUTE_DENSE_SUB_PREFIX,
    Retriever,
    RewriteResult,
    RouteResult,
    RunOptions,
    VectorRetriever,
)

SKIPPED_SAME_AS_RAW = "skipped: same text as raw"
SKIPPED_NO_INDEX = "skipped: no index"
Engines = Mapping[str, tuple[str, Retriever]]


@dataclass
class PlannedRoute:
    name: str
    kind: str
    query: str
    skip_flag: str | None = None
    vector_row: int | None = None
    engine: str | None = None
    """Name of the production engine this route searches (None: the local index)."""


def _setting_key(route_name: str) -> str:
    return "dense_sub" if route_name.startswith(ROUTE_DENSE_SUB_PREFIX) else route_name


def engine_for(engines: Engines, route_name: str) -> tuple[str, Retriever] | None:
    """(engine name, retriever) of a route that searches a production engine, else None."""
    return engines.get(_setting_key(route_name))


def needs_vector(engines: Engines, route: PlannedRoute) -> bool:
    """True when the route searches with a query vector (local dense, or a vector engine)."""
    engine = engine_for(engines, route.name)
    if engine is not None:
        return isinstance(engine[1], VectorRetriever)
    return route.kind == "dense"


def route_k(retrieval: RetrievalSettings, route: PlannedRoute, options: RunOptions) -> int:
    """Per-route k: a one-off option wins, then `[retrieval] route_k`, then bm25_k / dense_k."""
    override = options.bm25_k if route.kind == "bm25" else options.dense_k
    if override:
        return override
    configured = retrieval.route_k.get(_setting_key(route.name))  # type: ignore[call-overload]
    return int(configured or (retrieval.bm25_k if route.kind == "bm25" else retrieval.dense_k))


def plan_routes(
    rewrite: RewriteResult, enabled: Collection[str], engines: Engines, local: Mapping[str, bool]
) -> list[PlannedRoute]:
    """The enabled routes in run order, each with its query text, engine and skip flag.

    `local` says whether the local index of a kind (`bm25`, `dense`) is open.
    """
    raw_text = rewrite.normalized_query
    rewritten = normalize_text(rewrite.rewritten_query) or raw_text

    def same_as(raw_route: str) -> str | None:
        # Skip a rewritten route only when the raw route of its kind runs too (ablation D runs
        # the rewritten routes alone, and then they must search even an unchanged query).
        return SKIPPED_SAME_AS_RAW if rewritten == raw_text and raw_route in enabled else None

    planned = [
        PlannedRoute(ROUTE_BM25_RAW, "bm25", raw_text),
        PlannedRoute(ROUTE_DENSE_RAW, "dense", raw_text),
        PlannedRoute(ROUTE_BM25_REWRITTEN, "bm25", rewritten, same_as(ROUTE_BM25_RAW)),
        PlannedRoute(ROUTE_DENSE_REWRITTEN, "dense", rewritten, same_as(ROUTE_DENSE_RAW)),
    ]
    if rewrite.mode != "off":
        for number, sub_query in enumerate(rewrite.sub_queries, start=1):
            text = normalize_text(sub_query)
            flag = SKIPPED_SAME_AS_RAW if text in (raw_text, "") else None
            planned.append(PlannedRoute(f"{ROUTE_DENSE_SUB_PREFIX}{number}", "dense", text, flag))
    routes = [
        r
        for r in planned
        if r.name in enabled or (_setting_key(r.name) == "dense_sub" and "dense_sub" in enabled)
    ]
    for route in routes:
        engine = engine_for(engines, route.name)
        route.engine = engine[0] if engine is not None else None
        if route.skip_flag is None and engine is None and not local.get(route.kind, False):
            route.skip_flag = SKIPPED_NO_INDEX
    return routes


def fusion_weights(weights: Mapping[Any, float], routes: Sequence[RouteResult]) -> dict[str, float]:
    """`[retrieval.fusion] weights` per route name: a `dense_sub` weight weighs every sub-query route."""
    by_route = {str(route): weight for route, weight in weights.items()}
    for route in routes:
        if route.name.startswith(ROUTE_DENSE_SUB_PREFIX) and "dense_sub" in by_route:
            by_route[route.name] = by_route["dense_sub"]
    return by_route


def search_route(
    planned: PlannedRoute,
    vector: Any,
    k: int,
    *,
    engine: Retriever | None,
    bm25: Retriever | None,
    dense: Callable[[Any, int], Sequence[ScoredChunk]] | None,
) -> tuple[list[ScoredChunk], list[str]]:
    """One route's top `k` hits and flags: from its production `engine` (by `vector` when it is a
    vector engine and the query was embedded), else the local `bm25` index or `dense` search."""
    if engine is not None:
        if isinstance(engine, VectorRetriever) and vector is not None:
            return list(engine.search_vector(vector, k)), []
        hits, flags = engine.search(planned.query, k)
        return list(hits), list(flags)
    if planned.kind == "bm25" and bm25 is not None:
        hits, flags = bm25.search(planned.query, k)
        return list(hits), list(flags)
    if vector is not None and dense is not None:
        return list(dense(vector, k)), []
    return [], []
