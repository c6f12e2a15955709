"""Production engines as routes: build the `Retriever` of every route `[retrieval] route_engine` names.

One module per engine: `engine_elasticsearch.py` (Elasticsearch/OpenSearch `_search`),
`engine_qdrant.py` (an existing Qdrant server collection), `engine_http.py` (a generic JSON
retrieval endpoint such as Dify's or RAGFlow's). Keys come from environment variables only.
"""

from __future__ import annotations

from ragtriage.config import Settings
from ragtriage.errors import PipelineError
from ragtriage.pipeline.types import Retriever

LOCAL = "local"


def build_route_engines(settings: Settings) -> dict[str, tuple[str, Retriever]]:
    """Route name → (engine name, retriever) for every route whose `route_engine` is not `local`.

    Raises:
        ConfigError: a route names an engine without an `[engines.NAME]` table.
        PipelineError: an engine's client library is missing.
    """
    from ragtriage.pipeline.profiles import check_route_engines

    check_route_engines(settings, str(settings.config_file or "settings"))
    built: dict[str, Retriever] = {}
    routes: dict[str, tuple[str, Retriever]] = {}
    for route, name in settings.retrieval.route_engine.items():
        if name == LOCAL:
            continue
        if name not in built:
            built[name] = _build(route, name, settings)
        routes[route] = (name, built[name])
    return routes


def _build(route: str, name: str, settings: Settings) -> Retriever:
    engine = settings.engines[name]
    raise PipelineError(
        f"route {route}: engine '{name}' ({engine.type}) cannot be searched by this build yet; "
        "set the route back to 'local' in [retrieval] route_engine"
    )


def _kind(route: str) -> str:
    return "bm25" if route.startswith("bm25") else "dense"
