"""Production engines as routes: build the `Retriever` of every route `[retrieval] route_engine` names.

One module per engine: `engine_elasticsearch.py` (Elasticsearch/OpenSearch `_search`),
`engine_qdrant.py` (an existing Qdrant server collection), `engine_http.py` (a generic JSON
retrieval endpoint such as Dify's or RAGFlow's). Keys come from environment variables only.
"""

from __future__ import annotations

from typing import Literal

from ragtriage.config.profiles import check_route_engines
from ragtriage.config.settings import ElasticsearchEngine, QdrantEngine, Settings
from ragtriage.pipeline.types import Retriever

LOCAL = "local"


def build_route_engines(settings: Settings) -> dict[str, tuple[str, Retriever]]:
    """Route name → (engine name, retriever) for every route whose `route_engine` is not `local`.

    Raises:
        ConfigError: a route names an engine without an `[engines.NAME]` table.
        PipelineError: an engine's client library is missing.
    """
    check_route_engines(settings, str(settings.config_file or "settings"))
    routes: dict[str, tuple[str, Retriever]] = {}
    for route, name in settings.retrieval.route_engine.items():
        if name != LOCAL and route in settings.retrieval.routes:
            # One client per route, so every error names the route it came from.
            routes[route] = (name, _build(route, name, settings))
    return routes


def _build(route: str, name: str, settings: Settings) -> Retriever:
    engine = settings.engines[name]
    kind = _kind(route)
    if isinstance(engine, ElasticsearchEngine):
        from ragtriage.pipeline.engine_elasticsearch import ElasticsearchRetriever

        return ElasticsearchRetriever(route, name, engine, kind=kind)
    if isinstance(engine, QdrantEngine):
        from ragtriage.pipeline.engine_qdrant import QdrantServerRetriever

        return QdrantServerRetriever(route, name, engine, kind=kind)
    from ragtriage.pipeline.engine_http import HTTPRetriever

    return HTTPRetriever(route, name, engine, kind=kind)


def _kind(route: str) -> Literal["bm25", "dense"]:
    return "bm25" if route.startswith("bm25") else "dense"
